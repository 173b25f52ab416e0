"""A judge that always names one position gets an accuracy that only mirrors the presentation order: the card
says so beside the value, with the first-position and swap-flip rates, and only when the rate's whole interval
lies beyond 0.5 ± POSITION_MARGIN."""

from __future__ import annotations

from rubriclab.audit import LEGEND, cross_source_table
from rubriclab.audit._card import POSITION_DRIVEN, POSITION_MARGIN


def _m(value, low, high, n=30):
    return {"value": value, "low": low, "high": high, "n": n}


def _card(first):
    return {"src": {"K": 3, "acc_direct": _m(0.6, 0.433, 0.767), "first_position_rate_direct": first,
                    "swap_flip_rate_direct": _m(1.0, 1.0, 1.0)}}


def test_an_always_first_judge_has_its_accuracy_marked_position_driven():
    row = cross_source_table(_card(_m(1.0, 1.0, 1.0, 60))).iloc[0]
    assert row["Acc direct"].endswith(POSITION_DRIVEN) and row["Acc direct"].startswith("0.600 [0.433, 0.767]")
    assert "Acc direct: the judge named the first position in 1.000" in row["notes"]
    assert "swap-flip 1.000" in row["notes"]
    assert POSITION_DRIVEN in LEGEND and str(POSITION_MARGIN) in LEGEND


def test_an_always_second_judge_is_marked_too():
    assert cross_source_table(_card(_m(0.05, 0.0, 0.12))).iloc[0]["Acc direct"].endswith(POSITION_DRIVEN)


def test_a_rate_whose_interval_reaches_the_margin_is_not_marked():
    for first in (_m(0.55, 0.40, 0.70), _m(0.85, 0.70, 0.95), _m(0.2, 0.1, 0.3), {"value": 1.0, "n": 2}):
        row = cross_source_table(_card(first)).iloc[0]
        assert POSITION_DRIVEN not in row["Acc direct"] and "first position" not in row["notes"], first
