"""Stages end to end in a temporary project: files written, MLflow run logged, re-runs free."""

from __future__ import annotations

import json

import pytest
import yaml
from mlflow import MlflowClient

from rubriclab.rubrics import load_rubric_set
from rubriclab.stages.data import run_data_stage
from rubriclab.stages.discover import run_discover_stage
from rubriclab.testing import discover_consolidator_script as consolidator_script
from rubriclab.testing import discover_embed_script as embed_script
from rubriclab.testing import discover_judge_script as judge_script
from rubriclab.testing import planted_hash as _h
from rubriclab.testing import scripted_model, scripted_provider
from rubriclab.tracking import tracking_uri

GENERIC = [  # (accuracy, directness) wordings; a pair gets one of three, so no text repeats for most pairs
    (("Accuracy", "Judges the accuracy of facts."), ("Directness", "Judges the directness of the answer.")),
    (("Factual accuracy", "Rewards accuracy in every stated fact."),
     ("Answers directly", "Rewards directness: the answer comes first.")),
    (("Accurate facts", "Checks the factual accuracy of each claim."),
     ("Direct answer", "Checks the directness of the reply.")),
]


def generic_extractor(messages, params):
    # two criteria per pair, named after planted-style qualities; scores favour the winner
    text = messages[-1]["content"]
    winner = "A" if "WINNER: A" in text else "B"
    hi, lo = (8, 3) if winner == "A" else (3, 8)
    variant = GENERIC[_h(text.split("RESPONSE A:")[0]) % 3]
    return json.dumps({"criteria": [{"name": n, "description": d, "model_a_score": hi, "model_b_score": lo}
                                    for n, d in variant]})


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    (root / "experiments/rubrics").mkdir(parents=True)
    (root / "experiments/rubrics/mine.md").write_text("- **Accuracy**: states correct facts\n- Brevity: no padding\n")
    params = {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "extractor": {"model": scripted_model("st_extractor", generic_extractor)},
            "consolidator": {"model": scripted_model("st_consolidator", consolidator_script())},
            "embedder": {"model": scripted_model("st_embedder", embed_script)},
            "judge": {"model": scripted_model("st_judge", judge_script)}}},
        "data": {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"}},
                 "premise": {"sources": ["demo_helpful"], "extraction": 20, "audit": 10, "heldout": 10}},
        "discover": {"min_criteria": 1, "k": 4, "target_size": 4, "cluster_size": 6, "n_min": 1, "min_pairs": 1,
                     "pref_rank": {"pool": 4, "max_pairs": 5, "mode": "score"},
                     "task_derived": {"k": 3, "tasks": {}}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return root, params


def test_data_stage_writes_splits_and_logs_counts(project):
    root, params = project
    out = run_data_stage(params, root)
    assert out["counts"]["premise.demo_helpful.extraction"] == 20
    assert (root / "outputs/data/premise/demo_helpful/heldout.parquet").exists()
    assert json.loads((root / "metrics/data.json").read_text())["source.demo_helpful.dropped"] == 0
    client = MlflowClient(tracking_uri(root))
    run = client.search_runs([client.get_experiment_by_name("rubriclab").experiment_id],
                             filter_string="tags.stage = 'data'")[0]
    assert run.data.params["data.premise.extraction"] == "20"
    assert run.data.metrics["premise.demo_helpful.audit"] == 10


def test_discover_stage_writes_every_rubric_source_and_reruns_free(project):
    root, params = project
    run_data_stage(params, root)
    first = run_discover_stage(params, root, "demo_helpful")
    assert set(first["written"]) == {"discovered", "pref_repaired", "imported_mine"}
    rs = load_rubric_set(root / "outputs/rubrics/demo_helpful/discovered.json")
    assert rs.source == "discovered" and rs.K >= 1 and all(c.provenance["candidates"] for c in rs.criteria)
    assert load_rubric_set(root / "outputs/rubrics/demo_helpful/imported_mine.json").K == 2
    assert first["metrics"]["K.imported_mine"] == 2 and first["metrics"]["K.discovered"] == rs.K
    # two planted qualities cannot fill k=4: the file says so, and so do the report and the metrics
    assert rs.K == 2 and rs.provenance["shortfall"]["asked"] == 4 and rs.provenance["shortfall"]["got"] == 2
    assert first["report"]["shortfall"]["discovered"] == rs.provenance["shortfall"]
    assert first["metrics"]["shortfall.discovered"] == 2 and first["metrics"]["rejected.extraction.example_copy"] == 0
    assert (root / "outputs/discover/demo_helpful/support.png").stat().st_size > 1000
    calls = dict(scripted_provider().calls)
    second = run_discover_stage(params, root, "demo_helpful")
    assert dict(scripted_provider().calls) == calls  # the re-run made zero model calls
    assert second["metrics"] == first["metrics"]
