"""Spend guard: ``llm.budget`` holds for a stage's fresh calls, inside a batch as well as between batches.

Before a batch, its fresh calls are estimated and the batch is refused whole when the estimate is past the budget:
prompt tokens from litellm's ``token_counter`` (the model's own tokenizer where litellm knows it, else its default
one), cost from litellm's cost map with every reply at the role's ``max_tokens``. Calls the store already holds cost
nothing and are not counted.

Inside the batch every provider call — first asks, parse re-asks and retries alike — is admitted before it is sent
and accounted the moment its reply arrives (``admit``/``settle``). A call goes out alongside others only while the
worst each of them can cost — its reply at its cap (``llm._reply_cap``: the most of a reply the gateway reads) —
fits in what is left; past that, one call at a time, as long as its reply at ``max_tokens`` fits. When the next call
does not fit, the batch sends nothing more: the calls in flight finish and are kept, and the batch ends with
``BudgetExceededError`` naming the knob. So a server that honours ``max_tokens`` keeps a stage within the budget,
and one that ignores it can take it past the budget by at most one reply at its cap."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import litellm

from rubriclab.errors import ConfigError, RubricLabError


class BudgetExceededError(RubricLabError):
    """A batch's estimated spend would take the stage past ``llm.budget``; nothing of it was sent."""


@dataclass(frozen=True)
class SpendBudget:
    """``llm.budget``: limits on one stage's fresh calls (None: no limit)."""

    prompt_tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def of(cls, section: Mapping[str, Any] | None) -> SpendBudget:
        section = dict(section or {})
        unknown = sorted(set(section) - {"prompt_tokens", "cost_usd"})
        if unknown:
            raise ConfigError(f"llm.budget: unknown key(s) {unknown}; expected prompt_tokens, cost_usd")
        return cls(prompt_tokens=section.get("prompt_tokens"), cost_usd=section.get("cost_usd"))

    @property
    def limited(self) -> bool:
        return self.prompt_tokens is not None or self.cost_usd is not None


def _is_free(model: str) -> bool:
    from rubriclab.llm._providers import in_process

    return in_process(model)  # no provider bill


def prompt_tokens_of(model: str, messages: list[dict[str, Any]]) -> int:
    """litellm's count of a request's prompt tokens (its default tokenizer for a model it does not know)."""
    try:
        return int(litellm.token_counter(model=model, messages=messages))
    except Exception:  # noqa: BLE001 - a tokenizer that cannot load: fall back to ~4 characters a token
        return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 4 * len(messages)


