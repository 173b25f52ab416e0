"""The probe stage end to end on a temporary project with scripted models and the packaged demo rubric items:
per-dataset probe tables with intervals, cross-dataset transfer, both counterfactual tables, the semantic plots,
metrics and an MLflow run; a re-run makes no provider call; the CLI writes only its own folder."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from rubriclab.cli import main
from rubriclab.stages.probe import run_probe_stage
from rubriclab.testing import fake_embedding, scripted_model, scripted_provider


def _first_user(messages):
    return next(str(m["content"]) for m in messages if m["role"] == "user")


def _judge(messages, params):
    text = _first_user(messages)
    item = text.split("Rubric item:", 1)[1]
    response = text.split("Response:", 1)[1].split("Rubric item:", 1)[0]
    if "VIOLATES" in response or "does not" in item.lower():
        return "No"
    if "SATISFIES" in response:
        return "Yes"
    return "Yes" if len(item.split()) % 2 == 0 else "No"  # a verdict that depends on the item's wording


def _generator(messages, params):
    text = _first_user(messages)
    if "clearly does what the rubric item describes" in text:
        return "SATISFIES: here is a careful answer that covers the point."
    if "Rubric item:" in text:
        return "VIOLATES: a short answer that skips the point."
    return "A generated answer."


def _refiner(messages, params):
    item = re.search(r'Original rubric item: <criterion>(.*)</criterion>', _first_user(messages), re.S).group(1)
    return f"The response does not: {item}"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe_project")
    roles = {
        "judge": {"model": scripted_model("probe-stage-judge", _judge), "parse_retries": 0, "concurrency": 8},
        "generator": {"model": scripted_model("probe-stage-gen", _generator), "temperature": 0.7, "concurrency": 8},
        "refiner": {"model": scripted_model("probe-stage-ref", _refiner), "concurrency": 8},
        "embedder": {"model": scripted_model("probe-stage-emb", lambda m, p: fake_embedding(m[0]["content"]))},
    }
    params = {"llm": {"store": ".rubriclab/calls.sqlite", "roles": roles}, "data": {"seed": 42},
              "probe": {"datasets": {"hb": {"path": "demo:healthbench"}, "rr": {"path": "demo:researchrubrics"}},
                        "n_boot": 500, "cv_folds": 3, "counterfactual": {"datasets": ["hb"], "n_items": 6}}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    out = run_probe_stage(params, root)
    return {"root": root, "params": params, "out": out}


def test_probe_tables_have_every_model_and_metric_with_intervals(project):
    out = project["root"] / "outputs/probe"
    for name in ("hb", "rr"):
        table = pd.read_csv(out / f"{name}.probe.csv")
        assert set(table["model"]) == {"majority", "nb", "lr", "embed"}
        assert {"balanced_accuracy", "f1", "roc_auc"} <= set(table["metric"])
        ok = table.dropna(subset=["estimate", "low", "high"])
        assert len(ok) and ((ok["low"] <= ok["estimate"] + 1e-9) & (ok["estimate"] <= ok["high"] + 1e-9)).all()
        items = pd.read_parquet(out / f"{name}.items.parquet")
        assert set(items["label"].dropna().unique()) == {0.0, 1.0}
    transfer = pd.read_csv(out / "transfer.csv")
    assert set(zip(transfer["train"], transfer["test"])) == {("hb", "rr"), ("rr", "hb")}
    summary = (out / "summary.md").read_text()
    assert "percentile bootstrap (B=500) over records" in summary and "Cross-dataset transfer" in summary
    assert "NOT findings" not in summary  # scripted models here, not the embedded one


def test_counterfactual_tables_follow_the_scripted_judge(project):
    out = project["root"] / "outputs/probe"
    res = project["out"]
    summary = (out / "summary.md").read_text()
    assert "output perturbation" in summary and "rubric perturbation" in summary
    table = pd.read_csv(out / "hb.output_perturbation.transitions.csv", index_col=0)
    assert table.to_numpy().sum() == 6
    metrics = json.loads((project["root"] / "metrics/probe.json").read_text())
    # the scripted judge reads the generated response: every satisfying/violating pair is a desired flip
    assert metrics["hb.output_perturbation.desired_flip_rate"] == 1.0
    # and "does not" in the reversed item always reads as not met: a flip only where the original was met
    assert 0 <= metrics["hb.rubric_perturbation.desired_flip_rate"] <= 1
    assert res["metrics"].keys() == metrics.keys()


def test_semantic_plots_and_mlflow(project):
    sem = project["root"] / "outputs/probe/semantics"
    pngs = sorted(p.name for p in sem.glob("*.png"))
    assert {"lexical_cues.png", "lr_weights.png", "word_counts.png", "topics.png", "projection.png"} <= set(pngs)
    assert all((sem / p).stat().st_size > 1000 for p in pngs)


def test_a_rerun_makes_no_provider_call_and_the_cli_writes_its_own_folder(project, capsys):
    root = project["root"]
    before = dict(scripted_provider().calls)
    stage_csv = (root / "outputs/probe/hb.probe.csv").read_bytes()
    assert main(["probe", "--params", str(root / "params.yaml"), "--out", str(root / "cli_out")]) == 0
    assert dict(scripted_provider().calls) == before
    assert (root / "cli_out/hb.probe.csv").read_bytes() == stage_csv
    assert "Probe on held-out records" in capsys.readouterr().out


def test_the_same_tests_apply_to_a_pairwise_rubric_set(project, tmp_path):
    from rubriclab.data import Pair, write_pairs

    root = project["root"]
    pairs = [Pair(id=f"p{i}", domain="helpful", prompt=f"How do I do task {i}?", chosen=f"Step by step for {i}.",
                  rejected="No idea.") for i in range(4)]
    write_pairs(pairs, root / "outputs/data/premise/demo_helpful/audit.parquet")
    (root / "rs.yaml").write_text("- id: concrete_steps\n  description: The response gives concrete steps.\n"
                                  "- id: names_risks\n  description: The response names the main risk.\n")
    params = {**project["params"], "probe": {**project["params"]["probe"], "rubric_sets": {"max_pairs": 4},
                                             "counterfactual": {"datasets": ["rubric_set:rs"], "n_items": 4}}}
    out = run_probe_stage(params, root, rubric_files=[root / "rs.yaml"], out_dir=tmp_path / "rs")
    items = out["labelled"]["rubric_set:rs"]
    assert len(items) == 2 * 4 * 2  # criteria × pairs × (chosen, rejected)
    assert set(items["response_source"]) == {"pair:chosen", "pair:rejected"}
    assert (tmp_path / "rs/rubric_set_rs.output_perturbation.transitions.csv").exists()
    assert out["metrics"]["rubric_set_rs.output_perturbation.desired_flip_rate"] == 1.0
