"""llm.budget holds inside a batch (issue 59): each reply is accounted as it arrives, a call is sent only while it
fits, re-asks and retries are admitted like first asks, no more of a reply is read than its call can use, and the
message names the knob that was passed. A final failure is not sent again by a later batch of the same run."""

from __future__ import annotations

import json

import pytest

from rubriclab.llm import BudgetExceededError, CallRequest, Gateway, RoleSpec, SpendBudget, parse_verdict
from rubriclab.llm._budget import estimate, price_of
from rubriclab.llm._reply_cap import cap_tokens, reply_cap_bytes
from rubriclab.testing import FakeOpenAIServer

PRICED = "openai/gpt-4o-mini"  # in litellm's local cost map
LIMIT = 0.002


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RUBRICLAB_TEST_KEY", "sk-test-spend")


def _role(server: FakeOpenAIServer, **kw) -> RoleSpec:
    fields = {"max_tokens": 512, "max_retries": 0, "parse_retries": 0, "concurrency": 8, **kw}
    return RoleSpec(name="judge", model=PRICED, api_base=server.url, api_key_env="RUBRICLAB_TEST_KEY", **fields)


def _requests(role: RoleSpec, n: int, tag: str = "q", **kw) -> list[CallRequest]:
    return [CallRequest(role=role, messages=[{"role": "user", "content": f"{tag} {i}: " + "word " * 150}], **kw)
            for i in range(n)]


def _one_reply_cap(req: CallRequest) -> float:
    """What one reply of ``req`` is counted at, at most: its prompt and a reply at its cap."""
    n = estimate([req]).prompt_tokens
    return price_of(PRICED, n, cap_tokens(reply_cap_bytes(req.role.max_tokens, req.logprobs)))


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_server_ignoring_max_tokens_cannot_take_a_run_past_the_limit_plus_one_replys_cap(store, chunked):
    """5 MB replies to calls allowed 512 tokens, under llm.budget.cost_usd=0.002 (the probe spent $18.88 in one
    batch): the run — three batches of a stage — spends at most the limit plus one reply at its cap, sends nothing
    after the reply that broke its cap, and stops with a message naming llm.budget.cost_usd."""
    with FakeOpenAIServer(reply_chars=5_000_000, chunked=chunked, record=True) as server:
        role = _role(server)
        gw = Gateway(store, stage="drift_check", progress=False, budget=SpendBudget(cost_usd=LIMIT))
        batches = [_requests(role, 5, tag) for tag in ("a", "b", "c")]
        assert estimate(batches[0]).cost_usd <= LIMIT  # each batch is within the budget by its estimate
        messages = []
        for batch in batches:
            try:
                gw.run(batch, desc="verdicts")
            except BudgetExceededError as exc:
                messages.append(str(exc))
        sent = len(server.received_requests)
    bound = LIMIT + max(_one_reply_cap(r) for b in batches for r in b)
    assert 0 < gw.spend.cost_usd <= bound, (gw.spend.cost_usd, bound)
    assert sent == 1  # the first reply broke its cap: nothing more went to that server
    ledger = {r["stage"]: r for r in store.ledger()}["drift_check"]
    assert ledger["cost"] == pytest.approx(gw.spend.cost_usd) and ledger["completion_tokens"] < 10_000
    assert messages and "llm.budget.cost_usd=0.002" in messages[0] and "prompt_tokens" not in messages[0]
    assert "\n" not in messages[0]
    error = next(iter(store._db.execute("SELECT error FROM calls WHERE status='error'")))[0]
    assert "ReplyTooLargeError" in error and "ignores max_tokens" in error


