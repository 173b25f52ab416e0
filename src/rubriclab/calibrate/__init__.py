"""Calibration: from a judge's verdicts on N pairs and human labels on n ≪ N of them to the number the humans
would have given, with intervals honest about both sources.

``verdict_table`` turns one judge × condition of any recorded source (``rubriclab.recorded``) into a table of
per-pair verdicts and human values in [0, 1] for the target "response 1 is preferred" (a preference rate; for
pairs of two systems' outputs, the first system's win rate, ties half); ``verdict_table_from_frame`` takes the
user's own. ``calibrate`` gives side by side the labels-only estimate, the judge-only one (biased by the judge's
errors), prediction-powered inference (``ppi_py``) and a cross-fitted isotonic judge→human calibration, each
with its interval (method, level, n), and the effective sample size the judge adds. The labelled subset is a
seeded random draw of the pair ids or the user's own, never chosen by looking at verdicts.
"""

from __future__ import annotations

from rubriclab.calibrate._calibrate import MIN_ISOTONIC, MIN_LABELS, CalibrationResult, calibrate
from rubriclab.calibrate._cells import CellSettings, calibrate_cells
from rubriclab.calibrate._coverage import coverage_tolerance, level_text, simulated_coverage
from rubriclab.calibrate._draw import draw_labelled
from rubriclab.calibrate._estimators import Estimate
from rubriclab.calibrate._sources import load_recorded
from rubriclab.calibrate._table import (
    NONE_POLICIES,
    ORDER_CHOICES,
    TARGET,
    VerdictTable,
    verdict_table,
    verdict_table_from_frame,
)

__all__ = [
    "MIN_ISOTONIC",
    "MIN_LABELS",
    "NONE_POLICIES",
    "ORDER_CHOICES",
    "TARGET",
    "CalibrationResult",
    "CellSettings",
    "Estimate",
    "VerdictTable",
    "calibrate",
    "calibrate_cells",
    "coverage_tolerance",
    "draw_labelled",
    "level_text",
    "load_recorded",
    "simulated_coverage",
    "verdict_table",
    "verdict_table_from_frame",
]
