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
    # within the run (this gateway) a final failure is not sent again (issue 59) ...
    assert not gateway.run([_req(model, "q", max_retries=5)])[0].ok
    assert scripted_provider().calls["auth"] == 1
    # ... but it is never served from the store: a re-run tries again
    Gateway(gateway.store, stage="test", progress=False).run([_req(model, "q", max_retries=5)])
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


# -- truncated replies ----------------------------------------------------------------------------------


def test_a_reply_cut_at_the_token_limit_is_a_parse_failure_then_reasked(gateway):
    replies = iter([{"text": 'Output "[[A]]" if A is better, "[[B]]" if B', "finish_reason": "length"},
                    {"text": "[[A]] because", "finish_reason": "length"},  # a marker, but cut off: not usable
                    {"text": "[[B]]"}])
    seen = []

    def script(m, p):
        seen.append(m)
        return next(replies)

    res = gateway.run([_req(scripted_model("cut", script), "q", parser=parse_verdict, parse_retries=2)])[0]
    assert res.ok and res.value == "B" and res.attempts == 3
    assert "token limit" in seen[1][-1]["content"]

    always = scripted_model("always_cut", lambda m, p: {"text": "[[A]] is clearly", "finish_reason": "length"})
    res = gateway.run([_req(always, "q", parser=parse_verdict, parse_retries=1)])[0]
    assert not res.ok and res.value is None and "token limit" in res.parse_error
    assert res.text == "[[A]] is clearly"  # recorded with its raw text
    row = next(r for r in gateway.store.ledger() if r["role"] == "judge")
    assert row["parse_failures"] == 1


def test_a_cut_reply_without_a_parser_is_not_used_either(gateway):
    cut = scripted_model("cut_free", lambda m, p: {"text": "Here is a long answer that", "finish_reason": "length"})
    res = gateway.run([_req(cut, "write", parse_retries=0)])[0]
    assert not res.ok and res.value is None and "token limit" in res.parse_error


def test_a_reply_the_engine_ended_in_a_loop_is_not_used_and_says_so(gateway):
    # the embedded engine ends a greedy reply caught in a verbatim loop (llm._loops) and reports
    # finish_reason="repetition", which litellm alone would turn into "stop": the gateway must not read it as an answer
    loop = "[[A]] is better. " * 6
    seen = []

    def script(m, p):
        seen.append(m)
        return {"text": loop, "finish_reason": "repetition", "loop": {"period": 6, "repeats": 6}} if len(seen) == 1 \
            else "[[B]]"

    res = gateway.run([_req(scripted_model("looping", script), "q", parser=parse_verdict, parse_retries=1)])[0]
    assert res.ok and res.value == "B" and res.attempts == 2
    assert "verbatim loop" in seen[1][-1]["content"] and "6-token block repeated 6 times" in seen[1][-1]["content"]

    always = scripted_model("always_loops", lambda m, p: {"text": loop, "finish_reason": "repetition",
                                                          "loop": {"period": 6, "repeats": 6}})
    res = gateway.run([_req(always, "q", parser=parse_verdict, parse_retries=0)])[0]
    assert not res.ok and res.value is None and "finish_reason=repetition" in res.parse_error
    assert res.text == loop and res.extra == {"finish_reason": "repetition", "loop": {"period": 6, "repeats": 6}}
    free = gateway.run([_req(always, "write", parse_retries=0)])[0]  # no parser: still not a reply
    assert not free.ok and free.value is None and "verbatim loop" in free.parse_error
    row = next(r for r in gateway.store.ledger() if r["role"] == "judge")
    assert row["parse_failures"] == 2
    again = Gateway(gateway.store, stage="test", progress=False).run([res.request])[0]  # from the store
    assert again.cached and not again.ok and again.extra["finish_reason"] == "repetition"
    assert again.parse_error == res.parse_error


