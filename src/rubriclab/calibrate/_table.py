"""The verdict table calibration works on: one row per pair, the judge's verdict and (where known) the human label,
both as a number in [0, 1] for the target "response 1 is preferred" (1 yes, 0 no, 0.5 a tie).

A table comes from a frame the user gives (``verdict_table_from_frame``) or from recorded verdicts
(``verdict_table``: one judge × condition of any source ``rubriclab.recorded`` reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rubriclab.errors import ConfigError, InputError
from rubriclab.settings import NONE_POLICIES, ORDER_CHOICES

TARGET = "preference rate of response 1 (human), ties half = win rate of the system that wrote response 1"
COLUMNS = ("pair_id", "verdict", "human")
_VALUE = {"1": 1.0, "2": 0.0, "tie": 0.5}  # a choice or a label → the target's number


@dataclass(frozen=True)
class VerdictTable:
    """``frame``: pair_id, verdict (judge, in [0, 1]), human (in [0, 1], NaN where no human label is known).
    ``source`` names where it came from; ``counts`` what was dropped or mapped on the way (``none`` verdicts,
    pairs without a verdict or a label); ``notes`` say how."""

    frame: pd.DataFrame
    source: str = "table"
    target: str = TARGET
    counts: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def n_pairs(self) -> int:
        return len(self.frame)

    @property
    def n_with_label(self) -> int:
        return int(self.frame["human"].notna().sum())


def verdict_table_from_frame(df: pd.DataFrame, source: str = "table") -> VerdictTable:
    """A user's frame (columns pair_id, verdict, human; human NaN where unlabelled), checked."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"a {type(df).__name__}", field="table", expected="a pandas DataFrame")
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", file=source,
                         expected="columns pair_id, verdict (judge, 0..1), human (0..1, NaN where unlabelled)")
    frame = df[list(COLUMNS)].copy()
    frame["pair_id"] = frame["pair_id"].astype(str)
    dup = frame["pair_id"][frame["pair_id"].duplicated()].tolist()
    if dup:
        raise InputError(f"pair {dup[0]!r} appears {int((frame['pair_id'] == dup[0]).sum())} times", file=source,
                         field="pair_id", expected="one row per pair")
    for col, may_miss in (("verdict", False), ("human", True)):
        frame[col] = _numbers(frame, col, source, may_miss)
    return VerdictTable(frame.reset_index(drop=True), source=source)


def _numbers(frame: pd.DataFrame, col: str, source: str, may_miss: bool) -> pd.Series:
    values = pd.to_numeric(frame[col], errors="coerce")
    bad = values.isna() & (frame[col].notna() if may_miss else True)
    bad |= (values < 0) | (values > 1)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"pair {frame['pair_id'].iloc[i]!r}: {col} {frame[col].iloc[i]!r}", file=source, field=col,
                         expected="a number in [0, 1] (1: response 1 preferred, 0: response 2, 0.5: tie)"
                         + (", or empty where unlabelled" if may_miss else ""))
    return values.astype(float)


def verdict_table(recorded, judge: str, condition: str, *, order: str = "both", none: str = "half") -> VerdictTable:
    """One judge × condition of a ``RecordedSet`` as a verdict table.

    ``order``: ``both`` averages the pair's verdicts over the presentation orders (position bias cancels; a pair
    judged in one order only keeps that one), or one order alone. ``none`` (a reply that is not a verdict):
    ``half`` maps it to 0.5 (the judge is counted undecided: the pair stays in the population), ``exclude`` drops
    it (a pair left with no verdict leaves the population, counted). The human value is the pair's label
    (the annotators' plurality: 1, 0, tie 0.5; a pair without one is NaN: never drawn for labelling)."""
    if order not in ORDER_CHOICES:
        raise ConfigError(f"calibrate: order {order!r}; expected one of {', '.join(ORDER_CHOICES)}")
    if none not in NONE_POLICIES:
        raise ConfigError(f"calibrate: none {none!r}; expected one of {', '.join(NONE_POLICIES)} (half: a none "
                          "verdict counts 0.5; exclude: it is dropped)")
    _check_side(recorded, judge, condition)
    js = [j for j in recorded.judgments if j.judge == judge and j.condition == condition
          and (order == "both" or j.order == order)]
    if not js:
        raise InputError(f"{recorded.name}: judge {judge!r} under {condition!r} has no verdict in the {order} order",
                         file=recorded.path, expected="a judge × condition × order the source holds")
    n_none = sum(j.choice == "none" for j in js)
    kept = [j for j in js if not (none == "exclude" and j.choice == "none")]
    per_pair: dict[str, list[float]] = {}
    for j in kept:
        per_pair.setdefault(j.pair_id, []).append(_VALUE.get(j.choice, 0.5))  # "none" → 0.5 under "half"
    judged = {j.pair_id for j in js}
    rows = [{"pair_id": pid, "verdict": float(np.mean(v)), "human": _label_value(recorded.pairs[pid].label)}
            for pid, v in sorted(per_pair.items())]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    counts = {"judgments": len(js), "none_verdicts": n_none, "pairs_judged": len(judged),
              "pairs_without_verdict": len(judged) - len(per_pair),
              "pairs_without_label": int(frame["human"].isna().sum())}
    notes = (f"judge {judge!r}, condition {condition!r}, order {order}"
             + (" (verdicts averaged over the two presentation orders)" if order == "both" else ""),
             f"{n_none} of {len(js)} verdicts were none: "
             + ("mapped to 0.5 (undecided)" if none == "half" else
                f"excluded; {counts['pairs_without_verdict']} pair(s) left with no verdict dropped"),
             f"{counts['pairs_without_label']} pair(s) without a human label (never drawn for labelling)")
    return VerdictTable(frame, source=f"{recorded.name}:{judge}:{condition}", counts=counts, notes=notes)


def _label_value(label: str | None) -> float:
    return float("nan") if label is None else _VALUE[label]


def _check_side(recorded, judge: str, condition: str) -> None:
    if judge not in recorded.judges:
        raise ConfigError(f"calibrate: {recorded.name} has no judge {judge!r}; judges: {', '.join(recorded.judges)}")
    conds = sorted({j.condition for j in recorded.judgments if j.judge == judge})
    if condition not in conds:
        raise ConfigError(f"calibrate: {recorded.name}: judge {judge!r} has no condition {condition!r}; its "
                          f"conditions: {', '.join(conds)}")
