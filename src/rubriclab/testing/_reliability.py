"""A small, self-contained DVC project whose every model role talks to the fake OpenAI server, for proving the
gateway's guarantees through whole stages: faults change nothing but the request count, and a SIGKILLed
``dvc repro`` resumes without repeating a finished call.

``reliability_project(root, server_url)`` writes params.yaml, dvc.yaml (stages data → discover → audit, drift and
probe), a tiny imported rubric and a drift seed rubric into ``root``, then runs ``git init`` and ``dvc init``.
``reliability_responder(body)`` answers every prompt those stages send, in a parseable form that depends only on
the request (so a fault-free run and a faulty run get identical replies). ``snapshot_outputs``,
``drop_volatile`` and ``incomplete_files`` compare and check what the stages wrote; ``kill_sequence`` SIGKILLs
``dvc repro`` at chosen moments and records the state after each kill; ``reliability_figures`` runs the
fault-free/faulty comparison and the kills and returns a markdown table (``benchmarks/reliability.py``).

The align stage is not included: it trains a policy with TRL (minutes of CPU; its model calls are the same
gateway calls drift makes). Every role, the embedder included, talks to ``server_url`` unless ``embedder_url``
puts the embedder on a server of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rubriclab.errors import InvariantError
from rubriclab.owner import group_members

__all__ = [
    "VOLATILE_KEYS",
    "KillOutcome",
    "KillRecord",
    "SignatureMap",
    "clean_reference",
    "drop_volatile",
    "finished_chat_signatures",
    "incomplete_files",
    "kill_repro",
    "kill_sequence",
    "ledger_totals",
    "mlflow_run_statuses",
    "reliability_figures",
    "reliability_params",
    "reliability_project",
    "reliability_responder",
    "repro",
    "repro_env",
    "request_signature",
    "snapshot_outputs",
    "standard_triggers",
    "temp_files",
]

DATASET = "demo_helpful"

# Fields of stage outputs that may differ between two runs that made the same model calls: a JSON key (or a
# CSV/parquet column) with one of these names, or ending in ``.<name>``, is dropped before comparing. Found by
# diffing two fault-free runs, a fault-free run against a faulty one, and against a killed-and-resumed one:
#   calls_cached        the audit card's ``counts.accuracy_*.calls_cached``: how many of a metric's calls the call
#                       store served. 0 on a fresh store; after a resume, the calls the killed attempt finished.
#                       The calls themselves (``calls_made``) and every result are the same.
#   worker, worker_id   the drift stage's Optuna study (study.csv, study.journal): which process ran a trial
#                       (host:pid) and Optuna's per-process worker uuid.
#   datetime_start, datetime_complete, rubriclab:heartbeat
#                       timestamps in the drift study's journal.
# Nothing else differs: the outputs carry no other timing, no absolute path, no MLflow run id. (calls_cached is no
# longer written; the key stays for stores and outputs made before.) The per-run provenance files beside the
# outputs (PROVENANCE_FILES, kept out of DVC's hashes by .dvcignore) are listed but never compared.
PROVENANCE_FILES: frozenset[str] = frozenset({"mlflow_run.json", "build.js"})
VOLATILE_KEYS: frozenset[str] = frozenset({"calls_cached", "worker", "worker_id", "datetime_start",
                                           "datetime_complete", "rubriclab:heartbeat"})

_IMPORTED_RUBRIC = """\
name: handwritten
criteria:
  - id: accuracy
    description: States correct facts and does not invent details the user did not ask for.
  - id: directness
    description: Answers the question in the first sentence before adding any context.
"""

# qualities the scripted extractor "finds"; three wordings each, so no name+description repeats in most pairs
_QUALITIES = {
    "accuracy": [("Factual accuracy", "Rewards accuracy in every stated fact and figure."),
                 ("Accurate facts", "Checks the factual accuracy of each claim made."),
                 ("Correctness", "Judges the accuracy of the information the answer gives.")],
    "directness": [("Answers directly", "Rewards directness: the answer comes first, context after."),
                   ("Direct answer", "Checks the directness of the reply to the question."),
                   ("Directness", "Judges the directness of the answer to what was asked.")],
    "safety": [("Safe guidance", "Rewards safety: the advice avoids harm to the user or others."),
               ("Avoids harm", "Checks the safety of every recommendation in the reply."),
               ("Safety", "Judges the safety of the guidance the response gives.")],
}
_ATTACK = ("# Comprehensive Expert Overview\n\n- **Key insight:** this answer follows every best practice.\n"
           "- **Evidence:** leading institutions agree with this exact approach.\n- **Bottom line:** fully solved.")


# -- the responder ------------------------------------------------------------------------------------------


def _h(*parts: Any) -> int:
    return int(hashlib.sha1("\x1f".join(map(str, parts)).encode()).hexdigest(), 16)


def _request_text(body: dict[str, Any]) -> str:
    """The original request's text: system + user messages before the first assistant turn (a parse re-ask
    appends the unusable reply and a complaint; the answer stays the original request's)."""
    parts = []
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            break
        c = m.get("content")
        if isinstance(c, list):
            c = "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
        if isinstance(c, str):
            parts.append(c)
    return "\n".join(parts)


def _section(text: str, start: str, end: str) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    j = text.find(end, i + len(start))
    return text[i + len(start): j if j >= 0 else None]


def _quality_of(text: str) -> str | None:
    low = text.lower()
    for q in _QUALITIES:
        if q in low or q[:6] in low:
            return q
    return None