def test_one_token_logprob_scoring_may_stop_at_the_limit(gateway):
    def scorer(m, p):
        top = [{"token": "Yes", "logprob": -0.1, "bytes": None}, {"token": "No", "logprob": -2.0, "bytes": None}]
        return {"text": "Yes", "finish_reason": "length",
                "logprobs": {"content": [{"token": "Yes", "logprob": -0.1, "bytes": None, "top_logprobs": top}]}}

    role = RoleSpec(name="judge", model=scripted_model("one_token", scorer), max_tokens=1)
    res = gateway.run([CallRequest(role=role, messages=[{"role": "user", "content": "ok?"}], logprobs=5)])[0]
    assert res.ok and yes_no_gap(res.extra) == pytest.approx(1.9)


# -- the endpoint is part of a call's identity; credentials never are ----------------------------------


def test_two_endpoints_behind_one_model_string_do_not_share_replies(gateway):
    model = scripted_model("endpoint", lambda m, p: "[[A]]")
    msgs = [{"role": "user", "content": "which?"}]
    one = RoleSpec(name="judge", model=model, api_base="http://10.0.0.1:8000/v1")
    two = RoleSpec(name="judge", model=model, api_base="http://10.0.0.2:8000/v1")
    gateway.run([CallRequest(role=one, messages=msgs)])
    gateway.run([CallRequest(role=two, messages=msgs)])
    assert scripted_provider().calls["endpoint"] == 2  # the second endpoint was asked, not served from cache
    # credentials inside the URL are not part of the endpoint's identity
    same = RoleSpec(name="judge", model=model, api_base="http://user:pw@10.0.0.1:8000/v1/?api-key=abc")
    assert CallRequest(role=same, messages=msgs).key(0) == CallRequest(role=one, messages=msgs).key(0)
    gateway.run([CallRequest(role=same, messages=msgs)])
    assert scripted_provider().calls["endpoint"] == 2
    dump = "\n".join(gateway.store._db.iterdump())
    assert "10.0.0.2:8000" in dump and "pw@" not in dump and "api-key=abc" not in dump


SECRETS = {"extra_headers": {"Authorization": "Bearer abcdefgh-1234", "X-Api-Key": "plain-header-key"},
           "extra_body": {"api_key": "body-key-777", "top_k": 5, "session_token": "tok-888"},
           "client_secret": "s3cr3t-999", "aws_credentials": {"id": "AKIDEXAMPLE", "pw": "creds-000"}}


def test_credential_like_extra_is_sent_but_never_stored_or_keyed(gateway):
    model = scripted_model("extra_secrets", lambda m, p: "ok")
    msgs = [{"role": "user", "content": "hi"}]
    role = RoleSpec(name="judge", model=model, extra=SECRETS)
    res = gateway.run([CallRequest(role=role, messages=msgs)])[0]
    assert res.ok
    sent = scripted_provider().kwargs["extra_secrets"]
    assert sent["headers"]["Authorization"] == "Bearer abcdefgh-1234"  # the provider still gets them
    assert sent["optional_params"]["extra_body"] == SECRETS["extra_body"]
    dump = "\n".join(gateway.store._db.iterdump())
    for secret in ("abcdefgh-1234", "plain-header-key", "body-key-777", "tok-888", "s3cr3t-999", "creds-000"):
        assert secret not in dump, secret
    assert '"top_k": 5' in dump  # a decoding knob inside extra_body still counts
    def key(r: RoleSpec) -> str:
        return CallRequest(role=r, messages=msgs).key(0, salt=gateway.salt)

    # credentials and headers never enter the key: rotating them keeps the cache
    other = RoleSpec(name="judge", model=model, extra={**SECRETS, "client_secret": "another",
                                                       "extra_headers": {"Authorization": "Bearer other-key-1"}})
    assert key(other) == key(role)
    # other body fields enter it only as a salted hash: a reply may depend on them
    body = RoleSpec(name="judge", model=model, extra={**SECRETS, "extra_body": {**SECRETS["extra_body"], "api_key": "x"}})
    assert key(body) != key(role)
    changed = RoleSpec(name="judge", model=model, extra={**SECRETS, "extra_body": {"top_k": 9}})
    assert key(changed) != key(role)


