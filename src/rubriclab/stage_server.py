"""A warm stage server: stage processes forked from an interpreter that has already imported what stages import.

Every stage process used to spend ~5-6 s of one core importing litellm, MLflow, pandas, scipy and matplotlib before
its first line of work (benchmarks/stage_startup.py): a minute of `dvc repro`, and most of a small test project's
repro. ``python -m rubriclab.stages NAME ARGS`` (what scripts/stage runs) asks a server for a process instead:

- the first stage of a process group starts the server in the background (stdio on a log file, the same process
  group, so a kill of the group is a kill of its stages) and runs itself the usual way;
- each later stage connects, hands over its stdin/stdout/stderr (SCM_RIGHTS), argv, cwd and environment; the server
  answers "ready" and forks on the client's "go" (a client that gave up waiting sends none and runs the stage
  itself, so no stage runs twice); the child takes them and runs ``rubriclab.stages.NAME`` as ``__main__``, as
  ``python -m`` would;
- the server reports the child's pid (the client forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to it) and then its wait
  status; the client exits with it (128 + N for signal N), and the child kills itself if its client dies.

A server serves one key: interpreter, its flags, process group, working directory, umask and the whole environment
(a variable a module reads when it is imported is then the same as in a fresh process). It preloads no module that
starts thread pools or reads thread settings on import (torch, llama.cpp, numba, sentence-transformers: ``UNSAFE``),
refuses to fork if one got loaded, answers "stale" and exits once a rubriclab source file it loaded changes, and exits
after ``IDLE_S`` seconds without a stage. ``RUBRICLAB_STAGE_SERVER=0`` turns it off (every stage a fresh process).

Every stage process, served or fresh, and the server itself end through ``exit_stage`` (re-exported by
``rubriclab.stages``): the atexit handlers run, the interpreter's teardown of the imported modules does not.
"""

from __future__ import annotations

import atexit
import fcntl
import gc
import hashlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from rubriclab.errors import ArgumentError
from rubriclab.owner import process_alive

IDLE_S = 30.0  # a server with no stage for this long exits (a dvc repro starts its next stage within a second or two)
READY_TIMEOUT_S = 120.0  # a client waits this long for a starting server's answer, then runs the stage itself
POLL_S = 0.02
UNSAFE = ("torch", "llama_cpp", "numba", "sentence_transformers", "transformers")
PRELOAD = ("litellm", "mlflow", "mlflow.store.tracking.sqlalchemy_store", "matplotlib.pyplot",
           *(f"rubriclab.stages.{s}" for s in ("data", "discover", "repair", "audit", "drift", "probe",
                                                "recorded", "report", "align")))
_KEY_IGNORED = ("_", "OLDPWD", "PWD", "SHLVL", "DVC_STAGE")  # set per command (shells; dvc: the stage name), read by no import
_HEADER = struct.Struct("!I")
# the server process's command (python -c): this module imported, not run as __main__ (a second copy of it, whose
# exit_stage would not be the one the stages call)
SERVER_MAIN = "import sys; from rubriclab.stage_server import main; main(sys.argv[1:])"


_exit_status: int | None = None  # set by exit_stage: this process is a stage's __main__ and is ending


def _skip_teardown() -> None:
    """End a finished stage process without the interpreter's teardown of the ~6,000 modules it imported (litellm's,
    pydantic's, torch's objects freed one by one: ~2 s of every stage process on 2 cores, measured in
    benchmarks/stage_startup.py). Registered when this module is imported (``rubriclab.stages`` imports it first, the
    server's process starts with it), before any module a stage imports can register its own, so it runs after every
    other atexit handler (they run last-in, first-out): non-daemon threads are joined, MLflow's and litellm's
    handlers and the call stores' close (``rubriclab.llm._store``) have run; then garbage is collected and the
    streams flushed. Only the modules' teardown is skipped. Does nothing unless
    ``exit_stage`` is ending the process."""
    if _exit_status is None:
        return
    # Unreachable cycles still hold SQLite cursors: collected, their connections really close (the call store's WAL
    # is checkpointed into calls.sqlite, as at a normal exit). ~0.4 s of the ~2 s the full teardown took.
    gc.collect()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be written anyway
            pass
    os._exit(_exit_status)


atexit.register(_skip_teardown)


def exit_stage(status: int) -> NoReturn:
    """``sys.exit(status)`` for a stage's ``__main__`` (also how the warm stage server, its forked stages and the
    ``rubriclab`` command end): the usual exit (threads joined, atexit handlers run), then the process ends with
    ``status`` without tearing the imported modules down (``_skip_teardown``)."""
    end_without_teardown(status)
    sys.exit(status)


def end_without_teardown(status: int) -> None:
    """Make this process, whenever it exits, end as ``exit_stage`` ends a stage: with ``status``, after the atexit
    handlers registered after this module was imported. For a process whose exit is someone else's code (a test
    suite's xdist worker)."""
    global _exit_status
    _exit_status = int(status)


