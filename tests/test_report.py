"""The HTML report without a browser: sections follow the stages that produced outputs, every image is embedded
(no network, no file reference), the models table and the embedded-model banner come from the stage runs, raw
HTML in a stage's markdown is shown as text, and the ledger totals every stage and role."""

from __future__ import annotations

import json
import re

import pytest

from rubriclab.report import build_report, collect_sections
from rubriclab.tracking import stage_run, tracking_uri

CARD = {"settings": {"confidence": 0.95}, "card": {
    "mine": {"app_in": {"value": 0.8, "low": 0.7, "high": 0.9, "n": 5}, "app_out": {"value": 0.6, "low": 0.5,
             "high": 0.7, "n": 5}, "alpha": {"value": 0.4, "low": 0.2, "high": 0.6, "n": 5},
             "vfr": {"value": 0.1, "low": 0.0, "high": 0.2, "n": 3}},
    "empty": {"K": 0}}}


def _outputs(root):
    audit = root / "outputs/audit/ds"
    audit.mkdir(parents=True)
    (audit / "card.md").write_text("# Audit card: ds\n\n| source | α |\n|---|---|\n| mine | 0.4 [0.2, 0.6] n=5 |\n\n"
                                   "<script>alert('x')</script>\n")
    (audit / "card.json").write_text(json.dumps(CARD))
    (audit / "mine.reliability.per_criterion.csv").write_text("criterion,alpha\nc1,0.4\n")
    align = root / "outputs/align/demo"
    (align / "training").mkdir(parents=True)
    (align / "summary.md").write_text("# Propagation through DPO: demo\n\nwin rates here\n")


LEDGER = [{"stage": "audit@ds", "role": "judge", "items": 10, "cache_hits": 4, "calls": 6, "retries": 1,
           "parse_failures": 0, "transport_failures": 0, "failed": 0, "prompt_tokens": 100,
           "completion_tokens": 10, "cost": 0.0}]


def test_sections_follow_the_outputs(tmp_path):
    _outputs(tmp_path)
    ids = [s["id"] for s in collect_sections(tmp_path, LEDGER, "calls.sqlite")]
    assert ids == ["audit-ds", "align-demo", "ledger"]


@pytest.fixture
def report(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _outputs(tmp_path)
    with stage_run("audit", "audit@ds", {}, tmp_path, tags={"models": "local/smollm2-135m",
                                                            "embedded_model": "True"}) as run:
        run_id = run.run_id
    res = build_report(tmp_path, tmp_path / "outputs/report", tracking_uri=tracking_uri(tmp_path),
                       experiment="rubriclab", ledger_rows=LEDGER, store="calls.sqlite", ui_url="http://ui:9")
    return res, res["path"].read_text(), run_id


def test_the_page_is_self_contained(report):
    res, html, _ = report
    assert html.count("<img") == 2  # the two audit scatter plots
    assert re.findall(r'src="(?!data:image/png;base64,)', html) == []
    assert "<link" not in html and "<script" not in html


def test_raw_html_in_a_stage_summary_is_text(report):
    _, html, _ = report
    assert "&lt;script&gt;alert" in html


def test_models_runs_and_banner(report):
    res, html, run_id = report
    assert res["embedded"] == ["audit@ds"] and 'id="embedded-banner"' in html
    assert 'href="http://ui:9/#/experiments/' in html and f"/runs/{run_id}" in html
    assert "No MLflow run named <code>align@demo</code>" in html  # a section without its run says so


def test_the_ledger_totals_every_row(report):
    _, html, _ = report
    ledger = html.split('id="ledger"')[1]
    assert "audit@ds" in ledger and "TOTAL" in ledger and "cache hits" in ledger


def test_scatter_leaves_out_sources_without_values(report):
    _, html, _ = report
    assert "Not plotted (no value on this axis): empty." in html


def test_rubriclab_ui_serves_the_project_store_offline_on_the_runs_table(tmp_path, monkeypatch, capsys):
    import subprocess

    import yaml

    from rubriclab.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"tracking": {"experiment": "exp"}}))
    with stage_run("audit", "audit@ds", {}, tmp_path, experiment="exp"):
        pass
    seen = {}

    def fake_run(argv, env=None, **kw):
        seen.update(argv=argv, env=env)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    assert main(["ui", "--port", "5999"]) == 0
    argv = seen["argv"]
    assert argv[1:4] == ["-m", "mlflow", "ui"] and argv[argv.index("--backend-store-uri") + 1] == tracking_uri(tmp_path)
    assert argv[argv.index("--port") + 1] == "5999"
    assert seen["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    out = capsys.readouterr().out
    assert re.search(r"http://127\.0\.0\.1:5999/#/experiments/\d+/runs\?workflowType=machine_learning", out)
