"""The drift gate (``rubriclab.drift.compare_verdicts``, the core of ``rubriclab drift check``) between two sides
of recorded verdicts: one judge under two conditions (``Vanilla_NoRules`` → ``Vanilla``), or two judges under one
(``gpt-3.5-turbo`` → ``pandalm-7b``), per domain — no model call.

The gate compares per-pair credit on the same pairs in the same presentation, so one presentation order is used
(``order``; a source judged in both orders gives two gates, one per order, never the two orders as separate pairs,
which would understate the intervals). A pair enters with its label as the human preference: a pair without a
label, or labelled a tie (the gate's reference is a strict preference), is left out and counted in the notes. A
judgment that is no verdict (``none``) is a failed item in the gate's convention — left out of both sides and
counted (``n_failed_*``) — whereas the recorded card counts it wrong. Domains: each pair's ``domain`` (PandaLM's
``motivation_app``, a table's ``domain`` column); a source without any is one domain, ``all``.

Settings: one ``rubriclab.settings.Gate``; ``recorded_gate_settings`` builds it from the recorded card's own statistics
(``recorded.alpha``, ``power``, ``n_boot``, ``confidence``, ``tie_credit``, ``seed``) over ``drift.gate``'s
``epsilon``, so that the gate and the card agree on the intervals and the tie rule.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rubriclab.data import Pair
from rubriclab.drift import DriftCheck, compare_verdicts
from rubriclab.errors import InputError
from rubriclab.judging import status_of
from rubriclab.recorded._analysis import Settings
from rubriclab.recorded._records import ORDERS, RecordedSet
from rubriclab.settings import Gate

ONE_DOMAIN = "all"
_LETTER = {"first": "A", "second": "B", "tie": "tie", "none": None}


def _side(rs: RecordedSet, judge: str, condition: str, order: str) -> dict[str, Any]:
    judges, conditions = set(rs.judges), set(rs.conditions)
    if judge not in judges:
        raise InputError(f"no judge {judge!r} in source {rs.name!r}", field="judge",
                         expected=f"one of {', '.join(sorted(judges))}")
    if condition not in conditions:
        raise InputError(f"no condition {condition!r} in source {rs.name!r}", field="condition",
                         expected=f"one of {', '.join(sorted(conditions))}")
    got = {j.pair_id: j for j in rs.judgments if (j.judge, j.condition, j.order) == (judge, condition, order)}
    if not got:
        orders = sorted({j.order for j in rs.judgments if (j.judge, j.condition) == (judge, condition)})
        raise InputError(f"{judge} · {condition} has no judgment in the {order} order", field="order",
                         expected=f"one of the orders it was judged in: {', '.join(orders) or 'none'}")
    return got


def gate_inputs(rs: RecordedSet, *, judge: str, from_condition: str, to_condition: str,
                to_judge: str | None = None, order: str = "original") -> tuple[pd.DataFrame, list[Pair], list[str]]:
    """``judge_pairs``-shaped rows (rubric ``old`` = judge · from_condition, ``new`` = to_judge (default judge) ·
    to_condition; pair_id, domain, human, verdict as presented A/B/tie/None, status), the pairs (chosen = the
    labelled output) and notes on what was left out."""
    if order not in ORDERS:
        raise InputError(f"order {order!r}", field="order", expected=f"one of {', '.join(ORDERS)}")
    to_judge = to_judge or judge
    if (judge, from_condition) == (to_judge, to_condition):
        raise InputError(f"both sides are {judge} · {from_condition}", field="to",
                         expected="two different conditions, or two different judges")
    old, new = _side(rs, judge, from_condition, order), _side(rs, to_judge, to_condition, order)
    any_domain = any(p.domain for p in rs.pairs.values())
    rows, pairs = [], []
    left = {"no label": 0, "a tie label": 0, "judged on one side only": 0}
    for pid in sorted(set(old) | set(new), key=lambda s: (len(s), s)):
        p = rs.pairs[pid]
        if pid not in old or pid not in new:
            left["judged on one side only"] += 1
            continue
        if p.label is None:
            left["no label"] += 1
            continue
        if p.label == "tie":
            left["a tie label"] += 1
            continue
        domain = (p.domain or ONE_DOMAIN) if any_domain else ONE_DOMAIN
        chosen, rejected = (p.output_1, p.output_2) if p.label == "1" else (p.output_2, p.output_1)
        pairs.append(Pair(id=pid, domain=domain, prompt=p.prompt, chosen=chosen, rejected=rejected))
        # the label's output as presented in this order: output 1 is shown first (A) in the original order
        human = "A" if (p.label == "1") == (order == "original") else "B"
        for name, j in (("old", old[pid]), ("new", new[pid])):
            verdict = _LETTER[j.verdict]
            rows.append({"rubric": name, "pair_id": pid, "domain": domain, "swapped": order == "swapped",
                         "human": human, "verdict": verdict, "votes": verdict or "-",
                         "status": status_of(verdict, human), "n_failed_samples": int(verdict is None),
                         "error": "no verdict in the recorded reply" if verdict is None else None})
    notes = [f"Recorded verdicts ({rs.name}), {order} presentation order: old = {judge} · {from_condition}, new = "
             f"{to_judge} · {to_condition}; no model was called."]
    if not any_domain:
        notes.append(f"The source has no domain field: every pair is in one domain, {ONE_DOMAIN!r}.")
    gone = [f"{n} pair(s) with {why}" for why, n in left.items() if n]
    if gone:
        notes.append("Left out: " + "; ".join(gone) + ".")
    notes.append("A reply that is no verdict is a failed item here (left out of both sides, counted), as in the "
                 "drift gate; the recorded card counts it wrong.")
    return pd.DataFrame(rows), pairs, notes


def recorded_gate_settings(settings: Settings | None = None, gate: Gate | None = None) -> Gate:
    """The recorded gate's settings: ``gate`` (``drift.gate``; None: the schema's) with the recorded card's
    ``alpha``, ``power``, ``n_boot``, ``confidence``, ``tie_credit`` and ``seed`` (``settings``; None: the schema's
    ``recorded`` defaults)."""
    s = settings or Settings()
    return (gate or Gate()).model_copy(update={k: getattr(s, k) for k in _FROM_CARD})


_FROM_CARD = ("alpha", "power", "n_boot", "confidence", "tie_credit", "seed")


def recorded_gate(rs: RecordedSet, *, judge: str, from_condition: str, to_condition: str,
                  to_judge: str | None = None, order: str = "original", bench_domain: str | None = None,
                  gate: Gate | None = None) -> DriftCheck:
    """The drift gate's decision per domain between two sides of recorded verdicts (see the module docstring), with
    the settings of ``gate`` (None: ``recorded_gate_settings()``, the schema's defaults)."""
    gate = gate if gate is not None else recorded_gate_settings()
    rows, pairs, notes = gate_inputs(rs, judge=judge, from_condition=from_condition, to_condition=to_condition,
                                     to_judge=to_judge, order=order)
    if not pairs:
        raise InputError(f"no pair of {rs.name!r} is labelled (1 or 2) and judged on both sides", field="pairs",
                         expected="pairs judged by both sides in the " + order + " order")
    if bench_domain is not None and bench_domain not in {p.domain for p in pairs}:
        raise InputError(f"benchmark domain {bench_domain!r} is not in the data", field="bench",
                         expected=f"one of: {', '.join(sorted({p.domain for p in pairs}))}")
    res = compare_verdicts(rows, pairs, gate, bench_domain=bench_domain)
    to_judge = to_judge or judge
    res.old = {"name": f"{judge} · {from_condition}", "kind": "recorded verdicts", "digest": "—"}
    res.new = {"name": f"{to_judge} · {to_condition}", "kind": "recorded verdicts", "digest": "—"}
    res.settings = {**res.settings, "judge": judge if to_judge == judge else f"{judge} → {to_judge}",
                    "judge_temperature": "as recorded", "samples": 1, "seed": f"— ({order} order as recorded)",
                    "grouping": "domain", "n_pairs": len(pairs), "source": rs.name, "order": order}
    res.notes = notes + res.notes
    return res
