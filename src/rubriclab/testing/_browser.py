"""A real browser for tests and screenshots: Debian's headless Chromium driven by Selenium (its chromedriver
from the same Debian package, never a downloaded browser build), and the MLflow UI served on a free local port."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rubriclab.errors import MissingDependencyError, RubricLabError

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


class BrowserNotFoundError(MissingDependencyError, RuntimeError):
    """Chromium or its driver is not installed (apt-get install chromium chromium-driver). A RuntimeError too, as it was
    before it joined the hierarchy."""

    def __init__(self, message: str) -> None:
        RubricLabError.__init__(self, message)


def find_browser() -> tuple[str, str]:
    """(chromium binary, chromedriver) from the system packages."""
    binary = next((p for p in CHROMIUM if os.path.exists(p)), None) or shutil.which("chromium")
    driver = next((p for p in CHROMEDRIVER if os.path.exists(p)), None) or shutil.which("chromedriver")
    if not binary or not driver:
        raise BrowserNotFoundError("headless Chromium and chromedriver are not installed; install them with "
                                   "`apt-get install chromium chromium-driver` (scripts/install.sh does)")
    return binary, driver


@contextmanager
def browser(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium WebDriver that records the page console (``driver.get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = find_browser()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for_text(driver: Any, text: str, timeout: float = 60.0) -> str:
    """Poll the page's visible text until it contains ``text``; returns the text (raises TimeoutError)."""
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        try:
            body = driver.find_element("tag name", "body").text
        except Exception:  # noqa: BLE001 - the page is still loading
            body = ""
        if text in body:
            return body
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} did not appear on {driver.current_url} within {timeout:.0f}s; the page shows: "
                       f"{body[:400]!r}")


@contextmanager
def mlflow_ui(project: Path, experiment: str = "rubriclab", timeout: float = 120.0) -> Iterator[dict[str, Any]]:
    """``rubriclab ui``'s server (the same command line and environment) on a free port, until the block ends: the
    command's dict, ``base`` (the server's address) and ``pid`` (the server's process and process group)."""
    from rubriclab.ui import free_port, stop_group, ui_command

    cmd = ui_command(Path(project), experiment, port=free_port())
    log_path = Path(project) / ".rubriclab" / "mlflow-ui.log"  # git-ignored, beside the call store
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd["argv"], env=cmd["env"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = cmd["url"].split("#")[0].rstrip("/")
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow ui exited with {proc.returncode}: " + log_path.read_text()[-2000:])
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"mlflow ui did not answer on {base} within {timeout:.0f}s")
            time.sleep(0.5)
        yield {**cmd, "base": base, "pid": proc.pid}  # pid: also the process group of the server and its workers
    finally:
        # the whole group, as `rubriclab ui` does: a SIGTERM to `mlflow ui` alone waited ~10 s for its uvicorn child
        stop_group(proc.pid, grace=20.0)
        proc.wait()
        log.close()
