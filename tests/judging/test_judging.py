"""Pairwise judging shared by audit, drift and align: RIPD's rubric format, one request builder for judge
templates and criteria lists, and agreement that counts ties and failures instead of hiding them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rubriclab.errors import InputError
from rubriclab.judging import PairwiseRubric, agreement, describe_agreement, judge_pairs, load_pairwise_rubric
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import Criterion, JudgeTemplate, RubricSet, load_ripd, read_ripd_lines, write_ripd
from rubriclab.stats import two_sample_bootstrap
from rubriclab.testing import drift_pairs, scripted_model, scripted_provider

TPL = ("Judge the two answers to {question}.\nA: {answer_a}\nB: {answer_b}\n"
       "Answer [[A]] if A is better, [[B]] if B is better.")


def _ripd(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_ripd_file_reads_the_last_line_by_default_and_any_line_by_id(tmp_path):
    path = _ripd(tmp_path / "rubrics.jsonl", [
        {"prompt_id": "seed", "prompt": TPL},
        {"prompt_id": "c1", "parent_prompt_id": "seed", "gen_step": 1, "prompt": TPL + " Be strict."},
        {"prompt_id": "c2", "parent_prompt_id": "c1", "gen_step": 2, "prompt": TPL + " Be lenient."}])
    assert load_ripd(path).text.endswith("Be lenient.")
    assert load_ripd(path, "seed").text == TPL
    r = load_pairwise_rubric(path, "c1")
    assert r.kind == "template" and r.name == "rubrics:c1" and r.text.endswith("Be strict.")
    with pytest.raises(InputError, match=r"no line with prompt_id 'c9'.*one of seed, c1, c2"):
        load_ripd(path, "c9")


@pytest.mark.parametrize("rows, message", [
    ([{"prompt_id": "a", "prompt": TPL}, {"prompt_id": "a", "prompt": TPL}], r"rubrics.jsonl:2: field 'prompt_id': duplicate"),
    ([{"prompt_id": "a"}], r"rubrics.jsonl:1: field 'prompt': missing 'prompt'"),
    ([{"prompt_id": "a", "prompt": TPL.replace("{answer_b}", "B")}], r"rubrics.jsonl:1.*lacks placeholder \{answer_b\}"),
    ([{"prompt_id": "a", "prompt": TPL.replace("[[A]]", "A")}], r"verdict format"),
])
def test_a_bad_ripd_line_names_the_file_line_and_field(tmp_path, rows, message):
    path = _ripd(tmp_path / "rubrics.jsonl", rows)
    with pytest.raises(InputError, match=message):
        read_ripd_lines(path)


def test_ripd_round_trip_keeps_ripd_keys_first_and_our_numbers(tmp_path):
    path = write_ripd([{"prompt_id": "seed", "prompt": TPL, "val_bench": 0.5},
                       {"val_target": 0.25, "prompt": TPL + " X", "prompt_id": "c1", "parent_prompt_id": "seed",
                        "gen_step": 1}], tmp_path / "out.jsonl")
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert list(second)[:4] == ["prompt_id", "parent_prompt_id", "gen_step", "prompt"]
    assert second["val_target"] == 0.25 and first["val_bench"] == 0.5
    assert [r["prompt_id"] for r in read_ripd_lines(path)] == ["seed", "c1"]


def _judge(name, reply_for):
    return RoleSpec(name="judge", model=scripted_model(name, lambda m, p: reply_for(m[-1]["content"])),
                    concurrency=4, parse_retries=0)


def test_template_and_criteria_list_share_one_request_builder(gateway):
    seen = []

    def reply(text):
        seen.append(text)
        return "[[A]]" if text.find("REF_CHOSEN") < text.find("REF_REJECTED") else "[[B]]"

    judge = _judge("judging-both", reply)
    crit = RubricSet(name="crit", criteria=(Criterion(id="helpful", description="Answers the question well."),))
    rows = judge_pairs({"tpl": JudgeTemplate(name="t", text=TPL), "crit": crit}, drift_pairs(4, "bench"),
                       gateway=gateway, judge=judge, seed=3)
    assert (rows["status"] == "agree").all() and len(rows) == 8
    assert sum("Judge the two answers" in t for t in seen) == 4  # the template, rendered as written
    assert sum("Answers the question well." in t and "## Response A" in t for t in seen) == 4  # judge_direct
    # both rubrics saw each pair in the same (seeded) order
    assert rows.groupby("pair_id")["swapped"].nunique().max() == 1


def test_agreement_counts_ties_and_failures_separately(gateway):
    replies = iter(["[[A]]", "[[B]]",                  # pair 0: a tie (one vote each)
                    "no idea", "still no idea",         # pair 1: no verdict at all
                    '"[[A]]" if A is better', "[[A]]",   # pair 2: the restated format is not a vote
                    "[[B]]", "[[B]]"])                   # pair 3
    judge = RoleSpec(name="judge", model=scripted_model("judging-ties", lambda m, p: next(replies)),
                     temperature=0.7, concurrency=1, parse_retries=0)
    pairs = drift_pairs(4, "bench")
    rows = judge_pairs([PairwiseRubric.of(JudgeTemplate(name="t", text=TPL))], pairs, gateway=gateway, judge=judge,
                       seed=3, samples=2)
    by = rows.set_index("pair_id")
    assert by.loc[pairs[0].id, "status"] == "tie" and by.loc[pairs[1].id, "status"] == "failed"
    assert by.loc[pairs[2].id, "votes"] == "-A" and by.loc[pairs[1].id, "n_failed_samples"] == 2
    m = agreement(rows, tie_credit=0.0, n_boot=200)
    assert m["n_total"] == 4 and m["n"] == 3 and m["n_failed"] == 1 and m["n_tie"] == 1
    assert m["ci"]["unit"] == "pair" and m["ci"]["level"] == 0.95
    half = agreement(rows, tie_credit=0.5, n_boot=200)
    assert half["agreement"] == pytest.approx(m["agreement"] + 0.5 / 3)
    text = describe_agreement(m)
    assert "n=3" in text and "1 tie at 0" in text and "1 failed" in text
    assert scripted_provider().calls["judging-ties"] == 8  # two distinct draws per pair, none shared


def test_two_sample_bootstrap_resamples_each_side_separately():
    a, b = np.r_[np.ones(30), np.zeros(10)], np.r_[np.ones(10), np.zeros(30)]
    res = two_sample_bootstrap(a, b, n_resamples=2000, seed=1)
    assert res["diff"] == pytest.approx(0.5) and res["n_a"] == 40 and res["n_b"] == 40
    se = np.sqrt(0.75 * 0.25 / 40 + 0.25 * 0.75 / 40)  # independent samples: variances add
    assert res["se"] == pytest.approx(se, rel=0.15) and res["low"] < 0.5 < res["high"]
    assert two_sample_bootstrap([], b)["degenerate"] == "no items in a"
