"""Tests for the fake OpenAI-compatible server (rubriclab.testing._fake_server)."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from rubriclab.testing import FAULT_KINDS, FakeOpenAIServer, FaultPlan, default_responder, fake_embedding, request_key

MSG = [{"role": "user", "content": "Which answer is better?"}]


def _post(url: str, body: dict, path: str = "/chat/completions", timeout: float = 5.0) -> tuple[int, Any, bytes]:
    """POST with raw aiohttp; returns (status, headers, body bytes)."""

    async def go() -> tuple[int, Any, bytes]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.post(url + path, json=body) as r:
                return r.status, r.headers, await r.read()

    return asyncio.run(go())


def _get(url: str) -> Any:
    async def go() -> Any:
        async with aiohttp.ClientSession() as s:
            async with s.get(url) as r:
                assert r.status == 200
                return await r.json()

    return asyncio.run(go())


def _content(raw: bytes) -> str:
    return json.loads(raw)["choices"][0]["message"]["content"]


# -- normal operation --------------------------------------------------------------------------


def test_litellm_openai_provider_roundtrip() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch of the cost map
    import litellm

    with FakeOpenAIServer() as server:
        resp = asyncio.run(
            litellm.acompletion(
                model="openai/fake", api_base=server.url, api_key="sk-fake", messages=MSG, temperature=0.7, seed=3
            )
        )
        content = resp.choices[0].message.content
        assert content.startswith("echo:")
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens > 0
        emb = litellm.embedding(model="openai/fake", api_base=server.url, api_key="sk-fake", input=["x", "y"])
        vec = emb.data[0]["embedding"]
        assert len(vec) == 8 and math.isclose(sum(v * v for v in vec), 1.0, rel_tol=1e-4)
        st = server.stats()
    assert st["completions_ok"] == 1 and st["embeddings_ok"] == 1 and st["requests"] == 2
    assert sum(st["faults"].values()) == 0


def test_completion_shape_and_determinism() -> None:
    with FakeOpenAIServer() as server:
        body = {"model": "fake", "messages": MSG, "temperature": 1.0, "seed": 0}
        status, _, raw = _post(server.url, body)
        assert status == 200
        data = json.loads(raw)
        assert data["object"] == "chat.completion" and data["model"] == "fake" and data["id"]
        assert data["choices"][0]["finish_reason"] == "stop"
        assert set(data["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
        assert _content(raw) == default_responder(body)
        assert _content(_post(server.url, body)[2]) == _content(raw)  # identical request → identical reply
        # Samples distinguished by seed or user differ; so do temperatures.
        assert _content(_post(server.url, {**body, "seed": 1})[2]) != _content(raw)
        assert _content(_post(server.url, {**body, "user": "sample-1"})[2]) != _content(raw)
        assert _content(_post(server.url, {**body, "temperature": 0.0})[2]) != _content(raw)


def test_json_response_format() -> None:
    body = {"messages": MSG, "response_format": {"type": "json_object"}}
    assert isinstance(json.loads(default_responder(body)), dict)
    schema = {
        "type": "object",
        "properties": {"verdict": {"enum": ["A", "B"]}, "score": {"type": "integer"}, "why": {"type": "string"}},
        "required": ["verdict", "score"],
    }
    body = {"messages": MSG, "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}}}
    with FakeOpenAIServer() as server:
        out = json.loads(_content(_post(server.url, body)[2]))
    assert out == {"verdict": "A", "score": 0}


def test_custom_responder_models_and_stats_endpoints() -> None:
    with FakeOpenAIServer(responder=lambda body: "A") as server:
        assert _content(_post(server.url, {"messages": MSG})[2]) == "A"
        models = _get(server.url + "/models")
        assert models["data"][0]["id"] == "fake"
        stats = _get(server.url.removesuffix("/v1") + "/stats")
    assert stats["requests"] == 1 and stats["completions_ok"] == 1


def test_embeddings_deterministic_and_base64() -> None:
    with FakeOpenAIServer() as server:
        _, _, raw = _post(server.url, {"model": "fake", "input": ["hello", "world"]}, path="/embeddings")
        data = json.loads(raw)["data"]
        assert data[0]["embedding"] == pytest.approx(fake_embedding("hello"))
        assert data[0]["embedding"] != data[1]["embedding"]
        _, _, raw = _post(
            server.url, {"model": "fake", "input": "hello", "encoding_format": "base64"}, path="/embeddings"
        )
        vec = struct.unpack("<8f", base64.b64decode(json.loads(raw)["data"][0]["embedding"]))
        assert vec == pytest.approx(fake_embedding("hello"), abs=1e-6)


def test_bad_body_is_400() -> None:
    async def go(url: str) -> int:
        async with aiohttp.ClientSession() as s:
            async with s.post(url + "/chat/completions", data=b"not json") as r:
                return r.status

    with FakeOpenAIServer() as server:
        assert asyncio.run(go(server.url)) == 400


# -- faults ------------------------------------------------------------------------------------


def _always(kind: str, **kw: Any) -> FaultPlan:
    return FaultPlan(rate=1.0, kinds=(kind,), **kw)


def test_fault_429_has_retry_after_then_succeeds() -> None:
    with FakeOpenAIServer(faults=_always("429", retry_after=0.25)) as server:
        status, headers, raw = _post(server.url, {"messages": MSG})
        assert status == 429
        assert float(headers["Retry-After"]) == 0.25
        assert json.loads(raw)["error"]["type"] == "rate_limit_error"
        status, _, raw = _post(server.url, {"messages": MSG})  # max_faults_per_key=1: second try served
        assert status == 200 and _content(raw).startswith("echo:")
        st = server.stats()
    assert st["faults"]["429"] == 1 and st["completions_ok"] == 1


def test_fault_500() -> None:
    with FakeOpenAIServer(faults=_always("500")) as server:
        status, _, raw = _post(server.url, {"messages": MSG})
    assert status == 500 and json.loads(raw)["error"]["type"] == "server_error"


def test_fault_hang_times_out_client() -> None:
    with FakeOpenAIServer(faults=_always("hang", hang_seconds=3.0)) as server:
        t0 = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            _post(server.url, {"messages": MSG}, timeout=0.3)
        assert time.monotonic() - t0 < 2.5
        assert server.stats()["faults"]["hang"] == 1
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2.5  # stop() does not wait for the hang to finish


@pytest.mark.parametrize("i", range(6))
def test_fault_garbage_is_not_a_chat_completion(i: int) -> None:
    # a transport fault: HTML, bytes, JSON without choices, empty choices or a message without content
    body = {"messages": [{"role": "user", "content": f"garbage {i}"}]}
    with FakeOpenAIServer(faults=_always("garbage")) as server:
        status, _, raw = _post(server.url, body)
        assert status == 200
        try:
            payload = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            payload = None
        choices = payload.get("choices") if isinstance(payload, dict) else None
        assert not choices or choices[0]["message"]["content"] is None
        assert server.stats()["completions_ok"] == 0


def test_fault_unparseable_is_a_well_formed_completion_no_parser_accepts() -> None:
    body = {"messages": MSG, "response_format": {"type": "json_object"}}
    with FakeOpenAIServer(faults=_always("unparseable")) as server:
        status, _, raw = _post(server.url, body)
        assert status == 200
        content = _content(raw)  # well-formed completion...
        assert content and content != default_responder(body) and not content.startswith("echo:")
        with pytest.raises(json.JSONDecodeError):  # ...whose content a parser rejects
            json.loads(content)
        assert not set(content.split()) & {"A", "B", "Yes", "No", "yes", "no"}
        assert server.stats()["completions_ok"] == 0


def test_fault_truncated_body_fails_to_parse() -> None:
    with FakeOpenAIServer(faults=_always("truncated")) as server:
        status, headers, raw = _post(server.url, {"messages": MSG})
    assert status == 200
    assert int(headers["Content-Length"]) == len(raw) > 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)


def test_fault_drop_raises_connection_error() -> None:
    with FakeOpenAIServer(faults=_always("drop")) as server:
        with pytest.raises(aiohttp.ClientConnectionError):
            _post(server.url, {"messages": MSG})
        assert _post(server.url, {"messages": MSG})[0] == 200  # server keeps serving other connections
        assert server.stats()["faults"]["drop"] == 1


def test_fault_plan_is_deterministic_and_rate_shaped() -> None:
    keys = [request_key({"messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(4000)]
    a = [FaultPlan(rate=0.3, seed=7).decide(k) for k in keys]
    assert a == [FaultPlan(rate=0.3, seed=7).decide(k) for k in keys]
    assert a != [FaultPlan(rate=0.3, seed=8).decide(k) for k in keys]
    faulted = [x for x in a if x is not None]
    assert 0.25 < len(faulted) / len(keys) < 0.35
    assert set(faulted) == set(FAULT_KINDS)
    assert all(FaultPlan(rate=0.0).decide(k) is None for k in keys[:100])
    # Key is independent of JSON key order.
    assert request_key({"a": 1, "b": [1, 2]}) == request_key({"b": [1, 2], "a": 1})
    with pytest.raises(ValueError):
        FaultPlan(rate=0.1, kinds=("teapot",))


def test_fault_plan_weights_draw_kinds_in_proportion() -> None:
    keys = [request_key({"messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(6000)]
    plan = FaultPlan(rate=1.0, kinds=("429", "hang", "500"), weights=(2.0, 1.0, 0.0), seed=3)
    drawn = [plan.decide(k) for k in keys]
    assert set(drawn) == {"429", "hang"}  # a kind of weight 0 is never drawn
    assert 0.62 < drawn.count("429") / len(drawn) < 0.71  # 2:1
    assert drawn == [plan.decide(k) for k in keys]
    # the rate draw is the same with or without weights: the same keys are faulted
    unweighted = FaultPlan(rate=0.3, seed=3)
    weighted = FaultPlan(rate=0.3, seed=3, weights=(1, 1, 0.25, 1, 1, 1))
    assert [unweighted.decide(k) is None for k in keys] == [weighted.decide(k) is None for k in keys]
    hangs = [weighted.decide(k) for k in keys].count("hang")
    assert 0 < hangs < 0.5 * [unweighted.decide(k) for k in keys].count("hang")
    for bad in ((1.0,), (1.0, -1.0, 1.0), (0.0, 0.0, 0.0)):
        with pytest.raises(ValueError, match="one non-negative weight per kind"):
            FaultPlan(rate=0.1, kinds=("429", "hang", "500"), weights=bad)


def test_key_faulted_at_most_max_faults_per_key() -> None:
    plan = FaultPlan(rate=1.0, kinds=("500",), max_faults_per_key=2)
    body = {"messages": MSG}
    with FakeOpenAIServer(faults=plan) as server:
        statuses = [_post(server.url, body)[0] for _ in range(4)]
        other = _post(server.url, {"messages": MSG, "seed": 1})[0]
        st = server.stats()
    assert statuses == [500, 500, 200, 200] and other == 500
    assert st["attempts"][request_key(body)] == 4
    assert st["faults"]["500"] == 3 and st["completions_ok"] == 2 and st["requests"] == 5


def test_mixed_plan_every_item_eventually_completes() -> None:
    plan = FaultPlan(rate=0.5, kinds=("429", "500", "garbage", "truncated", "drop"), seed=1)

    async def run_all(url: str) -> int:
        done = 0
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
            for i in range(40):
                for _ in range(3):
                    try:
                        async with s.post(
                            url + "/chat/completions", json={"messages": [{"role": "user", "content": str(i)}]}
                        ) as r:
                            if r.status == 200 and (_content(await r.read()) or "").startswith("echo:"):
                                done += 1
                                break
                    except (aiohttp.ClientError, ValueError, KeyError, IndexError, TypeError):  # garbage bodies
                        pass
        return done

    with FakeOpenAIServer(faults=plan) as server:
        assert asyncio.run(run_all(server.url)) == 40
        st = server.stats()
    assert st["completions_ok"] == 40 and 5 < sum(st["faults"].values()) < 35


# -- latency and subprocess mode ---------------------------------------------------------------


async def _together(url: str, n: int) -> float:
    """Seconds for ``n`` chat requests sent at once, each answered 200."""
    async with aiohttp.ClientSession() as s:

        async def one(i: int) -> None:
            async with s.post(url + "/chat/completions", json={"messages": MSG, "seed": i}) as r:
                assert r.status == 200
                await r.read()

        t0 = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.monotonic() - t0


def test_latency_is_applied_without_blocking() -> None:
    with FakeOpenAIServer(latency=0.3) as server:
        t0 = time.monotonic()
        assert _post(server.url, {"messages": MSG})[0] == 200
        assert time.monotonic() - t0 >= 0.25
        # 20 concurrent requests overlap their sleeps: far less than 20 × 0.3 s.
        assert asyncio.run(_together(server.url, 20)) < 3.0


def test_latency_jitter_draws_each_delay_from_its_range_reproducibly() -> None:
    a, b = FakeOpenAIServer(latency=0.2, latency_jitter=0.1), FakeOpenAIServer(latency=0.2, latency_jitter=0.1)
    draws = [a._delay() for _ in range(300)]
    assert draws == [b._delay() for _ in range(300)]  # the same seed, the same delays
    assert all(0.1 <= d <= 0.3 for d in draws) and min(draws) < 0.12 and max(draws) > 0.28
    assert [FakeOpenAIServer(latency=0.2)._delay() for _ in range(3)] == [0.2, 0.2, 0.2]
    with pytest.raises(ValueError, match=r"latency_jitter must be between 0 and latency \(0.1\), got 0.2"):
        FakeOpenAIServer(latency=0.1, latency_jitter=0.2)


def test_the_command_line_refuses_a_jitter_larger_than_the_latency(capsys) -> None:
    from rubriclab.testing.__main__ import _parse

    assert _parse(["--latency", "0.2", "--latency-jitter", "0.05"]).latency_jitter == 0.05
    with pytest.raises(SystemExit):
        _parse(["--latency", "0.1", "--latency-jitter", "0.2"])
    assert "--latency-jitter must be between 0 and --latency (0.1), got 0.2" in capsys.readouterr().err


def test_stats_count_the_most_chat_requests_answered_at_once() -> None:
    with FakeOpenAIServer(latency=0.3) as server:
        assert server.stats()["peak_in_flight"] == 0
        asyncio.run(_together(server.url, 5))
        assert _post(server.url, {"messages": MSG})[0] == 200  # one at a time after: the peak stays
        assert server.stats()["peak_in_flight"] == 5


def test_subprocess_mode_prints_url_and_serves() -> None:
    import rubriclab.testing._fake_server as fs

    src = str(Path(fs.__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rubriclab.testing", "--port", "0", "--latency", "0.01", "--fault-rate", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), proc.stderr.read() if not url else url
        status, _, raw = _post(url, {"messages": MSG})
        assert status == 200 and _content(raw) == default_responder({"messages": MSG})
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0  # SIGTERM is handled as a clean shutdown
