from __future__ import annotations

import os
import sys

# first, before rubriclab.llm and the libraries the tests import register their atexit handlers: those run before a
# worker's skipped teardown (pytest_configure)
from rubriclab.stages import end_without_teardown

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# numba's CPU target as the stage launcher pins it (scripts/stage): the tests' in-process kernels (umap-learn's, in the
# probe's projection) are then the stages', and the ones scripts/install.sh compiled into the venv's cache
# (as there: a name set empty counts as unset, a feature list set empty is kept)
NUMBA_PINS = {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": ""}
if not os.environ.get("NUMBA_CPU_NAME"):
    os.environ["NUMBA_CPU_NAME"] = NUMBA_PINS["NUMBA_CPU_NAME"]
os.environ.setdefault("NUMBA_CPU_FEATURES", NUMBA_PINS["NUMBA_CPU_FEATURES"])

import pytest  # noqa: E402

from rubriclab.llm import Gateway, open_store  # noqa: E402

# The files that take more than a few seconds, longest first. `make test` (Makefile: --dist loadfile
# --no-loadscope-reorder) hands whole files to the two workers in collection order, so these start first and the
# many short files fill in around them and end the run together; in the default order (most tests first) the longest
# files came last and one worker ran them alone for the last ten minutes. Files that often wait are kept apart:
# test_reliability_kill.py (its kills wait on the stages) two files after test_reliability_faults.py (its hangs), so
# it starts about when that one ends (beside it, a core sat idle for 26 s), and test_ui_signal.py (its servers'
# start-ups) mid-run, not last, where it left a core idle for ~25 s. Measured with `--durations` and /proc/stat per
# second beside each worker's current test (benchmarks/README.md, "Test suite"); a file not listed keeps its place
# after these.
FIRST = (
    "test_readme.py",            # the README's block (the whole pipeline, small)
    "test_fresh_clone.py",       # a fresh clone's drift@demo on the embedded model
    "test_reliability_faults.py",  # the fault-free reference run (shared with test_reliability_kill.py), the faulty run
    "test_llm_local.py",
    "test_stage_server.py",
    "test_reliability_kill.py",
    "test_browser.py",
    "test_scale_out.py",
    "test_secrets_allowlist.py",
    "test_gateway_batched_writes.py",
    "test_ui_signal.py",
    "test_llm_faults.py",
    "test_secrets_e2e.py",
    "test_store_backends.py",
    "test_probe_stage.py",
    "test_align_policy.py",
    "test_align_stage.py",
    "test_engine.py",
    "test_llm_weights.py",
    "test_probe_semantics.py",
    "test_llm_sampling.py",
    "test_studies.py",
    "test_audit_stage.py",
    "test_repair_stage.py",
    "test_align_train.py",
    "test_audit_axes.py",
    "test_recorded_scale.py",
    "test_atomic.py",
    "test_report.py",
    "test_repair_refine.py",
    "test_repair_fidelity.py",
    "test_params_schema.py",
    "test_drift_search.py",
    "test_drift_gate.py",
    "test_drift_fidelity.py",
)


def pytest_configure(config):
    """Each xdist worker (and every stage it starts) gets its share of the cores: llama.cpp and torch use every core
    by default, and two workers' models spinning on four threads over two cores ran the embedded-model tests 3-4x
    slower. Set here, in the controller, before the workers start (they inherit its environment); a worker reads
    the same count from PYTEST_XDIST_WORKER_COUNT. A value set by the user wins.

    An xdist worker (``workerinput``: set by pytest-xdist in its workers only) ends without the interpreter's teardown
    of the modules its tests imported (torch, transformers, MLflow, ...: seconds of a core that `make test` waited
    for at its very end, the controller waiting for its workers to exit): by then it has sent its last report and its
    atexit handlers have run. The controller, whose exit status is the run's, and any other process that imports
    this file (a pytest a test starts inherits PYTEST_XDIST_WORKER) end the usual way."""
    if hasattr(config, "workerinput"):
        end_without_teardown(0)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or getattr(config.option, "numprocesses", None) or 1)
    share = str(max(1, (os.cpu_count() or 2) // workers))
    os.environ.setdefault("RUBRICLAB_THREADS", share)
    os.environ.setdefault("OMP_NUM_THREADS", share)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(FIRST)))  # stable: each file keeps its own order


def _mlflow_uri_state() -> tuple[str | None, str | None]:
    tracking = sys.modules.get("mlflow.tracking._tracking_service.utils")  # only if some test imported mlflow
    return os.environ.get("MLFLOW_TRACKING_URI"), getattr(tracking, "_tracking_uri", None)


@pytest.fixture(autouse=True)
def _mlflow_tracking_uri_left_as_found():
    """Fail a test that leaves MLflow's tracking URI changed, and put it back. ``mlflow.set_tracking_uri`` also sets
    ``$MLFLOW_TRACKING_URI``, which `tracking_uri` obeys: a leaked value sent the later stage runs of the same
    worker into one shared mlflow.db (two ``repair@demo_helpful`` parents in CI)."""
    before = _mlflow_uri_state()
    yield
    after = _mlflow_uri_state()
    if after != before:
        if before[0] is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before[0]
        tracking = sys.modules.get("mlflow.tracking._tracking_service.utils")
        if tracking is not None:
            tracking._tracking_uri = before[1]
        pytest.fail(f"the test left MLflow's tracking URI changed (env, global): {before} -> {after}; restore it "
                    "with monkeypatch or mlflow.set_tracking_uri(None)", pytrace=False)


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "calls.sqlite")
    yield s
    s.close()


@pytest.fixture
def gateway(store):
    return Gateway(store, stage="test", progress=False)


@pytest.fixture(scope="module")
def pg_url():
    """A throwaway PostgreSQL server for the module (Debian's binaries; skipped where they are not installed)."""
    from rubriclab.testing import find_postgres_bindir, postgres_server

    if find_postgres_bindir() is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A call-store location of each backend, fresh per test: a file, or a new database on the module's server."""
    if request.param == "sqlite":
        return str(tmp_path / "calls.sqlite")
    from rubriclab.testing import new_database

    return new_database(request.getfixturevalue("pg_url"), "calls")
