"""DVC stage scripts: ``python -m rubriclab.stages NAME`` (scripts/stage; forked by the warm stage server, ``_server``) or
``python -m rubriclab.stages.NAME`` (a fresh process), each a thin ``main``."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from rubriclab.errors import RubricLabError

_exit_status: int | None = None  # set by exit_stage: this process is a stage's __main__ and is ending


def _skip_teardown() -> None:
    """End a finished stage process without the interpreter's teardown of the ~6,000 modules it imported (litellm's,
    pydantic's, torch's objects freed one by one: ~2 s of every stage process on 2 cores, measured in
    benchmarks/stage_startup.py). Registered when this package is imported, before any module a stage imports can
    register its own, so it runs after every other atexit handler (they run last-in, first-out): non-daemon threads
    are joined, MLflow's and litellm's handlers and the call stores' close (``rubriclab.llm._store``) have run; then
    garbage is collected and the streams flushed. Only the modules' teardown is skipped. Does nothing unless
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
    handlers registered after this package was imported. For a process whose exit is someone else's code (a test
    suite's xdist worker)."""
    global _exit_status
    _exit_status = int(status)


def run_stage(main: Callable[[], int], name: str) -> int:
    """Run a stage's ``main`` for DVC: an error rubriclab raises on purpose (bad params, a malformed file, a
    missing upstream output) is one line on stderr and exit status 2, not a traceback."""
    try:
        return main()
    except RubricLabError as exc:
        from rubriclab.secrets import redact_text  # a message may quote what a server sent back

        print(redact_text(f"rubriclab.stages.{name}: error: {exc}"), file=sys.stderr)
        return 2
