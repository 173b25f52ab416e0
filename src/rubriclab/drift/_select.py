"""Selection on validation (seed 003 Eq. 5–6) and the report on test (Tables 1–2).

Feasible = benchmark-val agreement ≥ the seed's (no tolerance: the paper's Eq. 5) and, on each val split, no
more failed verdicts than the seed's (the same pairs). Agreement leaves failed verdicts out, so without the
second rule a rubric could reach the benchmark by making the judge fail on pairs it gets wrong, or fake a
target drop by making it fail on pairs it gets right. The selected rubric is the feasible one with the lowest
target-val agreement (ties: higher benchmark-val, then earlier in the pool). With no feasible candidate the
method keeps the seed, and says so. On test every method's selected rubric gets
benchmark and target agreement (percentile bootstrap over pairs), the gap bench − target (two-sample
bootstrap: different pairs) and the paired change against the seed on each domain (paired bootstrap over the
same pairs), all with n, ties and failures. The paired p-values vs the seed are one family per domain across
the methods: each comes raw (``d_target_p``) and Benjamini–Hochberg adjusted across methods
(``d_target_p_bh``), as the drift gate adjusts across domains.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.drift._engine import Candidate, DriftData, DriftSettings, Judging
from rubriclab.judging import credit
from rubriclab.rubrics import JudgeTemplate
from rubriclab.stats import bh_adjust, paired_bootstrap, two_sample_bootstrap


def seed_on_val(seed: JudgeTemplate, *, data: DriftData, judging: Judging) -> dict[str, Any]:
    rows = judging.rows({"seed": seed}, data.both("val"), desc="seed on val")
    return judging.scores(rows)


def validate(cands: Sequence[Candidate], seed_val: dict[str, Any], *, data: DriftData, judging: Judging,
             settings: DriftSettings) -> None:
    """Judge candidates on both val splits (one batch); set ``val`` and ``feasible_val``."""
    todo = [c for c in cands if not c.val]
    if todo:
        rows = judging.rows({c.prompt_id: c.template() for c in todo}, data.both("val"), desc="candidates on val")
        for c in todo:
            c.val = judging.scores(rows[rows["rubric"] == c.prompt_id])
    for c in cands:
        why = infeasible_because(c.val, seed_val)
        c.feasible_val = why is None
        c.note = why or ""


def infeasible_because(val: dict[str, Any], seed_val: dict[str, Any]) -> str | None:
    """Why a candidate's val scores break Eq. 5 or the failed-verdict rule; None when feasible."""
    b, base = val["bench"]["agreement"], seed_val["bench"]["agreement"]
    if not (np.isfinite(b) and np.isfinite(base) and b >= base):
        return f"bench-val {b:.3f} < seed's {base:.3f}"
    for d in ("bench", "target"):
        mine, seed = val[d].get("n_failed", 0), seed_val[d].get("n_failed", 0)
        if mine > seed:
            return f"{mine} failed {d}-val verdicts > seed's {seed}"
    return None


def select(pool: Sequence[Candidate], seed_val: dict[str, Any]) -> tuple[Candidate | None, str]:
    """The Eq. 6 choice among validated candidates, or None (keep the seed) with why."""
    if not pool:
        return None, "no usable candidate"
    feasible = [c for c in pool if c.feasible_val and np.isfinite(c.val["target"]["agreement"])]
    if not feasible:
        return None, (f"no feasible candidate: none of {len(pool)} reached the seed's benchmark-val agreement "
                      f"({seed_val['bench']['agreement']:.3f}) with no more failed val verdicts than the seed's")
    order = {c.prompt_id: i for i, c in enumerate(pool)}
    best = min(feasible, key=lambda c: (c.val["target"]["agreement"], -c.val["bench"]["agreement"],
                                        order[c.prompt_id]))
    return best, f"lowest target-val agreement among {len(feasible)} feasible of {len(pool)} validated"


def report_on_test(selected: dict[str, JudgeTemplate], *, data: DriftData, judging: Judging,
                settings: DriftSettings) -> pd.DataFrame:
    """One row per method: bench, target, gap on test with intervals, and the paired change vs the seed."""
    s, cfg = settings, settings.drift
    rows = judging.rows(selected, data.both("test"), desc="selected rubrics on test")
    level = f"{100 * cfg.confidence:g}%"
    out = []
    seed_rows = rows[rows["rubric"] == "seed"].set_index("pair_id") if "seed" in selected else None
    for method in selected:
        r = rows[rows["rubric"] == method]
        sc = judging.scores(r)
        b_vals = credit(r.loc[r["domain"] == "bench", "status"], cfg.tie_credit)
        t_vals = credit(r.loc[r["domain"] == "target", "status"], cfg.tie_credit)
        gap = two_sample_bootstrap(b_vals[~np.isnan(b_vals)], t_vals[~np.isnan(t_vals)], n_resamples=cfg.n_boot,
                                   seed=s.seed, confidence=cfg.confidence)
        row: dict[str, Any] = {"method": method, "rubric": selected[method].name}
        for d in ("bench", "target"):
            m = sc[d]
            row.update({d: m["agreement"], f"{d}_low": m["low"], f"{d}_high": m["high"], f"{d}_n": m["n"],
                        f"{d}_ties": m["n_tie"], f"{d}_failed": m["n_failed"]})
        row.update(gap=gap["diff"], gap_low=gap["low"], gap_high=gap["high"])
        for d in ("bench", "target"):
            row.update(_vs_seed(r, seed_rows, d, s) if seed_rows is not None else {})
        out.append(row)
    table = adjust_across_methods(pd.DataFrame(out))
    table.attrs["ci"] = (f"{level} percentile bootstrap over pairs (B={cfg.n_boot}); gap: two-sample bootstrap "
                         f"(bench and target resampled separately); Δ vs seed: paired bootstrap over the same pairs, "
                         f"p raw and Benjamini–Hochberg adjusted across methods (per domain)")
    return table


def adjust_across_methods(table: pd.DataFrame) -> pd.DataFrame:
    """``d_<domain>_p_bh``: BH across the methods compared with the seed (the seed row, its own reference,
    is not a hypothesis; NaN p-values are not counted)."""
    others = table["method"] != "seed" if "method" in table else pd.Series(True, index=table.index)
    for d in ("bench", "target"):
        col = f"d_{d}_p"
        if col not in table:
            continue
        adj = np.full(len(table), np.nan)
        adj[others.to_numpy()] = bh_adjust(table.loc[others, col].to_numpy(dtype=float))
        table.insert(table.columns.get_loc(col) + 1, f"{col}_bh", adj)
    return table


def _vs_seed(r: pd.DataFrame, seed_rows: pd.DataFrame, domain: str, s: DriftSettings) -> dict[str, Any]:
    cfg = s.drift
    mine = r[r["domain"] == domain].set_index("pair_id")
    base = seed_rows.loc[mine.index]
    a = credit(mine["status"], cfg.tie_credit)
    b = credit(base["status"], cfg.tie_credit)
    both = ~np.isnan(a) & ~np.isnan(b)
    key = f"d_{domain}"
    if not both.any():
        return {key: np.nan, f"{key}_low": np.nan, f"{key}_high": np.nan, f"{key}_p": np.nan, f"{key}_n": 0}
    pb = paired_bootstrap(a[both], b[both], n_resamples=cfg.n_boot, seed=s.seed, confidence=cfg.confidence)
    return {key: pb["diff"], f"{key}_low": pb["low"], f"{key}_high": pb["high"], f"{key}_p": pb["p_value"],
            f"{key}_n": int(both.sum())}
