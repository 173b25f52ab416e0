"""The repair stage end to end on a temporary project with the scripted repair world: named repaired sets,
diffs, candidates, the operating curve and its plot, the study, metrics, nested MLflow runs; a re-run
costs no call; the audit stage can name the repaired files; the CLI writes only its own folder."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from mlflow import MlflowClient

from rubriclab.audit import load_sources
from rubriclab.cli import main
from rubriclab.data import write_splits
from rubriclab.rubrics import load_rubric_file
from rubriclab.stages.repair import run_repair_stage
from rubriclab.testing import MARK, repair_world, scripted_provider, world_pairs
from rubriclab.tracking import tracking_uri

ORIGINAL = "The response answers the question helpfully and completely."
OPS = ["do_not_reward", "abstract_to_observable", "max_score_cap", "decomposition", "false_positive_anchors"]


def _params(roles):
    return {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "judge": {"model": [j.model for j in roles["judges"]], "parse_retries": 0},
            "attacker": {"model": roles["attacker"].model, "parse_retries": 0},
            "verifier": {"model": roles["verifier"].model, "parse_retries": 0},
            "refiner": {"model": roles["refiner"].model, "parse_retries": 0}}},
        "data": {"seed": 42},
        "audit": {"pool_size": 4, "runs": 2, "n_attacks": 4, "n_boot": 200},
        "repair": {"sources": ["mine", "empty"], "dev_size": 6, "heldout_size": 6, "n_attacks": 4,
                   "operators": OPS, "max_operators": 1,
                   "sweep": {"deltas": [0.0, 0.5, ".inf"], "candidates": [2, 5]}},
    }


def _write_project(root):
    """World splits and the one-criterion rubric ``mine``; returns the rubric folder."""
    write_splits({"audit": world_pairs(4, "pool"), "dev": world_pairs(6, "dev"), "heldout": world_pairs(6, "held")},
                 root / "outputs/data/premise/demo_helpful")
    rubrics = root / "outputs/rubrics/demo_helpful"
    rubrics.mkdir(parents=True)
    (rubrics / "mine.json").write_text(json.dumps({"name": "mine", "source": "imported", "criteria": [
        {"id": "helpful", "description": ORIGINAL}]}))
    return rubrics


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("repair_project")
    (root / "params.yaml").write_text("{}\n")
    rubrics = _write_project(root)
    (rubrics / "empty.json").write_text(json.dumps({"name": "empty", "source": "discovered", "criteria": [],
                                                    "provenance": {"shortfall": {"asked": 6, "got": 0,
                                                                                 "reason": "no usable criterion"}}}))
    roles = repair_world(tag="stage")
    params = _params(roles)
    out = run_repair_stage(params, root, "demo_helpful")
    return {"root": root, "params": params, "out": out, "roles": roles}


def test_stage_writes_named_sets_diffs_curve_study_and_metrics(project):
    root = project["root"]
    out = root / "outputs/repair/demo_helpful"
    constrained = load_rubric_file(out / "mine.robust_constrained.json")
    unconstrained = load_rubric_file(out / "mine.robust_unconstrained.json")
    assert constrained.source == unconstrained.source == "robust_repaired"
    assert MARK["do_not_reward"] in constrained.get("helpful").description
    assert MARK["abstract_to_observable"] in unconstrained.get("helpful").description
    assert constrained.provenance["delta"] == "0" and unconstrained.provenance["delta"] == "inf"
    diff = (out / "mine/diff.md").read_text()
    assert "repaired with do_not_reward" in diff and "repaired with abstract_to_observable" in diff
    assert f"- before: {ORIGINAL}" in diff and "```diff" in diff
    curve = pd.read_csv(out / "mine/curve.csv")
    assert len(curve) == 6  # 3 δ × 2 candidate counts
    named = curve.dropna(subset=["point"]).set_index("point")
    assert named.loc["constrained", "vfr_heldout"] == 0.5 and named.loc["unconstrained", "vfr_heldout"] == 0.0
    assert named.loc["constrained", "delta_vfr"] == -0.5
    assert (out / "mine/curve.png").stat().st_size > 10_000
    assert (out / "mine/study.journal").exists()
    cands = pd.read_csv(out / "mine/candidates.csv")
    assert set(cands["checker"]) >= {"ok", "unknown_operator", "unparsed"}
    metrics = json.loads((root / "metrics/repair/demo_helpful.json").read_text())
    assert metrics["mine.constrained.vfr_heldout"] == 0.5 and metrics["mine.original.vfr_heldout"] == 1.0
    assert metrics["mine.rejected.unknown_operator"] == 1
    summary = (out / "summary.md").read_text()
    assert "Not repaired: K=0 — no usable criterion" in summary
    assert "percentile bootstrap" in summary and "n=6" in summary
    empty = load_rubric_file(out / "empty.robust_constrained.json")
    assert empty.K == 0 and "nothing to repair" in empty.provenance["shortfall"]["reason"]


def test_trials_are_nested_mlflow_runs(project):
    client = MlflowClient(tracking_uri=tracking_uri(project["root"]))
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = [r for r in runs if r.info.run_name == "repair@demo_helpful"]
    assert len(parent) == 1
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert len(trials) == 6
    assert {r.data.params["delta"] for r in trials} == {"0", "0.5", "inf"}
    assert all("vfr_heldout" in r.data.metrics for r in trials)


def test_rerun_makes_no_call_and_runs_no_new_trial(project):
    calls = dict(scripted_provider().calls)
    run_repair_stage(project["params"], project["root"], "demo_helpful")
    assert dict(scripted_provider().calls) == calls
    import optuna

    from rubriclab.studies import study_storage
    storage = study_storage(None, journal=project["root"] / "outputs/repair/demo_helpful/mine/study.journal")
    (summary,) = optuna.get_all_study_summaries(storage)
    assert summary.n_trials == 6


def test_audit_stage_names_repaired_files_by_path(project):
    sets = load_sources(project["root"], "demo_helpful",
                        ["mine", "outputs/repair/{dataset}/mine.robust_constrained.json"])
    assert list(sets) == ["mine", "mine.robust_constrained"]
    assert sets["mine.robust_constrained"].get("helpful").description != sets["mine"].get("helpful").description


def test_cli_repair_one_delta_writes_only_its_own_folder(project, monkeypatch, capsys):
    import yaml

    root = project["root"]
    (root / "params.yaml").write_text(yaml.safe_dump(project["params"]))
    before = sorted(p.name for p in (root / "outputs/repair/demo_helpful").iterdir())
    rc = main(["repair", "--params", str(root / "params.yaml"), "--dataset", "demo_helpful",
               "--rubrics", str(root / "outputs/rubrics/demo_helpful/mine.json"), "--delta", "0"])
    assert rc == 0
    cli_out = root / "outputs/repair_cli/demo_helpful"
    curve = pd.read_csv(cli_out / "mine/curve.csv")
    assert list(curve["delta"]) == [0.0] * 2  # one δ, both candidate counts of repair.sweep.candidates
    assert sorted(p.name for p in (root / "outputs/repair/demo_helpful").iterdir()) == before
    assert "mine" in capsys.readouterr().out
    rc = main(["repair", "--params", str(root / "params.yaml"), "--rubrics", "x.json", "--delta", "-1"])
    assert rc == 2


def test_delta_parsing():
    from rubriclab.errors import ConfigError
    from rubriclab.repair import parse_delta
    assert parse_delta(".inf") == math.inf and parse_delta("0") == 0.0 and parse_delta(0.05) == 0.05
    for bad in ("-1", "abc", float("nan")):
        with pytest.raises(ConfigError):
            parse_delta(bad)


def test_single_judge_alpha_undefined_trials_are_pruned_with_the_reason_and_outputs_still_written(tmp_path):
    import optuna

    from rubriclab.studies import study_storage

    _write_project(tmp_path)
    params = _params(repair_world(tag="solo", seats=1))
    params["repair"]["sources"] = ["mine"]
    params["repair"]["sweep"] = {"deltas": [0.0, ".inf"], "candidates": [5]}
    run_repair_stage(params, tmp_path, "demo_helpful")
    out = tmp_path / "outputs/repair/demo_helpful"
    # a finite δ cannot be checked without α: unchanged; δ = ∞ looks at VFR alone
    assert load_rubric_file(out / "mine.robust_constrained.json").get("helpful").description == ORIGINAL
    assert MARK["abstract_to_observable"] in load_rubric_file(out / "mine.robust_unconstrained.json").get(
        "helpful").description
    storage = study_storage(None, journal=out / "mine/study.journal")
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).get_trials()
    assert [t.state.name for t in trials] == ["PRUNED", "PRUNED"]
    assert all("α needs a panel" in t.user_attrs["error"] for t in trials)
    curve = pd.read_csv(out / "mine/curve.csv")
    assert curve["alpha_heldout"].isna().all() and list(curve["vfr_heldout"]) == [1.0, 0.0]
    assert "α needs a panel" in (out / "summary.md").read_text()
    study_csv = pd.read_csv(out / "mine/study.csv")
    assert list(study_csv["state"]) == ["PRUNED", "PRUNED"] and study_csv["error"].str.contains("α needs").all()
