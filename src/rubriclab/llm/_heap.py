"""The objects that exist when a batch starts are kept out of the cycle collector's way until it ends (issue 25).

Importing litellm leaves ~450,000 long-lived objects in the process (its cost map, the openai and pydantic types).
Python collects its oldest generation now and then while a batch runs, and each such collection walks all of them
with the event loop stopped: 0.2-0.35 s, during which no call in flight moves (bare litellm,
3,200 calls at C=64 against a 200 ms server: 4-5 full collections, 1.1-1.3 s of a ~16 s run; benchmarks/README.md).
``gc.freeze()`` moves the objects that exist at the start of the batch to the permanent generation, which
collections skip, and ``gc.unfreeze()`` puts them back at its end. Objects made during the batch are collected as
usual; a garbage cycle among the frozen ones waits for the end of the batch, and the full collection the batch
skipped comes soon after it, with no call in flight.

Only the outermost batch of the process freezes (batches running at once in several threads share one freeze), and
only where nothing else froze: a caller's ``gc.freeze()`` made before the batch (a server about to fork workers) is
left as it is; one made while a batch runs is undone when the last batch ends. A child forked during a batch starts
with nothing frozen and no batch counted.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # batches inside old_objects_frozen(), all threads
_ours = False  # whether the permanent generation is this module's freeze


def _forked_child() -> None:
    """A child forked mid-batch has only the forking thread: the other batches will never end here."""
    global _lock, _depth, _ours
    _lock = threading.Lock()  # held by another thread at the fork, it would never be released in the child
    if _ours:
        gc.unfreeze()
    _depth, _ours = 0, False


os.register_at_fork(after_in_child=_forked_child)


@contextmanager
def old_objects_frozen(enabled: bool = True) -> Iterator[None]:
    """While the block runs, the cycle collector skips the objects that existed when the first such block began."""
    global _depth, _ours
    if not enabled:
        yield
        return
    pid = os.getpid()
    with _lock:
        if _depth == 0 and gc.isenabled() and gc.get_freeze_count() == 0:
            gc.freeze()
            _ours = True
        _depth += 1
    try:
        yield
    finally:
        if os.getpid() == pid:  # a batch that goes on in a forked child was not counted there
            with _lock:
                _depth -= 1
                if _depth == 0 and _ours:
                    gc.unfreeze()
                    _ours = False
