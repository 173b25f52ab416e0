"""Surface biases of a judge, as AlpacaEval's evaluator leaderboard defines them (``alpaca_eval.analyze``:
``Analyzer.get_length_biases``, ``get_list_biases``; ``alpaca_eval.utils.contains_list``), each with its interval,
every left-out pair counted with its reason, and the labels' own rate on the same pairs beside the judge's.

* **prefers longer**: among a judge's first/second verdicts on pairs whose outputs' lengths (characters) differ by
  *more than* ``length_delta`` (AlpacaEval's ``significant_delta_length`` = 30), the share that chose the longer one.
  An empty output is kept (it is the shorter one), as in AlpacaEval; such pairs are counted.
* **prefers lists**: among first/second verdicts on pairs where exactly one output contains a list (AlpacaEval's
  ``contains_list``: a line starting with a bullet ``* • -``, a number ``1.``/``1)`` or a letter ``a.``/``A)``
  before a word; ``min_list_items`` such lines, AlpacaEval's 1), the share that chose the output with the list.

Left out, and counted: pairs where the outputs do not differ in that respect (``not_different``), and judgments
that are a tie or no verdict (``tie_or_no_verdict``). The ``(labels)`` row is the labels' rate over every labelled
pair that qualifies (a tie label is left out, counted). ``same_pairs`` compares judge and labels on exactly the
pairs both expressed a preference on: per pair the judge's mean over its decided judgments against the label, with
the paired difference (judge − labels) and its percentile paired bootstrap interval.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rubriclab.recorded._boot import dropped_fields
from rubriclab.recorded._records import CHOICES, RecordedSet
from rubriclab.recorded._rows import Rows

# alpaca_eval.utils.contains_list's patterns (alpaca-eval 0.6.6), verbatim
LIST_PATTERNS = (re.compile(r"(?m)^\s*[\*\•\-]\s*[^\w]*\w+"), re.compile(r"(?m)^\s*\d+[\.\)]\s*[^\w]*\w+"),
                 re.compile(r"(?m)^\s*[a-zA-Z][\.\)]\s+[^\w]*\w+"))
BIASES = ("prefers_longer", "prefers_list")
DEFINITIONS = {
    "prefers_longer": "AlpacaEval's P(prefer longer): first/second verdicts on pairs whose outputs' lengths differ by "
                      "more than {length_delta} characters, share choosing the longer output",
    "prefers_list": "AlpacaEval's P(prefer lists): first/second verdicts on pairs where exactly one output contains a "
                    "list (alpaca_eval.utils.contains_list, ≥ {min_list_items} list line), share choosing that output",
}
NOT_DIFFERENT = {"prefers_longer": "lengths within {length_delta} characters",
                 "prefers_list": "both or neither output contains a list"}


def list_items(text: str) -> int:
    """``alpaca_eval.utils.contains_list(text, is_return_count=True)``: the number of list-item lines."""
    return sum(len(p.findall(text or "")) for p in LIST_PATTERNS)


def contains_list(text: str, min_items: int = 1) -> bool:
    """Whether ``text`` holds a list, as AlpacaEval decides it (``min_items`` = 1: ``contains_list``)."""
    return list_items(text) >= min_items


def favoured_sides(rs: RecordedSet, length_delta: int, min_list_items: int) -> dict[str, dict[str, str | None]]:
    """Per bias, per pair: the output ("1"/"2") the bias favours, or None where the outputs do not differ."""
    longer, listed = {}, {}
    for pid, p in rs.pairs.items():
        a, b = len(p.output_1), len(p.output_2)
        longer[pid] = None if abs(a - b) <= length_delta else ("1" if a > b else "2")
        la, lb = contains_list(p.output_1, min_list_items), contains_list(p.output_2, min_list_items)
        listed[pid] = None if la == lb else ("1" if la else "2")
    return {"prefers_longer": longer, "prefers_list": listed}


def biases(rs: RecordedSet, judged: Rows, s: Any, mean_entry: Any, paired: Any,
           when_done: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The bias rows (one per judge × condition, then ``(labels)``) and what the section says about its pairs
    (definitions, thresholds, pairs with an empty output). ``paired(codes, a, b, s)`` (filled in later:
    ``when_done(result, fn)``) and ``mean_entry(values, ids, s, reason, **extra)`` are the
    analysis' entry maker (its bootstrap over pairs)."""
    sides = favoured_sides(rs, s.length_delta, s.min_list_items)
    fmt = {"length_delta": s.length_delta, "min_list_items": s.min_list_items}
    info = {"definitions": {k: v.format(**fmt) for k, v in DEFINITIONS.items()},
            "length_delta": s.length_delta, "min_list_items": s.min_list_items,
            "n_pairs": len(rs.pairs), "n_pairs_with_an_empty_output": sum(
                not p.output_1 or not p.output_2 for p in rs.pairs.values()),
            "n_pairs_differing": {k: sum(v is not None for v in sides[k].values()) for k in BIASES}}
    if not any(info["n_pairs_differing"].values()):
        return [], info
    code = {k: np.array([CHOICES.index(sides[k][pid]) if sides[k].get(pid) else -1 for pid in judged.pair_ids],
                        dtype=int) for k in BIASES}
    labels = {pid: p.label for pid, p in rs.pairs.items()}
    label_code = np.array([CHOICES.index(labels[pid]) if labels.get(pid) in ("1", "2") else -1
                           for pid in judged.pair_ids], dtype=int)
    rows = []
    for (judge, cond), sl in judged.cells.items():
        choice, pair = judged.choice[sl], judged.pair[sl]
        decided = choice < CHOICES.index("tie")  # 1 or 2
        if not decided.any():
            continue
        row: dict[str, Any] = {"judge": judge, "condition": cond}
        for name in BIASES:
            side = code[name][pair]
            ok = decided & (side >= 0)
            excluded = {NOT_DIFFERENT[name].format(**fmt): int((side < 0).sum()),
                        "tie or no verdict": int((~decided & (side >= 0)).sum())}
            row[name] = mean_entry((choice[ok] == side[ok]).astype(float), pair[ok], s,
                                   "no decided verdict on a pair where the outputs differ in this respect",
                                   unit_of_n="judgments", excluded=excluded,
                                   n_pairs=int(len(np.unique(pair[ok]))))
            row[f"{name}_same_pairs"] = _same_pairs(choice[ok] == side[ok], pair[ok], label_code, code[name], s,
                                                    mean_entry, paired, when_done)
        rows.append(row)
    row = {"judge": "(labels)", "condition": "—"}
    for name in BIASES:
        use = [(pid, lab == sides[name][pid]) for pid, lab in labels.items() if sides[name][pid] and lab in ("1", "2")]
        tie_labels = sum(1 for pid, lab in labels.items() if sides[name][pid] and lab not in ("1", "2"))
        row[name] = mean_entry(np.array([v for _, v in use], dtype=float), np.array([pid for pid, _ in use]), s,
                               "no labelled pair where the outputs differ in this respect", unit_of_n="pairs",
                               excluded={NOT_DIFFERENT[name].format(**fmt): sum(v is None for v in sides[name].values()),
                                         "label a tie or missing": tie_labels})
    rows.append(row)
    return rows, info


