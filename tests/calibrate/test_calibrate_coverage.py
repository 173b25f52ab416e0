"""Each calibration interval is shown with its simulated coverage, and is called a 95% interval only where that
coverage supports it (with 10 labels the isotonic interval covered a median 0.895 of LLMBar Natural's cells
while the report labelled it 95%)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.isotonic import IsotonicRegression

from rubriclab.calibrate import (
    CellSettings,
    calibrate,
    calibrate_cells,
    coverage_tolerance,
    level_text,
    simulated_coverage,
    verdict_table_from_frame,
)
from rubriclab.calibrate._estimators import isotonic_map, kfold_splits


def _table(seed: int = 1, n: int = 100):
    rng = np.random.default_rng(seed)
    human = (rng.random(n) < 0.55).astype(float)
    verdict = np.where(rng.random(n) < 0.7, human, 1 - human)
    return verdict_table_from_frame(pd.DataFrame({"pair_id": [f"p{i}" for i in range(n)], "verdict": verdict,
                                                  "human": human}))


def test_the_isotonic_map_is_sklearns() -> None:
    rng = np.random.default_rng(0)
    for t in range(300):
        k = int(rng.integers(2, 15))
        x = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], k) if t % 2 else rng.random(k)
        y = rng.choice([0.0, 0.5, 1.0], k)
        new = rng.random(40) * 1.4 - 0.2  # beyond both ends: clipped
        want = IsotonicRegression(y_min=0, y_max=1, increasing=True, out_of_bounds="clip").fit(x, y).predict(new)
        assert np.array_equal(isotonic_map(x, y, new), want)


def test_the_cached_folds_are_sklearns_kfold_and_cannot_be_changed() -> None:
    from sklearn.model_selection import KFold

    for n, folds, seed in [(6, 3, 0), (10, 5, 7), (10, 5, 8), (37, 5, 199), (10, 5, 7)]:  # the last one: cached
        want = list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n)))
        got = kfold_splits(n, folds, seed)
        assert len(got) == len(want)
        assert all(np.array_equal(a, c) and np.array_equal(b, d) for (a, b), (c, d) in zip(got, want))
    fit, _ = kfold_splits(10, 5, 7)[0]
    with pytest.raises(ValueError, match="read-only"):
        fit[0] = 99  # one draw cannot change the splits the next draws get


def test_simulated_coverage_is_the_coverage_of_calibrate_over_the_draws() -> None:
    vt = _table()
    draws = 60
    cov = simulated_coverage(vt, label_fraction=0.1, draws=draws, confidence=0.95, lam=1.0)
    truth = float(vt.frame["human"].mean())
    want: dict[str, int] = {}
    for k in range(draws):  # the reference: calibrate itself, one draw per seed
        for e in calibrate(vt, label_fraction=0.1, seed=k).estimates:
            want[e.method] = want.get(e.method, 0) + int(e.low <= truth <= e.high)
    assert {m: c["covered"] for m, c in cov.items()} == want
    assert all(c["draws"] == draws and c["truth"] == truth for c in cov.values())


def test_an_interval_that_under_covers_is_not_called_95_percent() -> None:
    cov = simulated_coverage(_table(), label_fraction=0.1, draws=200, confidence=0.95, lam=1.0)
    tol = coverage_tolerance(0.95, 200)
    assert tol == pytest.approx(2 * math.sqrt(0.95 * 0.05 / 200))
    low = cov["labels_only"]  # this draw of data: 10 labels of a 0.55 rate cover 0.875 of the time
    assert low["coverage"] == 0.875 and not low["supported"]
    assert level_text(low, 0.95).startswith("not a 95% interval here: simulated coverage 0.875")
    ok = cov["isotonic"]
    assert ok["supported"] and level_text(ok, 0.95).startswith("95% (simulated coverage")
    assert level_text(None, 0.95) == "nominal 95% (coverage not simulated)"


def test_no_truth_no_claim() -> None:
    frame = _table().frame.copy()
    frame.loc[3, "human"] = np.nan  # a pair without a label: the all-labels value is unknown
    assert simulated_coverage(verdict_table_from_frame(frame), label_fraction=0.1, draws=20, confidence=0.95,
                              lam=1.0) is None
    assert simulated_coverage(_table(), label_fraction=0.1, draws=0, confidence=0.95, lam=1.0) is None


def test_the_report_marks_the_interval_that_does_not_hold_its_level(tmp_path) -> None:
    from rubriclab.recorded import Judgment, RecordedPair, RecordedSet
    from rubriclab.report._recorded import _calibration

    vt = _table()
    f = vt.frame
    pairs = {p: RecordedPair(id=p, labels=(("gold", "1" if h == 1 else "2"),)) for p, h in zip(f["pair_id"], f["human"])}
    judgments = [Judgment(pair_id=p, judge="J", condition="c", order="original", verdict="first" if v == 1 else "second")
                 for p, v in zip(f["pair_id"], f["verdict"])]
    rs = RecordedSet(name="t", format="table", path="-", pairs=pairs, judgments=judgments)
    settings = CellSettings(order="original", coverage_draws=200)
    table, full = calibrate_cells(rs, [("J", "c")], settings)
    assert table.loc[0, "labels_only_coverage"] == 0.875
    assert table.loc[0, "labels_only_level"].startswith("not a 95% interval")
    table.to_csv(tmp_path / "calibration.csv", index=False)
    (tmp_path / "calibration.json").write_text(json.dumps({"settings": settings.__dict__, "cells": full}, default=float))
    blocks = _calibration(tmp_path)
    text = " ".join(str(b[1]) + " " + str(b[-1]) for b in blocks)
    assert "cov 0.875 ✗" in text and "[95% CI]" not in text
    assert "labels-only median 0.875 (least 0.875; 95% held in 0 of 1 cells)" in text
