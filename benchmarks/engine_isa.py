"""The embedded engine's instruction set: the portable build (x86-64-v3: AVX2, FMA, F16C, BMI2) against another
build of the same llama-cpp-python version on the same machine, in one run, arms alternating.

The workload is `embedded_judge.py`'s audit-shaped batch (pairwise judge panel at T=0.7 and T=0, pointwise yes/no
logprob checks), prefix-ordered as the pipeline runs it, each arm in its own process on a fresh call store. The
other build is a folder holding an installed ``llama_cpp`` (``pip install --no-deps --target DIR WHEEL``), put first
on that arm's ``sys.path``. Replies are compared call by call: a build for other instructions may compute other
logits, so its outputs are not those committed in dvc.lock.

    python benchmarks/engine_isa.py --other /tmp/avx512-site --other-name avx512 [--pairs 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def arm(pairs: int, store: Path) -> dict:
    """One timed batch in this process; JSON on stdout."""
    sys.path.insert(0, str(HERE))
    from embedded_judge import build_batch, run_arm

    from rubriclab.llm import engine_build, local_provider

    reqs = build_batch(pairs)
    local_provider().chat_model("smollm2-135m")  # load outside the timing
    seconds, texts = run_arm(reqs, True, store)
    return {"seconds": seconds, "texts": texts, "calls": len(reqs), "isa": engine_build().describe()}


def run_child(site: str | None, pairs: int, folder: Path) -> dict:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run([sys.executable, __file__, "--arm", "--pairs", str(pairs), "--store", str(folder)],
                         capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"arm {'portable' if not site else site} failed (exit {out.returncode}): "
                         f"{out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", help="folder with another llama_cpp build installed (pip install --target)")
    ap.add_argument("--other-name", default="other")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--arm", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.arm:
        print(json.dumps(arm(args.pairs, Path(args.store))))
        return
    if not args.other:
        raise SystemExit("--other DIR is required: a folder holding the other llama_cpp build")
    arms = {"portable": None, args.other_name: args.other}
    times: dict[str, list[float]] = {name: [] for name in arms}
    last: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):  # alternate, so both arms see the same machine load
            for name, site in arms.items():
                last[name] = run_child(site, args.pairs, Path(tmp))
                times[name].append(last[name]["seconds"])
    calls = last["portable"]["calls"]
    differ = sum(a != b for a, b in zip(last["portable"]["texts"], last[args.other_name]["texts"]))
    print(f"batch: {calls} calls ({args.pairs} pairs), prefix-ordered; best and median of {args.repeats} per arm, "
          "arms alternating")
    print("| build | instruction sets | best s | median s | calls/s (best) |\n|---|---|---|---|---|")
    for name in arms:
        ts = sorted(times[name])
        print(f"| {name} | {last[name]['isa']} | {ts[0]:.1f} | {ts[len(ts) // 2]:.1f} | {calls / ts[0]:.2f} |")
    ratio = min(times["portable"]) / min(times[args.other_name])
    print(f"{args.other_name} speed relative to portable: {ratio:.2f}x (best vs best; above 1 = faster); "
          f"replies that differ between the builds: {differ} of {calls}")


if __name__ == "__main__":
    main()
