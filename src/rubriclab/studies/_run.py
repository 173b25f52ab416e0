"""Grid studies: run an objective once per point of a fixed grid, as an Optuna study that several processes
(on several machines) may work on at the same time.

How a grid point gets exactly one COMPLETE trial, with any number of workers:

* Trials are only ever *created* by :func:`_reconcile`, which runs under a lock that excludes every other
  process working on the same study: a PostgreSQL advisory lock (held on its own connection, released by the
  server if the process dies), or an ``flock`` on a file next to the SQLite database / journal file (released
  by the kernel if the process dies). Under the lock it reads all trials and enqueues one WAITING trial for each
  grid point that has no WAITING, RUNNING or COMPLETE trial -- a new point, or one whose trials all FAILED. As no
  one else can create a trial meanwhile, and trial states only move forward (WAITING -> RUNNING -> finished), what
  it reads cannot go stale in a way that makes it enqueue a second live trial for a point.
* A worker claims a WAITING trial with ``storage.set_trial_state_values(trial_id, RUNNING)``, a compare-and-set in
  both storages (RDB: ``SELECT ... FOR UPDATE`` on the trial row; journal: the first RUNNING record in the log
  wins, the call returns False to the others). It never calls ``study.ask()``, which would sample a brand-new,
  non-grid trial when the queue is empty (and ``enqueue_trial`` from several processes duplicates points, optuna
  issue #2925).
* A running trial gets a heartbeat (system attr ``rubriclab:heartbeat``, unix time, every ``stale_after / 4`` s,
  at most 30 s). A RUNNING trial whose heartbeat is older than ``stale_after`` belongs to a dead worker: the
  reconciler marks it FAIL and the point is enqueued again. Should that worker be alive after all, its own
  result can no longer be stored (a finished trial cannot be updated; the storage raises
  ``UpdateFinishedTrialError``), so still only one trial per point completes.
* RDB schema creation (first use of an empty database) is serialized with the same kind of lock: concurrent
  ``RDBStorage`` construction races on ``CREATE TABLE`` (optuna issue #1092).

A trial whose objective raised is FAILED and not retried by the call that ran it; the next call (from any process)
enqueues the point again. An objective that raises ``optuna.TrialPruned`` says the point ran but its value is
undefined (e.g. α without a judge panel): the trial is PRUNED, with the reason in its ``error`` attr, and counts
as done. Grid values may be ``±math.inf``; the real value lives in the trial's ``grid_key``
user attr and is what the objective and :func:`grid_results` get. The Optuna param of a non-finite value is stored
as ``±sys.float_info.max`` (JSON has no infinity: some storages and the dashboard cannot take it).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
import pandas as pd
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage, get_storage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from rubriclab.errors import ConfigError
from rubriclab.studies._points import grid_key, optuna_params, point_from_key, validate_grid
from rubriclab.studies._storage import grid_lock, open_url

log = logging.getLogger(__name__)

GRID_KEY_ATTR = "grid_key"
WORKER_ATTR = "worker"
ERROR_ATTR = "error"
_HEARTBEAT_ATTR = "rubriclab:heartbeat"
_LIVE = (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)
_DONE = (TrialState.COMPLETE, TrialState.PRUNED)


def _directions(directions: Sequence[str | StudyDirection]) -> list[StudyDirection]:
    if isinstance(directions, str):
        directions = [directions]
    out = []
    for d in directions:
        if isinstance(d, StudyDirection) and d != StudyDirection.NOT_SET:
            out.append(d)
        elif isinstance(d, str) and d.lower() in ("maximize", "minimize"):
            out.append(StudyDirection.MAXIMIZE if d.lower() == "maximize" else StudyDirection.MINIMIZE)
        else:
            raise ConfigError(f"study direction {d!r} is not 'maximize' or 'minimize'")
    if not out:
        raise ConfigError("directions is empty; expected e.g. ('maximize', 'minimize')")
    return out


def _open_study(study_name: str, storage: BaseStorage, directions: list[StudyDirection]) -> optuna.Study:
    # create_new_study is atomic (unique name); the loser of a race loads the winner's study
    study = optuna.create_study(study_name=study_name, storage=storage, load_if_exists=True,
                                directions=directions, sampler=optuna.samplers.RandomSampler())
    if list(study.directions) != directions:
        raise ConfigError(f"study {study_name!r} exists with directions {[d.name.lower() for d in study.directions]}, "
                          f"not {[d.name.lower() for d in directions]}; use another study name")
    return study


def _reconcile(storage: BaseStorage, study_id: int, points: list[tuple[str, dict[str, Any]]],
               stale_after: float | None) -> int:
    """Under the grid lock: fail the RUNNING grid trials of dead workers (heartbeat older than ``stale_after``;
    a RUNNING trial without a heartbeat was not started by run_grid and is left alone), then enqueue one WAITING
    trial for each grid point without a live (WAITING/RUNNING/COMPLETE) trial. Returns how many it enqueued."""
    trials = storage.get_all_trials(study_id, deepcopy=False)
    if stale_after is not None:
        now, failed = time.time(), False
        for t in trials:
            beat = t.system_attrs.get(_HEARTBEAT_ATTR)
            if t.state != TrialState.RUNNING or GRID_KEY_ATTR not in t.user_attrs or not isinstance(beat, (int, float)):
                continue
            if now - beat > stale_after:
                try:
                    storage.set_trial_user_attr(t._trial_id, ERROR_ATTR, f"stale: no heartbeat for {now - beat:.0f} s "
                                                f"from worker {t.user_attrs.get(WORKER_ATTR)!r}")
                    storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
                    failed = True
                    log.warning("trial %d (%s) had no heartbeat for %.0f s; marked FAIL, the point is enqueued again",
                                t.number, t.user_attrs[GRID_KEY_ATTR], now - beat)
                except UpdateFinishedTrialError:
                    pass  # it finished after all
        if failed:
            trials = storage.get_all_trials(study_id, deepcopy=False)
    live = {t.user_attrs.get(GRID_KEY_ATTR) for t in trials if t.state in _LIVE}
    enqueued = 0
    for key, point in points:
        if key in live:
            continue
        params, dists = optuna_params(point)
        template = optuna.trial.create_trial(state=TrialState.WAITING, params=params, distributions=dists,
                                             user_attrs={GRID_KEY_ATTR: key})
        storage.create_new_trial(study_id, template_trial=template)
        enqueued += 1
    return enqueued


def _claim(storage: BaseStorage, study_id: int, wanted: Mapping[str, Any], skip: set[str]) -> tuple[int, str] | None:
    """Claim one WAITING trial of this grid (compare-and-set WAITING -> RUNNING), or None when none is left."""
    for t in storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.WAITING,)):
        key = t.user_attrs.get(GRID_KEY_ATTR)
        if key not in wanted or key in skip:
            continue
        try:
            # beat before the claim, so that a RUNNING trial always carries a heartbeat for the stale check
            storage.set_trial_system_attr(t._trial_id, _HEARTBEAT_ATTR, time.time())
            if storage.set_trial_state_values(t._trial_id, TrialState.RUNNING):
                return t._trial_id, key
        except UpdateFinishedTrialError:
            continue  # another worker claimed and finished it meanwhile
    return None


class _Heartbeat:
    def __init__(self, storage: BaseStorage, trial_id: int, interval: float) -> None:
        self._storage, self._trial_id, self._interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rubriclab-heartbeat-{trial_id}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._storage.set_trial_system_attr(self._trial_id, _HEARTBEAT_ATTR, time.time())
            except UpdateFinishedTrialError:
                return
            except Exception as e:  # a passing storage error: the next beat may go through
                log.debug("heartbeat of trial id %d failed: %r", self._trial_id, e)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _values(result: Any, n: int) -> tuple[list[float] | None, str | None]:
    if isinstance(result, (str, bytes)):
        return None, f"objective returned {type(result).__name__}, not a number or a sequence of numbers"
    try:
        raw = [float(result)]
    except TypeError:
        try:
            raw = [float(v) for v in result]
        except (TypeError, ValueError):
            return None, f"objective returned {type(result).__name__}, not a number or a sequence of numbers"
    except ValueError:
        return None, f"objective returned {result!r}, not a number"
    if any(math.isnan(v) for v in raw):
        return None, f"objective returned NaN ({raw})"
    if len(raw) != n:
        return None, f"objective returned {len(raw)} values for {n} directions"
    return raw, None


def _finish(storage: BaseStorage, trial_id: int, state: TrialState, values: list[float] | None,
            error: str | None) -> bool:
    """Store the outcome; False when the trial was already finished (failed as stale by another worker)."""
    try:
        if error is not None:
            storage.set_trial_user_attr(trial_id, ERROR_ATTR, error[:1000])
        storage.set_trial_state_values(trial_id, state, values)
        return True
    except UpdateFinishedTrialError:
        log.warning("trial id %d was marked FAIL by another worker (no heartbeat) while it ran here; its result is "
                    "discarded and the grid point runs again", trial_id)
        return False


def _run_one(study: optuna.Study, storage: BaseStorage, trial_id: int, point: dict[str, Any],
             objective: Callable[..., Any], worker: str, beat: float) -> FrozenTrial:
    n = len(study.directions)
    try:
        storage.set_trial_user_attr(trial_id, WORKER_ATTR, worker)
    except UpdateFinishedTrialError:
        return storage.get_trial(trial_id)
    trial = optuna.trial.Trial(study, trial_id)
    with _Heartbeat(storage, trial_id, beat):
        try:
            result = objective(trial, dict(point))
        except optuna.TrialPruned as e:  # ran, value undefined: done, not retried
            _finish(storage, trial_id, TrialState.PRUNED, None, f"undefined: {e}")
            return storage.get_trial(trial_id)
        except Exception as e:
            values, error = None, f"{type(e).__name__}: {e}"
            log.warning("trial %d %s failed: %s; a later run_grid call retries it", trial.number,
                        grid_key(point), error)
        except BaseException:  # KeyboardInterrupt, SystemExit: record, then stop
            _finish(storage, trial_id, TrialState.FAIL, None, "interrupted")
            raise
        else:
            values, error = _values(result, n)
            if error:
                log.warning("trial %d %s failed: %s", trial.number, grid_key(point), error)
    _finish(storage, trial_id, TrialState.COMPLETE if values is not None else TrialState.FAIL, values, error)
    return storage.get_trial(trial_id)


def run_grid(study_name: str, storage: BaseStorage | str, grid: list[dict[str, Any]],
             objective: Callable[[optuna.trial.Trial, dict[str, Any]], float | Sequence[float]], *,
             directions: Sequence[str] = ("maximize", "minimize"), worker: str | None = None,
             callbacks: Sequence[Callable[[optuna.Study, FrozenTrial], None]] = (),
             stale_after: float | None = 600.0) -> optuna.Study:
    """Create or load study ``study_name``, make sure every grid point has one live trial, and run the points this
    process can claim until none is left unclaimed.

    Safe to call from several processes and machines at once with the same grid (see the module docstring): every
    grid point ends with exactly one COMPLETE trial, and no trial is created that is not a grid point's. The
    objective gets ``(trial, params)`` with the real grid values (``math.inf`` included) and returns one value per
    direction; if it raises (or returns NaN / the wrong number of values) the trial is FAILED, logged, and retried
    by a later call, not by this one. ``storage`` is a storage from :func:`study_storage` (or an SQLite/PostgreSQL
    URL). Trials carry user attrs ``grid_key`` (:func:`grid_key`), ``worker`` (default ``hostname:pid``) and, when
    they failed, ``error``. ``callbacks`` are called as ``callback(study, frozen_trial)`` after each trial this
    process finished. ``stale_after``: seconds without a heartbeat after which another process's RUNNING trial
    counts as dead and is retried (None: never); wall clocks of the workers must agree to well within it.
    """
    points = validate_grid(grid)
    dirs = _directions(directions)
    if stale_after is not None and not stale_after > 0:
        raise ConfigError(f"stale_after must be a positive number of seconds or None, got {stale_after!r}")
    if isinstance(storage, str):  # a journal needs study_storage(None, journal=PATH)
        storage = open_url(storage)
    storage = get_storage(storage)  # RDBStorage -> Optuna's cache wrapper, as create_study does
    worker = worker or f"{socket.gethostname()}:{os.getpid()}"
    study = _open_study(study_name, storage, dirs)
    study_id = storage.get_study_id_from_name(study_name)
    with grid_lock(storage, study_name):
        enqueued = _reconcile(storage, study_id, points, stale_after)
    if enqueued:
        log.info("study %r: enqueued %d of %d grid points", study_name, enqueued, len(points))
    beat = min(30.0, stale_after / 4) if stale_after is not None else 30.0
    wanted = dict(points)
    failed_here: set[str] = set()
    while (claimed := _claim(storage, study_id, wanted, failed_here)) is not None:
        trial_id, key = claimed
        frozen = _run_one(study, storage, trial_id, wanted[key], objective, worker, beat)
        if frozen.state not in _DONE:
            failed_here.add(key)
        for callback in callbacks:
            callback(study, frozen)
    return study


def grid_results(study: optuna.Study) -> pd.DataFrame:
    """One row per grid point of the study (in the order the points were first enqueued): its params (real values,
    ``inf`` restored), ``values`` (tuple, or None) and ``value_0``, ``value_1``, … per direction, ``state``,
    ``worker``, ``trial_number``, ``error``, ``attempts`` (trials of the point, failed ones included),
    ``n_complete`` (1 when done; never more) and ``grid_key``. The row shows the point's COMPLETE trial, else its
    latest one."""
    by_key: dict[str, list[FrozenTrial]] = {}
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        key = t.user_attrs.get(GRID_KEY_ATTR)
        if isinstance(key, str):
            by_key.setdefault(key, []).append(t)
    n = len(study.directions)
    rows = []
    for key, trials in by_key.items():
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        done = [t for t in trials if t.state in _DONE]
        rep = done[0] if done else trials[-1]
        values = tuple(rep.values) if rep.values is not None else None
        rows.append({
            **point_from_key(key),
            "values": values,
            **{f"value_{i}": (values[i] if values is not None else math.nan) for i in range(n)},
            "state": rep.state.name,
            "worker": rep.user_attrs.get(WORKER_ATTR),
            "trial_number": rep.number,
            "error": rep.user_attrs.get(ERROR_ATTR),
            "attempts": len(trials),
            "n_complete": len(complete),
            "grid_key": key,
        })
    return pd.DataFrame(rows)
