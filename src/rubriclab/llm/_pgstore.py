"""The call store on PostgreSQL (several machines): same key, ledger, claims and resume semantics as SQLite.

``llm.store: postgresql://user@host:5432/db`` (``postgresql+psycopg://`` is accepted too). Workers on any
number of machines share one store: a unique key per call, ``INSERT … ON CONFLICT`` for claims, so each
unique call is made once; a claim whose owner stops renewing it is taken over after the lease.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from rubriclab._owner import HOST, process_owner
from rubriclab.errors import ConfigError, MissingDependencyError
from rubriclab.llm._store import (
    BATCH_COLUMNS,
    CallRecord,
    assemble_ledger,
    embed_key,
    record_row,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY, model TEXT, role TEXT, stage TEXT, sample_index INTEGER, attempt INTEGER,
  status TEXT, text TEXT, extra TEXT, prompt_tokens BIGINT, completion_tokens BIGINT, cost DOUBLE PRECISION,
  latency_s DOUBLE PRECISION, retries INTEGER, error TEXT, request TEXT, created_at DOUBLE PRECISION);
CREATE INDEX IF NOT EXISTS calls_stage_role ON calls(stage, role);
CREATE TABLE IF NOT EXISTS batches (
  id BIGSERIAL PRIMARY KEY, stage TEXT, role TEXT, model TEXT, started_at DOUBLE PRECISION,
  wall_s DOUBLE PRECISION, items BIGINT, cache_hits BIGINT, provider_calls BIGINT, retries BIGINT,
  failures BIGINT, parse_failures BIGINT, prompt_tokens BIGINT, completion_tokens BIGINT,
  cost DOUBLE PRECISION, completed INTEGER);
CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, model TEXT, vector TEXT);
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER,
  claimed_at DOUBLE PRECISION);
CREATE TABLE IF NOT EXISTS retry_events (id BIGSERIAL PRIMARY KEY, key TEXT, stage TEXT, role TEXT, model TEXT,
  reason TEXT, n INTEGER, at DOUBLE PRECISION);
CREATE INDEX IF NOT EXISTS retry_events_stage_role ON retry_events(stage, role);
CREATE TABLE IF NOT EXISTS store_meta (name TEXT PRIMARY KEY, value TEXT)
"""
_SCHEMA_LOCK = 0x7275627269636C62  # pg_advisory_xact_lock id: two workers creating the tables at once


def psycopg_dsn(url: str) -> str:
    """A libpq URL from an SQLAlchemy-style one (``postgresql+psycopg://`` → ``postgresql://``)."""
    scheme, rest = url.split("://", 1)
    if scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ConfigError(f"llm.store: {scheme!r} is not a PostgreSQL URL; expected postgresql://user@host:port/db")
    return f"postgresql://{rest}"


