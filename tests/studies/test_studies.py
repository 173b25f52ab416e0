"""Grid studies (rubriclab.studies): one COMPLETE trial per grid point, with one worker or several
processes sharing a journal file or a PostgreSQL database, inf round-trips, failed points retried, dead workers'
trials recovered, storage URLs checked without leaking passwords."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest

from rubriclab.errors import ConfigError
from rubriclab.studies import grid_key, grid_of, grid_results, run_grid, study_name, study_storage
from rubriclab.testing import find_postgres_bindir, postgres_server

optuna.logging.set_verbosity(optuna.logging.WARNING)

DELTAS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, math.inf]

# A worker process. It imports rubriclab.studies (only optuna, pandas and rubriclab.errors/secrets: no method
# package, whose modules take seconds to import); says it is ready, waits for 'go' so
# that both workers start together (opening the storage included: a fresh PostgreSQL database races on its
# schema), then runs the grid with an objective that sleeps so the workers overlap, and logs what it ran.
WORKER = r"""
import json, math, os, sys, time
from pathlib import Path
spec, study_name, out, name, grid_json, sleep_s, die = sys.argv[1:8]
from rubriclab import studies as st
import optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
out = Path(out)
(out / f"ready.{name}").touch()
deadline = time.time() + 60
while not (out / "go").exists():
    if time.time() > deadline:
        sys.exit("no go")
    time.sleep(0.005)
storage = st.study_storage(None, journal=spec[len("journal:"):]) if spec.startswith("journal:") \
    else st.study_storage(spec, journal="unused")
ran = out / f"ran.{name}"

def objective(trial, params):
    with open(ran, "a") as f:
        f.write(st.grid_key(params) + "\n")
    if die == "die":
        os._exit(3)  # a worker killed mid-trial: its trial stays RUNNING, its heartbeat stops
    time.sleep(float(sleep_s))
    d = params["delta"]
    return (d if math.isfinite(d) else 1e9), 0.0