def _same_pairs(hit: np.ndarray, pair: np.ndarray, label_code: np.ndarray, side: np.ndarray, s: Any,
                mean_entry: Any, paired: Any, when_done: Any) -> dict[str, Any]:
    """Judge and labels on the pairs both preferred one output of (the judge in at least one decided judgment):
    per pair the judge's share of decided judgments choosing the favoured output, the label's 0/1."""
    pairs, inv = np.unique(pair, return_inverse=True)
    judge = np.bincount(inv, weights=hit.astype(float), minlength=len(pairs)) / np.bincount(inv, minlength=len(pairs))
    keep = label_code[pairs] >= 0
    pairs, judge = pairs[keep], judge[keep]
    label = (label_code[pairs] == side[pairs]).astype(float)
    out: dict[str, Any] = {"n_pairs": int(len(pairs)),
                           "judge": mean_entry(judge, pairs, s, "no pair with a decided verdict and a 1/2 label"),
                           "labels": mean_entry(label, pairs, s, "no pair with a decided verdict and a 1/2 label")}
    if len(pairs) >= 2:
        d = paired(pairs, judge, label, s)
        excess = out["excess"] = {"value": d["diff"], "low": None, "high": None, "n": int(len(pairs)),
                                  "method": "percentile paired bootstrap", "level": s.confidence, "unit": "pairs",
                                  "resamples": s.n_boot, "reason": None}
        when_done(d, lambda: excess.update(low=d["low"], high=d["high"], reason=d.get("degenerate"),
                                           **dropped_fields(d)))
    else:
        out["excess"] = {"value": None, "low": None, "high": None, "n": int(len(pairs)),
                         "reason": "fewer than 2 pairs with a decided verdict and a 1/2 label"}
    return out
