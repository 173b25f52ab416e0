"""Krippendorff's α against published values, flip rate and paraphrase stability on known inputs."""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pytest

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats import flip_rate, krippendorff_alpha, mean_alpha, mean_paraphrase_stability, paraphrase_stability

nan = np.nan
# Wikipedia / krippendorff README example: 3 coders × 15 units; nominal α = 0.691, interval α = 0.811.
WIKI = [[nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
        [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
        [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4]]
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 observers × 12 units:
# nominal .743, ordinal .815, interval .849, ratio .797.
K2011 = [[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
         [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
         [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
         [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]]


def test_alpha_published_examples():
    assert krippendorff_alpha(WIKI, level="nominal", value_domain=None)["alpha"] == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha(WIKI, level="interval", value_domain=None)["alpha"] == pytest.approx(0.810845, abs=1e-6)
    for level, published in [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]:
        assert krippendorff_alpha(K2011, level=level)["alpha"] == pytest.approx(published, abs=5e-4)


def test_alpha_ordinal_with_value_domain_matches_package():
    rng = np.random.default_rng(0)
    truth = rng.integers(2, 9, size=50)
    r = np.clip(truth + rng.integers(-2, 3, size=(3, 50)), 0, 10).astype(float)
    r[0, :5] = nan
    ours = krippendorff_alpha(r)  # ordinal over 0..10 by default
    ref = krippendorff.alpha(reliability_data=r, value_domain=list(range(11)), level_of_measurement="ordinal")
    assert ours["alpha"] == pytest.approx(ref) and ours["n_pairable_items"] == 50
    # Unused categories enter the ordinal metric with n_g = 0: declaring them does not move α.
    assert ours["alpha"] == pytest.approx(krippendorff.alpha(r, level_of_measurement="ordinal"))
    with pytest.raises(InputError, match="outside the value domain: 11"):
        krippendorff_alpha(np.array([[1.0, 11.0], [2.0, 3.0]]))
    with pytest.raises(ConfigError, match="level"):
        krippendorff_alpha(r, level="metric")


def test_alpha_perfect_and_systematic_disagreement():
    perfect = np.tile([0.0, 3, 5, 7, 10, 2], (3, 1))
    assert krippendorff_alpha(perfect)["alpha"] == pytest.approx(1.0)
    opposed = np.array([[0.0, 10, 0, 10, 1, 9], [10.0, 0, 10, 0, 9, 1]])
    assert krippendorff_alpha(opposed)["alpha"] < 0
    assert krippendorff_alpha(opposed, level="interval")["alpha"] < 0


def test_alpha_undefined_cases_return_nan_with_reason():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one_rater = krippendorff_alpha([[1.0, 2, 3]])
        no_overlap = krippendorff_alpha([[1.0, nan], [nan, 2.0]])
        one_value = krippendorff_alpha([[5.0, 5, 5], [5.0, 5, nan]])
    for r in (one_rater, no_overlap):
        assert np.isnan(r["alpha"]) and "fewer than 2 raters" in r["reason"]
    assert np.isnan(one_value["alpha"]) and "expected disagreement is 0" in one_value["reason"]


def test_mean_alpha_averages_defined_criteria():
    perfect = np.tile([0.0, 3, 5, 7], (3, 1))
    opposed = np.array([[0.0, 10, 0, 10], [10.0, 0, 10, 0]])
    a_opp = krippendorff_alpha(opposed)["alpha"]
    out = mean_alpha({"clear": perfect, "contested": opposed, "broken": [[1.0, 2.0]]})
    assert out["mean_alpha"] == pytest.approx((1.0 + a_opp) / 2)
    assert out["n_criteria"] == 3 and out["n_used"] == 2 and list(out["excluded"]) == ["broken"]


def test_flip_rate_known_answer():
    v = np.array([["A", "A", "A", "B", "A"],
                  ["A", "A", "A", "B", None],
                  ["A", "B", "A", "B", None],
                  ["A", "A", "B", "B", None],
                  ["A", "A", "B", "B", None]], dtype=object)  # R=5 runs × 5 items
    out = flip_rate(v)
    # item0 unanimous A; item1 4A+1B; item2 3A+2B; item3 unanimous B; item4 only one parsed run.
    assert out["flips"].tolist() == [False, True, True, False, False]
    assert out["evaluated"].tolist() == [True, True, True, True, False]
    assert out["flip_rate"] == pytest.approx(0.5) and out["n_items"] == 4 and out["n_excluded"] == 1
    assert out["majority"] == ["A", "A", "A", "B", "A"]
    scores = np.array([[7, 7, 3], [7, 6, 3], [7, 7, 3]])  # numeric verdicts work too
    assert flip_rate(scores)["flip_rate"] == pytest.approx(1 / 3)
    assert flip_rate([["A", "B"], ["B", "A"]])["majority"] == ["tie", "tie"]
    assert np.isnan(flip_rate([["A"], [None]])["flip_rate"])


def test_paraphrase_stability_known_answers():
    v1, v2, v3 = [0.1, 0.2, 0.3, 0.4, 0.5], [0.2, 0.4, 0.6, 0.8, 0.99], [0.5, 0.4, 0.3, 0.2, 0.1]
    out = paraphrase_stability([v1, v2, v3])
    assert [r for *_, r in out["pair_rhos"]] == pytest.approx([1.0, -1.0, -1.0])
    assert out["rho"] == pytest.approx(-1 / 3) and out["n_pairs"] == 3 and out["n_undefined"] == 0
    # Hand-computed: ranks (1,2,3,4) vs (2,1,4,3) -> d² = 4 -> ρ = 1 - 6·4/(4·15) = 0.6
    assert paraphrase_stability([[1, 2, 3, 4], [2, 1, 4, 3]])["rho"] == pytest.approx(0.6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        const = paraphrase_stability([v1, v2, [0.5] * 5])
    assert const["rho"] == pytest.approx(1.0) and const["n_undefined"] == 2
    single = paraphrase_stability([v1])
    assert np.isnan(single["rho"]) and "at least 2" in single["reason"]


def test_mean_paraphrase_stability_over_criteria():
    up, down = [1, 2, 3, 4], [4, 3, 2, 1]
    out = mean_paraphrase_stability({"c1": [up, up], "c2": [up, down], "c3": [up, [2, 2, 2, 2]]})
    assert out["mean_rho"] == pytest.approx(0.0) and out["n_used"] == 2
    assert out["n_undefined_pairs"] == 1 and "c3" in out["excluded"]


def test_value_domain_is_passed_to_the_package(monkeypatch):
    import rubriclab.stats._agreement as agreement

    seen = {}
    original = krippendorff.alpha

    def spy(**kwargs):
        seen.update(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(agreement.krippendorff, "alpha", spy)
    krippendorff_alpha([[0.0, 4, 9], [1.0, 4, 10]])
    assert list(seen["value_domain"]) == list(range(11)) and seen["level_of_measurement"] == "ordinal"
