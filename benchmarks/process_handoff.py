"""What a provider process's hand-off costs per call, beside what litellm itself costs per call (issue 60, item 5).

The ``procs`` arm of ``gateway.py`` spends more CPU per call than bare litellm. The hand-off between the gateway's
process and a worker (``llm._processes``) is: the call's kwargs pickled and unpickled, the reply's fields dumped
(``reply_of``), pickled, unpickled and rebuilt as a ``ModelResponse`` (``response_of``), both messages sent and read
over a socket pair (``multiprocessing.connection``, as the processes talk; both ends in this process, so the
event-loop wake-ups of two processes are not in it). This times that hand-off,
one step at a time, beside a sequential ``litellm.acompletion`` against the fake OpenAI server (no latency) in the
same run (the server in its own process, so its CPU is not litellm's), and prints each as CPU ms per call and as a share of litellm's own.

    .venv/bin/python benchmarks/process_handoff.py [--calls 400] [--handoffs 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import socket
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-fake-benchmark")

import litellm  # noqa: E402

import rubriclab.llm._gateway  # noqa: E402,F401 - litellm with the gateway's settings, as a worker has them
from rubriclab.llm._processes import REPLY_CAP_ARG, reply_of, response_of  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gateway import start_server  # noqa: E402 - the fake server in a child process, as gateway.py runs it

MESSAGES = [{"role": "system", "content": "You are a careful judge. " * 20},
            {"role": "user", "content": "Which response is better, A or B? " * 30}]
# what the gateway passes to litellm.acompletion for one call (the endpoint added where it is sent)
CALL = dict(model="openai/fake-bench", messages=MESSAGES, max_tokens=16, num_retries=0, max_retries=0, timeout=30)


def cpu_ms_per(n: int, fn) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1e3


async def litellm_calls(url: str, n: int) -> tuple[float, object]:
    kwargs = dict(CALL, api_base=url)
    resp = None
    for _ in range(20):  # warm-up: first-call imports and pools
        resp = await litellm.acompletion(**kwargs)
    t0 = time.process_time()
    for _ in range(n):
        resp = await litellm.acompletion(**kwargs)
    return (time.process_time() - t0) / n * 1e3, resp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=400, help="sequential litellm calls timed")
    ap.add_argument("--handoffs", type=int, default=5000, help="hand-offs timed per step")
    args = ap.parse_args()
    server, url = start_server(0.0)
    try:
        litellm_ms, resp = asyncio.run(litellm_calls(url, args.calls))
    finally:
        server.terminate()
        server.wait()
    kwargs = dict(CALL, **{REPLY_CAP_ARG: 65536})
    blob = pickle.dumps(kwargs)
    reply = reply_of(resp, 0.2)
    rblob = pickle.dumps(reply)
    n = args.handoffs
    ours, theirs = socket.socketpair()
    a, b = Connection(ours.detach()), Connection(theirs.detach())

    def round_trip() -> None:  # the call's message out and the reply's back, as the two ends send and read them
        a.send(("call", 1, ("openai/fake-bench", None), blob))
        b.recv()
        b.send(("reply", 1, rblob))
        a.recv()

    steps = {
        "kwargs pickled (gateway)": cpu_ms_per(n, lambda: pickle.dumps(kwargs)),
        "kwargs unpickled (worker)": cpu_ms_per(n, lambda: pickle.loads(blob)),
        "reply_of: fields dumped (worker)": cpu_ms_per(n, lambda: reply_of(resp, 0.2)),
        "reply pickled (worker)": cpu_ms_per(n, lambda: pickle.dumps(reply)),
        "reply unpickled (gateway)": cpu_ms_per(n, lambda: pickle.loads(rblob)),
        "response_of: ModelResponse rebuilt (gateway)": cpu_ms_per(n, lambda: response_of(reply)),
        "socket: call sent and read, reply sent and read": cpu_ms_per(n, round_trip),
    }
    a.close()
    b.close()
    total = sum(steps.values())
    print(f"litellm.acompletion, sequential, fake server: {litellm_ms:.3f} CPU ms per call ({args.calls} calls)")
    for name, ms in steps.items():
        print(f"  {name:<50} {ms:.4f} ms  {ms / litellm_ms:7.2%} of litellm's")
    print(f"hand-off in all: {total:.4f} CPU ms per call = {total / litellm_ms:.2%} of litellm's own per call "
          f"(kwargs {len(blob)} B, reply {len(rblob)} B pickled)")


if __name__ == "__main__":
    main()
