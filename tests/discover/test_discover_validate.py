"""The criterion validation rules shared by extraction, the task-derived source and the describe step."""

from __future__ import annotations

import pytest

from rubriclab.discover import REASONS, check_criterion, check_reply, echo_of
from rubriclab.discover._validate import (
    IDENTICAL_MIN_PAIRS,
    count_reasons,
    format_counts,
    merge_counts,
    norm,
    rejection_problem,
    repeated_texts,
)
from rubriclab.llm import load_prompt, parse_prompt

EXTRACT = echo_of(load_prompt("discover_extract"))
DESCRIBE = echo_of(load_prompt("discover_describe"))
TASK = echo_of(load_prompt("task_criteria"))
GOOD = "Rewards answers whose stated facts are correct and checkable."


def test_echo_holds_the_templates_examples_and_fields_not_the_placeholder_values():
    assert {"criterion name", "what responses should achieve for this criterion"} <= EXTRACT.examples
    assert {"name", "description", "model a score", "model b score", "criteria", "winner"} <= EXTRACT.fields
    assert "concise snake case name" in DESCRIBE.examples and "rubric id" in DESCRIBE.fields
    assert "concise snake case name" in TASK.examples
    assert "{prompt}" not in EXTRACT.text and " user prompt " in EXTRACT.text


def test_norm_ignores_case_punctuation_underscores_and_numbering():
    assert norm("Criterion_Name 2") == norm("criterion name") == norm("CRITERION-NAME1") == "criterion name"


@pytest.mark.parametrize("name,description,reason", [
    ("criterion_name", "what responses should achieve for this criterion", "example_copy"),
    ("Criterion Name 2", GOOD, "example_copy"),
    ("Accuracy", "What responses should achieve for this criterion: accuracy.", "example_copy"),
    ("name", GOOD, "field_name"),
    ("Accuracy", "description", "field_name"),
    ("model_a_score", GOOD, "field_name"),
    ("Response A", GOOD, "field_name"),
    ("Score each response", GOOD, "instruction_copy"),
    ("Accuracy", "Frame rubrics as general standards, not specific to these responses", "instruction_copy"),
    ("Accuracy", "Checks the key evaluation rubrics where these responses meaningfully differ for a user.",
     "instruction_copy"),
    ("A", GOOD, "single_token"),
    ("B", GOOD, "single_token"),
    ("Q1", GOOD, "single_token"),
    ("?!", GOOD, "single_token"),
    ("Accuracy", "Great!", "single_token"),
    ("Accuracy", "Great question!", "too_few_words"),
    ("Accuracy", "Correct facts only.", "too_few_words"),
    ("", GOOD, "malformed"),
    ("Accuracy", GOOD, None),  # a one-word name is legitimate
    ("Tone", "Uses a tone suited to the user.", None),
    ("Uses concrete examples", "Illustrates each claim with a concrete example.", None),
])
def test_check_criterion_extraction_rules(name, description, reason):
    assert check_criterion(name, description, EXTRACT, min_words=4) == reason
    assert reason is None or reason in REASONS


def test_describe_and_task_prompts_reject_their_own_example():
    long = "Detailed description (at least 20 words) that can serve as an evaluation rubric"
    assert check_criterion("concise_snake_case_name", GOOD, DESCRIBE, 5) == "example_copy"
    assert check_criterion("factual_accuracy", long, DESCRIBE, 5) == "example_copy"
    assert check_criterion("rubric_id", GOOD, DESCRIBE, 5) == "field_name"
    assert check_criterion("factual_accuracy", GOOD, DESCRIBE, 20) == "too_few_words"
    assert check_criterion("concise_snake_case_name", GOOD, TASK, 5) == "example_copy"
    assert check_criterion("Accuracy", "what a good response does on this criterion (at least 20 words)", TASK,
                           5) == "example_copy"
    assert check_criterion("Accuracy", GOOD, TASK, 5) is None


def test_examples_come_from_the_template_in_use_not_a_fixed_list():
    tpl = parse_prompt("custom", 'Rate {thing}.\nFORMAT: {{"label": "quality_label", "why": "one sentence"}}', "x")
    echo = echo_of(tpl)
    assert check_criterion("Quality label", GOOD, echo, 4) == "example_copy"
    assert check_criterion("label", GOOD, echo, 4) == "field_name"
    assert check_criterion("thing", GOOD, echo, 4) == "field_name"  # a placeholder's name
    assert check_criterion("criterion_name", GOOD, echo, 4) is None  # not this prompt's example


def test_check_reply_marks_duplicates_within_one_reply_and_malformed_items():
    items = [("Accuracy", GOOD), ("accuracy!", "Another description of the same name."),
             ("Clarity", GOOD), None, ("A", "x"), ("Clarity of steps", "Explains each step in plain words.")]
    assert check_reply(items, EXTRACT, 4) == [None, "duplicate_in_reply", "duplicate_in_reply", "malformed",
                                              "single_token", None]


def test_a_rejected_item_does_not_make_a_later_good_one_a_duplicate():
    assert check_reply([("name", GOOD), ("Accuracy", GOOD)], EXTRACT, 4) == ["field_name", None]


def test_repeated_texts_needs_more_than_the_share_and_several_distinct_pairs():
    rows = [(f"p{i}", "Clarity", "The response is clear and easy to follow.") for i in range(6)]
    rows.append(("p0", "Clarity", "The response is clear and easy to follow."))  # same pair twice counts once
    rows += [(f"p{i}", "Accuracy", GOOD) for i in range(5)]
    key = (norm("Clarity"), norm("The response is clear and easy to follow."))
    assert repeated_texts(rows, replies=10, limit=0.5) == {key}  # 6 of 10 > 0.5; Accuracy 5 of 10 is not
    assert repeated_texts(rows, replies=10, limit=1.0) == set()  # 1.0 turns the rule off
    two = [("p0", "Clarity", "x y z w"), ("p1", "Clarity", "x y z w")]
    assert IDENTICAL_MIN_PAIRS == 3 and repeated_texts(two, replies=2, limit=0.5) == set()


def test_counts_are_ordered_and_summable():
    assert list(count_reasons(["single_token", None, "example_copy", "single_token"])) == ["example_copy",
                                                                                          "single_token"]
    assert merge_counts([{"example_copy": 2}, {"example_copy": 1, "field_name": 4}]) == {"example_copy": 3,
                                                                                         "field_name": 4}
    assert format_counts({"single_token": 2, "example_copy": 10}) == "example_copy: 10, single_token: 2"


def test_rejection_problem_tells_the_model_what_was_wrong():
    items = [("criterion_name", "what responses should achieve"), ("A", "Great question!"), ("Accuracy", GOOD)]
    reasons = check_reply(items, EXTRACT, 4)
    text = rejection_problem(items, reasons, need=3)
    assert "only 1 of 3 criteria usable, at least 3 needed" in text
    assert "example_copy" in text and "single_token" in text and "'criterion_name'" in text
