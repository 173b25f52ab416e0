"""The gateway against the fake OpenAI-compatible server through litellm's `openai/` provider:
faults are retried by the one retry layer, results match a fault-free run, and a SIGKILLed batch
resumes without repeating a finished call."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store, parse_verdict
from rubriclab.testing import FakeOpenAIServer, FaultPlan


def verdict_responder(body: dict) -> str:
    text = body["messages"][0]["content"]  # a re-ask appends messages; the item is the first one
    digit = int(hashlib.sha1(text.encode()).hexdigest(), 16) % 2
    return f"Comparing both answers... [[{'AB'[digit]}]]"


def _requests(url: str, n: int, concurrency: int = 64, timeout: float = 3.0) -> list[CallRequest]:
    # timeout well above a loaded 2-core machine's worst normal latency (a 1 s timeout timed out healthy
    # requests when the suite ran in full, adding retries no fault caused); "hang" faults outlast it
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=url, concurrency=concurrency, timeout=timeout,
                    max_retries=4, parse_retries=4)
    return [CallRequest(role=role, messages=[{"role": "user", "content": f"pair {i}: which is better?"}],
                        parser=parse_verdict) for i in range(n)]


@pytest.fixture
def fake_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test")


@pytest.mark.timeout(240)
def test_thousand_calls_with_30pct_faults_complete_exactly_once(tmp_path, fake_key, monkeypatch):
    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: 0.05 * (retry + 1))
    n = 1000
    with FakeOpenAIServer(latency=0.01, responder=verdict_responder) as clean:
        expected = Gateway(open_store(tmp_path / "clean.sqlite"), stage="clean", progress=False).run(
            _requests(clean.url, n))
    assert all(r.ok for r in expected)

    plan = FaultPlan(rate=0.3, seed=7, retry_after=0.05, hang_seconds=6.0)
    store = open_store(tmp_path / "faulty.sqlite")
    with FakeOpenAIServer(latency=0.01, responder=verdict_responder, faults=plan) as server:
        results = Gateway(store, stage="faulty", progress=False).run(_requests(server.url, n))
        stats = server.stats()

    faults = stats["faults"]
    assert sum(faults.values()) > 0.2 * n  # the plan really faulted ~30%
    assert set(faults) == {"429", "500", "hang", "garbage", "truncated", "drop"}
    assert all(r.ok for r in results), [r.error or r.parse_error for r in results if not r.ok][:3]
    assert [r.value for r in results] == [r.value for r in expected]
    # exactly once: one stored ok reply per item, all at attempt 0 — a garbage body (HTML, bytes, JSON without
    # choices or content) is a transport fault retried with the same request, never a re-ask
    rows = dict(store._db.execute("SELECT attempt, COUNT(*) FROM calls WHERE status='ok' GROUP BY attempt"))
    assert rows == {0: n}
    ledger = next(r for r in store.ledger() if r["stage"] == "faulty")
    assert ledger["retries"] == sum(faults.values())  # every injected fault retried once, by our layer only
    assert ledger["parse_failures"] == 0 and ledger["failed"] == 0
    assert stats["requests"] == n + sum(faults.values())  # litellm/openai made no hidden retries


_CHILD = textwrap.dedent("""
    import os, sys
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store, parse_verdict
    url, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=url, concurrency=4, timeout=5)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"pair {i}"}], parser=parse_verdict)
            for i in range(n)]
    Gateway(open_store(path), stage="killed", progress=False).run(reqs)
