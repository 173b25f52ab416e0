"""The biased search (``ours``) as a grid study over its tolerance knobs (``drift.study.grid`` over ε_train,
population, rounds; ``rubriclab.studies``): one run of the search per grid point, the configured point first, the
value minimised its target-val agreement."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rubriclab.drift._engine import DriftData, DriftSettings
from rubriclab.drift._run import DriftContext, run_method
from rubriclab.rubrics import JudgeTemplate
from rubriclab.settings import DriftGrid

KNOBS = ("eps_train", "population", "rounds")


def search_grid(grid: DriftGrid, settings: DriftSettings) -> list[dict[str, Any]]:
    """Study grid (``drift.study.grid``) over (ε_train, population, rounds); the configured point comes first."""
    from rubriclab.studies import grid_of

    base = {k: getattr(settings.drift.search, k) for k in KNOBS}
    return grid_of({"eps_train": [float(e) for e in grid.eps_train or [base["eps_train"]]],
                    "population": [int(p) for p in grid.population or [base["population"]]],
                    "rounds": [int(r) for r in grid.rounds or [base["rounds"]]]}, first=base)


def search_study_name(setting: str, seed: JudgeTemplate, settings: DriftSettings, data: DriftData,
                      models: list[str]) -> str:
    """The study of this setting, seed rubric, settings, splits and models: a re-run resumes it."""
    from rubriclab.studies import study_name

    return study_name(f"drift-{setting}", [setting, seed.text, repr(settings), data.counts(), models], digits=12)


def point_label(grid: list[dict[str, Any]], point: dict[str, Any]) -> str:
    """``ours`` for the configured point, ``ours<i>`` for the i-th other grid point (the candidates' labels)."""
    return "ours" if grid.index(point) == 0 else f"ours{grid.index(point)}"


def search_study(ctx: DriftContext, grid: list[dict[str, Any]], storage: Any, study_name: str
                 ) -> tuple[dict[int, dict[str, Any]], pd.DataFrame]:
    """Run the search at every grid point this process claims (study ``study_name`` on ``storage``), and recompute
    the points another worker ran from the call store. Returns the result per grid index (0: the configured point)
    and ``grid_results`` with the ``selected`` reason of each point."""
    import optuna

    from rubriclab.studies import grid_results, run_grid

    settings = ctx.settings
    points: dict[int, dict[str, Any]] = {}

    def objective(trial: optuna.Trial, point: dict[str, Any]) -> float:
        res = run_method(ctx, "ours", settings.with_search(**point), label=point_label(grid, point))
        points[grid.index(point)] = res
        value = (res["selected"].val if res["selected"] is not None else ctx.seed_val)["target"]["agreement"]
        trial.set_user_attr("selected", res["selected"].prompt_id if res["selected"] else "seed")
        trial.set_user_attr("reason", res["reason"])
        if not math.isfinite(value):
            raise optuna.TrialPruned("target-val agreement undefined (no judged target val pair)")
        return value

    study = run_grid(study_name, storage, grid, objective, directions=("minimize",))
    for i, point in enumerate(grid):  # points another worker ran: recomputed from the call store
        if i not in points:
            points[i] = run_method(ctx, "ours", settings.with_search(**point), label=point_label(grid, point))
    table = grid_results(study).drop(columns=["values"])
    table["selected"] = [points[grid.index({k: (int(r[k]) if k != "eps_train" else float(r[k])) for k in KNOBS})]
                         ["reason"] for _, r in table.iterrows()]
    return points, table
