"""DVC stage scripts: ``python -m rubriclab.stages.<name>`` (each a thin ``main``)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rubriclab.errors import RubricLabError


def run_stage(main: Callable[[], int], name: str) -> int:
    """Run a stage's ``main`` for DVC: an error rubriclab raises on purpose (bad params, a malformed file, a
    missing upstream output) is one line on stderr and exit status 2, not a traceback."""
    try:
        return main()
    except RubricLabError as exc:
        print(f"rubriclab.stages.{name}: error: {exc}", file=sys.stderr)
        return 2
