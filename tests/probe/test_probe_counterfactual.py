"""Judge labels and counterfactual perturbations (seed 004 §5, App. E) with scripted models."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from rubriclab.errors import ParseFailure
from rubriclab.llm import RoleSpec, load_prompt
from rubriclab.probe import generate_responses, judge_items, output_perturbation, reversal_parser, rubric_perturbation
from rubriclab.testing import scripted_model, scripted_provider

COLUMNS = ["item_id", "dataset", "record_id", "prompt", "criterion", "points", "tags", "response", "response_source"]


def make_items(n: int = 6, response: str | None = "A plain answer.", negative_every: int = 3,
               per_record: int = 1) -> pd.DataFrame:
    rows = []
    for i in range(n):
        rows.append({"item_id": f"it{i}", "dataset": "demo", "record_id": f"r{i // per_record}",
                     "prompt": f"user: question number {i // per_record}?", "criterion": f"Mentions fact {i} clearly",
                     "points": -5 if i % negative_every == negative_every - 1 else 5, "tags": ["axis:accuracy"],
                     "response": response, "response_source": "dataset" if response else None})
    return pd.DataFrame(rows, columns=COLUMNS)


def request_text(messages) -> str:
    """The original request (a parse re-ask appends an assistant turn and a new user turn)."""
    return next(str(m["content"]) for m in messages if m["role"] == "user")


last_user_text = request_text  # scripts answer the original request, re-asks included


def section(text: str, name: str) -> str:
    m = re.search(rf"{name}:\n(.*?)(?:\n\n|$)", text, re.S)
    assert m, f"no {name} section in {text!r}"
    return m.group(1)


def generator_script(messages, params):
    text = last_user_text(messages)
    if "clearly does NOT do" in text:
        return "VIOLATES: a reply that skips it."
    if "clearly does what" in text:
        return "SATISFIES: a reply that does it."
    return "GENERATED reply."


def role(name: str, script, **kw) -> RoleSpec:
    return RoleSpec(name=name, model=scripted_model(name, script), **kw)


def calls(spec: RoleSpec) -> int:
    return scripted_provider().calls[spec.model.split("/", 1)[1]]


def always_yes(messages, params):
    return "Yes"


def reads_response(messages, params):
    return "Yes" if "SATISFIES" in section(last_user_text(messages), "Response") else "No"


def reads_criterion(messages, params):
    return "No" if " not " in f" {section(last_user_text(messages), 'Rubric item')} " else "Yes"


def reverser(messages, params):
    crit = re.search(r'Original rubric item: <criterion>(.*)</criterion>', last_user_text(messages)).group(1)
    return f"Does not {crit[0].lower()}{crit[1:]}"


# -- templates ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["probe_generate", "probe_judge", "probe_satisfy", "probe_violate", "probe_reverse"])
def test_templates_load(name):
    tpl = load_prompt(name)
    assert tpl.user


# -- output perturbation ------------------------------------------------------------------------------------

def test_output_perturbation_judge_ignoring_response_never_flips(gateway):
    gen, judge = role("cf_gen_a", generator_script), role("cf_yes_a", always_yes)
    out = output_perturbation(make_items(6), gateway=gateway, generator=gen, judge=judge, n_resamples=200)
    assert out["n"] == 6 and out["n_sampled"] == 6
    assert out["rates"]["desired_flip_rate"]["estimate"] == 0.0
    assert out["rates"]["stickiness_rate"]["estimate"] == 1.0
    assert out["rates"]["wrong_direction_rate"]["estimate"] == 0.0
    assert out["rates"]["inconsistency"]["estimate"] == 1.0
    assert out["counts"]["sticky_satisfied"] == 6
    assert out["table"].loc[1, 1] == 6 and int(out["table"].to_numpy().sum()) == 6
    assert out["failures"] == {"generation": 0, "identical": 0, "judge": 0, "skipped": 0}
    assert calls(gen) == 12 and calls(judge) == 12


def test_output_perturbation_judge_reading_response_always_flips(gateway):
    gen, judge = role("cf_gen_b", generator_script), role("cf_read_b", reads_response)
    out = output_perturbation(make_items(6), gateway=gateway, generator=gen, judge=judge, n_resamples=200)
    rate = out["rates"]["desired_flip_rate"]
    assert rate["estimate"] == 1.0 and np.isnan(rate["low"]) and np.isnan(rate["high"])  # 6 records: no interval
    assert rate["reason"].startswith("no interval: 6 records, fewer than the 30")
    assert out["rates"]["inconsistency"]["estimate"] == 0.0
    assert out["counts"] == {"desired_flip": 6, "sticky_satisfied": 0, "sticky_violated": 0, "wrong_direction": 0}
    assert out["table"].loc[1, 0] == 6
    rows = out["rows"]
    assert (rows["transition"] == "desired_flip").all()
    assert rows["response_satisfying"].str.startswith("SATISFIES").all()
    # negative-points items go through unchanged: the label is "criterion met"
    assert (rows.loc[rows["points"] < 0, "label_satisfying"] == 1).all()


def test_output_perturbation_wrong_direction_and_ci(gateway):
    def backwards(messages, params):
        return "No" if "SATISFIES" in section(last_user_text(messages), "Response") else "Yes"

    def mixed(messages, params):  # desired for even facts, backwards for odd ones
        text = last_user_text(messages)
        odd = int(re.search(r"fact (\d+)", text).group(1)) % 2 == 1
        sat = "SATISFIES" in section(text, "Response")
        return "Yes" if sat != odd else "No"

    gen = role("cf_gen_c", generator_script)
    out = output_perturbation(make_items(4), gateway=gateway, generator=gen, judge=role("cf_back", backwards),
                              n_resamples=200)
    assert out["rates"]["wrong_direction_rate"]["estimate"] == 1.0
    assert out["table"].loc[0, 1] == 4
    out = output_perturbation(make_items(40), gateway=gateway, generator=gen, judge=role("cf_mixed", mixed),
                              n_resamples=500)
    r = out["rates"]["desired_flip_rate"]
    assert r["estimate"] == 0.5 and r["low"] < 0.5 < r["high"]
    inc = out["rates"]["inconsistency"]
    assert inc["estimate"] == pytest.approx(1 - r["estimate"])


def test_output_perturbation_sampling_is_seeded(gateway):
    gen, judge = role("cf_gen_d", generator_script), role("cf_yes_d", always_yes)
    items = make_items(10)
    a = output_perturbation(items, gateway=gateway, generator=gen, judge=judge, n_items=4, seed=3, n_resamples=50)
    b = output_perturbation(items, gateway=gateway, generator=gen, judge=judge, n_items=4, seed=3, n_resamples=50)
    c = output_perturbation(items, gateway=gateway, generator=gen, judge=judge, n_items=4, seed=4, n_resamples=50)
    assert list(a["rows"]["item_id"]) == list(b["rows"]["item_id"]) and a["n_sampled"] == 4
    assert list(a["rows"]["item_id"]) != list(c["rows"]["item_id"])


def test_output_perturbation_counts_failures_not_scores(gateway):
    def flaky_gen(messages, params):
        text = last_user_text(messages)
        if "fact 1 " in text and "clearly does NOT do" in text:
            return ""  # empty response: a parse failure after re-asks
        return generator_script(messages, params)

    def flaky_judge(messages, params):
        text = last_user_text(messages)
        if "fact 2 " in text:
            return "Maybe, hard to say."
        return reads_response(messages, params)

    out = output_perturbation(make_items(6), gateway=gateway, generator=role("cf_gen_e", flaky_gen),
                              judge=role("cf_judge_e", flaky_judge), n_resamples=100)
    assert out["failures"] == {"generation": 1, "identical": 0, "judge": 1, "skipped": 0}
    assert out["n"] == 4
    assert out["rates"]["desired_flip_rate"]["estimate"] == 1.0
    rows = out["rows"].set_index("item_id")
    assert rows.loc["it1", "status"] == "generation_failed" and rows.loc["it1", "transition"] is None
    assert rows.loc["it2", "status"] == "judge_failed" and math.isnan(rows.loc["it2", "label_satisfying"])
    assert int(out["table"].to_numpy().sum()) == 4


def test_one_rubric_item_per_conversation_seeded_and_rates_resample_records(gateway):
    gen, judge = role("cf_gen_one", generator_script), role("cf_read_one", reads_response)
    items = make_items(12, per_record=3)  # 4 conversations, 3 items each
    a = output_perturbation(items, gateway=gateway, generator=gen, judge=judge, seed=1, n_resamples=50)
    b = output_perturbation(items, gateway=gateway, generator=gen, judge=judge, seed=2, n_resamples=50)
    assert a["n_sampled"] == 4 and a["rows"]["record_id"].is_unique  # the paper: one rubric per conversation
    assert set(a["rows"]["record_id"]) == {"r0", "r1", "r2", "r3"}
    assert list(a["rows"]["item_id"]) != list(b["rows"]["item_id"])  # which item: drawn with the seed
    some = output_perturbation(items, gateway=gateway, generator=gen, judge=judge, n_items=2, seed=1, n_resamples=50)
    assert some["n_sampled"] == 2 and some["rows"]["record_id"].is_unique
    rate = a["rates"]["desired_flip_rate"]
    assert rate["n_records"] == 4 and rate["ci"]["unit"] == "records" and rate["ci"]["level"] == 0.95
    rub = rubric_perturbation(items, gateway=gateway, rewriter=role("cf_rev_one", reverser),
                              judge=role("cf_crit_one", reads_criterion), seed=1, n_resamples=50)
    assert rub["n_sampled"] == 4 and rub["rows"]["record_id"].is_unique
    assert rub["rates"]["desired_flip_rate"]["ci"]["unit"] == "records"


def test_identical_satisfying_and_violating_responses_are_rejected_and_counted(gateway):
    def lazy_gen(messages, params):  # the same text for both requests on fact 1 (case and a period differ)
        text = last_user_text(messages)
        if "fact 1 " in text:
            return "Here is THE answer." if "clearly does NOT do" in text else "here is the answer"
        return generator_script(messages, params)

    judge = role("cf_read_same", reads_response)
    out = output_perturbation(make_items(4), gateway=gateway, generator=role("cf_gen_same", lazy_gen), judge=judge,
                              n_resamples=50)
    assert out["failures"] == {"generation": 0, "identical": 1, "judge": 0, "skipped": 0}
    rows = out["rows"].set_index("item_id")
    assert rows.loc["it1", "status"] == "identical_responses" and rows.loc["it1", "transition"] is None
    assert out["n"] == 3 and out["rates"]["desired_flip_rate"]["estimate"] == 1.0
    assert calls(judge) == 2 * 3  # the identical pair is not judged


# -- rubric perturbation ------------------------------------------------------------------------------------

def test_rubric_perturbation_judge_reading_criterion_flips(gateway):
    rw, judge = role("cf_rev_a", reverser), role("cf_crit_a", reads_criterion)
    out = rubric_perturbation(make_items(6), gateway=gateway, rewriter=rw, judge=judge, n_resamples=200)
    assert out["n"] == 6
    assert out["rates"]["desired_flip_rate"]["estimate"] == 1.0
    assert out["rates"]["inconsistency"]["estimate"] == 0.0
    assert out["rates"]["wrong_direction_rate"] is None
    assert any("wrong_direction" in note for note in out["notes"])
    assert out["counts"]["flip_1_to_0"] == 6 and out["table"].loc[1, 0] == 6
    assert out["rows"]["criterion_reversed"].str.startswith("Does not").all()
    assert calls(rw) == 6 and calls(judge) == 12


def test_rubric_perturbation_judge_ignoring_criterion_is_sticky(gateway):
    out = rubric_perturbation(make_items(6), gateway=gateway, rewriter=role("cf_rev_b", reverser),
                              judge=role("cf_yes_b", always_yes), n_resamples=200)
    assert out["rates"]["desired_flip_rate"]["estimate"] == 0.0
    assert out["rates"]["stickiness_rate"]["estimate"] == 1.0
    assert out["rates"]["inconsistency"]["estimate"] == 1.0
    assert out["counts"]["sticky_satisfied"] == 6


def test_rubric_perturbation_failures_counted(gateway):
    def bad_rewriter(messages, params):
        crit = re.search(r'Original rubric item: <criterion>(.*)</criterion>', last_user_text(messages)).group(1)
        if "fact 0 " in crit + " ":
            return f'"{crit}."'  # repeats the original
        if "fact 1 " in crit + " ":
            return "Does not mention it.\n\nAlternatively: omits it."  # two paragraphs
        return reverser(messages, params)

    def flaky_judge(messages, params):
        if "fact 2" in last_user_text(messages) and "not" in section(last_user_text(messages), "Rubric item"):
            return "I cannot decide."
        return reads_criterion(messages, params)

    items = make_items(6)
    items.loc[5, "response"] = None  # no response: not sampled, counted
    rw = role("cf_rev_c", bad_rewriter)
    out = rubric_perturbation(items, gateway=gateway, rewriter=rw, judge=role("cf_judge_c", flaky_judge),
                              n_resamples=100)
    assert out["failures"] == {"rewrite": 2, "judge": 1, "no_response": 1}
    assert out["n_sampled"] == 5 and out["n"] == 2
    assert out["rates"]["desired_flip_rate"]["estimate"] == 1.0
    assert calls(rw) == 2 * 3 + 3  # two failing items asked 1 + 2 re-asks each


def test_reversal_parser():
    parse = reversal_parser("Mentions the dose")
    assert parse(' "Does not mention the dose." ') == "Does not mention the dose."
    assert parse("Does not\nmention the dose") == "Does not mention the dose"
    for bad in ["", "   ", "mentions the dose.", "A.\n\nB."]:
        with pytest.raises(ParseFailure):
            parse(bad)


def test_pairwise_rubric_set_as_items(gateway):
    # criteria of a pairwise audit rubric set laid out as items over preference pairs' responses
    rows = [{"item_id": f"{cid}|{pid}|{side}", "dataset": "pairs", "record_id": pid,
             "prompt": f"Explain topic {pid}", "criterion": text, "points": 1, "tags": [],
             "response": f"answer {side} to {pid}", "response_source": "pair"}
            for cid, text in [("c1", "Is concise"), ("c2", "Cites a source")]
            for pid in ("p1", "p2") for side in ("a", "b")]
    items = pd.DataFrame(rows, columns=COLUMNS)
    out = rubric_perturbation(items, gateway=gateway, rewriter=role("cf_rev_p", reverser),
                              judge=role("cf_crit_p", reads_criterion), n_items=5, seed=1, n_resamples=100)
    # one item per pair (both sides of a pair answer one prompt: one conversation)
    assert out["n"] == 2 and out["rows"]["record_id"].is_unique and out["rates"]["desired_flip_rate"]["estimate"] == 1.0
    out = output_perturbation(items, gateway=gateway, generator=role("cf_gen_p", generator_script),
                              judge=role("cf_read_p", reads_response), n_resamples=100)
    assert out["n"] == 2 and out["rates"]["desired_flip_rate"]["estimate"] == 1.0


# -- labels and generation ----------------------------------------------------------------------------------

def test_generate_responses_fills_only_missing(gateway):
    items = make_items(6, per_record=2)
    items.loc[[0, 1, 3], "response"] = [None, np.nan, "  "]  # record r0 fully missing, r1 half
    items.loc[[0, 1, 3], "response_source"] = None
    gen = role("cf_gen_f", generator_script)
    out = generate_responses(items, gateway=gateway, generator=gen)
    assert calls(gen) == 2  # one per record with a missing item (r0, r1)
    assert out.attrs["generation_failures"] == 0 and out.attrs["generated"] == 2
    assert list(out.loc[[0, 1, 3], "response"]) == ["GENERATED reply."] * 3
    assert (out.loc[[0, 1, 3], "response_source"] == f"generator:{gen.model}").all()
    assert out.loc[2, "response"] == "A plain answer." and out.loc[2, "response_source"] == "dataset"
    assert items.loc[3, "response"] == "  " and "generated" not in items.attrs  # input untouched


def test_generate_responses_failure_keeps_none(gateway):
    items = make_items(4, response=None, per_record=2)
    gen = role("cf_gen_g", lambda m, p: "" if "number 1" in last_user_text(m) else "GENERATED reply.")
    out = generate_responses(items, gateway=gateway, generator=gen)
    assert out.attrs["generation_failures"] == 1
    assert out.loc[2, "response"] is None and out.loc[3, "response"] is None
    assert out.loc[0, "response"] == "GENERATED reply."


def test_judge_items_labels_failures_and_cache(gateway, store):
    items = make_items(4, response="SATISFIES it")
    items.loc[1, "response"] = "nothing"
    items.loc[2, "response"] = None

    def judge_script(messages, params):
        if "fact 3" in last_user_text(messages):
            return "Perhaps"
        return reads_response(messages, params)

    judge = role("cf_judge_h", judge_script)
    out = judge_items(items, gateway=gateway, judge=judge)
    assert list(out["label_status"]) == ["ok", "ok", "failed", "failed"]
    assert out.loc[0, "label"] == 1.0 and out.loc[1, "label"] == 0.0
    assert math.isnan(out.loc[2, "label"]) and out.loc[2, "label_error"] == "no response"
    assert math.isnan(out.loc[3, "label"]) and out.loc[3, "label_error"]
    made = calls(judge)
    assert made == 2 + 3  # the unparseable item is asked 1 + 2 re-asks
    again = judge_items(items, gateway=gateway, judge=judge)
    assert calls(judge) == made  # the call store answers a re-run
    pd.testing.assert_frame_equal(out, again)


def test_judge_items_structured_and_majority(gateway):
    seen = {}

    def json_judge(messages, params):
        seen["rf"] = params.get("response_format")
        return '{"answer": "yes"}'

    out = judge_items(make_items(2), gateway=gateway, judge=role("cf_json", json_judge, structured=True))
    assert (out["label"] == 1.0).all() and seen["rf"]["type"] == "json_object"

    counter = {"n": 0}

    def noisy(messages, params):
        counter["n"] += 1
        return "Yes" if counter["n"] % 3 else "No"  # 2 of every 3 draws say yes

    judge = role("cf_noisy", noisy, temperature=0.7)
    out = judge_items(make_items(1), gateway=gateway, judge=judge, samples=3)
    assert calls(judge) == 3 and out.loc[0, "label"] == 1.0
