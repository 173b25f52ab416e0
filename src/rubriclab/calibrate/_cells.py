"""Every judge × condition of a recorded source calibrated with one seeded draw of labels: the table the
recorded stage writes (``calibration.csv``) and the report shows. The shipped sets are fully labelled, so each
row also holds the all-labels value, the number the estimates try to recover."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.calibrate._calibrate import calibrate
from rubriclab.calibrate._coverage import level_text, simulated_coverage
from rubriclab.calibrate._table import verdict_table
from rubriclab.errors import RubricLabError
from rubriclab.settings import Recorded, RecordedCalibrate

METHODS = ("labels_only", "judge_only", "ppi", "isotonic")
COVERAGE_RULE = ("each interval's coverage of the all-labels value over coverage_draws seeded label draws of the same "
                 "size (seed = draw index); its level is stated only where coverage ≥ level − 2 √(level (1 − level) "
                 "/ draws), else the coverage is")


_C = RecordedCalibrate()  # recorded.calibrate's defaults (rubriclab.settings, docs there)


@dataclass(frozen=True)
class CellSettings:
    """``recorded.calibrate`` in params.yaml."""

    label_fraction: float = _C.label_fraction
    seed: int = _C.seed
    lam: float | None = _C.lam  # ppi_py's λ (1: plain PPI; None: power-tuned PPI++)
    order: str = _C.order
    none: str = _C.none
    coverage_draws: int = _C.coverage_draws  # label draws checking each interval's coverage (0: none)
    confidence: float = Recorded().confidence


def calibrate_cells(recorded: Any, cells: list[tuple[str, str]], settings: CellSettings
                    ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """One row per (judge, condition): n_pairs, n_labelled, the all-labels value, and per method its value,
    low, high; ``ess``; ``skipped`` says why a cell has no estimate. Also the full results (``to_dict``)."""
    rows, full = [], []
    for judge, condition in cells:
        row: dict[str, Any] = {"judge": judge, "condition": condition}
        try:
            vt = verdict_table(recorded, judge, condition, order=settings.order, none=settings.none)
            res = calibrate(vt, label_fraction=settings.label_fraction, seed=settings.seed,
                            confidence=settings.confidence, lam=settings.lam)
        except RubricLabError as exc:  # e.g. too few labelled pairs in a small cell: said, not dropped
            rows.append({**row, "skipped": str(exc)})
            continue
        human = vt.frame["human"].dropna()
        row.update(n_pairs=res.n_pairs, n_labelled=res.n, all_labels=float(human.mean()) if len(human) else np.nan,
                   n_all_labels=len(human), ess=res.ess, skipped="")
        cover = simulated_coverage(vt, label_fraction=settings.label_fraction, draws=settings.coverage_draws,
                                   confidence=settings.confidence, lam=settings.lam)
        for e in res.estimates:
            c = (cover or {}).get(e.method)
            row.update({f"{e.method}": e.value, f"{e.method}_low": e.low, f"{e.method}_high": e.high,
                        f"{e.method}_coverage": c["coverage"] if c else np.nan,
                        f"{e.method}_level": level_text(c, settings.confidence)})
        rows.append(row)
        full.append({"judge": judge, "condition": condition, **res.to_dict(), "coverage": cover,
                     "coverage_rule": COVERAGE_RULE})
    return pd.DataFrame(rows), full
