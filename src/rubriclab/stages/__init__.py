"""DVC stage scripts: ``python -m rubriclab.stages NAME`` (scripts/stage; forked by the warm stage server,
``rubriclab.stage_server``) or ``python -m rubriclab.stages.NAME`` (a fresh process), each a thin ``main``: read the
settings, call the package, track, write."""

from __future__ import annotations

import sys
from collections.abc import Callable

from rubriclab.errors import RubricLabError

# how a stage process ends; imported before any module a stage imports, so its atexit handler runs after theirs
from rubriclab.stage_server import end_without_teardown, exit_stage

__all__ = ["end_without_teardown", "exit_stage", "run_stage"]


def run_stage(main: Callable[[], int], name: str) -> int:
    """Run a stage's ``main`` for DVC: an error rubriclab raises on purpose (bad params, a malformed file, a
    missing upstream output) is one line on stderr and exit status 2, not a traceback."""
    try:
        return main()
    except RubricLabError as exc:
        from rubriclab.secrets import redact_text  # a message may quote what a server sent back

        print(redact_text(f"rubriclab.stages.{name}: error: {exc}"), file=sys.stderr)
        return 2
