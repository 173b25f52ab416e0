"""The MLflow UI and the HTML report, checked in a real browser (Debian's headless Chromium via Selenium).

A small pipeline run (the data stage and two audit runs on scripted judges) fills a tracking store; `rubriclab
ui`'s server is started on a free local port; the browser opens the experiment (its runs table, not the GenAI
traces page), the comparison of the two audit runs (a metric value), and a rubric artifact (its text). The
report built from the same project opens offline with every section, every image loaded and no console error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient

from rubriclab.owner import group_members
from rubriclab.stages.audit import run_audit_stage
from rubriclab.stages.data import run_data_stage
from rubriclab.stages.report import run_report_stage
from rubriclab.testing import BrowserNotFoundError, browser, find_browser, mlflow_ui, scripted_model, wait_for_text
from rubriclab.tracking import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, tracking_uri
from tests.audit.test_audit_stage import _params, _rubrics, universal_judge

try:
    find_browser()
    NO_BROWSER = None
except BrowserNotFoundError as exc:
    NO_BROWSER = str(exc)

pytestmark = [pytest.mark.skipif(NO_BROWSER is not None, reason=NO_BROWSER or ""), pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser_project")
    _rubrics(root)
    params = _params(scripted_model("browser_judge", universal_judge),
                     scripted_model("browser_judge2", universal_judge), sources=["mine"], axes=["structure", "fit"])
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    run_data_stage(params, root)
    first = run_audit_stage(params, root, "demo_helpful")
    params2 = json.loads(json.dumps(params))
    params2["audit"]["sources"] = ["mine", "other"]
    second = run_audit_stage(params2, root, "demo_helpful")
    client = MlflowClient(tracking_uri(root))
    exp = client.get_experiment_by_name("rubriclab")
    runs = client.search_runs([exp.experiment_id], filter_string="attributes.run_name = 'audit@demo_helpful'")
    report = run_report_stage(params, root)
    return {"root": root, "exp": exp, "runs": runs, "first": first, "second": second, "client": client,
            "report": report, "params": params}


@pytest.fixture(scope="module")
def driver():
    """One browser for the module, each test opening its page in it: a new Chromium per test loaded and compiled
    MLflow's UI bundle again (the file took 66 CPU-s alone with one browser per test, 46 with this one). The
    report's test reads the console from its own page on (it drops what the MLflow pages logged first)."""
    with browser() as d:
        yield d


@pytest.fixture(scope="module")
def ui(project):
    """One `rubriclab ui` server for the module's MLflow checks (it only reads the store). Starting the server is
    most of a test's time."""
    with mlflow_ui(project["root"]) as server:
        yield server


def _group_commands(pgid: int) -> list[str]:
    """The command lines of the live processes in process group ``pgid``."""
    out = []
    for pid in group_members(pgid) or {}:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # ended while being read
    return out


def test_the_server_runs_without_mlflows_job_runner(ui):
    """MLflow 3 starts a job runner (a supervisor and eight huey consumers) beside a database-backed server unless
    told not to; `rubriclab ui` tells it (benchmarks/ui_startup.py: 13 s to answer instead of 5 on 2 cores)."""
    commands = _group_commands(ui["pid"])
    assert any("mlflow" in c and " ui " in c for c in commands), commands  # the group is the server's
    assert not [c for c in commands if "huey" in c or "_job_runner" in c], commands


def test_the_experiment_opens_on_its_runs_table(project, ui, driver):
    assert project["exp"].tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    driver.get(ui["url"])
    body = wait_for_text(driver, "audit@demo_helpful")
    assert "data@" in body  # the data stage's run is listed too
    assert "/runs" in driver.current_url and "genai" not in driver.current_url
    assert "matching runs" in body


def test_the_comparison_of_two_audit_runs_shows_a_metric(project, ui, driver):
    a, b = project["runs"][:2]
    key = "mine.acc_direct"  # among the first metric columns the comparison table renders
    value = a.data.metrics[key]
    exp = project["exp"].experiment_id
    driver.get(f"{ui['base']}/#/compare-runs?runs={json.dumps([a.info.run_id, b.info.run_id])}"
               f"&experiments={json.dumps([exp])}")
    body = wait_for_text(driver, "Comparing 2 Runs")
    body = wait_for_text(driver, key)
    assert "audit@demo_helpful" in body and "sources" in body  # the runs differ by audit.sources
    metrics = body.split("Metrics", 1)[1]
    assert f"{value:g}" in metrics.split("Artifacts")[0]


def test_a_rubric_artifact_shows_its_text(project, ui, driver):
    client = project["client"]
    parent = project["runs"][0]
    children = client.search_runs([project["exp"].experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    child = next(r for r in children if r.info.run_name.endswith("-mine"))
    driver.get(f"{ui['base']}/#/experiments/{project['exp'].experiment_id}/runs/{child.info.run_id}"
               "/artifactPath/rubric.json")
    wait_for_text(driver, "Answers the question first.")


def test_the_report_opens_offline_with_every_section_and_image(project, driver):
    report = project["report"]
    expected = {s["id"] for s in report["sections"]}
    assert {"audit-demo_helpful", "ledger"} <= expected
    driver.get_log("browser")  # read (and so drop) what the MLflow pages before it logged
    driver.get(report["path"].as_uri())
    wait_for_text(driver, "Call ledger")
    shown = {e.get_attribute("id") for e in driver.find_elements("css selector", "section.stage")}
    assert shown == expected
    images = driver.find_elements("tag name", "img")
    assert images, "the audit section draws its scatter plots"
    broken = [i.get_attribute("alt") for i in images
              if not driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i)]
    assert not broken, f"images that did not load: {broken}"
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    run_id = project["runs"][0].info.run_id
    assert run_id in driver.find_element("id", "audit-demo_helpful").text
    assert driver.find_elements("id", "embedded-banner") == []  # scripted models: no embedded-model banner


def test_the_report_loses_no_section(project, tmp_path):
    """A section whose stage ran must be there: remove the audit outputs and the audit section goes."""
    import shutil

    root = project["root"]
    backup = tmp_path / "audit"
    shutil.move(root / "outputs/audit", backup)
    try:
        res = run_report_stage(project["params"], root, out_dir=tmp_path / "r", track=False)
    finally:
        shutil.move(backup, root / "outputs/audit")
    assert not any(s["id"].startswith("audit-") for s in res["sections"])
