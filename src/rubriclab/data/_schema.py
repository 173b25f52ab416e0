"""Canonical preference pair and its A/B presentation to a judge."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

PAIR_FIELDS = ("id", "domain", "prompt", "chosen", "rejected", "meta")


def stable_hash(*parts: Any) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (unlike ``hash()``)."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "big")


def stable_id(*parts: Any, prefix: str = "") -> str:
    """A short content-derived id, for sources whose rows carry none."""
    return f"{prefix}{stable_hash(*parts):016x}"


@dataclass(frozen=True)
class Pair:
    """One human preference: ``chosen`` was preferred over ``rejected`` for ``prompt``."""

    id: str
    domain: str
    prompt: str
    chosen: str
    rejected: str
    # meta is excluded from the hash so a Pair stays hashable; it still takes part in ==.
    meta: dict = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # copy so the caller's dict cannot change a frozen record behind its back
        object.__setattr__(self, "meta", dict(self.meta or {}))

    def to_dict(self) -> dict:
        """A JSON-able dict with the canonical fields."""
        return {
            "id": self.id,
            "domain": self.domain,
            "prompt": self.prompt,
            "chosen": self.chosen,
            "rejected": self.rejected,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Pair:
        """Build from a canonical dict; keys outside the schema (e.g. ``source``) move into meta."""
        meta = dict(d.get("meta") or {})
        for key, value in d.items():
            if key not in PAIR_FIELDS:
                meta.setdefault(key, value)
        return cls(
            id=str(d["id"]),
            domain=d["domain"],
            prompt=d["prompt"],
            chosen=d["chosen"],
            rejected=d["rejected"],
            meta=meta,
        )


def swap_for(pair_id: str, seed: int) -> bool:
    """Whether ``pair_id`` is shown swapped (rejected as A) under ``seed``; stable across runs."""
    return stable_hash("ab-swap", seed, pair_id) & 1 == 1


def _presentation(pair: Pair, swapped: bool) -> dict:
    a, b = (pair.rejected, pair.chosen) if swapped else (pair.chosen, pair.rejected)
    return {
        "id": pair.id,
        "prompt": pair.prompt,
        "a": a,
        "b": b,
        "swapped": swapped,
        "human": "B" if swapped else "A",  # the letter holding the human-preferred response
    }


def present(pair: Pair, seed: int) -> dict:
    """Show ``pair`` as A/B with a seeded, recorded swap: ``{id, prompt, a, b, swapped, human}``."""
    return _presentation(pair, swap_for(pair.id, seed))


def present_both_orders(pair: Pair) -> list[dict]:
    """Both presentations (chosen as A, then chosen as B), for position-consistency audits."""
    return [_presentation(pair, False), _presentation(pair, True)]