""")


@pytest.mark.timeout(180)
def test_sigkilled_batch_resumes_without_repeating_finished_calls(tmp_path, fake_key):
    n = 200
    path = tmp_path / "calls.sqlite"
    with FakeOpenAIServer(latency=0.05, responder=verdict_responder) as server:
        child = subprocess.Popen([sys.executable, "-c", _CHILD, server.url, str(path), str(n)],
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.time() + 120
        done_before = 0
        while time.time() < deadline and child.poll() is None:
            if path.exists():
                try:
                    probe = open_store(path)
                    done_before = probe._db.execute("SELECT COUNT(*) FROM calls WHERE status='ok'").fetchone()[0]
                    probe.close()
                except Exception:  # noqa: BLE001 - the child may hold a write lock for a moment
                    pass
            if done_before >= 40:
                break
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert 40 <= done_before < n, "the child should be killed midway"

        store = open_store(path)
        finished = {k for (k,) in store._db.execute("SELECT key FROM calls WHERE status='ok'")}
        before = server.stats()["attempts"]
        reqs = [CallRequest(role=RoleSpec(name="judge", model="openai/fake-judge", api_base=server.url,
                                          concurrency=4, timeout=5),
                            messages=[{"role": "user", "content": f"pair {i}"}], parser=parse_verdict)
                for i in range(n)]
        results = Gateway(store, stage="killed", progress=False).run(reqs)
        after = server.stats()["attempts"]

    assert all(r.ok for r in results)
    resent = sum(after.values()) - sum(before.values())
    assert resent == n - len(finished)  # only unfinished items reached the server again
    assert sum(r.cached for r in results) == len(finished)
    assert len(finished) >= done_before


@pytest.mark.timeout(60)
def test_429_waits_for_retry_after_not_backoff(tmp_path, fake_key, monkeypatch):
    seen = []

    def huge_backoff(retry):
        seen.append(retry)
        return 30.0

    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", huge_backoff)
    plan = FaultPlan(rate=1.0, kinds=("429",), retry_after=0.05)
    with FakeOpenAIServer(responder=verdict_responder, faults=plan) as server:
        t0 = time.perf_counter()
        results = Gateway(open_store(tmp_path / "c.sqlite"), progress=False).run(_requests(server.url, 20))
        elapsed = time.perf_counter() - t0
    assert all(r.ok and r.retries == 1 for r in results)
    assert not seen and elapsed < 20  # the server's Retry-After was used, never the 30 s backoff


@pytest.mark.timeout(60)
def test_garbage_bodies_are_retried_with_the_same_request_not_reasked(tmp_path, fake_key, monkeypatch):
    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: 0.01)
    plan = FaultPlan(rate=1.0, kinds=("garbage",))
    with FakeOpenAIServer(responder=verdict_responder, faults=plan) as server:
        store = open_store(tmp_path / "c.sqlite")
        results = Gateway(store, stage="garbage", progress=False).run(_requests(server.url, 30))
        attempts = server.stats()["attempts"]
    assert all(r.ok and r.retries == 1 and r.attempts == 1 for r in results)
    assert sorted(attempts.values()) == [2] * 30  # each request sent twice, identical both times
    assert dict(store._db.execute("SELECT attempt, COUNT(*) FROM calls GROUP BY attempt")) == {0: 30}
    ledger = next(r for r in store.ledger() if r["stage"] == "garbage")
    assert ledger["retries"] == 30 and ledger["parse_failures"] == 0


@pytest.mark.timeout(60)
def test_an_unparseable_reply_is_reasked(tmp_path, fake_key):
    plan = FaultPlan(rate=1.0, kinds=("unparseable",))
    with FakeOpenAIServer(responder=verdict_responder, faults=plan) as server:
        store = open_store(tmp_path / "c.sqlite")
        results = Gateway(store, stage="reask", progress=False).run(_requests(server.url, 10))
        attempts = server.stats()["attempts"]
    # every reply is well formed but unusable: re-asked (a different request each time, quoting the reply),
    # never retried, and after the re-ask budget a recorded parse failure — not a verdict
    assert all(not r.ok and r.parse_error and r.retries == 0 and r.attempts == 5 for r in results)
    assert len(attempts) == 10 * 5 and set(attempts.values()) == {1}
    ledger = next(r for r in store.ledger() if r["stage"] == "reask")
    assert ledger["retries"] == 0 and ledger["parse_failures"] == 10


_CHILD_429 = textwrap.dedent("""
    import sys
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store, parse_verdict
    url, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=url, concurrency=4, timeout=5, max_retries=6)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"pair {i}"}], parser=parse_verdict)
            for i in range(n)]
    Gateway(open_store(path), stage="killed429", progress=False).run(reqs)
""")


@pytest.mark.timeout(120)
def test_a_killed_batch_keeps_its_row_calls_and_retries_in_the_ledger(tmp_path, fake_key):
    # every request is rate-limited three times (Retry-After 0.3 s): the child is killed while some calls are
    # between retries, so their retries happened but their call rows were never written
    plan = FaultPlan(rate=1.0, kinds=("429",), retry_after=0.3, max_faults_per_key=3)
    path = tmp_path / "calls.sqlite"
    with FakeOpenAIServer(latency=0.01, responder=verdict_responder, faults=plan) as server:
        child = subprocess.Popen([sys.executable, "-c", _CHILD_429, server.url, str(path), "40"])
        deadline = time.time() + 90
        while time.time() < deadline and server.stats()["completions_ok"] < 8:
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait()
        stats = server.stats()
    injected = stats["faults"]["429"]
    assert 8 <= stats["completions_ok"] < 40
    store = open_store(path)
    (row,) = [r for r in store.ledger() if r["stage"] == "killed429"]
    finished = store._db.execute("SELECT COUNT(*) FROM calls WHERE status='ok'").fetchone()[0]
    assert row["interrupted_batches"] == 1 and row["batches"] == 1  # the killed batch has its row
    assert row["calls"] == finished and 4 <= finished <= stats["completions_ok"]
    # the 429s were counted as they were retried, also those of calls the kill cut short (more than the
    # finished calls' 3 each); at most one per concurrent call (4) arrived between the reply and its record
    assert injected - 4 <= row["retries"] <= injected
    assert row["retries"] > 3 * finished


@pytest.mark.timeout(60)
def test_embeddings_go_through_the_one_retry_layer(tmp_path, fake_key, monkeypatch):
    from rubriclab.llm import embed_texts
    from rubriclab.testing import fake_embedding

    monkeypatch.setattr("rubriclab.llm._embed.backoff_seconds", lambda retry: 0.01)
    plan = FaultPlan(rate=1.0, kinds=("429", "500", "garbage", "truncated", "drop"), seed=3)
    texts = [f"text {i}" for i in range(12)]
    with FakeOpenAIServer(faults=plan) as server:
        role = RoleSpec(name="embedder", model="openai/fake-embed", api_base=server.url, timeout=5, max_retries=3)
        store = open_store(tmp_path / "c.sqlite")
        X = embed_texts(texts, role, store, batch_size=4, normalize=False, progress=False, stage="emb")
        stats = server.stats()
    assert X.shape == (12, 8)
    assert [round(v, 5) for v in X[5]] == [round(v, 5) for v in fake_embedding("text 5")]
    assert stats["requests"] == 6  # 3 chunks, each faulted once and retried once by our layer (not litellm's)
    (row,) = [r for r in store.ledger() if r["stage"] == "emb"]
    assert row["retries"] == 3 and row["role"] == "embedder"
