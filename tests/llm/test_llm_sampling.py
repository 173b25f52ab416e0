"""Grammar-constrained decoding on the embedded engine with the grammar checked on the sampled token first
(rubriclab.llm._sampling): the same replies as grammar-first decoding at T=0, always inside the grammar; the text
the grammar forces evaluated in one batch per run, never decoded; JSON without optional spaces."""

from __future__ import annotations

import json

import pytest

from rubriclab.llm._local import N_CTX, _chat, guard_prefix_reuse, llama_threads, load_chat_model
from rubriclab.llm._sampling import GrammarLastSampler, compact_json_grammar, grammar_last
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
    """(grammar first, grammar last with every token decoded, the engine as it runs: grammar last, forced runs)."""
    from llama_cpp import Llama

    path = chat_weights("smollm2-135m")

    def plain():
        return guard_prefix_reuse(Llama(model_path=str(path), n_ctx=N_CTX, **llama_threads(), verbose=False,
                                        seed=0))

    # llama-cpp-python's own chain: the grammar before top-k
    return plain(), grammar_last(plain(), jump=False), load_chat_model(path)


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
    first, last, _ = engines
    made = _samplers(last, monkeypatch)
    for prompt in PROMPTS:
        msgs = [{"role": "user", "content": prompt}]
        want = _chat(first, msgs, _params(schema, 0.0))
        got = _chat(last, msgs, _params(schema, 0.0))
        assert got["text"] == want["text"], prompt
    assert len(made) == len(PROMPTS)  # the grammar-last sampler made these replies, not the library's chain
    assert sum(m.rejected for m in made) > 0  # and its redraw path ran: the argmax was not always allowed


def test_sampled_replies_stay_in_the_grammar(engines, monkeypatch):
    _, _, last = engines
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
    assert sum(m.forced for m in made) > 0  # the replies went through forced runs too


def test_free_decoding_keeps_the_library_chain(engines):
    _, _, last = engines
    assert not isinstance(last._init_sampler(temp=0.0), GrammarLastSampler)
    from llama_cpp import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(SCORE), verbose=False)
    assert isinstance(last._init_sampler(temp=0.7, grammar=grammar), GrammarLastSampler)


def _runs(llm, monkeypatch) -> tuple[list[GrammarLastSampler], list[int], list[bytes]]:
    """Record the engine's samplers, the size of every batch it evaluates, and the text of every forced run."""
    made = _samplers(llm, monkeypatch)
    batches: list[int] = []
    runs: list[bytes] = []
    evaluate, plan = llm.eval, GrammarLastSampler._plan_run

    def eval_recorded(tokens):
        batches.append(len(tokens))
        return evaluate(tokens)

    def plan_recorded(self, room):
        run = plan(self, room)
        if run:
            runs.append(llm.detokenize(run))
        return run

    monkeypatch.setattr(llm, "eval", eval_recorded)
    monkeypatch.setattr(GrammarLastSampler, "_plan_run", plan_recorded)
    return made, batches, runs


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_forced_runs_hold_exactly_the_text_the_grammar_forces(engines, temperature, monkeypatch):
    *_, llm = engines
    made, _, runs = _runs(llm, monkeypatch)
    for seed, prompt in enumerate(PROMPTS):
        out = _chat(llm, [{"role": "user", "content": prompt}], _params(VERDICT, temperature, seed, max_tokens=96))
        if out["finish_reason"] == "stop":
            assert out["text"].startswith('{"reasoning":"') and out["text"][-6:] in ('":"A"}', '":"B"}'), out["text"]
    # the object's opening up to the first value, the next key, the closing, each from where the model's last
    # token left it (a sampled `",` takes the comma) to the next choice (a reasoning, a verdict letter, the end)
    literals = (b'{"reasoning":"', b',"verdict":"', b'"}')
    assert all(any(lit.endswith(run) for lit in literals) for run in runs), runs
    assert runs[0] == literals[0] and any(r.endswith(b'"verdict":"') for r in runs)
    assert sum(m.forced for m in made) == sum(len(llm.tokenize(r, add_bos=False)) for r in runs)


def test_a_forced_run_is_evaluated_in_one_batch_with_the_token_before_it(engines, monkeypatch):
    *_, llm = engines
    made, batches, runs = _runs(llm, monkeypatch)
    out = _chat(llm, [{"role": "user", "content": PROMPTS[1]}], _params(SCORE, 0.0))
    assert out["text"].startswith('{"score":') and out["finish_reason"] == "stop", out
    (sampler,) = made
    reply = batches[1:]  # after the prompt's own batch
    # every sampled token but the last (the end) is evaluated once, and each run rides along in one batch
    assert len(reply) == sampler.sampled - 1 + (1 if runs and runs[0].startswith(b"{") else 0)
    assert sum(reply) == out["usage"]["completion_tokens"] and max(reply) > 1  # the end is not evaluated
    assert sampler.forced >= 3 and sampler.runs == len(runs)


def test_a_reply_cut_off_inside_a_forced_run_has_max_tokens_and_the_next_reply_is_unaffected(engines):
    *_, llm = engines
    msgs = [{"role": "user", "content": PROMPTS[0]}]
    whole = _chat(llm, msgs, _params(VERDICT, 0.0))
    cut = _chat(llm, msgs, _params(VERDICT, 0.0, max_tokens=2))  # inside the opening run {"reasoning":"
    assert cut["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 2
    assert whole["text"].startswith(cut["text"]) and len(cut["text"]) < len('{"reasoning":"')
    assert _chat(llm, msgs, _params(VERDICT, 0.0)) == whole


def test_json_replies_have_no_space_outside_strings(engines):
    *_, llm = engines
    for seed in range(3):
        out = _chat(llm, [{"role": "user", "content": PROMPTS[1]}], _params(SCORE, 1.0, seed))
        value = json.loads(out["text"])
        assert out["text"] == json.dumps(value, separators=(",", ":")), out["text"]


def test_a_schema_llama_cpp_cannot_convert_falls_back_to_its_json_grammar(engines):
    *_, llm = engines
    with pytest.raises(AssertionError):  # llama-cpp-python's converter refuses it ...
        compact_json_grammar({"type": "foo"})
    # ... and the engine then asks for the library's own fallback (any JSON object) instead of failing the call
    out = _chat(llm, [{"role": "user", "content": PROMPTS[1]}], _params({"type": "foo"}, 0.0, max_tokens=24))
    assert out["text"].startswith("{"), out
