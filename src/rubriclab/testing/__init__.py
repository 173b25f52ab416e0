"""Fixtures shared by tests, benchmarks and users: scripted providers and a fake OpenAI server."""

from __future__ import annotations

from rubriclab.testing._browser import BrowserNotFoundError, browser, find_browser, mlflow_ui, wait_for_text
from rubriclab.testing._discover_world import (
    DISCOVER_ATTRS,
    DISCOVER_CFG,
    DISCOVER_NEUTRAL,
    DISCOVER_PREFERRED,
    discover_consolidator_script,
    discover_embed_script,
    discover_extractor_script,
    discover_judge_script,
    planted_hash,
    planted_pairs,
)
from rubriclab.testing._drift_world import (
    BENCH_HURT_SENTENCE,
    BIAS_SENTENCE,
    NEUTRAL_SENTENCES,
    drift_pairs,
    drift_world,
    gate_rows,
    judge_script,
    refiner_script,
)
from rubriclab.testing._fake_server import (
    ALL_FAULT_KINDS,
    CONTENT_FAULT_KINDS,
    FAULT_KINDS,
    FakeOpenAIServer,
    FaultPlan,
    default_responder,
    fake_embedding,
    request_key,
)
from rubriclab.testing._injection import injection_obeying_judge, naive_read
from rubriclab.testing._outputs import unexplained_empty
from rubriclab.testing._postgres import PostgresNotFoundError, find_postgres_bindir, new_database, postgres_server
from rubriclab.testing._reliability import (
    VOLATILE_KEYS,
    KillOutcome,
    KillRecord,
    SignatureMap,
    clean_reference,
    drop_volatile,
    finished_chat_signatures,
    incomplete_files,
    kill_repro,
    kill_sequence,
    ledger_totals,
    mlflow_run_statuses,
    reliability_figures,
    reliability_params,
    reliability_project,
    reliability_responder,
    repro,
    repro_env,
    request_signature,
    snapshot_outputs,
    standard_triggers,
    temp_files,
)
from rubriclab.testing._repair_world import MARK, attacker, repair_world, world_pairs
from rubriclab.testing._scripted import ScriptedProvider, last_user_text, scripted_model, scripted_provider
from rubriclab.testing._session import session_dir, shared_policy_checkpoint
from rubriclab.testing._store_trace import count_write_transactions
from rubriclab.testing._tiny_policy import tiny_policy

__all__ = [
    "unexplained_empty",
    "DISCOVER_ATTRS", "DISCOVER_CFG", "DISCOVER_NEUTRAL", "DISCOVER_PREFERRED", "discover_consolidator_script",
    "discover_embed_script", "discover_extractor_script", "discover_judge_script", "planted_hash", "planted_pairs",
    "BrowserNotFoundError", "browser", "find_browser", "mlflow_ui", "wait_for_text",
    "BENCH_HURT_SENTENCE", "BIAS_SENTENCE", "NEUTRAL_SENTENCES", "drift_pairs", "drift_world", "gate_rows",
    "judge_script", "refiner_script", "MARK", "attacker",
    "ALL_FAULT_KINDS", "CONTENT_FAULT_KINDS", "FAULT_KINDS", "FakeOpenAIServer", "FaultPlan", "PostgresNotFoundError", "ScriptedProvider", "default_responder",
    "fake_embedding", "find_postgres_bindir", "last_user_text", "postgres_server", "repair_world", "request_key", "scripted_model",
    "scripted_provider", "session_dir", "shared_policy_checkpoint", "count_write_transactions", "new_database", "tiny_policy", "world_pairs",
    "injection_obeying_judge", "naive_read",
    "VOLATILE_KEYS", "KillOutcome", "KillRecord", "SignatureMap", "clean_reference", "drop_volatile", "finished_chat_signatures",
    "incomplete_files", "kill_repro", "kill_sequence", "ledger_totals", "mlflow_run_statuses", "reliability_figures", "reliability_params",
    "reliability_project", "reliability_responder", "repro", "repro_env", "request_signature", "snapshot_outputs",
    "standard_triggers", "temp_files",
]
