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
    assert parse_pass_fail("Reason... PASS") is True
    assert parse_pass_fail("fail") is False
    with pytest.raises(ParseFailure):
        parse_pass_fail("PASS or FAIL")
    assert parse_yes_no("Yes, it does.") is True
    assert parse_yes_no("  no") is False
    with pytest.raises(ParseFailure):
        parse_yes_no("Probably yes")


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
    assert fmt["parser"]('{"answer": 7}') == 7.0
    for bad in ('{"answer": 11}', '{"answer": -1}', '{"answer": "7"}', '{"score": 7}', "7"):
        with pytest.raises(ParseFailure):
            fmt["parser"](bad)
    text = answer_format(RoleSpec(name="judge", model="openai/gpt-4o-mini"), "score_0_10")
    assert "response_format" not in text and text["parser"]("REASONING: x\nSCORE: 4") == 4.0
    ab = answer_format(RoleSpec(name="judge", model="local/x"), "ab")["parser"]
    assert ab('{"answer": "B"}') == "B"
    with pytest.raises(ParseFailure):
        ab('{"answer": "C"}')
