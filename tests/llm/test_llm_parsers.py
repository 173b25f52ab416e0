from __future__ import annotations

import pytest
from pydantic import BaseModel

from rubriclab.errors import ParseFailure
from rubriclab.llm import extract_json, json_parser, parse_pass_fail, parse_verdict, parse_yes_no, score_parser


@pytest.mark.parametrize("text,expected", [
    ("Assistant B is more accurate. [[B]]", "B"),
    ("[[ A ]]", "A"),
    ("<verdict>A</verdict>", "A"),
    ("<VERDICT> b </VERDICT>", "B"),
    ('Output "[[A]]" if A is better, "[[B]]" if B is better. My verdict: [[A]]', "A"),
])
def test_verdicts(text, expected):
    assert parse_verdict(text) == expected


@pytest.mark.parametrize("text", ["A is better", "Answer: A", "[A]", "[[A]] or maybe [[B]]", ""])
def test_verdict_never_coerced(text):
    with pytest.raises(ParseFailure):
        parse_verdict(text)


def test_score_parser_range_and_last_wins():
    parse = score_parser(1, 10)
    assert parse("reasoning... SCORE: 3\nrevised SCORE: 7") == 7
    with pytest.raises(ParseFailure, match="outside"):
        parse("SCORE: 11")
    with pytest.raises(ParseFailure, match="no 'SCORE"):
        parse("I would give it a seven")


def test_pass_fail_and_yes_no():
    assert parse_pass_fail("Reasoning: the rubric is atomic.\nPASS") is True
    assert parse_pass_fail("**FAIL**") is False
    assert parse_pass_fail("fail.") is False
    with pytest.raises(ParseFailure):
        parse_pass_fail("PASS or FAIL")
    assert parse_yes_no("Yes, it does.") is True
    assert parse_yes_no("  no") is False
    with pytest.raises(ParseFailure):
        parse_yes_no("Probably yes")


# -- a reply becomes a verdict only when it states one --------------------------------------------------

CUT_OFF = 'Output "[[A]]" if A is better, "[[B]]" if B is better. Looking at'


@pytest.mark.parametrize("text", [
    CUT_OFF,  # cut off after restating the format: the last marker is not a verdict
    "You MUST output [[A]] or [[B]].",
    "Answer with <verdict>A</verdict> if A is better",
    "[[A]]/[[B]]",
])
def test_a_restated_format_is_not_a_verdict(text):
    with pytest.raises(ParseFailure, match="restates the answer format"):
        parse_verdict(text)


@pytest.mark.parametrize("text", [
    "Reasoning: the rubric could pass over edge cases, so it is weak.",  # 'pass' inside reasoning
    "REASONING: I would not FAIL it outright, but it is vague.",
    "VERDICT: PASS or FAIL",  # the format restated
    "REASONING: fine\nVERDICT: PASS\nVERDICT: FAIL",
])
def test_no_pass_fail_verdict_is_read_out_of_free_reasoning(text):
    from rubriclab.llm import parse_verdict_line

    with pytest.raises(ParseFailure):
        parse_verdict_line(text)


def test_pass_fail_verdict_lines_that_state_one():
    from rubriclab.llm import parse_verdict_line

    assert parse_verdict_line("REASONING: could pass over details.\nVERDICT: FAIL") is False
    assert parse_verdict_line("REASONING: ...\nVERDICT: **PASS**") is True
    assert parse_verdict_line("PASS") is True


@pytest.mark.parametrize("text", ["Yes or no: it depends.", "yes/no"])
def test_yes_or_no_restated_is_not_an_answer(text):
    with pytest.raises(ParseFailure, match="restates"):
        parse_yes_no(text)


def test_scores_are_integers_and_a_restated_range_is_not_a_score():
    parse = score_parser(0, 10)
    assert parse("REASONING: x\nSCORE: 7") == 7 and isinstance(parse("SCORE: 7"), int)
    assert parse("SCORE: 7.0") == 7
    with pytest.raises(ParseFailure, match="not an integer"):
        parse("REASONING: between the two.\nSCORE: 7.5")
    with pytest.raises(ParseFailure, match="no 'SCORE"):
        parse("Give SCORE: 0-10 after reasoning")
    with pytest.raises(ParseFailure, match="no 'SCORE"):
        parse("SCORE: 0 to 10")


def test_schema_scores_follow_the_same_integer_rule():
    from rubriclab.llm import RoleSpec, answer_format

    parse = answer_format(RoleSpec(name="judge", model="local/x"), "score_1_10")["parser"]
    assert parse('{"answer": 7.0}') == 7
    with pytest.raises(ParseFailure, match="not an integer"):
        parse('{"answer": 7.5}')


class Item(BaseModel):
    name: str
    score: int


def test_json_validated_against_schema():
    parse = json_parser(Item)
    assert parse('```json\n{"name": "x", "score": 3}\n```') == Item(name="x", score=3)
    with pytest.raises(ParseFailure, match="score"):
        parse('{"name": "x", "score": "high"}')
    with pytest.raises(ParseFailure, match="not JSON"):
        parse('{"name": "x", "score": 3')  # truncated
    assert extract_json("[1, 2]") == [1, 2]


def test_schema_answers_are_range_checked_not_trusted():
    from rubriclab.llm import RoleSpec, answer_format

    fmt = answer_format(RoleSpec(name="judge", model="local/smollm2-135m", max_tokens=300), "score_0_10")
    assert fmt["role"].max_tokens == 16 and fmt["response_format"]["schema"]["properties"]["answer"]["maximum"] == 10
    assert fmt["parser"]('{"answer": 7}') == 7
    for bad in ('{"answer": 11}', '{"answer": -1}', '{"answer": "7"}', '{"score": 7}', "7"):
        with pytest.raises(ParseFailure):
            fmt["parser"](bad)
    text = answer_format(RoleSpec(name="judge", model="openai/gpt-4o-mini"), "score_0_10")
    assert "response_format" not in text and text["parser"]("REASONING: x\nSCORE: 4") == 4.0
    ab = answer_format(RoleSpec(name="judge", model="local/x"), "ab")["parser"]
    assert ab('{"answer": "B"}') == "B"
    with pytest.raises(ParseFailure):
        ab('{"answer": "C"}')
