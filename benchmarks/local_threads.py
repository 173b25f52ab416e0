"""llama.cpp's prompt threads when jobs share the machine: two processes side by side (two test workers' stages), each
judging the same demo pairs on the embedded SmolLM2 with one decoding thread, the prompt processed on every core
(llama-cpp-python's default ``n_threads_batch``, what the engine did before) vs on one thread (``llama_threads()``
with ``RUBRICLAB_THREADS=1``, what it does now). One process alone in each arm too: the single job's case
(`make repro`, where nothing else runs).

Each child loads the engine with `rubriclab.llm._local.load_chat_model` (prefix reuse, grammar last), the arm's
thread counts from `llama_threads`, and runs the direct pairwise judge prompt (rubric first) on N demo pairs at T=0, 16 tokens,
then prints its replies. Wall time and the children's CPU time (getrusage) per arm; arms alternate per repeat.
Replies are compared across arms (llama.cpp splits each matrix product by rows: the count should not change them).

    python benchmarks/local_threads.py [--pairs 12] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ARMS = {"prompt on every core": None, "prompt on one thread": 1}  # n_threads_batch (None: every core)


def child(pairs: int, batch: int | None) -> None:
    from rubriclab.llm import _local
    from rubriclab.llm._weights import chat_weights

    sys.path.insert(0, os.path.dirname(__file__))
    from embedded_judge import judge_messages

    if batch is None:  # before: llama-cpp-python's default for the prompt, every core
        now = _local.llama_threads  # RUBRICLAB_THREADS=1: one thread each
        _local.llama_threads = lambda: {**now(), "n_threads_batch": os.cpu_count() or 2}
    llm = _local.load_chat_model(chat_weights("smollm2-135m"))  # the engine as the gateway's provider builds it
    replies = [_local._chat(llm, m, {"temperature": 0.0, "max_tokens": 16})["text"] for m in judge_messages(pairs)]
    print(json.dumps(replies))


def run_arm(pairs: int, batch: int | None, side_by_side: int) -> tuple[float, float, list[str]]:
    env = {**os.environ, "RUBRICLAB_THREADS": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", str(pairs), "--batch", str(batch or 0)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for _ in range(side_by_side)]
    outs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if any(p.returncode for p in procs):
        raise SystemExit(f"a child failed: {[p.returncode for p in procs]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(outs[0].strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args.child, args.batch or None)

    print(f"{args.pairs} direct pairwise judge calls per process (T=0, 16 tokens), one decoding thread, "
          f"{os.cpu_count()} cores, {args.repeats} repeat(s), arms alternating")
    results: dict[tuple[str, int], list[tuple[float, float]]] = {}
    replies: dict[str, list[str]] = {}
    for _ in range(args.repeats):
        for n in (2, 1):
            for name, batch in ARMS.items():
                wall, cpu, out = run_arm(args.pairs, batch, n)
                results.setdefault((name, n), []).append((wall, cpu))
                replies.setdefault(name, out)
    print(f"{'arm':<24} {'processes':>9} {'wall s (mean)':>14} {'CPU s (mean)':>13}")
    for (name, n), rows in results.items():
        wall = sum(r[0] for r in rows) / len(rows)
        cpu = sum(r[1] for r in rows) / len(rows)
        print(f"{name:<24} {n:>9} {wall:>14.1f} {cpu:>13.1f}")
    for n in (2, 1):
        old, new = (results[(name, n)] for name in ARMS)
        ratio_wall = sum(r[0] for r in old) / sum(r[0] for r in new)
        ratio_cpu = sum(r[1] for r in old) / sum(r[1] for r in new)
        print(f"{n} process(es): every core / one thread = {ratio_wall:.2f}x wall, {ratio_cpu:.2f}x CPU")
    same = replies["prompt on every core"] == replies["prompt on one thread"]
    print(f"replies identical across arms: {same} ({args.pairs} replies)")


if __name__ == "__main__":
    main()
