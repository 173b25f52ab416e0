"""Acceptance: the discover stage in a temporary project with extractors that copy the prompt's
example or answer only junk. Copies never reach a rubric file; rejections are counted by reason in
report.json, metrics.json and the MLflow run; a source that falls short is written with the reason."""

from __future__ import annotations

import json

import pandas as pd
import yaml
from mlflow import MlflowClient

from rubriclab.rubrics import load_rubric_set
from rubriclab.stages.data import run_data_stage
from rubriclab.stages.discover import run_discover_stage
from rubriclab.testing import discover_consolidator_script as consolidator_script
from rubriclab.testing import discover_embed_script as embed_script
from rubriclab.testing import discover_judge_script as judge_script
from rubriclab.testing import planted_hash as _h
from rubriclab.testing import scripted_model
from rubriclab.tracking import tracking_uri
from tests.stages.test_stages import GENERIC

COPY = {"name": "criterion_name", "description": "what responses should achieve for this criterion",
        "model_a_score": 5, "model_b_score": 5}
JUNK = [{"name": "A", "description": "Great question!", "model_a_score": 9, "model_b_score": 2},
        {"name": "name", "description": "description", "model_a_score": 9, "model_b_score": 2}]


def _prompt_part(text: str) -> str:
    return text.split("RESPONSE A:")[0]


COPIED_ONLY: set[str] = set()  # prompts answered with nothing but the example


def copying_extractor(messages, params):
    """A third of the pairs: only the prompt's example. The rest: two proper criteria plus the example."""
    text = messages[0]["content"]
    if _h("copy", text) % 3 == 0:
        COPIED_ONLY.add(text)
        return json.dumps({"criteria": [COPY]})
    hi, lo = (8, 3) if "WINNER: A" in text else (3, 8)
    proper = [{"name": n, "description": d, "model_a_score": hi, "model_b_score": lo}
              for n, d in GENERIC[_h(_prompt_part(text)) % 3]]
    return json.dumps({"criteria": [*proper, COPY]})


def junk_extractor(messages, params):
    last = messages[-1]["content"]
    if "TASK DESCRIPTION" in messages[0]["content"]:
        return json.dumps({"criteria": [{"name": c["name"], "description": c["description"]} for c in JUNK]})
    return json.dumps({"criteria": JUNK if "could not be used" not in last else [JUNK[1], COPY]})


