"""The probe stage end to end on a temporary project with scripted models and the packaged demo rubric items:
per-dataset probe tables with intervals, cross-dataset transfer, both counterfactual tables, the semantic plots,
metrics and an MLflow run; a re-run makes no provider call; the CLI writes only its own folder."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient

from rubriclab.cli import main
from rubriclab.stages.probe import run_probe_stage
from rubriclab.testing import fake_embedding, scripted_model, scripted_provider
from rubriclab.tracking import tracking_uri


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
                        "n_boot": 500, "cv_folds": 3, "counterfactual": {"datasets": ["hb"], "n_items": 6},
                        # PCA: UMAP's numba functions compile in each process that projects (10-30 s of this
                        # fixture on 2 cores); the UMAP branch is tests/probe/test_probe_semantics.py's
                        "projection": "pca"}}
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
        assert ((ok["low"] <= ok["estimate"] + 1e-9) & (ok["estimate"] <= ok["high"] + 1e-9)).all()
        # the demo's held-out sets are a few clusters: every value without an interval says why
        bare = table[table["estimate"].notna() & table["low"].isna()]
        assert len(bare) and bare["reason"].str.startswith("no interval: ").all()
        items = pd.read_parquet(out / f"{name}.items.parquet")
        assert set(items["label"].dropna().unique()) == {0.0, 1.0}
    transfer = pd.read_csv(out / "transfer.csv")
    assert set(zip(transfer["train"], transfer["test"])) == {("hb", "rr"), ("rr", "hb")}
    summary = (out / "summary.md").read_text()
    assert "percentile bootstrap (B=500) over record-text clusters" in summary and "Cross-dataset transfer" in summary
    assert "texts on both sides: 0" in summary
    # a leakage line per cohort, estimated or not; no cell shows a bare number where its interval is missing
    assert summary.count("Rubric prior leakage: ") == 2
    assert "n items (clusters)" in summary and "(no interval: " in summary
    assert not re.search(r"\| \d\.\d{3} \|", summary)
    assert "NOT findings" not in summary  # scripted models here, not the embedded one


def _original_label(criterion: str) -> int:
    """What _judge says on a demo HealthBench response (no SATISFIES/VIOLATES in it), from the text alone."""
    return int("does not" not in criterion.lower() and len(criterion.split()) % 2 == 0)


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
    # the refiner writes "The response does not: <item>", which _judge always reads as not met, so the reversed
    # label is 0: a flip exactly where the original label is 1, and never 0 -> 1
    rows = pd.read_csv(out / "hb.rubric_perturbation.items.csv")
    assert len(rows) == 6 and rows["record_id"].is_unique  # one rubric item per conversation
    items = pd.read_parquet(out / "hb.items.parquet").set_index("item_id")
    sampled = items.loc[rows["item_id"], "label"]
    expected = float((sampled == 1).mean())
    assert expected == float(rows["criterion"].map(_original_label).mean())  # the judge is the script above
    assert 0 < expected < 1  # the sample holds both labels, so the known answer is not a boundary value
    assert metrics["hb.rubric_perturbation.desired_flip_rate"] == pytest.approx(expected)
    counts = rows["transition"].value_counts()
    assert counts.get("flip_0_to_1", 0) == 0 and counts.get("sticky_satisfied", 0) == 0
    assert counts.get("flip_1_to_0", 0) == int((sampled == 1).sum())
    assert res["metrics"].keys() == metrics.keys()


def test_semantic_plots_per_dataset_and_mlflow(project):
    root = project["root"]
    for name in ("hb", "rr"):  # one folder per dataset: no analysis pools them
        sem = root / "outputs/probe/semantics" / name
        pngs = sorted(p.name for p in sem.glob("*.png"))
        assert {"lexical_cues.png", "lr_weights.png", "word_counts.png", "topics.png", "projection.png"} <= set(pngs)
        assert all((sem / p).stat().st_size > 1000 for p in pngs)
        notes = (sem / "semantics_notes.md").read_text()
        items = pd.read_parquet(root / f"outputs/probe/{name}.items.parquet")
        n0, n1 = int((items["label"] == 0).sum()), int((items["label"] == 1).sum())
        assert f"{name}: n = {n0} not satisfied (0) / {n1} satisfied (1)" in notes
        assert pd.read_csv(sem / "projection.csv")["method"].eq("PCA").all()  # probe.projection reached it
        assert "PCA, as asked (probe.projection: pca)" in notes
    assert not list((root / "outputs/probe/semantics").glob("*.png"))
    # the stage's MLflow run: the run id it recorded, its params, metrics and artifacts
    record = json.loads((root / "outputs/probe/mlflow_run.json").read_text())
    client = MlflowClient(tracking_uri(root))
    run = client.get_run(record["run_id"])
    assert run.info.run_name == "probe" and run.info.status == "FINISHED"
    assert run.data.tags["stage"] == "probe" and run.data.tags["adhoc"] == "False"
    assert run.data.tags["datasets"] == "hb, rr"
    assert run.data.params["probe.cv_folds"] == "3" and run.data.params["probe.n_boot"] == "500"
    metrics = json.loads((root / "metrics/probe.json").read_text())
    assert run.data.metrics == pytest.approx(metrics, abs=1e-6)  # metrics.json rounds to 6 decimals
    arts = {a.path for a in client.list_artifacts(record["run_id"])}
    assert {"summary.md", "semantics", "hb", "rr"} <= arts
    sem = {a.path for a in client.list_artifacts(record["run_id"], "semantics/hb")}
    assert "semantics/hb/lr_weights.png" in sem and "semantics/hb/semantics_notes.md" in sem


def test_a_rerun_makes_no_provider_call_and_the_cli_writes_its_own_folder(project, capsys):
    root = project["root"]
    before = dict(scripted_provider().calls)
    stage_csv = (root / "outputs/probe/hb.probe.csv").read_bytes()
    assert main(["probe", "--params", str(root / "params.yaml"), "--out", str(root / "cli_out")]) == 0
    assert dict(scripted_provider().calls) == before
    assert (root / "cli_out/hb.probe.csv").read_bytes() == stage_csv
    assert "Probe on held-out clusters" in capsys.readouterr().out


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


def test_the_items_table_names_its_source_the_same_way_on_every_machine(tmp_path, monkeypatch):
    """The items table stores where its rubric items came from (parquet metadata, so in the stage's output hash).
    A shipped demo is named by its spec, not by the package's install path (an editable install of another
    checkout wrote another path and another dvc.lock); a project file is named relative to the project, whatever
    the working folder."""
    from rubriclab.settings import Probe
    from rubriclab.stages.probe import load_datasets

    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    own = project / "data" / "items.jsonl"
    own.write_text(json.dumps({"prompt_id": "p1", "prompt": "Q?", "completion": "A.",
                               "rubrics": [{"criterion": "Is correct.", "points": 5, "tags": []}]}) + "\n")
    monkeypatch.chdir(tmp_path)  # not the project: the repository's src/ is not below it either
    probe = Probe.model_validate({"datasets": {"demo": {"path": "demo:healthbench"},
                                               "own": {"path": "data/items.jsonl"}}})
    frames = load_datasets(project, probe)
    assert frames["demo"].attrs["file"] == "demo:healthbench"
    assert frames["own"].attrs["file"] == "data/items.jsonl"
    written = tmp_path / "items.parquet"
    frames["demo"].to_parquet(written)
    assert "demo:healthbench" in json.dumps(pd.read_parquet(written).attrs)
