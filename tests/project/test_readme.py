"""Every shell block of the README and of the tutorials works as written, from a new shell where the venv is not
activated (issue 62: "a command shown to a user cannot rot").

The comment line before each ```bash block says how this file tests it (docs/development.md has the table):

- ``<!-- test: run -->``: run verbatim with ``bash -euo pipefail`` in a fresh copy of the project (tracked and new
  files as they are now), in page order, from a shell without the venv on PATH and without network;
- ``<!-- test: pipeline -->``: the one real-model block (docs/tutorials/your-judge.md), run verbatim in a throwaway
  git copy of the project with small sizes, every provider it names routed to the fake OpenAI-compatible server
  through the base-URL variables litellm reads, every other outbound HTTP(S) request sent to a dead proxy;
- ``<!-- test: after-pipeline -->``: run verbatim in that copy after it, in page order;
- ``<!-- test: server -->``: started in that copy, answered over HTTP, then stopped;
- ``<!-- test: ci (why) -->``: ``make repro`` and ``make test``, which CI runs: their targets must resolve
  (``make -n``);
- ``<!-- test: check (why) -->``: not run (a real provider, a server, annotators or minutes of the embedded model):
  checked statically, as every shell block of every other docs page is — bash syntax, every ``rubriclab`` command
  parses with the CLI's parser, every ``--set``/``--set-param``/``-S`` key is a params.yaml key, every ``make``
  target and ``.venv/bin/`` tool exists.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rubriclab.settings import Params
from rubriclab.testing import FakeOpenAIServer, shared_policy_checkpoint

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"  # where scripts/install.sh puts the tools the README calls
REMOTE_PROVIDERS = ("deepseek/", "openai/", "mistral/")
MODES = ("run", "pipeline", "after-pipeline", "server", "ci", "check")
NEEDS_REASON = ("ci", "check")

# Base-URL variables of litellm 1.110 for chat completions, as read in its source:
#   openai/   OPENAI_BASE_URL, then OPENAI_API_BASE  (llms/openai/common_utils.py, get_openai_credentials)
#   deepseek/ DEEPSEEK_API_BASE                      (litellm_core_utils/get_llm_provider_logic.py,
#                                                     llms/deepseek/chat/transformation.py)
#   mistral/  MISTRAL_AZURE_API_BASE                 (llms/mistral/chat/transformation.py,
#             _get_openai_compatible_provider_info; it fills api_base before main.py's _complete_mistral
#             would look at MISTRAL_API_BASE, so MISTRAL_API_BASE alone still reaches api.mistral.ai)
BASE_URL_VARS = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "DEEPSEEK_API_BASE", "MISTRAL_AZURE_API_BASE",
                 "MISTRAL_API_BASE")

# Small sizes so the run fits ~2 minutes on 2 cores; the block's own --set-param values come on top.
SMALL = {
    "data.premise.extraction": 12, "data.premise.audit": 8, "data.premise.heldout": 8,
    "discover.max_pairs": 3, "discover.k": 3, "discover.target_size": 6, "discover.max_levels": 1,
    "discover.pref_rank.pool": 3, "discover.pref_rank.max_pairs": 2, "discover.task_derived.k": 3,
    "audit.pool_size": 2, "audit.heldout_size": 3, "audit.runs": 2, "audit.paraphrases": 1,
    "audit.samples": 1, "audit.n_attacks": 1, "audit.n_boot": 100, "audit.n_boot_paired": 100,
    "llm.defaults.max_tokens": 48,
    # align trains the embedded policy on the CPU: one regime, two pairs per domain, one best-of-1 prompt
    "align.regimes": ["target"], "align.label.pairs": 2, "align.evaluate.prompts": 1, "align.evaluate.n": 1,
    "align.evaluate.max_new_tokens": 8,
    # the recorded-verdicts stages (no model call): fewer bootstrap resamples, and fewer label draws checking the
    # calibration intervals' coverage (200 of them were 13 of LLMBar Natural's 19 s; tests/calibrate cover the check)
    "recorded.n_boot": 100, "recorded.calibrate.coverage_draws": 20,
    # repair: one criterion per set, one attack on two dev and two held-out pairs (its attacker calls run on the
    # embedded model and were most of the block's time); drift, probe and align: one stealth run, one
    # counterfactual item, fewer bootstrap resamples
    "repair.dev_size": 2, "repair.heldout_size": 2, "repair.n_attacks": 1, "repair.max_criteria": 1,
    "repair.sweep.candidates": [1],
    # drift: the search and the seed only (the baselines' refiner calls on the embedded model were most of its time;
    # tests/test_drift_*.py cover them)
    "drift.methods": ["seed", "ours"], "drift.stealth.runs": 1, "drift.n_boot": 100, "probe.counterfactual.n_items": 1, "probe.n_boot": 1000,
    "align.n_boot": 100,
    # the roles the block leaves on the embedded model generate less: drift's refiner (nine 400-token rubric
    # rewrites were half the block's time), repair's attacker and the probe's generator; a cut-off reply is counted
    "llm.roles.refiner.max_tokens": 16, "llm.roles.attacker.max_tokens": 16, "llm.roles.generator.max_tokens": 16,
    # repair's attacker talks to one of the block's own remote models (the fake server): on the embedded model its
    # 33 calls were 109 s of a 406 s block (prefill of ~280-token prompts); the other roles stay embedded, so the
    # block still runs remote and embedded roles side by side
    "llm.roles.attacker.model": "openai/gpt-4o-mini",
}


def _copy_project(dest: Path) -> None:
    """What a clone of the working tree would hold: tracked and new (not ignored) files as they are now."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the working tree is skipped
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _shrink_params(path: Path) -> None:
    params = yaml.safe_load(path.read_text())
    for dotted, value in SMALL.items():
        *parents, leaf = dotted.split(".")
        node = params
        for key in parents:
            node = node[key]
        node[leaf] = value  # new where params.yaml leaves it at the schema's default (a role's own max_tokens)
    Params.of(params)  # a key the schema does not have (renamed, mistyped) fails here, naming it: update SMALL
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def _seed_policy_checkpoint(project: Path, tmp_path_factory) -> Path:
    """The embedded policy's plain checkpoint in the copy's git-ignored cache (``.rubriclab/models/<name>``, where the
    align stage looks), hard-linked from the session's one conversion (``shared_policy_checkpoint``, ~23 s on 2
    cores): a project whose demo ran before has it too. The conversion itself is tested in tests/align/test_align_policy.py
    with the same function the stage calls."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    model = params["llm"]["roles"]["policy"]["model"]
    assert model.startswith("local/"), f"the README block's policy is {model!r}; update _seed_policy_checkpoint"
    shared = shared_policy_checkpoint(tmp_path_factory, model)
    dest = project / ".rubriclab" / "models" / model.split("/", 1)[1]
    shutil.copytree(shared, dest, copy_function=os.link)
    return dest


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=readme-test", "-c", "user.email=readme-test@localhost",
                    "-c", "commit.gpgsign=false", *args], cwd=cwd, check=True, capture_output=True)



# -- the blocks ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    page: str      # relative to the project
    line: int      # of the opening fence
    lang: str
    body: str
    mode: str | None
    reason: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def readme_and_tutorials() -> list[Path]:
    """The pages whose every shell block must say how it is tested: the README and the tutorials."""
    return [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorials").glob("*.md"))]


def all_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


_MARKER = re.compile(r"<!--\s*test:\s*([a-z-]+)\s*(?:\((.*)\))?\s*-->", re.S)


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with the ``<!-- test: MODE (why) -->`` comment right before it, if any."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    rel = page.relative_to(ROOT).as_posix()
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w*)", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:j]) + "\n"
        mode, reason = None, ""
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        if k >= 0 and lines[k].strip().endswith("-->"):
            first = k
            while first > 0 and "<!--" not in lines[first]:
                first -= 1
            marker = _MARKER.search("\n".join(lines[first:k + 1]))
            if marker:
                mode, reason = marker.group(1), " ".join((marker.group(2) or "").split())
        out.append(Block(rel, start + 1, lang, body, mode, reason))
        i = j + 1
    return out


def shell_blocks(pages: list[Path]) -> list[Block]:
    return [b for p in pages for b in blocks(p) if b.lang in ("bash", "sh", "shell")]


def of_mode(mode: str) -> list[Block]:
    return [b for b in shell_blocks(readme_and_tutorials()) if b.mode == mode]


def _without_heredocs(text: str) -> str:
    """``text`` with the bodies of its here-documents dropped (they are input, not commands)."""
    out, end = [], None
    for line in text.replace("\\\n", " ").splitlines():
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        out.append(line)
        m = re.search(r"<<-?\s*(['\"]?)(\w+)\1", line)
        if m:
            end = m.group(2)
    return "\n".join(out)


_OPERATORS = {"|", "||", "&&", ";", "&", "(", ")"}
_REDIRECTS = {">", ">>", "<", "<<", ">&", "<&", "&>"}


def commands(block: str) -> list[list[str]]:
    """The block's simple commands as argv lists: continuation lines joined, comments, here-document bodies,
    redirections and leading ``NAME=value`` assignments dropped, pipelines and lists split."""
    out = []
    for line in _without_heredocs(block).splitlines():
        lex = shlex.shlex(line, posix=True, punctuation_chars=True)
        lex.whitespace_split, lex.commenters = True, "#"
        argv: list[str] = []
        skip = False
        for tok in list(lex) + [";"]:
            if skip:
                skip = False
                continue
            if tok in _OPERATORS or set(tok) <= set("|&;()"):
                while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
                    argv.pop(0)
                if argv:
                    out.append(argv)
                argv = []
            elif tok in _REDIRECTS or (set(tok) <= set("<>&") and tok):
                skip = True
                if argv and argv[-1].isdigit():
                    argv.pop()
            else:
                argv.append(tok)
    return out


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for m in re.finditer(r"^([A-Za-z0-9_.\- ]+):(?!=)", text, flags=re.M) for t in m.group(1).split()}


def _docs_reference():
    spec = importlib.util.spec_from_file_location("docs_reference_for_tests", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _set_keys(argv: list[str]) -> list[str]:
    keys = []
    for i, a in enumerate(argv):
        value = None
        if a in ("--set", "--set-param", "-S") and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith(("--set=", "--set-param=")):
            value = a.split("=", 1)[1]
        if value is not None:
            keys.append(value.split("=", 1)[0].strip())
    return keys


def static_problems(block: Block) -> list[str]:
    """What is wrong with ``block`` without running it."""
    from rubriclab.cli import build_parser

    problems = []
    syntax = subprocess.run(["bash", "-n"], input=block.body, capture_output=True, text=True)
    if syntax.returncode:
        problems.append(f"bash -n: {syntax.stderr.strip()}")
    ref = _docs_reference()
    keys = ref.documented_keys()
    targets = make_targets()
    for argv in commands(block.body):
        tool = argv[0]
        if tool == "make":
            missing = [t for t in argv[1:] if not t.startswith("-") and "=" not in t and t not in targets]
            if missing:
                problems.append(f"make target(s) {missing} not in the Makefile")
        if tool.startswith(".venv/bin/") and not (VENV_BIN / tool.removeprefix(".venv/bin/")).exists():
            optional = tool.endswith("optuna-dashboard")  # the docs extra, not the project's install
            if not optional:
                problems.append(f"{tool} is not installed by scripts/install.sh")
        if Path(tool).name == "rubriclab":
            try:
                build_parser().parse_args(argv[1:])
            except SystemExit as exc:
                if exc.code:
                    problems.append(f"`{shlex.join(argv)}` does not parse with rubriclab's CLI")
        if Path(tool).name in ("rubriclab", "dvc"):
            for key in _set_keys(argv):
                normalized = ref._normalize(key.split("."))
                if normalized is None or normalized not in keys:
                    problems.append(f"`{key}` (in `{shlex.join(argv)[:80]}`) is not a params.yaml key")
    return problems


def _require_venv() -> None:
    if not (VENV_BIN / "python").exists():
        pytest.fail(f"no {VENV_BIN.parent}: run `bash scripts/install.sh` (the README's commands use .venv/bin/)")


# -- every block says how it is tested, and is well formed ---------------------------------------------------------
def test_every_shell_block_of_the_readme_and_the_tutorials_says_how_it_is_tested():
    found = shell_blocks(readme_and_tutorials())
    assert any(b.page == "README.md" for b in found) and any(b.page.startswith("docs/tutorials/") for b in found)
    for b in found:
        assert b.mode in MODES, (f"{b.where()}: a shell block needs a `<!-- test: MODE -->` line before it, MODE one "
                                 f"of {', '.join(MODES)} (tests/project/test_readme.py says what each does)")
        if b.mode in NEEDS_REASON:
            assert b.reason, f"{b.where()}: `test: {b.mode}` says why it is not run: `<!-- test: {b.mode} (why) -->`"
    assert len(of_mode("pipeline")) == 1, "exactly one pipeline block (the tutorial's real-model run)"
    readme = [b for b in found if b.page == "README.md"]
    assert [b.mode for b in readme] == ["ci"] and "make repro" in readme[0].body and "make test" in readme[0].body


def test_every_shell_block_of_the_docs_is_well_formed():
    """Syntax, make targets, .venv tools, CLI verbs and flags, --set keys: for every shell block of every page,
    run or not."""
    _require_venv()
    problems = [f"{b.where()}: {p}" for b in shell_blocks(all_pages()) for p in static_problems(b)]
    assert not problems, "\n".join(problems)


def test_the_static_check_catches_a_rotten_command():
    bad = Block("x.md", 1, "bash", ".venv/bin/rubriclab audit --datasett demo\nmake no-such-target\n"
                                   ".venv/bin/dvc exp run -S audit.runz=3\n", "check", "x")
    problems = " ".join(static_problems(bad))
    assert "does not parse" in problems and "no-such-target" in problems and "audit.runz" in problems


def test_ci_blocks_resolve_as_make_targets():
    for b in of_mode("ci"):
        targets = [t for argv in commands(b.body) if argv[0] == "make" for t in argv[1:]]
        assert targets, f"{b.where()}: a ci block runs make targets"
        dry = subprocess.run(["make", "-n", *targets], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, f"{b.where()}: make -n {' '.join(targets)}\n{dry.stderr}"


def test_yaml_blocks_that_start_at_a_params_section_are_valid_params():
    from rubriclab.settings import Params

    sections = set(Params.model_fields)
    checked = 0
    for page in all_pages():
        for b in blocks(page):
            if b.lang not in ("yaml", "yml"):
                continue
            doc = yaml.safe_load(b.body)
            if isinstance(doc, dict) and doc and set(doc) <= sections:
                Params.of(doc, source=b.where())  # raises ConfigError naming the place
                checked += 1
    assert checked >= 5


def test_the_pipeline_block_exports_a_key_for_every_provider_it_uses(monkeypatch):
    import litellm

    for name in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    block = pipeline_block()
    exported = {a.partition("=")[0] for argv in commands(block) if argv[0] == "export" for a in argv[1:]}
    models = block_models(block)
    assert {m.split("/")[0] + "/" for m in models} == set(REMOTE_PROVIDERS)
    for model in sorted(models):
        needed = set(litellm.validate_environment(model=model)["missing_keys"])
        assert needed and needed <= exported, f"pipeline block: {model} needs {sorted(needed)} exported"


def pipeline_block() -> str:
    (block,) = of_mode("pipeline")
    return block.body


def block_models(block: str) -> set[str]:
    """The remote litellm model strings a block names."""
    providers = "|".join(map(re.escape, REMOTE_PROVIDERS))
    return set(re.findall(rf"\b(?:{providers})[\w.\-]+", block))


def _shell_env(tmp_path: Path, project: Path, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",  # no venv, no pyenv shims: a new shell on a plain machine
        "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": str(tmp_path),
        # Anything but the fake server (127.0.0.1) goes to a closed port: no request leaves the machine.
        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DVC_NO_ANALYTICS": "1",
        # The venv's editable install points at this checkout's src/; the copy runs its own sources,
        # as a clone with its own install would (and is immune to edits made here meanwhile).
        "PYTHONPATH": str(project / "src"),
        # the worker's share of the cores (tests/conftest.py), as any other stage the tests start gets it
        **{var: os.environ[var] for var in ("RUBRICLAB_THREADS", "OMP_NUM_THREADS") if var in os.environ},
        **(extra or {}),
    }


def _project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    _copy_project(project)
    assert (project / ".dvc" / "config").is_file() and (project / "scripts" / "stage").is_file()
    # The copy uses the project's installed venv, as a checkout where `make install` ran would.
    (project / ".venv").symlink_to(ROOT / ".venv")
    return project


def _run_block(b: Block, project: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    t0 = time.monotonic()
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", b.body], cwd=project, env=env, capture_output=True,
                         text=True, timeout=timeout)
    log = f"--- stdout\n{run.stdout[-6000:]}\n--- stderr\n{run.stderr[-6000:]}"
    assert run.returncode == 0, f"{b.where()} ({b.mode}) failed (rc {run.returncode}, {time.monotonic() - t0:.0f}s)\n{log}"
    return run


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_run_blocks_run_verbatim_in_a_fresh_copy(tmp_path):
    """The tutorials' cheap blocks (recorded verdicts, a table, MLflow traces, calibration, the leaderboard gate), in
    page order, in one fresh copy of the project."""
    _require_venv()
    runnable = of_mode("run")
    assert runnable, "no `test: run` block"
    project = _project_copy(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = _shell_env(tmp_path, project, home)
    for b in runnable:
        _run_block(b, project, env, timeout=240)
    assert (project / "outputs/recorded_cli/llmbar_natural/card.md").is_file()
    assert (project / "outputs/recorded_cli/my_verdicts/card.md").is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _serve_block(b: Block, project: Path, env: dict[str, str], timeout: float = 120) -> None:
    """Start ``b`` (a server), wait until its URL answers, stop it with SIGINT. When its default port (5000) is taken
    on this machine, the same command gets ``--port`` of a free one."""
    body = b.body.strip()
    port = 5000
    if not _port_free(port):
        port = _free_port()
        assert "\n" not in body and "--port" not in body, f"{b.where()}: port 5000 taken and the block is not one command"
        body = f"{body} --port {port}"
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", body], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline, answered = time.monotonic() + timeout, False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    answered = r.status == 200
                    break
            except OSError:
                time.sleep(1)
        assert answered, f"{b.where()}: nothing answered on port {port} (rc {proc.poll()})"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            out = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out = proc.communicate()[0]
    assert f"127.0.0.1:{port}" in out, f"{b.where()}: the server did not print its address\n{out[-3000:]}"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_pipeline_block_and_the_blocks_after_it_run_verbatim(tmp_path, tmp_path_factory):
    _require_venv()
    block = pipeline_block()
    project = _project_copy(tmp_path)
    _shrink_params(project / "params.yaml")
    policy = _seed_policy_checkpoint(project, tmp_path_factory)
    _git(project, "init", "-q", "-b", "main")
    (project / ".git" / "info" / "exclude").write_text("/.venv\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "copy of the working tree")
    home = tmp_path / "home"
    home.mkdir()

    with FakeOpenAIServer() as server:
        env = _shell_env(tmp_path, project, home, {var: server.url for var in BASE_URL_VARS})
        t0 = time.monotonic()
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=project, env=env,
                             capture_output=True, text=True, timeout=780)
        wall = time.monotonic() - t0
        served = server.stats()
        log = f"--- stdout\n{run.stdout[-6000:]}\n--- stderr\n{run.stderr[-6000:]}"
        assert run.returncode == 0, f"the pipeline block failed (rc {run.returncode}, {wall:.0f}s)\n{log}"

        dataset = yaml.safe_load((project / "params.yaml").read_text())["discover"]["datasets"][0]
        for rel in ("metrics/data.json", f"metrics/discover/{dataset}.json", f"metrics/audit/{dataset}.json",
                    f"outputs/audit/{dataset}/card.md", f"outputs/audit/{dataset}/card.json",
                    f"outputs/rubrics/{dataset}/discovered.json"):
            assert (project / rel).is_file(), f"{rel} missing after the pipeline block\n{log}"
        params = yaml.safe_load((project / "params.yaml").read_text())
        assert params["llm"]["roles"]["extractor"]["model"] == "deepseek/deepseek-chat"  # the --set-param took effect
        assert params["llm"]["budget"]["cost_usd"] == 5
        card = (project / f"outputs/audit/{dataset}/card.md").read_text()
        assert "deepseek/deepseek-chat" in card, "the audit card should name the judge models it used"

        # the align stage took the seeded checkpoint as it was (a new conversion would have replaced the folder)
        assert (policy / "config.json").stat().st_nlink >= 2, "the align stage converted the policy again"

        with sqlite3.connect(project / ".rubriclab" / "calls.sqlite") as db:
            rows = db.execute("SELECT model, status, COALESCE(retries, 0), COALESCE(error, '') FROM calls").fetchall()
        remote = [r for r in rows if r[0].startswith(REMOTE_PROVIDERS)]
        assert {r[0] for r in remote} == block_models(block), "every model the block sets should have been called"
        failed = [r for r in remote if r[1] != "ok"]
        assert not failed, f"{len(failed)} remote calls failed, e.g. {failed[:3]}"
        # Each recorded remote call is one request to the fake server (no faults, so no retries): nothing
        # was answered by anyone else, and nothing reached the fake server that the ledger does not show.
        assert served["completions_ok"] == served["requests"] == sum(1 + r[2] for r in remote)

        # what the tutorials do next, in the same project, against the same fake providers
        for b in of_mode("after-pipeline"):
            _run_block(b, project, env, timeout=300)
        for b in of_mode("server"):
            _serve_block(b, project, env)
