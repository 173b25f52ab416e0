"""A folder shared by every worker of one pytest session, for expensive results that several test files reuse."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def session_dir(tmp_path_factory: Any, name: str) -> Path:
    """``<session basetemp>/<name>``: under pytest-xdist a worker's basetemp is ``<session basetemp>/popen-gwN``
    (set by the controller), so the parent is the one folder all workers of this run see; without xdist it is the
    session's basetemp itself. Not created here; guard what is written in it with a lock
    (:func:`folder_lock`, as :func:`rubriclab.testing.clean_reference` does)."""
    base = Path(tmp_path_factory.getbasetemp())
    if os.environ.get("PYTEST_XDIST_WORKER") and base.name.startswith("popen-"):
        base = base.parent
    return base / name


@contextmanager
def folder_lock(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (a file ``.<name>.lock`` beside it) for the block: the other workers
    wait for the one that fills the folder. Released when the block ends, or when this process dies."""
    import fcntl  # POSIX only, like the xdist sessions that need it

    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def shared_policy_checkpoint(tmp_path_factory: Any, model: str = "local/smollm2-135m") -> Path:
    """The plain checkpoint of an embedded policy model, made by :func:`rubriclab.align.policy_source` (the function
    the align stage calls) once per pytest session in :func:`session_dir` ``/policy_models``: dequantizing the GGUF
    takes ~23 s on 2 cores, and the tests that need the checkpoint (the conversion's own tests, the README block's
    align stage) share it. A lock makes the other workers wait for the one converting."""
    from rubriclab.align import policy_source

    folder = session_dir(tmp_path_factory, "policy_models")
    with folder_lock(folder):
        return Path(policy_source(model, folder))
