"""Judge accuracy against human labels, with parse failures and ties counted, and position consistency.

Letters are as shown to the judge: in the original order response 1 is "A"; in the swapped order
response 1 is "B" (``rubriclab.data.present_both_orders``). A parse failure is ``None``/NaN: it is
excluded from every denominator and always reported in ``n_failed`` — never silently dropped.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from rubriclab.errors import InputError
from rubriclab.settings import TIE_CREDIT, TIES_COMMON
from rubriclab.stats._checks import as_object_1d, missing_mask, same_length


def accuracy(pred: Any, human: Any, tie: Hashable = "tie", tie_credit: float = TIE_CREDIT) -> dict[str, Any]:
    """Accuracy over parsed predictions: ``acc = Σ_{i parsed} credit_i / n``, n = #parsed.

    ``credit_i`` = 1 if ``pred_i == human_i``; ``tie_credit`` (default ``TIE_CREDIT`` = 0.5, the project's one
    rule: the expected credit of breaking the tie with a fair coin) if ``pred_i == tie``; else 0.
    Returns dict(accuracy, n, n_failed, n_total, failure_rate, n_correct, n_ties, per_item (credit,
    NaN for failed — ready for ``item_bootstrap``), reason).
    """
    p = as_object_1d(pred, "pred")
    h = as_object_1d(human, "human")
    same_length("pred", p, "human", h)
    if missing_mask(h).any():
        raise InputError(f"has {int(missing_mask(h).sum())} missing label(s)", field="human",
                         expected="a human label for every item")
    if not 0.0 <= float(tie_credit) <= 1.0:
        raise InputError(f"tie_credit={tie_credit!r}", field="tie_credit", expected="a credit in [0, 1]")
    failed = missing_mask(p)
    per_item = np.full(len(p), np.nan)
    is_tie = np.array([not f and x == tie for x, f in zip(p, failed, strict=True)], dtype=bool)
    correct = np.array([not f and x == y for x, y, f in zip(p, h, failed, strict=True)], dtype=bool)
    per_item[~failed] = 0.0
    per_item[is_tie & ~correct] = float(tie_credit)
    per_item[correct] = 1.0
    n = int((~failed).sum())
    return {
        "accuracy": float(per_item[~failed].mean()) if n else np.nan, "n": n, "n_failed": int(failed.sum()),
        "n_total": len(p), "failure_rate": float(failed.mean()) if len(p) else np.nan,
        "n_correct": int(correct.sum()), "n_ties": int(is_tie.sum()), "per_item": per_item,
        "reason": None if n else "no parsed prediction",
    }


def other_tie_credit(tie_credit: float) -> float:
    """The other rule a card shows beside a rate: 0 (a tie never agrees) under any positive credit, else
    ``TIE_CREDIT``."""
    return 0.0 if float(tie_credit) > 0 else TIE_CREDIT


def ties_common(n_ties: int, n: int) -> bool:
    """Whether ties are common enough (more than ``TIES_COMMON`` of ``n`` verdicts) that a card shows the rate
    under the other tie rule beside it."""
    return bool(n) and n_ties / n > TIES_COMMON


def at_tie_credit(value: float, n_credited_ties: int, n: int, tie_credit: float, other: float) -> float:
    """A mean credit over ``n`` items, ``n_credited_ties`` of them ties that earned ``tie_credit``, recomputed
    with the ties earning ``other``: ``value + (other − tie_credit) · n_credited_ties / n``."""
    if not n:
        return float("nan")
    return float(value + (float(other) - float(tie_credit)) * n_credited_ties / n)


def position_consistency(
    verdict_orig: Any,
    verdict_swapped: Any,
    letters: tuple[Hashable, Hashable] = ("A", "B"),
) -> dict[str, Any]:
    """Position bias of a pairwise judge from verdicts under both presentation orders.

    * ``first_position_rate = #{judgments = letters[0]} / #{parsed judgments}`` pooled over both orders:
      0.5 for an unbiased judge, 1.0 for one that always picks the response shown first.
    * ``swap_flip_rate = #{items: orig == swapped} / #{items with both parsed}``: the same *letter* under
      both orders means the underlying preferred response changed when the order was swapped.
    Returns dict(first_position_rate, n_judgments, swap_flip_rate, n_items, n_failed (judgments),
    flips (bool per item), evaluated (bool per item, both parsed)).
    """
    o, s = _two_orders(verdict_orig, verdict_swapped, letters)
    mo, ms = missing_mask(o), missing_mask(s)
    judged = np.concatenate([o[~mo], s[~ms]])
    evaluated = ~mo & ~ms
    flips = np.zeros(len(o), dtype=bool)
    flips[evaluated] = o[evaluated] == s[evaluated]
    n_items = int(evaluated.sum())
    return {
        "first_position_rate": float(np.mean(judged == letters[0])) if len(judged) else np.nan,
        "n_judgments": int(len(judged)),
        "swap_flip_rate": float(flips[evaluated].mean()) if n_items else np.nan,
        "n_items": n_items, "n_failed": int(mo.sum() + ms.sum()), "flips": flips, "evaluated": evaluated,
    }


def accuracy_both_orders(
    verdict_orig: Any,
    verdict_swapped: Any,
    human_orig: Any,
    split_credit: bool = False,
    letters: tuple[Hashable, Hashable] = ("A", "B"),
) -> dict[str, Any]:
    """Combined-order accuracy: an item is judged in both orders and compared with the human label.

    ``human_orig`` is the letter of the human-preferred response in the ORIGINAL order (in the swapped
    order it is the other letter). Per item: both orders correct → 1; both wrong → 0; the orders
    disagree (position-inconsistent, so exactly one is correct) → 0 (strict, default) or 0.5
    (``split_credit=True``, equal to averaging the two single-order accuracies). Items with a failed
    verdict in either order are excluded from n and counted in ``n_failed``.
    Returns dict(accuracy, n, n_failed, n_both_correct, n_disagree, n_both_wrong, per_item).
    """
    o, s = _two_orders(verdict_orig, verdict_swapped, letters)
    h = as_object_1d(human_orig, "human_orig")
    same_length("verdict_orig", o, "human_orig", h)
    bad = np.array([x not in letters for x in h], dtype=bool)
    if bad.any():
        raise InputError(f"contains {h[bad][0]!r}", field="human_orig", expected=f"one of {letters} per item")
    other = {letters[0]: letters[1], letters[1]: letters[0]}
    ok = ~missing_mask(o) & ~missing_mask(s)
    per_item = np.full(len(o), np.nan)
    right_o = o == h
    right_s = s == np.array([other[x] for x in h], dtype=object)
    both, neither = right_o & right_s, ~right_o & ~right_s
    disagree = ok & ~both & ~neither
    per_item[ok] = 0.0
    per_item[ok & both] = 1.0
    per_item[disagree] = 0.5 if split_credit else 0.0
    n = int(ok.sum())
    return {
        "accuracy": float(per_item[ok].mean()) if n else np.nan, "n": n, "n_failed": int((~ok).sum()),
        "n_both_correct": int((ok & both).sum()), "n_disagree": int(disagree.sum()),
        "n_both_wrong": int((ok & neither).sum()), "per_item": per_item,
    }


def _two_orders(orig: Any, swapped: Any, letters: tuple) -> tuple[np.ndarray, np.ndarray]:
    if len(letters) != 2 or letters[0] == letters[1]:
        raise InputError(f"letters={letters!r}", field="letters", expected="two distinct letters (first, second)")
    o = as_object_1d(orig, "verdict_orig")
    s = as_object_1d(swapped, "verdict_swapped")
    same_length("verdict_orig", o, "verdict_swapped", s)
    for name, arr in (("verdict_orig", o), ("verdict_swapped", s)):
        bad = ~missing_mask(arr) & np.array([x not in letters for x in arr], dtype=bool)
        if bad.any():
            raise InputError(f"contains {arr[bad][0]!r}", field=name,
                             expected=f"one of {letters} or None for a failed parse")
    return o, s
