"""κ, macro P/R/F1, Fleiss' κ and Krippendorff's α as the recorded-judges card computes them, against the reference
implementations (sklearn, the krippendorff package, statsmodels when installed) and Fleiss' (1971) worked example."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support

from rubriclab.recorded import (
    Judgment,
    RecordedPair,
    RecordedSet,
    Settings,
    alpha_from_parts,
    alpha_parts,
    analyze,
    category_counts,
    cohen_kappa,
    confusion,
    fleiss_kappa,
    kappa_from_confusion,
    macro_prf_from_confusion,
    rater_agreement,
)

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("cats", [["1", "2"], ["1", "2", "tie", "none"], [1, 2, 0]])
def test_cohen_kappa_equals_sklearn(cats):
    for _ in range(20):
        a = list(RNG.choice(np.array(cats, dtype=object), size=60))
        b = [x if RNG.random() < 0.6 else RNG.choice(np.array(cats, dtype=object)) for x in a]
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_macro_prf_equals_sklearn_with_none_counted_against_the_true_class():
    classes = ["1", "2", "tie"]
    cats = [*classes, "none"]
    for _ in range(20):
        true = list(RNG.choice(classes, size=80))
        pred = [t if RNG.random() < 0.5 else RNG.choice(cats) for t in true]
        cm, _ = confusion(true, pred, cats)
        mine = macro_prf_from_confusion(cm, [0, 1, 2])
        p, r, f, _ = precision_recall_fscore_support(true, pred, labels=classes, average="macro", zero_division=0)
        assert (mine["precision"], mine["recall"], mine["f1"]) == pytest.approx((p, r, f), abs=1e-12)


# Fleiss (1971) as tabulated on Wikipedia's "Fleiss' kappa": 10 subjects, 14 raters, 5 categories, κ = 0.210
FLEISS_TABLE = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]


def test_fleiss_kappa_known_answer():
    # by hand: P̄ = 0.37802, P_e = 0.21275, κ = (0.37802 − 0.21275) / (1 − 0.21275) = 0.20993
    assert fleiss_kappa(FLEISS_TABLE) == pytest.approx(0.20993, abs=5e-5)


def test_fleiss_kappa_equals_statsmodels_when_installed():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater", reason="statsmodels is not installed")
    for _ in range(10):
        table = RNG.multinomial(5, [0.5, 0.3, 0.2], size=40)
        assert fleiss_kappa(table) == pytest.approx(inter_rater.fleiss_kappa(table, method="fleiss"), abs=1e-12)


def _ratings(n_raters=4, n_units=50, missing=0.15):
    cats = np.array(["1", "2", "tie"], dtype=object)
    truth = RNG.choice(cats, size=n_units)
    r = np.array([[t if RNG.random() < 0.7 else RNG.choice(cats) for t in truth] for _ in range(n_raters)],
                 dtype=object)
    r[RNG.random(r.shape) < missing] = None
    return r


def _kripp(r):
    codes = {"1": 1.0, "2": 2.0, "tie": 3.0}
    m = np.array([[np.nan if v is None else codes[v] for v in row] for row in r])
    return krippendorff.alpha(reliability_data=m, level_of_measurement="nominal")


def test_nominal_alpha_from_parts_equals_krippendorff():
    for _ in range(10):
        r = _ratings()
        d, n_c = alpha_parts(category_counts(r, ["1", "2", "tie"]))
        assert alpha_from_parts(d.sum(), n_c.sum(axis=0)) == pytest.approx(_kripp(r), abs=1e-10)


def test_rater_agreement_reports_krippendorff_and_fleiss_with_intervals():
    r = _ratings(n_raters=3, missing=0.1)
    res = rater_agreement(r, np.arange(r.shape[1]), ["1", "2", "tie"], Settings(n_boot=100))
    assert res["krippendorff_alpha"]["value"] == pytest.approx(_kripp(r), abs=1e-10)
    full = [u for u in range(r.shape[1]) if all(v is not None for v in r[:, u])]
    table = category_counts(r[:, full], ["1", "2", "tie"])
    assert res["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(table))
    assert res["fleiss_kappa"]["n"] == len(full)
    a = res["krippendorff_alpha"]
    assert a["low"] < a["value"] < a["high"] and a["method"] == "percentile bootstrap" and a["resamples"] == 100


def _set(n=40, judges=("A", "B", "C")):
    labels = RNG.choice(["1", "2"], size=n)
    pairs = {str(i): RecordedPair(id=str(i), labels=(("gold", labels[i]),)) for i in range(n)}
    js = []
    for j in judges:
        for i in range(n):
            for order in ("original", "swapped"):
                v = RNG.choice(["first", "second", "tie", "none"], p=[0.45, 0.45, 0.05, 0.05])
                js.append(Judgment(pair_id=str(i), judge=j, condition="c", order=order, verdict=str(v)))
    return RecordedSet("s", "table", "mem", pairs, js)


def test_card_kappa_f1_and_judge_alpha_equal_the_references():
    rs = _set()
    res = analyze(rs, Settings(n_boot=50))
    df = rs.frame()
    for judge in ("A", "B", "C"):
        m = res.cell(judge, "c")["metrics"]
        sub = df[df["judge"] == judge]
        assert m["kappa"]["value"] == pytest.approx(cohen_kappa_score(sub["choice"], sub["label"]), abs=1e-12)
        orig = sub[sub["order"] == "original"]
        assert m["kappa_original"]["value"] == pytest.approx(cohen_kappa_score(orig["choice"], orig["label"]),
                                                             abs=1e-12)
        f1 = precision_recall_fscore_support(sub["label"], sub["choice"], labels=["1", "2"], average="macro",
                                             zero_division=0)[2]
        assert m["macro_f1"]["value"] == pytest.approx(f1, abs=1e-12)
    wide = df.pivot_table(index=["pair_id", "order"], columns="judge", values="choice", aggfunc="first")
    r = np.where(wide.to_numpy(object).T == "none", None, wide.to_numpy(object).T)
    assert res.judge_agreement[0]["krippendorff_alpha"]["value"] == pytest.approx(_kripp(r), abs=1e-10)


def test_kappa_from_confusion_degenerate_is_nan():
    assert np.isnan(kappa_from_confusion(np.array([[5, 0], [0, 0]])))
