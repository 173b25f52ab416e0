"""Provider processes (``Gateway(provider_processes=N)``, ``llm.provider_processes``): calls to providers over the
network are made by worker processes; the gateway's process keeps the store, the retry layer and parsing, and a
batch gives the same results and records as with the calls made in-process."""

from __future__ import annotations

import asyncio
import hashlib
import operator
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time

import litellm
import pytest

from rubriclab.llm import CallRequest, Gateway, RoleSpec, chat_response, open_store, parse_verdict
from rubriclab.llm._gateway import _describe, _record_from_response
from rubriclab.llm._pacing import TURNS
from rubriclab.llm._processes import ProviderProcessError, ProviderProcesses, reply_of, response_of
from rubriclab.llm._retry import RemoteFailure, is_retryable, retry_after_seconds
from rubriclab.secrets import REDACTED
from rubriclab.testing import FakeOpenAIServer, FaultPlan, scripted_model


def verdict_responder(body: dict) -> str:
    text = body["messages"][0]["content"]
    return f"Comparing both answers... [[{'AB'[int(hashlib.sha1(text.encode()).hexdigest(), 16) % 2]}]]"


def _requests(url: str, n: int, tag: str = "pair", concurrency: int = 16, timeout: float = 10.0,
              max_retries: int = 4) -> list[CallRequest]:
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=url, concurrency=concurrency, timeout=timeout,
                    max_retries=max_retries, parse_retries=2)
    return [CallRequest(role=role, messages=[{"role": "user", "content": f"{tag} {i}: which is better?"}],
                        parser=parse_verdict) for i in range(n)]


@pytest.fixture
def fake_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test")


@pytest.fixture(scope="module")
def processes():
    """Two provider processes shared by this module's gateways (each start imports litellm: ~2-3 s)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "sk-fake-test")  # the workers inherit the environment they start in
        procs = ProviderProcesses(2, TURNS)
        yield procs
        procs.close()


def _gateway(store, processes: ProviderProcesses, stage: str) -> Gateway:
    gw = Gateway(store, stage=stage, progress=False, provider_processes=2)
    gw.processes = processes
    return gw


def _no_calls_here(monkeypatch) -> None:
    """This process's litellm refuses to call: whatever succeeds was made by a provider process."""
    async def refuse(*_, **__):
        raise AssertionError("litellm.acompletion called in the gateway's process")
    monkeypatch.setattr(litellm, "acompletion", refuse)


def _when(server: FakeOpenAIServer, count: int, action) -> threading.Thread:
    """Run ``action`` in a thread once the server has seen ``count`` requests (30 s at most): a kill or a cancel
    that lands while calls are in flight, however slow the machine."""
    def wait() -> None:
        deadline = time.time() + 30
        while time.time() < deadline and server.stats()["requests"] < count:
            time.sleep(0.005)
        action()
    thread = threading.Thread(target=wait)
    thread.start()
    return thread


