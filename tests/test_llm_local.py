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
        llm.reset()
        fresh.append(_first_token_distribution(llm, m, 5)["logprobs"]["content"][0]["top_logprobs"])
    for a, b in zip(reused, fresh):
        assert [x["token"] for x in a] == [y["token"] for y in b]
        assert np.allclose([x["logprob"] for x in a], [y["logprob"] for y in b], atol=1e-4)
    tokens = llm.tokenize(b"Hello there, general question", add_bos=False)
    llm.reset()
    assert eval_after_prefix(llm, tokens) == 0
    assert eval_after_prefix(llm, tokens) == len(tokens) - 2  # all but the last two tokens reused
    assert eval_after_prefix(llm, tokens[:3] + [tokens[0], tokens[1]]) == 3


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
        llm.reset()
        fresh.append(reply(m))
        llm.reset()
        fresh_first.append(first_token(m))
    order = [1, 1, 0, 2, 2, 1, 0, 0]
    assert [reply(msgs[i]) for i in order] == [fresh[i] for i in order]
    for i in order:  # right after a reply to the same prompt: bit-identical logprobs, not merely close ones
        reply(msgs[i])
        assert first_token(msgs[i]) == fresh_first[i]
