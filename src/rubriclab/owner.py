"""Who holds a piece of shared state (a call-store claim, an MLflow run), and whether that holder is gone.

An owner is ``host:pid:token``; the random token tells a reused pid from the process that took the claim.
A holder on another host cannot be checked from here: callers pair this with a lease.
"""

from __future__ import annotations

import os
import socket
import uuid

HOST = socket.gethostname()
_OWNER = ""


def process_owner() -> str:
    """This process's owner token (a forked child gets its own)."""
    global _OWNER
    if not _OWNER or _OWNER.rsplit(":", 2)[-2] != str(os.getpid()):
        _OWNER = f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    return _OWNER


def owner_is_gone(owner: str | None) -> bool:
    """True when ``owner`` ran on this host and its process no longer exists (or its pid now belongs to this
    process under another token). False when it is alive or cannot be checked (another host, no owner)."""
    if not owner or owner.count(":") < 2:
        return False
    host, pid_text, _ = owner.rsplit(":", 2)
    if host != HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner != process_owner()
    return not process_alive(pid)


def process_alive(pid: int) -> bool:
    """True while process ``pid`` (of this host) runs: under another user too; not once it is a zombie (dead, only
    not reaped by its parent yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, under another user
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    # a SIGKILLed child not yet reaped by its parent still answers kill(pid, 0)
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def group_members(pgid: int) -> dict[int, list[str]] | None:
    """Every process of group ``pgid`` on this host, zombies included: pid -> its ``/proc/<pid>/stat`` fields after
    the command name (``[0]`` the state, ``[2]`` the group, ``[11:15]`` utime, stime, cutime, cstime in clock ticks).
    None where there is no procfs."""
    if not os.path.isdir("/proc"):
        return None
    members = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while being read
        if len(fields) > 2 and fields[2] == str(pgid):
            members[int(entry)] = fields
    return members