def test_mlflow_params_use_the_same_secret_filter():
    from rubriclab.tracking import flatten_params

    flat = flatten_params({"llm": {"roles": {"judge": {"model": "m", "extra": SECRETS}}}})
    dumped = str(flat)
    for secret in ("abcdefgh-1234", "plain-header-key", "body-key-777", "tok-888", "s3cr3t-999", "creds-000"):
        assert secret not in dumped, secret
    assert flat["llm.roles.judge.extra.extra_body.top_k"] == "5"


def test_prefix_order_groups_calls_to_in_process_models_by_prompt():
    from rubriclab.llm._schedule import prefix_order

    local = RoleSpec(name="judge", model="local/smollm2-135m")
    remote = RoleSpec(name="judge", model="openai/gpt-4o-mini")
    texts = ["RUBRIC\npair 2", "RUBRIC\npair 1", "OTHER\npair 1", "RUBRIC\npair 2", "RUBRIC\npair 1"]
    reqs = [CallRequest(role=local, messages=[{"role": "user", "content": t}], sample_index=i)
            for i, t in enumerate(texts)]
    reqs.append(CallRequest(role=remote, messages=[{"role": "user", "content": "RUBRIC\npair 0"}]))
    order = prefix_order(reqs, list(range(len(reqs))))
    assert order[0] == 5  # a remote call keeps its place ahead (it runs concurrently anyway)
    assert [texts[i] for i in order[1:]] == sorted(texts)  # equal prompts adjacent, shared prefixes together
    assert sorted(order) == list(range(len(reqs)))


def test_prefix_order_changes_when_calls_run_not_what_they_return(tmp_path, monkeypatch):
    from rubriclab.llm import open_store

    monkeypatch.setattr("rubriclab.llm._schedule.KV_SHARING_PREFIXES", ("local/", "scripted/"))
    seen: list[str] = []

    def reply(m, p):
        seen.append(last_user_text(m))
        return f"{last_user_text(m)}|{p.get('seed')}"  # every call carries its own seed

    role = RoleSpec(name="judge", model=scripted_model("order", reply), temperature=0.7, concurrency=1)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"q{i % 3}"}], sample_index=i)
            for i in range(9)]
    a = Gateway(open_store(tmp_path / "a.sqlite"), progress=False, prefix_schedule=False).run(reqs)
    built, seen[:] = list(seen), []
    b = Gateway(open_store(tmp_path / "b.sqlite"), progress=False, prefix_schedule=True).run(reqs)
    assert built == [f"q{i % 3}" for i in range(9)] and seen == sorted(built)  # equal prompts ran adjacently
    assert [r.text for r in a] == [r.text for r in b]


def test_prefix_order_holds_when_a_local_role_allows_concurrent_calls(tmp_path, monkeypatch):
    """With concurrency 8, eight calls to an in-process model were in flight at once and raced for its lock, so
    they ran in any order and the shared prefixes were not reused; they now run one at a time, in prefix order."""
    import threading
    import time

    from rubriclab.llm import open_store

    monkeypatch.setattr("rubriclab.llm._schedule.KV_SHARING_PREFIXES", ("local/", "scripted/"))
    seen: list[str] = []
    in_flight, most = [0], [0]
    guard = threading.Lock()

    def reply(m, p):
        with guard:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.002 * (len(seen) % 4))  # uneven durations: concurrent calls finish out of order
        with guard:
            seen.append(last_user_text(m))
            in_flight[0] -= 1
        return "ok"

    role = RoleSpec(name="judge", model=scripted_model("order8", reply), temperature=0.7, concurrency=8)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"q{i % 4}"}], sample_index=i)
            for i in range(24)]
    Gateway(open_store(tmp_path / "c.sqlite"), progress=False, prefix_schedule=True).run(reqs)
    assert most[0] == 1 and seen == sorted(seen)