def _project(root, name: str, extractor, k: int, tasks: dict | None = None):
    (root / "experiments/rubrics").mkdir(parents=True)
    params = {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "extractor": {"model": scripted_model(f"{name}_extractor", extractor), "parse_retries": 1},
            "consolidator": {"model": scripted_model(f"{name}_consolidator", consolidator_script())},
            "embedder": {"model": scripted_model(f"{name}_embedder", embed_script)},
            "judge": {"model": scripted_model(f"{name}_judge", judge_script)}}},
        "data": {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"}},
                 "premise": {"sources": ["demo_helpful"], "extraction": 20, "audit": 10, "heldout": 10}},
        "discover": {"min_criteria": 1, "k": k, "target_size": 4, "cluster_size": 6, "n_min": 1, "min_pairs": 1,
                     "pref_rank": {"pool": 4, "max_pairs": 5, "mode": "score"},
                     "task_derived": {"k": 3, "tasks": tasks or {}}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    run_data_stage(params, root)
    return params


def _run(root):
    client = MlflowClient(tracking_uri(root))
    exp = client.get_experiment_by_name("rubriclab").experiment_id
    return client.search_runs([exp], filter_string="tags.stage = 'discover'")[0]


def test_copied_examples_never_reach_a_rubric_file_and_are_counted(tmp_path):
    params = _project(tmp_path, "acc_copy", copying_extractor, k=2)
    out = run_discover_stage(params, tmp_path, "demo_helpful")
    rubrics = tmp_path / "outputs/rubrics/demo_helpful"
    for source in ("discovered", "pref_repaired"):
        text = (rubrics / f"{source}.json").read_text().lower()
        assert "criterion_name" not in text and "what responses should achieve" not in text, source
    discovered = load_rubric_set(rubrics / "discovered.json")
    assert [c.id for c in discovered.criteria] == ["accuracy", "directness"]  # the proper criteria made it
    assert load_rubric_set(rubrics / "pref_repaired.json").K == 2 and "shortfall" not in discovered.provenance

    evidence = tmp_path / "outputs/discover/demo_helpful"
    report = json.loads((evidence / "report.json").read_text())
    only_copies = len(COPIED_ONLY)
    assert 0 < only_copies < 20
    assert report["extraction"]["pairs_failed"] == only_copies
    assert report["rejected"]["extraction"] == {"example_copy": 20}  # one copy in every final reply
    failures = report["extraction_failures"]
    assert len(failures) == only_copies and all(f["cause"] == "too_few_valid" for f in failures)
    assert all("example_copy" in f["error"] for f in failures)  # pair-level failures keep their reason text
    assert report["shortfall"] == {}
    rejected = pd.read_csv(evidence / "rejected_candidates.csv")
    assert set(rejected["reason"]) == {"example_copy"} and len(rejected) == 20
    assert "criterion_name" not in set(pd.read_parquet(evidence / "candidates.parquet")["name"])

    metrics = json.loads((tmp_path / "metrics/discover/demo_helpful.json").read_text())
    assert metrics["rejected.extraction.example_copy"] == 20 and metrics["rejected.extraction.single_token"] == 0
    assert metrics["shortfall.discovered"] == 0 and out["metrics"] == metrics
    run = _run(tmp_path)
    assert run.data.metrics["rejected.extraction.example_copy"] == 20
    assert not any(t.startswith("shortfall.") for t in run.data.tags)


def test_an_extractor_that_only_returns_junk_gives_empty_sources_with_the_reason(tmp_path):
    params = _project(tmp_path, "acc_junk", junk_extractor, k=3, tasks={"demo_helpful": "Answer questions."})
    out = run_discover_stage(params, tmp_path, "demo_helpful")  # no exception
    rubrics = tmp_path / "outputs/rubrics/demo_helpful"
    assert set(out["written"]) == {"discovered", "pref_repaired", "task_derived"}
    shortfalls = {}
    for source, asked in (("discovered", 3), ("pref_repaired", 3), ("task_derived", 3)):
        rs = load_rubric_set(rubrics / f"{source}.json")
        assert rs.K == 0 and rs.source == source
        sf = rs.provenance["shortfall"]
        assert (sf["asked"], sf["got"]) == (asked, 0) and isinstance(sf["reason"], str)
        shortfalls[source] = sf
    reason = shortfalls["discovered"]["reason"]
    # counted in each pair's final reply (the answer to the re-ask)
    assert reason.startswith("20 of 20 extraction replies were rejected and 40 extracted criteria failed validation "
                             "(example_copy: 20, field_name: 20); no usable candidate criterion remained")
    assert shortfalls["pref_repaired"]["reason"].startswith("no discovered criterion was left to rank")
    assert "no usable criterion after 2 attempt(s) (field_name: 1, single_token: 1)" in shortfalls["task_derived"][
        "reason"]

    report = json.loads((tmp_path / "outputs/discover/demo_helpful/report.json").read_text())
    assert report["shortfall"] == shortfalls
    assert report["rejected"]["extraction"] == {"example_copy": 20, "field_name": 20}
    assert report["extraction"]["reasks"] == 20
    assert report["rejected"]["task_derived"] == {"field_name": 1, "single_token": 1}
    assert report["extraction"]["pairs_failed"] == 20 and report["k_discovered"] == 0

    metrics = json.loads((tmp_path / "metrics/discover/demo_helpful.json").read_text())
    assert metrics["shortfall.discovered"] == metrics["shortfall.pref_repaired"] == metrics["shortfall.task_derived"] == 3
    assert metrics["K.discovered"] == metrics["K.task_derived"] == 0 and metrics["rejected.extraction.example_copy"] == 20
    run = _run(tmp_path)
    assert run.data.tags["shortfall.discovered"] == reason
    assert run.data.tags["shortfall.task_derived"] == shortfalls["task_derived"]["reason"]
    assert run.data.metrics["shortfall.discovered"] == 3 and run.data.metrics["rejected.extraction.field_name"] == 20
