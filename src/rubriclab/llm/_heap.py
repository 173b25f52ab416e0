"""The objects that exist when a batch starts are kept out of the cycle collector's way until it ends (issue 25).

Importing litellm leaves ~450,000 long-lived objects in the process (its cost map, the openai and pydantic types).
Python collects its oldest generation now and then while a batch runs, and each such collection walks all of them
with the event loop stopped: ~230 ms, during which no call in flight moves (bare litellm, 3,200 calls at C=64 against
a 200 ms server: 5 full collections, 1.13 s of a ~16 s run; benchmarks/README.md). ``gc.freeze()`` moves the objects
that exist at the start of the batch to the permanent generation, which collections skip, and ``gc.unfreeze()`` puts
them back at its end. Objects made during the batch are collected as usual; a garbage cycle among the frozen ones
waits for the end of the batch.

Only the outermost batch of the process freezes (batches running at once in several threads share one freeze), and
only where nothing else froze: a caller's own ``gc.freeze()`` (a server that forks workers) is left as it is.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # batches inside old_objects_frozen(), all threads
_ours = False  # whether the permanent generation is this module's freeze


@contextmanager
def old_objects_frozen(enabled: bool = True) -> Iterator[None]:
    """While the block runs, the cycle collector skips the objects that existed when the first such block began."""
    global _depth, _ours
    if not enabled:
        yield
        return
    with _lock:
        if _depth == 0 and gc.isenabled() and gc.get_freeze_count() == 0:
            gc.freeze()
            _ours = True
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _ours:
                gc.unfreeze()
                _ours = False
