"""The embedded engine's compile: every target llama-cpp-python builds by default vs only the libraries it ships.

Configures the pinned llama-cpp-python sdist twice with scripts/engine_wheel.sh's portable flags (one tree as
pip builds it today, one with scripts/engine_library_only.cmake), prints each tree's build steps, then compiles
both with ninja, alternating which goes first over --repeats, and prints wall and CPU seconds (user + system of
the compiler processes) side by side with their ratio. CPU seconds are the figure to read on a busy machine:
wall time there measures the neighbours.

    .venv/bin/python benchmarks/engine_build.py [--repeats 1] [--jobs 2] [--sdist PATH]

Needs cmake, ninja and a C++ compiler (what scripts/install.sh needs); downloads the sdist from the package
registry unless --sdist names one.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_ONLY = ROOT / "scripts/engine_library_only.cmake"


def _portable_flags() -> list[str]:
    text = (ROOT / "scripts/engine_wheel.sh").read_text(encoding="utf-8")
    block = re.search(r'PORTABLE="(.*?)"', text, re.S)
    if block is None:
        sys.exit("benchmarks/engine_build.py: scripts/engine_wheel.sh has no PORTABLE=\"...\" flags")
    return shlex.split(block.group(1).replace("\\\n", " "))


def _version() -> str:
    found = re.search(r'"llama-cpp-python==([0-9.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        sys.exit("benchmarks/engine_build.py: pyproject.toml must pin llama-cpp-python==X.Y.Z")
    return found.group(1)


def _source(sdist: Path | None, work: Path) -> Path:
    if sdist is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"llama-cpp-python=={_version()}", "-d", str(work)], check=True)
        sdist = next(work.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    return next(p for p in work.iterdir() if p.is_dir() and p.name.startswith("llama_cpp_python-"))


def _configure(src: Path, build: Path, extra: list[str]) -> int:
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    *_portable_flags(), *extra], check=True, capture_output=True)
    dry = subprocess.run(["ninja", "-C", str(build), "-n"], check=True, capture_output=True, text=True).stdout
    steps = re.findall(r"^\[\d+/(\d+)\]", dry, re.M)
    return int(steps[-1]) if steps else 0


def _compile(build: Path, jobs: int) -> tuple[float, float]:
    subprocess.run(["ninja", "-C", str(build), "-t", "clean"], check=True, capture_output=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(["ninja", "-C", str(build), f"-j{jobs}"], check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--sdist", type=Path, default=None, help="a llama-cpp-python sdist (default: download it)")
    args = ap.parse_args()
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            sys.exit(f"benchmarks/engine_build.py: needs {tool} on PATH")
    with tempfile.TemporaryDirectory(prefix="engine-build-") as tmp:
        work = Path(tmp)
        src = _source(args.sdist, work)
        arms = {"every target": [], "libraries only": [f"-DCMAKE_PROJECT_INCLUDE={LIBRARY_ONLY}"]}
        steps = {name: _configure(src, work / f"build{i}", extra) for i, (name, extra) in enumerate(arms.items())}
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
        for r in range(args.repeats):
            order = list(enumerate(arms)) if r % 2 == 0 else list(reversed(list(enumerate(arms))))
            for i, name in order:
                runs[name].append(_compile(work / f"build{i}", args.jobs))
                print(f"  repeat {r + 1}: {name}: wall {runs[name][-1][0]:.0f} s, CPU {runs[name][-1][1]:.0f} s",
                      flush=True)
    print(f"\nllama-cpp-python {_version()}, portable flags, ninja -j{args.jobs}, best of {args.repeats}")
    print(f"{'arm':<16}{'steps':>7}{'wall s':>9}{'CPU s':>8}")
    best = {name: (min(w for w, _ in rs), min(c for _, c in rs)) for name, rs in runs.items()}
    for name in arms:
        print(f"{name:<16}{steps[name]:>7}{best[name][0]:>9.0f}{best[name][1]:>8.0f}")
    old, new = best["every target"], best["libraries only"]
    print(f"libraries only / every target: steps {steps['libraries only'] / steps['every target']:.2f}, "
          f"wall {new[0] / old[0]:.2f}, CPU {new[1] / old[1]:.2f}")


if __name__ == "__main__":
    main()
