"""Per-model concurrency and rpm/tpm limits (asyncio, one event loop)."""

from __future__ import annotations

import asyncio
import time


class _Bucket:
    """Token bucket refilled continuously at ``rate_per_min``; capacity one minute's worth."""

    def __init__(self, rate_per_min: float) -> None:
        self.rate = rate_per_min / 60.0
        self.capacity = rate_per_min
        self.level = rate_per_min
        self.stamp = time.monotonic()

    async def take(self, amount: float) -> None:
        amount = min(amount, self.capacity)
        while True:
            now = time.monotonic()
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.level >= amount:
                self.level -= amount
                return
            await asyncio.sleep((amount - self.level) / self.rate)

    def refund(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


class ModelLimiter:
    """Bounded concurrency plus optional requests/min and tokens/min for one model."""

    def __init__(self, concurrency: int, rpm: float | None = None, tpm: float | None = None) -> None:
        self.semaphore = asyncio.Semaphore(max(1, int(concurrency)))
        self.rpm = _Bucket(rpm) if rpm else None
        self.tpm = _Bucket(tpm) if tpm else None

    async def acquire(self, est_tokens: int) -> None:
        await self.semaphore.acquire()
        if self.rpm:
            await self.rpm.take(1)
        if self.tpm:
            await self.tpm.take(est_tokens)

    def release(self, est_tokens: int, used_tokens: int | None) -> None:
        if self.tpm and used_tokens is not None and used_tokens < est_tokens:
            self.tpm.refund(est_tokens - used_tokens)
        self.semaphore.release()
