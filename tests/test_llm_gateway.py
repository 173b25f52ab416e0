"""Gateway behaviour with scripted providers: cache, samples, parse re-asks, failures, ledger."""

from __future__ import annotations

import itertools

import litellm
import pytest

from rubriclab.llm import CallRequest, Gateway, RoleSpec, parse_verdict, yes_no_gap
from rubriclab.testing import last_user_text, scripted_model, scripted_provider


def _req(model, text, **kw):
    role_kw = {k: kw.pop(k) for k in list(kw) if k in ("temperature", "parse_retries", "max_retries")}
    return CallRequest(role=RoleSpec(name="judge", model=model, **role_kw),
                       messages=[{"role": "user", "content": text}], **kw)


def test_rerun_makes_zero_provider_calls(gateway):
    model = scripted_model("echo", lambda m, p: "[[A]]" if "a" in last_user_text(m) else "[[B]]")
    reqs = [_req(model, f"item {i} {'a' if i % 2 else 'b'}", parser=parse_verdict) for i in range(20)]
    first = gateway.run(reqs)
    assert scripted_provider().calls["echo"] == 20
    assert [r.value for r in first] == ["B", "A"] * 10
    again = Gateway(gateway.store, stage="test", progress=False).run(reqs)
    assert scripted_provider().calls["echo"] == 20  # nothing new reached the provider
    assert all(r.cached for r in again)
    assert [r.value for r in again] == [r.value for r in first]


def test_samples_at_positive_temperature_are_distinct_calls(gateway):
    counter = itertools.count()
    model = scripted_model("sampler", lambda m, p: f"reply {next(counter)} seed={p.get('seed')}")
    reqs = [_req(model, "same prompt", temperature=0.7, sample_index=s) for s in range(5)]
    out = gateway.run(reqs)
    assert len({r.text for r in out}) == 5
    assert len({r.request.key(0) for r in out}) == 5
    # the sample index travels as a seed so providers that honour it give distinct samples
    assert {r.text.split("seed=")[1] for r in out} == {str(1009 * s) for s in range(5)}
    assert gateway.run(reqs)[3].text == out[3].text  # and each sample is cached under its own key


def test_unparseable_reply_is_reasked_then_recorded_not_coerced(gateway):
    replies = iter(["I think A is better", "Answer: B", "[[B]]"])
    seen = []

    def flaky(m, p):
        seen.append(m)
        return next(replies)

    model = scripted_model("flaky", flaky)
    res = gateway.run([_req(model, "q", parser=parse_verdict, parse_retries=2)])[0]
    assert res.ok and res.value == "B" and res.attempts == 3
    # a re-ask shows the model its unusable reply and what was wrong with it
    assert seen[1][-2] == {"role": "assistant", "content": "I think A is better"}
    assert "no verdict" in seen[1][-1]["content"] and seen[2][-2]["content"] == "Answer: B"

    model = scripted_model("garbage", lambda m, p: "A is better, obviously")
    res = gateway.run([_req(model, "q2", parser=parse_verdict, parse_retries=1)])[0]
    assert not res.ok and res.value is None
    assert res.parse_error and "no verdict" in res.parse_error
    assert res.text == "A is better, obviously"  # raw text kept
    assert scripted_provider().calls["garbage"] == 2
    ledger = {r["role"]: r for r in gateway.store.ledger()}
    assert ledger["judge"]["parse_failures"] >= 1


def test_final_errors_are_not_retried_and_counted(gateway):
    def auth_fail(m, p):
        raise litellm.AuthenticationError("bad key", llm_provider="scripted", model="scripted/auth")

    model = scripted_model("auth", auth_fail)
    res = gateway.run([_req(model, "q", max_retries=5)])[0]
    assert not res.ok and "AuthenticationError" in res.error
    assert scripted_provider().calls["auth"] == 1
    # a failed call is never served from the store: a re-run tries again
    gateway.run([_req(model, "q", max_retries=5)])
    assert scripted_provider().calls["auth"] == 2
    row = next(r for r in gateway.store.ledger() if r["role"] == "judge")
    assert row["failed"] == 1  # one stored error row for the key


def test_retryable_errors_are_retried_with_backoff(gateway, monkeypatch):
    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: 0.0)
    state = {"n": 0}

    def overloaded_twice(m, p):
        state["n"] += 1
        if state["n"] <= 2:
            raise litellm.ServiceUnavailableError("busy", llm_provider="scripted", model="scripted/busy")
        return "[[A]]"

    model = scripted_model("busy", overloaded_twice)
    res = gateway.run([_req(model, "q", parser=parse_verdict)])[0]
    assert res.ok and res.value == "A" and res.retries == 2
    assert next(r for r in gateway.store.ledger() if r["role"] == "judge")["retries"] == 2


def test_yes_no_gap_from_logprobs(gateway):
    def scorer(m, p):
        yes = -0.2 if "good" in last_user_text(m) else -2.5
        top = [{"token": "Yes", "logprob": yes, "bytes": None}, {"token": " No", "logprob": -1.0, "bytes": None}]
        return {"text": "Yes", "logprobs": {"content": [{"token": "Yes", "logprob": yes, "bytes": None,
                                                          "top_logprobs": top}]}}

    model = scripted_model("scorer", scorer)
    good, bad = gateway.run([_req(model, "a good answer", logprobs=5), _req(model, "a bad answer", logprobs=5)])
    assert yes_no_gap(good.extra) == pytest.approx(0.8)
    assert yes_no_gap(bad.extra) == pytest.approx(-1.5)
    assert yes_no_gap({}) is None


def test_secrets_never_reach_the_store(gateway, monkeypatch):
    monkeypatch.setenv("RUBRICLAB_TEST_KEY", "sk-very-secret-value")
    model = scripted_model("keyed", lambda m, p: "ok")
    role = RoleSpec(name="judge", model=model, api_key_env="RUBRICLAB_TEST_KEY")
    gateway.run([CallRequest(role=role, messages=[{"role": "user", "content": "hi"}])])
    dump = "\n".join(gateway.store._db.iterdump())  # every byte the store holds
    assert "sk-very-secret-value" not in dump


def test_identical_requests_in_one_batch_make_one_call(gateway):
    model = scripted_model("dedupe", lambda m, p: "[[A]]")
    reqs = [_req(model, "same question", parser=parse_verdict) for _ in range(5)]
    out = gateway.run(reqs)
    assert scripted_provider().calls["dedupe"] == 1
    assert [r.value for r in out] == ["A"] * 5 and sum(not r.cached for r in out) == 1
    row = next(r for r in gateway.store.ledger() if r["role"] == "judge")
    assert row["calls"] == 1 and row["cache_hits"] == 4
