"""Accuracy with parse failures and ties, position consistency and both-order accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from rubriclab.errors import InputError
from rubriclab.stats import accuracy, accuracy_both_orders, item_bootstrap, position_consistency

ORIG = ["A", "A", "B", "B", None]
SWAP = ["B", "A", "A", "B", "A"]
HUMAN = ["A", "A", "A", "B", "A"]  # letter of the human-preferred response in the original order


def test_accuracy_counts_failures_and_ties():
    out = accuracy(["A", None, "B", "A", "tie"], ["A", "A", "A", "B", "A"], tie_credit=0.0)
    assert (out["n"], out["n_failed"], out["n_total"], out["n_correct"], out["n_ties"]) == (4, 1, 5, 1, 1)
    assert out["accuracy"] == pytest.approx(0.25) and out["failure_rate"] == pytest.approx(0.2)
    assert np.isnan(out["per_item"][1]) and out["per_item"][0] == 1.0
    half = accuracy(["A", None, "B", "A", "tie"], ["A", "A", "A", "B", "A"])  # the project's rule: ties at 0.5
    assert half["accuracy"] == pytest.approx(1.5 / 4)
    none = accuracy([None, np.nan], ["A", "B"])
    assert np.isnan(none["accuracy"]) and none["n_failed"] == 2 and none["reason"]
    with pytest.raises(InputError, match="'human'"):
        accuracy(["A"], ["A", "B"])


def test_accuracy_per_item_feeds_item_bootstrap():
    pred = ["A", "B", None, "A"] * 10
    out = accuracy(pred, ["A"] * 40)
    ok = ~np.isnan(out["per_item"])
    ci = item_bootstrap(out["per_item"][ok], "mean", np.arange(40)[ok] // 4, n_resamples=200)
    assert ci["estimate"] == pytest.approx(out["accuracy"]) and ci["n_obs"] == out["n"]


def test_position_consistency_known_answer():
    out = position_consistency(ORIG, SWAP)
    # item0 A/B same response; item1 A/A flip; item2 B/A same; item3 B/B flip; item4 failed.
    assert out["flips"].tolist() == [False, True, False, True, False]
    assert out["swap_flip_rate"] == pytest.approx(0.5) and out["n_items"] == 4 and out["n_failed"] == 1
    assert out["first_position_rate"] == pytest.approx(5 / 9) and out["n_judgments"] == 9
    always_first = position_consistency(["A"] * 6, ["A"] * 6)
    assert always_first["first_position_rate"] == 1.0 and always_first["swap_flip_rate"] == 1.0
    with pytest.raises(InputError, match="verdict_swapped"):
        position_consistency(["A"], ["C"])


def test_accuracy_both_orders_strict_and_split():
    strict = accuracy_both_orders(ORIG, SWAP, HUMAN)
    # item0 both right; item1 / item3 orders disagree; item2 both wrong; item4 failed.
    assert (strict["n_both_correct"], strict["n_disagree"], strict["n_both_wrong"]) == (1, 2, 1)
    assert strict["accuracy"] == pytest.approx(0.25) and strict["n"] == 4 and strict["n_failed"] == 1
    split = accuracy_both_orders(ORIG, SWAP, HUMAN, split_credit=True)
    assert split["accuracy"] == pytest.approx(0.5)
    with pytest.raises(InputError, match="human_orig"):
        accuracy_both_orders(["A"], ["B"], ["X"])
