"""One drift run: the context every method shares, running a method, and the archive."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.drift._baselines import few_shot_icl, random_search, textgrad
from rubriclab.drift._engine import Candidate, DriftData, DriftSettings, Judging, Registry
from rubriclab.drift._search import biased_search
from rubriclab.drift._select import seed_on_val, select, validate
from rubriclab.errors import ArgumentError
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.rubrics import JudgeTemplate


@dataclass
class DriftContext:
    """What every method of one run shares: one registry (a text proposed twice is one candidate) and one
    judging cache (a (rubric text, pair) is judged once)."""

    seed: JudgeTemplate
    data: DriftData
    gateway: Gateway
    judge: RoleSpec
    refiner: RoleSpec
    settings: DriftSettings
    templates_dir: str | None = None
    registry: Registry = field(init=False)
    judging: Judging = field(init=False)
    _seed_val: dict[str, Any] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.registry = Registry(self.seed)
        self.judging = Judging(self.gateway, self.judge, self.settings, self.templates_dir)

    @property
    def seed_val(self) -> dict[str, Any]:
        if self._seed_val is None:
            self._seed_val = seed_on_val(self.seed, data=self.data, judging=self.judging)
        return self._seed_val


def run_method(ctx: DriftContext, method: str, settings: DriftSettings | None = None,
               label: str | None = None) -> dict[str, Any]:
    """Propose, validate (within the budget) and select for one method; ``label`` names the candidates
    (``ours`` points of a study get their own label)."""
    s = settings or ctx.settings
    label = label or method
    common = {"registry": ctx.registry, "refiner": ctx.refiner, "settings": s, "gateway": ctx.gateway,
              "templates_dir": ctx.templates_dir}
    extra: dict[str, Any] = {}
    if method == "seed":
        return {"method": label, "pool": [], "selected": None, "reason": "the seed rubric itself", "extra": extra}
    if method == "random":
        res = random_search(ctx.seed, **common)
    elif method == "icl":
        res = few_shot_icl(ctx.seed, data=ctx.data, judging=ctx.judging, **common)
    elif method == "textgrad":
        res = textgrad(ctx.seed, data=ctx.data, judging=ctx.judging, seed_val=ctx.seed_val, **common)
    elif method == "ours":
        res = biased_search(ctx.seed, data=ctx.data, judging=ctx.judging, method=label, **common)
    else:
        raise ArgumentError(f"unknown method {method!r}")
    pool = res["pool"][: s.drift.val_budget]
    validate(pool, ctx.seed_val, data=ctx.data, judging=ctx.judging, settings=s)
    chosen, reason = select(pool, ctx.seed_val)
    if not pool:
        rejected = ctx.registry.rejected(label)
        why = ", ".join(f"{n} {rule}" for rule, n in sorted(rejected.items())) or "no proposal"
        reason = f"no usable candidate ({why}); the seed is kept" + (f"; {res['note']}" if res.get("note") else "")
    extra = {k: v for k, v in res.items() if k != "pool"}
    extra["proposed"] = sum(c.method == label for c in ctx.registry.candidates)
    shortfall = budget_shortfall(len(pool), s, extra)
    if shortfall:
        reason = f"{reason}; {shortfall}"
    extra["budget_note"] = shortfall
    return {"method": label, "pool": pool, "selected": chosen, "reason": reason, "extra": extra}


def budget_shortfall(n_pool: int, s: DriftSettings, extra: dict[str, Any]) -> str:
    """'' when the method validated its whole budget, else what left it short (said in the outputs)."""
    if n_pool >= s.drift.val_budget:
        return ""
    refill = extra.get("refill") or {}
    return (f"validated {n_pool} of the {s.drift.val_budget}-candidate budget: invalid or repeated proposals were not "
            f"replaced within the refill cap ({refill.get('extra_proposals', 0)} of {refill.get('cap', 0)} extra "
            f"proposals, {extra['proposed']} in all)")


def selected_template(ctx: DriftContext, result: Mapping[str, Any]) -> JudgeTemplate:
    chosen: Candidate | None = result["selected"]
    return ctx.seed if chosen is None else chosen.template()


def archive_frame(ctx: DriftContext) -> pd.DataFrame:
    """Every candidate of every method: status, lineage, train-round and val agreement."""
    rows = []
    for c in ctx.registry.candidates:
        row: dict[str, Any] = {"prompt_id": c.prompt_id, "method": c.method, "parent_prompt_id": c.parent,
                               "gen_step": c.gen_step, "status": c.status, "duplicate_of": c.duplicate_of}
        for t, m in sorted(c.train.items()):
            row[f"train_r{t}_bench"] = m["bench"]
            row[f"train_r{t}_target"] = m["target"]
            row[f"train_r{t}_feasible"] = m["feasible"]
        for d in ("bench", "target"):
            v = c.val.get(d, {})
            row[f"val_{d}"] = v.get("agreement", np.nan)
            row[f"val_{d}_n"] = v.get("n", np.nan)
        row["feasible_val"] = c.feasible_val
        row["infeasible_because"] = c.note
        row["chars"] = len(c.text or "")
        row["text"] = c.text
        rows.append(row)
    return pd.DataFrame(rows)


def archive_lines(ctx: DriftContext) -> list[dict[str, Any]]:
    """The archive in RIPD's format: the seed line, then every candidate that satisfies the constraints
    (``prompt_id``, ``parent_prompt_id``, ``gen_step``, ``prompt`` first; our numbers as extra keys)."""
    lines = [{"prompt_id": "seed", "gen_step": 0, "prompt": ctx.seed.text,
              "val_bench": ctx.seed_val["bench"]["agreement"], "val_target": ctx.seed_val["target"]["agreement"]}]
    for c in ctx.registry.candidates:
        if not c.usable:
            continue
        line: dict[str, Any] = {"prompt_id": c.prompt_id, "parent_prompt_id": c.parent, "gen_step": c.gen_step,
                                "prompt": c.text, "method": c.method}
        if c.train:
            last = max(c.train)
            line.update(train_bench=c.train[last]["bench"], train_target=c.train[last]["target"])
        if c.val:
            line.update(val_bench=c.val["bench"]["agreement"], val_target=c.val["target"]["agreement"],
                        feasible_val=c.feasible_val)
        lines.append(line)
    return lines
