"""Per-model limits: bounded concurrency, requests/min and tokens/min."""

from __future__ import annotations

import asyncio
import time

import litellm

from rubriclab.llm import CallRequest, RoleSpec, register_provider
from rubriclab.llm._limits import ModelLimiter, _Bucket


class SlowProvider(litellm.CustomLLM):
    """Sleeps asynchronously and records how many calls were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = self.peak = self.calls = 0

    async def acompletion(self, model, messages, *args, **kwargs):
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.02)
        self.in_flight -= 1
        return litellm.ModelResponse(model=model, choices=[{"index": 0, "finish_reason": "stop",
                                                            "message": {"role": "assistant", "content": "ok"}}])


def test_concurrency_per_model_is_bounded(gateway):
    slow = SlowProvider()
    register_provider("slowprov", slow)
    role = RoleSpec(name="judge", model="slowprov/m", concurrency=3)
    reqs = [CallRequest(role=role, messages=[{"role": "user", "content": str(i)}]) for i in range(30)]
    assert all(r.ok for r in gateway.run(reqs))
    assert slow.calls == 30 and slow.peak == 3


def test_token_bucket_waits_once_the_burst_is_spent():
    async def go():
        bucket = _Bucket(6000)  # 100 per second, a minute's worth of burst
        t0 = time.perf_counter()
        await bucket.take(6000)
        burst = time.perf_counter() - t0
        await bucket.take(30)  # must wait for ~0.3 s of refill
        return burst, time.perf_counter() - t0 - burst

    burst, wait = asyncio.run(go())
    assert burst < 0.1 and wait >= 0.25


def test_tpm_refunds_unused_estimate():
    async def go():
        lim = ModelLimiter(concurrency=1, tpm=1000)
        await lim.acquire(800)
        lim.release(800, used_tokens=100)
        return lim.tpm.level

    assert asyncio.run(go()) >= 899
