"""The embedded engine ends a greedy reply caught in a verbatim loop (rubriclab.llm._loops): the rule, the logits
processor, and the engine with and without it (the same reply up to the stop; a reply without a loop unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

from rubriclab.llm import _local
from rubriclab.llm._local import _chat, load_chat_model, loop_guard
from rubriclab.llm._loops import LOOP_RULE, REPETITION, LoopRule, LoopStop, looping_tail
from rubriclab.llm._weights import chat_weights


def test_a_tail_is_a_loop_once_the_block_repeats_enough_times_over_enough_tokens():
    block = [11, 12, 13, 14, 15, 16, 17, 18]  # 8 tokens: 8 copies make the 64-token span
    head = [1, 2, 3, 4, 5]
    assert looping_tail(head + block * 7) is None  # 56 tokens: not yet
    assert looping_tail(head + block * 8) == (8, 8)
    assert looping_tail(head + block * 11 + block[:3]) == (8, 11)  # a loop may stop mid-block: still the loop
    assert looping_tail(head + block * 11 + [99]) is None  # a token that breaks the loop: no loop at the tail
    assert looping_tail(head + block * 11) == (8, 11)  # repeats counted back to where the loop began
    long_block = list(range(100, 130))  # 30 tokens: the four copies are what count (120 >= 64)
    assert looping_tail(long_block * 3) is None
    assert looping_tail(long_block * 4) == (30, 4)
    assert looping_tail([7] * 63) is None and looping_tail([7] * 64) == (1, 64)
    assert looping_tail([9, 10] * 40) == (2, 40)  # the shortest period, not 4 or 8
    assert looping_tail(list(range(500))) is None


def test_the_rule_is_one_block_four_times_and_64_tokens():
    assert (LOOP_RULE.min_repeats, LOOP_RULE.min_span) == (4, 64)
    assert [LOOP_RULE.repeats_needed(p) for p in (1, 8, 16, 17, 100)] == [64, 8, 4, 4, 4]
    strict = LoopRule(min_repeats=6, min_span=64)
    assert looping_tail(list(range(100, 130)) * 5, strict) is None
    assert looping_tail(list(range(100, 130)) * 6, strict) == (30, 6)


def test_the_processor_passes_logits_through_until_the_reply_loops_then_allows_only_the_end():
    stop = LoopStop(eos_token=2)
    prompt = list(range(1000, 1040))
    reply = []
    scores = np.linspace(-5, 5, 50).astype(np.float32)
    for token in [21, 22, 23, 24] * 16:  # 64 tokens: the loop is complete after the last one
        out = stop(np.array(prompt + reply), scores.copy())
        assert stop.found is None and np.array_equal(out, scores)  # untouched while no loop
        reply.append(token)
    out = stop(np.array(prompt + reply), scores.copy())
    assert stop.found == (4, 16)
    assert np.isfinite(out).tolist() == [i == 2 for i in range(50)] and out[2] == scores[2]
    assert stop.prompt_len == len(prompt)  # the prompt itself is never searched for a loop


def test_the_guard_is_only_for_greedy_replies_without_a_grammar():
    class Engine:
        def token_eos(self):
            return 2

    assert isinstance(loop_guard(Engine(), {"temperature": 0.0, "max_tokens": 9}), LoopStop)
    assert loop_guard(Engine(), {"temperature": 0.7, "max_tokens": 9}) is None  # a sampled loop can break
    # inside a schema a repeated block is often the shape asked for (the extractor's JSON list of criteria)
    assert loop_guard(Engine(), {"temperature": 0.0, "max_tokens": 9, "response_format": {"type": "json_object"}}) is None


@pytest.fixture(scope="module")
def engine():
    return load_chat_model(chat_weights("smollm2-135m"))


LOOPING = [{"role": "user", "content": "Continue the pattern: A B A B A B A B A B A B"}]
PLAIN = [[{"role": "user", "content": "Name three fruits."}],
         [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]]


def test_the_engine_ends_a_looping_greedy_reply_where_the_loop_is_complete(engine, monkeypatch):
    params = {"temperature": 0.0, "max_tokens": 160}
    stopped = _chat(engine, LOOPING, params)
    assert stopped["finish_reason"] == REPETITION and stopped["loop"]["period"] == 2
    assert stopped["usage"]["completion_tokens"] < 100
    monkeypatch.setattr(_local, "loop_guard", lambda llm, kwargs: None)
    full = _chat(engine, LOOPING, params)
    assert full["finish_reason"] == "length" and full["usage"]["completion_tokens"] == 160
    # the guard only ends the reply: up to the stop it is the reply the engine gives without it
    assert full["text"].startswith(stopped["text"]) and len(full["text"]) > len(stopped["text"])


@pytest.mark.parametrize("messages", PLAIN, ids=["fruits", "capital"])
def test_a_reply_without_a_loop_is_the_same_with_the_guard(engine, monkeypatch, messages):
    params = {"temperature": 0.0, "max_tokens": 96}
    guarded = _chat(engine, messages, params)
    assert guarded["finish_reason"] == "stop" and "loop" not in guarded
    monkeypatch.setattr(_local, "loop_guard", lambda llm, kwargs: None)
    assert _chat(engine, messages, params) == guarded