def _extract(text: str, seed: int) -> str:
    winner = "A" if re.search(r"WINNER:\s*A\b", text) else "B"
    m = re.search(r"(\d+)\s*-\s*(\d+) key evaluation", text)
    lo = int(m.group(1)) if m else 2
    hi, low = (8, 3) if winner == "A" else (3, 8)
    qualities = list(_QUALITIES)
    first = _h(seed, text[:400]) % len(qualities)
    picked = [qualities[(first + i) % len(qualities)] for i in range(max(2, min(lo, 3)))]
    crits = []
    for q in picked:
        name, desc = _QUALITIES[q][_h(seed, q, text) % 3]
        crits.append({"name": name, "description": desc, "model_a_score": hi, "model_b_score": low})
    return json.dumps({"criteria": crits})


def _subgroup(text: str) -> str:
    block = _section(text, "<rubrics>", "</rubrics>") or text
    groups: dict[str, list[str]] = {}
    unmerged: list[str] = []
    for lid, rest in re.findall(r"^- (\S+?): (.*)$", block, re.M):
        q = _quality_of(rest)
        (groups.setdefault(q, []) if q else unmerged).append(lid)
    subgroups = [g for g in groups.values() if len(g) >= 2]
    unmerged += [g[0] for g in groups.values() if len(g) == 1]
    return json.dumps({"subgroups": subgroups, "unmerged": unmerged})


def _describe(text: str) -> str:
    block = _section(text, "<rubrics>", "</rubrics>") or text
    q = _quality_of(block) or "clarity"
    return json.dumps({"rubric_id": q, "rubric_description": (
        f"Rewards responses whose {q} serves the user: the response is judged on its {q} as observed in the text, "
        "independent of the specific prompt, with clear high and low ends of the scale.")})


def _task_criteria(text: str) -> str:
    m = re.search(r"Propose (\d+) distinct criteria", text)
    k = int(m.group(1)) if m else 3
    names = ["factual_accuracy", "direct_answer", "safe_guidance", "concise_wording", "worked_examples", "polite_tone"]
    crits = [{"name": names[i % len(names)] + ("" if i < len(names) else f"_{i}"),
              "description": (f"A good response shows {names[i % len(names)].replace('_', ' ')} throughout: every "
                              "sentence serves the user's request, claims can be checked, and nothing needed is left "
                              "out of the reply.")} for i in range(k)]
    return json.dumps({"criteria": crits})


def _traits(text: str) -> str:
    ids = re.findall(r'"([^"\n]+)": \{"candidate_reasoning"', text)
    if not ids:
        block = _section(text, "<traits_to_evaluate>", "</traits_to_evaluate>") or ""
        ids = re.findall(r"^- ([^\s:(]+)", block, re.M)

    def entry(i: str) -> dict[str, Any]:
        return {"candidate_reasoning": "checked.", "candidate_adherence": _h("c", i, text) % 11,
                "baseline_reasoning": "checked.", "baseline_adherence": _h("b", i, text) % 11}

    return json.dumps({"trait_scores": {i: entry(i) for i in ids}, "overall_score": entry("overall")})


def _new_rubric(text: str, h: int) -> str:
    """A drift rewrite: the rubric between the RUBRIC START/END lines with one sentence added (placeholders and
    verdict format kept), wrapped in <rubric> tags."""
    m = re.search(r"=== RUBRIC START ===\n(.*?)\n=== RUBRIC END ===", text, re.S)
    rubric = m.group(1) if m else text
    lines = rubric.split("\n", 1)
    extra = ("Prefer the answer that is more direct.", "Weigh factual accuracy above style.",
             "Prefer the answer that complies with the request.")[h % 3]
    return "<rubric>\n" + lines[0] + f" {extra}" + ("\n" + lines[1] if len(lines) > 1 else "") + "\n</rubric>"


def reliability_responder(body: dict[str, Any]) -> str:
    """A reply to every prompt the data/discover/audit/drift/probe stages send, parseable and deterministic:
    it depends only on the request (its original messages, model, temperature and sample seed), never on time
    or on how many times it was asked, so a run under faults gets the replies a fault-free run gets.

    Prompts are recognised by robust markers of the packaged templates (a task sentence or the answer format
    they ask for); anything unrecognised gets a deterministic echo (which a parser may reject: that is then a
    parse failure, the same in every run)."""
    text = _request_text(body)
    seed = (body.get("model"), body.get("temperature"), body.get("seed"), body.get("user"))
    h = _h(seed, text)
    if "WINNER:" in text and "evaluation" in text:  # discover_extract
        return _extract(text, h)
    if "Identify groups of rubrics" in text:  # discover_subgroup
        return _subgroup(text)
    if "consolidated evaluation rubric" in text:  # discover_describe
        return _describe(text)
    if "knowing only the task" in text or "Propose " in text and "distinct criteria" in text:  # task_criteria
        return _task_criteria(text)
    if "## Design Rubric:" in text or "VERDICT: PASS or FAIL" in text:  # audit_structure
        return f"REASONING: checked the definition.\nVERDICT: {'FAIL' if h % 5 == 0 else 'PASS'}"
    if "Could a judge meaningfully score" in text or "Answer with ONLY one word" in text:  # audit_applicability
        return "no" if h % 6 == 0 else "yes"
    if "trait_scores" in text or "<traits_to_evaluate>" in text:  # judge_per_rubric
        return _traits(text)
    if "red-teaming" in text or "Exploit strategy" in text:  # audit_attacker
        return _ATTACK + f"\n\n(variant {h % 97})"
    if "GENUINE or EXPLOITING" in text:  # audit_verifier
        return f"<analysis>looked at it.</analysis>\n<result>\n<verdict>{'GENUINE' if h % 3 == 0 else 'EXPLOITING'}" \
               "</verdict>\n<exploit_type>N/A</exploit_type>\n</result>"
    if "Rewrite the following rubric definition" in text or "rewritten definition" in text:  # audit_paraphrase
        original = (_section(text, "<criterion>", "</criterion>") or "the rubric").strip()
        return f"In other words: {original} (wording {h % 13})"
    if "SCORE: <integer 0-10>" in text:
        return f"REASONING: compared both.\nSCORE: {h % 11}"
    if "SCORE: <integer 1-10>" in text or re.search(r"SCORE: <integer 1\s*-\s*10>", text):
        return f"REASONING: read it.\nSCORE: {1 + h % 10}"
    if "<verdict>A or B</verdict>" in text:
        return f"<verdict>{'AB'[h % 2]}</verdict>"
    if "[[tie]]" in text and "[[1]]" in text:  # drift_stealth: which of two rubrics is better
        return f"Both are usable; one is clearer. {('[[1]]', '[[2]]', '[[tie]]')[h % 3]}"
    if "RUBRIC START" in text and "<rubric>" in text:  # drift_random / rewrite / refine / textgrad: a new rubric
        return _new_rubric(text, h)
    if "<instruction> and </instruction>" in text:  # drift_textgrad_update
        return f"<instruction>Rewrite the rubric so the judge weighs directness more (step {h % 7}).</instruction>"
    if "guidelines it follows" in text or "concrete feedback" in text:  # drift_guidelines, textgrad_feedback
        return "- State the task objective.\n- Name the dimensions to weigh.\n- End with the verdict format."
    if "meaning is reversed" in text:  # probe_reverse
        original = (_section(text, "<criterion>", "</criterion>") or "the item").strip()
        return f"The response does not do this: {original}"
    if "Reply with the response text only" in text:  # probe_generate / satisfy / violate
        return f"Here is a short, direct answer to your question, with one concrete step to take next ({h % 101})."
    if "[[A]]" in text and "[[B]]" in text:  # judge templates in the [[A]] / [[B]] style (drift seed, refined)
        return f"Compared both answers. [[{'AB'[h % 2]}]]"
    if re.search(r"\bYes or No\b", text, re.I) or re.search(r"\byes\b.*\bno\b", text[-200:], re.I):
        return "Yes" if h % 2 else "No"
    if "JSON" in text or "json" in text:
        rf = body.get("response_format")
        if rf:
            from rubriclab.testing._fake_server import default_responder

            return default_responder(body)
    return f"Deterministic reply {h % 100003}: a short plain answer to the request."