def enabled(env: dict[str, str] | None = None) -> bool:
    """On unless ``RUBRICLAB_STAGE_SERVER`` is 0/false/no/off; Linux only (macOS frameworks are not fork-safe)."""
    return sys.platform.startswith("linux") and (env if env is not None else os.environ).get(
        "RUBRICLAB_STAGE_SERVER", "1").lower() not in ("0", "false", "no", "off")


def _flags() -> list[str]:
    import subprocess

    return subprocess._args_from_interpreter_flags()  # what multiprocessing passes its children, e.g. -X, -W, -O


def server_key() -> str:
    umask = os.umask(0o22)
    os.umask(umask)
    env = sorted((k, v) for k, v in os.environ.items() if k not in _KEY_IGNORED)
    ident = [os.path.realpath(sys.executable), _flags(), os.getpgrp(), os.getcwd(), umask, env]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]


def socket_path(key: str | None = None) -> Path | None:
    """``<dir>/rubriclab-stage-<uid>/<key>.sock`` in $XDG_RUNTIME_DIR, else the temporary directory, else /tmp: the
    first where the path fits a Unix socket's ~100 bytes (a test's $TMPDIR often does not); None if none does."""
    name = f"rubriclab-stage-{os.getuid()}/{key or server_key()}.sock"
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if base and len(os.fsencode(path := Path(base) / name)) < 100:
            return path
    return None


def _private_dir(path: Path) -> bool:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o077


# -- client ------------------------------------------------------------------------------------------------------
def run_direct(module: str, args: list[str]) -> NoReturn:
    """The stage in this process, as ``python -m MODULE ARGS`` (exec: same pid, same exit status)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *_flags(), "-m", module, *args])


def _start_server(path: Path) -> None:
    """Start this key's server and wait until it listens (it binds first, then imports)."""
    import subprocess

    with open(path.with_suffix(".log"), "ab") as log:  # the server's own stdout/stderr
        proc = subprocess.Popen([sys.executable, *_flags(), "-c", SERVER_MAIN, str(path)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True)
    deadline = time.monotonic() + 30
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _connect(path: Path) -> socket.socket | None:
    """A connection to a live server at ``path``, else None after starting one there (under a lock, once)."""
    if not _private_dir(path.parent):
        return None
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(path))
            return conn
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
        path.unlink(missing_ok=True)  # a dead server's socket file
        _start_server(path)  # the next stage waits in its backlog while it imports; this one runs itself
        return None


def _usable(fd: int) -> int:
    """``fd``, or /dev/null in its place where the caller closed it (a stage started with stdin closed)."""
    try:
        os.fstat(fd)
        return fd
    except OSError:
        return os.open(os.devnull, os.O_RDWR)


def _recv_line(conn: socket.socket, buf: bytearray) -> dict[str, Any] | None:
    while b"\n" not in buf:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


def _exit_code(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)


