"""A folder shared by every worker of one pytest session, for expensive results that several test files reuse."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def session_dir(tmp_path_factory: Any, name: str) -> Path:
    """``<session basetemp>/<name>``: under pytest-xdist a worker's basetemp is ``<session basetemp>/popen-gwN``
    (set by the controller), so the parent is the one folder all workers of this run see; without xdist it is the
    session's basetemp itself. Not created here; guard what is written in it with a lock
    (:func:`rubriclab.testing.clean_reference` does)."""
    base = Path(tmp_path_factory.getbasetemp())
    if os.environ.get("PYTEST_XDIST_WORKER") and base.name.startswith("popen-"):
        base = base.parent
    return base / name