def _kill(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _waitable(pid: int) -> bool:
    """Whether the child ``pid`` has ended and can be reaped (not reaping it): a killed process's main thread shows
    as a zombie before its other threads have ended, and only then does its parent see it end."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _rows(store) -> list[tuple]:
    return sorted(store._db.execute(
        "SELECT key, status, text, prompt_tokens, completion_tokens, attempt, extra FROM calls").fetchall())


@pytest.mark.timeout(120)
def test_the_workers_make_the_calls_and_the_records_match_in_process_ones(tmp_path, fake_key, processes,
                                                                          monkeypatch):
    with FakeOpenAIServer(latency=0.01, responder=verdict_responder) as server:
        here = open_store(tmp_path / "here.sqlite")
        expected = Gateway(here, stage="s", progress=False).run(_requests(server.url, 60))
        _no_calls_here(monkeypatch)
        served = {w.proc.pid: w.served for w in processes.workers}  # none yet when this test runs first
        there = open_store(tmp_path / "there.sqlite")
        results = _gateway(there, processes, "s").run(_requests(server.url, 60))
    assert all(r.ok for r in expected) and all(r.ok for r in results)
    assert [r.value for r in results] == [r.value for r in expected]
    assert [(r.text, r.prompt_tokens, r.completion_tokens, r.attempts) for r in results] == \
        [(r.text, r.prompt_tokens, r.completion_tokens, r.attempts) for r in expected]
    assert _rows(there) == _rows(here)  # same keys, texts, token counts and extras (finish_reason) in the store
    per_worker = [w.served - served.get(w.proc.pid, 0) for w in processes.workers]
    assert sum(per_worker) == 60 and min(per_worker) > 0, per_worker  # both workers served this batch


@pytest.mark.timeout(180)
def test_transport_faults_are_retried_by_the_gateways_one_retry_layer(tmp_path, fake_key, processes, monkeypatch):
    waits: list[int] = []
    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: waits.append(retry) or 0.02)
    plan = FaultPlan(rate=0.4, kinds=("429", "500", "garbage", "truncated", "drop"), seed=3, retry_after=0.05)
    with FakeOpenAIServer(latency=0.01, responder=verdict_responder) as clean:
        expected = Gateway(open_store(tmp_path / "clean.sqlite"), stage="f", progress=False).run(
            _requests(clean.url, 150))
    _no_calls_here(monkeypatch)
    store = open_store(tmp_path / "faulty.sqlite")
    with FakeOpenAIServer(latency=0.01, responder=verdict_responder, faults=plan) as server:
        results = _gateway(store, processes, "f").run(_requests(server.url, 150))
        faults = server.stats()["faults"]
    assert all(r.ok for r in results), [r.error or r.parse_error for r in results if not r.ok][:3]
    assert [r.value for r in results] == [r.value for r in expected]
    assert faults["429"] > 0 and faults["500"] > 0 and faults["garbage"] > 0
    n_faults = sum(faults.values())
    assert sum(r.retries for r in results) == n_faults  # each fault retried once, by the gateway's layer
    assert len(waits) == n_faults - faults["429"]  # a 429's Retry-After crossed the process boundary: no backoff
    ledger = next(r for r in store.ledger() if r["stage"] == "f")
    assert ledger["retries"] == n_faults


@pytest.mark.timeout(120)
def test_a_final_error_names_the_providers_error_class_as_in_process(tmp_path, fake_key, processes, monkeypatch):
    url = "http://127.0.0.1:9/v1"  # nothing listens: a connection error, retried, then recorded
    here = Gateway(open_store(tmp_path / "a.sqlite"), stage="e", progress=False).run(
        _requests(url, 2, max_retries=1, timeout=2))
    _no_calls_here(monkeypatch)
    there = _gateway(open_store(tmp_path / "b.sqlite"), processes, "e").run(_requests(url, 2, max_retries=1, timeout=2))
    assert all(not r.ok and r.retries == 1 for r in here + there)
    assert [r.error for r in there] == [r.error for r in here]  # litellm's class and message, not the wrapper's
    assert here[0].error.startswith("InternalServerError: ") and "Connection error" in here[0].error


@pytest.mark.timeout(180)
def test_a_killed_worker_fails_over_and_the_next_batch_replaces_it(tmp_path, fake_key, processes, monkeypatch):
    monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: 0.02)
    victim = processes.workers[0].proc.pid if processes.workers else None
    store = open_store(tmp_path / "k.sqlite")
    with FakeOpenAIServer(latency=0.6, responder=verdict_responder) as server:
        gw = _gateway(store, processes, "k")
        if victim is None:  # the module's first batch starts the workers
            gw.run(_requests(server.url, 2, tag="start"))
            victim = processes.workers[0].proc.pid
        killer = _when(server, server.stats()["requests"] + 16, lambda: _kill([victim]))  # the first 16 in flight
        results = gw.run(_requests(server.url, 32))
        killer.join()
        assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
        assert victim not in processes.pids and len(processes.pids) == 1
        retried = [row for row in store._db.execute("SELECT reason FROM retry_events").fetchall()]
        assert retried and all("ProviderProcessExited" in e and "SIGKILL" in e for (e,) in retried), retried
        assert sum(r.retries for r in results) == len(retried)
        again = gw.run(_requests(server.url, 4, tag="again"))
    assert all(r.ok for r in again) and len(processes.pids) == 2 and victim not in processes.pids


@pytest.mark.timeout(180)
@pytest.mark.parametrize("restarts", [0, 1])
def test_when_every_worker_dies_mid_batch_the_rest_restart_them_or_fail_named(tmp_path, fake_key, processes,
                                                                              monkeypatch, restarts):
    monkeypatch.setattr(processes, "restarts_per_batch", restarts)
    store = open_store(tmp_path / "d.sqlite")
    with FakeOpenAIServer(latency=0.6, responder=verdict_responder) as server:
        gw = _gateway(store, processes, "d")
        gw.run(_requests(server.url, 2, tag="start"))  # both workers up
        victims = list(processes.pids)
        killer = _when(server, server.stats()["requests"] + 4, lambda: _kill(victims))  # the first 4 in flight
        results = gw.run(_requests(server.url, 12, concurrency=4, max_retries=0))
        killer.join()
        in_flight = [r for r in results if "with this call in flight" in (r.error or "")]
        # the 4 calls in flight fail as the workers end (a call sent between the two kills too)
        assert len(in_flight) >= 4 and all(r.error.startswith("ProviderProcessExited: ") for r in in_flight)
        rest = [r for r in results if r not in in_flight]
        assert rest, [r.error for r in results]
        if restarts:  # the rest found no worker, started two and were answered
            assert all(r.ok for r in rest), [r.error for r in rest]
            assert len(processes.pids) == 2 and not set(victims) & set(processes.pids)
        else:
            assert all("every provider process of this batch has ended" in r.error for r in rest)
        again = gw.run(_requests(server.url, 4, tag="again"))
    assert all(r.ok for r in again) and len(processes.pids) == 2 and not set(victims) & set(processes.pids)


def test_in_process_models_never_start_workers(tmp_path):
    model = scripted_model("procs-local", lambda messages, params: "[[A]]")
    role = RoleSpec(name="judge", model=model)
    gw = Gateway(open_store(tmp_path / "l.sqlite"), stage="l", progress=False, provider_processes=2)
    results = gw.run([CallRequest(role=role, messages=[{"role": "user", "content": f"q{i}"}], parser=parse_verdict)
                      for i in range(3)])
    assert [r.value for r in results] == ["A"] * 3 and gw.processes is None


def test_a_reply_crosses_the_process_boundary_with_what_the_record_reads():
    role = RoleSpec(name="judge", model="openai/x", max_tokens=8)
    req = CallRequest(role=role, messages=[{"role": "user", "content": "q"}])
    cases = [chat_response("openai/x", "[[A", usage={"prompt_tokens": 9, "completion_tokens": 8, "total_tokens": 17},
                           logprobs={"content": [{"token": "[[", "logprob": -0.25, "top_logprobs": []}]},
                           finish_reason="length"),
             chat_response("openai/x", "ab ab ab", finish_reason="repetition", loop={"period": 1, "repeats": 64})]
    cases[0]._hidden_params["response_cost"] = 0.0125
    for resp in cases:
        back = response_of(pickle.loads(pickle.dumps(reply_of(resp, 0.5))))
        a = _record_from_response(resp, req, req.messages, {}, "k", 0, "s", 0.0, 0)
        b = _record_from_response(back, req, req.messages, {}, "k", 0, "s", 0.0, 0)
        assert (b.text, b.extra, b.prompt_tokens, b.completion_tokens, b.cost) == \
            (a.text, a.extra, a.prompt_tokens, a.completion_tokens, a.cost)
    assert b.extra["finish_reason"] == "repetition"
    assert a.cost == 0.0 and response_of(reply_of(cases[0], 0.5))._hidden_params["response_cost"] == 0.0125


def test_a_remote_failure_keeps_its_class_retry_after_and_is_redacted_here():
    exc = pickle.loads(pickle.dumps(RemoteFailure("RateLimitError", "slow down, key sk-secret-123456", True, 1.5)))
    assert is_retryable(exc) and retry_after_seconds(exc) == 1.5
    assert not is_retryable(RemoteFailure("AuthenticationError", "no", False, None))
    assert _describe(exc, ["sk-secret-123456"]) == f"RateLimitError: slow down, key {REDACTED}"


_ORPHAN_CHILD = textwrap.dedent("""
    import sys
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
    url, path = sys.argv[1], sys.argv[2]
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=url, concurrency=4, timeout=30)
    gw = Gateway(open_store(path), stage="o", progress=False, provider_processes=2)
    gw.run([CallRequest(role=role, messages=[{"role": "user", "content": "warm"}])])
    print(*gw.processes.pids, flush=True)
    gw.run([CallRequest(role=role, messages=[{"role": "user", "content": f"q{i}"}]) for i in range(40)])
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.timeout(120)
def test_workers_end_when_the_gateways_process_is_killed(tmp_path, fake_key):
    latency = 1.5
    with FakeOpenAIServer(latency=latency, responder=verdict_responder) as server:
        child = subprocess.Popen([sys.executable, "-c", _ORPHAN_CHILD, server.url, str(tmp_path / "o.sqlite")],
                                 stdout=subprocess.PIPE, text=True)
        pids = [int(p) for p in child.stdout.readline().split()]
        sent = time.time()
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        deadline = time.time() + 30
        while time.time() < deadline and server.stats()["requests"] < 2:  # the second batch's calls are in flight
            time.sleep(0.05)
        assert server.stats()["requests"] >= 2
        child.send_signal(signal.SIGKILL)
        child.wait()
        deadline = time.time() + 20
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        time.sleep(max(0.0, sent + latency + 0.3 - time.time()))  # the server's handlers end before it stops
    assert not any(_alive(p) for p in pids)


