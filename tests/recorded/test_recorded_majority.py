"""The majority of judges is compared with a best single judge picked on other pairs than those it is compared
on: picked and compared on the same pairs, the pick's luck is counted as skill."""

from __future__ import annotations

import numpy as np

from rubriclab.recorded import Judgment, RecordedPair, RecordedSet, Settings, analyze


def test_the_best_judge_is_picked_on_one_half_and_compared_on_the_other() -> None:
    n, seed = 100, 0
    ids = sorted(str(i) for i in range(n))  # the analysis codes pairs by their sorted ids
    order = np.random.default_rng(seed).permutation(np.arange(n))
    selection = {ids[c] for c in order[: n // 2]}
    rng = np.random.default_rng(1)
    right = {"lucky": {p: p in selection for p in ids},            # all right where it is picked, all wrong after
             "steady": {p: bool(rng.random() < 0.6) for p in ids},   # ~0.6 on both halves
             "weak": {p: bool(rng.random() < 0.4) for p in ids}}
    pairs = {p: RecordedPair(id=p, labels=(("gold", "1"),)) for p in ids}
    judgments = [Judgment(pair_id=p, judge=j, condition="c", order="original", verdict="first" if ok[p] else "second")
                 for j, ok in right.items() for p in ids]
    res = analyze(RecordedSet(name="m", format="table", path="-", pairs=pairs, judgments=judgments),
                  Settings(n_boot=200, seed=seed))
    (row,) = res.majority
    assert row["best_judge"] == "lucky" and row["best_judge_selection_accuracy"] == 1.0
    assert (row["n_selection_pairs"], row["n_evaluation_pairs"]) == (50, 50)
    # on the pairs it is compared on, the picked judge is wrong every time: an honest comparison says so
    assert row["best_judge_accuracy"] == 0.0
    held = [p for p in ids if p not in selection]
    votes = np.array([[right[j][p] for j in right] for p in held])
    assert row["majority_evaluation_accuracy"] == np.mean(votes.sum(axis=1) >= 2)
    assert row["diff_vs_best"] == row["majority_evaluation_accuracy"] - 0.0 and row["diff_low"] > 0
    assert "seeded half" in row["selection"]
