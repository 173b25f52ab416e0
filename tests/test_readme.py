"""The README's shell blocks work as written, from a new shell where the venv is not activated.

The "Real models" block is run verbatim in a throwaway git copy of the project, with every provider it
names routed to the fake OpenAI-compatible server through the base-URL variables litellm reads, and
every other outbound HTTP(S) request sent to a dead proxy.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from rubriclab.testing import FakeOpenAIServer, shared_policy_checkpoint

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"  # where scripts/install.sh puts the tools the README calls
REAL_MODELS = "Real models"
REMOTE_PROVIDERS = ("deepseek/", "openai/", "mistral/")

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
    # the recorded-verdicts stages (no model call): fewer bootstrap resamples
    "recorded.n_boot": 100,
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


def bash_blocks(text: str) -> list[tuple[str, str]]:
    """(section heading, body) of every ```bash block, in order; headings inside code blocks don't count."""
    out, heading, fence, body = [], "", None, []
    for line in text.splitlines(keepends=True):
        if fence is None:
            if line.startswith("```"):
                fence, body = line[3:].strip(), []
            elif m := re.match(r"#{1,6} (.+)", line):
                heading = m.group(1).strip()
        elif line.rstrip() == "```":
            if fence == "bash":
                out.append((heading, "".join(body)))
            fence = None
        else:
            body.append(line)
    return out


def commands(block: str) -> list[list[str]]:
    """The block's commands as argv lists (continuation lines joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    return [argv for line in joined.splitlines() if (argv := shlex.split(line, comments=True))]


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {t for m in re.finditer(r"^([A-Za-z0-9_.\- ]+):(?!=)", text, flags=re.M) for t in m.group(1).split()}


def real_models_block() -> str:
    blocks = [body for heading, body in bash_blocks((ROOT / "README.md").read_text()) if heading == REAL_MODELS]
    assert len(blocks) == 1, f"README.md: expected one bash block under '## {REAL_MODELS}', found {len(blocks)}"
    return blocks[0]


def block_models(block: str) -> set[str]:
    """The remote litellm model strings a block names."""
    providers = "|".join(map(re.escape, REMOTE_PROVIDERS))
    return set(re.findall(rf"\b(?:{providers})[\w.\-]+", block))


def _require_venv() -> None:
    if not (VENV_BIN / "python").exists():
        pytest.fail(f"no {VENV_BIN.parent}: run `bash scripts/install.sh` (the README's commands use .venv/bin/)")


def test_bash_blocks_name_existing_make_targets_and_venv_tools():
    _require_venv()
    blocks = bash_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 3 and REAL_MODELS in {h for h, _ in blocks}
    targets = make_targets()
    for heading, body in blocks:
        for argv in commands(body):
            if argv[0] == "make":
                missing = [t for t in argv[1:] if not t.startswith("-") and "=" not in t and t not in targets]
                assert not missing, f"README '{heading}': make target(s) {missing} not in the Makefile"
            elif argv[0].startswith(".venv/bin/"):
                assert (VENV_BIN / argv[0].removeprefix(".venv/bin/")).exists(), f"README '{heading}': {argv[0]}"


def test_real_models_block_exports_a_key_for_every_provider_it_uses(monkeypatch):
    import litellm

    for name in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    block = real_models_block()
    exported = {a.partition("=")[0] for argv in commands(block) if argv[0] == "export" for a in argv[1:]}
    models = block_models(block)
    assert {m.split("/")[0] + "/" for m in models} == set(REMOTE_PROVIDERS)
    for model in sorted(models):
        needed = set(litellm.validate_environment(model=model)["missing_keys"])
        assert needed and needed <= exported, f"README '{REAL_MODELS}': {model} needs {sorted(needed)} exported"


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
        # a role's own setting may be new (it took llm.defaults'); any other key must exist
        assert leaf in node or parents[:2] == ["llm", "roles"], f"params.yaml has no {dotted}; update SMALL in {__file__}"
        node[leaf] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def _seed_policy_checkpoint(project: Path, tmp_path_factory) -> Path:
    """The embedded policy's plain checkpoint in the copy's git-ignored cache (``.rubriclab/models/<name>``, where the
    align stage looks), hard-linked from the session's one conversion (``shared_policy_checkpoint``, ~23 s on 2
    cores): a project whose demo ran before has it too. The conversion itself is tested in tests/test_align_policy.py
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


@pytest.mark.slow
@pytest.mark.timeout(840)
def test_real_models_block_runs_verbatim_from_a_shell_without_the_venv(tmp_path, tmp_path_factory):
    _require_venv()
    block = real_models_block()
    project = tmp_path / "project"
    _copy_project(project)
    assert (project / ".dvc" / "config").is_file() and (project / "scripts" / "stage").is_file()
    _shrink_params(project / "params.yaml")
    policy = _seed_policy_checkpoint(project, tmp_path_factory)
    # The copy uses the project's installed venv, as a checkout where `make install` ran would.
    (project / ".venv").symlink_to(ROOT / ".venv")
    _git(project, "init", "-q", "-b", "main")
    (project / ".git" / "info" / "exclude").write_text("/.venv\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "copy of the working tree")
    home = tmp_path / "home"
    home.mkdir()

    with FakeOpenAIServer() as server:
        env = {
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
            **{var: server.url for var in BASE_URL_VARS},
        }
        t0 = time.monotonic()
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=project, env=env,
                             capture_output=True, text=True, timeout=780)
        wall = time.monotonic() - t0
        served = server.stats()
    log = f"--- stdout\n{run.stdout[-6000:]}\n--- stderr\n{run.stderr[-6000:]}"
    assert run.returncode == 0, f"README '{REAL_MODELS}' block failed (rc {run.returncode}, {wall:.0f}s)\n{log}"

    dataset = yaml.safe_load((project / "params.yaml").read_text())["discover"]["datasets"][0]
    for rel in ("metrics/data.json", f"metrics/discover/{dataset}.json", f"metrics/audit/{dataset}.json",
                f"outputs/audit/{dataset}/card.md", f"outputs/audit/{dataset}/card.json",
                f"outputs/rubrics/{dataset}/discovered.json"):
        assert (project / rel).is_file(), f"{rel} missing after the README block\n{log}"
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["llm"]["roles"]["extractor"]["model"] == "deepseek/deepseek-chat"  # the --set-param took effect
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
