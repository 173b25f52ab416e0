"""Policy evaluation (rubriclab.align): best-of-n sampling from a tiny random-init policy, best-response choice,
third-party judge and reward win rates with ties and failures counted, and the Table-4-shaped summary.

The scripted third-party judge prefers the response with more ``GOOD`` words; prompts tagged ``FAILTAG`` get an
unparseable reply and ``TIETAG`` prompts a split vote, so every outcome below is known in advance.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from rubriclab.align import (
    TIE_CREDIT,
    best_of_n,
    comparisons_for,
    generate_candidates,
    judge_outcomes,
    judge_scores,
    load_policy,
    load_tokenizer,
    reward_model_scores,
    reward_outcomes,
    win_rate_table,
    win_rates,
)
from rubriclab.judging import PairwiseRubric
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import JudgeTemplate
from rubriclab.testing import last_user_text, scripted_model, scripted_provider, tiny_policy

CORPUS = ["How do I fix my code? Please help with the answer.", "Tell me a story about a cat.",
          "user assistant the a answer question help please sorry cannot"]
PROMPTS = ["How do I fix my code?", "Tell me a story about a long long cat please, now.", "Hi"]


# -- generation ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    return tiny_policy(tmp_path_factory.mktemp("align-policy") / "policy", CORPUS)


@pytest.fixture(scope="module")
def policy(policy_dir):
    return load_policy(str(policy_dir)), load_tokenizer(str(policy_dir))


def _generate(policy, **kw):
    model, tok = policy
    args = {"n": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 5, "seed": 0, **kw}
    return generate_candidates(model, tok, PROMPTS, **args)


def test_generate_candidates_gives_n_distinct_draws_per_prompt(policy):
    cands = _generate(policy, batch_size=2)
    assert list(cands.columns) == ["prompt_index", "sample", "response", "n_tokens", "cut_off"]
    # 3 prompts in batches of 2: the last, partial batch keeps its prompt index
    assert cands["prompt_index"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert cands["sample"].tolist() == [0, 1, 2, 3] * 3
    for _, g in cands.groupby("prompt_index"):
        assert g["response"].nunique() > 1  # n real draws, not one draw repeated n times
    # a random-init model practically never says EOS within 5 tokens: every reply is cut off at the limit
    assert cands["cut_off"].all() and (cands["n_tokens"] == 5).all()


def test_the_same_seed_gives_the_same_draws(policy):
    first = _generate(policy)
    torch.rand(100)  # whatever happened to the global RNG in between
    pd.testing.assert_frame_equal(_generate(policy), first)
    other = _generate(policy, seed=1)
    assert (other["response"] != first["response"]).any()


def test_a_reply_that_ends_with_eos_is_not_cut_off(policy_dir):
    model, tok = load_policy(str(policy_dir)), load_tokenizer(str(policy_dir))
    head = torch.nn.Linear(model.lm_head.in_features, model.lm_head.out_features, bias=True)
    with torch.no_grad():  # the same weights plus a push towards EOS: some replies end early, some do not
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[tok.eos_token_id] = 2.0
    model.lm_head = head
    cands = generate_candidates(model, tok, PROMPTS, n=4, temperature=1.0, top_p=1.0, max_new_tokens=5, seed=0)
    assert cands["cut_off"].any() and (~cands["cut_off"]).any()
    assert (cands.loc[cands["cut_off"], "n_tokens"] == 5).all()
    assert (cands.loc[~cands["cut_off"], "n_tokens"] < 5).all()  # EOS and what follows it are not counted
    assert not cands["response"].str.contains("<|im_end|>", regex=False).any()


def test_generate_candidates_rejects_n_below_one(policy):
    with pytest.raises(ValueError, match="n=0"):
        _generate(policy, n=0)


# -- best of n ----------------------------------------------------------------------------------------------------
def _cand(policy, pid, sample, score, domain="bench"):
    return {"policy": policy, "domain": domain, "prompt_id": pid, "prompt": f"prompt {pid}", "sample": sample,
            "response": f"{policy} {pid} s{sample}", "score": score, "cut_off": sample == 2}


def test_best_of_n_picks_the_highest_score_and_breaks_ties_by_sample_index():
    scored = pd.DataFrame([
        _cand("p", "q0", 0, 3.0), _cand("p", "q0", 1, 5.0), _cand("p", "q0", 2, 9.0),
        _cand("p", "q1", 2, 7.0), _cand("p", "q1", 0, 4.0), _cand("p", "q1", 1, 7.0),  # 1 and 2 tie: 1 wins
        _cand("p", "q2", 0, None), _cand("p", "q2", 1, None), _cand("p", "q2", 2, None),  # all failed
        _cand("p", "q3", 0, None), _cand("p", "q3", 1, 2.0), _cand("p", "q3", 2, -1.0),
        _cand("other", "q0", 0, 1.0), _cand("other", "q0", 1, 0.0), _cand("other", "q0", 2, 1.0),
    ])
    best = best_of_n(scored).set_index(["policy", "prompt_id"])
    assert len(best) == 5
    assert best.loc[("p", "q0"), "response"] == "p q0 s2" and best.loc[("p", "q0"), "score"] == 9.0
    assert best.loc[("p", "q1"), "sample"] == 1 and best.loc[("p", "q1"), "response"] == "p q1 s1"
    assert best.loc[("p", "q3"), "sample"] == 1 and best.loc[("p", "q3"), "n_scored"] == 2
    assert best.loc[("other", "q0"), "sample"] == 0  # policies are ranked separately
    missing = best.loc[("p", "q2")]
    # no best response (None; pandas ≥ 3 stores it as NaN in a string column)
    assert pd.isna(missing["response"]) and np.isnan(missing["score"]) and missing["n_scored"] == 0
    assert missing["n_candidates"] == 3 and missing["prompt"] == "prompt q2"
    assert best.loc[("p", "q0"), "cut_off"] and not best.loc[("p", "q1"), "cut_off"]  # the winner's own flag
    assert best.loc[("p", "q0"), "n_candidates"] == 3
    # equal top scores are kept to the lowest index on purpose, and counted so the outputs can say how often
    n_top = best["n_top"].to_dict()
    assert n_top == {("p", "q0"): 1, ("p", "q1"): 2, ("p", "q2"): 0, ("p", "q3"): 1, ("other", "q0"): 2}


# -- third-party judge outcomes -----------------------------------------------------------------------------------
JUDGE_TPL = ("Question: {question}\nA: {answer_a}\nB: {answer_b}\n"
             "Which answer is better? Answer [[A]] if A is better, [[B]] if B is better.")
LEFT, SEED_POL, ORIG = "biased@bench", "seed@bench", "original"
COMPS = comparisons_for(["bench"], ("seed", "biased"))


def _line(text, label):
    return re.search(rf"^{label}: (.*)$", text, re.M).group(1)


def _third_party(messages, params):
    text = last_user_text(messages)
    question, a, b = _line(text, "Question"), _line(text, "A"), _line(text, "B")
    if "FAILTAG" in question:
        return "These are hard to compare."
    if "TIETAG" in question:
        return "[[A]]" if params["seed"] % 2 == 0 else "[[B]]"  # sample 0 says A, sample 1 says B
    return "Verdict: [[A]]" if a.count("GOOD") > b.count("GOOD") else "Verdict: [[B]]"


def _best_frame():
    """Best responses of three policies on 8 bench + 6 target prompts. The left policy (two GOODs) beats the seed
    policy (none); the original (one GOOD) sits between. Special prompts: b0 the seed policy has no best response;
    b1 the judge fails; b2 the judge splits its votes; b3 seed == original and no left response; b4 left == seed
    and no original response (no two comparisons ever send the judge the same pair)."""
    rows = []
    prompts = [("bench", f"b{i}") for i in range(8)] + [("target", f"t{i}") for i in range(6)]
    for domain, pid in prompts:
        tag = {"b1": " FAILTAG", "b2": " TIETAG"}.get(pid, "")
        resp = {LEFT: f"GOOD GOOD answer {pid}", SEED_POL: f"meh answer {pid}", ORIG: f"GOOD original {pid}"}
        if pid == "b0":
            resp[SEED_POL] = None
        if pid == "b3":
            resp[ORIG], resp[LEFT] = resp[SEED_POL], None
        if pid == "b4":
            resp[LEFT], resp[ORIG] = resp[SEED_POL], None
        for pol, text in resp.items():
            rows.append({"policy": pol, "domain": domain, "prompt_id": pid, "prompt": f"question {pid}{tag}",
                         "response": text, "score": np.nan if text is None else 1.0})
    return pd.DataFrame(rows)


@pytest.fixture
def third_party():
    return (RoleSpec(name="pairwise_judge", model=scripted_model("align-third", _third_party), temperature=0.7,
                     concurrency=4, parse_retries=0),
            PairwiseRubric.of(JudgeTemplate(name="third", text=JUDGE_TPL)))


def test_judge_outcomes_follow_the_judge_whatever_the_ab_order(gateway, third_party):
    judge, rubric = third_party
    out = judge_outcomes(_best_frame(), COMPS, gateway=gateway, judge=judge, rubric=rubric, seed=3, samples=2)
    assert len(out) == 3 * 14
    key = out.set_index(["left", "right", "prompt_id"])
    judged = out[out["status"].isin(["win", "loss", "tie", "failed"])]
    # the judge saw each non-identical, non-missing comparison twice (two samples), and nothing else
    assert scripted_provider().calls["align-third"] == 2 * len(judged) == 2 * 34
    normal = judged[~judged["prompt_id"].isin(["b1", "b2"])]
    assert set(normal["swapped"]) == {True, False}  # both presentation orders occur ...
    expect = {(LEFT, SEED_POL): 1.0, (SEED_POL, ORIG): 0.0, (LEFT, ORIG): 1.0}
    for r in normal.itertuples():  # ... and the outcome is the left policy's either way
        assert r.outcome == expect[(r.left, r.right)], (r.left, r.right, r.prompt_id, r.swapped)
        assert r.status == ("win" if r.outcome == 1.0 else "loss")
        assert r.verdict == ("A" if (r.outcome == 1.0) != r.swapped else "B")
    # identical best responses: a tie at the tie credit, no verdict, no judge call
    b3, b4 = key.loc[(SEED_POL, ORIG, "b3")], key.loc[(LEFT, SEED_POL, "b4")]
    assert b3["status"] == "identical" and b3["outcome"] == 0.5
    assert b4["status"] == "identical" and b4["outcome"] == TIE_CREDIT and pd.isna(b4["verdict"])
    # a missing best response on either side
    b0 = out[out["prompt_id"] == "b0"].set_index("left")
    assert b0.loc[SEED_POL, "status"] == "missing" and np.isnan(b0.loc[SEED_POL, "outcome"])
    missing = out[out["status"] == "missing"]
    assert len(missing) == 6 and missing["outcome"].isna().all()
    # a failed verdict is NaN; a split vote is a tie worth the tie credit
    assert (out.loc[out["prompt_id"] == "b1", "status"] == "failed").all()
    assert out.loc[out["prompt_id"] == "b1", "outcome"].isna().all()
    assert (out.loc[out["prompt_id"] == "b2", "status"] == "tie").all()
    assert (out.loc[out["prompt_id"] == "b2", "outcome"] == 0.5).all()


def test_judge_outcomes_use_the_given_tie_credit_and_reuse_the_call_store(gateway, third_party):
    judge, rubric = third_party
    judge_outcomes(_best_frame(), COMPS, gateway=gateway, judge=judge, rubric=rubric, seed=3, samples=2)
    calls = scripted_provider().calls["align-third"]
    out = judge_outcomes(_best_frame(), COMPS, gateway=gateway, judge=judge, rubric=rubric, seed=3, samples=2,
                         tie_credit=0.25)
    assert scripted_provider().calls["align-third"] == calls  # same requests: answered from the store
    assert (out.loc[out["status"].isin(["tie", "identical"]), "outcome"] == 0.25).all()
    assert (out["status"] == "identical").sum() == 2 and (out["status"] == "tie").sum() == 3


def test_judge_outcomes_without_anything_to_judge_make_no_call(gateway, third_party):
    judge, rubric = third_party
    best = _best_frame()
    best = best[best["prompt_id"].isin(["b3", "b4"])]
    out = judge_outcomes(best, COMPS, gateway=gateway, judge=judge, rubric=rubric, seed=3)
    assert scripted_provider().calls["align-third"] == 0
    assert sorted(out["status"]) == ["identical", "identical", "missing", "missing", "missing", "missing"]


# -- reward outcomes ----------------------------------------------------------------------------------------------
def _scored_best(scores: dict[str, dict[str, float | None]]) -> pd.DataFrame:
    rows = []
    for pid, by_policy in scores.items():
        for pol, s in by_policy.items():
            rows.append({"policy": pol, "domain": "bench", "prompt_id": pid, "prompt": f"question {pid}",
                         "response": None if s is None else f"{pol} {pid}", "score": np.nan if s is None else s})
    return pd.DataFrame(rows)


def test_reward_outcomes_compare_the_best_scores():
    best = _scored_best({
        "p0": {LEFT: 2.0, SEED_POL: 1.0, ORIG: 3.0},
        "p1": {LEFT: 1.0, SEED_POL: 1.0, ORIG: 1.0},
        "p2": {LEFT: None, SEED_POL: 0.0, ORIG: 0.0},
        "p3": {LEFT: 0.5, SEED_POL: 0.7, ORIG: None},
    })
    out = reward_outcomes(best, COMPS, tie_credit=0.25).set_index(["left", "right", "prompt_id"])
    expected = {
        (LEFT, SEED_POL): {"p0": (1.0, "win"), "p1": (0.25, "tie"), "p2": (None, "missing"), "p3": (0.0, "loss")},
        (SEED_POL, ORIG): {"p0": (0.0, "loss"), "p1": (0.25, "tie"), "p2": (0.25, "tie"), "p3": (None, "missing")},
        (LEFT, ORIG): {"p0": (0.0, "loss"), "p1": (0.25, "tie"), "p2": (None, "missing"), "p3": (None, "missing")},
    }
    for (left, right), per_prompt in expected.items():
        for pid, (outcome, status) in per_prompt.items():
            r = out.loc[(left, right, pid)]
            assert r["status"] == status, (left, right, pid)
            assert np.isnan(r["outcome"]) if outcome is None else r["outcome"] == outcome, (left, right, pid)
    assert reward_outcomes(best, COMPS)["outcome"].dropna().isin([0.0, 1.0, TIE_CREDIT]).all()


# -- win rates ----------------------------------------------------------------------------------------------------
def test_win_rates_average_the_judged_outcomes(gateway, third_party):
    judge, rubric = third_party
    out = judge_outcomes(_best_frame(), COMPS, gateway=gateway, judge=judge, rubric=rubric, seed=3, samples=2)
    rates = win_rates(out, n_boot=200, confidence=0.9, seed=0, source="third-party judge")
    assert len(rates) == 6  # 3 comparisons × 2 eval domains
    for r in rates.itertuples():
        g = out[(out["left"] == r.left) & (out["right"] == r.right) & (out["domain"] == r.domain)]
        assert r.estimate == pytest.approx(g["outcome"].dropna().mean())
        assert r.n == g["outcome"].notna().sum()
        assert r.n_failed == g["outcome"].isna().sum()
        assert r.n_tie == g["status"].isin(["tie", "identical"]).sum()
        if r.n < 10:  # too few prompts for the interval's level to hold: none, and why
            assert np.isnan(r.low) and np.isnan(r.high) and r.reason.startswith(f"no interval: {r.n} prompts")
        else:
            assert r.low <= r.estimate <= r.high
        assert r.interval == "percentile bootstrap over prompts, 90%, B=200"
        assert r.source == "third-party judge" and r.regime == "bench"
    by = rates.set_index(["comparison", "domain"])
    # bench, biased vs seed: b2 tie 0.5, b4 identical 0.5, b5–b7 wins; b0/b3 missing, b1 failed
    row = by.loc[("biased vs seed", "bench")]
    assert row["estimate"] == pytest.approx(4 / 5)
    assert (row["n"], row["n_tie"], row["n_identical"], row["n_failed"]) == (5, 2, 1, 3)
    assert by.loc[("seed vs original", "target"), "estimate"] == 0.0
    assert by.loc[("biased vs original", "target"), "estimate"] == 1.0


def _outcomes(rows):
    return pd.DataFrame([{"left": left, "right": right, "regime": regime, "domain": domain, "prompt_id": f"q{i}",
                          "outcome": o, "status": s} for left, right, regime, domain, seq in rows
                         for i, (o, s) in enumerate(seq)])


def test_win_rate_table_has_comparisons_as_rows_and_domain_at_regime_columns():
    win, loss, tie, failed = (1.0, "win"), (0.0, "loss"), (0.5, "tie"), (np.nan, "failed")
    rows = []
    for left, right, regime in comparisons_for(["bench", "target"], ("seed", "biased")):
        rows.append((left, right, regime, "bench", [win, tie, loss, win, failed]))
        rows.append((left, right, regime, "target", [win, win, tie, tie]))
    rows[-1] = (*rows[-1][:4], [failed, failed])  # biased vs original, target regime, target domain: nothing judged
    rates = win_rates(_outcomes(rows), n_boot=100)
    table = win_rate_table(rates)
    assert list(table.columns) == ["comparison", "bench@B", "target@B", "bench@T", "target@T"]
    assert table["comparison"].tolist() == ["biased vs seed", "seed vs original", "biased vs original"]
    cell = table.set_index("comparison")
    text = cell.loc["biased vs seed", "bench@B"]
    # ties are common (1 of 4, 2 of 4 > 5%): the win rate with ties at 0 beside the card's (ties at 0.5); 4 prompts
    # are too few for an interval
    assert text.startswith("62.5% (n=4; no interval: 4 prompts, fewer than the 10")
    assert text.endswith("; 1 tie at 0.5, 50.0% with ties at 0; 1 failed)")
    assert cell.loc["seed vs original", "target@T"].endswith("; 2 ties at 0.5, 50.0% with ties at 0)")
    empty = cell.loc["biased vs original", "target@T"]
    assert empty == "— (no prompt with both responses judged; 2 failed)"
    many = win_rate_table(win_rates(_outcomes([("biased@bench", "seed@bench", "bench", "bench",
                                                [win, tie, loss, win, failed] * 3)]), n_boot=100)).iloc[0]["bench@B"]
    assert many.startswith("62.5% [") and many.endswith("(n=12; 3 ties at 0.5, 50.0% with ties at 0; 3 failed)")
    low, high = (float(x) for x in re.search(r"\[(\d+), (\d+)\]", many).groups())
    assert low <= 62.5 <= high


def test_win_rates_record_their_tie_credit():
    tie = (0.25, "tie")
    rates = win_rates(_outcomes([("biased@bench", "seed@bench", "bench", "bench", [tie, (1.0, "win")])]),
                      n_boot=50, tie_credit=0.25)
    assert rates["tie_credit"].tolist() == [0.25] and rates["estimate"].tolist() == [0.625]


def test_win_rate_figure_draws_no_bar_for_a_missing_cell_and_states_the_recorded_tie_rule(tmp_path, monkeypatch):
    """A cell with nothing judged is not a 0% win rate: no bar, a note instead; the title's tie rule is the one the
    rates were computed with (here 0.25), not a fixed 0.5."""
    from rubriclab.align import _plots

    win, tie, failed = (1.0, "win"), (0.25, "tie"), (np.nan, "failed")
    rows = [(left, right, regime, domain, [win, tie]) for left, right, regime in
            comparisons_for(["bench"], ("seed", "biased")) for domain in ("bench", "target")]
    rows[-1] = (*rows[-1][:4], [failed, failed])  # biased vs original @ target: nothing judged
    rates = win_rates(_outcomes(rows), n_boot=50).assign(tie_credit=0.25)
    figures = []
    monkeypatch.setattr(_plots, "save_figure", lambda fig, path, **kw: figures.append(fig))
    _plots.win_rate_figure(rates, tmp_path / "w.png")
    ax = figures[0].axes[0]
    heights = [bar.get_height() for c in ax.containers if hasattr(c, "patches") for bar in c.patches]
    assert heights == [pytest.approx(0.625)] * 5  # 6 cells, one missing: 5 bars, none of height 0
    notes = [t.get_text() for t in ax.texts if "no win rate" in t.get_text()]
    assert notes == ["no win rate (n=0)"]
    assert ax.get_title().endswith("ties count 0.25")


def test_a_point_bootstrap_distribution_is_not_shown_as_an_interval():
    tie = (0.5, "identical")
    rates = win_rates(_outcomes([("biased@bench", "seed@bench", "bench", "bench", [tie] * 10)]), n_boot=100)
    cell = win_rate_table(rates).iloc[0]["bench@B"]
    assert cell == ("50.0% (n=10; the same outcome on every prompt: no interval; 10 ties at 0.5, 0.0% with ties at 0)")


def test_comparisons_for_pairs_biased_seed_and_original_per_regime():
    assert comparisons_for(["bench", "bench_target"], ("seed", "biased")) == [
        ("biased@bench", "seed@bench", "bench"), ("seed@bench", "original", "bench"),
        ("biased@bench", "original", "bench"),
        ("biased@bench_target", "seed@bench_target", "bench_target"),
        ("seed@bench_target", "original", "bench_target"), ("biased@bench_target", "original", "bench_target")]


# -- reward scores ------------------------------------------------------------------------------------------------
def _scorer_script(messages, params):
    text = "\n".join(str(m["content"]) for m in messages)
    reply = {"alpha": "SCORE: 7", "beta": "SCORE: 7.5", "gamma": "SCORE: 11"}
    word = next(w for w in reply if f"answer {w}" in text)
    return f"REASONING: it is an answer.\n{reply[word]}"


def test_judge_scores_read_integer_scores_and_count_bad_ones(gateway):
    scorer = RoleSpec(name="reward", model=scripted_model("align-scorer", _scorer_script), concurrency=2,
                      parse_retries=0)
    scores, errors = judge_scores(["q1", "q2", "q3"], ["answer alpha", "answer beta", "answer gamma"],
                                  gateway=gateway, scorer=scorer)
    assert scores == [7.0, None, None]
    assert errors[0] is None
    assert "not an integer" in errors[1]  # a decimal is a failure, never rounded
    assert "outside [1, 10]" in errors[2]
    assert scripted_provider().calls["align-scorer"] == 3
    assert judge_scores([], [], gateway=gateway, scorer=scorer) == ([], [])


@pytest.fixture(scope="module")
def reward_dir(tmp_path_factory):
    return tiny_policy(tmp_path_factory.mktemp("align-reward") / "reward", CORPUS, reward_head=True)


def test_greedy_best_of_n_is_refused(policy):
    model, tok = policy
    with pytest.raises(ValueError, match="greedy decoding draws 3 identical replies"):
        generate_candidates(model, tok, ["Hi"], n=3, temperature=0.0, top_p=1.0, max_new_tokens=2, seed=0)


def test_reward_model_scores_give_one_deterministic_float_per_input(reward_dir):
    prompts = ["How do I fix my code?", "Tell me a story", "Hi"]
    responses = ["Check the stack trace.", "Once upon a time there was a cat who sat.", "Hello"]
    scores = reward_model_scores(str(reward_dir), prompts, responses, batch_size=2)
    assert len(scores) == 3 and all(isinstance(s, float) and math.isfinite(s) for s in scores)
    assert len(set(scores)) == 3  # the score depends on the input
    assert reward_model_scores(str(reward_dir), prompts, responses, batch_size=2) == scores
    # padding does not change a score: alone or in a padded batch, the same number
    alone = [reward_model_scores(str(reward_dir), [p], [r])[0] for p, r in zip(prompts, responses)]
    assert alone == pytest.approx(scores, rel=1e-4, abs=1e-6)
