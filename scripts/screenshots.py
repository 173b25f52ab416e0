"""`make screenshots`: the pictures of the docs (docs/*.png), taken in Debian's headless Chromium from the project's
last run (`make repro`): what a user looks at.

- ``report.png``: the report, ``outputs/report/index.html``.
- ``mlflow_compare.png``: real judges × prompting conditions (nested runs of ``recorded@llmbar_natural``: GPT-4 and
  ChatGPT under Vanilla_NoRules, Vanilla, Metrics) in MLflow's run comparison: the parallel-coordinates plot of
  accuracy with its interval's ends (accuracy_low, accuracy, accuracy_high) by judge and condition, and the metrics
  that differ between the runs; the assistant panel closed.
- ``mlflow_runs.png``: the experiment's runs table.
- ``mlflow_sweep.png``: a δ sweep's trials (the nested trial runs of the first ``repair@<dataset>`` source) in the
  same comparison view: δ and candidates against α and VFR on held-out.
- ``optuna_trials.png``: the same study in the Optuna dashboard (``optuna-dashboard``, from the ``docs`` extra;
  skipped, saying so, when it is not installed).

    .venv/bin/python scripts/screenshots.py [--report PATH] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from mlflow import MlflowClient

from rubriclab.config import find_project_dir, load_params
from rubriclab.testing import browser, mlflow_ui, wait_for_text
from rubriclab.tracking import tracking_uri

JUDGES = ("GPT-4", "ChatGPT")
CONDITIONS = ("Vanilla_NoRules", "Vanilla", "Metrics")
NAMES = ("report", "mlflow_compare", "mlflow_runs", "mlflow_sweep", "optuna_trials")


def _by(name: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, name)


def _stage_runs(client: MlflowClient, exp_id: str) -> list[Any]:
    return client.search_runs([exp_id], max_results=5000, order_by=["attributes.start_time DESC"])


def _children(runs: list[Any], parent: Any) -> list[Any]:
    return [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def _compare_url(ui: dict[str, Any], ids: list[str], exp_id: str) -> str:
    return f"{ui['base']}/#/compare-runs?runs={json.dumps(ids)}&experiments={json.dumps([exp_id])}"


def _close_assistant(driver: Any) -> None:
    for button in driver.find_elements(_by("CSS_SELECTOR"), "button[aria-label='Close']"):
        with contextlib.suppress(Exception):
            button.click()
            time.sleep(1)


def _parallel_metrics(driver: Any, params: list[str] | None, metrics: list[str]) -> None:
    """Set the parallel-coordinates plot's parameters (None: as MLflow chose) and metrics (in this order)."""
    from selenium.webdriver.common.keys import Keys

    boxes = driver.find_elements(_by("CSS_SELECTOR"), "input[role='combobox']")
    targets = ([(boxes[0], params)] if params is not None else []) + [(boxes[1], metrics)]
    for box, wanted in targets:
        box.click()
        for _ in range(8):  # remove what MLflow picked
            box.send_keys(Keys.BACKSPACE)
        for name in wanted:
            box.send_keys(name)
            time.sleep(0.8)
            box.send_keys(Keys.ENTER)
            time.sleep(0.6)
        box.send_keys(Keys.ESCAPE)
    time.sleep(2)


def _crop_above(driver: Any, path: Path, text: str) -> None:
    """Save the page down to (not including) the first element whose text is ``text``."""
    from PIL import Image

    png = driver.get_screenshot_as_png()
    found = driver.find_elements(_by("XPATH"), f"//*[normalize-space(text())='{text}']")
    image = Image.open(io.BytesIO(png))
    ratio = image.width / driver.execute_script("return window.innerWidth")
    if found:
        bottom = int((found[0].location["y"] - 12) * ratio)
        image = image.crop((0, 0, image.width, max(200, min(bottom, image.height))))
    image.save(path)


def _compare_shot(driver: Any, ui: dict[str, Any], ids: list[str], exp_id: str, params: list[str] | None,
                  metrics: list[str], path: Path) -> None:
    driver.set_window_size(1600, 2400)
    driver.get("about:blank")  # a new load: MLflow's app keeps the last comparison's runs on a hash change
    driver.get(_compare_url(ui, ids, exp_id))
    wait_for_text(driver, f"Comparing {len(ids)} Runs")
    time.sleep(3)
    _close_assistant(driver)
    _parallel_metrics(driver, params, metrics)
    for button in driver.find_elements(_by("CSS_SELECTOR"), "button[aria-label='Metrics - Show diff only']"):
        button.click()
        time.sleep(1)
    _crop_above(driver, path, "Artifacts")


