"""Provider processes: litellm's calls to providers over the network, made in worker processes (issue 25).

litellm spends ~3 ms of CPU per call in the process that calls it (building the request, reading the reply, its
cost and logging), and a process runs its Python on one core at a time: at C=64 against a 200 ms server one process
reaches 0.55-0.80 of the ideal rate on a 640-call batch, whatever the gateway does around litellm
(benchmarks/README.md). With ``Gateway(provider_processes=N)`` (``llm.provider_processes``) N worker processes, each
with its own litellm, event loop and send turns (``llm._pacing``), make those calls. The gateway's process keeps
everything else: the store and its claims, the limits, the one retry layer, the budget, parsing. It sends a worker the call's litellm arguments and
gets back the reply as litellm's ``ModelResponse`` fields, or the failure as the retry layer needs it
(``RemoteFailure``: the error's class name and message, retryable or not, Retry-After).

What stays in the gateway's process: in-process models (``local/...``, ``scripted/...``: ``llm._providers``) and
embeddings. What does not reach a worker: changes the caller made to litellm's module globals (callbacks,
``litellm.api_key``, a custom provider map); the worker applies the gateway's own settings on import, and reads
credentials from the environment it inherits or from the role's parameters. Workers start (importing litellm: ~2.3 s
for two) with the first batch that calls a provider over the network, stay for the gateway's later batches, and stop
with ``Gateway.close()``, at exit, or when the gateway's process dies (the end of their socket). A worker that dies
fails its calls in flight with a retryable ``ProviderProcessExited`` (another worker takes them); a batch that finds
every worker ended starts new ones (``restarts_per_batch`` times), and the next batch replaces any that ended.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import queue
import signal
import site
import socket
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Hashable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from rubriclab.errors import ArgumentError, ModelCallError
from rubriclab.llm._reply_cap import capped
from rubriclab.llm._retry import RemoteFailure, error_name, is_retryable, retry_after_seconds

START_TIMEOUT_S = 120.0  # importing litellm on a loaded 2-core machine takes a few seconds
MESSAGE_CHARS = 4000  # a failure's message as sent; the gateway redacts it, then cuts it to 300
FIX = "set llm.provider_processes: 1 to make the calls in the stage's own process"
REPLY_CAP_ARG = "_rubriclab_reply_cap"  # travels with a call's kwargs; the worker reads it, litellm never sees it


class ProviderProcessError(ModelCallError, RuntimeError):
    """A provider process could not be started (so the calls cannot be made). A RuntimeError too, as it was before it
    joined the hierarchy."""


# Messages, each a tuple of plain values; a call's arguments, a reply and a failure travel pickled inside them, so one
# that cannot be unpickled at the other end fails that call, not the connection:
#   to a worker:   ("call", id, endpoint, pickled litellm kwargs) | ("cancel", id) | ("stop",)
#   from a worker: ("ready", pid) | ("reply", id, pickled reply) | ("failure", id, pickled RemoteFailure)


def failure_of(exc: BaseException) -> RemoteFailure:
    """``exc`` as the gateway's retry layer reads it, classified where it was raised."""
    message = " ".join(str(exc).split())[:MESSAGE_CHARS]
    return RemoteFailure(error_name(exc), message, is_retryable(exc), retry_after_seconds(exc))


def reply_of(resp: Any, latency_s: float) -> dict[str, Any]:
    """What a worker sends back of litellm's reply: its fields, litellm's cost of the call, the call's latency."""
    hidden = getattr(resp, "_hidden_params", None) or {}
    return {"fields": resp.model_dump(), "response_cost": hidden.get("response_cost"), "latency_s": latency_s}


def response_of(reply: dict[str, Any]) -> Any:
    """The ``ModelResponse`` a worker's reply stands for (with litellm's cost of the call, where it had one)."""
    import litellm

    resp = litellm.ModelResponse(**reply["fields"])
    if reply["response_cost"] is not None:
        resp._hidden_params = {**(resp._hidden_params or {}), "response_cost": reply["response_cost"]}
    return resp


