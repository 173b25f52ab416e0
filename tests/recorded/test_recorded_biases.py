"""The card's surface biases are AlpacaEval's (its evaluator leaderboard's "Proba. prefer longer" and "Proba. prefer
lists", computed by the publisher's own code from the pip package ``alpaca-eval``), every left-out pair is counted
with its reason, and judge and labels are compared on the same pairs."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

alpaca_eval = pytest.importorskip("alpaca_eval.analyze")
from alpaca_eval import utils as ae_utils  # noqa: E402

from rubriclab.recorded import Judgment, RecordedPair, RecordedSet, Settings, analyze, contains_list  # noqa: E402
from rubriclab.recorded._biases import list_items  # noqa: E402

TEXTS = ["- one\n- two", "* a", "1. first\n2) second", "a. alpha\nB) beta", "  • dot item", "plain text, no list",
         "inline - dash is not a list", "3.14 is a number", "-\n- x", "Steps:\n1)do it", "A) ", "x\n  10. ten",
         "", "**bold** line", "- - nested", "e.g. this", "I. roman", "word\n-   spaced"]


@pytest.mark.parametrize("text", TEXTS)
def test_contains_list_is_alpaca_evals(text: str) -> None:
    assert contains_list(text) == ae_utils.contains_list(text)
    assert list_items(text) == ae_utils.contains_list(text, is_return_count=True)


def _pairs_and_verdicts(seed: int = 3, n: int = 80) -> tuple[RecordedSet, pd.DataFrame]:
    """Pairs whose length differences straddle 30 characters (and 0), some with lists, one judge's verdicts
    (first / second / tie / none) in one order, and the same rows as AlpacaEval annotations."""
    rng = np.random.default_rng(seed)
    pairs, judgments, rows = {}, [], []
    for i in range(n):
        base = "word " * int(rng.integers(5, 40))
        extra = int(rng.choice([0, 5, 29, 30, 31, 60, 200]))
        long_text = base + "x" * extra
        a, b = (base, long_text) if rng.random() < 0.5 else (long_text, base)
        if rng.random() < 0.3:
            a = "- " + a + "\n- more"
        if rng.random() < 0.3:
            b = "1. " + b
        if i % 17 == 0:
            a = ""  # an empty output: kept (the shorter one), as AlpacaEval keeps it
        label = str(rng.choice(["1", "2", "tie"], p=[0.45, 0.45, 0.1]))
        pairs[str(i)] = RecordedPair(id=str(i), labels=(("gold", label),), prompt=f"instruction {i}", output_1=a,
                                     output_2=b)
        verdict = str(rng.choice(["first", "second", "tie", "none"], p=[0.45, 0.4, 0.1, 0.05]))
        judgments.append(Judgment(pair_id=str(i), judge="J", condition="c", order="original", verdict=verdict))
        pref = {"first": 1.0, "second": 2.0, "tie": 1.5, "none": np.nan}[verdict]
        rows.append({"instruction": f"instruction {i}", "output_1": a, "output_2": b, "preference": pref})
    return (RecordedSet(name="b", format="table", path="-", pairs=pairs, judgments=judgments),
            pd.DataFrame(rows))


def _publisher(df: pd.DataFrame) -> dict[str, float]:
    me = types.SimpleNamespace(keys=["instruction", "output_1", "output_2"], annotation_key="preference")
    return {"prefers_longer": alpaca_eval.Analyzer.get_length_biases(me, df)["probability_prefer_longer"],
            "prefers_list": alpaca_eval.Analyzer.get_list_biases(me, df)["probability_prefer_list"]}


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_bias_rates_are_alpaca_evals(seed: int) -> None:
    rs, annotations = _pairs_and_verdicts(seed)
    res = analyze(rs, Settings(n_boot=100))
    judge = next(r for r in res.biases if r["judge"] == "J")
    want = _publisher(annotations)
    for name in ("prefers_longer", "prefers_list"):
        assert judge[name]["value"] == pytest.approx(want[name], abs=1e-12), name
        # every judgment of the cell is in n or in a counted exclusion
        assert judge[name]["n"] + sum(judge[name]["excluded"].values()) == len(rs.judgments)


def test_the_length_threshold_is_a_setting_and_30_is_alpaca_evals() -> None:
    rs, annotations = _pairs_and_verdicts(3)
    default = next(r for r in analyze(rs, Settings(n_boot=50)).biases if r["judge"] == "J")
    any_difference = next(r for r in analyze(rs, Settings(n_boot=50, length_delta=0)).biases if r["judge"] == "J")
    assert Settings().length_delta == 30
    assert default["prefers_longer"]["value"] != any_difference["prefers_longer"]["value"]
    assert default["prefers_longer"]["n"] < any_difference["prefers_longer"]["n"]


def test_empty_outputs_are_kept_and_counted_and_labels_compared_on_the_same_pairs() -> None:
    rs, _ = _pairs_and_verdicts(3)
    res = analyze(rs, Settings(n_boot=50))
    empty = sum(not p.output_1 or not p.output_2 for p in rs.pairs.values())
    assert res.bias_info["n_pairs_with_an_empty_output"] == empty > 0
    labels = next(r for r in res.biases if r["judge"] == "(labels)")
    longer = {pid: (None if abs(len(p.output_1) - len(p.output_2)) <= 30 else
                    ("1" if len(p.output_1) > len(p.output_2) else "2")) for pid, p in rs.pairs.items()}
    use = [pid for pid, p in rs.pairs.items() if longer[pid] and p.label in ("1", "2")]
    assert labels["prefers_longer"]["n"] == len(use)
    assert labels["prefers_longer"]["value"] == pytest.approx(np.mean([rs.pairs[p].label == longer[p] for p in use]))
    assert labels["prefers_longer"]["excluded"]["label a tie or missing"] == sum(
        1 for pid, p in rs.pairs.items() if longer[pid] and p.label not in ("1", "2"))
    # same pairs: the judge decided and the label is 1 or 2; both rates over exactly those pairs
    judge = next(r for r in res.biases if r["judge"] == "J")["prefers_longer_same_pairs"]
    decided = {j.pair_id: j.choice for j in rs.judgments if j.choice in ("1", "2")}
    same = [pid for pid in use if pid in decided]
    assert judge["n_pairs"] == len(same) == judge["judge"]["n"] == judge["labels"]["n"]
    assert judge["judge"]["value"] == pytest.approx(np.mean([decided[p] == longer[p] for p in same]))
    assert judge["labels"]["value"] == pytest.approx(np.mean([rs.pairs[p].label == longer[p] for p in same]))
    assert judge["excess"]["value"] == pytest.approx(judge["judge"]["value"] - judge["labels"]["value"])
    assert judge["excess"]["low"] <= judge["excess"]["value"] <= judge["excess"]["high"]