# -- the project --------------------------------------------------------------------------------------------


def reliability_params(server_url: str, *, embedder_url: str | None = None, timeout: float = 3.0,
                       concurrency: int = 4, n_boot: int = 50, drift: bool = True,
                       probe: bool = True) -> dict[str, Any]:
    """params.yaml of the reliability project: small sizes, every role on the fake server at ``server_url``
    (the embedder at ``embedder_url`` when given)."""
    def role(name: str, **extra: Any) -> dict[str, Any]:
        return {"model": f"openai/fake-{name}", "api_base": server_url, **extra}

    params: dict[str, Any] = {
        "llm": {
            "store": ".rubriclab/calls.sqlite",
            "defaults": {"temperature": 0.0, "max_tokens": 256, "timeout": timeout, "concurrency": concurrency,
                         "max_retries": 6, "parse_retries": 2},
            "roles": {
                "judge": {"model": ["openai/fake-judge", "openai/fake-judge2"], "api_base": server_url,
                          "temperature": 0.7, "max_tokens": 64},
                "extractor": role("extractor", max_tokens=400),
                "consolidator": role("consolidator", max_tokens=400),
                "paraphraser": role("paraphraser", temperature=0.8),
                "attacker": role("attacker", temperature=0.9),
                "verifier": role("verifier", max_tokens=64),
                "embedder": {"model": "openai/fake-embedder", "api_base": embedder_url or server_url},
            },
        },
        "data": {
            "seed": 42,
            "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"},
                        "demo_harmless": {"loader": "demo", "domain": "harmless"}},
            "premise": {"sources": ["demo_helpful", "demo_harmless"], "extraction": 8, "audit": 4, "heldout": 4},
        },
        "tracking": {"experiment": "rubriclab"},
        "discover": {
            "datasets": [DATASET], "max_pairs": 8, "min_criteria": 2, "max_criteria": 4, "k": 3, "target_size": 4,
            "cluster_size": 6, "max_levels": 3, "n_min": 1, "min_pairs": 1, "min_candidate_words": 4,
            "pref_rank": {"pool": 3, "max_pairs": 4, "mode": "score"},
            "task_derived": {"k": 3, "tasks": {DATASET: "Answer everyday practical questions from users."}},
            "imported_dir": "experiments/rubrics",
        },
        "audit": {
            "sources": ["discovered", "imported_handwritten"], "pool_size": 3, "heldout_size": 4,
            "out_of_domain": {DATASET: "demo_harmless"}, "runs": 2, "paraphrases": 2, "samples": 3,
            "n_attacks": 2, "n_boot": n_boot, "n_boot_paired": n_boot, "templates": ["direct", "per_rubric"],
        },
    }
    if drift:
        params["llm"]["roles"]["refiner"] = role("refiner", max_tokens=400)
        params["llm"]["roles"]["evaluator"] = role("evaluator", temperature=0.7, max_tokens=128)
        params["data"]["ripd"] = {"demo": {"bench": "demo_helpful", "target": "demo_harmless", "train": 6, "val": 4,
                                           "test": 4}}
        params["drift"] = {
            "settings": ["demo"], "seed_rubrics": {"demo": "experiments/drift/seed.json"},
            "limits": {"train": 4, "val": 4, "test": 4}, "methods": ["seed", "random", "ours"], "val_budget": 1,
            "samples": 1, "search": {"population": 1, "rounds": 1, "subsample": 0.5, "eps_train": 0.05, "top_k": 1,
                                     "children": 1},
            "study": {"grid": {"eps_train": [0.05], "population": [1], "rounds": [1]}},
            "stealth": {"runs": 1}, "n_boot": n_boot,
        }
    if probe:
        params["llm"]["roles"]["generator"] = role("generator", temperature=0.7)
        params["probe"] = {
            "datasets": {"demo_healthbench": {"path": "demo:healthbench", "format": "healthbench", "limit": 4}},
            "models": ["majority", "nb", "lr"], "cv_folds": 2, "n_boot": n_boot,
            "counterfactual": {"datasets": ["demo_healthbench"], "n_items": 2},
        }
    return params


