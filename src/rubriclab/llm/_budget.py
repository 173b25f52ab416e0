"""Spend guard: a stage's fresh calls are estimated before each batch and refused past ``llm.budget``.

The estimate is made before anything is sent: prompt tokens from litellm's ``token_counter`` (the model's own
tokenizer where litellm knows it, else its default one), cost from litellm's cost map with every reply at the
role's ``max_tokens`` (an upper bound). Calls the store already holds cost nothing and are not counted.
Parse re-asks and retries can add to what a batch spends; the guard counts them after the fact, so the next
batch sees them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
class SpendGuard:
    """What one stage's gateway has spent on fresh calls, checked against its budget before each batch."""

    budget: SpendBudget
    stage: str = "adhoc"
    prompt_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, prompt_tokens: int, cost_usd: float) -> None:
        self.prompt_tokens += int(prompt_tokens or 0)
        self.cost_usd += float(cost_usd or 0.0)

    def running(self) -> str:
        """What the progress bar shows: fresh spend so far in this stage."""
        return f"spent ${self.cost_usd:.4f}, {self.prompt_tokens:,} prompt tok"

    def check(self, requests: list[Any], desc: str) -> Estimate | None:
        """Raise BudgetExceededError when sending ``requests`` would pass the budget; the estimate otherwise."""
        if not self.budget.limited or not requests:
            return None
        est = estimate(requests)
        b, problems = self.budget, []
        if b.prompt_tokens is not None and self.prompt_tokens + est.prompt_tokens > b.prompt_tokens:
            problems.append(f"llm.budget.prompt_tokens={b.prompt_tokens:,} (spent {self.prompt_tokens:,})")
        if b.cost_usd is not None:
            if est.unpriced:
                problems.append(f"llm.budget.cost_usd={b.cost_usd:g}, which cannot be checked without a price "
                                f"for {', '.join(est.unpriced)} (litellm.register_model, or drop cost_usd)")
            elif self.cost_usd + est.cost_usd > b.cost_usd:
                problems.append(f"llm.budget.cost_usd={b.cost_usd:g} (spent ${self.cost_usd:.4f})")
        if problems:
            models = ", ".join(sorted({r.role.model for r in requests}))
            raise BudgetExceededError(
                f"stage {self.stage}: batch '{desc}' ({models}) would send {est.text()}, estimated before sending, "
                f"past {'; '.join(problems)}. Nothing of this batch was sent; finished calls are in the store. "
                "Raise llm.budget in params.yaml (or --set llm.budget.prompt_tokens=N) to go on.")
        return est