def _optuna_dashboard(journal: Path, path: Path, driver: Any) -> bool:
    exe = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent))
    if exe is None or importlib.util.find_spec("optuna_dashboard") is None:
        print(f"skipped {path.name}: optuna-dashboard is not installed (pip install -e \".[docs]\")", file=sys.stderr)
        return False
    from rubriclab.ui import free_port

    port = free_port()
    proc = subprocess.Popen([exe, str(journal), "--port", str(port), "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/studies", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        driver.set_window_size(1500, 1000)
        driver.get(f"{base}/dashboard/studies/0/trials")  # the trial list: each trial's δ, candidates, objectives
        wait_for_text(driver, "Trial 0")
        time.sleep(3)
        driver.save_screenshot(str(path))
        return True
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", default=None, help="the report page (default: outputs/report/index.html)")
    ap.add_argument("--only", nargs="*", choices=NAMES, default=list(NAMES), help="only these pictures")
    args = ap.parse_args(argv)
    project = find_project_dir()
    params = load_params(project / "params.yaml")
    experiment = params.tracking.experiment
    report = Path(args.report) if args.report else project / "outputs/report/index.html"
    if not report.exists():
        print(f"{report}: missing; run `make repro` first", file=sys.stderr)
        return 2
    docs = project / "docs"
    docs.mkdir(exist_ok=True)
    client = MlflowClient(tracking_uri(project))
    exp = client.get_experiment_by_name(experiment)
    runs = _stage_runs(client, exp.experiment_id)
    tops = [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("stage")]
    recorded = next((r for r in tops if r.info.run_name == "recorded@llmbar_natural"), None)
    cells: list[str] = []
    if recorded is not None:
        by_name = {r.info.run_name: r for r in _children(runs, recorded)}
        cells = [by_name[f"{j} · {c}"].info.run_id for j in JUDGES for c in CONDITIONS if f"{j} · {c}" in by_name]
    repair = next((r for r in tops if r.info.run_name.startswith("repair@")), None)
    trials = sorted(_children(runs, repair), key=lambda r: r.info.run_name) if repair is not None else []
    trial_source = trials[0].data.params.get("source") if trials else None
    dataset = repair.info.run_name.split("@", 1)[1] if repair is not None else None
    journal = project / "outputs/repair" / str(dataset) / str(trial_source) / "study.journal"
    wrote = []
    with browser(1400, 1800) as driver:
        if "report" in args.only:
            driver.get(report.as_uri())
            wait_for_text(driver, "Call ledger")
            driver.save_screenshot(str(docs / "report.png"))
            wrote.append("report.png")
        with mlflow_ui(project, experiment) as ui:
            if "mlflow_compare" in args.only and len(cells) >= 2:
                _compare_shot(driver, ui, cells, exp.experiment_id, ["condition", "judge"],
                              ["accuracy_low", "accuracy", "accuracy_high"], docs / "mlflow_compare.png")
                wrote.append("mlflow_compare.png")
            elif "mlflow_compare" in args.only:
                print("skipped mlflow_compare.png: no recorded@llmbar_natural run with its judge × condition runs",
                      file=sys.stderr)
            if "mlflow_sweep" in args.only and len(trials) >= 2:
                ids = [r.info.run_id for r in trials if r.data.params.get("source") == trial_source]
                _compare_shot(driver, ui, ids, exp.experiment_id, ["delta", "candidates"],
                              ["alpha_heldout", "vfr_heldout"], docs / "mlflow_sweep.png")
                wrote.append("mlflow_sweep.png")
            elif "mlflow_sweep" in args.only:
                print("skipped mlflow_sweep.png: no repair sweep trials in the tracking store", file=sys.stderr)
            if "mlflow_runs" in args.only:
                driver.set_window_size(1400, 1100)
                driver.get(ui["url"])
                wait_for_text(driver, "audit@")
                time.sleep(2)
                _close_assistant(driver)
                driver.save_screenshot(str(docs / "mlflow_runs.png"))
                wrote.append("mlflow_runs.png")
        if "optuna_trials" in args.only:
            if journal.is_file():
                if _optuna_dashboard(journal, docs / "optuna_trials.png", driver):
                    wrote.append("optuna_trials.png")
            else:
                print(f"skipped optuna_trials.png: {journal} missing", file=sys.stderr)
    for name in wrote:
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
