"""The warm stage server (rubriclab.stage_server): a stage forked from it behaves as the same stage started fresh.

Each test starts its clients in a session of their own (its own process group, so its own server) and kills that
group at the end, server included; the tests that need only a warm server share one group (``shared_workdir``).
The byte-for-byte equality of a served pipeline's outputs with a fresh-process one is
tests/stages/test_reliability_faults.py's (its faulty run turns the server off).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rubriclab import stage_server
from rubriclab.owner import process_alive

# a stand-in stage: what it sees, as JSON on stdout; its stdin on stderr; "sleep" waits for a signal
STAGE = textwrap.dedent("""
    import json, os, sys, time
    from rubriclab.stage_server import UNSAFE
    if sys.argv[1:] == ["sleep"]:
        open("stage.pid", "w").write(str(os.getpid()))
        time.sleep(120)
    sys.stderr.write("stdin: " + sys.stdin.read())
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "var": os.environ.get("STAGE_VAR"),
                      "pid": os.getpid(), "ppid": os.getppid(), "warm": "litellm" in sys.modules,
                      "unsafe": [m for m in UNSAFE if m in sys.modules], "main": __name__}))
    sys.exit(3)
""")
CLIENT = "import sys; from rubriclab.stage_server import run; run(sys.argv[1], sys.argv[2:])"


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "stand_in_stage.py").write_text(STAGE)
    procs: list[subprocess.Popen] = []
    yield tmp_path, procs
    for p in procs:  # the clients' groups hold their servers
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def shared_workdir(tmp_path_factory):
    """One process group (so one server) for the tests that only need a warm one: each server's start-up imports cost
    ~6 s of a core. A sleeping leader keeps the group alive between them (the server leaves after 30 idle seconds;
    the next client then starts another)."""
    root = tmp_path_factory.mktemp("stage_server_shared")
    (root / "stand_in_stage.py").write_text(STAGE)
    leader = subprocess.Popen(["sleep", "900"], process_group=0)  # a group of its own, in this session
    yield root, [leader]
    os.killpg(leader.pid, signal.SIGKILL)
    leader.wait(timeout=30)


def _env(var: str = "x") -> dict[str, str]:
    """A client's environment (part of the server's key): the server on, STAGE_VAR=var."""
    env = dict(os.environ, STAGE_VAR=var)
    env.pop("RUBRICLAB_STAGE_SERVER", None)
    env.pop("PYTEST_CURRENT_TEST", None)  # pytest's per-test name: the tests sharing a group share its server
    return env


def _client(workdir, *args: str, var: str = "x", module: str = "stand_in_stage") -> subprocess.Popen:
    root, procs = workdir
    env = _env(var)  # the stand-in stage is found in the working directory
    # the first client leads a new process group and the others join it: one key, one server (the fixture kills it)
    proc = subprocess.Popen([sys.executable, "-c", CLIENT, module, *args], cwd=root, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            process_group=procs[0].pid if procs else 0)
    procs.append(proc)
    return proc


def _finish(proc: subprocess.Popen, stdin: str = "") -> tuple[int, dict, str]:
    out, err = proc.communicate(stdin, timeout=120)
    return proc.returncode, (json.loads(out) if out.strip() else {}), err


def _server_log(workdir) -> str:
    """The log of the server of this test's process group (its key is computed in a process of the group)."""
    return Path(_socket_path(workdir)).with_suffix(".log").read_text()


def _socket_path(workdir) -> str:
    root, procs = workdir
    return subprocess.run([sys.executable, "-c", "from rubriclab.stage_server import socket_path; "
                           "print(socket_path())"], cwd=root, env=_env(), capture_output=True, text=True,
                          process_group=procs[0].pid, check=True).stdout.strip()


@pytest.mark.timeout(180)
def test_a_served_stage_sees_what_a_fresh_one_sees(workdir):
    root = workdir[0]
    first = _finish(_client(workdir, "--flag", "a b"), "hello\n")
    # the first stage of a process group runs itself (and starts the server in the background)
    assert first[0] == 3 and first[1]["warm"] is False and first[2] == "stdin: hello\n"
    second = _finish(_client(workdir, "--flag", "a b"), "again\n")
    assert second[0] == 3, second[2]
    assert second[2] == "stdin: again\n"  # the caller's stdin and stderr
    got, fresh = second[1], first[1]
    assert got["warm"] is True and got["unsafe"] == [] and got["main"] == "__main__"
    assert {k: got[k] for k in ("argv", "cwd", "var")} == {k: fresh[k] for k in ("argv", "cwd", "var")} == {
        "argv": ["--flag", "a b"], "cwd": str(root), "var": "x"}
    assert got["ppid"] != workdir[1][1].pid  # forked by the server, not run by the client
    assert f"stage process {got['pid']} for stand_in_stage --flag a b" in _server_log(workdir)
    # a stage module the server preloaded runs as __main__ without runpy's warning about the module already imported
    served = _client(workdir, "--help", module="rubriclab.stages.report")
    out, err = served.communicate(timeout=120)
    assert (served.returncode, err) == (0, "") and out.startswith("usage: python -m rubriclab.stages.report [-h]\n")
    assert "for rubriclab.stages.report --help" in _server_log(workdir)


