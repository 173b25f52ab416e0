"""Provider calls of a δ sweep vs one refinement run, counted side by side in one run.

On the scripted repair world (rubriclab.testing: one operator lowers the judge's fool rate, another lowers
the panel's agreement, three are rejected by the checker), with a fresh call store for each arm:

  (a) one refinement run: search (packets on the pool, originals and candidates on dev) + held-out
      report of the original set and of the δ = 0 repaired set;
  (b) the sweep: the same search + an Optuna study over --deltas δ values (journal storage), every
      trial reporting its repaired set on held-out, exactly as the repair stage runs it.

Goal: (b) / (a) ≤ 1.5. Prints calls per role and the ratio; calls are counted by the scripted provider
(every call that reached a "provider").

    python benchmarks/repair_sweep.py [--criteria 4] [--dev 20] [--heldout 20] [--attacks 8] [--deltas 10]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubriclab.audit import AuditContext  # noqa: E402
from rubriclab.llm import Gateway, SQLiteCallStore  # noqa: E402
from rubriclab.repair import (  # noqa: E402
    RepairSettings,
    operating_point,
    report_heldout,
    search,
)
from rubriclab.rubrics import Criterion, RubricSet  # noqa: E402
from rubriclab.studies import run_grid, study_storage  # noqa: E402
from rubriclab.testing import (  # noqa: E402
    repair_world,
    scripted_provider,  # noqa: E402
    world_pairs,
)

OPS = ("do_not_reward", "abstract_to_observable", "max_score_cap", "decomposition", "false_positive_anchors")


def _calls() -> Counter:
    return Counter(scripted_provider().calls)


def arm(name: str, args, deltas: list[float] | None) -> Counter:
    roles = repair_world(tag=f"bench{name}", seats=3)
    with tempfile.TemporaryDirectory() as tmp:
        gw = Gateway(SQLiteCallStore(Path(tmp) / "calls.sqlite"), stage="bench", progress=False)
        ctx = AuditContext(gateway=gw, judges=roles["judges"], attacker=roles["attacker"],
                           verifier=roles["verifier"], n_boot=200, progress=False)
        rs = RubricSet(name="bench", source="imported", criteria=tuple(
            Criterion(id=f"criterion_{k}", description=f"The response answers part {k} of the question well.")
            for k in range(args.criteria)))
        settings = RepairSettings.of({"n_attacks": args.attacks, "operators": list(OPS), "max_operators": 1},
                                     {"runs": 2, "n_attacks": args.attacks})
        pool, dev, held = world_pairs(args.pool, "pool"), world_pairs(args.dev, "dev"), world_pairs(args.heldout, "held")
        start = _calls()
        found = search(rs, pool=pool, dev=dev, ctx=ctx, refiner=roles["refiner"], n_candidates=len(OPS),
                       settings=settings, source=name)
        report_heldout(rs, held, ctx, settings, source=name)
        if deltas is None:
            report_heldout(operating_point(found, rs, 0.0, len(OPS))["rubric"], held, ctx, settings, source=name)
        else:
            def objective(trial, point):
                op = operating_point(found, rs, point["delta"], point["candidates"])
                res = report_heldout(op["rubric"], held, ctx, settings, source=name)
                return res["alpha"]["value"], res["vfr"]["value"]

            storage = study_storage(None, journal=Path(tmp) / "study.journal")
            run_grid(f"bench-{name}", storage, [{"delta": d, "candidates": len(OPS)} for d in deltas], objective)
        used = _calls()
        used.subtract(start)
        return Counter({k.removeprefix("scripted/").removesuffix(f"bench{name}"): v for k, v in used.items() if v})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--criteria", type=int, default=4)
    ap.add_argument("--pool", type=int, default=10)
    ap.add_argument("--dev", type=int, default=20)
    ap.add_argument("--heldout", type=int, default=20)
    ap.add_argument("--attacks", type=int, default=8)
    ap.add_argument("--deltas", type=int, default=10)
    args = ap.parse_args()
    deltas = [0.0] + [0.05 * 2 ** i for i in range(args.deltas - 2)] + [math.inf]
    single = arm("single", args, None)
    sweep = arm("sweep", args, deltas)
    roles = sorted(set(single) | set(sweep))
    print(f"scripted repair world: K={args.criteria}, pool {args.pool}, dev {args.dev}, held-out {args.heldout} pairs, "
          f"{args.attacks} attacks, {len(OPS)} candidates per criterion, 3 judges")
    print(f"sweep: {len(deltas)} δ values: {', '.join('inf' if math.isinf(d) else f'{d:g}' for d in deltas)}\n")
    print(f"{'role':<12}{'one run':>10}{'sweep':>10}")
    for r in roles:
        print(f"{r:<12}{single[r]:>10}{sweep[r]:>10}")
    a, b = sum(single.values()), sum(sweep.values())
    print(f"{'TOTAL':<12}{a:>10}{b:>10}\n\nsweep / one run = {b / a:.3f}  (goal <= 1.5)")
    return 0 if b / a <= 1.5 else 1


if __name__ == "__main__":
    sys.exit(main())