def price_of(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD from litellm's cost map; 0 for in-process models; None when the map has no price for ``model``."""
    if _is_free(model):
        return 0.0
    try:
        p, c = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception:  # noqa: BLE001 - litellm raises for models it has not mapped
        return None
    return float(p) + float(c)


@dataclass
class Estimate:
    calls: int = 0
    prompt_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: tuple[str, ...] = ()

    def text(self) -> str:
        cost = f"~${self.cost_usd:.4f}" + (f" (no price in litellm's cost map for {', '.join(self.unpriced)})"
                                           if self.unpriced else "")
        return f"{self.calls} call(s), ~{self.prompt_tokens:,} prompt tokens, {cost}"


def estimate(requests: Iterable[Any]) -> Estimate:
    """Prompt tokens and cost of sending ``requests`` (CallRequests) once, replies at ``max_tokens``."""
    est, unpriced = Estimate(), set()
    for req in requests:
        n = prompt_tokens_of(req.role.model, req.messages)
        price = price_of(req.role.model, n, int(req.role.max_tokens))
        est.calls += 1
        est.prompt_tokens += n
        if price is None:
            unpriced.add(req.role.model)
        else:
            est.cost_usd += price
    est.unpriced = tuple(sorted(unpriced))
    return est


@dataclass
class Ticket:
    """One admitted provider call: what it was reserved at, and its prompt tokens as estimated."""

    prompt_tokens: int = 0
    worst_usd: float = 0.0
    worst_tokens: int = 0


class BudgetStop(BudgetExceededError):
    """A call of a running batch that the budget did not admit: not sent (the batch ends with the guard's message)."""


@dataclass
class SpendGuard:
    """What one stage's gateway has spent on fresh calls, checked against its budget before each batch and before
    each call it sends (``admit``), accounted as each reply arrives (``settle``)."""

    budget: SpendBudget
    stage: str = "adhoc"
    prompt_tokens: int = 0
    cost_usd: float = 0.0
    stopped: str | None = None  # why the running batch sends nothing more (one line), None while it may
    _in_flight: int = 0
    _reserved_usd: float = 0.0
    _reserved_tokens: int = 0
    _changed: asyncio.Event | None = field(default=None, repr=False)  # set (and replaced) when a call ends

    def add(self, prompt_tokens: int, cost_usd: float) -> None:
        self.prompt_tokens += int(prompt_tokens or 0)
        self.cost_usd += float(cost_usd or 0.0)

    def running(self) -> str:
        """What the progress bar shows: fresh spend so far in this stage."""
        return f"spent ${self.cost_usd:.4f}, {self.prompt_tokens:,} prompt tok"

    def begin_batch(self) -> None:
        """A new batch (on the running event loop): nothing reserved, nothing stopped."""
        self.stopped, self._in_flight, self._reserved_usd, self._reserved_tokens = None, 0, 0.0, 0
        self._changed = asyncio.Event() if self.budget.limited else None

    async def admit(self, model: str, messages: list[dict[str, Any]], max_tokens: int, cap_tokens: int,
                    desc: str) -> Ticket:
        """Wait until the call may be sent within the budget and reserve it; raise BudgetStop (and stop the batch)
        when it never may. ``cap_tokens``: the completion tokens its reply is counted at, at most."""
        n = prompt_tokens_of(model, messages) if self.budget.limited else 0
        if self._changed is None:
            return Ticket(prompt_tokens=n)
        likely, worst = price_of(model, n, max_tokens), price_of(model, n, cap_tokens)
        ticket = Ticket(prompt_tokens=n, worst_usd=worst or 0.0, worst_tokens=n)
        b = self.budget
        while True:  # one event loop: nothing runs between the check and the reservation
            if self.stopped is not None:
                raise BudgetStop(self.stopped)
            tokens_fit = b.prompt_tokens is None or self.prompt_tokens + self._reserved_tokens + n <= b.prompt_tokens
            cost_fits_all = b.cost_usd is None or worst is None or \
                self.cost_usd + self._reserved_usd + worst <= b.cost_usd
            cost_fits_alone = b.cost_usd is None or likely is None or self.cost_usd + likely <= b.cost_usd
            if tokens_fit and (cost_fits_all or (self._in_flight == 0 and cost_fits_alone)):
                self._in_flight += 1
                self._reserved_usd += ticket.worst_usd
                self._reserved_tokens += n
                return ticket
            if self._in_flight == 0:  # nothing will come back to make room
                knob = "prompt_tokens" if not tokens_fit else "cost_usd"
                self.stopped = self._stop_line(knob, model, n, likely, desc)
                self._wake()
                raise BudgetStop(self.stopped)
            await self._changed.wait()

    def settle(self, ticket: Ticket, prompt_tokens: int, cost_usd: float) -> None:
        """An admitted call ended: its reservation freed, what it cost (0 if it failed unanswered) spent. Not a
        coroutine: it runs in the call's ``finally``, cancelled or not."""
        self.add(prompt_tokens, cost_usd)
        if self._changed is None:
            return
        self._in_flight -= 1
        self._reserved_usd -= ticket.worst_usd
        self._reserved_tokens -= ticket.worst_tokens
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        if changed is not None:
            changed.set()

    def _stop_line(self, knob: str, model: str, n: int, likely: float | None, desc: str) -> str:
        b = self.budget
        if knob == "prompt_tokens":
            why = (f"its ~{n:,} prompt tokens would pass llm.budget.prompt_tokens={b.prompt_tokens:,} (spent "
                   f"{self.prompt_tokens:,})")
            how = "--set llm.budget.prompt_tokens=N"
        else:
            why = (f"its reply at max_tokens (~${likely or 0:.4f}) would pass llm.budget.cost_usd={b.cost_usd:g} "
                   f"(spent ${self.cost_usd:.4f})")
            how = "--set llm.budget.cost_usd=X"
        return (f"stage {self.stage}: batch '{desc}' stopped sending: the next call ({model}) did not fit: {why}. "
                f"Calls that finished are in the store; the rest of the batch was not sent. Raise "
                f"llm.budget.{knob} in params.yaml (or {how}) to go on.")

    def check(self, requests: list[Any], desc: str) -> Estimate | None:
        """Raise BudgetExceededError when sending ``requests`` would pass the budget; the estimate otherwise."""
        if not self.budget.limited or not requests:
            return None
        est = estimate(requests)
        b, problems, knobs = self.budget, [], []
        if b.prompt_tokens is not None and self.prompt_tokens + est.prompt_tokens > b.prompt_tokens:
            problems.append(f"llm.budget.prompt_tokens={b.prompt_tokens:,} (spent {self.prompt_tokens:,})")
            knobs.append("prompt_tokens=N")
        if b.cost_usd is not None:
            if est.unpriced:
                problems.append(f"llm.budget.cost_usd={b.cost_usd:g}, which cannot be checked without a price "
                                f"for {', '.join(est.unpriced)} (litellm.register_model, or drop cost_usd)")
            elif self.cost_usd + est.cost_usd > b.cost_usd:
                problems.append(f"llm.budget.cost_usd={b.cost_usd:g} (spent ${self.cost_usd:.4f})")
                knobs.append("cost_usd=X")
        if problems:
            models = ", ".join(sorted({r.role.model for r in requests}))
            raise_it = " or ".join(f"--set llm.budget.{k}" for k in knobs) or "a price for the model"
            raise BudgetExceededError(
                f"stage {self.stage}: batch '{desc}' ({models}) would send {est.text()}, estimated before sending, "
                f"past {'; '.join(problems)}. Nothing of this batch was sent; finished calls are in the store. "
                f"Raise {' and '.join('llm.budget.' + k.split('=')[0] for k in knobs) or 'the budget'} in "
                f"params.yaml (or {raise_it}) to go on.")
        return est
