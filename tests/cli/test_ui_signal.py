"""`rubriclab ui` stopped by a signal takes its server with it (issue 26): SIGTERM (or SIGINT, SIGHUP) to the
`rubriclab ui` process reaches the `mlflow ui` child and the worker that child starts (MLflow runs uvicorn as a
child of its own), `rubriclab ui` waits for them, and the port is free again.

The real code path runs: `rubriclab ui` (the CLI's `main`) in a subprocess, with only the server's command line
swapped for a stub that behaves like `mlflow ui` — it starts a worker process that listens on the port, and it
dies on SIGTERM without passing the signal on. Every wait is bounded; whatever the test started is killed by
its recorded pid at the end."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from rubriclab.owner import process_alive  # a zombie holds no port and counts as gone

pytestmark = [pytest.mark.timeout(180), pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

# the stand-in for `mlflow ui`: a server process that starts a listening worker (uvicorn), records both pids
STUB_SERVER = textwrap.dedent('''
    import json, os, socket, subprocess, sys, time
    pidfile, port = sys.argv[1], int(sys.argv[2])
    worker = subprocess.Popen([sys.executable, "-c", (
        "import socket, sys, time\\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\\n"
        f"s.bind(('127.0.0.1', {port})); s.listen()\\n"
        "print('listening', flush=True)\\n"
        "time.sleep(600)\\n")], stdout=subprocess.PIPE)
    assert worker.stdout.readline().strip() == b"listening"
    with open(pidfile + ".tmp", "w") as f:
        json.dump({"server": os.getpid(), "worker": worker.pid}, f)
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(600)
''')

# `rubriclab ui` itself, its server's command line pointed at the stub
DRIVER = textwrap.dedent('''
    import sys
    from rubriclab import ui
    from rubriclab.cli import main

    stub, pidfile, port = sys.argv[1], sys.argv[2], sys.argv[3]
    real = ui.ui_command

    def ui_command(project, experiment, host="127.0.0.1", port=5000, workers=1):
        cmd = real(project, experiment, host=host, port=port, workers=workers)
        return {**cmd, "argv": [sys.executable, stub, pidfile, str(port)]}

    ui.ui_command = ui_command
    sys.exit(main(["ui", "--port", port]))
''')


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"tracking": {"experiment": "exp"}}))
    (tmp_path / "stub_server.py").write_text(STUB_SERVER)
    (tmp_path / "driver.py").write_text(DRIVER)
    return tmp_path


@pytest.mark.parametrize("sig, expected", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 0),
                                           (signal.SIGHUP, 128 + signal.SIGHUP)], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_to_rubriclab_ui_stops_its_server_and_frees_the_port(project, sig, expected):
    from rubriclab.ui import free_port

    port = free_port()
    pidfile = project / "pids.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    # its own session: the test's signal goes to `rubriclab ui` alone, as `kill PID` or a supervisor sends it
    log = open(project / "ui.log", "wb")  # noqa: SIM115 - closed below; a file, never a pipe the server holds
    driver = subprocess.Popen([sys.executable, str(project / "driver.py"), str(project / "stub_server.py"),
                               str(pidfile), str(port)], cwd=project, env=env, start_new_session=True,
                              stdout=log, stderr=subprocess.STDOUT)

    def output() -> str:
        return (project / "ui.log").read_text(errors="replace")[-2000:]

    pids: dict[str, int] = {}
    try:
        assert _wait(lambda: pidfile.exists() or driver.poll() is not None, 120), "the stub server did not start"
        assert driver.poll() is None, output()
        pids = json.loads(pidfile.read_text())
        assert process_alive(pids["server"]) and process_alive(pids["worker"]) and not _port_free(port)

        driver.send_signal(sig)
        try:
            code = driver.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("`rubriclab ui` did not exit within 30 s of the signal")
        # it waited for its server; the worker the server started is gone too, and the port is free
        assert not process_alive(pids["server"]), "the server outlived `rubriclab ui`"
        assert _wait(lambda: not process_alive(pids["worker"]), 5), "the server's worker outlived `rubriclab ui`"
        assert _wait(lambda: _port_free(port), 5), f"port {port} is still taken"
        assert code == expected, output()
    finally:
        for pid in [driver.pid, *pids.values()]:  # only what this test started, by pid
            if process_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if driver.poll() is None:
            driver.wait(timeout=10)
        log.close()


def test_serve_returns_the_servers_exit_code_when_it_stops_by_itself(tmp_path):
    from rubriclab.ui import FORWARDED, serve

    before = {sig: signal.getsignal(sig) for sig in FORWARDED}
    assert serve([sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert {sig: signal.getsignal(sig) for sig in FORWARDED} == before  # this process's handlers are restored