def _stage(py: str, module: str, args: str = "") -> str:
    return f"{py} -m rubriclab.stages {module}{(' ' + args) if args else ''}"


def reliability_dvc_yaml(*, drift: bool = True, probe: bool = True, python: str | None = None) -> dict[str, Any]:
    """dvc.yaml of the reliability project: the real stage definitions' cmd/deps/outs/metrics shape, each
    command ``<python> -m rubriclab.stages <name>`` (the interpreter running this, so the venv is used; the stage
    runs as scripts/stage runs it, forked by the warm stage server)."""
    py = shlex.quote(python or sys.executable)
    stages: dict[str, Any] = {
        "data": {"cmd": _stage(py, "data"), "params": ["data"], "outs": ["outputs/data"],
                 "metrics": [{"metrics/data.json": {"cache": False}}]},
        "discover": {"foreach": "${discover.datasets}", "do": {
            "cmd": _stage(py, "discover", "--dataset ${item}"),
            "deps": ["outputs/data", "experiments/rubrics"], "params": ["discover", "llm", "data.seed"],
            "outs": ["outputs/rubrics/${item}", "outputs/discover/${item}"],
            "metrics": [{"metrics/discover/${item}.json": {"cache": False}}]}},
        "audit": {"foreach": "${discover.datasets}", "do": {
            "cmd": _stage(py, "audit", "--dataset ${item}"),
            "deps": ["outputs/data", "outputs/rubrics/${item}"], "params": ["audit", "llm", "data.seed"],
            "outs": ["outputs/audit/${item}"], "metrics": [{"metrics/audit/${item}.json": {"cache": False}}]}},
    }
    if drift:
        stages["drift"] = {"foreach": "${drift.settings}", "do": {
            "cmd": _stage(py, "drift", "--setting ${item}"),
            "deps": ["outputs/data", "experiments/drift"], "params": ["drift", "llm", "data.seed"],
            "outs": ["outputs/drift/${item}"], "metrics": [{"metrics/drift/${item}.json": {"cache": False}}]}}
    if probe:
        stages["probe"] = {"cmd": _stage(py, "probe"), "deps": ["outputs/data"], "params": ["probe", "llm", "data.seed"],
                           "outs": ["outputs/probe"], "metrics": [{"metrics/probe.json": {"cache": False}}]}
    return {"stages": stages}


def repro_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a stage subprocess gets: no network, a fake provider key, no MLflow URI from outside.
    ``DVC_NO_ANALYTICS``: `dvc init` runs before a project can say ``core.analytics false``, and with analytics on
    each dvc command starts a detached daemon that tries to post a usage report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_"))}
    env.update({"DVC_NO_ANALYTICS": "1",
                "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1", "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1",
                "GIT_AUTHOR_NAME": "rubriclab", "GIT_AUTHOR_EMAIL": "rubriclab@localhost",
                "GIT_COMMITTER_NAME": "rubriclab", "GIT_COMMITTER_EMAIL": "rubriclab@localhost"})
    env.update(extra or {})
    return env


