"""Preference labels for DPO (rubriclab.align): which response of each pair a rubric's judge prefers, what is left
out (ties, failed verdicts), and how two rubrics' labels agree with the humans and with each other.

The scripted judge prefers the response holding ``GOOD``. Under a rubric holding ``MARKERXYZ`` it flips that
preference on target prompts tagged ``FLIP``; ``TIEALWAYS`` / ``FAILALWAYS`` prompts give split votes / an
unparseable reply under every rubric, ``TIEMARKED`` / ``FAILMARKED`` only under the marked rubric. So every
label, drop and agreement below is known in advance.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from rubriclab.align import LABEL_COLUMNS, label_agreement, label_pairs, preference_rows
from rubriclab.data import Pair
from rubriclab.judging import PairwiseRubric
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.rubrics import JudgeTemplate
from rubriclab.testing import last_user_text, scripted_model, scripted_provider

TPL = ("Compare two answers to the question.\nQuestion: {question}\nA: {answer_a}\nB: {answer_b}\n"
       "Answer [[A]] if A is better, [[B]] if B is better.")
MARKER = "MARKERXYZ prefer the answer that does what the user asks."
SEED = 5


def _rubrics() -> dict[str, PairwiseRubric]:
    return {"seed": PairwiseRubric.of(JudgeTemplate(name="seed", text=TPL)),
            "biased": PairwiseRubric.of(JudgeTemplate(name="biased", text=MARKER + "\n" + TPL))}


def _line(text: str, label: str) -> str:
    return re.search(rf"^{label}: (.*)$", text, re.M).group(1)


def _script(messages, params):
    text = last_user_text(messages)
    question, a, b = _line(text, "Question"), _line(text, "A"), _line(text, "B")
    marked = "MARKERXYZ" in text
    if "FAILALWAYS" in question or ("FAILMARKED" in question and marked):
        return "Both answers have merit; I cannot decide."
    if "TIEALWAYS" in question or ("TIEMARKED" in question and marked):
        return "[[A]]" if params["seed"] % 2 == 0 else "[[B]]"  # sample 0 says A, sample 1 says B: a split vote
    assert ("GOOD" in a) != ("GOOD" in b), text  # exactly one response of each pair holds the keyword
    prefer_good = not (marked and question.startswith("[target]") and "FLIP" in question)
    letter = "A" if ("GOOD" in a) == prefer_good else "B"
    return f"Having weighed both answers, my verdict: [[{letter}]]"


def _pair(pid: str, domain: str, tag: str = "", *, human_picks_good: bool = True) -> Pair:
    good, plain = f"GOOD detailed answer {pid}", f"plain answer {pid}"
    chosen, rejected = (good, plain) if human_picks_good else (plain, good)
    return Pair(id=pid, domain=domain, prompt=f"[{domain}] question {pid} {tag}".strip(), chosen=chosen,
                rejected=rejected)


PAIRS = [
    *(_pair(f"b{i}", "bench") for i in range(4)),
    _pair("b4", "bench", human_picks_good=False),  # the judge disagrees with the human under both rubrics
    _pair("b5", "bench", "TIEALWAYS"),
    *(_pair(f"t{i}", "target", "FLIP") for i in range(3)),
    _pair("t3", "target"),
    _pair("t4", "target", "FAILALWAYS"),
    _pair("t5", "target", "TIEMARKED"),
    _pair("t6", "target", "FAILMARKED"),
]
BY_ID = {p.id: p for p in PAIRS}


def _judge(name: str) -> RoleSpec:
    # T>0 so the two samples carry different seeds (the split vote); parse_retries 0: a bad reply is a failure
    return RoleSpec(name="judge", model=scripted_model(name, _script), temperature=0.7, concurrency=4,
                    parse_retries=0)


@pytest.fixture
def labelled(gateway):
    judge = _judge("align-labels")
    judged = label_pairs(_rubrics(), PAIRS, gateway=gateway, judge=judge, seed=SEED, samples=2)
    return judged, judge


def _expected_preferred(p: Pair, rubric: str) -> str:
    good = p.chosen if "GOOD" in p.chosen else p.rejected
    bad = p.rejected if good == p.chosen else p.chosen
    flipped = rubric == "biased" and p.domain == "target" and "FLIP" in p.prompt
    return bad if flipped else good


def test_label_pairs_judges_every_pair_under_each_rubric_in_one_shared_order(labelled):
    judged, _ = labelled
    assert len(judged) == 2 * len(PAIRS)
    status = judged.set_index(["rubric", "pair_id"])["status"]
    assert status["seed"].to_dict() == {**{f"b{i}": "agree" for i in range(4)}, "b4": "disagree", "b5": "tie",
                                        **{f"t{i}": "agree" for i in range(4)}, "t4": "failed", "t5": "agree",
                                        "t6": "agree"}
    assert status["biased"].to_dict() == {**{f"b{i}": "agree" for i in range(4)}, "b4": "disagree", "b5": "tie",
                                          **{f"t{i}": "disagree" for i in range(3)}, "t3": "agree", "t4": "failed",
                                          "t5": "tie", "t6": "failed"}
    # both rubrics saw each pair in the same seeded A/B order, and both orders occur
    assert judged.groupby("pair_id")["swapped"].nunique().max() == 1
    assert set(judged["swapped"]) == {True, False}


@pytest.mark.parametrize("rubric, n_rows, dropped", [("seed", 11, {"tie": 1, "failed": 1}),
                                                      ("biased", 9, {"tie": 2, "failed": 2})])
def test_preference_rows_put_the_judge_preferred_response_in_chosen(labelled, rubric, n_rows, dropped):
    judged, _ = labelled
    rows, left_out = preference_rows(judged, PAIRS, rubric)
    assert list(rows.columns) == LABEL_COLUMNS
    assert len(rows) == n_rows and left_out == dropped
    mine = judged[judged["rubric"] == rubric]
    kept = set(mine.loc[mine["status"].isin(["agree", "disagree"]), "pair_id"])
    assert set(rows["pair_id"]) == kept  # ties and failures are not in the training rows
    swapped = mine.set_index("pair_id")["swapped"]
    seen_orders = set()
    for r in rows.itertuples():
        p = BY_ID[r.pair_id]
        assert r.chosen == _expected_preferred(p, rubric), r.pair_id
        assert {r.chosen, r.rejected} == {p.chosen, p.rejected}
        assert r.prompt == p.prompt and r.domain == p.domain and r.rubric == rubric
        assert r.agrees_with_human == (r.status == "agree") == (r.chosen == p.chosen)
        seen_orders.add(bool(swapped[r.pair_id]))
    assert seen_orders == {True, False}  # right whatever the A/B presentation order
    assert set(rows["verdict"]) == {"A", "B"}


def test_a_disagreement_flips_the_human_pair(labelled):
    judged, _ = labelled
    rows, _ = preference_rows(judged, PAIRS, "biased")
    flipped = rows[rows["status"] == "disagree"].set_index("pair_id")
    assert sorted(flipped.index) == ["b4", "t0", "t1", "t2"]
    for pid, r in flipped.iterrows():
        assert r["chosen"] == BY_ID[pid].rejected and r["rejected"] == BY_ID[pid].chosen
        assert not r["agrees_with_human"]
    agreed = rows[rows["status"] == "agree"]
    assert all(r.chosen == BY_ID[r.pair_id].chosen for r in agreed.itertuples())


def test_relabelling_the_same_pairs_makes_no_provider_call(labelled, store):
    judged, judge = labelled
    name = judge.model.split("/", 1)[1]
    first = scripted_provider().calls[name]
    assert first == 2 * 2 * len(PAIRS)  # rubrics × pairs × samples, no re-ask (parse_retries 0)
    again = label_pairs(_rubrics(), PAIRS, gateway=Gateway(store, stage="t2", progress=False), judge=judge,
                        seed=SEED, samples=2)
    assert scripted_provider().calls[name] == first
    pd.testing.assert_frame_equal(again, judged)


def _hand_rubric_agreement(judged: pd.DataFrame, domain: str | None) -> tuple[float, int, int, int]:
    g = judged if domain is None else judged[judged["domain"] == domain]
    a = g[g["rubric"] == "seed"].set_index("pair_id")["verdict"]
    b = g[g["rubric"] == "biased"].set_index("pair_id")["verdict"]
    credit = n = ties = failed = 0
    for pid in a.index:
        va, vb = a[pid], b[pid]
        if pd.isna(va) or pd.isna(vb):
            failed += 1
        elif va in ("A", "B") and vb in ("A", "B"):
            n += 1
            credit += va == vb
        else:  # a tie on either side: half credit, the paper's rule
            n += 1
            ties += 1
            credit += 0.5
    return credit / n, n, ties, failed


def test_label_agreement_per_domain_and_overall(labelled):
    judged, _ = labelled
    agree = label_agreement(judged, "seed", "biased", n_boot=200, confidence=0.9, seed=1)
    assert list(agree["domain"].unique()) == ["bench", "target", "all"]
    by = agree.set_index(["domain", "comparison"])
    assert len(by) == 9 and by.index.is_unique
    expected = {  # (estimate, n, n_tie, n_failed), worked out by hand from the script; a tie counts 0.5 (paper)
        ("bench", "seed vs human"): (4.5 / 6, 6, 1, 0),
        ("bench", "biased vs human"): (4.5 / 6, 6, 1, 0),
        ("bench", "seed vs biased"): (5.5 / 6, 6, 1, 0),  # b5 is a tie under both rubrics
        ("target", "seed vs human"): (1.0, 6, 0, 1),
        ("target", "biased vs human"): (1.5 / 5, 5, 1, 2),
        ("target", "seed vs biased"): (1.5 / 5, 5, 1, 2),
        ("all", "seed vs human"): (10.5 / 12, 12, 1, 1),
        ("all", "biased vs human"): (6 / 11, 11, 2, 2),
        ("all", "seed vs biased"): (7 / 11, 11, 2, 2),
    }
    for key, (est, n, n_tie, n_failed) in expected.items():
        row = by.loc[key]
        assert row["estimate"] == pytest.approx(est), key
        assert (row["n"], row["n_tie"], row["n_failed"]) == (n, n_tie, n_failed), key
        if n < 10:  # too few pairs for the interval's level to hold: none, and why
            assert pd.isna(row["low"]) and str(row["reason"]).startswith(f"no interval: {n} pairs"), key
        else:
            assert row["low"] <= row["estimate"] <= row["high"], key
    assert (agree["tie_credit"] == 0.5).all()
    # rubric vs rubric: same verdict 1, a tie on either side 0.5, over pairs neither failed, straight from the rows
    for domain in ("bench", "target", None):
        share, n, ties, failed = _hand_rubric_agreement(judged, domain)
        row = by.loc[(domain or "all", "seed vs biased")]
        assert row["estimate"] == pytest.approx(share)
        assert (row["n"], row["n_tie"], row["n_failed"]) == (n, ties, failed)
    assert (agree["interval"] == "percentile bootstrap over pairs, 90%, B=200").all()
    # a non-degenerate interval really is an interval
    row = by.loc[("all", "seed vs biased")]
    assert row["low"] < row["estimate"] < row["high"]


def test_label_agreement_takes_the_tie_credit_it_is_given(labelled):
    judged, _ = labelled
    by = label_agreement(judged, "seed", "biased", tie_credit=0.0, n_boot=50).set_index(["domain", "comparison"])
    assert by.loc[("bench", "seed vs human"), "estimate"] == pytest.approx(4 / 6)
    assert by.loc[("all", "seed vs biased"), "estimate"] == pytest.approx(6 / 11)
    assert (by["tie_credit"] == 0).all()


def test_label_agreement_without_a_decided_pair_is_nan_not_an_error(gateway):
    judge = _judge("align-labels-none")
    pairs = [_pair("x0", "bench", "FAILALWAYS"), _pair("x1", "bench", "TIEALWAYS")]
    judged = label_pairs(_rubrics(), pairs, gateway=gateway, judge=judge, seed=SEED, samples=2)
    rows, dropped = preference_rows(judged, pairs, "seed")
    assert rows.empty and list(rows.columns) == LABEL_COLUMNS and dropped == {"tie": 1, "failed": 1}
    agree = label_agreement(judged, "seed", "biased", n_boot=50).set_index(["domain", "comparison"])
    row = agree.loc[("all", "seed vs biased")]
    assert row["estimate"] == 0.5 and (row["n"], row["n_tie"], row["n_failed"]) == (1, 1, 1)  # the tie: half
    failed_only = label_agreement(judged[judged["pair_id"] == "x0"], "seed", "biased", n_boot=50)
    row = failed_only.set_index(["domain", "comparison"]).loc[("all", "seed vs biased")]
    assert np.isnan(row["estimate"]) and np.isnan(row["low"]) and np.isnan(row["high"])
    assert (row["n"], row["n_tie"], row["n_failed"]) == (0, 0, 1)
