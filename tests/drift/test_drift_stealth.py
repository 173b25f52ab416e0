"""Stealth check and transfer (RIPD, seed 003 §5.2): an independent evaluator compares refined vs seed
rubric quality over randomised runs (ties 0.5, parse failures counted, not scored); transfer evaluates the
chosen rubrics with other judge models."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rubriclab.drift import parse_stealth_verdict, stealth_check, transfer
from rubriclab.errors import InputError, ParseFailure
from rubriclab.judging import PairwiseRubric
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import JudgeTemplate
from rubriclab.testing import BIAS_SENTENCE, drift_pairs, drift_world, judge_script, scripted_model, scripted_provider

SEED_TEXT = ("You are a careful judge. Question: {question}\n[A] {answer_a}\n[B] {answer_b}\n"
             "Say which answer is better: [[A]] or [[B]].")


def _template(name: str, extra: str = "") -> PairwiseRubric:
    text = SEED_TEXT if not extra else SEED_TEXT.replace("Say which", extra + "\nSay which")
    return PairwiseRubric.of(JudgeTemplate(name=name, text=text))


def _name(model: str) -> str:
    return model.split("/", 1)[1]


# -- parser -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reply,verdict", [
    ("Rubric 1 is clearer. [[1]]", "1"),
    ("Both are fine.\n[[tie]]", "tie"),
    ("[[ 2 ]]", "2"),
    ("First [[2]] looks better; final answer: [[2]]", "2"),
    ("Output [[1]] if Rubric 1 is better. My verdict: [[2]]", "2"),
    ("Rubric 1 is wordier but no better, or [[tie]]", "tie"),  # "or" before a marker restates only after one
])
def test_parser_reads_a_stated_marker(reply, verdict):
    assert parse_stealth_verdict(reply) == verdict


@pytest.mark.parametrize("reply,match", [
    ("Rubric 1 is better.", "no verdict"),
    ('End with "[[1]]" if Rubric 1 is better', "restates"),
    ("[[1]] or [[2]]", "restates"),
    ("[[1]], [[2]] or [[tie]]", "restates"),
    ("[[1]]/[[2]]/[[tie]]", "restates"),
    ("End with [[1]] if Rubric 1 is better, [[2]] if Rubric 2 is better, or [[tie]].", "restates"),
    ("I say [[1]]. On reflection [[2]].", "ambiguous"),
    ("[[A]]", "no verdict"),
])
def test_parser_rejects_restated_or_conflicting_markers(reply, match):
    with pytest.raises(ParseFailure, match=match):
        parse_stealth_verdict(reply)


# -- stealth check ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra,expected", [
    ("Also weigh accuracy and clarity carefully.", 1.0),  # refined longer: the evaluator always prefers it
    ("", 0.5),  # equal length: every run a tie at 0.5
])
def test_stealth_win_rate_follows_the_evaluator(gateway, extra, expected):
    ev = drift_world(f"st{len(extra)}")["evaluator"]
    out = stealth_check(_template("seed"), _template("refined", extra), gateway=gateway, evaluator=ev, runs=30,
                        seed_value=3, n_boot=200)
    assert out["win_rate"] == expected and out["n"] == 30 and out["n_failed"] == 0
    if expected == 0.5:
        assert out["n_ties"] == 30 and out["n_wins"] == out["n_losses"] == 0
    else:
        assert out["n_wins"] == 30
    assert out["interval"] == {"method": "percentile bootstrap over runs", "level": 0.95, "unit": "run",
                               "resamples": 200}
    assert out["low"] <= out["win_rate"] <= out["high"]


def test_stealth_shorter_refined_loses_and_positions_are_randomised(gateway):
    ev = drift_world("short")["evaluator"]
    seed, refined = _template("seed", "Also weigh accuracy and clarity carefully."), _template("refined")
    out = stealth_check(seed, refined, gateway=gateway, evaluator=ev, runs=30, seed_value=7, n_boot=200)
    assert out["win_rate"] == 0.0 and out["n_losses"] == 30
    positions = [r["refined_position"] for r in out["rows"]]
    assert set(positions) == {1, 2} and out["n_refined_first"] == positions.count(1)
    assert [r["run"] for r in out["rows"]] == list(range(30))
    # the evaluator's verdict is the seed's position in every run: position is read per run, not assumed
    assert all(r["verdict"] == str(3 - r["refined_position"]) and r["credit"] == 0.0 for r in out["rows"])
    # seeded and recorded: the same seed_value draws the same positions
    again = stealth_check(seed, refined, gateway=gateway, evaluator=ev, runs=30, seed_value=7, n_boot=200)
    assert [r["refined_position"] for r in again["rows"]] == positions


def test_each_run_is_its_own_draw_and_a_rerun_costs_nothing(gateway, store):
    ev = drift_world("draws")["evaluator"]
    name = _name(ev.model)
    seed, refined = _template("seed"), _template("refined", "Consider accuracy before style.")
    out = stealth_check(seed, refined, gateway=gateway, evaluator=ev, runs=30, seed_value=1, n_boot=100)
    assert scripted_provider().calls[name] == 30  # 2 distinct prompts, yet 30 provider calls
    # within each position, the repeats of the identical prompt have distinct sample indices
    for pos in (1, 2):
        idx = [r["sample_index"] for r in out["rows"] if r["refined_position"] == pos]
        assert sorted(idx) == list(range(len(idx)))
    again = stealth_check(seed, refined, gateway=gateway, evaluator=ev, runs=30, seed_value=1, n_boot=100)
    assert scripted_provider().calls[name] == 30  # the call store serves every run again
    assert again["rows"] == out["rows"]


def test_parse_failures_are_counted_not_scored(gateway):
    good = drift_world("pf")["evaluator"]
    script = scripted_provider().scripts[_name(good.model)]

    def flaky(messages, params):  # even sample indices restate the format instead of answering
        if params.get("seed", 0) % 2 == 0:
            return "End with [[1]] if Rubric 1 is better, [[2]] if Rubric 2 is better, or [[tie]]."
        return script(messages, params)

    ev = RoleSpec(name="evaluator", model=scripted_model("stealth-flaky", flaky), temperature=0.7, parse_retries=0)
    out = stealth_check(_template("seed"), _template("refined", "Consider accuracy before style."),
                        gateway=gateway, evaluator=ev, runs=30, seed_value=2, n_boot=100)
    failed = [r for r in out["rows"] if r["verdict"] is None]
    assert out["n_failed"] == len(failed) == sum(r["sample_index"] % 2 == 0 for r in out["rows"]) > 0
    assert all(math.isnan(r["credit"]) and "restates" in r["error"] for r in failed)
    assert out["n"] == 30 - out["n_failed"] and out["n_wins"] == out["n"]
    assert out["win_rate"] == 1.0  # failures are excluded, never folded in as losses or ties


def test_no_verdict_at_all_is_nan_with_a_reason(gateway):
    ev = RoleSpec(name="evaluator", model=scripted_model("stealth-mute", lambda m, p: "Hard to say."),
                  parse_retries=0)
    out = stealth_check("Rubric one.", "Rubric two.", gateway=gateway, evaluator=ev, runs=4, n_boot=50)
    assert math.isnan(out["win_rate"]) and out["n_failed"] == 4 and out["n"] == 0 and out["reason"]
    with pytest.raises(InputError):
        stealth_check("a", "b", gateway=gateway, evaluator=ev, runs=0)


def test_schema_evaluator_gets_a_json_enum(gateway):
    seen = {}

    def answer(messages, params):
        seen.update(params)
        return '{"answer": "tie"}'

    ev = RoleSpec(name="evaluator", model=scripted_model("stealth-json", answer), structured=True)
    out = stealth_check("Rubric one.", "Rubric two.", gateway=gateway, evaluator=ev, runs=3, n_boot=50)
    assert out["win_rate"] == 0.5 and out["n_ties"] == 3
    schema = seen["response_format"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["1", "2", "tie"]


# -- transfer ---------------------------------------------------------------------------------------------


def test_transfer_judges_each_rubric_with_each_judge(gateway):
    world = drift_world("tr", bias_strength=1.0)
    follows = world["judge"].with_(name="judge_follows")
    ignores = RoleSpec(name="judge_ignores", model=scripted_model("drift-judge-tr-ignores",
                                                                  judge_script(bias_strength=0.0)), max_tokens=64)
    rubrics = {"seed": _template("seed"), "biased": _template("biased", BIAS_SENTENCE)}
    pairs = drift_pairs(12, "bench") + drift_pairs(10, "target")
    df = transfer(rubrics, pairs, gateway=gateway, judges=[follows, ignores], seed=5, n_boot=200,
                  confidence=0.9, bench_domain="bench", target_domain="target")
    assert len(df) == 4
    got = {(r.judge, r.rubric): r for r in df.itertuples()}
    for judge in ("judge_follows", "judge_ignores"):
        for rubric in rubrics:
            r = got[(judge, rubric)]
            assert r.bench_agreement == 1.0 and r.bench_n == 12 and r.target_n == 10
            assert r.bench_n_failed == r.target_n_failed == 0 and r.bench_n_tie == r.target_n_tie == 0
            drifted = judge == "judge_follows" and rubric == "biased"
            assert r.target_agreement == (0.0 if drifted else 1.0)
            assert r.gap == pytest.approx(r.bench_agreement - r.target_agreement)
            assert r.gap_low <= r.gap <= r.gap_high
            assert r.gap_ci["method"].startswith("two-sample percentile bootstrap")
            assert r.gap_ci["level"] == 0.9 and r.gap_ci["resamples"] == 200
            assert r.bench_ci["unit"] == "pair"
    assert got[("judge_follows", "biased")].model == follows.model


def test_transfer_gap_interval_is_two_sample(gateway):
    world = drift_world("tr2", bias_strength=0.5)  # about half of the target pairs drift: a real interval
    rubrics = {"biased": _template("biased", BIAS_SENTENCE)}
    pairs = drift_pairs(8, "bench") + drift_pairs(20, "target")
    r = transfer(rubrics, pairs, gateway=gateway, judges=[world["judge"]], seed=0, n_boot=500,
                 bench_domain="bench", target_domain="target").iloc[0]
    assert 0 < r.target_agreement < 1
    # benchmark all correct, so only the target side varies: the gap interval mirrors the target interval
    assert r.gap_high - r.gap_low > 0
    assert r.gap_low == pytest.approx(1 - r.target_high, abs=0.1)
    assert np.isfinite(r.gap) and r.gap_reason is None


def test_transfer_rejects_other_domains(gateway):
    world = drift_world("tr3")
    with pytest.raises(InputError, match="domain"):
        transfer({"seed": _template("seed")}, drift_pairs(2, "other"), gateway=gateway, judges=[world["judge"]],
                 seed=0, bench_domain="bench", target_domain="target")
