"""The gateway's guarantees through whole stages: `dvc repro` of a small project whose every chat role talks to the
fake OpenAI server (data → discover → audit, drift, probe; align trains a policy and is left out), once fault-free
and once with 30% transport faults of all six kinds. The faulty run completes, writes the same outputs, and its
requests, retries and faults add up exactly: no hidden retry, no re-ask, no parse failure caused by a fault.
Every role talks to the one server, the embedder included (its requests are faulted like the chat requests).
The reference run's stages are forked by the warm stage server (rubriclab.stage_server), the faulty run's are fresh
processes (``RUBRICLAB_STAGE_SERVER=0``): the byte-for-byte comparison also shows a served stage writes what a fresh
one does.
"""

from __future__ import annotations

import os
import time

import pytest

from rubriclab.llm import RoleSpec, embed_texts, open_store
from rubriclab.testing import (
    FAULT_KINDS,
    FakeOpenAIServer,
    FaultPlan,
    clean_reference,
    drop_volatile,
    ledger_totals,
    reliability_project,
    reliability_responder,
    repro,
    repro_env,
    session_dir,
    snapshot_outputs,
)

TIMEOUT_S = 1.5  # every role's timeout: a "hang" fault costs this much; a healthy reply from the local fake server takes milliseconds
# every kind, a "hang" drawn at a quarter of the others' weight: each one stalls its small batch for the whole timeout.
# The same 123 faults in 520 requests, 9 of them hangs instead of 25: the faulty run alone 70 -> 56 s
PLAN = FaultPlan(rate=0.3, kinds=FAULT_KINDS, weights=tuple(0.25 if k == "hang" else 1.0 for k in FAULT_KINDS), seed=5,
                 retry_after=0.05, hang_seconds=2 * TIMEOUT_S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    reference = clean_reference(session_dir(tmp_path_factory, "reliability_reference"), timeout=TIMEOUT_S)
    root = tmp_path_factory.mktemp("reliability_faulty")
    with FakeOpenAIServer(responder=reliability_responder, faults=PLAN) as server:
        reliability_project(root, server.url, timeout=TIMEOUT_S)
        t0 = time.monotonic()
        repro(root, env=repro_env({"RUBRICLAB_STAGE_SERVER": "0"}))  # raises with dvc's output if it fails
        wall = time.monotonic() - t0
        stats = server.stats()
    return {"reference": reference, "root": root, "stats": stats, "wall_s": wall}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_faulty_repro_writes_the_fault_free_outputs(runs):
    strict_expected, strict_got = runs["reference"]["snapshot"], snapshot_outputs(runs["root"])
    assert sorted(strict_got) == sorted(strict_expected)
    # byte for byte, only the drift study's Optuna bookkeeping differs (worker ids, timestamps: VOLATILE_KEYS)
    assert {p for p in strict_expected if strict_got[p] != strict_expected[p]} <= {
        "outputs/drift/demo/study.csv", "outputs/drift/demo/study.journal"}
    expected, got = drop_volatile(strict_expected), drop_volatile(strict_got)
    differ = [path for path in expected if got[path] != expected[path]]
    assert not differ, f"outputs differ from the fault-free run: {differ}"
    for path in ("outputs/audit/demo_helpful/card.json", "outputs/rubrics/demo_helpful/discovered.json",
                 "metrics/data.json", "metrics/discover/demo_helpful.json", "metrics/audit/demo_helpful.json",
                 "metrics/drift/demo.json", "metrics/probe.json", "outputs/drift/demo/selected.jsonl"):
        assert path in got and got[path] == expected[path], path
    assert got["outputs/rubrics/demo_helpful/discovered.json"]["criteria"], "discovery found no criterion"
    # every stage process closed the call store (they skip the module teardown, rubriclab.stages.exit_stage): its
    # WAL is checkpointed into calls.sqlite, so a copy of that one file holds every call
    assert not (runs["root"] / ".rubriclab/calls.sqlite-wal").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_fault_kind_was_injected(runs):
    faults = runs["stats"]["faults"]
    # stats() lists every kind (with 0 for none): count the kinds that really happened
    assert {kind for kind, n in faults.items() if n > 0} == set(FAULT_KINDS), faults
    assert sum(faults.values()) >= 0.2 * runs["reference"]["requests"]  # the plan really faulted ~30%


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ledger_retries_equal_the_injected_faults(runs):
    ledger = ledger_totals(runs["root"])
    injected = sum(runs["stats"]["faults"].values())
    assert ledger["retries"] == injected  # every fault retried once, each retry recorded, none hidden
    assert ledger["transport_failures"] == 0 and ledger["failed"] == 0
    # the same calls as the fault-free run: faults add retries, never calls or parse failures
    ref = runs["reference"]["ledger"]
    assert ledger["calls"] == ref["calls"] and ledger["ok"] == ref["ok"]
    assert ledger["parse_failures"] == ref["parse_failures"] == 0
    assert ledger["items"] == ref["items"] and ledger["interrupted_batches"] == 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_requests_are_the_fault_free_requests_plus_one_per_fault(runs):
    stats, ref = runs["stats"], runs["reference"]
    injected = sum(stats["faults"].values())
    assert stats["requests"] == ref["requests"] + injected  # no hidden retry, no re-ask
    # one good answer per call, as without faults; a "hang" is answered too, after the client gave up on it
    good = stats["completions_ok"] + stats["embeddings_ok"]
    assert good == ref["completions_ok"] + ref["embeddings_ok"] + stats["faults"]["hang"]
    assert stats["embeddings_ok"] >= ref["embeddings_ok"] > 0
    print(f"\nreliability: {ref['requests']} requests fault-free ({ref['wall_s']:.0f} s), {injected} faults injected "
          f"({stats['faults']}), {stats['requests']} requests under faults ({runs['wall_s']:.0f} s)")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_embedding_faults_are_retried_and_in_the_ledger(tmp_path, monkeypatch, kind):
    # embeddings go through the one retry layer too: each fault retried with the same request, and recorded
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    plan = FaultPlan(rate=1.0, kinds=(kind,), retry_after=0.05, hang_seconds=2 * TIMEOUT_S)
    store = open_store(tmp_path / "calls.sqlite")
    with FakeOpenAIServer(faults=plan) as server:
        role = RoleSpec(name="embedder", model="openai/fake-embedder", api_base=server.url, timeout=TIMEOUT_S)
        vectors = embed_texts([f"one text {os.getpid()}", "another text"], role, store, progress=False,
                              stage="audit@x")
        stats = server.stats()
    assert vectors.shape == (2, 8)
    assert stats["requests"] == 2 and stats["faults"][kind] == 1
    assert [(r["stage"], r["retries"]) for r in store.ledger()] == [("audit@x", 1)]
    store.close()
