"""Grammar-constrained decoding on the embedded engine with the grammar checked on the sampled token first
(rubriclab.llm._sampling): the same replies as grammar-first decoding at T=0, always inside the grammar."""

from __future__ import annotations

import json

import pytest

from rubriclab.llm._local import N_CTX, _chat, guard_prefix_reuse, load_chat_model, local_threads
from rubriclab.llm._sampling import GrammarLastSampler
from rubriclab.llm._weights import chat_weights

VERDICT = {"type": "object", "properties": {"reasoning": {"type": "string", "maxLength": 120},
                                            "verdict": {"type": "string", "enum": ["A", "B"]}},
           "required": ["reasoning", "verdict"]}
SCORE = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}},
         "required": ["score"]}
PROMPTS = [
    "Which answer is better for 'How do I boil an egg?'\nA: Put it in boiling water for 9 minutes.\n"
    "B: Eggs are laid by hens.\nReply in JSON with reasoning and verdict.",
    "Rate from 1 to 10 how polite this reply is: 'Go away.' Reply in JSON.",
    "Write a haiku about autumn.",  # the schema forces JSON the model did not intend: rejections on the way
]


@pytest.fixture(scope="module")
def engines():
    from llama_cpp import Llama

    path = chat_weights("smollm2-135m")
    first = guard_prefix_reuse(Llama(model_path=str(path), n_ctx=N_CTX, n_threads=local_threads(), verbose=False,
                                     seed=0))  # llama-cpp-python's own chain: the grammar before top-k
    return first, load_chat_model(path)


def _params(schema: dict, temperature: float, seed: int = 0, max_tokens: int = 64) -> dict:
    return {"temperature": temperature, "seed": seed, "max_tokens": max_tokens,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}


def _samplers(llm, monkeypatch) -> list[GrammarLastSampler]:
    made: list[GrammarLastSampler] = []
    original = GrammarLastSampler.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(GrammarLastSampler, "__init__", record)
    return made


@pytest.mark.parametrize("schema", [VERDICT, SCORE], ids=["verdict", "score"])
def test_t0_replies_equal_grammar_first_decoding(engines, schema, monkeypatch):
    first, last = engines
    made = _samplers(last, monkeypatch)
    for prompt in PROMPTS:
        msgs = [{"role": "user", "content": prompt}]
        want = _chat(first, msgs, _params(schema, 0.0))
        got = _chat(last, msgs, _params(schema, 0.0))
        assert got["text"] == want["text"], prompt
    assert len(made) == len(PROMPTS)  # the grammar-last sampler made these replies, not the library's chain
    assert sum(m.rejected for m in made) > 0  # and its redraw path ran: the argmax was not always allowed


def test_sampled_replies_stay_in_the_grammar(engines, monkeypatch):
    _, last = engines
    made = _samplers(last, monkeypatch)
    whole = 0
    for seed in range(4):
        for prompt in PROMPTS:
            out = _chat(last, [{"role": "user", "content": prompt}], _params(VERDICT, 1.0, seed, max_tokens=96))
            if out["finish_reason"] == "length":
                continue  # cut off inside the reasoning: not a whole object, checked for the ones that ended
            # strict=False: llama-cpp-python's schema grammar lets a string hold raw control characters
            reply = json.loads(out["text"], strict=False)
            assert set(reply) == {"reasoning", "verdict"} and reply["verdict"] in ("A", "B")
            assert len(reply["reasoning"]) <= 120
            whole += 1
    assert whole >= 8
    assert sum(m.rejected for m in made) > 0 and sum(m.sampled for m in made) > 100


def test_free_decoding_keeps_the_library_chain(engines):
    _, last = engines
    assert not isinstance(last._init_sampler(temp=0.0), GrammarLastSampler)
    from llama_cpp import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(SCORE), verbose=False)
    assert isinstance(last._init_sampler(temp=0.7, grammar=grammar), GrammarLastSampler)
