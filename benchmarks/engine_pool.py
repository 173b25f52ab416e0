"""Two embedded engines of one thread each, side by side in one process, against one engine of two threads: would a
pool of engines serve a stage's batch of embedded calls faster on this 2-core machine (issue 60, `make repro`)?

Arm "one engine": ``load_chat_model`` with ``RUBRICLAB_THREADS=2`` (what a stage runs), the calls one after another.
Arm "two engines": two ``load_chat_model`` engines with ``RUBRICLAB_THREADS=1``, each on its own thread, taking every
other call (llama.cpp's calls release the GIL). The direct pairwise judge prompt on N demo pairs, T=0.7 with a fixed
seed, M new tokens; each arm in a fresh process, arms alternating; wall and process CPU per arm, and the replies
compared (llama.cpp splits each matrix product by rows, so the thread count should not change them).

    python benchmarks/engine_pool.py [--pairs 12] [--tokens 16,128] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ARMS = ("one engine, 2 threads", "two engines, 1 thread each")


def child(arm: str, pairs: int, tokens: int) -> None:
    os.environ["RUBRICLAB_THREADS"] = "2" if arm == ARMS[0] else "1"
    from rubriclab.llm import _local
    from rubriclab.llm._weights import chat_weights

    sys.path.insert(0, os.path.dirname(__file__))
    from embedded_judge import judge_messages

    msgs = judge_messages(pairs)
    params = {"temperature": 0.7, "max_tokens": tokens, "seed": 7}
    engines = [_local.load_chat_model(chat_weights("smollm2-135m")) for _ in range(1 if arm == ARMS[0] else 2)]
    out: list[str | None] = [None] * len(msgs)

    def work(k: int) -> None:
        for i in range(k, len(msgs), len(engines)):
            out[i] = _local._chat(engines[k], msgs[i], params)["text"]

    t0, c0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(engines))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "out": out}))


def run_arm(arm: str, pairs: int, tokens: int) -> dict:
    cmd = [sys.executable, __file__, "--child", arm, "--pairs", str(pairs), "--tokens", str(tokens)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{arm}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--tokens", default="16,128", help="max new tokens per call, one row each (comma-separated)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.pairs, int(args.tokens))
    print(f"{args.pairs} direct pairwise judge calls per arm (T=0.7, seed 7), {os.cpu_count()} cores, "
          f"{args.repeats} repeat(s), arms alternating")
    print(f"{'max tokens':>10} {'arm':<28} {'wall s (each)':>18} {'CPU s (each)':>18}")
    for tokens in (int(t) for t in args.tokens.split(",")):
        runs: dict[str, list[dict]] = {a: [] for a in ARMS}
        for _ in range(args.repeats):
            for arm in ARMS:
                runs[arm].append(run_arm(arm, args.pairs, tokens))
        for arm in ARMS:
            walls = ", ".join(f"{r['wall']:.2f}" for r in runs[arm])
            cpus = ", ".join(f"{r['cpu']:.1f}" for r in runs[arm])
            print(f"{tokens:>10} {arm:<28} {walls:>18} {cpus:>18}")
        one, two = (sum(r["wall"] for r in runs[a]) for a in ARMS)
        same = all(r["out"] == runs[ARMS[0]][0]["out"] for a in ARMS for r in runs[a])
        print(f"{tokens:>10} one engine / two engines wall = {one / two:.2f}x; replies identical across arms and "
              f"repeats: {same}")


if __name__ == "__main__":
    main()
