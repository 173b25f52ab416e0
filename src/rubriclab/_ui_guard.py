"""``python -m rubriclab._ui_guard PARENT_PID -- ARGV…``: runs ``ARGV`` (the ``mlflow ui`` server) and takes its
process group down when ``PARENT_PID`` (the ``rubriclab ui`` that started it) is gone, even when that process was
SIGKILLed and could not stop its children itself.

``rubriclab ui`` starts this guard in a new process group, which the server and its uvicorn workers join; the signals
``rubriclab ui`` forwards to the group reach the server as before and leave the guard waiting for it. The guard
imports nothing of rubriclab, so it starts in milliseconds. Exit status: the server's (128 + N when signal N
ended it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

POLL_S = 0.2  # how often the guard looks for its parent
GRACE_S = 5.0  # SIGTERM to the group, then SIGKILL to what is left after this long


def _group_alive(pgid: int, me: int) -> bool:
    """Whether a process of group ``pgid`` other than ``me`` is still running (zombies hold no port)."""
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _take_down_group(grace: float = GRACE_S) -> None:
    """SIGTERM to this guard's whole group (the server and its workers), SIGKILL after ``grace`` seconds."""
    pgid, me = os.getpgrp(), os.getpid()
    os.killpg(pgid, signal.SIGTERM)  # the guard ignores it (its handler), the others stop
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pgid, me):
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)  # the guard too: nothing of the group is left


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m rubriclab._ui_guard PARENT_PID -- ARGV...", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a handler, not SIG_IGN: the server must not inherit it
        signal.signal(sig, lambda *_: None)
    server = subprocess.Popen(command)
    while True:
        try:
            code = server.wait(timeout=POLL_S)
            return code if code >= 0 else 128 - code
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != parent:  # rubriclab ui is gone (SIGKILL): take the server and its workers with it
            _take_down_group()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
