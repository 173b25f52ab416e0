"""The `recorded@<name>` stage and the `rubriclab recorded` verb: params section, outputs, metrics, one MLflow run
per source with a nested run per judge × condition, no model call."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from rubriclab import settings as schema
from rubriclab.config import load_params
from rubriclab.errors import ConfigError
from rubriclab.recorded import FORMATS, format_names

pytest.importorskip("mlflow")

JUDGMENTS = [
    {"pair_id": f"p{i}", "judge": judge, "condition": cond, "order": order, "verdict": verdict,
     "label": "1" if i % 3 else "2", "output_1": "x" * (10 + i), "output_2": "y" * 12}
    for i in range(8) for judge in ("judge-a", "judge-b") for cond in ("plain", "rules")
    for order, verdict in (("original", "first" if (i + len(judge + cond)) % 4 else "second"),
                           ("swapped", "second" if i % 2 else "first"))
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    pd.DataFrame(JUDGMENTS).to_csv(tmp_path / "judgments.csv", index=False)
    params = {"tracking": {"experiment": "rubriclab"},
              "recorded": {"n_boot": 50, "seed": 1, "baseline": "plain", "contrasts": {"with rules": ["rules", "plain"]},
                           "contrast_judges": ["judge-b"],
                           "sources": {"demo": {"path": "judgments.csv", "format": "table", "title": "A demo table"}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_stage_writes_card_metrics_and_nested_runs(project):
    from mlflow import MlflowClient

    from rubriclab.stages.recorded import main
    from rubriclab.tracking import tracking_uri

    assert main(["demo"]) == 0
    out = project / "outputs/recorded/demo"
    for name in ("card.md", "card.json", "card.csv", "comparisons.csv", "contrasts.csv", "agreement.csv",
                 "majority.csv", "biases.csv", "judgments.parquet"):
        assert (out / name).is_file(), name
    md = (out / "card.md").read_text()
    assert "Real judges" in md and "judge-a, judge-b" in md and "A demo table" in md and "ledger: 0 calls" in md
    assert "embedded" not in md.lower()
    card = json.loads((out / "card.json").read_text())
    acc = card["cells"][0]["metrics"]["accuracy"]
    assert acc["method"] == "percentile bootstrap" and acc["level"] == 0.95 and acc["n"] == 8
    assert {r["family"] for r in card["comparisons"]} == {"judge:judge-a", "judge:judge-b", "condition:plain",
                                                          "condition:rules"}
    within = [r for r in card["comparisons"] if r["family"] == "judge:judge-a"]
    assert all(r["b"] == "plain" for r in within) and all("mde" in r and "p_adjusted" in r for r in within)
    contrasts = card["contrasts"]  # one family per metric: judge-b's "with rules" alone
    assert [(r["metric"], r["judge"], r["contrast"], r["a"], r["b"], r["family_size"]) for r in contrasts] == [
        ("accuracy", "judge-b", "with rules", "rules", "plain", 1),
        ("positional_agreement", "judge-b", "with rules", "rules", "plain", 1)]
    same = next(r for r in card["comparisons"] if r["family"] == "judge:judge-b" and r["metric"] == "accuracy")
    assert contrasts[0]["diff"] == same["diff"] and contrasts[0]["low"] == same["low"]
    assert "## Contrasts" in md and "**with rules** (rules − plain)" in md
    assert len(pd.read_csv(out / "contrasts.csv")) == 2
    metrics = json.loads((project / "metrics/recorded/demo.json").read_text())
    assert metrics["contrasts"]["judge-b · with rules · accuracy"]["diff"] == contrasts[0]["diff"]
    assert metrics["model_calls"] == 0 and metrics["cells"]["judge-a"]["plain"]["n_pairs"] == 8
    csv = pd.read_csv(out / "card.csv")
    assert len(csv) == 4 and set(csv["interval_method"]) == {"percentile bootstrap"}
    assert set(csv["interval_level"]) == {0.95} and set(csv["accuracy_n"]) == {8} and set(csv["source"]) == {"demo"}
    assert set(pd.read_csv(out / "agreement.csv")["between"]) == {"judges"}
    client = MlflowClient(tracking_uri=tracking_uri(project))
    exp = client.get_experiment_by_name("rubriclab")
    runs = client.search_runs([exp.experiment_id])
    parent = [r for r in runs if r.info.run_name == "recorded@demo"]
    assert len(parent) == 1 and parent[0].data.tags["format"] == "table"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert sorted((r.data.params["judge"], r.data.params["condition"]) for r in children) == [
        ("judge-a", "plain"), ("judge-a", "rules"), ("judge-b", "plain"), ("judge-b", "rules")]
    assert all("accuracy" in r.data.metrics and "accuracy_low" in r.data.metrics for r in children)


def test_unknown_source_is_one_line_exit_2(project, capsys):
    from rubriclab.stages import run_stage
    from rubriclab.stages.recorded import main

    assert run_stage(lambda: main(["nope"]), "recorded") == 2
    err = capsys.readouterr().err
    assert "recorded.sources has no 'nope'; configured: demo" in err and err.count("\n") == 1


def test_cli_verb_ad_hoc_source(project, capsys):
    from rubriclab.cli import main

    rc = main(["recorded", "--path", str(project / "judgments.csv"), "--format", "table", "--no-track",
               "--out", str(project / "adhoc")])
    assert rc == 0
    assert (project / "adhoc/card.md").is_file() and not (project / "metrics/recorded").exists()
    assert "judge-a" in capsys.readouterr().out


def test_params_section_is_validated(project):
    assert schema.RECORDED_FORMATS == FORMATS == tuple(format_names())  # the formats folder, every module registered
    load_params(project / "params.yaml")
    with pytest.raises(ConfigError, match=r"recorded\.sources\.demo\.format: got 'csv'; expected one of "
                                          + ", ".join(FORMATS)):
        load_params(project / "params.yaml", ["recorded.sources.demo.format=csv"])
    with pytest.raises(ConfigError, match=r"recorded\.sources\.x\.path: missing"):
        load_params(project / "params.yaml", ["recorded.sources.x={format: table}"])
    with pytest.raises(ConfigError, match=r"recorded\.n_boot: got 0"):
        load_params(project / "params.yaml", ["recorded.n_boot=0"])
    with pytest.raises(ConfigError, match=r"recorded\.contrasts\.x: .*expected \[condition a, condition b\]"):
        load_params(project / "params.yaml", ["recorded.contrasts={x: [a]}"])
    with pytest.raises(ConfigError, match=r"recorded\.sources\.demo\.contrast_judges"):
        load_params(project / "params.yaml", ["recorded.sources.demo.contrast_judges=judge-a"])


def test_settings_of_the_typed_sections_contrasts(project):
    from rubriclab.recorded import Settings

    def settings(given):
        p = schema.Params.of(given)
        return Settings.of(p.recorded, p.recorded.sources["demo"])

    params = load_params(project / "params.yaml").given()  # the file's dict, edited below
    s = settings(params)
    assert s.contrasts == (("with rules", "rules", "plain"),) and s.contrast_judges == ("judge-b",)
    assert s.n_boot == 50 and s.confidence == schema.Recorded().confidence
    params["recorded"]["sources"]["demo"]["contrasts"] = {}  # a source's own value wins; {}: no contrasts
    assert settings(params).contrasts == ()
    del params["recorded"]["contrasts"], params["recorded"]["sources"]["demo"]["contrasts"]
    assert settings(params).contrasts is None  # the importer's own (LLMBar's)
    with pytest.raises(ConfigError, match="expected \\[name, condition a, condition b\\]"):
        Settings(contrasts=(("x", "a", "a"),))
