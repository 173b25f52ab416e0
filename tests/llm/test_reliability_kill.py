"""Kill and resume: `dvc repro` of the reliability project SIGKILLed (the whole process group) mid-batch, during
an output write and during MLflow logging, then resumed. After every kill no output is half-written; the resume
completes, no call already finished reaches the provider again, the outputs equal an uninterrupted run's, every
MLflow run of a killed attempt ends KILLED, and the ledger keeps the killed attempt's calls and retries.

Also a direct test of ``reap_orphaned_runs``: a SIGKILLed child's RUNNING run is marked KILLED by the next
``stage_run``; a live process's RUNNING run is left alone.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from rubriclab.testing import (
    FakeOpenAIServer,
    FaultPlan,
    SignatureMap,
    clean_reference,
    drop_volatile,
    incomplete_files,
    kill_sequence,
    ledger_totals,
    mlflow_run_statuses,
    reliability_project,
    reliability_responder,
    repro,
    repro_env,
    session_dir,
    snapshot_outputs,
    standard_triggers,
)
from rubriclab.tracking import OWNER_TAG, stage_run, tracking_uri

TIMEOUT_S = 1.5  # as in test_reliability_faults.py: the two files share one reference run (made with this timeout)
SEED = 20240613


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigkilled_repro_resumes_without_repeating_finished_calls(tmp_path_factory):
    root = tmp_path_factory.mktemp("reliability_killed")
    sigs = SignatureMap()
    # 429s only: retries happen (and must survive the kill in the ledger) without slowing the run much
    plan = FaultPlan(rate=0.3, kinds=("429",), seed=SEED, retry_after=0.2)
    with FakeOpenAIServer(responder=sigs.recording(reliability_responder), faults=plan) as server:
        reliability_project(root, server.url, timeout=TIMEOUT_S)
        # mid-batch at a seeded request count in the audit's batches (discover makes ~60 with its 429s), then an
        # output write (an atomic-write temporary exists), then MLflow logging (the audit run logged card.json)
        kills = kill_sequence(root, server, sigs, standard_triggers(root, server, random.Random(SEED)))
        repro(root)  # the resume after the last kill
        final_stats = server.stats()
    # asked for only now: when tests/stages/test_reliability_faults.py runs on the other worker, its module fixture is making
    # this shared run (the lock makes a second asker wait), and the kills above need none of it
    reference = clean_reference(session_dir(tmp_path_factory, "reliability_reference"), timeout=TIMEOUT_S)

    print("\nkills landed:", [(k.want, k.outcome.phase, k.outcome.requests, k.outcome.leftover_temps[:1]) for k in kills])
    assert [k.want for k in kills if not k.outcome.completed] == ["mid-batch", "output write", "MLflow logging"], \
        [(k.want, k.outcome.phase, k.outcome.log_tail) for k in kills if k.outcome.completed]
    # after every kill, before any resume: no half-written file at any output path
    assert [(k.want, k.incomplete) for k in kills if k.incomplete] == []
    assert kills[1].outcome.leftover_temps, "the output-write kill did not land inside an atomic write"
    for k in kills:  # the signatures of stored calls and of served requests agree (else the next check is void)
        assert k.finished <= set(sigs.keys)

    # (1) no call already finished at a kill reached the provider again in any later attempt
    assert kills[0].finished, "the mid-batch kill came before any finished call"
    for k in kills:
        repeated = k.repeated(sigs, final_stats)
        assert not repeated, f"{len(repeated)} finished calls reached the provider again after the {k.want} kill"

    # (2) the resumed project equals an uninterrupted run, and nothing is half-written
    assert incomplete_files(root) == []
    got, expected = drop_volatile(snapshot_outputs(root)), drop_volatile(reference["snapshot"])
    assert sorted(got) == sorted(expected)
    assert [p for p in expected if got[p] != expected[p]] == []  # VOLATILE_KEYS: calls_cached, Optuna bookkeeping

    # (3) every MLflow run left RUNNING by a killed attempt ends KILLED, marked by the reaper; none is RUNNING
    statuses = mlflow_run_statuses(root)
    assert all(k.left_running for k in kills), [(k.want, k.left_running) for k in kills]
    for k in kills:
        for rid in k.left_running:
            assert statuses[rid]["status"] == "KILLED", (k.want, statuses[rid])
            assert "marked KILLED" in statuses[rid]["ended_by"]
    assert [r for r in statuses.values() if r["status"] == "RUNNING"] == []

    # (4) the ledger keeps the killed attempt's calls and retries: the mid-batch kill left its batch open
    first = kills[0].stage_ledger  # audit@demo_helpful rows, read right after the kill
    assert first["calls"] > 0 and first["ok"] > 0
    assert 0 < first["retries"] <= kills[0].faults["429"]
    assert first["interrupted_batches"] >= 1
    assert any(completed == 0 for stage, _, completed in kills[0].batches if stage.startswith("audit"))
    final = ledger_totals(root)
    assert final["interrupted_batches"] >= 1  # history is kept, not rewritten by the resume
    # every 429 a stage process read is one ledger retry; the only ones missing are those the server sent while
    # the kill landed (in flight: at most the two judge seats' concurrency, 4 each), and no later one is missing
    unread = [k.faults["429"] - k.ledger["retries"] for k in kills]
    assert all(0 <= b - a <= 8 for a, b in zip([0, *unread], unread)), unread
    assert final_stats["faults"]["429"] - final["retries"] == unread[-1]
    assert final["ok"] == reference["ledger"]["ok"]  # each unique call made (and stored) once over all attempts


_BATCH_CHILD = textwrap.dedent("""
    import sys
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
    role = RoleSpec(name="judge", model="openai/fake-judge", api_base=sys.argv[2], concurrency=2, timeout=120,
                    max_retries=3)
    requests = [CallRequest(role=role, messages=[{"role": "user", "content": f"item {i}"}]) for i in range(6)]
    Gateway(open_store(sys.argv[1]), stage="killed@x", progress=False).run(requests)