st.run_grid(study_name, storage, json.loads(grid_json), objective, worker=name)
"""


def _grid() -> list[dict]:
    return [{"delta": d, "n_candidates": 4} for d in DELTAS]


def _start_workers(tmp_path: Path, spec: str, study: str, names: list[str], *, sleep_s: float = 0.15,
                   die: bool = False) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, spec, study, str(tmp_path), name,
                               json.dumps(_grid()), str(sleep_s), "die" if die else "live"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for name in names]
    deadline = time.time() + 30
    while not all((tmp_path / f"ready.{n}").exists() for n in names):
        dead = [p for p in procs if p.poll() is not None]
        assert not dead and time.time() < deadline, [p.communicate()[0] for p in procs if p.poll() is not None]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    return procs


def _wait(procs: list[subprocess.Popen], timeout: float = 60) -> list[tuple[int, str]]:
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
        out.append((p.returncode, text))
    return out


def _assert_one_complete_trial_per_point(study: optuna.Study) -> None:
    keys = [grid_key(p) for p in _grid()]
    trials = study.get_trials(deepcopy=False)
    assert all(t.user_attrs.get("grid_key") in keys for t in trials), "stray trial without a grid point"
    per_key = Counter(t.user_attrs["grid_key"] for t in trials)
    assert per_key == Counter(keys), f"not exactly one trial per grid point: {per_key}"
    assert {t.state for t in trials} == {optuna.trial.TrialState.COMPLETE}


def _check_two_workers(tmp_path: Path, spec: str, open_storage) -> None:
    results = _wait(_start_workers(tmp_path, spec, "sweep", ["w1", "w2"]))
    assert [rc for rc, _ in results] == [0, 0], results
    study = optuna.load_study(study_name="sweep", storage=open_storage())
    _assert_one_complete_trial_per_point(study)
    ran = {n: (tmp_path / f"ran.{n}").read_text().splitlines() if (tmp_path / f"ran.{n}").exists() else []
           for n in ("w1", "w2")}
    calls = Counter(ran["w1"] + ran["w2"])
    assert calls == Counter(grid_key(p) for p in _grid()), f"objective not run exactly once per point: {calls}"
    assert ran["w1"] and ran["w2"], f"one worker ran everything: {ran}"
    by_trial = {t.user_attrs["grid_key"]: t.user_attrs["worker"] for t in study.get_trials(deepcopy=False)}
    assert all(by_trial[k] == n for n in ran for k in ran[n])  # the trial names the process that ran it
    df = grid_results(study)
    assert len(df) == len(DELTAS) and set(df["state"]) == {"COMPLETE"} and set(df["n_complete"]) == {1}
    assert df["delta"].tolist() == DELTAS  # inf restored, grid order kept


def test_journal_single_worker_inf_rerun_and_retry(tmp_path):
    storage = study_storage(None, journal=tmp_path / "deep" / "dir" / "study.log")
    calls: list[dict] = []
    boom = {"armed": True}

    def objective(trial, params):
        calls.append(params)
        if params["delta"] == 0.3 and boom["armed"]:
            boom["armed"] = False
            raise RuntimeError("transient failure")
        d = params["delta"]
        return (2.0 if math.isinf(d) else d), 1.0

    study = run_grid("repair", storage, _grid(), objective)
    assert sorted(p["delta"] for p in calls) == sorted(DELTAS)  # each point once in this call, the failed one too
    assert any(math.isinf(p["delta"]) and p["delta"] > 0 for p in calls)  # the objective got the real inf
    df = grid_results(study).set_index("delta")
    assert df.loc[0.3, "state"] == "FAIL" and "transient failure" in df.loc[0.3, "error"]
    assert df.loc[math.inf, "state"] == "COMPLETE" and df.loc[math.inf, "values"] == (2.0, 1.0)
    assert (df.drop(index=0.3)["state"] == "COMPLETE").all()

    calls.clear()
    study = run_grid("repair", storage, _grid(), objective)  # only the failed point runs again
    assert calls == [{"delta": 0.3, "n_candidates": 4}]
    df = grid_results(study)
    assert set(df["state"]) == {"COMPLETE"} and set(df["n_complete"]) == {1}
    assert df.set_index("delta").loc[0.3, "attempts"] == 2 and df["delta"].tolist() == DELTAS
    assert df["worker"].str.contains(":").all() and df["grid_key"].is_unique

    calls.clear()
    run_grid("repair", storage, _grid(), objective)  # done: nothing runs, nothing is added
    assert calls == []
    trials = optuna.load_study(study_name="repair", storage=storage).get_trials(deepcopy=False)
    assert len(trials) == len(DELTAS) + 1  # the one FAIL plus one COMPLETE per point
    assert Counter(t.state.name for t in trials) == {"COMPLETE": len(DELTAS), "FAIL": 1}
    inf_trial = next(t for t in trials if t.user_attrs["grid_key"] == grid_key({"delta": math.inf, "n_candidates": 4}))
    assert inf_trial.params["delta"] == sys.float_info.max  # the Optuna param: a finite stand-in


def test_undefined_value_is_pruned_with_its_reason_and_not_retried(tmp_path):
    storage = study_storage(None, journal=tmp_path / "study.log")
    calls: list[float] = []

    def objective(trial, params):
        calls.append(params["delta"])
        if params["delta"] == 0.1:
            raise optuna.TrialPruned("held-out α undefined: a single judge")
        return 1.0, 0.5

    run_grid("undef", storage, _grid(), objective)
    study = run_grid("undef", storage, _grid(), objective)
    assert sorted(calls) == sorted(DELTAS)  # the undefined point ran once, like the others
    df = grid_results(study).set_index("delta")
    assert df.loc[0.1, "state"] == "PRUNED" and "a single judge" in df.loc[0.1, "error"]
    assert df.loc[0.1, "attempts"] == 1 and df.loc[0.1, "values"] is None
    assert (df.drop(index=0.1)["state"] == "COMPLETE").all()


def test_journal_two_processes(tmp_path):
    journal = tmp_path / "study.log"
    _check_two_workers(tmp_path, f"journal:{journal}", lambda: study_storage(None, journal=journal))


@pytest.mark.skipif(find_postgres_bindir() is None,
                    reason="PostgreSQL server binaries not installed (apt-get install postgresql)")
def test_postgres_two_processes(tmp_path):
    with postgres_server() as url:
        plain = url.replace("postgresql+psycopg://", "postgresql://")  # the workers get the plain form
        opened = []

        def open_storage():
            opened.append(study_storage(url, journal="unused"))
            return opened[-1]

        try:
            # the workers are the first to use the empty database: they race on creating Optuna's schema too
            _check_two_workers(tmp_path, plain, open_storage)
            assert study_storage(plain, journal="unused").engine.url.drivername == "postgresql+psycopg"
            _hammer(open_storage)  # and many workers with no sleep, on the same server
        finally:
            for s in opened:
                s.engine.dispose()


def test_dead_worker_trial_is_recovered(tmp_path):
    journal = tmp_path / "study.log"
    rc, text = _wait(_start_workers(tmp_path, f"journal:{journal}", "sweep", ["doomed"], die=True))[0]
    assert rc == 3, text
    storage = study_storage(None, journal=journal)
    dead_key = (tmp_path / "ran.doomed").read_text().strip()
    calls: list[str] = []

    def objective(trial, params):
        calls.append(grid_key(params))
        return params["delta"], 0.0

    run_grid("sweep", storage, _grid(), objective)  # the dead worker's trial still looks alive: left alone
    assert dead_key not in calls and len(calls) == len(DELTAS) - 1
    time.sleep(0.6)
    study = run_grid("sweep", storage, _grid(), objective, stale_after=0.5)
    assert calls[-1] == dead_key and len(calls) == len(DELTAS)
    df = grid_results(study).set_index("grid_key")
    assert set(df["state"]) == {"COMPLETE"} and df.loc[dead_key, "attempts"] == 2
    stale = [t for t in study.get_trials(deepcopy=False) if t.state.name == "FAIL"]
    assert len(stale) == 1 and stale[0].user_attrs["error"].startswith("stale")


def test_heartbeat_keeps_a_slow_trial_alive(tmp_path):
    journal = tmp_path / "study.log"
    grid = [{"delta": 0.0}, {"delta": 1.0}]
    calls: list[tuple[str, float]] = []

    def slow(trial, params):
        calls.append(("slow", params["delta"]))
        time.sleep(2.2 if params["delta"] == 0.0 else 0.0)
        return params["delta"], 0.0

    def fast(trial, params):
        calls.append(("fast", params["delta"]))
        return params["delta"], 0.0

    first = threading.Thread(target=run_grid, args=("s", study_storage(None, journal=journal), grid[:1], slow),
                             kwargs={"stale_after": 1.0})
    first.start()
    time.sleep(1.3)  # the slow trial has run longer than stale_after, but it beats every 0.25 s
    run_grid("s", study_storage(None, journal=journal), grid, fast, stale_after=1.0)
    first.join()
    assert sorted(calls) == [("fast", 1.0), ("slow", 0.0)]
    study = optuna.load_study(study_name="s", storage=study_storage(None, journal=journal))
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE", "COMPLETE"]


def test_study_storage_urls(tmp_path):
    for bad in ("mysql://admin:hunter2secret@db.example.com/optuna", "postgresql//admin:hunter2secret@db/optuna",
                "redis://:hunter2secret@cache:6379/0", "sqlite3:///x.db"):
        with pytest.raises(ConfigError) as e:
            study_storage(bad, journal=tmp_path / "j.log")
        msg = str(e.value)
        assert "hunter2secret" not in msg and "postgresql" in msg and "sqlite" in msg, msg
    # a supported URL whose server is not there: the connection error is reported without the password
    with pytest.raises(ConfigError) as e:
        study_storage("postgresql://admin:hunter2secret@127.0.0.1:1/optuna", journal=tmp_path / "j.log")
    assert "hunter2secret" not in str(e.value) and "cannot open" in str(e.value)

    storage = study_storage(f"sqlite:///{tmp_path}/new/dir/s.db", journal=tmp_path / "j.log")
    assert isinstance(storage, optuna.storages.RDBStorage) and (tmp_path / "new" / "dir" / "s.db").exists()
    study = run_grid("s", storage, [{"delta": math.inf}, {"delta": 0.0}], lambda t, p: (1.0, p["delta"]))
    assert grid_results(study)["value_1"].tolist() == [math.inf, 0.0]
    storage.engine.dispose()
    assert isinstance(study_storage("", journal=tmp_path / "j.log"), optuna.storages.JournalStorage)


def test_grid_is_checked(tmp_path):
    storage = study_storage(None, journal=tmp_path / "j.log")
    obj = lambda t, p: (0.0, 0.0)  # noqa: E731
    for grid, what in (([{"delta": 0.1}, {"delta": 0.1}], "repeats"), ([{"delta": math.nan}], "NaN"),
                       ([], "empty"), ([{"state": 1.0}], "not allowed"), ([{"delta": [1, 2]}], "expected")):
        with pytest.raises(ConfigError, match=what):
            run_grid("s", storage, grid, obj)
    run_grid("t", storage, [{"delta": 1.0}], obj)
    with pytest.raises(ConfigError, match="directions"):
        run_grid("t", storage, [{"delta": 1.0}], obj, directions=("minimize",))



def test_grid_of_crosses_the_axes_once_each_the_first_point_leading():
    assert grid_of({"n": [1, 2], "delta": [0.0, math.inf]}) == [
        {"n": 1, "delta": 0.0}, {"n": 1, "delta": math.inf}, {"n": 2, "delta": 0.0}, {"n": 2, "delta": math.inf}]
    base = {"eps": 0.05, "rounds": 4}
    grid = grid_of({"eps": [0.05, 0.2], "rounds": [4]}, first=base)
    assert grid == [base, {"eps": 0.2, "rounds": 4}]  # the configured point once, first
    assert grid_of({"d": [1.0, 1, 2]}) == [{"d": 1.0}, {"d": 2}]  # 1 == 1.0: one point, the first spelling kept
    assert grid_of({}, first={"d": 3}) == [{"d": 3}] and grid_of({}) == []


def test_a_study_name_is_its_prefix_and_a_digest_of_what_it_measures():
    a = study_name("repair-demo-mine", {"rubric": [1, 2], "models": ["m"]}, digits=10)
    assert a.startswith("repair-demo-mine-") and len(a) == len("repair-demo-mine-") + 10
    assert a == study_name("repair-demo-mine", {"models": ["m"], "rubric": [1, 2]}, digits=10)  # key order: same
    assert a != study_name("repair-demo-mine", {"rubric": [1, 2], "models": ["n"]}, digits=10)
    assert len(study_name("drift-x", [Path("p"), 1]).rsplit("-", 1)[1]) == 12  # str() for what JSON cannot hold

def _hammer(open_storage, n_threads: int = 6, n_points: int = 60) -> None:
    """Many workers, each with its own storage object (as separate processes have), no sleep in the objective:
    they keep claiming the same WAITING trials at the same moment, so a claim that is not a real
    compare-and-set runs some point twice."""
    grid = [{"delta": i / 10} for i in range(n_points)] + [{"delta": math.inf}]
    calls: Counter = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def objective(trial, params):
        with lock:
            calls[grid_key(params)] += 1
        return params["delta"], 0.0

    def work(i):
        try:
            storage = open_storage()
            barrier.wait()
            run_grid("hammer", storage, grid, objective, worker=f"t{i}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert calls == Counter(grid_key(p) for p in grid), {k: n for k, n in calls.items() if n != 1}
    study = optuna.load_study(study_name="hammer", storage=open_storage())
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == len(grid) and {t.state.name for t in trials} == {"COMPLETE"}


def test_journal_many_workers_claim_each_point_once(tmp_path):
    _hammer(lambda: study_storage(None, journal=tmp_path / "study.log"))
