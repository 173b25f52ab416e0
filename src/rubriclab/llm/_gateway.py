"""The gateway: every model call goes through here (litellm + call store + limits + retries)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import litellm
from tqdm.auto import tqdm

from rubriclab.errors import ArgumentError, ModelCallError, ParseFailure
from rubriclab.llm._budget import BudgetExceededError, BudgetStop, SpendBudget, SpendGuard, price_of
from rubriclab.llm._heap import old_objects_frozen
from rubriclab.llm._limits import ModelLimiter
from rubriclab.llm._loops import REPETITION
from rubriclab.llm._pacing import TURNS, SendPacer
from rubriclab.llm._processes import REPLY_CAP_ARG, ProviderProcesses
from rubriclab.llm._providers import in_process
from rubriclab.llm._reply_cap import cap_tokens, capped, check_reply, is_reply_too_large, reply_cap_bytes
from rubriclab.llm._retry import (
    backoff_seconds,
    check_response,
    describe,
    error_name,
    is_retryable,
    retry_after_seconds,
)
from rubriclab.llm._roles import RoleSpec
from rubriclab.llm._schedule import prefix_order, shares_kv_state
from rubriclab.llm._store import (
    CLAIM_RENEW_S,
    CallRecord,
    CallStore,
    call_key,
    claim_is_stale,
    endpoint_public,
    public_params,
    store_salt,
)
from rubriclab.secrets import REDACTED, merge_params, redact_known, redact_text

litellm.suppress_debug_info = True
litellm.telemetry = False
litellm.drop_params = True  # a provider that lacks `seed` or `top_p` still answers
# One retry layer: litellm's OpenAI embeddings path reads max_retries=0 as "unset" (`max_retries or
# DEFAULT_MAX_RETRIES`) and lets the SDK retry twice; with the default at 0 only our layer retries.
litellm.DEFAULT_MAX_RETRIES = 0


@dataclass
class CallRequest:
    """One logical model call: messages for a role, a sample index, and how to parse the reply."""

    role: RoleSpec
    messages: list[dict[str, Any]]
    sample_index: int = 0
    parser: Callable[[str], Any] | None = None
    response_format: dict[str, Any] | None = None
    logprobs: int | None = None  # top-k logprobs of the reply's tokens (e.g. Yes/No scoring)
    tag: Any = None  # caller's bookkeeping (item id, criterion, ...); not part of the key
    truncation_ok: bool = False  # a reply cut at max_tokens is usable (e.g. one-token logprob scoring)

    @property
    def accepts_truncated(self) -> bool:
        """Whether a reply that stopped at the token limit may be used. Only by request, or in the
        one-token logprob mode, where stopping after one token is the point."""
        return self.truncation_ok or (self.logprobs is not None and self.role.max_tokens <= 1)

    def params(self, attempt: int) -> dict[str, Any]:
        """The request's public params (keyed, stored, sent); the role's private fields are sent beside them."""
        params = self.role.decoding_params()
        if self.response_format is not None:
            params["response_format"] = self.response_format
        if self.logprobs is not None:
            params["logprobs"] = True
            params["top_logprobs"] = self.logprobs
        if self.role.temperature > 0:
            # distinct samples must differ on providers that honour `seed`; parse re-asks too
            params["seed"] = self.role.seed + 1009 * self.sample_index + attempt
        return params

    def key(self, attempt: int, messages: list[dict[str, Any]] | None = None, salt: bytes | None = None) -> str:
        """The call store key. ``salt`` (``store_salt(store)``) salts the hash of the role's private body fields;
        a role without any has the same key whatever the salt."""
        sealed = self.role.sealed_digest(salt if salt is not None else store_salt(None)) if self.role.extra else None
        return call_key(self.role.model, messages or self.messages, self.params(attempt), self.sample_index, attempt,
                        endpoint=self.role.endpoint, sealed=sealed)

    def reask_messages(self, reply: str | None, problem: str) -> list[dict[str, Any]]:
        """The messages of a re-ask: the request, the unusable reply, and what was wrong with it.

        Saying what was wrong makes a re-ask informative even for a deterministic model at T=0."""
        reply = (reply or "")[:2000]
        return [*self.messages, {"role": "assistant", "content": reply},
                {"role": "user", "content": f"That reply could not be used: {problem}. Answer the original request "
                                            "again, following its output format exactly."}]


@dataclass
class CallResult:
    """The outcome of one CallRequest. ``ok`` is False for transport failures and parse failures."""

    request: CallRequest
    ok: bool
    text: str | None = None
    value: Any = None
    error: str | None = None
    parse_error: str | None = None
    cached: bool = False
    attempts: int = 0  # provider calls or cache reads, parse re-asks included
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tag(self) -> Any:
        return self.request.tag


class _NotSent(ModelCallError):
    """A call the gateway did not send (its endpoint ignored max_tokens earlier in the run); the message says why."""


class _BatchStats:
    """Per (role, model) counts of one batch. Its rows are written when the batch starts (counts 0, not completed)
    and then with the batch's other writes (``_Writes``), so a killed batch keeps a row marked not completed."""

    def __init__(self, stage: str) -> None:
        self.by_role: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.stage = stage
        self.started = time.time()
        self.ids: dict[tuple[str, str], int] = {}
        self.dirty = False
        self.on_change: Callable[[], None] | None = None  # the writer's timer: a change is written within its flush_s

    def add(self, role: RoleSpec, **counts: float) -> None:
        row = self.by_role[(role.name, role.model)]
        for k, v in counts.items():
            row[k] += v
        self.dirty = True
        if self.on_change is not None:
            self.on_change()

    def start(self, roles: Sequence[RoleSpec]) -> None:
        """One zero row per (role, model), before any call: a batch killed before its first result still leaves
        a row the ledger counts as interrupted."""
        for role in roles:
            self.by_role[(role.name, role.model)]  # noqa: B018 - the defaultdict creates the zero row
        self.dirty = True

    def rows(self, completed: bool) -> tuple[list[tuple[str, str]], list[tuple[dict[str, Any], int | None]]]:
        """The batch's rows as ``record_batch`` takes them (``summary``, row id or None for a new row)."""
        names = list(self.by_role)
        return names, [({
            "stage": self.stage, "role": role, "model": model, "started_at": self.started,
            "wall_s": time.time() - self.started, "completed": int(completed),
            **{k: (float(v) if k == "cost" else int(v)) for k, v in self.by_role[(role, model)].items()},
        }, self.ids.get((role, model))) for role, model in names]

    def saved(self, names: list[tuple[str, str]], ids: list[int]) -> None:
        self.ids.update(zip(names, ids))

    def write(self, store: CallStore, completed: bool) -> None:
        """The rows alone, in one transaction (the batch's start; an end with no call made)."""
        names, rows = self.rows(completed)
        self.saved(names, store.finish_calls([], (), rows))
        self.dirty = False


