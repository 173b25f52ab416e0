"""Majority vote over k sampled verdicts, with exact early stopping.

The audit's judge accuracy is "majority of 5 samples at T=0.7, majority vote across parsed verdicts".
Once the leader cannot be caught by the samples still to come, the rest cannot change the verdict, so
they need not be bought. The stopping rule here is exact: it returns the full-sampling verdict, always.

Conventions: a vote is any hashable value (``"A"``, ``"B"``, a score); ``None``/NaN is a sample whose
verdict failed to parse — it uses up a sample but is not a vote. Ties among the top counts are NOT
broken (no position or coin rule that could bias accuracy): they are reported as ``tie`` (default
``"tie"``). With an odd n and two letters a tie needs a parse failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from rubriclab.errors import InputError
from rubriclab.stats._checks import is_missing, positive_int


def majority_vote(votes: Sequence[Any], tie: Hashable = "tie") -> Any:
    """Full-sampling verdict: the value with strictly the most parsed votes.

    Returns the winner; ``tie`` when two or more values share the top count; ``None`` when no vote
    parsed (every sample failed — callers then count the item as a parse failure).
    """
    counts = _counts(votes)
    if not counts:
        return None
    top = counts.most_common(2)
    if len(top) == 2 and top[0][1] == top[1][1]:
        return tie
    return top[0][0]


def majority_decided(votes: Sequence[Any], n_total: int, tie: Hashable = "tie") -> Any:
    """The full-sampling verdict if the ``n_total − len(votes)`` samples still to come cannot change it.

    With leader count c1, runner-up count c2 (0 if none) and r samples remaining, the leader is final iff
    ``c1 > c2 + r`` (even if every remaining sample goes to the runner-up it stays strictly ahead; if
    ``c1 ≤ c2 + r`` that very continuation ties or overturns it). A tie is only final when r = 0.
    Returns the winner, ``tie`` (r = 0 only), ``None`` while undecided — and also ``None`` when all
    n_total samples are in and none parsed (same as ``majority_vote``).
    """
    n_total = positive_int(n_total, "n_total")
    if len(votes) > n_total:
        raise InputError(f"has {len(votes)} votes for n_total={n_total}", field="votes",
                         expected=f"at most n_total={n_total} samples")
    remaining = n_total - len(votes)
    if remaining == 0:
        return majority_vote(votes, tie=tie)
    counts = _counts(votes)
    if not counts:
        return None
    top = counts.most_common(2)
    runner_up = top[1][1] if len(top) == 2 else 0
    return top[0][0] if top[0][1] > runner_up + remaining else None


def early_stop_majority(draw: Callable[[int], Any], n_total: int, tie: Hashable = "tie") -> tuple[Any, int]:
    """Draw samples ``draw(0), draw(1), …`` until ``majority_decided``; return ``(verdict, n_used)``.

    The verdict equals ``majority_vote`` over all n_total draws (see ``majority_decided``); ``n_used`` is
    the number of samples actually drawn (≤ n_total).
    """
    n_total = positive_int(n_total, "n_total")
    votes: list[Any] = []
    for i in range(n_total):
        votes.append(draw(i))
        verdict = majority_decided(votes, n_total, tie=tie)
        if verdict is not None or len(votes) == n_total:
            return verdict, len(votes)
    raise AssertionError("unreachable")  # pragma: no cover


def samples_still_needed(votes_so_far_per_item: Mapping[Hashable, Sequence[Any]], n_total: int) -> dict[Hashable, int]:
    """For a caller sampling in waves: how many more samples each item needs before it *could* be decided.

    0 for decided items (or items with all n_total samples). Otherwise the smallest k such that k more
    votes, all for the current leader, would decide it: ``k = ⌊(c2 + r − c1) / 2⌋ + 1`` (≤ r), from
    ``c1 + k > c2 + (r − k)``. Sequential early stopping would draw at least these k samples too, so a
    wave of this size never buys a sample that one-at-a-time sampling would have skipped.
    """
    n_total = positive_int(n_total, "n_total")
    needed: dict[Hashable, int] = {}
    for item, votes in votes_so_far_per_item.items():
        if len(votes) > n_total:
            raise InputError(f"item {item!r} has {len(votes)} votes for n_total={n_total}",
                             field="votes_so_far_per_item", expected=f"at most n_total={n_total} per item")
        remaining = n_total - len(votes)
        if remaining == 0 or majority_decided(votes, n_total) is not None:
            needed[item] = 0
            continue
        top = _counts(votes).most_common(2)
        c1 = top[0][1] if top else 0
        c2 = top[1][1] if len(top) == 2 else 0
        needed[item] = min(remaining, (c2 + remaining - c1) // 2 + 1)
    return needed


def _counts(votes: Sequence[Any]) -> Counter:
    if isinstance(votes, (str, bytes)):
        raise InputError(f"is a {type(votes).__name__}", field="votes", expected="a sequence of verdicts")
    return Counter(v for v in votes if not is_missing(v))
