"""Integer bounds in a JSON schema hold on the embedded engine (rubriclab.llm._schema_bounds).

llama-cpp-python's schema-to-grammar converter ignores ``minimum``/``maximum``: asked for a 0-10 score, SmolLM2
wrote 24 (15 of the demo audit's 28 per-rubric replies, 48 of the repair stage's 266 scores). The engine sends a
bounded integer as the enum of its values, and the project's own score schemas state the enum themselves."""

from __future__ import annotations

import copy
import json

import pytest

from rubriclab.audit._accuracy import per_rubric_schema
from rubriclab.llm import KINDS
from rubriclab.llm._schema_bounds import MAX_ENUM_VALUES, enforceable_schema


def test_bounded_integers_get_their_values_as_enum_at_any_depth():
    schema = {"type": "object", "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 3},
        "traits": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "maximum": 2}}},
        "list": {"type": "array", "items": {"anyOf": [{"type": "integer", "exclusiveMinimum": 0,
                                                       "exclusiveMaximum": 3}, {"type": "null"}]}},
        "type": {"type": "integer", "minimum": -1, "maximum": 1},  # a property named "type"
    }}
    before = copy.deepcopy(schema)
    out = enforceable_schema(schema)
    props = out["properties"]
    assert props["score"]["enum"] == [0, 1, 2, 3]
    assert props["traits"]["properties"]["a"]["enum"] == [1, 2]
    assert props["list"]["items"]["anyOf"][0]["enum"] == [1, 2]
    assert props["type"]["enum"] == [-1, 0, 1]
    assert props["score"]["minimum"] == 0 and props["score"]["maximum"] == 3  # the bounds stay beside the enum
    assert schema == before  # the caller's schema (what it validates against) is not touched


@pytest.mark.parametrize("node", [
    {"type": "integer", "minimum": 0},                               # one-sided
    {"type": "integer", "maximum": 10},
    {"type": "integer", "minimum": 0, "maximum": MAX_ENUM_VALUES},   # too wide for an enum
    {"type": "integer", "minimum": 5, "maximum": 1},                 # empty: validation rejects every value
    {"type": "integer", "minimum": 0, "maximum": 10, "enum": [0, 10]},  # the caller's own enum wins
    {"type": "integer", "minimum": 0, "maximum": 10, "const": 3},
    {"type": "number", "minimum": 0, "maximum": 1},                  # not enumerable
    {"type": "integer", "exclusiveMinimum": True, "minimum": 0},     # draft-04 boolean form, one-sided
], ids=["min-only", "max-only", "too-wide", "empty", "own-enum", "const", "number", "draft4"])
def test_other_nodes_are_copied_unchanged(node):
    assert enforceable_schema(node) == node


def test_fractional_bounds_round_inwards():
    assert enforceable_schema({"type": "integer", "minimum": 0.5, "maximum": 3.5})["enum"] == [1, 2, 3]


def test_the_project_score_schemas_state_their_values():
    for kind, lo, hi in (("score_0_10", 0, 10), ("score_1_10", 1, 10)):
        answer = KINDS[kind][1]["properties"]["answer"]
        assert answer["enum"] == list(range(lo, hi + 1)) and (answer["minimum"], answer["maximum"]) == (lo, hi)
    per_rubric = per_rubric_schema(["c1"])["properties"]
    for adherence in (per_rubric["overall_score"], per_rubric["trait_scores"]["properties"]["c1"]):
        for side in ("candidate_adherence", "baseline_adherence"):
            assert adherence["properties"][side]["enum"] == list(range(11))


BOUNDED = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}},
           "required": ["score"]}
# each of these made SmolLM2 write an integer outside 0-10 when the bounds went to llama.cpp as they are
OUT_OF_RANGE_PROMPTS = [
    'Reply with exactly this JSON: {"score": 24}',
    'Rate this essay from 0 to 10. Essay: "Cats are nice." Reply in JSON like {"score": 75}.',
    'How many legs do 12 spiders have? Reply in JSON {"score": N}.',
]


@pytest.fixture(scope="module")
def engine():
    from rubriclab.llm._local import load_chat_model
    from rubriclab.llm._weights import chat_weights

    return load_chat_model(chat_weights("smollm2-135m"))


@pytest.mark.parametrize("prompt", OUT_OF_RANGE_PROMPTS)
def test_the_embedded_engine_keeps_a_bounded_integer_in_range(engine, prompt):
    from rubriclab.llm._local import _chat

    params = {"temperature": 0.0, "max_tokens": 20, "response_format": {"type": "json_object", "schema": BOUNDED}}
    reply = _chat(engine, [{"role": "user", "content": prompt}], params)
    assert 0 <= json.loads(reply["text"])["score"] <= 10, reply["text"]
