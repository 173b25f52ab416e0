"""Recorded verdicts at scale: ``rubriclab.recorded.analyze`` on a synthetic set, before vs after, in one run.

The synthetic RecordedSet: ``--judges`` × ``--conditions`` cells, ``--pairs`` pairs each judged in both
presentation orders (50 × 10 × 80 × 2 = 80,000 verdicts by default). Three annotators label each pair (their
majority is the label; a few pairs have none); each judge has its own accuracy, a condition shifts it, and a
judge-specific position bias makes it say "first" regardless; some verdicts are ties, some ``none``. Pair
outputs differ in length and some hold lists, so every part of the analysis has work to do.

Each arm runs in its own process, alternating (``after``, ``before``, ``after``, …): ``after`` is the working
tree, ``before`` is ``src/rubriclab/recorded`` at ``--ref`` (default HEAD) over a copy of the working tree's
other modules. Each prints the wall time of every part ``analyze`` calls (timers wrapped around the module's
functions) and the total; the run checks that both arms' results are identical (``to_dict`` as JSON), and exits
non-zero when the ``after`` total exceeds ``--budget`` seconds.

    python benchmarks/recorded_scale.py [--judges 50] [--conditions 10] [--pairs 80] [--n-boot 2000]
                                        [--repeats 1] [--no-before] [--quick]

``--tables 1e5,1e6,1e7`` (issue 60) times what a user runs instead: ``rubriclab.recorded.read_table`` of a
generated parquet table of that many verdicts (10 judges × 5 conditions × 2 orders per pair, labels, 3% ties,
2% none) and ``analyze`` with the default settings (n_boot 2000), each arm in its own process, wall time and peak
memory (``ru_maxrss``) side by side with their ratios; the ``before`` arm (``--ref``, e.g. the commit before
issue 60) only up to ``--before-max`` verdicts (one object per judgment: 10^7 does not fit in 24 GB). Goals:
10^6 in ≤ 10 s, 10^7 in ≤ 120 s within 4 GB (read + analyze).

    python benchmarks/recorded_scale.py --tables 1e5,1e6,1e7 --ref 8d89a9b [--before-max 1e6]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("judgments_frame", "_cell", "comparisons", "contrasts", "judge_agreement", "annotator_agreement",
         "majority_of_judges", "biases")
LABEL_NAMES = {"_cell": "cells", "majority_of_judges": "majority"}


def make_set(n_judges: int, n_conditions: int, n_pairs: int, seed: int = 0):
    """A seeded synthetic RecordedSet (see the module docstring)."""
    from rubriclab.recorded import Judgment, RecordedPair, RecordedSet

    rng = np.random.default_rng(seed)
    pairs = {}
    for i in range(n_pairs):
        truth = rng.choice(["1", "2", "tie"], p=[0.47, 0.47, 0.06])
        labels = tuple((f"a{k}", truth if rng.random() < 0.8 else str(rng.choice(["1", "2", "tie"])))
                       for k in range(3))
        outs = ["word " * int(rng.integers(5, 80)) + ("\n- one\n- two\n" if rng.random() < 0.3 else "")
                for _ in range(2)]
        pairs[f"p{i:04d}"] = RecordedPair(id=f"p{i:04d}", labels=labels, prompt=f"prompt {i}", output_1=outs[0],
                                          output_2=outs[1])
    judges = [f"judge{j:02d}" for j in range(n_judges)]
    conds = [f"cond{c:02d}" for c in range(n_conditions)]
    skill = rng.uniform(0.55, 0.9, n_judges)
    bias = rng.uniform(0.0, 0.3, n_judges)
    shift = rng.normal(0.0, 0.04, n_conditions)
    judgments = []
    for j, judge in enumerate(judges):
        for c, cond in enumerate(conds):
            acc = float(np.clip(skill[j] + shift[c], 0.05, 0.98))
            for pid, pair in pairs.items():
                truth = pair.label or "1"
                for order in ("original", "swapped"):
                    judgments.append(Judgment(pair_id=pid, judge=judge, condition=cond, order=order,
                                              verdict=_verdict(rng, truth, order, acc, bias[j])))
    return RecordedSet(name="synthetic", format="table", path="(synthetic)", pairs=pairs, judgments=judgments,
                       label_rule="majority of three annotators")


def _verdict(rng: np.random.Generator, truth: str, order: str, acc: float, bias: float) -> str:
    u = rng.random()
    if u < 0.02:
        return "none"
    if u < 0.05:
        return "tie"
    if rng.random() < bias:
        return "first"
    right = rng.random() < acc
    choice = truth if right or truth == "tie" else ("2" if truth == "1" else "1")
    if choice == "tie":
        return "tie" if right else "first"
    return "first" if (choice == "1") == (order == "original") else "second"


def _timed(module, name: str, spent: dict[str, float], cpu: dict[str, float]) -> None:
    fn = getattr(module, name)

    def wrapper(*args, **kwargs):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - c0

    setattr(module, name, wrapper)


def make_table(n_verdicts: int, path: Path, seed: int = 0) -> Path:
    """A parquet table of ``n_verdicts`` verdicts: 10 judges × 5 conditions × 2 orders per pair."""
    import pandas as pd

    n_pairs = max(1, n_verdicts // 100)
    rng = np.random.default_rng(seed)
    truth = rng.choice(np.array(["1", "2", "tie"]), n_pairs, p=[0.47, 0.47, 0.06])
    pair = np.repeat(np.arange(n_pairs, dtype=np.int64), 100)
    judge = np.tile(np.repeat(np.arange(10), 10), n_pairs)
    cond = np.tile(np.repeat(np.arange(5), 2), 10 * n_pairs)
    order = np.tile(np.arange(2), 50 * n_pairs)
    right = rng.random(len(pair)) < rng.uniform(0.55, 0.9, 10)[judge]
    lab = truth[pair]
    choice = np.where(right, np.where(lab == "tie", "1", lab), np.where(lab == "1", "2", "1"))
    u = rng.random(len(pair))
    choice = np.where(u < 0.03, "tie", np.where(u < 0.05, "none", choice))
    pd.DataFrame({"pair_id": pd.Categorical.from_codes(pair, [f"p{i:07d}" for i in range(n_pairs)]),
                  "judge": pd.Categorical.from_codes(judge, [f"judge{j}" for j in range(10)]),
                  "condition": pd.Categorical.from_codes(cond, [f"cond{c}" for c in range(5)]),
                  "order": pd.Categorical.from_codes(order, ["original", "swapped"]),
                  "choice": choice, "label": lab}).to_parquet(path, index=False)
    return path


def run_table_arm(args: argparse.Namespace) -> None:
    """One arm of ``--tables``: read the table and analyse it, wall times and peak memory as JSON."""
    import resource

    from rubriclab.recorded import Settings, analyze, read_table

    t0 = time.perf_counter()
    rs = read_table(args.table)
    t1 = time.perf_counter()
    res = analyze(rs, Settings())
    t2 = time.perf_counter()
    Path(args.out).write_text(json.dumps({"read": t1 - t0, "analyze": t2 - t1, "n": len(rs.judgments),
                                          "cells": len(res.cells), "comparisons": len(res.comparisons),
                                          "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def tables(args: argparse.Namespace) -> int:
    sizes = [int(float(x)) for x in args.tables.split(",")]
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        before = _before_tree(args.ref, tmp) if not args.no_before else None
        for n in sizes:
            table = make_table(n, tmp / f"t{n}.parquet")
            got = {}
            for arm, src in (("after", ROOT / "src"), ("before", before)):
                if src is None or (arm == "before" and n > float(args.before_max)):
                    continue
                out = tmp / f"{arm}{n}.json"
                env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
                proc = subprocess.run([sys.executable, __file__, "--table-arm", "--table", str(table), "--out",
                                       str(out)], env=env)
                got[arm] = json.loads(out.read_text()) if proc.returncode == 0 else None
            rows.append((n, got))
    print("| verdicts | after: read (s) | analyze (s) | total (s) | peak MB | before: total (s) | peak MB | "
          "time ratio | memory ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, got in rows:
        a, b = got.get("after"), got.get("before")
        at = a["read"] + a["analyze"] if a else None
        bt = b["read"] + b["analyze"] if b else None
        print(f"| {n:,} | " + (f"{a['read']:.1f} | {a['analyze']:.1f} | {at:.1f} | {a['peak_mb']:,.0f}" if a else
                              "failed | | |") + " | "
              + (f"{bt:.1f} | {b['peak_mb']:,.0f} | {bt / at:.1f}x | {b['peak_mb'] / a['peak_mb']:.1f}x |" if b and a
                 else "not run (does not fit) | | | |"))
        goal = {10**6: (10.0, None), 10**7: (120.0, 4096.0)}.get(n)
        if goal and a:
            fast = at <= goal[0] and (goal[1] is None or a["peak_mb"] <= goal[1])
            ok &= fast
            print(f"|  goal ≤ {goal[0]:.0f} s" + (f", ≤ {goal[1]:,.0f} MB" if goal[1] else "") +
                  f": {'PASS' if fast else 'FAIL'} | | | | | | | | |")
    print("\nwall time of each arm's process (read_table + analyze, default settings, n_boot 2000); peak memory: "
          "ru_maxrss. 2-core machine, shared with other jobs.")
    return 0 if ok else 1


def run_arm(args: argparse.Namespace) -> None:
    """One arm in this process: build the set, time analyze per part, write timings and the result as JSON."""
    from rubriclab.recorded import Settings, _analysis

    t0 = time.perf_counter()
    rs = make_set(args.judges, args.conditions, args.pairs, args.seed)
    t_build = time.perf_counter() - t0
    spent: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name in PARTS:
        _timed(_analysis, name, spent, cpu)
    settings = Settings(n_boot=args.n_boot, seed=0, contrasts=(("c1 − c0", "cond01", "cond00"),))
    t0, c0 = time.perf_counter(), time.process_time()
    res = _analysis.analyze(rs, settings)
    spent["total"], cpu["total"] = time.perf_counter() - t0, time.process_time() - c0
    Path(args.out).write_text(json.dumps({"build": t_build, "spent": spent, "cpu": cpu,
                                          "n_judgments": len(rs.judgments),
                                          "n_cells": len(res.cells), "n_comparisons": len(res.comparisons),
                                          "result": json.dumps(res.to_dict(), sort_keys=True, default=str)}))


def _before_tree(ref: str, tmp: Path) -> Path:
    """A copy of the working tree's package with ``recorded/`` as it is at ``ref``."""
    src = tmp / "src"
    shutil.copytree(ROOT / "src" / "rubriclab", src / "rubriclab",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(src / "rubriclab" / "recorded")
    archive = subprocess.run(["git", "archive", ref, "src/rubriclab/recorded"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    return src


def _run(arm: str, args: argparse.Namespace, src: Path, tmp: Path, i: int) -> dict:
    out = tmp / f"{arm}{i}.json"
    cmd = [sys.executable, __file__, "--arm", arm, "--out", str(out), "--judges", str(args.judges),
           "--conditions", str(args.conditions), "--pairs", str(args.pairs), "--n-boot", str(args.n_boot),
           "--seed", str(args.seed)]
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(cmd, check=True, env=env)
    return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judges", type=int, default=50)
    ap.add_argument("--conditions", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=80)
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="runs of each arm, alternating")
    ap.add_argument("--ref", default="HEAD", help="git revision of src/rubriclab/recorded for the 'before' arm")
    ap.add_argument("--no-before", action="store_true", help="time the working tree only")
    ap.add_argument("--quick", action="store_true", help="10 judges × 5 conditions × 40 pairs, n_boot 500")
    ap.add_argument("--budget", type=float, default=30.0, help="max seconds for analyze (after)")
    ap.add_argument("--tables", default=None, help="comma-separated table sizes (verdicts), e.g. 1e5,1e6,1e7")
    ap.add_argument("--before-max", default="1e6", help="largest table the 'before' arm is run on")
    ap.add_argument("--table-arm", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--table", help=argparse.SUPPRESS)
    ap.add_argument("--arm", choices=("before", "after"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.judges, args.conditions, args.pairs, args.n_boot = 10, 5, 40, 500
    if args.table_arm:
        run_table_arm(args)
        return 0
    if args.arm:
        run_arm(args)
        return 0
    if args.tables:
        return tables(args)
    arms = ("after",) if args.no_before else ("after", "before")
    runs: dict[str, list[dict]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        srcs = {"after": ROOT / "src"}
        if not args.no_before:
            srcs["before"] = _before_tree(args.ref, tmp)
        for i in range(args.repeats):
            for arm in arms:
                runs[arm].append(_run(arm, args, srcs[arm], tmp, i))
    first = runs["after"][0]
    print(f"{first['n_judgments']} verdicts, {first['n_cells']} judge × condition cells "
          f"({args.judges} judges × {args.conditions} conditions × {args.pairs} pairs × 2 orders), "
          f"{first['n_comparisons']} paired comparisons, n_boot {args.n_boot}; arms alternate in one run, "
          f"{args.repeats} run(s) each, median shown; 2-core machine shared with other jobs\n")
    two = len(arms) == 2
    print("| part | " + " | ".join(f"{arm} wall (s) | {arm} CPU (s)" for arm in arms)
          + (" | ratio (wall) |" if two else " |"))
    print("|---|" + "---|---|" * len(arms) + ("---|" if two else ""))
    med = {(arm, kind): {p: statistics.median(r[kind].get(p, 0.0) for r in runs[arm]) for p in (*PARTS, "total")}
           for arm in arms for kind in ("spent", "cpu")}
    for part in (*PARTS, "total"):
        cols = " | ".join(f"{med[arm, 'spent'][part]:.2f} | {med[arm, 'cpu'][part]:.2f}" for arm in arms)
        ratio = f" | {med['before', 'spent'][part] / max(med['after', 'spent'][part], 1e-9):.1f}x |" if two else " |"
        name = LABEL_NAMES.get(part, part)
        print(f"| {'**total analyze**' if part == 'total' else name} | {cols}{ratio}")
    print("\nwall: time.perf_counter; CPU: time.process_time of the arm's process (all its threads). On a shared "
          "machine wall > CPU by the time other jobs held the cores.")
    print(f"\n(building the synthetic set, not timed above: {first['build']:.1f} s)")
    ok = True
    if not args.no_before:
        same = all(r["result"] == runs["before"][0]["result"] for arm in arms for r in runs[arm])
        print(f"results identical in both arms (to_dict as JSON): {'yes' if same else 'NO'}")
        ok = same
    wall, cpu = med["after", "spent"]["total"], med["after", "cpu"]["total"]
    fast = wall <= args.budget
    print(f"analyze (after): {wall:.1f} s wall, {cpu:.1f} s CPU (goal <= {args.budget:.0f} s wall: "
          f"{'PASS' if fast else 'FAIL'})")
    return 0 if ok and fast else 1


if __name__ == "__main__":
    sys.exit(main())
