"""Send turns: at most a few calls at a time build their request in litellm (issue 25).

litellm spends about 2 ms of CPU per call on the event loop's thread: building the request before it leaves, and
reading the reply after. asyncio runs the steps of concurrent calls in turn, so a group of calls that start together
finish building together, leave together, and, from a server that answers in near-constant time, come back
together: every call then waits for the whole group's CPU (C × 2 ms at concurrency C), and the group never spreads
out. With at most ``TURNS`` calls building at once, requests leave one after another, the replies come back spread
out, and a call waits for little more than its own work: at C=64 against a 200 ms server, 0.54–0.58 → 0.62–0.80 of
the ideal rate, 1.07–1.33× bare litellm (benchmarks/gateway.py, benchmarks/README.md). Where answer times vary, calls
do not stay in step and the turns change nothing. Two turns, not one: while one call's setup runs in litellm's
executor thread, the next one's runs on the loop.

A turn is handed back when litellm hands the request to the provider's client: litellm calls the request's
``logger_fn`` then (``Logging.pre_call``; for OpenAI-compatible endpoints just before the SDK serialises and sends
it), whatever the provider. A turn is handed back anyway after ``HOLD_S``, when the call ends, or when it fails: a
provider whose setup waits on the network (a token fetch, a remote image) holds the others back that long at most.
A successful call that never signalled (a litellm path that does not call ``logger_fn``) turns pacing off for its
model endpoint, so such a path costs a few calls' worth of ``HOLD_S``, not the batch's concurrency.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable

from rubriclab.errors import ArgumentError

TURNS = 2  # the best of 1-4 (benchmarks/gateway.py --turns N; benchmarks/README.md)
HOLD_S = 0.1  # a request build is ~2-5 ms of CPU; past this, the turn goes back unsignalled


class Handoff:
    """One call's turn. Pass it as litellm's ``logger_fn``: its first call (from any thread) hands the turn back;
    ``signalled`` says whether litellm called it."""

    def __init__(self, pacer: SendPacer) -> None:
        self._pacer = pacer
        self._done = False
        self._thread = threading.get_ident()
        self.signalled = False
        self._timer = pacer.loop.call_later(pacer.hold_s, self.release)

    def __call__(self, *_: object, **__: object) -> None:
        if self.signalled:
            return
        self.signalled = True
        if threading.get_ident() == self._thread:
            self.release()
        else:  # some providers build the request in litellm's executor thread
            self._pacer.loop.call_soon_threadsafe(self.release)

    def release(self) -> None:
        """Hand the turn back (once)."""
        if not self._done:
            self._done = True
            self._timer.cancel()
            self._pacer.semaphore.release()


class SendPacer:
    """Turns for one event loop: ``await take(group)`` returns a ``Handoff`` (None: this endpoint is not paced);
    ``done(group, handoff, ok)`` when the call ends."""

    def __init__(self, turns: int = TURNS, hold_s: float = HOLD_S) -> None:
        if turns < 1:
            raise ArgumentError(f"send turns must be at least 1, got {turns}")
        self.turns = turns
        self.hold_s = hold_s
        self.semaphore = asyncio.Semaphore(turns)
        self.loop = asyncio.get_running_loop()
        self.unpaced: set[Hashable] = set()  # endpoints whose successful calls gave no signal
        self.signals = 0  # handoffs litellm signalled (tests and benchmarks read it)

    async def take(self, group: Hashable) -> Handoff | None:
        if group in self.unpaced:
            return None
        await self.semaphore.acquire()
        if group in self.unpaced:  # turned off while this call waited
            self.semaphore.release()
            return None
        return Handoff(self)

    def done(self, group: Hashable, handoff: Handoff | None, ok: bool) -> None:
        if handoff is None:
            return
        if handoff.signalled:
            self.signals += 1
        elif ok:
            self.unpaced.add(group)
        handoff.release()
