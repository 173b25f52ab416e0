"""Gateway throughput vs bare litellm, side by side in one run, against the fake server.

The server runs in a separate process with a fixed latency. For each concurrency C the same
workload runs through (a) a bare ``litellm.acompletion`` + ``asyncio.gather`` loop bounded by a
semaphore and (b) the gateway with its store, limits and retries on (fresh store: no cache hits);
plus a sequential ``litellm.completion`` loop. Ratios are to the ideal C/latency and to bare
litellm. Finally the C=64 batch is repeated on the same store: provider calls made (goal 0).

    python benchmarks/gateway.py [--latency 0.2] [--calls-per-slot 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-fake-benchmark")

import litellm  # noqa: E402

from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store  # noqa: E402

MODEL = "openai/fake-bench"


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "rubriclab.testing", "--port", "0", "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"fake server did not start: {url!r}")
    return proc, url


def server_requests(url: str) -> int:
    with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/stats") as resp:
        return json.load(resp)["requests"]


def messages(i: int, tag: str) -> list[dict]:
    return [{"role": "user", "content": f"[{tag}] compare the two answers for pair {i}"}]


async def bare(url: str, n: int, c: int, tag: str) -> float:
    sem = asyncio.Semaphore(c)

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(model=MODEL, messages=messages(i, tag), api_base=url, max_tokens=16,
                                      temperature=0.0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return n / (time.perf_counter() - t0)


def gateway(url: str, n: int, c: int, tag: str, store_path: Path) -> float:
    role = RoleSpec(name="judge", model=MODEL, api_base=url, max_tokens=16, concurrency=c, timeout=60)
    reqs = [CallRequest(role=role, messages=messages(i, tag)) for i in range(n)]
    gw = Gateway(open_store(store_path), stage="bench", progress=False)
    t0 = time.perf_counter()
    results = gw.run(reqs)
    rate = n / (time.perf_counter() - t0)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return rate


def sequential(url: str, n: int, tag: str) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        litellm.completion(model=MODEL, messages=messages(i, tag), api_base=url, max_tokens=16, temperature=0.0)
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--calls-per-slot", type=int, default=10, help="workload = max(20, C × this)")
    ap.add_argument("--repeats", type=int, default=2, help="alternating repeats; the median is reported")
    args = ap.parse_args()
    proc, url = start_server(args.latency)
    tmp = Path(tempfile.mkdtemp(prefix="rubriclab-bench-"))
    try:
        asyncio.run(bare(url, 8, 8, "warmup"))  # import/connection warm-up, not measured
        rows = []
        n_seq = 20
        seq = statistics.median(sequential(url, n_seq, f"seq{r}") for r in range(args.repeats))
        for c in (1, 8, 64):
            n = max(20, c * args.calls_per_slot)
            b_rates, g_rates = [], []
            for r in range(args.repeats):
                b_rates.append(asyncio.run(bare(url, n, c, f"bare{c}-{r}")))
                g_rates.append(gateway(url, n, c, f"gw{c}-{r}", tmp / f"gw{c}-{r}.sqlite"))
            rows.append((c, n, statistics.median(b_rates), statistics.median(g_rates)))

        # repeated run of the C=64 batch on its store: every call must come from the store
        c, n = 64, max(20, 64 * args.calls_per_slot)
        before = server_requests(url)
        gateway(url, n, c, f"gw{c}-0", tmp / f"gw{c}-0.sqlite")
        repeat_calls = server_requests(url) - before
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    print(f"fake server: separate process, latency {args.latency * 1000:.0f} ms; {os.cpu_count()} CPU cores; "
          f"litellm {importlib.metadata.version('litellm')}")
    print(f"sequential litellm.completion: {seq:7.1f} calls/s ({seq * args.latency:.2f} of ideal 1/latency)")
    print(f"{'C':>3} {'calls':>6} {'ideal/s':>8} {'bare/s':>8} {'gw/s':>8} {'bare/ideal':>10} {'gw/ideal':>9} "
          f"{'gw/bare':>8} {'gw/seq':>7}")
    for c, n, b, g in rows:
        ideal = c / args.latency
        print(f"{c:>3} {n:>6} {ideal:>8.1f} {b:>8.1f} {g:>8.1f} {b / ideal:>10.2f} {g / ideal:>9.2f} "
              f"{g / b:>8.2f} {g / seq:>7.1f}")
    print(f"repeated C=64 batch of {n} calls: {repeat_calls} provider calls (goal 0)")
    c64 = rows[-1]
    print(f"goals: gw/bare at C=64 ≥ 0.9 → {c64[3] / c64[2]:.2f}; gw/seq at C=64 ≥ 15 → {c64[3] / seq:.1f}")


if __name__ == "__main__":
    main()
