"""``calibrate``: labels-only, judge-only, PPI and isotonic estimates of the human mean side by side, with the
effective sample size the judge adds."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rubriclab.calibrate._draw import as_ids, draw_labelled
from rubriclab.calibrate._estimators import Estimate, isotonic, judge_only, labels_only, ppi
from rubriclab.calibrate._table import VerdictTable, verdict_table_from_frame
from rubriclab.errors import ConfigError, InputError

MIN_LABELS = 2
MIN_ISOTONIC = 6  # below this a cross-fitted monotone map has too few labels per fold to mean anything
FEW_ISOTONIC = 20  # below this its interval under-covered on LLMBar Natural (median 0.895 at n = 10): say so


@dataclass(frozen=True)
class CalibrationResult:
    """The estimates (labels_only, judge_only, ppi[, isotonic]) of ``target`` over ``n_pairs`` pairs, ``n`` of
    them labelled (``labelled``: their ids; ``draw`` says how they were chosen). ``ess``: the labels the PPI
    interval is worth — n × (labels-only width / PPI width)², so ``ess - n`` is what the judge adds."""

    target: str
    source: str
    estimates: tuple[Estimate, ...]
    n: int
    n_pairs: int
    labelled: tuple[str, ...]
    draw: str
    ess: float
    notes: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)

    def get(self, method: str) -> Estimate | None:
        return next((e for e in self.estimates if e.method == method), None)

    @property
    def ess_gain(self) -> float:
        return self.ess - self.n

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([e.to_dict() for e in self.estimates])

    def to_dict(self) -> dict:
        return {"target": self.target, "source": self.source, "n": self.n, "n_pairs": self.n_pairs,
                "draw": self.draw, "ess": self.ess, "ess_gain": self.ess_gain, "notes": list(self.notes),
                "counts": dict(self.counts), "labelled": list(self.labelled),
                "estimates": [e.to_dict() for e in self.estimates]}

    def lines(self) -> list[str]:
        """A printable table: one row per estimate with its interval, level, n and method, then the notes."""
        head = f"{'method':<12} {'value':>6} {'low':>6} {'high':>6} {'width':>6} {'level':>5} {'n':>5} {'N judge':>7}"
        rows = [f"{e.method:<12} {e.value:6.3f} {e.low:6.3f} {e.high:6.3f} {e.width:6.3f} {e.confidence:5.0%} "
                f"{e.n:5d} {e.n_judge:7d}  {e.interval}" for e in self.estimates]
        tail = [f"target: {self.target}", f"source: {self.source}; {self.n_pairs} pairs, {self.n} labelled ({self.draw})",
                f"effective sample size of the PPI interval: {self.ess:.1f} labels "
                f"(the judge adds {self.ess_gain:+.1f} to the {self.n} labelled)", *self.notes]
        return [head, *rows, "", *tail]


def calibrate(table: VerdictTable | pd.DataFrame, *, labelled: Iterable[str] | None = None,
              label_fraction: float | None = None, seed: int = 0, confidence: float = 0.95,
              lam: float | None = 1.0, isotonic_folds: int = 5) -> CalibrationResult:
    """Estimate the human mean from the judge's verdicts on every pair and human values on a labelled subset.

    The subset: ``labelled`` (pair ids the user labelled), or a seeded draw of ``label_fraction`` of the pairs
    that have a human value (a benchmark's full label set), or, with neither, every pair whose human value is
    known. Only the labelled pairs' human values are read. ``lam``: ppi_py's λ (1, the default: plain PPI, whose
    interval held its level on LLMBar Natural with 10 labels where the power-tuned one did not; None: tuned, PPI++;
    1: plain PPI). The isotonic estimate is added when at least ``MIN_ISOTONIC`` pairs are labelled and
    ``isotonic_folds`` > 0 (0: skip it)."""
    vt = table if isinstance(table, VerdictTable) else verdict_table_from_frame(table)
    if not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise ConfigError(f"calibrate: confidence {confidence!r}; expected a number in (0, 1), e.g. 0.95")
    ids, draw = _labelled_ids(vt, labelled, label_fraction, seed)
    frame = vt.frame
    is_lab = frame["pair_id"].isin(ids).to_numpy()
    Y = frame.loc[is_lab, "human"].to_numpy(float)
    Yhat, Yhat_u = frame.loc[is_lab, "verdict"].to_numpy(float), frame.loc[~is_lab, "verdict"].to_numpy(float)
    if len(Yhat_u) == 0:
        raise InputError(f"all {len(frame)} pairs are labelled", file=vt.source,
                         expected="some pairs with a judge verdict and no label (the judge's contribution)")
    ests, notes = estimates(Y, Yhat, Yhat_u, frame["verdict"].to_numpy(float), confidence=confidence, lam=lam,
                            isotonic_folds=isotonic_folds, seed=seed)
    return CalibrationResult(vt.target, vt.source, tuple(ests), len(Y), len(frame), tuple(ids), draw,
                             _ess(ests[0], ests[2]), (*vt.notes, *notes), dict(vt.counts))


def estimates(Y: np.ndarray, Yhat: np.ndarray, Yhat_u: np.ndarray, verdicts: np.ndarray, *, confidence: float,
              lam: float | None, isotonic_folds: int, seed: int,
              judge: Estimate | None = None) -> tuple[list[Estimate], list[str]]:
    """The estimates from the labelled pairs' human values ``Y`` and verdicts ``Yhat``, the unlabelled pairs'
    verdicts ``Yhat_u`` and every pair's ``verdicts``: labels-only, judge-only, PPI, and isotonic when there are
    enough labels; and the notes on what was skipped (``calibrate`` and the coverage simulation share it).
    ``judge``: ``judge_only(verdicts, confidence)`` made once by the caller (it uses no label, so every label draw
    of the coverage simulation has the same one)."""
    ests = [labels_only(Y, confidence), judge if judge is not None else judge_only(verdicts, confidence),
            ppi(Y, Yhat, Yhat_u, confidence, lam)]
    notes = []
    if isotonic_folds <= 0:
        notes.append("isotonic calibration not asked for")
    elif len(Y) >= MIN_ISOTONIC:
        ests.append(isotonic(Y, Yhat, Yhat_u, confidence, min(isotonic_folds, len(Y) // 2), seed))
        if len(Y) < FEW_ISOTONIC:
            notes.append(f"isotonic: {len(Y)} labelled pairs (< {FEW_ISOTONIC}); its cross-fitted interval tends to "
                         "under-cover with so few labels — prefer the PPI interval")
    else:
        notes.append(f"isotonic calibration skipped: {len(Y)} labelled pairs (needs ≥ {MIN_ISOTONIC})")
    return ests, notes


def _labelled_ids(vt: VerdictTable, labelled, label_fraction, seed) -> tuple[list[str], str]:
    frame = vt.frame
    has = frame.loc[frame["human"].notna(), "pair_id"].tolist()
    if labelled is not None and label_fraction is not None:
        raise ConfigError("calibrate: both labelled and label_fraction given; expected one (the pairs the user "
                          "labelled, or the share to draw)")
    if label_fraction is not None:
        return draw_labelled(has, label_fraction, seed), f"seeded random draw of {label_fraction:g}, seed {seed}"
    ids = as_ids(labelled) if labelled is not None else sorted(has)
    unknown = sorted(set(ids) - set(frame["pair_id"]))
    if unknown:
        raise InputError(f"labelled pair {unknown[0]!r} is not in the table ({len(unknown)} unknown)",
                         file=vt.source, field="labelled", expected="ids of pairs the judge judged")
    no_label = sorted(set(ids) - set(has))
    if no_label:
        raise InputError(f"labelled pair {no_label[0]!r} has no human value ({len(no_label)} such)", file=vt.source,
                         field="human", expected="a human value in [0, 1] for every labelled pair")
    if len(ids) < MIN_LABELS:
        raise InputError(f"{len(ids)} labelled pair(s)", file=vt.source,
                         expected=f"at least {MIN_LABELS} labelled pairs for an interval")
    return ids, "given by the user" if labelled is not None else "every pair with a human value"


def _ess(lab: Estimate, pp: Estimate) -> float:
    """Labels an interval as narrow as PPI's would need: n × (labels-only width / PPI width)² (both z intervals
    at the same level, so the width ratio is the ratio of standard errors)."""
    if pp.width <= 0:
        return math.inf if lab.width > 0 else float(lab.n)
    return float(lab.n * (lab.width / pp.width) ** 2) if np.isfinite(lab.width) else math.nan