class PostgresCallStore:
    """PostgreSQL backend. One autocommit connection per store object, serialised by a lock (the gateway's
    event loop and a progress thread may share it)."""

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise MissingDependencyError("a PostgreSQL call store", "'psycopg[binary]'") from None
        self.url = url
        self._lock = threading.Lock()
        self._salt: bytes | None = None
        try:
            self._db = psycopg.connect(psycopg_dsn(url), autocommit=True)
        except psycopg.OperationalError as exc:
            from rubriclab.secrets import redact_text

            raise ConfigError(f"llm.store: cannot connect to {redact_text(url)}: "
                              f"{redact_text(' '.join(str(exc).split()))[:300]}") from None
        with self._lock, self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)

    def _all(self, sql: str, args: Any = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _run(self, sql: str, args: Any = ()) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    def key_salt(self) -> bytes:
        """This store's salt for sealed hashes (shared by every worker): made on first use, kept in the store."""
        if self._salt is None:
            self._run("INSERT INTO store_meta VALUES ('key_salt', %s) ON CONFLICT (name) DO NOTHING",
                      (os.urandom(16).hex(),))
            self._salt = bytes.fromhex(self._all("SELECT value FROM store_meta WHERE name='key_salt'")[0][0])
        return self._salt

    # -- calls ---------------------------------------------------------------------------------
    def get_ok(self, keys: list[str]) -> dict[str, CallRecord]:
        out: dict[str, CallRecord] = {}
        for start in range(0, len(keys), 1000):
            rows = self._all(
                "SELECT key, model, role, stage, sample_index, attempt, status, text, extra, prompt_tokens,"
                " completion_tokens, cost, latency_s, retries, error FROM calls WHERE status='ok' AND key = ANY(%s)",
                (keys[start : start + 1000],))
            for r in rows:
                out[r[0]] = CallRecord(
                    key=r[0], model=r[1], role=r[2], stage=r[3], sample_index=r[4], attempt=r[5], status=r[6],
                    text=r[7], extra=json.loads(r[8] or "{}"), prompt_tokens=r[9], completion_tokens=r[10],
                    cost=r[11], latency_s=r[12], retries=r[13], error=r[14])
        return out

    def put(self, record: CallRecord) -> None:
        # an ok row is never replaced by a later error for the same key
        self._run(
            "INSERT INTO calls VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (key) DO UPDATE"
            " SET status=excluded.status, text=excluded.text, extra=excluded.extra,"
            " prompt_tokens=excluded.prompt_tokens, completion_tokens=excluded.completion_tokens, cost=excluded.cost,"
            " latency_s=excluded.latency_s, retries=excluded.retries, error=excluded.error,"
            " created_at=excluded.created_at WHERE calls.status <> 'ok'", record_row(record))

    # -- ledger ----------------------------------------------------------------------------------
    def record_batch(self, summary: dict[str, Any], batch_id: int | None = None) -> int:
        values = [summary.get(c, 0) for c in BATCH_COLUMNS]
        if batch_id is None:
            rows = self._all(f"INSERT INTO batches ({','.join(BATCH_COLUMNS)}) VALUES "
                             f"({','.join(['%s'] * len(BATCH_COLUMNS))}) RETURNING id", values)
            return int(rows[0][0])
        self._run(f"UPDATE batches SET {','.join(c + '=%s' for c in BATCH_COLUMNS)} WHERE id=%s", [*values, batch_id])
        return batch_id

    def record_retry(self, key: str, stage: str, role: str, model: str, reason: str) -> None:
        self._run("INSERT INTO retry_events (key, stage, role, model, reason, n, at) VALUES (%s,%s,%s,%s,%s,1,%s)",
                  (key, stage, role, model, reason[:300], time.time()))

    def ledger(self) -> list[dict[str, Any]]:
        calls = self._all(
            "SELECT stage, role, COUNT(*), COUNT(*) FILTER (WHERE status='ok'), COUNT(*) FILTER (WHERE status='error'),"
            " SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) FROM calls GROUP BY stage, role")
        retries = self._all("SELECT stage, role, SUM(n) FROM retry_events GROUP BY stage, role")
        batches = self._all(
            "SELECT stage, role, COUNT(*), SUM(items), SUM(cache_hits), SUM(parse_failures),"
            " COUNT(*) FILTER (WHERE completed=0), SUM(failures) FROM batches GROUP BY stage, role")
        return assemble_ledger(calls, retries, batches)

    # -- claims ----------------------------------------------------------------------------------
    def claim(self, key: str) -> bool:
        return self._run("INSERT INTO claims VALUES (%s,%s,%s,%s,%s) ON CONFLICT (key) DO NOTHING",
                         (key, process_owner(), HOST, os.getpid(), time.time())) == 1

    def renew(self, key: str) -> None:
        self._run("UPDATE claims SET claimed_at=%s WHERE key=%s AND owner=%s", (time.time(), key, process_owner()))

    def claim_holder(self, key: str) -> dict[str, Any] | None:
        rows = self._all("SELECT owner, host, pid, claimed_at FROM claims WHERE key=%s", (key,))
        return dict(zip(("owner", "host", "pid", "claimed_at"), rows[0])) if rows else None

    def release(self, key: str, holder: dict[str, Any] | None = None) -> None:
        owner = holder["owner"] if holder else process_owner()
        self._run("DELETE FROM claims WHERE key=%s AND owner=%s", (key, owner))

    # -- embeddings ------------------------------------------------------------------------------
    def get_embeddings(self, model: str, texts: list[str]) -> dict[str, list[float]]:
        keys = {embed_key(model, t): t for t in texts}
        out: dict[str, list[float]] = {}
        items = list(keys)
        for start in range(0, len(items), 1000):
            for key, vec in self._all("SELECT key, vector FROM embeddings WHERE key = ANY(%s)",
                                      (items[start : start + 1000],)):
                out[keys[key]] = json.loads(vec)
        return out

    def put_embeddings(self, model: str, vectors: dict[str, list[float]]) -> None:
        rows = [(embed_key(model, t), model, json.dumps(v)) for t, v in vectors.items()]
        with self._lock, self._db.cursor() as cur:
            cur.executemany("INSERT INTO embeddings VALUES (%s,%s,%s) ON CONFLICT (key) DO UPDATE"
                            " SET vector=excluded.vector", rows)

    def close(self) -> None:
        with self._lock:
            self._db.close()