def run(module: str, args: list[str]) -> NoReturn:
    """Run ``module`` (a stage, ``rubriclab.stages.NAME``) as ``__main__`` with ``args`` in a process forked by this
    key's server, or in this process (``python -m``) when there is none yet or it is turned off."""
    path = socket_path() if enabled() else None
    conn = _connect(path) if path is not None else None
    if conn is None:
        run_direct(module, args)
    request = json.dumps({"argv": [module, *args], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    sys.stdout.flush()
    sys.stderr.flush()
    socket.send_fds(conn, [_HEADER.pack(len(request)) + request], [_usable(fd) for fd in (0, 1, 2)])
    conn.settimeout(READY_TIMEOUT_S)
    buf = bytearray()
    try:
        first = _recv_line(conn, buf)
    except (TimeoutError, OSError):
        first = None
    if first is None or not first.get("ready"):  # no answer in time, or "stale": a rubriclab file changed since
        conn.close()  # the server loaded it; without our "go" the server forks nothing for this request
        run_direct(module, args)
    conn.settimeout(None)
    conn.sendall(b"go\n")
    pid = int(_recv_line(conn, buf)["pid"])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    while True:
        try:
            done = _recv_line(conn, buf)
            break
        except InterruptedError:
            continue
    if done is None:  # the server alone was killed: its status is lost, but the stage must not outlive this
        while process_alive(pid):
            time.sleep(0.2)
        print(f"{module}: the stage server went away before reporting the exit status of stage process {pid}",
              file=sys.stderr)
        os._exit(1)
    os._exit(_exit_code(int(done["status"])))


# -- server ------------------------------------------------------------------------------------------------------
def _loaded_sources() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every rubriclab source file this server loaded, its own (``__main__``) included."""
    out = {}
    for key, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and (key.startswith("rubriclab") or key == "__main__"):
            st = os.stat(f)
            out[f] = (st.st_mtime_ns, st.st_size)
    return out


def _stale(sources: dict[str, tuple[int, int]]) -> bool:
    for f, sig in sources.items():
        try:
            st = os.stat(f)
        except OSError:
            return True
        if (st.st_mtime_ns, st.st_size) != sig:
            return True
    return False


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n and (chunk := conn.recv(n - len(data))):
        data += chunk
    return data


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags_, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < _HEADER.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ArgumentError("malformed stage request")
    (size,) = _HEADER.unpack_from(data)
    body = bytearray(data[_HEADER.size:])
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ArgumentError("truncated stage request")
        body += chunk
    return json.loads(body), fds


def serve(path: Path) -> tuple[dict[str, Any], socket.socket] | None:
    """The server's loop. Returns None in the server when it exits; in a forked child, the child's request and its
    client connection (the caller then runs the stage)."""
    _sweep(path.parent)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    ident, server_pid = os.stat(path).st_ino, os.getpid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C reaches the stages themselves (same group)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    unsafe = sorted(m for m in UNSAFE if m in sys.modules)
    sources = _loaded_sources()
    listener.settimeout(POLL_S)
    clients: dict[int, socket.socket] = {}
    last = time.monotonic()
    print(f"stage server {os.getpid()}: ready at {path}" + (f"; will not fork: {unsafe} loaded" if unsafe else ""),
          flush=True)
    try:
        while clients or time.monotonic() - last < IDLE_S:
            while clients:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                conn = clients.pop(pid, None)
                if conn is not None:
                    _send(conn, {"status": status})
                    conn.close()
                last = time.monotonic()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(10)  # a client sends its request at once, and its "go" as soon as it reads "ready"
            try:
                request, fds = _recv_request(conn)
            except (ValueError, OSError):
                conn.close()
                continue
            if unsafe or _stale(sources):  # the client runs the stage itself
                for fd in fds:
                    os.close(fd)
                _send(conn, {"stale": True})
                conn.close()
                if unsafe:
                    last = time.monotonic()
                    continue
                break
            _send(conn, {"ready": True})
            try:  # a client that stopped waiting (it runs the stage itself) sends no "go": nothing is forked
                go = _recv_exactly(conn, 3) == b"go\n"
            except OSError:
                go = False
            if not go:
                for fd in fds:
                    os.close(fd)
                conn.close()
                continue
            conn.settimeout(None)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in clients.values():
                    other.close()
                _adopt(request, fds)
                return request, conn
            for fd in fds:
                os.close(fd)
            clients[pid] = conn
            _send(conn, {"pid": pid})
            print(f"stage server {server_pid}: stage process {pid} for {' '.join(request['argv'])}", flush=True)
    finally:
        if os.getpid() == server_pid and _same_socket(path, ident):  # not in a forked child, not another's
            path.unlink(missing_ok=True)
            path.with_suffix(".log").unlink(missing_ok=True)  # a server that ends by itself leaves no log
    for pid, conn in clients.items():  # only after a "stale" answer: let the running stages finish and report
        _, status = os.waitpid(pid, 0)
        _send(conn, {"status": status})
        conn.close()
    return None


def _sweep(folder: Path, older_than_s: float = 86400) -> None:
    """Remove what killed servers left (a socket, its log and lock) more than a day ago."""
    cutoff = time.time() - older_than_s
    for f in folder.iterdir():
        try:
            if f.suffix in (".sock", ".log", ".lock") and f.lstat().st_mtime < cutoff:
                f.unlink()
        except OSError:
            pass


def _same_socket(path: Path, ident: int) -> bool:
    try:
        return os.stat(path).st_ino == ident
    except OSError:
        return False


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    try:
        conn.sendall(json.dumps(msg).encode() + b"\n")
    except OSError:  # the client is gone (killed): nobody to tell
        pass


def _adopt(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the client's process (its streams, directory, environment, argv)."""
    import io

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = sys.stdout.write_through  # -u or PYTHONUNBUFFERED (the same environment started the server)
    encoding = sys.stdout.encoding
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                                  encoding=encoding, errors=sys.stdin.errors)
    for fd, name, errors in ((1, "stdout", sys.stdout.errors), (2, "stderr", "backslashreplace")):
        tty = os.isatty(fd)
        raw = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(raw if unbuffered else io.BufferedWriter(raw), encoding=encoding, errors=errors,
                                  line_buffering=tty or name == "stderr", write_through=unbuffered)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    if "numpy" in sys.modules:  # random reseeds itself after a fork; numpy's legacy global state does not
        sys.modules["numpy"].random.seed()


def watch_client(conn: socket.socket) -> None:
    """In the forked child: die with the client (a SIGKILL of it must not leave the stage running)."""
    def wait() -> None:
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait, name="rubriclab-stage-client", daemon=True).start()


def _status(code: object) -> int:
    """The exit status ``raise SystemExit(code)`` gives a Python process (a non-int is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str]) -> NoReturn:
    """The server, then (in each forked child) the requested stage. Both end through ``exit_stage``: atexit handlers
    run, the teardown of the preloaded modules is skipped (~2.3 s of a core: a stage that exits by ``sys.exit`` or
    argparse, and the server after its idle time, paid it)."""
    served = serve(Path(argv[0]))
    if served is None:
        exit_stage(0)
    request, conn = served
    watch_client(conn)
    import runpy

    module, *args = request["argv"]
    sys.argv = [module, *args]
    # as in a `python -m` process, the stage module exists only as __main__: runpy warns on stderr ("found in
    # sys.modules ... prior to execution") about the copy the server preloaded, so that copy goes
    sys.modules.pop(module, None)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        exit_stage(_status(exc.code))
    exit_stage(0)

