"""The embedded provider: real SmolLM2 (llama.cpp) and MiniLM, offline, through litellm."""

from __future__ import annotations

import litellm
import numpy as np
import pytest

from rubriclab.llm import CallRequest, RoleSpec, embed_texts, json_parser, local_provider, yes_no_gap


@pytest.fixture(scope="module", autouse=True)
def provider():
    return local_provider()


def test_completion_is_deterministic_at_t0_and_cached(gateway):
    role = RoleSpec(name="judge", model="local/smollm2-135m", max_tokens=8)
    # 8 tokens cut the greeting short on purpose: this test is about determinism, not about the reply
    req = CallRequest(role=role, messages=[{"role": "user", "content": "Say hello."}], truncation_ok=True)
    a = gateway.run([req])[0]
    direct = litellm.completion(model="local/smollm2-135m", messages=req.messages, max_tokens=8, temperature=0.0)
    assert a.ok and a.text and a.text == direct.choices[0].message.content
    assert a.prompt_tokens > 0 and a.completion_tokens > 0
    assert gateway.run([req])[0].cached


def test_samples_at_t_positive_differ_by_sample_index(gateway):
    role = RoleSpec(name="generator", model="local/smollm2-135m", max_tokens=12, temperature=1.0)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": "Write a random word."}], sample_index=i,
                        truncation_ok=True) for i in range(4)]
    texts = [r.text for r in gateway.run(reqs)]
    assert len(set(texts)) > 1


def test_json_schema_constrained_decoding(gateway):
    schema = {"type": "object", "properties": {"verdict": {"type": "string", "enum": ["A", "B"]}},
              "required": ["verdict"]}
    role = RoleSpec(name="judge", model="local/smollm2-135m", max_tokens=20)
    req = CallRequest(role=role, messages=[{"role": "user", "content": "Is A or B better? Answer in JSON."}],
                      response_format={"type": "json_object", "schema": schema}, parser=json_parser())
    res = gateway.run([req])[0]
    assert res.ok and res.value["verdict"] in {"A", "B"}


def test_yes_no_logit_mode(gateway):
    role = RoleSpec(name="judge", model="local/smollm2-135m", max_tokens=1)
    req = CallRequest(role=role, messages=[{"role": "user", "content": "Is the sky blue? Answer Yes or No."}],
                      logprobs=20)
    res = gateway.run([req])[0]
    top = res.extra["logprobs"]["content"][0]["top_logprobs"]
    assert len(top) == 20 and all(t["logprob"] <= 0 for t in top)
    probs = np.exp([t["logprob"] for t in top])
    assert probs.sum() <= 1.0 + 1e-6
    assert isinstance(yes_no_gap(res.extra), float)


def test_unknown_local_model_lists_the_available_ones(gateway):
    res = gateway.run([CallRequest(role=RoleSpec(name="judge", model="local/gpt-9"),
                                   messages=[{"role": "user", "content": "hi"}])])[0]
    assert not res.ok and "local/smollm2-135m" in res.error


def test_embeddings_offline_normalised_and_cached(store):
    role = RoleSpec(name="embedder", model="local/minilm")
    texts = ["The answer is accurate.", "The response is factually correct.", "I like turtles."]
    m = embed_texts(texts, role, store, progress=False)
    assert m.shape == (3, 384)
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0)
    assert m[0] @ m[1] > m[0] @ m[2]  # paraphrases are closer than an unrelated sentence
    assert len(store.get_embeddings("local/minilm", texts)) == 3
    assert np.allclose(embed_texts(texts, role, store, progress=False), m)


def test_prefix_reuse_gives_the_distribution_a_fresh_evaluation_gives():
    from rubriclab.llm._local import _first_token_distribution, eval_after_prefix

    llm = local_provider().chat_model("smollm2-135m")
    shared = "Criterion: the answer is concise and answers the question first.\n"
    msgs = [[{"role": "user", "content": shared + f"Question: how long do I boil egg {i}?\nAnswer Yes or No."}]
            for i in range(3)]
    msgs.append(msgs[0])  # the exact prompt again: its last token is re-evaluated for fresh logits
    reused = [_first_token_distribution(llm, m, 5)["logprobs"]["content"][0]["top_logprobs"] for m in msgs]
    fresh = []
    for m in msgs:
        _fresh(llm)
        fresh.append(_first_token_distribution(llm, m, 5)["logprobs"]["content"][0]["top_logprobs"])
    for a, b in zip(reused, fresh):
        assert [x["token"] for x in a] == [y["token"] for y in b]
        assert np.allclose([x["logprob"] for x in a], [y["logprob"] for y in b], atol=1e-4)
    tokens = llm.tokenize(b"Hello there, general question", add_bos=False)
    _fresh(llm)
    assert eval_after_prefix(llm, tokens) == 0
    assert eval_after_prefix(llm, tokens) == len(tokens) - 2  # all but the last two tokens reused
    assert eval_after_prefix(llm, tokens[:3] + [tokens[0], tokens[1]]) == 3


