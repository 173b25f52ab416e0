"""Grid studies: run an objective once per point of a fixed grid, as an Optuna study that several processes (on
several machines) may work on at the same time -- the δ sweep of ``repair`` and the search grid of ``drift``.

``grid_of`` builds the points from axes, ``study_name`` names a study by what it measures, ``study_storage`` opens
its storage (a journal file, SQLite or PostgreSQL), ``run_grid`` runs the points this process can claim (every
point ends with exactly one COMPLETE or PRUNED trial, however many workers; ``_run`` says how) and
``grid_results`` reads one row per point back. Imports optuna, pandas and ``rubriclab.errors`` / ``secrets`` only:
a worker process starts in well under a second."""

from __future__ import annotations

from rubriclab.studies._naming import study_name
from rubriclab.studies._points import grid_key, grid_of
from rubriclab.studies._run import ERROR_ATTR, GRID_KEY_ATTR, WORKER_ATTR, grid_results, run_grid
from rubriclab.studies._storage import study_storage

__all__ = ["ERROR_ATTR", "GRID_KEY_ATTR", "WORKER_ATTR", "grid_key", "grid_of", "grid_results", "run_grid",
           "study_name", "study_storage"]