# -- the worker ------------------------------------------------------------------------------------------------------
async def _serve(conn: Connection, outbox: queue.SimpleQueue, turns: int) -> None:
    import litellm

    from rubriclab.llm._pacing import SendPacer

    loop = asyncio.get_running_loop()
    pacer = SendPacer(turns) if turns > 0 else None
    tasks: dict[int, asyncio.Task] = {}
    closed: asyncio.Future = loop.create_future()

    async def call(i: int, group: Hashable, blob: bytes) -> None:
        handoff = await pacer.take(group) if pacer is not None else None
        answered = False
        try:
            try:
                kwargs = pickle.loads(blob)
            except Exception as exc:  # noqa: BLE001 - an argument only the gateway's process can rebuild
                raise RemoteFailure(type(exc).__name__, f"a provider process could not read this call's arguments "
                                    f"({exc}); {FIX}", retryable=False, retry_after=None) from None
            cap = kwargs.pop(REPLY_CAP_ARG, None)  # the most of the reply's body to read (llm._reply_cap)
            t0 = time.perf_counter()  # the call's latency, not its wait for a turn (as in the gateway's process)
            with capped(cap):
                resp = await litellm.acompletion(logger_fn=handoff, **kwargs)
            answered = True
            outbox.put(("reply", i, reply_of(resp, time.perf_counter() - t0)))
        except RemoteFailure as exc:
            outbox.put(("failure", i, exc))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the gateway, classified
            outbox.put(("failure", i, failure_of(exc)))
        finally:  # a cancelled call (the gateway's batch stopped) sends nothing back
            if pacer is not None:
                pacer.done(group, handoff, ok=answered)
            tasks.pop(i, None)

    def on_readable() -> None:
        try:
            while True:
                msg = conn.recv()
                if msg[0] == "call":
                    tasks[msg[1]] = asyncio.ensure_future(call(*msg[1:]))
                elif msg[0] == "cancel":
                    task = tasks.pop(msg[1], None)
                    if task is not None:
                        task.cancel()
                elif msg[0] == "stop":
                    raise EOFError
                if not conn.poll(0):
                    return
        except (EOFError, OSError):
            loop.remove_reader(conn.fileno())
            if not closed.done():
                closed.set_result(None)

    loop.add_reader(conn.fileno(), on_readable)
    await closed
    for task in list(tasks.values()):
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)


def worker_main(fd: int, turns: int) -> None:
    """A provider process: serve calls on the socket ``fd`` until the gateway closes it."""
    import gc

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the gateway's to handle; it closes the socket
    conn = Connection(fd)
    import rubriclab.llm._gateway  # noqa: F401 - litellm with the gateway's settings (one retry layer, drop_params)

    gc.freeze()  # litellm's ~450,000 import-time objects stay out of the collector's way (llm._heap)
    outbox: queue.SimpleQueue = queue.SimpleQueue()

    def write() -> None:  # replies leave from a thread, so the loop keeps reading while a send waits
        while (msg := outbox.get()) is not None:
            if msg[0] in ("reply", "failure"):
                try:
                    msg = (msg[0], msg[1], pickle.dumps(msg[2]))
                except Exception as exc:  # noqa: BLE001 - a reply that does not pickle is that call's failure
                    msg = ("failure", msg[1], pickle.dumps(failure_of(exc)))
            try:
                conn.send(msg)
            except (OSError, ValueError):
                return

    writer = threading.Thread(target=write, name="rubriclab-provider-replies", daemon=True)
    writer.start()
    outbox.put(("ready", os.getpid()))
    code = 0
    try:
        asyncio.run(_serve(conn, outbox, turns))
    except BaseException:  # noqa: BLE001 - said on stderr; the gateway sees the exit status
        traceback.print_exc()
        code = 1
    finally:
        outbox.put(None)
        writer.join(timeout=5)
        sys.stderr.flush()
        os._exit(code)  # nothing to tear down: skip the interpreter's ~2 s teardown of litellm's modules


# -- the gateway's side ------------------------------------------------------------------------------------------------
class _Worker:
    def __init__(self, proc: subprocess.Popen, conn: Connection, ready: asyncio.Future) -> None:
        self.proc = proc
        self.conn = conn
        self.pending: dict[int, asyncio.Future] = {}
        self.ready = ready
        self.alive = True
        self.served = 0  # replies and failures it sent back


def _worker_env() -> dict[str, str]:
    """The caller's environment, with this rubriclab importable where it is not installed (a source checkout)."""
    here = Path(__file__).resolve().parents[2]
    installed = {Path(p).resolve() for p in site.getsitepackages() + [site.getusersitepackages()]}
    if here in installed:
        return dict(os.environ)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(here)) if p))


def _start(python: str, turns: int, ready: asyncio.Future) -> _Worker:
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen([python, "-m", "rubriclab.llm._processes", str(theirs.fileno()), str(turns)],
                                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                env=_worker_env())
    except OSError as exc:
        ours.close()
        raise ProviderProcessError(f"could not start a provider process ({python} -m rubriclab.llm._processes): "
                                   f"{exc}; {FIX}") from exc
    finally:
        theirs.close()
    return _Worker(proc, Connection(ours.detach()), ready)