def test_close_stops_the_workers(tmp_path, fake_key):
    with FakeOpenAIServer(responder=verdict_responder) as server:
        gw = Gateway(open_store(tmp_path / "c.sqlite"), stage="c", progress=False, provider_processes=2)
        assert gw.run(_requests(server.url, 4))[0].ok
        procs = [w.proc for w in gw.processes.workers]
        gw.close()
    assert gw.processes is None and [p.poll() for p in procs] == [0, 0]


def test_provider_processes_below_one_is_refused(tmp_path):
    with pytest.raises(ValueError, match="provider_processes must be at least 1"):
        Gateway(open_store(tmp_path / "x.sqlite"), provider_processes=0)


def test_llm_provider_processes_reaches_the_stage_gateway_and_bad_values_are_refused(tmp_path):
    from rubriclab.config import load_params
    from rubriclab.errors import ConfigError
    from rubriclab.llm import gateway_from_params

    (tmp_path / "params.yaml").write_text("llm:\n  provider_processes: 2\n")
    assert gateway_from_params(load_params(tmp_path / "params.yaml"), "audit", tmp_path,
                               progress=False).provider_processes == 2
    (tmp_path / "params.yaml").write_text("llm: {}\n")
    assert gateway_from_params(load_params(tmp_path / "params.yaml"), "audit", tmp_path,
                               progress=False).provider_processes == 1
    with pytest.raises(ConfigError, match=r"llm\.provider_processes: got 0"):
        load_params(tmp_path / "params.yaml", ["llm.provider_processes=0"])


