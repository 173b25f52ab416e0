"""A throwaway PostgreSQL server for tests: ``with postgres_server() as url: ...``.

Uses the server binaries of the Debian/Ubuntu ``postgresql`` package (``/usr/lib/postgresql/<v>/bin``)
or whatever ``initdb``/``pg_ctl`` is on PATH. The cluster lives in a temporary directory, trusts local
connections (no password), listens on 127.0.0.1 on a free port with its unix socket inside the temporary
directory, and is stopped and deleted on exit. ``initdb`` refuses to run as root, so under root the
server runs as the ``postgres`` system user (which the package creates).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rubriclab.errors import MissingDependencyError, RubricLabError

__all__ = ["PostgresNotFoundError", "find_postgres_bindir", "postgres_server"]

_INSTALL_HINT = "apt-get install -y postgresql (Debian/Ubuntu; the server binaries land in /usr/lib/postgresql/<v>/bin)"


class PostgresNotFoundError(MissingDependencyError):
    """The PostgreSQL server binaries (initdb, pg_ctl) are not installed."""

    def __init__(self, detail: str = "") -> None:
        msg = ("a throwaway PostgreSQL server needs the PostgreSQL server binaries (initdb, pg_ctl), "
               f"which were not found under /usr/lib/postgresql/*/bin or on PATH{detail}. Install with: {_INSTALL_HINT}")
        RubricLabError.__init__(self, msg)


def _version_key(path: str) -> tuple[int, ...]:
    m = re.search(r"/postgresql/([\d.]+)/bin", path)
    return tuple(int(p) for p in m.group(1).split(".") if p) if m else (0,)


def find_postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest /usr/lib/postgresql/<v>/bin first, then PATH),
    or None when the server binaries are not installed."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    for d in candidates:
        if all(os.access(os.path.join(d, exe), os.X_OK) for exe in ("initdb", "pg_ctl")):
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(tmp: Path) -> list[str]:
    """Command prefix that runs a program as the user owning the cluster (``postgres`` when we are root)."""
    if os.geteuid() != 0:
        return []
    import pwd

    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresNotFoundError(" (running as root, and there is no 'postgres' system user to run the server as;"
                                    " the postgresql package creates it)") from None
    for p in [tmp, *tmp.rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid)
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--"] if runuser else ["su", "postgres", "-s", "/bin/sh", "-c"]


def _run(prefix: list[str], argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    if prefix and prefix[0] == "su":  # su takes one shell command line
        argv = [shlex.join(argv)]
    return subprocess.run([*prefix, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no server log)"


@contextmanager
def postgres_server(*, timeout: float = 60.0) -> Iterator[str]:
    """Start a throwaway PostgreSQL server and yield its SQLAlchemy URL,
    ``postgresql+psycopg://postgres@127.0.0.1:PORT/postgres`` (trust authentication, no password).

    The server runs with fsync off (test data only). It is stopped (immediate mode) and its directory removed on
    exit, also when the body raises. Raises :class:`PostgresNotFoundError` (a ``MissingDependencyError``) when the
    server binaries are not installed, and ``RuntimeError`` with the server log's tail when it does not start.
    """
    bindir = find_postgres_bindir()
    if bindir is None:
        raise PostgresNotFoundError()
    # under root the server user must reach the directory: /tmp is world-traversable, $TMPDIR may not be
    tmp = Path(tempfile.mkdtemp(prefix="rubriclab-pg-", dir="/tmp" if os.geteuid() == 0 else None))
    data, log = tmp / "data", tmp / "server.log"
    started = False
    prefix: list[str] = []
    try:
        os.chmod(tmp, 0o700)
        prefix = _as_server_user(tmp)
        r = _run(prefix, [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                          "--no-locale", "--no-sync"], tmp, timeout)
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
        last_error = ""
        for _attempt in range(3):  # the free port may be taken between probing and binding: try another
            port = _free_port()
            opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {shlex.quote(str(tmp))} -c fsync=off "
                    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
            r = _run(prefix, [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", str(int(timeout)),
                              "-o", opts, "start"], tmp, timeout + 10)
            if r.returncode == 0:
                started = True
                break
            last_error = f"pg_ctl start failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-1000:]}"
            _run(prefix, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], tmp, 30)
        if not started:
            raise RuntimeError(f"{last_error}\nserver log (last lines):\n{_tail(log)}")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            _run(prefix, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t", "30", "stop"],
                 tmp, 60)
        shutil.rmtree(tmp, ignore_errors=True)


def new_database(server_url: str, prefix: str) -> str:
    """Create a fresh, uniquely named database on the server of ``server_url`` (e.g. from :func:`postgres_server`)
    and return its URL: a test that writes a store gets one of its own."""
    import psycopg

    name = f"{prefix}_{os.getpid()}_{next(_DATABASES)}"
    with psycopg.connect(server_url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_url.rsplit("/", 1)[0] + f"/{name}"


_DATABASES = iter(range(1_000_000))