def _shutdown(workers: list[_Worker]) -> None:
    for w in workers:
        try:
            w.conn.send(("stop",))
        except (OSError, ValueError):
            pass
        w.conn.close()
    for w in workers:
        try:
            w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()
    workers.clear()


def _exit_status(proc: subprocess.Popen) -> str:
    try:
        rc = proc.wait(timeout=0.5)  # its socket has closed: it has ended, or is ending
    except subprocess.TimeoutExpired:
        return "still running, its socket closed"
    if rc < 0:
        return f"killed by {signal.Signals(-rc).name}" if -rc in signal.valid_signals() else f"signal {-rc}"
    return f"exit {rc}"


class ProviderProcesses:
    """``n`` provider processes for one gateway. ``await attach()`` at the start of each batch (on its event loop:
    starts missing workers and waits until they are ready), ``detach()`` at its end, ``await acompletion(group,
    **kwargs)`` for each call (to the worker with the fewest calls in flight), ``close()`` when done. ``python``: the
    interpreter the workers run on."""

    def __init__(self, n: int, turns: int | None, python: str = sys.executable) -> None:
        if n < 2:
            raise ArgumentError(f"provider processes: at least 2 (1 is the gateway's own process), got {n}")
        self.n = n
        self.turns = turns or 0
        self.python = python
        self.workers: list[_Worker] = []
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unpriced: set[str] = set()  # models the gateway's litellm has no price for (this batch)
        self.restarts_per_batch = 1  # times a batch that finds every worker ended starts new ones
        self._restarts = 0
        self._restarting: asyncio.Future | None = None
        self._finalizer = weakref.finalize(self, _shutdown, self.workers)

    @property
    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.workers if w.alive]

    async def attach(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._unpriced.clear()
        self._restarts, self._restarting = 0, None
        for w in self.workers:
            if w.alive and w.proc.poll() is not None:  # ended between batches
                self._lost(w)
            if w.alive:
                loop.add_reader(w.conn.fileno(), self._on_readable, w)
        await self._start_missing()

    async def _start_missing(self) -> None:
        """Start workers up to ``n`` and wait until they are ready."""
        loop = self._loop
        assert loop is not None, "attach() first"
        self.workers[:] = [w for w in self.workers if w.alive]
        for w in self.workers:
            if w.ready.cancelled():  # an earlier batch stopped waiting for it: its ready message is still to come
                w.ready = loop.create_future()
        while len(self.workers) < self.n:  # each one kept as it starts, so a failed start leaves none behind
            w = _start(self.python, self.turns, loop.create_future())
            self.workers.append(w)
            loop.add_reader(w.conn.fileno(), self._on_readable, w)
        starting = [w for w in self.workers if not w.ready.done()]
        for w in starting:
            try:
                await asyncio.wait_for(asyncio.shield(w.ready), START_TIMEOUT_S)
            except (TimeoutError, RemoteFailure) as exc:
                for x in starting:  # calls already sent to them fail (retryable: they go to a live one, if any)
                    self._lost(x)
                    if not x.ready.cancelled():
                        x.ready.exception()  # read here: the error below says it
                self.workers[:] = [x for x in self.workers if x not in starting]
                _shutdown(starting)
                why = f"not ready after {START_TIMEOUT_S:.0f} s" if isinstance(exc, TimeoutError) else str(exc)
                raise ProviderProcessError(f"a provider process ({self.python} -m rubriclab.llm._processes) did not "
                                           f"start: {why}; its error, if any, is on stderr above. {FIX}") from None

    async def _live_worker(self) -> _Worker:
        """The live worker with the fewest calls in flight; where every one has ended (a crash, or a kill while the
        gateway was between batches and could not see it yet), new ones, ``restarts_per_batch`` times a batch."""
        while True:
            live = [w for w in self.workers if w.alive]
            if live:
                return min(live, key=lambda x: len(x.pending))
            if self._restarting is None:
                if self._restarts >= self.restarts_per_batch:
                    raise RemoteFailure("ProviderProcessExited", "every provider process of this batch has ended "
                                        "(their exit statuses are in the batch's other failures; the next batch "
                                        f"starts new ones); rerun, or {FIX}", retryable=False, retry_after=None)
                self._restarts += 1
                self._restarting = asyncio.ensure_future(self._start_missing())
            restarting = self._restarting
            try:
                await asyncio.shield(restarting)
            except ProviderProcessError as exc:
                raise RemoteFailure("ProviderProcessError", str(exc), retryable=False, retry_after=None) from None
            finally:
                if self._restarting is restarting and restarting.done():
                    self._restarting = None

    def detach(self) -> None:
        """Stop reading on this batch's loop; calls still in flight there are abandoned (the batch cancelled them)."""
        loop, self._loop = self._loop, None
        if self._restarting is not None and not self._restarting.done():
            self._restarting.cancel()  # the batch has ended; the next one waits for what this one started
        self._restarting = None
        for w in self.workers:
            if loop is not None and w.alive:
                loop.remove_reader(w.conn.fileno())
            if not w.ready.done():  # a start the batch stopped waiting for: its ready message is not awaited
                w.ready.cancel()
            w.pending.clear()

    def _on_readable(self, w: _Worker) -> None:
        try:
            while True:
                msg = w.conn.recv()
                if msg[0] == "ready":
                    if not w.ready.done():
                        w.ready.set_result(msg[1])
                else:
                    w.served += 1
                    kind, i, blob = msg
                    fut = w.pending.pop(i, None)
                    if fut is not None and not fut.done():  # None: a call cancelled, or from an earlier batch
                        try:
                            payload = pickle.loads(blob)
                        except Exception as exc:  # noqa: BLE001 - that call's failure, not the connection's
                            kind, payload = "failure", RemoteFailure(
                                type(exc).__name__, f"could not read a provider process's reply: {exc}",
                                retryable=False, retry_after=None)
                        if kind == "reply":
                            fut.set_result(payload)
                        else:
                            fut.set_exception(payload)
                if not w.conn.poll(0):
                    return
        except Exception:  # noqa: BLE001 - EOF (it ended), or a message that cannot be read: either way it is gone
            self._lost(w)

    def _lost(self, w: _Worker) -> None:
        if not w.alive:
            return
        w.alive = False
        if self._loop is not None:
            self._loop.remove_reader(w.conn.fileno())
        w.conn.close()
        status = _exit_status(w.proc)
        failure = RemoteFailure("ProviderProcessExited", f"provider process {w.proc.pid} ended ({status}) with this "
                                "call in flight", retryable=True, retry_after=0.0)
        if not w.ready.done():
            w.ready.set_exception(RemoteFailure("ProviderProcessExited", f"process {w.proc.pid} ended ({status})",
                                                retryable=False, retry_after=None))
        for fut in w.pending.values():
            if not fut.done():
                fut.set_exception(failure)
        w.pending.clear()

    async def acompletion(self, group: Hashable, **kwargs: Any) -> tuple[Any, float]:
        """``litellm.acompletion(**kwargs)`` in a provider process: its ``ModelResponse`` and the call's latency in
        seconds, or its failure raised as a ``RemoteFailure``."""
        try:
            blob = pickle.dumps(kwargs)
        except Exception as exc:  # noqa: BLE001 - nothing was sent
            raise RemoteFailure(type(exc).__name__, f"this call's arguments cannot be sent to a provider process "
                                f"({exc}); {FIX}", retryable=False, retry_after=None) from None
        i = next(self._ids)
        while True:  # a worker found dead on sending is passed over: the call was never sent
            w = await self._live_worker()
            try:
                w.conn.send(("call", i, group, blob))
                break
            except (OSError, ValueError):
                self._lost(w)
        fut = w.pending[i] = asyncio.get_running_loop().create_future()
        try:
            reply = await fut
        except asyncio.CancelledError:
            w.pending.pop(i, None)
            if w.alive:
                try:
                    w.conn.send(("cancel", i))
                except (OSError, ValueError):
                    pass
            raise
        resp = response_of(reply)
        if reply["response_cost"] is None:
            self._price_here(resp, kwargs["model"])
        return resp, reply["latency_s"]

    def _price_here(self, resp: Any, model: str) -> None:
        """A price the worker's litellm lacks but this process's has (``litellm.register_model`` here): the cost
        litellm would have given the call here."""
        if model in self._unpriced:
            return
        from rubriclab.llm._budget import price_of

        usage = getattr(resp, "usage", None)
        cost = price_of(model, int(getattr(usage, "prompt_tokens", 0) or 0),
                        int(getattr(usage, "completion_tokens", 0) or 0))
        if cost is None:
            self._unpriced.add(model)
        else:
            resp._hidden_params = {**(resp._hidden_params or {}), "response_cost": cost}

    def close(self) -> None:
        """Stop the workers (and wait for them)."""
        self._finalizer()


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]))
