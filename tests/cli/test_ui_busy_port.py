"""`rubriclab ui` on a busy port and after a SIGKILL (issue 59): a second `rubriclab ui` on a port that another
process holds says which process, in one line, and exits non-zero (it used to print a URL, log "address already in
use" and exit 0); and a `rubriclab ui` killed with SIGKILL — no handler runs — still takes its server and the
server's worker with it (a guard in the server's process group sees its parent gone), so the port is free again.

The real `rubriclab ui` runs in a subprocess with only the server's command line swapped for the stub of
tests/cli/test_ui_signal.py (a server that starts a listening worker). Whatever a test started is killed by pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import yaml

from rubriclab.owner import process_alive
from tests.cli.test_ui_signal import DRIVER, STUB_SERVER, _port_free, _wait

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

# holds a port the way a leftover uvicorn does: listening, nothing else
HOLDER = textwrap.dedent('''
    import socket, sys, time
    s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
    print("listening", flush=True)
    time.sleep(600)
''')


@pytest.fixture
def project(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"tracking": {"experiment": "exp"}}))
    (tmp_path / "stub_server.py").write_text(STUB_SERVER)
    (tmp_path / "driver.py").write_text(DRIVER)
    return tmp_path


def _env() -> dict[str, str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _kill(*pids: int) -> None:
    for pid in pids:
        if pid and process_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_busy_port_is_named_with_its_process_and_exits_non_zero(project):
    from rubriclab.ui import free_port

    port = free_port()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(port)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"listening"
        proc = subprocess.run([sys.executable, str(project / "driver.py"), str(project / "stub_server.py"),
                               str(project / "pids.json"), str(port)], cwd=project, env=_env(), capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"port {port} on 127.0.0.1 is in use by pid {holder.pid}" in proc.stderr
        assert "MLflow UI:" not in proc.stdout and not (project / "pids.json").exists()  # no server was started
        assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        _kill(holder.pid)
        holder.wait(timeout=10)


def test_sigkill_to_rubriclab_ui_still_stops_its_server_and_frees_the_port(project):
    from rubriclab.ui import free_port

    port = free_port()
    pidfile = project / "pids.json"
    log = open(project / "ui.log", "wb")  # noqa: SIM115 - closed below; a file, never a pipe the server holds
    driver = subprocess.Popen([sys.executable, str(project / "driver.py"), str(project / "stub_server.py"),
                               str(pidfile), str(port)], cwd=project, env=_env(), start_new_session=True,
                              stdout=log, stderr=subprocess.STDOUT)
    pids: dict[str, int] = {}
    try:
        assert _wait(lambda: pidfile.exists() or driver.poll() is not None, 120), "the stub server did not start"
        assert driver.poll() is None, (project / "ui.log").read_text()
        pids = json.loads(pidfile.read_text())
        assert process_alive(pids["server"]) and process_alive(pids["worker"]) and not _port_free(port)
        driver.kill()  # SIGKILL: rubriclab ui runs no handler, forwards nothing
        driver.wait(timeout=10)
        assert _wait(lambda: not process_alive(pids["server"]), 10), "the server outlived a SIGKILLed rubriclab ui"
        assert _wait(lambda: not process_alive(pids["worker"]), 10), "the worker outlived a SIGKILLed rubriclab ui"
        assert _wait(lambda: _port_free(port), 5), f"port {port} is still taken"
    finally:
        _kill(driver.pid, *pids.values())
        if driver.poll() is None:
            driver.wait(timeout=10)
        log.close()
