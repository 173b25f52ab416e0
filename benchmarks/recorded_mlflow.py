"""MLflow traces at scale (issue 60): ``rubriclab.recorded.read_mlflow`` of ``--traces`` traces on a local SQLite
tracking store, the working tree against ``--ref`` side by side in one run, each arm in its own process
(alternating, ``--repeats`` times), wall time and peak memory (``ru_maxrss``) with their ratios.

The store: ``--traces`` traces (two per pair, one per presentation order), each with a root span whose inputs are
the pair's texts (one pair in ten longer than MLflow's 1,000-character request preview), the tags ``pair_id`` and
``order``, one LLM-judge feedback and one human feedback. It is written once through MLflow's public API
(``start_span``, ``log_feedback``: about 50 ms a trace here, so ~8 min for 10^4) and kept at ``--db`` for the next
run. Both arms must read the same judgments, labels and texts (checked).

    python benchmarks/recorded_mlflow.py [--traces 1e4] [--ref fea189c] [--repeats 2] [--db PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"  # each trace in the store before it is tagged
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recorded_scale import ROOT, _before_tree  # noqa: E402


def make_store(n_traces: int, db: Path, seed: int = 0) -> float:
    """Write the store (see the module docstring); the seconds it took."""
    import random

    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    rng = random.Random(seed)
    db.parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(f"sqlite:///{db.as_posix()}")
    mlflow.set_experiment("judge-traffic")
    judge = AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id="judge-x")
    human = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="annotator-1")
    t0 = time.perf_counter()
    for i in range(n_traces):
        pair, order = i // 2, ("original", "swapped")[i % 2]
        one = ("a long first answer " * 80) if pair % 10 == 0 else f"first answer {pair}"
        two = f"second answer {pair}"
        shown = (one, two) if order == "original" else (two, one)
        with mlflow.start_span(name="compare") as span:
            span.set_inputs({"prompt": f"question {pair}", "output_1": shown[0], "output_2": shown[1]})
            mlflow.update_current_trace(tags={"pair_id": f"p{pair:06d}", "order": order})
            trace_id = span.trace_id
        mlflow.log_feedback(trace_id=trace_id, name="preference", value=rng.choice(["A", "B", "A", "tie"]),
                            source=judge, rationale="because")
        mlflow.log_feedback(trace_id=trace_id, name="preference", value=rng.choice(["A", "B"]), source=human)
        if (i + 1) % 1000 == 0:
            print(f"  wrote {i + 1:,} traces ({time.perf_counter() - t0:.0f} s)", flush=True)
    mlflow.set_tracking_uri(None)
    return time.perf_counter() - t0


def run_arm(db: str, out: str) -> None:
    """Read the store, write wall time, peak memory and a digest of what was read."""
    import resource

    from rubriclab.recorded import read_mlflow

    t0 = time.perf_counter()
    rs = read_mlflow(f"sqlite:///{db}", "judge-traffic")
    wall = time.perf_counter() - t0
    seen = json.dumps([[(j.pair_id, j.judge, j.condition, j.order, j.verdict, j.raw) for j in rs.judgments],
                       [(p.id, p.labels, p.prompt, p.output_1, p.output_2) for p in rs.pairs.values()]])
    Path(out).write_text(json.dumps({"wall": wall, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                     / 1024, "judgments": len(rs.judgments), "pairs": len(rs.pairs),
                                     "digest": hashlib.sha1(seen.encode()).hexdigest()}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default="1e4")
    ap.add_argument("--ref", default="fea189c", help="git revision of src/rubriclab/recorded for the 'before' arm")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--db", type=Path, default=None, help="the store (written when missing)")
    ap.add_argument("--arm", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.arm:
        run_arm(str(args.db), args.out)
        return 0
    n = int(float(args.traces))
    db = (args.db or Path(tempfile.gettempdir()) / "rubriclab-bench" / f"mlflow-{n}.db").resolve()
    if not db.exists():
        print(f"writing {n:,} traces to {db} (once; kept for the next run)", flush=True)
        print(f"  written in {make_store(n, db):.0f} s", flush=True)
    got: dict[str, list[dict]] = {"after": [], "before": []}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        trees = {"after": ROOT / "src", "before": _before_tree(args.ref, tmp)}
        for i in range(args.repeats):
            for arm in ("after", "before"):
                out = tmp / f"{arm}{i}.json"
                env = {**os.environ, "PYTHONPATH": str(trees[arm]), "PYTHONDONTWRITEBYTECODE": "1"}
                subprocess.run([sys.executable, __file__, "--arm", "--db", str(db), "--out", str(out)], env=env,
                               check=True)
                got[arm].append(json.loads(out.read_text()))
    digests = {r["digest"] for rs in got.values() for r in rs}
    a, b = min(got["after"], key=lambda r: r["wall"]), min(got["before"], key=lambda r: r["wall"])
    print(f"\n{n:,} traces ({a['judgments']:,} judgments, {a['pairs']:,} pairs), SQLite store {db}")
    print(f"| arm | read_mlflow (s), best of {args.repeats} | peak MB |")
    print("|---|---|---|")
    print(f"| after (working tree: no spans, a cut preview's trace fetched) | {a['wall']:.1f} | {a['peak_mb']:,.0f} |")
    print(f"| before ({args.ref}: every trace's spans) | {b['wall']:.1f} | {b['peak_mb']:,.0f} |")
    print(f"| ratio before/after | {b['wall'] / a['wall']:.1f}x | {b['peak_mb'] / a['peak_mb']:.1f}x |")
    print("both arms read the same judgments, labels and texts" if len(digests) == 1
          else "ARMS DIFFER: the two arms read different judgments, labels or texts")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