@pytest.mark.timeout(180)
def test_another_environment_gets_another_server(workdir):
    _finish(_client(workdir))
    assert _finish(_client(workdir))[1]["warm"] is True
    other = _finish(_client(workdir, var="y"))  # a variable read on import could differ: not this server's key
    assert other[1]["var"] == "y" and other[1]["warm"] is False


@pytest.mark.timeout(180)
def test_a_signal_to_the_client_ends_the_stage_and_becomes_the_clients_status(shared_workdir):
    client, pid = _served_sleeper(shared_workdir)
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=30) == 128 + signal.SIGTERM  # scripts/stage names the signal from this
    _wait_gone(pid)


@pytest.mark.timeout(180)
def test_a_stage_dies_with_its_sigkilled_client(shared_workdir):
    client, pid = _served_sleeper(shared_workdir)
    client.kill()
    client.wait(timeout=30)
    _wait_gone(pid)


def test_the_server_is_off_when_asked():
    assert stage_server.enabled({}) and stage_server.enabled({"RUBRICLAB_STAGE_SERVER": "1"})
    assert not any(stage_server.enabled({"RUBRICLAB_STAGE_SERVER": v}) for v in ("0", "off", "false", "no"))


def test_the_key_covers_the_environment_and_the_working_directory(monkeypatch, tmp_path):
    key = stage_server.server_key()
    monkeypatch.setenv("DVC_STAGE", "another@stage")  # dvc sets it per stage; nothing reads it on import
    assert stage_server.server_key() == key
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert stage_server.server_key() != key
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.chdir(tmp_path)
    assert stage_server.server_key() != key


def test_the_stage_command_rejects_an_unknown_stage():
    proc = subprocess.run([sys.executable, "-m", "rubriclab.stages", "no_such_stage"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "no stage module rubriclab.stages.no_such_stage" in proc.stderr


def _served_sleeper(workdir) -> tuple[subprocess.Popen, int]:
    """A stage command whose stage (forked by the group's server: a first client starts it if none runs) sleeps;
    its pid."""
    _finish(_client(workdir))
    (workdir[0] / "stage.pid").unlink(missing_ok=True)  # an earlier sleeper's, in a shared folder
    client = _client(workdir, "sleep")
    pid = _wait_pid(workdir[0])
    assert pid != client.pid
    return client, pid


def _wait_pid(root: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        f = root / "stage.pid"
        if f.exists() and f.read_text():
            return int(f.read_text())
        time.sleep(0.05)
    raise AssertionError("the sleeping stage never started")


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if not process_alive(pid):  # a zombie (dead, not reaped yet by the server) counts as gone
            return
        time.sleep(0.05)
    raise AssertionError(f"stage process {pid} still runs")


@pytest.mark.timeout(180)
def test_a_request_whose_client_stopped_waiting_forks_nothing(shared_workdir):
    """A client that gave up on a slow server runs the stage itself; the server must not run it a second time."""
    workdir = shared_workdir  # this test's many helper calls
    import socket as socketlib
    import struct

    root = workdir[0]
    _finish(_client(workdir))  # starts this group's server
    path = _socket_path(workdir)
    request = json.dumps({"argv": ["stand_in_stage", "marker"], "cwd": str(root), "env": _env()}).encode()
    conn = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    conn.connect(path)
    socketlib.send_fds(conn, [struct.pack("!I", len(request)) + request], [0, 1, 2])
    assert json.loads(conn.makefile().readline()) == {"ready": True}
    conn.close()  # no "go"
    time.sleep(1)
    assert _finish(_client(workdir))[1]["warm"] is True  # the server still serves
    assert "for stand_in_stage marker" not in _server_log(workdir)


# a stage that ends by sys.exit: its atexit handler must run, its module's teardown (a global's __del__) must not
EXITING_STAGE = textwrap.dedent("""
    import atexit, sys

    class Sentinel:
        def __del__(self):
            sys.stderr.write("module torn down\\n")

    sentinel = Sentinel()
    atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
    print("done")
    sys.exit(5)
""")


@pytest.mark.timeout(180)
def test_a_served_stage_ends_with_its_status_and_atexit_handlers_but_no_module_teardown(shared_workdir):
    """The forked child ends through rubriclab.stages.exit_stage whatever way the stage exits: the teardown of the
    server's preloaded modules cost every such served stage ~2.3 s of a core."""
    (shared_workdir[0] / "exiting_stage.py").write_text(EXITING_STAGE)
    _finish(_client(shared_workdir))  # the group's server runs
    proc = _client(shared_workdir, module="exiting_stage")
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err) == (5, "done\n", "atexit ran\n")
    assert "for exiting_stage" in _server_log(shared_workdir)  # served, not run by the client
    fresh = subprocess.run([sys.executable, "exiting_stage.py"], cwd=shared_workdir[0], capture_output=True,
                           text=True, timeout=60)
    assert (fresh.returncode, fresh.stderr) == (5, "atexit ran\nmodule torn down\n")  # what the check tells apart


@pytest.mark.timeout(180)
def test_a_changed_rubriclab_source_sends_stages_back_to_fresh_processes(workdir):
    # last in the file: a server that loaded the touched file leaves (the shared group's too)
    _finish(_client(workdir))
    assert _finish(_client(workdir))[1]["warm"] is True
    source = Path(stage_server.__file__)
    st = source.stat()
    try:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        # the server answers "stale" and exits; the client runs the stage itself
        assert _finish(_client(workdir))[1]["warm"] is False
    finally:
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