class _Unreadable:
    """Pickles anywhere; unpickling it raises (as an object whose class only the caller's ``__main__`` has)."""

    def __reduce__(self):
        return operator.truediv, (1, 0)


def _served(processes: ProviderProcesses) -> int:
    return sum(w.served for w in processes.workers)


@pytest.mark.timeout(120)
def test_arguments_that_cannot_cross_fail_that_call_and_say_how_to_fix_it(fake_key, processes):
    with FakeOpenAIServer(responder=verdict_responder) as server:
        base = {"model": "openai/fake-judge", "api_base": server.url, "timeout": 10, "num_retries": 0,
                "max_retries": 0, "messages": [{"role": "user", "content": "pair 1"}]}

        async def calls():
            await processes.attach()
            try:
                results = []
                for extra in ({"metadata": {"f": lambda: 0}}, {"metadata": {"x": _Unreadable()}}, {}):
                    try:
                        results.append(await processes.acompletion(("g", None), **base, **extra))
                    except RemoteFailure as exc:
                        results.append(exc)
                return results
            finally:
                processes.detach()

        unsendable, unreadable, fine = asyncio.run(calls())
    assert isinstance(unsendable, RemoteFailure) and not unsendable.retryable
    assert "cannot be sent to a provider process" in str(unsendable) and "llm.provider_processes: 1" in str(unsendable)
    assert isinstance(unreadable, RemoteFailure) and unreadable.type_name == "ZeroDivisionError"
    assert "could not read this call's arguments" in str(unreadable) and not unreadable.retryable
    resp, latency = fine  # the connection survived both
    assert resp.choices[0].message.content.startswith("Comparing") and latency > 0


@pytest.mark.timeout(120)
def test_a_cancelled_batch_cancels_its_calls_in_the_workers(tmp_path, fake_key, processes):
    with FakeOpenAIServer(latency=1.0, responder=verdict_responder) as server:
        gw = _gateway(open_store(tmp_path / "x.sqlite"), processes, "x")
        gw.run(_requests(server.url, 2, tag="start"))
        before = _served(processes)

        async def cancelled():
            batch = asyncio.ensure_future(gw.arun(_requests(server.url, 4, tag="cancelled")))
            while server.stats()["requests"] < 2 + 4:  # all 4 in flight
                await asyncio.sleep(0.005)
            batch.cancel()
            with pytest.raises(asyncio.CancelledError):
                await batch

        asyncio.run(cancelled())
        # the next batch outlasts the replies the cancelled calls would have sent (at ~1.0 s)
        assert all(r.ok for r in gw.run(_requests(server.url, 2, tag="next")))
        assert server.stats()["requests"] == 2 + 4 + 2
    assert _served(processes) - before == 2  # only the next batch's replies came back


