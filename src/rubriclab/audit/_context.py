"""What every audit axis shares: the gateway, the judge panel and other roles, and the shape of a
metric entry in the audit card."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rubriclab.llm import Gateway, RoleSpec


@dataclass
class AuditContext:
    """Models and settings for one audit. ``judges`` is the panel; ``judges[0]`` is "the judge" used
    where the protocol names a single judge (flip rate, paraphrases, accuracy, adversarial scoring)."""

    gateway: Gateway
    judges: list[RoleSpec]
    paraphraser: RoleSpec | None = None
    attacker: RoleSpec | None = None
    verifier: RoleSpec | None = None
    templates_dir: str | None = None
    seed: int = 42
    n_boot: int = 2000
    confidence: float = 0.95
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def judge(self) -> RoleSpec:
        return self.judges[0]


def metric(value: float | None, low: float | None = None, high: float | None = None, n: int | None = None,
           **extra: Any) -> dict[str, Any]:
    """One audit-card entry: the estimate, its CI (item-level bootstrap) and the number of items behind it.

    NaN/None values stay (reported as missing, never dropped silently); ``extra`` carries context such as
    ``n_failed`` or the formula used."""
    def clean(x: float | None) -> float | None:
        if x is None:
            return None
        x = float(x)
        return None if math.isnan(x) else x

    return {"value": clean(value), "low": clean(low), "high": clean(high), "n": n, **extra}


def from_bootstrap(boot: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A metric entry from ``rubriclab.stats.item_bootstrap``'s result."""
    return metric(boot.get("estimate"), boot.get("low"), boot.get("high"), boot.get("n_items"), **extra)