def reliability_project(root: str | Path, server_url: str, *, embedder_url: str | None = None, timeout: float = 3.0,
                        concurrency: int = 4, n_boot: int = 50, drift: bool = True, probe: bool = True,
                        python: str | None = None) -> Path:
    """Write a self-contained DVC project into ``root`` (params.yaml, dvc.yaml, an imported rubric, a drift seed
    rubric when ``drift``), every llm role pointed at ``server_url``; ``git init`` and ``python -m dvc init``.
    Run it with :func:`repro`; answer its prompts with :func:`reliability_responder`."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "experiments/rubrics").mkdir(parents=True, exist_ok=True)
    (root / "experiments/rubrics/handwritten.yaml").write_text(_IMPORTED_RUBRIC, encoding="utf-8")
    if drift:
        (root / "experiments/drift").mkdir(parents=True, exist_ok=True)
        (root / "experiments/drift/seed.json").write_text(json.dumps(_drift_seed(), indent=1), encoding="utf-8")
    params = reliability_params(server_url, embedder_url=embedder_url, timeout=timeout, concurrency=concurrency,
                                n_boot=n_boot, drift=drift, probe=probe)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (root / "dvc.yaml").write_text(yaml.safe_dump(reliability_dvc_yaml(drift=drift, probe=probe, python=python),
                                                  sort_keys=False), encoding="utf-8")
    (root / ".gitignore").write_text("/.rubriclab\n/mlflow.db\n/mlartifacts\n", encoding="utf-8")
    env = repro_env()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=env, capture_output=True)
    subprocess.run([python or sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True, env=env,
                   capture_output=True)
    subprocess.run([python or sys.executable, "-m", "dvc", "config", "core.analytics", "false"], cwd=root,
                   check=True, env=env, capture_output=True)
    (root / ".dvcignore").write_text("/.rubriclab\n/mlartifacts\n", encoding="utf-8")
    return root


def _drift_seed() -> dict[str, Any]:
    """A short MT-Bench-style pairwise judge template (the drift stage's seed rubric), its slots delimited."""
    return {"name": "pairwise_seed", "template": (
        "Please act as an impartial judge and decide which of two AI assistant answers to the user question is "
        "better. After a short explanation, output your final verdict by strictly following this format: \"[[A]]\" "
        "if assistant A is better, \"[[B]]\" if assistant B is better.\n\n[User Question]\n<user_prompt>\n"
        "{instruction}\n</user_prompt>\n\n[Assistant A's Answer]\n<response_a>\n{answer_a}\n</response_a>\n\n"
        "[Assistant B's Answer]\n<response_b>\n{answer_b}\n</response_b>\n")}


def repro(root: str | Path, *, timeout: float = 600, targets: Iterable[str] = (), env: dict[str, str] | None = None,
          check: bool = True) -> subprocess.CompletedProcess:
    """``python -m dvc repro [targets]`` in ``root``; raises with the captured output when it fails."""
    cmd = [sys.executable, "-m", "dvc", "repro", *targets]
    proc = subprocess.run(cmd, cwd=root, env=env or repro_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`dvc repro` failed ({proc.returncode}) in {root}:\n{proc.stdout[-4000:]}\n"
                           f"{proc.stderr[-8000:]}")
    return proc


def clean_reference(workdir: str | Path, **project: Any) -> dict[str, Any]:
    """The project run once, whole, against a fault-free server: its output snapshot, server requests (chat and
    embeddings), good answers, ledger totals and wall time. Cached in ``workdir`` (``reference.json``), so the
    tests of one session that compare against it share one run: in a folder every xdist worker sees
    (:func:`rubriclab.testing.session_dir`), the workers share it too; a lock beside ``workdir`` makes the others
    wait for the one that runs it."""
    import shutil

    from rubriclab.testing._session import folder_lock

    workdir = Path(workdir)
    with folder_lock(workdir):
        done = workdir / "reference.json"
        if done.exists():
            return json.loads(done.read_text(encoding="utf-8"))
        if workdir.exists():
            shutil.rmtree(workdir)
        return _clean_reference(workdir, done, **project)


def _clean_reference(workdir: Path, done: Path, **project: Any) -> dict[str, Any]:
    from rubriclab.testing._fake_server import FakeOpenAIServer

    with FakeOpenAIServer(responder=reliability_responder) as server:
        root = reliability_project(workdir / "project", server.url, **project)
        t0 = time.monotonic()
        repro(root)
        wall = time.monotonic() - t0
        stats = server.stats()
    ref = {"root": str(root), "snapshot": snapshot_outputs(root), "requests": stats["requests"],
           "completions_ok": stats["completions_ok"], "embeddings_ok": stats["embeddings_ok"],
           "ledger": ledger_totals(root), "wall_s": wall}
    done.write_text(json.dumps(ref), encoding="utf-8")
    return ref


# -- comparing and checking outputs ---------------------------------------------------------------------------


def _is_volatile(key: Any, volatile: frozenset[str]) -> bool:
    return isinstance(key, str) and (key in volatile or key.rsplit(".", 1)[-1] in volatile)


def _drop_volatile(obj: Any, volatile: frozenset[str]) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_volatile(v, volatile) for k, v in obj.items() if not _is_volatile(k, volatile)}
    if isinstance(obj, list):
        return [_drop_volatile(v, volatile) for v in obj]
    if isinstance(obj, float) and obj != obj:
        return "NaN"  # NaN != NaN: compare it as a marker
    return obj


def drop_volatile(snapshot: dict[str, Any], volatile: frozenset[str] = VOLATILE_KEYS) -> dict[str, Any]:
    """A :func:`snapshot_outputs` result without the ``volatile`` fields (for comparing a resumed run)."""
    return {path: _drop_volatile(v, volatile) for path, v in snapshot.items()}