class _Writes:
    """The store writes of one batch, grouped: claims taken a slice of keys at a time (``claim``), finished records
    written with the release of their claims and the batch's ledger rows in one transaction per ``every`` records
    or ``flush_s`` seconds (``finish``), and the held claims renewed together every CLAIM_RENEW_S (``_renew``).

    Exactly once across processes: a key is called only while this process holds its claim, and the claim is
    dropped in the transaction that stores the call's record, so a process waiting on the key finds the record.
    A claim taken ahead (the next keys of the batch, in the order their calls will start) is held, and renewed,
    like any other until its call's record is written; keys never called are released when the batch ends.
    A killed process loses the records not yet written (at most ``every`` records or ``flush_s`` seconds of
    calls): like its calls in flight, they are made again on resume; its claims are stale at once on this host
    (dead owner) and after CLAIM_LEASE_S elsewhere."""

    def __init__(self, store: CallStore, stats: _BatchStats, order: dict[Any, list[str]], every: int = 64,
                 flush_s: float = 0.25) -> None:
        self.store, self.stats, self.every, self.flush_s = store, stats, max(1, every), flush_s
        # per model endpoint (a concurrency slot), its pending keys in the order their calls will start: a slice
        # taken ahead holds keys of the model that asked, never those of a slower one another worker could share
        self.order = {group: list(dict.fromkeys(keys)) for group, keys in order.items()}
        self.cursor: dict[Any, int] = defaultdict(int)
        self.asked: set[str] = set()
        self.ready: dict[str, tuple[str, Any]] = {}  # outcomes of claims taken ahead: ("claimed"|"done", record)
        self.held: set[str] = set()  # claimed by this batch, not yet released in a committed transaction
        self.calling: set[str] = set()  # held keys whose call is running (released by their own finish)
        self.records: list[CallRecord] = []
        self.release: list[str] = []
        self.closed = False
        self.completed = False
        self.error: BaseException | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._renewer: asyncio.Task | None = None
        stats.on_change = self.touch

    # -- claims -----------------------------------------------------------------------------------
    def claim(self, key: str, group: Any, ahead: int) -> tuple[str, Any]:
        """("claimed", None): make the call; ("done", record): use it; ("held", holder): another owner holds the
        key; ("free", None): released as we looked, ask again. Takes up to ``ahead`` further keys of ``group`` in
        the same transaction."""
        got = self._claim(key, group, ahead)
        if got[0] == "claimed":
            self.calling.add(key)
        return got

    def _claim(self, key: str, group: Any, ahead: int) -> tuple[str, Any]:
        got = self.ready.pop(key, None)
        if got is not None:
            return got
        if key in self.held:  # ours already (never happens through _fetch, which calls a key once per batch)
            return "claimed", None
        keys = [key]
        self.asked.add(key)
        order = self.order.get(group, ())
        while len(keys) <= ahead and self.cursor[group] < len(order) and not self.closed:
            k = order[self.cursor[group]]
            self.cursor[group] += 1
            if k not in self.asked and k not in self.held:
                self.asked.add(k)
                keys.append(k)
        got_claims = self.store.claim_many(keys)
        self.held.update(got_claims.claimed)
        if got_claims.claimed and self._renewer is None and not self.closed:
            self._renewer = asyncio.ensure_future(self._renew())
        outcome: dict[str, tuple[str, Any]] = {k: ("claimed", None) for k in got_claims.claimed}
        outcome.update((k, ("done", rec)) for k, rec in got_claims.done.items())
        for k in keys[1:]:
            if k in outcome:
                self.ready[k] = outcome[k]
            else:  # held elsewhere: its own call asks again when it comes, with fresh news
                self.asked.discard(k)
        if key in outcome:
            return outcome[key]
        holder = got_claims.held.get(key)
        return ("held", holder) if holder is not None else ("free", None)

    async def _renew(self) -> None:
        while True:  # a claim not renewed within CLAIM_LEASE_S is taken over by another worker
            await asyncio.sleep(CLAIM_RENEW_S)
            if self.held:
                try:
                    self.store.renew_many(sorted(self.held))
                except Exception:  # noqa: BLE001 - a store busy past its timeout: the lease leaves time to try again
                    continue

    # -- finished calls ---------------------------------------------------------------------------
    def finish(self, key: str, record: CallRecord | None) -> None:
        """The call for our claim on ``key`` ended: store ``record`` (None: no record, e.g. cancelled) and drop the
        claim, with the next write."""
        if record is not None:
            self.records.append(record)
        self.calling.discard(key)
        self.release.append(key)
        if self.closed or len(self.release) >= self.every:
            self.flush()
        else:
            self.touch()

    def touch(self) -> None:
        """Make sure what is pending is written within ``flush_s``."""
        if self.closed:
            if self.stats.dirty:
                self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.flush_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - kept for close(); the records stay queued for its retry
            self.error = self.error or exc

    def flush(self, completed: bool = False) -> None:
        """Write what is pending in one transaction."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not (self.records or self.release or self.stats.dirty):
            return
        records, release = self.records, self.release
        self.records, self.release = [], []
        names, rows = self.stats.rows(completed or self.completed)
        self.stats.dirty = False
        try:
            ids = self.store.finish_calls(records, release, rows)
        except BaseException:
            self.records, self.release = records + self.records, release + self.release
            self.stats.dirty = True
            raise
        self.stats.saved(names, ids)
        self.held.difference_update(release)

    def close(self, completed: bool) -> None:
        """End of the batch: stop renewing, release claims taken and never called, write everything pending (the
        batch row marked ``completed``). Later finishes (a call still ending) are written at once."""
        self.closed, self.completed = True, completed
        if self._renewer is not None:
            self._renewer.cancel()
        unused = self.held - self.calling - set(self.release)
        self.release.extend(sorted(unused))
        self.ready.clear()
        if completed:  # the mark is a change of its own: the timer may have written everything else already
            self.stats.dirty = True
        self.flush(completed)
        if self.error is not None:
            error, self.error = self.error, None
            raise error


class Gateway:
    """Runs batches of CallRequests through litellm with caching, limits, retries and a ledger.

    ``stage`` labels every stored call and batch so ``rubriclab calls`` can account per stage. ``send_turns``: how
    many calls to a provider over the network build their request in litellm at once (``llm._pacing``; None: no
    limit). ``freeze_old_objects``: while a batch runs, the cycle collector skips the objects that existed when it
    started (``llm._heap``; False: collect as Python does). ``provider_processes``: with 2 or more, calls to
    providers over the network are made by that many worker processes (``llm._processes``; 1: in this process);
    ``close()`` stops them.
    """

    def __init__(self, store: CallStore, stage: str = "adhoc", progress: bool = True,
                 prefix_schedule: bool = True, budget: SpendBudget | None = None,
                 send_turns: int | None = TURNS, freeze_old_objects: bool = True,
                 provider_processes: int = 1) -> None:
        if provider_processes < 1:
            raise ArgumentError(f"provider_processes must be at least 1 (1: calls made in this process), "
                                f"got {provider_processes}")
        self.store = store
        self.stage = stage
        self.spend = SpendGuard(budget or SpendBudget(), stage)  # fresh calls of this gateway vs llm.budget
        self.progress = progress
        self.prefix_schedule = prefix_schedule  # in-process models: calls sharing a prompt prefix run adjacently
        self._limiters: dict[tuple[str, str | None], ModelLimiter] = {}
        self._inflight: dict[str, asyncio.Future] = {}  # identical requests in one batch share one call
        self._slots: dict[tuple[str, str | None], asyncio.Semaphore] = {}  # claim only what can run now
        self._writes: _Writes | None = None  # the running batch's grouped store writes
        self._salt: bytes | None = None
        self.send_turns = send_turns
        self.freeze_old_objects = freeze_old_objects
        self.pacer: SendPacer | None = None  # the running (or last) batch's send turns
        self.provider_processes = provider_processes
        self.processes: ProviderProcesses | None = None  # started by the first batch that calls over the network
        self._remote: ProviderProcesses | None = None  # the processes the running batch attached (its network calls)
        # a call that failed for good is not sent again by this gateway (a later batch of the stage gets its record)
        self._final: dict[str, CallRecord] = {}
        # endpoints that answered past a reply's cap (they ignore max_tokens): nothing more is sent to them
        self._blocked: dict[tuple[str, str | None], str] = {}
        self._desc = "calls"

    @property
    def salt(self) -> bytes:
        """The store's salt for the hash of private request fields (``store_salt``)."""
        if self._salt is None:
            self._salt = store_salt(self.store)
        return self._salt

    # -- public API -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the provider processes, if any (the store stays open: it is the caller's)."""
        if self.processes is not None:
            self.processes.close()
            self.processes = None

    def run(self, requests: Sequence[CallRequest], desc: str = "calls") -> list[CallResult]:
        """Run a batch synchronously; results come back in request order."""
        return asyncio.run(self.arun(requests, desc=desc))

    async def arun(self, requests: Sequence[CallRequest], desc: str = "calls") -> list[CallResult]:
        """Run a batch on the current event loop; results come back in request order."""
        with old_objects_frozen(self.freeze_old_objects and bool(requests)):
            return await self._arun(requests, desc)

    async def _arun(self, requests: Sequence[CallRequest], desc: str) -> list[CallResult]:
        self._limiters, self._inflight, self._slots = {}, {}, {}  # asyncio primitives belong to one loop
        self.pacer = SendPacer(self.send_turns) if self.send_turns is not None else None
        self.spend.begin_batch()
        self._desc = desc
        stats = _BatchStats(self.stage)
        writes: _Writes | None = None
        if requests:
            stats.start([r.role for r in requests])
            stats.write(self.store, completed=False)
        results: list[CallResult | None] = [None] * len(requests)
        completed = False
        bar = tqdm(total=len(requests), desc=f"{self.stage}:{desc}", disable=not self.progress or not requests,
                   mininterval=0.5, leave=False)
        tasks: list[asyncio.Future] = []
        attached: ProviderProcesses | None = None
        try:
            for role in {id(r.role): r.role for r in requests}.values():
                role.private_params()  # an unset os.environ/NAME stops the batch before any call, naming the field
            keys = [r.key(0, salt=self.salt) for r in requests]  # hashing the messages is the per-call hot path: once
            cached = self.store.get_ok(keys)
            pending: list[int] = []
            for i, req in enumerate(requests):
                rec = cached.get(keys[i])
                if rec is not None:
                    res = self._from_record(req, rec, cached=True)
                    if res.ok or res.parse_error is None or req.role.parse_retries == 0:
                        results[i] = res
                        stats.add(req.role, items=1, cache_hits=1, parse_failures=0 if res.ok else 1)
                        bar.update(1)
                        continue
                pending.append(i)

            for role in {id(requests[i].role): requests[i].role for i in pending
                         if not in_process(requests[i].role.model)}.values():
                role.transport_params()  # an endpoint that cannot work stops the batch before any call, in one line
            self.spend.check([requests[i] for i in pending], desc)  # past llm.budget: stop before sending
            if self.prefix_schedule:
                pending = prefix_order(requests, pending)
            # a group of records is as large as what runs at once: a model called one at a time (in-process, or
            # concurrency 1) has each record written as it ends, so a fault that kills the process loses only its call
            every = max([self._slot_size(requests[i].role) for i in pending] or [1])
            order: dict[Any, list[str]] = defaultdict(list)
            for i in pending:
                if keys[i] not in cached:
                    order[_group(requests[i].role)].append(keys[i])
            writes = self._writes = _Writes(self.store, stats, order, every=min(256, every))
            if self.provider_processes > 1 and any(not in_process(requests[i].role.model) for i in pending):
                if self.processes is None:
                    self.processes = ProviderProcesses(self.provider_processes, self.send_turns)
                attached = self._remote = self.processes
                await attached.attach()

            async def one(i: int) -> None:
                try:
                    res = results[i] = await self._resolve(requests[i], stats, keys[i], cached.get(keys[i]))
                except (BudgetStop, _NotSent) as exc:  # not sent: the batch goes on with what is in flight
                    res = results[i] = CallResult(request=requests[i], ok=False, error=f"not sent: {exc}")
                    stats.add(requests[i].role, items=1, failures=1)
                if not res.cached:  # each provider call was accounted as its reply arrived (_call)
                    bar.set_postfix_str(self.spend.running(), refresh=False)
                bar.update(1)

            tasks = [asyncio.ensure_future(one(i)) for i in pending]
            await asyncio.gather(*tasks)
            completed = True
            if self.spend.stopped is not None:  # the finished calls are written by the finally below
                raise BudgetExceededError(self.spend.stopped)
        finally:
            bar.close()
            try:  # a failed or cancelled batch stops its other calls (each releases its claim); what finished is kept
                inflight = [t for t in [*tasks, *self._inflight.values()] if not t.done()]
                for t in inflight:
                    t.cancel()
                if inflight:
                    await asyncio.gather(*inflight, return_exceptions=True)
            finally:
                self._writes = None
                self._remote = None
                if attached is not None:
                    attached.detach()
                if writes is not None:
                    writes.close(completed)
                elif requests:
                    stats.write(self.store, completed)
        return results  # type: ignore[return-value]

    # -- internals --------------------------------------------------------------------------
    async def _resolve(self, req: CallRequest, stats: _BatchStats, first_key: str,
                       first: CallRecord | None) -> CallResult:
        total = CallResult(request=req, ok=False)
        hits = fresh_retries = 0
        messages = req.messages
        for attempt in range(req.role.parse_retries + 1):
            key = first_key if attempt == 0 else req.key(attempt, messages, salt=self.salt)
            rec = first if attempt == 0 else self.store.get_ok([key]).get(key)
            hit = rec is not None
            if rec is None:
                rec, fresh = await self._fetch(req, attempt, messages, key)
                hit = not fresh
            hits += hit
            fresh_retries += 0 if hit else rec.retries
            res = self._from_record(req, rec, cached=hit)
            if res.parse_error is not None:  # the re-ask says what was wrong, not who said it (re-ask keys unchanged)
                messages = req.reask_messages(res.text, res.parse_error.removeprefix(f"{req.role.model}: "))
            total.attempts += 1
            total.retries += rec.retries
            total.prompt_tokens += rec.prompt_tokens
            total.completion_tokens += rec.completion_tokens
            total.cost += rec.cost
            total.latency_s += rec.latency_s
            total.text, total.value, total.error, total.parse_error, total.extra = (
                res.text, res.value, res.error, res.parse_error, res.extra)
            total.ok = res.ok
            if res.ok or res.parse_error is None:
                break  # success, or a transport failure already retried by _call
        total.cached = hits == total.attempts
        stats.add(req.role, items=1, cache_hits=1 if total.cached else 0,
                  provider_calls=total.attempts - hits, retries=fresh_retries,
                  failures=1 if (not total.ok and total.parse_error is None) else 0,
                  parse_failures=1 if total.parse_error else 0,
                  prompt_tokens=0 if total.cached else total.prompt_tokens,
                  completion_tokens=0 if total.cached else total.completion_tokens,
                  cost=0.0 if total.cached else total.cost)
        return total

    async def _fetch(self, req: CallRequest, attempt: int, messages: list[dict[str, Any]],
                     key: str) -> tuple[CallRecord, bool]:
        """The record for ``key``: a new provider call, or the one already made for an identical request in
        this batch (e.g. a flip-rate run that equals a panel seat). Returns (record, made_by_this_request)."""
        final = self._final.get(key)
        if final is not None:  # failed for good earlier in this run: recorded once, not sent again
            return final, False
        fut = self._inflight.get(key)
        if fut is not None:
            rec, _ = await asyncio.shield(fut)
            return rec, False
        fut = self._inflight[key] = asyncio.ensure_future(self._claimed_call(req, attempt, messages, key))
        return await asyncio.shield(fut)

    async def _claimed_call(self, req: CallRequest, attempt: int, messages: list[dict[str, Any]],
                            key: str) -> tuple[CallRecord, bool]:
        """Call the provider only while holding the store's claim on ``key``; when another process holds it,
        wait for its record instead (processes sharing a store make each unique call once). A claim is taken
        when a concurrency slot is free, with the claims of the next keys of the batch (a slice as large as the
        model's concurrency, one transaction), so workers sharing a batch split it instead of one claiming it all.
        A claim whose owner died (SIGKILL) or stopped renewing it is taken over. The record is written, and the
        claim dropped, with the batch's next grouped write (``_Writes``)."""
        writes = self._writes
        assert writes is not None, "_claimed_call runs inside arun"
        wait = 0.05
        while True:
            async with self._slot(req.role):
                state, got = writes.claim(key, _group(req.role), ahead=self._slot_size(req.role) - 1)
                if state == "done":  # made by another process since our batch began
                    return got, False
                if state == "claimed":
                    rec: CallRecord | None = None
                    try:
                        rec = await self._call(req, attempt, messages, key)
                    finally:
                        writes.finish(key, rec)
                    return rec, True
            if state == "held":
                if claim_is_stale(got):
                    self.store.release(key, got)
                    continue
                await asyncio.sleep(wait)
                wait = min(1.0, wait * 1.5)
            # "free": released without an ok record (it failed) as we looked: try ourselves

    def _slot_size(self, role: RoleSpec) -> int:
        # an in-process model decodes one call at a time; more in flight would only race for its lock and break the
        # prefix order (calls sharing a prompt prefix back to back)
        return 1 if self.prefix_schedule and shares_kv_state(role.model) else max(1, role.concurrency)

    def _slot(self, role: RoleSpec) -> asyncio.Semaphore:
        key = _group(role)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = asyncio.Semaphore(self._slot_size(role))
        return slot

    def _from_record(self, req: CallRequest, rec: CallRecord, cached: bool) -> CallResult:
        res = CallResult(request=req, ok=rec.status == "ok", text=rec.text, error=rec.error, cached=cached,
                         attempts=1, retries=rec.retries, prompt_tokens=rec.prompt_tokens,
                         completion_tokens=rec.completion_tokens, cost=rec.cost, latency_s=rec.latency_s,
                         extra=rec.extra)
        finish = (rec.extra or {}).get("finish_reason")
        if res.ok and finish in ("length", REPETITION) and not req.accepts_truncated:
            # a reply cut off by the token limit, or ended by the engine in a verbatim loop, states no complete
            # answer, whatever it happens to contain
            res.ok, res.parse_error = False, _cut_short(req, rec.extra or {})
        elif res.ok and req.parser is not None:
            try:
                res.value = req.parser(rec.text or "")
            except ParseFailure as exc:
                res.ok, res.parse_error = False, str(exc)
        elif res.ok:
            res.value = rec.text
        if res.parse_error is not None:  # one line naming the model, as a file error names its file
            res.parse_error = f"{req.role.model}: {res.parse_error}"
        return res

    def _limiter(self, role: RoleSpec) -> ModelLimiter:
        key = (role.model, role.api_base)
        lim = self._limiters.get(key)
        if lim is None:
            lim = self._limiters[key] = ModelLimiter(role.concurrency, role.rpm, role.tpm)
        return lim

    async def _call(self, req: CallRequest, attempt: int, messages: list[dict[str, Any]], key: str) -> CallRecord:
        role = req.role
        params = req.params(attempt)
        limiter = self._limiter(role)
        est = _estimate_tokens(req.messages) + role.max_tokens
        private = role.private_params()  # resolved at call time: sent, never stored
        secrets = role.secret_values()
        retries = 0
        network = not in_process(role.model)
        remote = self._remote if self._remote is not None and network else None
        pacer = self.pacer if remote is None and network else None  # a worker paces its own
        group = _group(role)
        # the most of a reply's body that is read (llm._reply_cap); an in-process model has no body to cap
        cap = reply_cap_bytes(role.max_tokens, req.logprobs) if network else None
        while True:
            if group in self._blocked:
                raise _NotSent(self._blocked[group])
            # admitted by the budget (llm._budget) before it takes a slot; settled in the finally below
            ticket = await self.spend.admit(role.model, messages, role.max_tokens,
                                            cap_tokens(cap) if cap else role.max_tokens, self._desc)
            try:
                await limiter.acquire(est)
            except BaseException:
                self.spend.settle(ticket, 0, 0.0)
                raise
            spent: tuple[int, float] = (0, 0.0)
            used: int | None = None
            handoff = None
            answered = False
            t0 = time.perf_counter()
            try:
                if pacer is not None:
                    handoff = await pacer.take(group)
                    t0 = time.perf_counter()  # the call's latency, not its wait for a turn
                # transport params (endpoint, key) win over a same-named `extra` entry; the store and the key
                # see only public_params(params) (the allow-list) and the role's private fields only as names and
                # a salted hash
                kwargs = merge_params(params, private, role.transport_params())
                if remote is not None:  # the latency as the worker measured it, after its send turn
                    resp, latency = await remote.acompletion(group, model=role.model, messages=messages,
                                                             timeout=role.timeout, num_retries=0, max_retries=0,
                                                             **{REPLY_CAP_ARG: cap}, **kwargs)
                else:
                    kwargs["logger_fn"] = handoff  # litellm calls it as it sends: the next call's turn to build
                    with capped(cap):
                        resp = await litellm.acompletion(model=role.model, messages=messages, timeout=role.timeout,
                                                         num_retries=0, max_retries=0, **kwargs)
                    latency = time.perf_counter() - t0
                answered = True
                check_response(resp)
                rec = _record_from_response(resp, req, messages, params, key, attempt, self.stage, latency, retries)
                spent = (rec.prompt_tokens, rec.cost)
                used = rec.prompt_tokens + rec.completion_tokens
                past = check_reply(resp, role.max_tokens, cap) if cap is not None else None
                if past is not None:  # read whole, but more than max_tokens allows: refused, and counted
                    rec.status, rec.text, rec.error = "error", None, f"ReplyTooLargeError: {past}"
                    return self._failed_for_good(rec, group)
                return rec  # written, with the release of its claim, by the batch's next grouped write
            except Exception as exc:  # noqa: BLE001 - classified below; nothing escapes unrecorded
                if cap is not None and is_reply_too_large(exc):  # cut at the cap: counted at what was read
                    tokens = cap_tokens(cap)
                    spent = (ticket.prompt_tokens, price_of(role.model, ticket.prompt_tokens, tokens) or 0.0)
                    rec = CallRecord(key=key, model=role.model, role=role.name, stage=self.stage,
                                     sample_index=req.sample_index, attempt=attempt, status="error",
                                     error=_describe(exc, secrets), latency_s=time.perf_counter() - t0,
                                     retries=retries, prompt_tokens=spent[0], completion_tokens=tokens,
                                     cost=spent[1], extra={"reply_cut_at_bytes": cap},
                                     request=_stored_request(role, messages, params))
                    return self._failed_for_good(rec, group)
                if not is_retryable(exc) or retries >= role.max_retries:
                    rec = CallRecord(key=key, model=role.model, role=role.name, stage=self.stage,
                                     sample_index=req.sample_index, attempt=attempt, status="error",
                                     error=_describe(exc, secrets), latency_s=time.perf_counter() - t0,
                                     retries=retries,
                                     request=_stored_request(role, messages, params))
                    self._final[key] = rec
                    return rec
                delay = retry_after_seconds(exc)
                if delay is None:
                    delay = backoff_seconds(retries)
                self.store.record_retry(key, self.stage, role.name, role.model, _describe(exc, secrets))
            finally:
                if pacer is not None:
                    pacer.done(group, handoff, ok=answered)
                limiter.release(est, used)
                self.spend.settle(ticket, *spent)
            retries += 1
            await asyncio.sleep(delay)

    def _failed_for_good(self, rec: CallRecord, group: tuple[str, str | None]) -> CallRecord:
        """A reply past its cap: its record is final, and its endpoint gets no more calls in this run (it ignores
        max_tokens, so every reply would cost past its estimate and be refused)."""
        self._final[rec.key] = rec
        where = endpoint_public(group[1]) or "its default endpoint"
        self._blocked.setdefault(group, f"{group[0]} at {where} answered past a reply's cap earlier in this run (the "
                                        "server ignores max_tokens): no more calls go to it; fix the server's "
                                        "max_tokens handling or use another endpoint")
        return rec