def _fresh(llm) -> None:
    """No KV state to resume from: neither the one in place nor a saved one (``_kvstates``)."""
    from rubriclab.llm._kvstates import kv_states

    kv_states(llm).clear()
    llm.reset()


def _judge_prompts(n: int) -> list[list[dict]]:
    from rubriclab.data import load_source, present
    from rubriclab.llm import load_prompt

    rubric = ("- accuracy: States correct facts and no false claims.\n- directness: Answers the question first.\n"
              "- completeness: Covers every part of the request.\n- safety: Refuses clearly harmful help.")
    out = []
    for p in load_source({"loader": "demo", "domain": "helpful"})[0][:n]:
        v = present(p, 42)
        out.append(load_prompt("judge_direct").render(rubric=rubric, prompt=p.prompt, response_a=v["a"],
                                                      response_b=v["b"]))
    return out


def test_a_reply_depends_on_its_prompt_not_on_the_call_before_it():
    """The same prompt again right after its reply (panel seats, repeated samples, a resumed batch) used to
    re-evaluate only its last token, which llama.cpp scores differently from a fresh evaluation: T=0 replies
    changed with the order calls ran in."""
    from rubriclab.llm._local import _first_token_distribution

    llm = local_provider().chat_model("smollm2-135m")
    msgs = _judge_prompts(3)

    def reply(m):
        out = llm.create_chat_completion(messages=m, temperature=0.0, max_tokens=12, seed=0)
        return out["choices"][0]["message"]["content"]

    def first_token(m):
        return [(x["token"], x["logprob"]) for x in _first_token_distribution(llm, m, 5)["logprobs"]["content"][0]
                ["top_logprobs"]]

    fresh, fresh_first = [], []
    for m in msgs:
        _fresh(llm)
        fresh.append(reply(m))
        _fresh(llm)
        fresh_first.append(first_token(m))
    order = [1, 1, 0, 2, 2, 1, 0, 0]
    assert [reply(msgs[i]) for i in order] == [fresh[i] for i in order]
    for i in order:  # right after a reply to the same prompt: bit-identical logprobs, not merely close ones
        reply(msgs[i])
        assert first_token(msgs[i]) == fresh_first[i]


def test_a_prompt_resumes_from_an_earlier_prompts_saved_state_and_gets_fresh_logits():
    """Two prompts sharing a long prefix, with an unrelated prompt between them: the second resumes from the first's
    saved KV state (not only from the state in place), and its first-token distribution and replies (T=0 and a
    seeded T=0.7 draw) are bit-identical to a fresh evaluation."""
    from rubriclab.llm._kvstates import kv_states
    from rubriclab.llm._local import _first_token_distribution

    llm = local_provider().chat_model("smollm2-135m")
    states = kv_states(llm)
    first, second = _judge_prompts(2)
    shared = "\n".join(f"Rule {i}: judge only what the criterion names, and nothing else at all." for i in range(12))
    a = [{"role": "user", "content": shared + "\n\n" + first[0]["content"]}]
    b = [{"role": "user", "content": shared + "\n\n" + second[0]["content"]}]
    other = [{"role": "user", "content": "Name three colours of the rainbow, one per line."}]
    n_shared = len(llm.tokenize(shared.encode(), add_bos=False))

    def top(m):
        return [(x["token"], x["logprob"]) for x in _first_token_distribution(llm, m, 5)["logprobs"]["content"][0]
                ["top_logprobs"]]

    def reply(m, t):
        out = llm.create_chat_completion(messages=m, temperature=t, max_tokens=12, seed=3)
        return out["choices"][0]["message"]["content"]

    _fresh(llm)
    fresh = (top(b), reply(b, 0.0), reply(b, 0.7))
    for i, check in enumerate((lambda: top(b), lambda: reply(b, 0.0), lambda: reply(b, 0.7))):
        _fresh(llm)
        reply(a, 0.0)
        reply(other, 0.0)  # the state in place now shares only the chat template's start with b
        before = (states.restores, states.tokens_restored)
        assert check() == fresh[i]
        assert states.restores == before[0] + 1
        assert states.tokens_restored - before[1] > n_shared  # resumed from a's state, past the shared rules
    assert 0 < states.bytes <= states.budget


