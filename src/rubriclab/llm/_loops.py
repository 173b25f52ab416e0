"""Stopping a greedy reply that has fallen into a verbatim loop (the embedded engine, T=0, no grammar).

A small model decoding greedily often starts repeating one block of tokens ("Do not allow any other text to
influence your evaluation." over and over) until the token limit; such a reply is unusable whatever its length (the
gateway drops a reply cut off at the limit). Decoding the rest of it was most of the drift stage's time on the
embedded model: its nine rubric rewrites were 400-token loops. Once the reply's tail is the same block repeated
``min_repeats`` times and at least ``min_span`` tokens long, the engine ends it and reports ``finish_reason``
``"repetition"``, which the gateway treats like ``"length"``: counted, named, never parsed as an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REPETITION = "repetition"  # the finish_reason of a reply stopped in a loop


@dataclass(frozen=True)
class LoopRule:
    """When a reply's tail counts as a loop: one block of ``1..max_period`` tokens repeated verbatim at least
    ``min_repeats`` times, covering at least ``min_span`` tokens (a one-token block needs 64 copies)."""

    min_repeats: int = 4
    min_span: int = 64
    max_period: int = 128

    def repeats_needed(self, period: int) -> int:
        return max(self.min_repeats, -(-self.min_span // period))


LOOP_RULE = LoopRule()


def looping_tail(tokens: list[int], rule: LoopRule = LOOP_RULE) -> tuple[int, int] | None:
    """``(period, repeats)`` when ``tokens`` end in a loop under ``rule`` (the shortest such period), else None."""
    n = len(tokens)
    for period in range(1, min(rule.max_period, n // rule.min_repeats) + 1):
        need = rule.repeats_needed(period)
        span = period * need
        if span > n:
            continue
        tail = tokens[n - span:]
        if tail[period:] == tail[:-period]:  # periodic with this period over the whole span
            repeats = need
            while n - (repeats + 1) * period >= 0 and \
                    tokens[n - (repeats + 1) * period:n - repeats * period] == tokens[n - period:]:
                repeats += 1
            return period, repeats
    return None


class LoopStop:
    """A llama-cpp-python logits processor: passes the logits through unchanged until the reply (the tokens
    after the first call's prompt) ends in a loop, then allows only the end-of-generation token, so the reply
    ends there. ``found`` holds ``(period, repeats)`` once it fired."""

    def __init__(self, eos_token: int, rule: LoopRule = LOOP_RULE) -> None:
        self.eos = eos_token
        self.rule = rule
        self.prompt_len: int | None = None
        self.found: tuple[int, int] | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        if self.found is None:
            reply = [int(t) for t in input_ids[self.prompt_len:]]
            self.found = looping_tail(reply, self.rule) if len(reply) >= self.rule.min_span else None
        if self.found is not None:
            eos = scores[self.eos]
            scores[:] = float("-inf")
            scores[self.eos] = eos if eos > float("-inf") else 0.0
        return scores
