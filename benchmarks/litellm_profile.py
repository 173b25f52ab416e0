"""Where bare litellm spends its CPU per call at high concurrency (issue 25's gateway goal).

`gateway.py` measures the gateway against a bare `litellm.acompletion` loop; both are CPU-bound in litellm at C=64.
This profiles the bare loop alone (cProfile, one process, the fake OpenAI server in a child process with a fixed
latency) and prints the share of the loop's CPU spent under a few litellm functions: what a gateway making the same
litellm call cannot avoid.

    .venv/bin/python benchmarks/litellm_profile.py [--calls 640] [--concurrency 64] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import subprocess
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-fake-benchmark")

# (label, substring of a profiled function's "file:line(name)")
PARTS = (
    ("cost lookup (response_cost_calculator)", "response_cost_calculator"),
    ("success logging (async_success_handler)", "async_success_handler"),
    ("the request (openai client: AsyncAPIClient.request)", "_base_client.py"),
)


async def _loop(model: str, url: str, calls: int, concurrency: int, tag: str) -> tuple[float, float]:
    import litellm

    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(model=model, messages=[{"role": "user", "content": f"[{tag}] pair {i}"}],
                                      api_base=url, max_tokens=16, temperature=0.0)

    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return calls / (time.perf_counter() - t0), (time.process_time() - c0) / calls * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=640)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2, help="the fake server's reply latency, seconds")
    ap.add_argument("--model", default="openai/fake-bench", help="as in gateway.py (a name not in litellm's cost map)")
    args = ap.parse_args()

    import litellm

    litellm.suppress_debug_info = True
    server = subprocess.Popen([sys.executable, "-m", "rubriclab.testing", "--port", "0", "--latency",
                               str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        asyncio.run(_loop(args.model, url, args.concurrency, args.concurrency, "warm"))  # imports, connections
        prof = cProfile.Profile(time.process_time)  # CPU time: the event loop's waits in select() count nothing
        prof.enable()
        rate, cpu_ms = asyncio.run(_loop(args.model, url, args.calls, args.concurrency, "profiled"))
        prof.disable()
    finally:
        server.kill()
    stats = pstats.Stats(prof).stats  # {(file, line, name): (cc, nc, tottime, cumtime, callers)}
    total = sum(v[2] for v in stats.values())
    print(f"bare litellm, {args.calls} calls at C={args.concurrency} (latency {args.latency} s), under cProfile: "
          f"{rate:.0f} calls/s, {cpu_ms:.2f} ms CPU per call; profiled CPU {total:.2f} s")
    for label, needle in PARTS:
        # the largest cumulative time of a matching entry: nested matches (recursion, wrappers) are not added up
        cum = max((v[3] for k, v in stats.items() if needle in f"{k[0]}:{k[1]}({k[2]})"), default=0.0)
        print(f"  {label}: {cum / total:.0%} of the loop's CPU")


if __name__ == "__main__":
    main()