def test_saved_states_keep_to_their_budget_and_drop_a_state_the_next_one_extends():
    from llama_cpp import Llama

    from rubriclab.llm._kvstates import KVStates
    from rubriclab.llm._local import N_CTX, eval_after_prefix, guard_prefix_reuse, llama_threads, prompt_cells
    from rubriclab.llm._weights import chat_weights

    llm = guard_prefix_reuse(Llama(model_path=str(chat_weights("smollm2-135m")), n_ctx=N_CTX,
                                   **llama_threads(), verbose=False, seed=0))
    tokens = [llm.tokenize(f"Prompt number {i}: tell me about topic {i} in detail please.".encode(), add_bos=False)
              for i in range(4)]
    eval_after_prefix(llm, tokens[0])
    per_token = KVStates(llm, 1 << 30)
    per_token.save(len(tokens[0]))
    size = per_token.bytes
    states = KVStates(llm, int(size * 2.5))  # room for two states of this length
    for t in tokens[1:]:
        states.save(prompt_cells(llm))
        eval_after_prefix(llm, t)
    states.save(prompt_cells(llm))
    assert len(states) == 2 and states.bytes <= states.budget  # the oldest two dropped, least recent first
    assert states.longest(tokens[0])[1] < len(tokens[0]) - 2 and states.longest(tokens[3])[1] == len(tokens[3])
    longer = tokens[3] + tokens[0][:4]
    eval_after_prefix(llm, longer)  # extends the saved tokens[3] state
    states.save(prompt_cells(llm))
    assert states.longest(longer)[1] == len(longer) and states.longest(tokens[2])[1] == len(tokens[2])
    assert tuple(tokens[3]) not in states._states and len(states) == 2  # the longer state holds it
    empty = KVStates(llm, 0)
    empty.save(len(longer))
    assert len(empty) == 0


def test_a_reply_s_cells_are_never_reused_and_a_saved_state_resumes_only_within_its_prompt():
    """A prompt that repeats the previous prompt and its reply (a re-ask right after it) used to keep the reply's
    cells, decoded one token at a time, and got other logits than a fresh evaluation (max |difference| 0.02). Now
    only prompt cells are reused, in place or from a saved state, and the logits are the fresh ones to the bit."""
    import llama_cpp

    from rubriclab.llm._kvstates import kv_states
    from rubriclab.llm._local import eval_after_prefix, prompt_cells

    llm = local_provider().chat_model("smollm2-135m")
    states = kv_states(llm)

    def logits():
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),)).copy()

    prompt = llm.tokenize(b"<|im_start|>user\nExplain how to pack books for a move, step by step.<|im_end|>\n"
                          b"<|im_start|>assistant\n", add_bos=False, special=True)
    follow = llm.tokenize(b"<|im_end|>\n<|im_start|>user\nShorter please.<|im_end|>\n<|im_start|>assistant\n",
                          add_bos=False, special=True)

    def with_reply():  # the prompt, then 30 greedy tokens decoded one at a time, as a reply is
        _fresh(llm)
        eval_after_prefix(llm, prompt)
        reply = []
        for _ in range(30):
            reply.append(int(np.argmax(logits())))
            llm.eval([reply[-1]])
        assert prompt_cells(llm) == len(prompt) and llm.n_tokens == len(prompt) + 30
        return reply

    reply = with_reply()
    again = prompt + reply + follow
    _fresh(llm)
    eval_after_prefix(llm, again)
    fresh = logits()
    with_reply()
    assert eval_after_prefix(llm, again) == len(prompt)  # in place: the prompt's cells, not the reply's
    assert np.array_equal(logits(), fresh)
    with_reply()
    eval_after_prefix(llm, llm.tokenize(b"Something else entirely.", add_bos=False))  # the reply's state is saved
    assert states.longest(again) == (tuple(prompt + reply), len(prompt))
    assert eval_after_prefix(llm, again) == len(prompt)  # from the saved state: again only its prompt's cells
    assert np.array_equal(logits(), fresh)