def _group(role: RoleSpec) -> tuple[str, str | None]:
    """A model endpoint: the calls that share a concurrency slot (and a limiter)."""
    return role.model, role.api_base


def _stored_request(role: RoleSpec, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """What the store keeps of a request: messages, the allow-listed params, the endpoint without credentials,
    and the names (only) of the private fields that were sent too."""
    out: dict[str, Any] = {"messages": messages, "params": public_params(params)}
    if role.api_base:
        out["endpoint"] = endpoint_public(role.endpoint)
    unstored = role.unstored_names() if role.extra else []
    if unstored:
        out["sent_not_stored"] = unstored
    return out


def _describe(exc: BaseException, secrets: list[str]) -> str:
    """``describe(exc)`` without the role's private values (a server may quote back the body it was sent): they are
    cut before the message is shortened, so no part of one survives at the cut."""
    if not secrets:
        return describe(exc)
    msg = " ".join(str(exc).split())
    for value in sorted({v for v in secrets if len(v) >= 6}, key=len, reverse=True):
        msg = msg.replace(value, REDACTED)
    msg = redact_text(msg)
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return f"{error_name(exc)}: {msg}"


def _cut_short(req: CallRequest, extra: dict[str, Any]) -> str:
    if extra.get("finish_reason") == REPETITION:
        loop = extra.get("loop") or {}
        return (f"reply stopped in a verbatim loop (a {loop.get('period', '?')}-token block repeated "
                f"{loop.get('repeats', '?')} times, finish_reason=repetition, before max_tokens={req.role.max_tokens}); "
                "give one complete reply without repeating itself")
    return (f"reply cut off at the token limit (max_tokens={req.role.max_tokens}, finish_reason=length); "
            "give a shorter complete reply")


def _estimate_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 4 * len(messages)


def _record_from_response(resp: Any, req: CallRequest, messages: list[dict[str, Any]], params: dict[str, Any],
                          key: str, attempt: int, stage: str, latency: float, retries: int) -> CallRecord:
    choice = resp.choices[0]
    text = redact_known(choice.message.content or "")  # a server that quotes back the key in its reply
    usage = getattr(resp, "usage", None)
    extra: dict[str, Any] = {"finish_reason": getattr(choice, "finish_reason", None)}
    fields = getattr(choice, "provider_specific_fields", None) or {}
    if fields.get("stopped_by") == REPETITION:  # the embedded engine ended a looping reply (llm._loops)
        extra.update(finish_reason=REPETITION, loop=fields.get("loop"))
    logprobs = getattr(choice, "logprobs", None)
    if logprobs is not None:
        extra["logprobs"] = logprobs.model_dump() if hasattr(logprobs, "model_dump") else logprobs
    hidden = getattr(resp, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") or 0.0
    return CallRecord(
        key=key, model=req.role.model, role=req.role.name, stage=stage, sample_index=req.sample_index,
        attempt=attempt, status="ok", text=text, extra=extra,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=float(cost), latency_s=latency, retries=retries,
        request=_stored_request(req.role, messages, params),
    )
