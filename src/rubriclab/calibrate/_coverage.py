"""Each estimator's interval checked by simulation on the data it is reported for: over ``draws`` seeded label draws
(seed = the draw's index; the card's own draw is one of them), how often each estimator's interval covers the
all-labels value. A nominal level is stated for an interval only where its simulated coverage supports it: at least
the level minus twice the simulation's standard error, √(level (1 − level) / draws); elsewhere the card gives the
coverage instead of the level (with 10 labels the isotonic interval covered ≈ 0.9 of LLMBar Natural's cells' values
at a nominal 0.95)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rubriclab.calibrate._calibrate import estimates
from rubriclab.calibrate._draw import draw_labelled
from rubriclab.calibrate._estimators import judge_only
from rubriclab.calibrate._table import VerdictTable


def coverage_tolerance(confidence: float, draws: int) -> float:
    """Twice the simulation's standard error at the nominal level: coverage this far below it is not noise."""
    return 2.0 * math.sqrt(confidence * (1.0 - confidence) / draws)


def simulated_coverage(vt: VerdictTable, *, label_fraction: float, draws: int, confidence: float,
                       lam: float | None, isotonic_folds: int = 5) -> dict[str, dict[str, Any]] | None:
    """Per estimator: ``coverage`` (share of ``draws`` label draws whose interval holds the all-labels value),
    ``covered``, ``draws``, ``nominal``, ``tolerance`` and ``supported`` (coverage ≥ nominal − tolerance); None when
    the truth is unknown (some pair has no human value) or ``draws`` is 0."""
    frame = vt.frame
    human = frame["human"].to_numpy(float)
    if draws <= 0 or np.isnan(human).any() or len(frame) < 3:
        return None
    truth = float(human.mean())
    verdict = frame["verdict"].to_numpy(float)
    position = {pid: i for i, pid in enumerate(frame["pair_id"])}
    ids = list(frame["pair_id"])
    hits: dict[str, int] = {}
    judge = judge_only(verdict, confidence)  # no label in it: the same interval in every draw
    for k in range(draws):
        mask = np.zeros(len(frame), dtype=bool)
        mask[[position[p] for p in draw_labelled(ids, label_fraction, k)]] = True
        ests, _ = estimates(human[mask], verdict[mask], verdict[~mask], verdict, confidence=confidence, lam=lam,
                            isotonic_folds=isotonic_folds, seed=k, judge=judge)
        for e in ests:
            hits[e.method] = hits.get(e.method, 0) + int(e.covers(truth))
    tol = coverage_tolerance(confidence, draws)
    return {m: {"coverage": c / draws, "covered": c, "draws": draws, "nominal": confidence, "tolerance": tol,
                "supported": c / draws >= confidence - tol, "truth": truth} for m, c in hits.items()}


def level_text(cov: dict[str, Any] | None, confidence: float) -> str:
    """How an interval's level may be stated: ``95%`` where the simulation supports it; otherwise its simulated
    coverage and that it is not a 95% interval here; ``nominal 95% (coverage not simulated)`` without a check."""
    level = f"{100 * confidence:g}%"
    if not cov:
        return f"nominal {level} (coverage not simulated)"
    if cov["supported"]:
        return f"{level} (simulated coverage {cov['coverage']:.3f} over {cov['draws']} draws)"
    return (f"not a {level} interval here: simulated coverage {cov['coverage']:.3f} over {cov['draws']} draws "
            f"(< {confidence - cov['tolerance']:.3f})")