""")


@pytest.mark.timeout(120)
def test_a_batch_killed_before_its_first_result_keeps_its_row_and_retries(tmp_path):
    from rubriclab.llm import open_store

    # every request is rate-limited once (a retry recorded), then its answer takes a minute: no item finishes
    plan = FaultPlan(rate=1.0, kinds=("429",), retry_after=0.05)
    with FakeOpenAIServer(latency=60, faults=plan) as server:
        child = subprocess.Popen([sys.executable, "-c", _BATCH_CHILD, str(tmp_path / "calls.sqlite"), server.url],
                                 env=repro_env(), start_new_session=True)
        try:
            deadline = time.monotonic() + 90
            while server.stats()["requests"] < 4 and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)  # let the retries of the 429s seen so far be written
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        faults = server.stats()["faults"]["429"]
    store = open_store(tmp_path / "calls.sqlite")
    rows = [r for r in store.ledger() if r["stage"] == "killed@x"]
    store.close()
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["batches"] == 1 and row["interrupted_batches"] == 1  # the row was written when the batch started
    assert row["items"] == 0 and row["calls"] == 0  # nothing finished
    assert 2 <= row["retries"] <= faults  # the retries made before the kill are kept


_CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from rubriclab.tracking import stage_run
    with stage_run("probe", sys.argv[2], {"x": 1}, Path(sys.argv[1])) as run:
        print(run.run_id, flush=True)
        time.sleep(600)
""")


def _start_child(project: Path, name: str) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(project), name], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    run_id = child.stdout.readline().strip()
    assert run_id, f"child {name} did not open its run"
    return child, run_id


@pytest.mark.timeout(240)
def test_a_sigkilled_stage_run_is_reaped_and_a_live_one_is_not(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    dead, dead_run = _start_child(tmp_path, "dead@x")
    live, live_run = _start_child(tmp_path, "live@x")
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(timeout=30)
        client = MlflowClient(tracking_uri(tmp_path))
        assert client.get_run(dead_run).info.status == "RUNNING"  # a SIGKILLed process cannot end its run
        with stage_run("probe", "next@x", {}, tmp_path) as run:
            mine = run.run_id
        dead_info = client.get_run(dead_run)
        assert dead_info.info.status == "KILLED"
        assert "marked KILLED by a later stage run" in dead_info.data.tags["rubriclab.ended_by"]
        assert str(dead.pid) in dead_info.data.tags[OWNER_TAG]
        live_info = client.get_run(live_run)
        assert live_info.info.status == "RUNNING"  # its process is alive: not reaped
        assert "rubriclab.ended_by" not in live_info.data.tags
        assert client.get_run(mine).info.status == "FINISHED"
    finally:
        live.kill()
        live.wait(timeout=30)
    time.sleep(0.1)
    # once the live process is gone too, the next stage run reaps it
    with stage_run("probe", "after@x", {}, tmp_path):
        pass
    assert MlflowClient(tracking_uri(tmp_path)).get_run(live_run).info.status == "KILLED"
