"""The drift stage end to end on a temporary project with the scripted drift world: the method comparison
(bench, target, gap per method with intervals), the archive and the selected rubric in RIPD's format, the
study, the stealth check, transfer, metrics and nested MLflow runs; a re-run makes no provider call."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from mlflow import MlflowClient

from rubriclab.data import write_pairs
from rubriclab.judging import load_pairwise_rubric
from rubriclab.rubrics import read_ripd_lines
from rubriclab.stages.drift import run_drift_stage
from rubriclab.testing import BIAS_SENTENCE, drift_pairs, drift_world, judge_script, scripted_model, scripted_provider
from rubriclab.tracking import tracking_uri

SEED_TEXT = ("Please act as an impartial judge and decide which assistant answered the user better.\n\n"
             "[User Question]\n{instruction}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
             "Output your final verdict: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better.")


def _write_project(root):
    base = root / "outputs/data/ripd/world"
    for d in ("bench", "target"):
        for split in ("train", "val", "test"):
            write_pairs(drift_pairs(12, "bench" if d == "bench" else "target", prefix=f"{d}-{split}"),
                        base / f"{d}_{split}.parquet")
    (root / "experiments").mkdir()
    (root / "experiments/seed.json").write_text(json.dumps({"name": "world_seed", "template": SEED_TEXT}))
    (root / "params.yaml").write_text("{}\n")


def _params(roles, other_judge):
    return {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "judge": {"model": roles["judge"].model, "parse_retries": 0, "concurrency": 8},
            "refiner": {"model": roles["refiner"].model, "temperature": 0.7, "parse_retries": 0, "concurrency": 8},
            "evaluator": {"model": roles["evaluator"].model, "temperature": 0.7, "concurrency": 8}}},
        "data": {"seed": 42},
        "drift": {"settings": ["world"], "seed_rubrics": {"world": "experiments/seed.json"},
                  "val_budget": 4, "n_boot": 200,
                  "search": {"population": 2, "rounds": 2, "subsample": 0.5, "top_k": 2, "children": 2},
                  "study": {"grid": {"eps_train": [0.05, 0.2]}},
                  "stealth": {"runs": 6}, "transfer": {"judges": [other_judge]}},
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift_project")
    _write_project(root)
    roles = drift_world("stage", base_error=0.1)
    # a second judge model that ignores the biased wording: the transfer table must show no drift for it
    other = scripted_model("drift-judge-immune", judge_script(base_error=0.1, bias_strength=0.0))
    params = _params(roles, other)
    out = run_drift_stage(params, root, "world")
    return {"root": root, "params": params, "out": out}


def test_comparison_table_has_every_method_with_intervals_and_counts(project):
    out = project["root"] / "outputs/drift/world"
    table = pd.read_csv(out / "comparison.csv").set_index("method")
    assert list(table.index) == ["seed", "random", "icl", "textgrad", "ours"]
    for col in ("bench", "target", "gap"):
        assert (table[f"{col}_low"] <= table[col]).all() and (table[col] <= table[f"{col}_high"]).all()
    assert (table["bench_n"] == 12).all() and (table["target_n"] == 12).all()
    assert table.loc["ours", "target"] <= table.loc["seed", "target"] - 0.4
    assert table.loc["ours", "bench"] >= table.loc["seed", "bench"]
    summary = (out / "summary.md").read_text()
    assert "percentile bootstrap over pairs (B=200)" in summary and "n bench / target" in summary
    assert "Embedded model" not in summary and "NOT findings" not in summary  # scripted models here
    assert (out / "comparison.png").stat().st_size > 1000


def test_archive_and_selected_rubric_are_in_ripd_format(project):
    out = project["root"] / "outputs/drift/world"
    lines = read_ripd_lines(out / "archive.jsonl")
    assert lines[0]["prompt_id"] == "seed" and lines[0]["prompt"] == SEED_TEXT
    kids = [r for r in lines if r.get("parent_prompt_id") not in (None, "seed")]
    assert kids and all("gen_step" in r for r in kids)
    archive = pd.read_csv(out / "archive.csv")
    assert len(archive) >= len(lines) - 1  # every candidate, rejected ones included
    assert set(archive["method"]) >= {"random", "icl", "textgrad", "ours"}
    chosen = load_pairwise_rubric(out / "selected.jsonl")  # default: the last line = the search's choice
    assert chosen.name.endswith(":ours") and BIAS_SENTENCE in chosen.text
    seed = load_pairwise_rubric(out / "selected.jsonl", prompt_id="seed")
    assert seed.text == SEED_TEXT


def test_study_stealth_transfer_metrics_and_mlflow(project):
    root = project["root"]
    out = root / "outputs/drift/world"
    study = pd.read_csv(out / "study.csv")
    assert sorted(study["eps_train"]) == [0.05, 0.2] and (study["state"] == "COMPLETE").all()
    table = pd.read_csv(out / "comparison.csv").set_index("method")
    assert table.loc["ours", "win_rate"] == 1.0 and table.loc["ours", "runs_n"] == 6  # longer rubric wins
    trans = pd.read_csv(out / "transfer.csv")
    immune = trans[trans["model"].str.contains("immune")].set_index("rubric")
    assert abs(immune.loc["ours", "target_agreement"] - immune.loc["seed", "target_agreement"]) < 1e-9
    metrics = json.loads((root / "metrics/drift/world.json").read_text())
    assert metrics["ours.test_target"] < metrics["seed.test_target"]
    client = MlflowClient(tracking_uri=tracking_uri(root))
    exp = client.get_experiment_by_name("rubriclab")
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.info.run_name == "drift@world")
    kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(kids) == metrics["candidates.usable"]
    archive = pd.read_csv(out / "archive.csv").set_index("prompt_id")
    for r in kids:  # a candidate's numbers are on its run; one never scored (past the budget) has none
        pid = r.data.params["prompt_id"]
        assert ("val_bench" in r.data.metrics) == bool(pd.notna(archive.loc[pid, "val_bench"]))
        assert client.list_artifacts(r.info.run_id)[0].path == "rubric.json"


def test_transfer_has_a_row_for_every_method_and_judge_model(project):
    """Seed 003 Tables 1–2: transfer rows for every method, not only seed and ours."""
    out = project["root"] / "outputs/drift/world"
    trans = pd.read_csv(out / "transfer.csv")
    methods = list(pd.read_csv(out / "comparison.csv")["method"])
    for model, rows in trans.groupby("model"):
        assert list(rows["rubric"]) == methods, model
    # the immune judge ignores the biased wording: every method's rubric gets the seed's target agreement
    immune = trans[trans["model"].str.contains("immune")].set_index("rubric")
    assert (immune["target_agreement"] - immune.loc["seed", "target_agreement"]).abs().max() < 1e-9
    assert (immune["target_n"] == 12).all() and (immune["bench_n"] == 12).all()


def test_a_rerun_makes_no_provider_call(project, tmp_path):
    before = dict(scripted_provider().calls)
    run_drift_stage(project["params"], project["root"], "world", out_dir=tmp_path / "again")
    assert dict(scripted_provider().calls) == before
    a = pd.read_csv(project["root"] / "outputs/drift/world/comparison.csv")
    b = pd.read_csv(tmp_path / "again/comparison.csv")
    pd.testing.assert_frame_equal(a, b)


def test_cli_search_writes_only_its_own_folder(project, capsys):
    import yaml

    from rubriclab.cli import main

    root = project["root"]
    (root / "cli_params.yaml").write_text(yaml.safe_dump(project["params"]))
    stage_out = root / "outputs/drift/world/comparison.csv"
    before = stage_out.read_bytes()
    calls = dict(scripted_provider().calls)
    assert main(["drift", "search", "--params", str(root / "cli_params.yaml")]) == 0
    printed = capsys.readouterr().out
    assert "Method comparison on test" in printed and "outputs/drift_cli/world" in printed
    assert (root / "outputs/drift_cli/world/selected.jsonl").exists()
    assert stage_out.read_bytes() == before and dict(scripted_provider().calls) == calls


def test_outputs_state_the_budget_the_failed_verdict_rule_and_bh(project):
    out = project["root"] / "outputs/drift/world"
    selection = pd.read_csv(out / "selection.csv").fillna({"budget_note": ""}).set_index("method")
    budget = project["params"]["drift"]["val_budget"]
    for m in ("random", "icl", "textgrad", "ours"):
        r = selection.loc[m]
        assert r["proposed"] >= r["validated"]
        # the whole budget, or the shortfall said beside it (ICL's refinements of the seed are all one text here)
        assert r["validated"] == budget or f"validated {r['validated']} of the {budget}-candidate budget" in r[
            "budget_note"], (m, r.to_dict())
    table = pd.read_csv(out / "comparison.csv").set_index("method")
    assert pd.isna(table.loc["seed", "d_target_p_bh"])
    assert (table.drop(index="seed")["d_target_p_bh"] >= table.drop(index="seed")["d_target_p"] - 1e-12).all()
    summary = (out / "summary.md").read_text()
    assert "no more failed verdicts than the seed's" in summary and "p_BH=" in summary
    assert "Agreement counts a tie as 0.5" in summary  # the paper's tie credit by default