def test_a_reply_read_whole_but_past_max_tokens_is_refused_counted_and_not_sent_again(store):
    """8,000 characters for max_tokens=64 fit the byte cap but not the token limit: refused (never parsed as a
    verdict, never re-asked), counted at what the server reported, and its endpoint gets no more calls."""
    with FakeOpenAIServer(reply_chars=8_000, responder=lambda body: "[[A]]", record=True) as server:
        role = _role(server, max_tokens=64, parse_retries=2)
        gw = Gateway(store, stage="audit", progress=False)
        res = gw.run(_requests(role, 3, parser=parse_verdict), desc="verdicts")
        assert [r.ok for r in res] == [False] * 3 and sum(not r.error.startswith("not sent") for r in res) >= 1
        assert all("ignores max_tokens" in r.error for r in res)
        assert len(server.received_requests) <= role.concurrency  # those in flight when the first came back, no re-asks
        again = gw.run(_requests(role, 2, tag="later"), desc="more")
        assert all(r.error.startswith("not sent:") for r in again) and len(server.received_requests) <= role.concurrency
    assert gw.spend.cost_usd > 0  # what was read was paid for and counted


def test_re_asks_are_admitted_like_first_asks_and_stop_at_the_limit(store):
    """A server that honours max_tokens but never gives a parseable reply: the batch's estimate fits, its re-asks
    would not; they are sent only while they fit, then the batch stops, within the limit, naming the knob."""
    with FakeOpenAIServer(responder=lambda body: "no verdict here", record=True) as server:
        role = _role(server, max_tokens=64, parse_retries=6, concurrency=2)
        reqs = _requests(role, 4, parser=parse_verdict)
        first = estimate(reqs).cost_usd
        gw = Gateway(store, stage="audit", progress=False, budget=SpendBudget(cost_usd=first * 3))
        with pytest.raises(BudgetExceededError) as err:
            gw.run(reqs, desc="verdicts")
        sent = len(server.received_requests)
    assert gw.spend.cost_usd <= first * 3
    assert 4 < sent < 4 * 7  # some re-asks went out, not all of them
    msg = str(err.value)
    assert "stopped sending" in msg and "llm.budget.cost_usd" in msg and "--set llm.budget.cost_usd" in msg
    assert store.ledger()[0]["calls"] == sent  # every call sent is in the store: finished calls kept


def test_the_estimate_message_names_the_knob_that_was_passed(store):
    with FakeOpenAIServer(record=True) as server:
        reqs = _requests(_role(server), 3)
        with pytest.raises(BudgetExceededError) as err:
            Gateway(store, stage="s", progress=False, budget=SpendBudget(cost_usd=estimate(reqs).cost_usd / 2,
                                                                         prompt_tokens=10**9)).run(reqs)
        assert not server.received_requests
    assert "Raise llm.budget.cost_usd" in str(err.value) and "llm.budget.prompt_tokens=N" not in str(err.value)


def test_a_final_failure_is_not_sent_again_by_later_batches_of_the_run(store):
    """One request refused with a 400 (final), then asked again in two later batches of the stage, beside new
    requests: the server sees it once; a new run (another gateway on the same store) tries it again."""
    with FakeOpenAIServer(quote_status=400) as server:
        role = _role(server)
        gw = Gateway(store, stage="drift", progress=False)
        failing = _requests(role, 1, "refine")[0]
        for tag in ("b1", "b2", "b3"):
            res = gw.run([failing, *_requests(role, 2, tag)], desc="rewrites")
            assert not res[0].ok and "BadRequestError" in res[0].error
        bodies = [json.loads(e["body"])["messages"][0]["content"] for e in server.received_requests]
        assert bodies.count(failing.messages[0]["content"]) == 1 and len(bodies) == 7
        Gateway(store, stage="drift", progress=False).run([failing])
        assert len(server.received_requests) == 8


def test_retries_exhausted_is_final_for_the_run_too(store, monkeypatch):
    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: 0.0)
    with FakeOpenAIServer(quote_status=500) as server:
        role = _role(server, max_retries=2)
        gw = Gateway(store, stage="drift", progress=False)
        req = _requests(role, 1)[0]
        assert not gw.run([req])[0].ok and len(server.received_requests) == 3
        assert not gw.run([req])[0].ok and len(server.received_requests) == 3
