"""`make screenshots`: PNGs of the report and of the MLflow run comparison for the README (docs/), taken in
Debian's headless Chromium after `make repro`."""

from __future__ import annotations

import json
import sys
import time

from mlflow import MlflowClient

from rubriclab.config import find_project_dir, get, load_params
from rubriclab.testing import browser, mlflow_ui, wait_for_text
from rubriclab.tracking import tracking_uri


def main() -> int:
    project = find_project_dir()
    params = load_params(project / "params.yaml")
    experiment = get(params, "tracking.experiment", "rubriclab")
    report = project / "outputs/report/index.html"
    if not report.exists():
        print(f"{report}: missing; run `make repro` first", file=sys.stderr)
        return 2
    docs = project / "docs"
    docs.mkdir(exist_ok=True)
    client = MlflowClient(tracking_uri(project))
    exp = client.get_experiment_by_name(experiment)
    runs = [r for r in client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"],
                                          max_results=500)
            if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("stage")]
    # the comparison shows runs that differ in something that matters: real judges × prompting conditions from the
    # recorded-verdicts stage (nested runs of recorded@llmbar_natural); else two audit runs
    recorded = [r for r in runs if r.data.tags.get("stage") == "recorded" and r.data.tags.get("format") == "llmbar"]
    cells = []
    if recorded:
        children = client.search_runs([exp.experiment_id], max_results=500,
                                      filter_string=f"tags.mlflow.parentRunId = '{recorded[0].info.run_id}'")
        wanted = [(j, c) for j in ("GPT-4", "ChatGPT") for c in ("Vanilla_NoRules", "Vanilla", "Metrics")]
        by_cell = {(r.data.tags.get("judge"), r.data.tags.get("condition")): r for r in children}
        cells = [by_cell[w] for w in wanted if w in by_cell]
    audits = [r for r in runs if r.data.tags.get("stage") == "audit"]
    pair = cells if len(cells) >= 2 else (audits[:2] if len(audits) >= 2 else runs[:2])
    with browser(1400, 1800) as driver:
        driver.get(report.as_uri())
        wait_for_text(driver, "Call ledger")
        driver.save_screenshot(str(docs / "report.png"))
        with mlflow_ui(project, experiment) as ui:
            ids = [r.info.run_id for r in pair]
            driver.set_window_size(1400, 1100)
            driver.get(f"{ui['base']}/#/compare-runs?runs={json.dumps(ids)}&experiments={json.dumps([exp.experiment_id])}")
            wait_for_text(driver, f"Comparing {len(ids)} Runs")
            time.sleep(3)  # let the plots draw
            driver.save_screenshot(str(docs / "mlflow_compare.png"))
            driver.get(ui["url"])
            wait_for_text(driver, "audit@")
            time.sleep(2)
            driver.save_screenshot(str(docs / "mlflow_runs.png"))
    for name in ("report.png", "mlflow_compare.png", "mlflow_runs.png"):
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
