"""``python -m rubriclab.testing``: run the fake OpenAI-compatible server in the foreground.

Prints the base URL (``http://HOST:PORT/v1``) as the first stdout line, flushed, so a parent process
(e.g. a benchmark) can read it, then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from rubriclab.testing._fake_server import ALL_FAULT_KINDS, FAULT_KINDS, FakeOpenAIServer, FaultPlan


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m rubriclab.testing", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every successful answer")
    p.add_argument("--latency-jitter", type=float, default=0.0,
                   help="answers take uniform(latency - J, latency + J) seconds instead (0 <= J <= latency)")
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument(
        "--fault-kinds", default=",".join(FAULT_KINDS), help="comma-separated subset of " + ",".join(ALL_FAULT_KINDS)
    )
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--max-faults-per-key", type=int, default=1)
    p.add_argument("--retry-after", type=float, default=0.05)
    p.add_argument("--hang-seconds", type=float, default=30.0)
    args = p.parse_args(argv)
    if not 0.0 <= args.latency_jitter <= args.latency:
        p.error(f"--latency-jitter must be between 0 and --latency ({args.latency}), got {args.latency_jitter}")
    return args


async def _serve(args: argparse.Namespace) -> None:
    plan = None
    if args.fault_rate > 0:
        plan = FaultPlan(
            rate=args.fault_rate,
            kinds=tuple(k.strip() for k in args.fault_kinds.split(",") if k.strip()),
            seed=args.fault_seed,
            max_faults_per_key=args.max_faults_per_key,
            retry_after=args.retry_after,
            hang_seconds=args.hang_seconds,
        )
    server = FakeOpenAIServer(latency=args.latency, faults=plan, host=args.host, port=args.port,
                              latency_jitter=args.latency_jitter)
    await server.start_async()
    print(server.url, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGTERM from a parent benchmark should shut down cleanly rather than dump a traceback.
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix
            pass
    try:
        await stop.wait()
    finally:
        await server.stop_async()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parse(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
