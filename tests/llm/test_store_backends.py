"""The call store's contract on every backend (SQLite on one machine, PostgreSQL across machines): the same
key, cache, ledger, claim and resume semantics, and two processes making each unique call once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from rubriclab.llm import CallRecord, CallRequest, Gateway, RoleSpec, open_store
from rubriclab.testing import FakeOpenAIServer


def _rec(key: str, status: str = "ok", text: str = "x", **kw) -> CallRecord:
    return CallRecord(key=key, model="m", role="judge", stage="s", sample_index=0, attempt=0, status=status, text=text,
                      **kw)


def test_cache_never_serves_errors_and_an_ok_row_is_never_replaced(store_url):
    store = open_store(store_url)
    store.put(_rec("a", status="error", text=None, error="boom"))
    assert store.get_ok(["a"]) == {}
    store.put(_rec("a", text="first", extra={"finish_reason": "stop"}, prompt_tokens=3))
    store.put(_rec("a", status="error", text=None, error="later"))
    got = store.get_ok(["a", "b"])
    assert list(got) == ["a"] and got["a"].text == "first" and got["a"].extra == {"finish_reason": "stop"}
    assert got["a"].prompt_tokens == 3
    many = [f"k{i}" for i in range(1500)]  # more keys than one query chunk
    for k in many[::3]:
        store.put(_rec(k))
    assert set(store.get_ok(many)) == set(many[::3])


def test_ledger_counts_calls_retries_and_interrupted_batches(store_url):
    store = open_store(store_url)
    store.put(_rec("a", retries=0, prompt_tokens=10, completion_tokens=2, cost=0.5))
    store.put(_rec("b", status="error", text=None, error="x"))
    store.record_retry("a", "s", "judge", "m", "RateLimitError")
    store.record_retry("c", "s", "judge", "m", "Timeout")  # a call killed before its row was written
    bid = store.record_batch({"stage": "s", "role": "judge", "model": "m", "items": 2, "completed": 0})
    store.record_batch({"stage": "s", "role": "judge", "model": "m", "items": 3, "cache_hits": 1, "completed": 0},
                       bid)
    store.record_batch({"stage": "s", "role": "judge", "model": "m", "items": 1, "completed": 1})
    (row,) = store.ledger()
    assert row == {"stage": "s", "role": "judge", "calls": 2, "ok": 1, "failed": 1, "prompt_tokens": 10,
                   "completion_tokens": 2, "cost": 0.5, "retries": 2, "batches": 2, "items": 4, "cache_hits": 1,
                   "parse_failures": 0, "transport_failures": 0, "interrupted_batches": 1}
    json.dumps(row)  # plain numbers (PostgreSQL sums are Decimal)


def test_claims_are_held_once_and_released(store_url):
    a = open_store(store_url)
    assert a.claim("k") and not a.claim("k")
    holder = a.claim_holder("k")
    assert holder is not None and holder["pid"] == os.getpid()
    before = holder["claimed_at"]
    time.sleep(0.01)
    a.renew("k")
    assert a.claim_holder("k")["claimed_at"] > before
    a.release("k", {**holder, "owner": "someone-else"})  # another owner's release does not drop ours
    assert a.claim_holder("k") is not None
    a.release("k")
    assert a.claim_holder("k") is None and a.claim("k")


def test_embeddings_round_trip(store_url):
    store = open_store(store_url)
    store.put_embeddings("e", {"hello": [0.1, 0.2], "world": [0.3, 0.4]})
    store.put_embeddings("e", {"hello": [0.5, 0.6]})
    assert store.get_embeddings("e", ["hello", "world", "absent"]) == {"hello": [0.5, 0.6], "world": [0.3, 0.4]}
    assert store.get_embeddings("other", ["hello"]) == {}


_WORKER = textwrap.dedent("""
    import json, sys
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
    url, store, lo, hi, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=url, concurrency=8, timeout=10)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"item {i}"}]) for i in range(lo, hi)]
    sys.stdin.readline()  # start together
    results = Gateway(open_store(store), stage="shared", progress=False).run(reqs)
    json.dump({str(i): [r.ok, r.text, r.cached] for i, r in zip(range(lo, hi), results)}, open(out, "w"))
""")


@pytest.mark.timeout(240)
def test_two_worker_processes_make_each_unique_call_once(store_url, tmp_path):
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with FakeOpenAIServer(latency=0.03) as server:
        ranges = [(0, 300), (100, 400)]  # overlapping batches: items 100..299 are asked by both
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, server.url, store_url, str(lo), str(hi),
                                   str(tmp_path / f"out{k}.json")], stdin=subprocess.PIPE, env=env, text=True)
                 for k, (lo, hi) in enumerate(ranges)]
        for p in procs:  # both import (and race to create the schema), then start their batches together
            p.stdin.write("go\n")
            p.stdin.flush()
        assert [p.wait(timeout=200) for p in procs] == [0, 0]
        stats = server.stats()
    outs = [json.loads((tmp_path / f"out{k}.json").read_text()) for k in range(2)]
    assert all(ok for out in outs for ok, _, _ in out.values())
    shared = [str(i) for i in range(100, 300)]
    assert [outs[0][i][1] for i in shared] == [outs[1][i][1] for i in shared]  # one reply, seen by both
    assert stats["requests"] == 400 and set(stats["attempts"].values()) == {1}  # each unique call once
    assert [i for i in shared if not outs[0][i][2] and not outs[1][i][2]] == []  # none made by both
    store = open_store(store_url)
    (row,) = [r for r in store.ledger() if r["stage"] == "shared"]
    assert row["calls"] == 400 and row["items"] == 600 and row["cache_hits"] == 200
    if hasattr(store, "_db") and store_url.endswith(".sqlite"):
        assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert all(store.claim_holder(f"k{i}") is None for i in range(3))


def test_a_dead_owners_claim_is_stale_and_a_live_one_is_not(tmp_path):
    import socket

    from rubriclab.llm._store import claim_is_stale

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host = socket.gethostname()
    dead = {"owner": f"{host}:{child.pid}:abc", "host": host, "pid": child.pid, "claimed_at": time.time()}
    assert claim_is_stale(dead)
    store = open_store(tmp_path / "c.sqlite")
    assert store.claim("k")
    holder = store.claim_holder("k")
    assert not claim_is_stale(holder)  # ours, alive
    assert claim_is_stale({**holder, "claimed_at": time.time() - 10_000})  # not renewed within the lease
    other_host = {**dead, "owner": f"elsewhere:{child.pid}:abc", "host": "elsewhere"}
    assert not claim_is_stale(other_host)  # cannot be checked from here: wait for the lease


def test_a_rerun_on_the_store_makes_no_call(store_url):
    with FakeOpenAIServer() as server:
        os.environ.setdefault("OPENAI_API_KEY", "sk-fake")
        role = RoleSpec(name="judge", model="openai/fake-judge", api_base=server.url, concurrency=4, timeout=10)
        reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"q{i}"}]) for i in range(20)]
        first = Gateway(open_store(store_url), stage="r", progress=False).run(reqs)
        n = server.stats()["requests"]
        again = Gateway(open_store(store_url), stage="r", progress=False).run(reqs)
        assert server.stats()["requests"] == n == 20
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)


def test_a_bad_postgres_url_is_one_clear_line():
    from rubriclab.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^llm.store: cannot connect to postgresql://127.0.0.1:1/x: ") as err:
        open_store("postgresql://u:secretpw@127.0.0.1:1/x")
    assert "secretpw" not in str(err.value) and "\n" not in str(err.value)
