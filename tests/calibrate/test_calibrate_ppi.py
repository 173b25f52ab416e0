"""rubriclab.calibrate: coverage with a planted judge error rate, equality with ppi_py, the LLMBar check."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rubriclab.calibrate import calibrate, load_recorded, verdict_table, verdict_table_from_frame

DRAWS, CONF = 200, 0.95


def _world(n_pairs: int = 1000, seed: int = 7) -> pd.DataFrame:
    """Humans prefer response 1 on 40% of pairs; the judge says 1 on 90% of those and on 25% of the others (a
    planted error rate that biases its raw rate up to about 0.51)."""
    rng = np.random.default_rng(seed)
    human = (rng.random(n_pairs) < 0.4).astype(float)
    judge = np.where(human == 1, rng.random(n_pairs) < 0.9, rng.random(n_pairs) < 0.25).astype(float)
    return pd.DataFrame({"pair_id": [f"p{i}" for i in range(n_pairs)], "verdict": judge, "human": human})


def test_ppi_covers_the_truth_and_is_narrower_than_labels_only():
    table = verdict_table_from_frame(_world())
    truth = float(table.frame["human"].mean())
    runs = [calibrate(table, label_fraction=0.1, seed=s, confidence=CONF, isotonic_folds=0) for s in range(DRAWS)]
    ppi = [r.get("ppi") for r in runs]
    lab = [r.get("labels_only") for r in runs]
    floor = CONF - 2 * math.sqrt(CONF * (1 - CONF) / DRAWS)  # nominal − 2 simulation standard errors
    cover = np.mean([e.covers(truth) for e in ppi])
    assert cover >= floor, f"PPI coverage {cover:.3f} < {floor:.3f}"
    assert np.median([e.width for e in ppi]) < np.median([e.width for e in lab])
    judge = runs[0].get("judge_only")
    assert judge.value - truth > 0.08 and not judge.covers(truth)  # the planted bias is real: the raw rate misses
    assert all(r.n == 100 and r.ess > r.n for r in runs[:5])


def test_ppi_numbers_equal_ppi_py():
    from ppi_py import classical_mean_ci, crossppi_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

    frame = _world(300)
    res = calibrate(frame, label_fraction=0.2, seed=3, confidence=0.9)
    lab = frame["pair_id"].isin(res.labelled).to_numpy()
    Y, Yhat, Yu = (frame.loc[lab, "human"].to_numpy(), frame.loc[lab, "verdict"].to_numpy(),
                   frame.loc[~lab, "verdict"].to_numpy())
    for lam in (None, 1.0):
        r = calibrate(frame, labelled=res.labelled, confidence=0.9, lam=lam).get("ppi")
        lo, hi = ppi_mean_ci(Y, Yhat, Yu, alpha=0.1, lam=lam)
        assert r.value == pytest.approx(float(np.squeeze(ppi_mean_pointestimate(Y, Yhat, Yu, lam=lam))), abs=1e-12)
        assert (r.low, r.high) == pytest.approx((float(np.squeeze(lo)), float(np.squeeze(hi))), abs=1e-12)
        assert (r.n, r.n_judge, r.confidence) == (60, 300, 0.9)
    lo, hi = classical_mean_ci(Y, alpha=0.1)
    assert (res.get("labels_only").low, res.get("labels_only").high) == pytest.approx((lo, hi), abs=1e-12)
    iso = res.get("isotonic")
    assert iso is not None and iso.low <= iso.value <= iso.high and "crossppi_mean_ci" in iso.interval
    assert crossppi_mean_ci is not None


def test_llmbar_small_version():
    """30 draws of 10% labels on the shipped LLMBar Natural verdicts (GPT-4, Vanilla): the full-label rate is
    covered in most draws, PPI is narrower than labels-only; the benchmark runs 200."""
    table = verdict_table(load_recorded("shipped:llmbar_natural", Path.cwd()), "GPT-4", "Vanilla")
    truth = float(table.frame["human"].mean())
    runs = [calibrate(table, label_fraction=0.1, seed=s, isotonic_folds=0) for s in range(30)]
    assert np.mean([r.get("ppi").covers(truth) for r in runs]) >= 0.85
    assert np.median([r.get("ppi").width for r in runs]) < np.median([r.get("labels_only").width for r in runs])
    assert runs[0].n == 10 and runs[0].n_pairs == 100


def test_every_interval_stays_inside_zero_one_where_the_normal_one_would_not():
    """Humans prefer response 1 on 97% of pairs and the judge agrees but for a few misses: the normal
    intervals of PPI and the isotonic cross-PPI reach past 1 (ppi_py's own numbers), which no rate can."""
    from ppi_py import ppi_mean_ci

    rng = np.random.default_rng(0)
    n = 400
    human = (rng.random(n) < 0.97).astype(float)
    judge = np.where(rng.random(n) < 0.9, human, 1 - human)
    frame = pd.DataFrame({"pair_id": [f"p{i}" for i in range(n)], "verdict": judge, "human": human})
    res = calibrate(frame, label_fraction=0.05, seed=1, confidence=0.95)
    lab = frame["pair_id"].isin(res.labelled).to_numpy()
    _, raw_hi = ppi_mean_ci(frame.loc[lab, "human"].to_numpy(), frame.loc[lab, "verdict"].to_numpy(),
                            frame.loc[~lab, "verdict"].to_numpy(), alpha=0.05, lam=1.0)
    assert float(np.squeeze(raw_hi)) > 1.0  # the case is real
    for e in res.estimates:
        assert 0.0 <= e.low <= e.high <= 1.0, e
    assert res.get("ppi").high == 1.0