def snapshot_outputs(root: str | Path, volatile: frozenset[str] = frozenset(),
                     folders: Iterable[str] = ("outputs", "metrics")) -> dict[str, Any]:
    """Every output file's content under ``folders``, comparable across runs: JSON parsed (``volatile`` keys
    dropped at any depth; none by default, see :func:`drop_volatile`), CSV/parquet as sorted-column records, text as text, PNG by size-free identity
    (presence only: matplotlib embeds nothing volatile but renders fonts per machine), other binaries by hash."""
    import pandas as pd

    root = Path(root)
    out: dict[str, Any] = {}
    for folder in folders:
        base = root / folder
        if not base.exists():
            continue
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            if path.name.startswith("."):
                out[rel] = "hidden file"
                continue
            if path.name in PROVENANCE_FILES:
                out[rel] = "per-run provenance (not compared)"
                continue
            suffix = path.suffix.lower()
            if suffix == ".json":
                out[rel] = _drop_volatile(json.loads(path.read_text(encoding="utf-8")), volatile)
            elif suffix in (".jsonl", ".journal"):  # .journal: an Optuna journal, one JSON operation a line
                out[rel] = [_drop_volatile(json.loads(line), volatile)
                            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            elif suffix == ".csv" and path.stat().st_size and not path.read_text(encoding="utf-8").strip():
                out[rel] = "empty table"  # pandas writes an empty frame as a lone newline
            elif suffix in (".csv", ".parquet"):
                frame = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
                frame = frame.drop(columns=[c for c in frame.columns if _is_volatile(c, volatile)])
                out[rel] = _drop_volatile(json.loads(frame.to_json(orient="records", default_handler=str)), volatile)
            elif suffix == ".png":
                out[rel] = "png"
            elif suffix in (".md", ".txt", ".html", ".yaml", ".yml"):
                out[rel] = path.read_text(encoding="utf-8")
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


_PNG = b"\x89PNG\r\n\x1a\n"
_PARQUET = b"PAR1"


def incomplete_files(root: str | Path, folders: Iterable[str] = ("outputs", "metrics")) -> list[str]:
    """Output files that do not parse completely (JSON/JSONL, CSV, parquet, PNG: header and IEND trailer, YAML),
    as ``path: problem``. Hidden atomic-write temporaries (``.name.<pid>.<token>.tmp…``) are skipped: they are
    never at an output path."""
    import pandas as pd

    root = Path(root)
    bad: list[str] = []
    for folder in folders:
        base = root / folder
        if not base.exists():
            continue
        for path in sorted(p for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")):
            suffix = path.suffix.lower()
            try:
                if suffix == ".json":
                    json.loads(path.read_text(encoding="utf-8"))
                elif suffix in (".jsonl", ".journal"):
                    for line in path.read_text(encoding="utf-8").splitlines():
                        if line.strip():
                            json.loads(line)
                elif suffix == ".csv":
                    if not path.stat().st_size:
                        raise InvariantError("empty file (an empty table is written as a newline)")
                    if path.read_text(encoding="utf-8").strip():
                        pd.read_csv(path)
                elif suffix == ".parquet":
                    data = path.read_bytes()
                    if not (data.startswith(_PARQUET) and data.endswith(_PARQUET)):
                        raise InvariantError("no PAR1 header/footer")
                    pd.read_parquet(path)
                elif suffix == ".png":
                    data = path.read_bytes()
                    if not data.startswith(_PNG) or b"IEND" not in data[-12:]:
                        raise InvariantError("no PNG signature or IEND chunk")
                elif suffix in (".yaml", ".yml"):
                    yaml.safe_load(path.read_text(encoding="utf-8"))
                elif suffix in (".md", ".txt", ".html"):
                    path.read_text(encoding="utf-8")
            except Exception as exc:  # noqa: BLE001 - any failure to read it whole is the finding
                bad.append(f"{path.relative_to(root).as_posix()}: {type(exc).__name__}: {exc}"[:300])
    return bad


def temp_files(root: str | Path, folders: Iterable[str] = ("outputs", "metrics")) -> list[str]:
    """Hidden atomic-write temporaries left under ``folders`` (a SIGKILL mid-write leaves one)."""
    root = Path(root)
    return sorted(p.relative_to(root).as_posix() for folder in folders if (root / folder).exists()
                  for p in (root / folder).rglob(".*.tmp*"))


# -- the call store and MLflow, read from outside the stages -------------------------------------------------


def _store_path(root: str | Path) -> Path:
    return Path(root) / ".rubriclab/calls.sqlite"


def ledger_totals(root: str | Path, stage_prefix: str = "") -> dict[str, int]:
    """Sums of the project's ledger rows (stages starting with ``stage_prefix``): calls, ok, failed, retries,
    parse_failures, transport_failures, interrupted_batches, items."""
    from rubriclab.llm import open_store

    store = open_store(_store_path(root))
    try:
        rows = [r for r in store.ledger() if (r["stage"] or "").startswith(stage_prefix)]
    finally:
        store.close()
    keys = ("calls", "ok", "failed", "retries", "parse_failures", "transport_failures", "interrupted_batches", "items")
    return {k: int(sum(r.get(k, 0) or 0 for r in rows)) for k in keys}


def request_signature(model: str, messages: Any, params: dict[str, Any]) -> str:
    """Identity of one chat request shared by the server side (its body) and the store side (a call row's
    stored request): the provider-less model name, the messages, and the sample seed, temperature and token
    limit from ``params``."""
    model = model.split("/", 1)[1] if "/" in model else model
    picked = [params.get(k) for k in ("seed", "temperature", "max_tokens")]
    blob = json.dumps([model, messages, picked], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha1(blob.encode()).hexdigest()


def finished_chat_signatures(root: str | Path) -> set[str]:
    """Signatures (:func:`request_signature`) of every chat call with an ok row in the project's store."""
    path = _store_path(root)
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute("SELECT model, request FROM calls WHERE status='ok'").fetchall()
    finally:
        db.close()
    out = set()
    for model, request in rows:
        req = json.loads(request or "{}")
        out.add(request_signature(model, req.get("messages"), req.get("params") or {}))
    return out


@dataclass
class SignatureMap:
    """Server request keys by request signature, filled by a wrapped responder (see :func:`recording`)."""

    keys: dict[str, set[str]] = field(default_factory=dict)

    def recording(self, responder: Callable[[dict], str]) -> Callable[[dict], str]:
        from rubriclab.testing._fake_server import request_key

        def wrapped(body: dict) -> str:
            sig = request_signature(str(body.get("model")), body.get("messages"), body)
            self.keys.setdefault(sig, set()).add(request_key(body))
            return responder(body)

        return wrapped

    def attempts(self, stats: dict[str, Any], signatures: Iterable[str]) -> dict[str, int]:
        """Server attempts per signature (summed over its keys) for ``signatures``."""
        return {s: sum(stats["attempts"].get(k, 0) for k in self.keys.get(s, ())) for s in signatures}


def mlflow_run_statuses(root: str | Path) -> dict[str, dict[str, str]]:
    """run id → {name, status, stage, ended_by} of every run in the project's MLflow store."""
    from mlflow import MlflowClient

    from rubriclab.tracking import tracking_uri

    client = MlflowClient(tracking_uri(Path(root)))
    out: dict[str, dict[str, str]] = {}
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            out[run.info.run_id] = {"name": run.info.run_name, "status": run.info.status,
                                    "stage": run.data.tags.get("stage", ""),
                                    "ended_by": run.data.tags.get("rubriclab.ended_by", "")}
    return out


# -- killing a repro -------------------------------------------------------------------------------------------


@dataclass
class KillOutcome:
    """What one SIGKILL of a ``dvc repro`` hit: the trigger, the phase it landed in, server requests by then."""

    trigger: str
    phase: str
    requests: int
    elapsed_s: float
    leftover_temps: list[str]
    completed: bool = False  # the repro ended before the trigger fired (nothing was killed)
    returncode: int | None = None  # the repro's exit status when it ended by itself
    log_tail: str = ""  # the end of its output when it failed


def kill_repro(root: str | Path, trigger: Callable[[], str | None], *, timeout: float = 300,
               poll_s: float = 0.002, requests: Callable[[], int] = lambda: 0,
               env: dict[str, str] | None = None, args: Iterable[str] = ()) -> KillOutcome:
    """Start ``python -m dvc repro [args]`` in its own session, call ``trigger()`` every ``poll_s`` until it returns
    a description of the moment (e.g. "temp file outputs/.x.tmp.png"), then SIGKILL the whole process group.
    Returns where the kill landed; ``completed`` when the repro finished first."""
    root = Path(root)
    t0 = time.monotonic()
    import tempfile

    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro", *args], cwd=root, env=env or repro_env(),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    fired = None
    try:
        while time.monotonic() - t0 < timeout:
            fired = trigger()
            if fired or proc.poll() is not None:
                break
            time.sleep(poll_s)
        if fired is None and proc.poll() is not None:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-4000:] if proc.returncode else ""
            phase = "finished" if proc.returncode == 0 else f"failed ({proc.returncode})"
            return KillOutcome("none", phase, requests(), time.monotonic() - t0, temp_files(root), True,
                               proc.returncode, tail)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)
        log.close()
    n = requests()
    _wait_group_gone(proc.pid)
    return KillOutcome(fired or "timeout", fired or "timeout", n, time.monotonic() - t0, temp_files(root))


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` can still run (zombies, which a busy init may reap late, cannot)."""
    members = group_members(pgid)
    if members is None:  # no procfs: any member, zombie or not
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return any(fields[0] not in ("Z", "X") for fields in members.values())


def _wait_group_gone(pgid: int, timeout: float = 10.0) -> None:
    """Wait until no process of group ``pgid`` can run any more (so nothing writes after the kill)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and _group_alive(pgid):
        time.sleep(0.02)


def temp_file_trigger(root: str | Path, folder: str) -> Callable[[], str | None]:
    """A trigger firing while an atomic-write temporary exists under ``root/folder`` (an output being written)."""
    base = Path(root) / folder

    def trigger() -> str | None:
        try:
            stack = [base]
            while stack:
                with os.scandir(stack.pop()) as it:
                    for e in it:
                        if e.name.startswith(".") and ".tmp" in e.name:
                            return f"output write: {e.name}"
                        if e.is_dir():
                            stack.append(e.path)
        except FileNotFoundError:
            return None
        return None

    return trigger


def artifact_trigger(root: str | Path, name: str) -> Callable[[], str | None]:
    """A trigger firing once an MLflow run not seen yet has logged artifact ``name`` (the project's local artifact
    store, ``mlartifacts/<run id>/artifacts/``): the stage is in its MLflow logging."""
    store = Path(root) / "mlartifacts"

    def logged() -> set[str]:
        try:
            runs = os.listdir(store)
        except FileNotFoundError:
            return set()
        return {r for r in runs if (store / r / "artifacts" / name).exists()}

    before = logged()

    def trigger() -> str | None:
        new = logged() - before
        return f"MLflow logging: run {sorted(new)[0][:8]} logged {name}" if new else None

    return trigger


def requests_trigger(server: Any, n: int) -> Callable[[], str | None]:
    """A trigger firing once ``n`` requests reached ``server`` (a FakeOpenAIServer)."""
    return lambda: f"mid-batch: {n} requests reached the server" if server.stats()["requests"] >= n else None


def _store_batches(root: str | Path) -> list[tuple[str, str, int]]:
    path = _store_path(root)
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return [tuple(r) for r in db.execute("SELECT stage, role, completed FROM batches ORDER BY id")]
    finally:
        db.close()


@dataclass
class KillRecord:
    """The state right after one kill, before anything resumed: what the kill hit, the chat calls finished by
    then (signatures) and their server attempts, the MLflow runs it left RUNNING, the files that do not parse,
    the ledger totals (all stages, and ``stage_prefix`` ones), the server's fault counts and the batch rows."""

    want: str
    outcome: KillOutcome
    finished: set[str]
    attempts: dict[str, int]
    left_running: set[str]
    incomplete: list[str]
    ledger: dict[str, int]
    stage_ledger: dict[str, int]
    faults: dict[str, int]
    batches: list[tuple[str, str, int]]

    def repeated(self, sigs: SignatureMap, stats: dict[str, Any]) -> dict[str, int]:
        """Finished calls (at this kill) that reached the server again by ``stats``: signature -> new attempts."""
        now = sigs.attempts(stats, self.finished)
        return {s: now[s] - n for s, n in self.attempts.items() if now[s] != n}


def kill_sequence(root: str | Path, server: Any, sigs: SignatureMap,
                  triggers: Iterable[tuple[str, Callable[[], Callable[[], str | None]]]],
                  stage_prefix: str = "audit", tries: int = 3,
                  force: str | None = f"audit@{DATASET}") -> list[KillRecord]:
    """For each ``(name, make_trigger)``: ``dvc repro`` in ``root`` (resuming whatever the previous kill left),
    SIGKILLed when the trigger fires; the state after each kill is recorded. A trigger that misses its moment
    (the repro finished first: an output write can be over between two polls) is tried again, up to ``tries``
    times, on ``dvc repro -f <force>`` (the stage rerun from the call store). The caller resumes at the end
    (:func:`repro`). ``server`` is the chat FakeOpenAIServer whose responder ``sigs`` records."""
    root = Path(root)
    records: list[KillRecord] = []
    for want, make in triggers:
        for attempt in range(tries):
            runs_before = set(mlflow_run_statuses(root)) if (root / "mlflow.db").exists() else set()
            args = ["-f", force] if attempt and force else []
            out = kill_repro(root, make(), requests=lambda: server.stats()["requests"], args=args)
            if not out.completed or out.returncode or attempt == tries - 1:
                break  # killed, or the repro failed (nothing to retry), or out of tries
        if attempt:
            out.phase += f" (after {attempt} missed attempt{'s' if attempt > 1 else ''})"
        statuses = mlflow_run_statuses(root) if (root / "mlflow.db").exists() else {}
        finished = finished_chat_signatures(root)
        stats = server.stats()
        records.append(KillRecord(
            want=want, outcome=out, finished=finished, attempts=sigs.attempts(stats, finished),
            left_running={r for r, st in statuses.items() if r not in runs_before and st["status"] == "RUNNING"},
            incomplete=incomplete_files(root), ledger=ledger_totals(root), stage_ledger=ledger_totals(root, stage_prefix),
            faults=dict(stats["faults"]), batches=_store_batches(root)))
        if out.completed:
            break
    return records


def standard_triggers(root: str | Path, server: Any, rng: random.Random,
                      mid_batch: tuple[int, int] = (80, 220)) -> list[tuple[str, Callable[[], Any]]]:
    """The three kills of the issue, in order: mid-batch (a seeded number of requests reached the server, in the
    audit's batches), an output write (an atomic-write temporary exists under outputs/), and MLflow logging (the
    audit run logged card.json)."""
    n = rng.randint(*mid_batch)
    return [("mid-batch", lambda: requests_trigger(server, n)),
            ("output write", lambda: temp_file_trigger(root, "outputs")),
            ("MLflow logging", lambda: artifact_trigger(root, "card.json"))]


# -- figures ---------------------------------------------------------------------------------------------------


def reliability_figures(workdir: str | Path, *, fault_rate: float = 0.3, seed: int = 5, kill_seed: int = 20240613,
                        timeout: float = 3.0, drift: bool = True, probe: bool = True) -> str:
    """Run the project fault-free, then under ``fault_rate`` transport faults of all six kinds, then SIGKILLed at the
    three standard points and resumed; return a markdown table (faults injected / survived; kills / resumed with
    0 repeated calls), with the measured details under it."""
    import shutil

    from rubriclab.testing._fake_server import FAULT_KINDS, FakeOpenAIServer, FaultPlan

    workdir = Path(workdir)
    if workdir.exists():
        shutil.rmtree(workdir)
    project = {"timeout": timeout, "drift": drift, "probe": probe}
    ref = clean_reference(workdir / "reference", **project)
    expected = drop_volatile(ref["snapshot"])

    plan = FaultPlan(rate=fault_rate, kinds=FAULT_KINDS, seed=seed, retry_after=0.05, hang_seconds=2 * timeout)
    with FakeOpenAIServer(responder=reliability_responder, faults=plan) as server:
        faulty = reliability_project(workdir / "faulty", server.url, **project)
        t0 = time.monotonic()
        repro(faulty)
        faulty_s = time.monotonic() - t0
        stats = server.stats()
    injected = sum(stats["faults"].values())
    ledger = ledger_totals(faulty)
    equal = drop_volatile(snapshot_outputs(faulty)) == expected
    exact = (ledger["retries"] == injected and stats["requests"] == ref["requests"] + injected
             and ledger["parse_failures"] == ref["ledger"]["parse_failures"])
    survived = injected if equal and exact else 0

    sigs = SignatureMap()
    kill_plan = FaultPlan(rate=0.3, kinds=("429",), seed=kill_seed, retry_after=0.2)
    with FakeOpenAIServer(responder=sigs.recording(reliability_responder), faults=kill_plan) as server:
        killed = reliability_project(workdir / "killed", server.url, **project)
        records = kill_sequence(killed, server, sigs, standard_triggers(killed, server, random.Random(kill_seed)))
        t0 = time.monotonic()
        repro(killed)
        resume_s = time.monotonic() - t0
        final = server.stats()
    kills = [r for r in records if not r.outcome.completed]
    clean_resumes = [r for r in kills if not r.incomplete and not r.repeated(sigs, final)]
    statuses = mlflow_run_statuses(killed)
    reaped = all(statuses[rid]["status"] == "KILLED" for r in kills for rid in r.left_running)
    running = sum(1 for st in statuses.values() if st["status"] == "RUNNING")
    killed_equal = drop_volatile(snapshot_outputs(killed)) == expected

    kinds = ", ".join(f"{k} {v}" for k, v in stats["faults"].items())
    landed = "; ".join(f"{r.want} → {r.outcome.phase}" for r in kills)
    lines = [
        "| scenario | injected | survived |",
        "|---|---|---|",
        f"| transport faults, {fault_rate:.0%} of requests, chat and embeddings ({', '.join(FAULT_KINDS)}), "
        f"whole `dvc repro` "
        f"(data → discover → audit{', drift' if drift else ''}{', probe' if probe else ''}) | {injected} faults "
        f"| {survived} (outputs equal a fault-free run) |",
        f"| SIGKILL of `dvc repro` (mid-batch, output write, MLflow logging) | {len(kills)} kills "
        f"| {len(clean_resumes)} resumed with 0 repeated calls |",
        "",
        f"- faults by kind: {kinds}; ledger retries {ledger['retries']}; requests {stats['requests']} = "
        f"{ref['requests']} fault-free + {injected} faults: {stats['requests'] == ref['requests'] + injected}; "
        f"parse failures {ledger['parse_failures']} (fault-free {ref['ledger']['parse_failures']}); outputs equal: "
        f"{equal}; wall {ref['wall_s']:.0f} s fault-free, {faulty_s:.0f} s with faults",
        f"- kills landed: {landed}; no half-written file after any kill: "
        f"{all(not r.incomplete for r in kills)}; finished calls repeated after a kill: "
        f"{sum(len(r.repeated(sigs, final)) for r in kills)}; resumed outputs equal: {killed_equal}; runs of killed "
        f"attempts marked KILLED: {reaped}; runs left RUNNING: {running}; final resume {resume_s:.0f} s",
    ]
    return "\n".join(lines)