def test_a_worker_that_cannot_start_stops_the_batch_with_a_clear_error(tmp_path, fake_key):
    procs = ProviderProcesses(2, TURNS, python="/bin/false")  # exits at once
    gw = Gateway(open_store(tmp_path / "f.sqlite"), stage="f", progress=False, provider_processes=2)
    gw.processes = procs
    with pytest.raises(ProviderProcessError, match=r"did not start: .*exit 1.*llm\.provider_processes: 1"):
        gw.run(_requests("http://127.0.0.1:9/v1", 2))
    assert procs.pids == []
    procs.close()


@pytest.mark.timeout(120)
def test_a_price_registered_here_costs_the_calls_the_workers_make(tmp_path, fake_key, processes, monkeypatch):
    monkeypatch.setattr(litellm, "model_cost", dict(litellm.model_cost))  # register_model edits it: restored after
    litellm.register_model({"openai/fake-priced": {"input_cost_per_token": 1e-3, "output_cost_per_token": 2e-3,
                                                   "litellm_provider": "openai", "mode": "chat"}})
    with FakeOpenAIServer(responder=verdict_responder) as server:
        reqs = _requests(server.url, 3)
        role = reqs[0].role.with_(model="openai/fake-priced")
        reqs = [CallRequest(role=role, messages=r.messages, parser=parse_verdict) for r in reqs]
        here = Gateway(open_store(tmp_path / "h.sqlite"), stage="p", progress=False).run(reqs)
        there = _gateway(open_store(tmp_path / "t.sqlite"), processes, "p").run(reqs)
    assert all(r.ok and r.cost > 0 for r in here + there)
    assert [r.cost for r in there] == pytest.approx([r.cost for r in here])


@pytest.mark.timeout(120)
def test_workers_that_died_between_batches_are_replaced_by_the_next(tmp_path, fake_key, processes, monkeypatch):
    monkeypatch.setattr(processes, "restarts_per_batch", 0)  # no rescue mid-batch: the next batch's start must see it
    store = open_store(tmp_path / "b.sqlite")
    with FakeOpenAIServer(latency=0.05, responder=verdict_responder) as server:
        gw = _gateway(store, processes, "b")
        gw.run(_requests(server.url, 2, tag="start"))
        victims = list(processes.pids)
        _kill(victims)
        deadline = time.time() + 20
        while time.time() < deadline and not all(_waitable(p) for p in victims):
            time.sleep(0.01)
        results = gw.run(_requests(server.url, 8, tag="after"))
    assert all(r.ok and r.retries == 0 for r in results), [r.error for r in results]
    assert store._db.execute("SELECT COUNT(*) FROM retry_events").fetchone()[0] == 0
    assert len(processes.pids) == 2 and not set(victims) & set(processes.pids)


@pytest.mark.timeout(120)
def test_a_restart_that_fails_mid_batch_fails_the_calls_named_not_a_hang(tmp_path, fake_key, processes,
                                                                         monkeypatch):
    with FakeOpenAIServer(latency=0.6, responder=verdict_responder) as server:
        gw = _gateway(open_store(tmp_path / "r.sqlite"), processes, "r")
        gw.run(_requests(server.url, 2, tag="start"))
        victims = list(processes.pids)
        monkeypatch.setattr(processes, "python", "/bin/false")  # the restart's workers exit at once
        killer = _when(server, server.stats()["requests"] + 4, lambda: _kill(victims))
        results = gw.run(_requests(server.url, 12, concurrency=4, max_retries=1))
        killer.join()
        assert not any(r.ok for r in results)
        assert all(r.error.startswith(("ProviderProcessError: ", "ProviderProcessExited: ")) for r in results)
        started = [r.error for r in results if r.error.startswith("ProviderProcessError: ")]
        assert started and all("/bin/false" in e and "did not start" in e for e in started), started
        processes.python = sys.executable
        again = gw.run(_requests(server.url, 4, tag="again"))
    assert all(r.ok for r in again) and len(processes.pids) == 2
