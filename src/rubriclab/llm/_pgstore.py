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
from collections.abc import Sequence
from typing import Any

from rubriclab.errors import ConfigError, MissingDependencyError
from rubriclab.llm._store import (
    BATCH_COLUMNS,
    CallRecord,
    Claims,
    assemble_ledger,
    embed_key,
    record_row,
)
from rubriclab.owner import HOST, process_owner

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
        with self._lock:
            return self._get_ok(keys)

    def _get_ok(self, keys: Sequence[str]) -> dict[str, CallRecord]:
        out: dict[str, CallRecord] = {}
        keys = list(keys)
        for start in range(0, len(keys), 1000):
            rows = self._db.execute(
                "SELECT key, model, role, stage, sample_index, attempt, status, text, extra, prompt_tokens,"
                " completion_tokens, cost, latency_s, retries, error FROM calls WHERE status='ok' AND key = ANY(%s)",
                (keys[start : start + 1000],)).fetchall()
            for r in rows:
                out[r[0]] = CallRecord(
                    key=r[0], model=r[1], role=r[2], stage=r[3], sample_index=r[4], attempt=r[5], status=r[6],
                    text=r[7], extra=json.loads(r[8] or "{}"), prompt_tokens=r[9], completion_tokens=r[10],
                    cost=r[11], latency_s=r[12], retries=r[13], error=r[14])
        return out

    # an ok row is never replaced by a later error for the same key
    _PUT = ("INSERT INTO calls VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (key) DO UPDATE"
            " SET status=excluded.status, text=excluded.text, extra=excluded.extra,"
            " prompt_tokens=excluded.prompt_tokens, completion_tokens=excluded.completion_tokens, cost=excluded.cost,"
            " latency_s=excluded.latency_s, retries=excluded.retries, error=excluded.error,"
            " created_at=excluded.created_at WHERE calls.status <> 'ok'")

    def put(self, record: CallRecord) -> None:
        self._run(self._PUT, record_row(record))

    def finish_calls(self, records: Sequence[CallRecord], release: Sequence[str] = (),
                     batches: Sequence[tuple[dict[str, Any], int | None]] = ()) -> list[int]:
        """One transaction: ``records`` stored, our claims on ``release`` dropped, the batch summaries written
        (their row ids returned); see ``SQLiteCallStore.finish_calls``."""
        rows = sorted((record_row(r) for r in records), key=lambda row: row[0])  # one lock order for every writer
        with self._lock, self._db.transaction(), self._db.cursor() as cur:
            if rows:
                cur.executemany(self._PUT, rows)
            if release:
                cur.execute("DELETE FROM claims WHERE owner=%s AND key = ANY(%s)",
                            (process_owner(), sorted(set(release))))
            return [self._record_batch(summary, batch_id) for summary, batch_id in batches]

    # -- ledger ----------------------------------------------------------------------------------
    def record_batch(self, summary: dict[str, Any], batch_id: int | None = None) -> int:
        with self._lock:
            return self._record_batch(summary, batch_id)

    def _record_batch(self, summary: dict[str, Any], batch_id: int | None) -> int:
        values = [summary.get(c, 0) for c in BATCH_COLUMNS]
        if batch_id is None:
            rows = self._db.execute(f"INSERT INTO batches ({','.join(BATCH_COLUMNS)}) VALUES "
                                    f"({','.join(['%s'] * len(BATCH_COLUMNS))}) RETURNING id", values).fetchall()
            return int(rows[0][0])
        self._db.execute(f"UPDATE batches SET {','.join(c + '=%s' for c in BATCH_COLUMNS)} WHERE id=%s",
                         [*values, batch_id])
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

    def claim_many(self, keys: Sequence[str]) -> Claims:
        """``claim`` for each of ``keys`` in one transaction, then the ok records of all of them (a claim taken on a
        key that has one is dropped again) and the holders of the others. The keys are inserted in sorted order, so
        two workers claiming overlapping slices wait on each other's rows in one order (no deadlock). Under READ
        COMMITTED the record read is a later statement than the insert: a record committed (with its claim's
        release) by the owner we waited on is seen."""
        out = Claims()
        keys = sorted(set(keys))
        if not keys:
            return out
        owner = process_owner()
        with self._lock, self._db.transaction():
            claimed = [k for (k,) in self._db.execute(
                "INSERT INTO claims (key, owner, host, pid, claimed_at) SELECT k, %s, %s, %s, %s"
                " FROM unnest(%s::text[]) WITH ORDINALITY AS t(k, i) ORDER BY i ON CONFLICT (key) DO NOTHING"
                " RETURNING key", (owner, HOST, os.getpid(), time.time(), keys)).fetchall()]
            out.done = self._get_ok(keys)
            made = [k for k in claimed if k in out.done]  # finished by another worker since our batch began
            if made:
                self._db.execute("DELETE FROM claims WHERE owner=%s AND key = ANY(%s)", (owner, made))
            out.claimed = sorted(k for k in claimed if k not in out.done)
            taken = set(claimed)
            others = [k for k in keys if k not in taken and k not in out.done]
            if others:
                for k, *holder in self._db.execute(
                        "SELECT key, owner, host, pid, claimed_at FROM claims WHERE key = ANY(%s)", (others,)):
                    out.held[k] = dict(zip(("owner", "host", "pid", "claimed_at"), holder))
        return out

    def renew(self, key: str) -> None:
        self._run("UPDATE claims SET claimed_at=%s WHERE key=%s AND owner=%s", (time.time(), key, process_owner()))

    def renew_many(self, keys: Sequence[str]) -> None:
        """``renew`` for each of ``keys``, in one statement."""
        if keys:
            self._run("UPDATE claims SET claimed_at=%s WHERE owner=%s AND key = ANY(%s)",
                      (time.time(), process_owner(), sorted(set(keys))))

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
