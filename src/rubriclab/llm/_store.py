"""The call store: cache, resume point and ledger of every model call.

One row per provider call, content-addressed by (model, messages, decoding params, sample index,
parse attempt). Errors are recorded too (for the ledger) but never served as cache hits.
Backends sit behind ``open_store`` so a PostgreSQL store can join without touching callers.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rubriclab.errors import ConfigError
from rubriclab.owner import HOST, owner_is_gone, process_owner
from rubriclab.secrets import public_endpoint, public_request_params, scrub


def call_key(model: str, messages: list[dict], params: dict[str, Any], sample_index: int, attempt: int,
             endpoint: str | None = None, sealed: str | None = None) -> str:
    """Content address of one provider call. ``endpoint`` (a role's ``api_base``) is part of it: two
    servers behind one model string may serve different weights. Of ``params`` only the allow-listed decoding
    parameters enter it (``public_params``); the other body fields of a role's ``extra`` enter only as
    ``sealed``, a salted hash (``RoleSpec.sealed_digest``). Credentials never enter it, not even hashed: the
    URL's user/password/query are dropped first. A request without such fields has the key it always had."""
    payload = {
        "model": model,
        "messages": messages,
        "params": public_params(params),
        "sample": sample_index,
        "attempt": attempt,
    }
    where = endpoint_public(endpoint)
    if where:
        payload["endpoint"] = where
    if sealed:
        payload["sealed"] = sealed
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def public_params(params: dict[str, Any]) -> dict[str, Any]:
    """Params safe to key, store and log: the allow-listed decoding parameters (``rubriclab.secrets.PUBLIC_PARAMS``,
    top level and in ``extra_body``), without secret-looking entries at any depth. Computed once per distinct
    params (by ``repr``: a batch's requests share a handful) and handed out as a fresh top-level dict."""
    memo = repr(params)
    out = _PUBLIC_PARAMS.get(memo)
    if out is None:
        out = scrub(public_request_params(params))
        if len(_PUBLIC_PARAMS) >= 4096:
            _PUBLIC_PARAMS.clear()
        _PUBLIC_PARAMS[memo] = out
    return dict(out)


_PUBLIC_PARAMS: dict[str, dict[str, Any]] = {}


@functools.lru_cache(maxsize=256)
def endpoint_public(endpoint: str | None) -> str | None:
    """``rubriclab.secrets.public_endpoint``, computed once per endpoint."""
    return public_endpoint(endpoint)


_PROCESS_SALT = os.urandom(16)


def store_salt(store: Any) -> bytes:
    """The salt of ``store``'s sealed hashes (made once per store, kept in it, never logged); a per-process salt
    for a store that keeps none (its sealed keys then hit only within this process)."""
    get = getattr(store, "key_salt", None)
    return get() if callable(get) else _PROCESS_SALT


@dataclass
class CallRecord:
    key: str
    model: str
    role: str
    stage: str
    sample_index: int
    attempt: int
    status: str  # "ok" | "error"
    text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. logprobs, finish_reason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    retries: int = 0
    error: str | None = None
    request: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)


@dataclass
class Claims:
    """What one ``claim_many`` transaction found, per key asked: ``claimed`` (ours now, and no ok record exists:
    make the call), ``done`` (an ok record exists: use it; a claim we took on such a key was dropped in the same
    transaction) or ``held`` (another owner holds the claim: its holder row). A key in none of them was released
    by its holder between our insert and our read: ask again."""

    claimed: list[str] = field(default_factory=list)
    done: dict[str, CallRecord] = field(default_factory=dict)
    held: dict[str, dict[str, Any]] = field(default_factory=dict)


class CallStore(Protocol):
    """What the gateway needs from a store backend.

    The gateway writes through the batch methods: ``claim_many`` (a slice of keys claimed in one transaction),
    ``finish_calls`` (finished records, the release of their claims and the batch's ledger rows in one
    transaction) and ``renew_many``; the one-key methods are the same operations one at a time."""

    def get_ok(self, keys: list[str]) -> dict[str, CallRecord]: ...
    def key_salt(self) -> bytes: ...  # optional: see ``store_salt``
    def put(self, record: CallRecord) -> None: ...
    def record_batch(self, summary: dict[str, Any], batch_id: int | None = None) -> int: ...
    def record_retry(self, key: str, stage: str, role: str, model: str, reason: str) -> None: ...
    def claim(self, key: str) -> bool: ...
    def claim_many(self, keys: Sequence[str]) -> Claims: ...
    def claim_holder(self, key: str) -> dict[str, Any] | None: ...
    def renew(self, key: str) -> None: ...
    def renew_many(self, keys: Sequence[str]) -> None: ...
    def release(self, key: str, holder: dict[str, Any] | None = None) -> None: ...
    def finish_calls(self, records: Sequence[CallRecord], release: Sequence[str] = (),
                     batches: Sequence[tuple[dict[str, Any], int | None]] = ()) -> list[int]: ...
    def ledger(self) -> list[dict[str, Any]]: ...
    def get_embeddings(self, model: str, texts: list[str]) -> dict[str, list[float]]: ...
    def put_embeddings(self, model: str, vectors: dict[str, list[float]]) -> None: ...
    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY, model TEXT, role TEXT, stage TEXT, sample_index INTEGER, attempt INTEGER,
  status TEXT, text TEXT, extra TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, cost REAL,
  latency_s REAL, retries INTEGER, error TEXT, request TEXT, created_at REAL);
CREATE INDEX IF NOT EXISTS calls_stage_role ON calls(stage, role);
CREATE TABLE IF NOT EXISTS batches (
  id INTEGER PRIMARY KEY AUTOINCREMENT, stage TEXT, role TEXT, model TEXT, started_at REAL, wall_s REAL,
  items INTEGER, cache_hits INTEGER, provider_calls INTEGER, retries INTEGER, failures INTEGER,
  parse_failures INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, cost REAL, completed INTEGER);
CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, model TEXT, vector TEXT);
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER, claimed_at REAL);
CREATE TABLE IF NOT EXISTS store_meta (name TEXT PRIMARY KEY, value TEXT);
"""
# One row per retry, written when the retry happens: a killed process keeps the retries of the call it was
# making (that call's own row, written when it ends, never comes). ``n`` > 1 only for backfilled history.
_RETRY_SCHEMA = """
CREATE TABLE retry_events (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT, stage TEXT, role TEXT, model TEXT,
  reason TEXT, n INTEGER, at REAL);
CREATE INDEX retry_events_stage_role ON retry_events(stage, role);
INSERT INTO retry_events (key, stage, role, model, reason, n, at)
  SELECT key, stage, role, model, 'recorded before retry events', retries, created_at FROM calls WHERE retries > 0;
"""

# The claimant renews its claim every CLAIM_RENEW_S while its call (with retries) runs; a claim not renewed for
# CLAIM_LEASE_S is taken over even when its owner cannot be checked (a worker on another host that died).
CLAIM_RENEW_S = 15.0
CLAIM_LEASE_S = 90.0


def claim_is_stale(holder: dict[str, Any], now: float | None = None) -> bool:
    """Whether a claim's owner is gone (a dead process on this host, or a reused pid) or its lease ran out."""
    now = time.time() if now is None else now
    return now - float(holder.get("claimed_at") or 0) > CLAIM_LEASE_S or owner_is_gone(holder.get("owner"))


_OPEN_SQLITE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_open_stores() -> None:
    """Close the SQLite stores still open when the process exits: closing checkpoints the WAL into the database
    file, so a copy of ``calls.sqlite`` alone holds every call (a stage process skips the interpreter's teardown,
    ``rubriclab.stages.exit_stage``, where the connections would otherwise be closed)."""
    for store in list(_OPEN_SQLITE):
        try:
            store.close()
        except sqlite3.Error:  # at exit nothing more can be done with it; the other stores still get closed
            pass


class SQLiteCallStore:
    """SQLite backend (one machine). WAL mode: a killed writer loses no committed transaction (the gateway commits
    finished calls in groups: a killed gateway loses its calls in flight and those not yet written)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._salt: bytes | None = None
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # two processes opening one new store: one creates it
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                if not self._db.execute(
                        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='retry_events'").fetchone():
                    for statement in _RETRY_SCHEMA.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        _OPEN_SQLITE.add(self)

    def key_salt(self) -> bytes:
        """This store's salt for sealed hashes: made on first use, kept in the store, never logged."""
        if self._salt is None:
            with self._lock:
                self._db.execute("INSERT OR IGNORE INTO store_meta VALUES ('key_salt', ?)", (os.urandom(16).hex(),))
                (value,) = self._db.execute("SELECT value FROM store_meta WHERE name='key_salt'").fetchone()
            self._salt = bytes.fromhex(value)
        return self._salt

    def get_ok(self, keys: list[str]) -> dict[str, CallRecord]:
        with self._lock:
            return self._get_ok(keys)

    def _get_ok(self, keys: Sequence[str]) -> dict[str, CallRecord]:
        out: dict[str, CallRecord] = {}
        for chunk in _chunks(keys, 500):
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, model, role, stage, sample_index, attempt, status, text, extra, prompt_tokens,"
                f" completion_tokens, cost, latency_s, retries, error FROM calls"
                f" WHERE status='ok' AND key IN ({marks})",
                chunk,
            ).fetchall()
            for r in rows:
                out[r[0]] = CallRecord(
                    key=r[0], model=r[1], role=r[2], stage=r[3], sample_index=r[4], attempt=r[5],
                    status=r[6], text=r[7], extra=json.loads(r[8] or "{}"), prompt_tokens=r[9],
                    completion_tokens=r[10], cost=r[11], latency_s=r[12], retries=r[13], error=r[14],
                )
        return out

    # an ok row is never replaced by a later error for the same key
    _PUT = ("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(key) DO UPDATE SET"
            " status=excluded.status, text=excluded.text, extra=excluded.extra,"
            " prompt_tokens=excluded.prompt_tokens, completion_tokens=excluded.completion_tokens,"
            " cost=excluded.cost, latency_s=excluded.latency_s, retries=excluded.retries,"
            " error=excluded.error, created_at=excluded.created_at WHERE calls.status != 'ok'")

    def put(self, record: CallRecord) -> None:
        row = record_row(record)
        with self._lock:
            self._db.execute(self._PUT, row)

    def record_batch(self, summary: dict[str, Any], batch_id: int | None = None) -> int:
        """Insert a batch summary, or update row ``batch_id`` in place (a batch is written when it starts and
        updated as it goes, so a killed batch keeps its row, marked not completed). Returns the row id."""
        with self._lock:
            return self._record_batch(summary, batch_id)

    def _record_batch(self, summary: dict[str, Any], batch_id: int | None) -> int:
        cols = BATCH_COLUMNS
        values = [summary.get(c, 0) for c in cols]
        if batch_id is None:
            cur = self._db.execute(f"INSERT INTO batches ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                                   values)
            return int(cur.lastrowid)
        self._db.execute(f"UPDATE batches SET {','.join(c + '=?' for c in cols)} WHERE id=?", [*values, batch_id])
        return batch_id

    def finish_calls(self, records: Sequence[CallRecord], release: Sequence[str] = (),
                     batches: Sequence[tuple[dict[str, Any], int | None]] = ()) -> list[int]:
        """One transaction: store ``records`` (as ``put``), drop our claims on ``release`` (the records' keys, and
        keys claimed but not called) and write the batch summaries ``batches`` (as ``record_batch``; their row ids
        are returned). A claim is never dropped before its call's record is visible: another process waiting on
        the key then reads the record, never makes the call again."""
        rows = [record_row(r) for r in records]
        owner = process_owner()
        with self._lock, _transaction(self._db):
            if rows:
                self._db.executemany(self._PUT, rows)
            for chunk in _chunks(sorted(set(release)), 500):
                self._db.execute(f"DELETE FROM claims WHERE owner=? AND key IN ({','.join('?' * len(chunk))})",
                                 [owner, *chunk])
            return [self._record_batch(summary, batch_id) for summary, batch_id in batches]

    def record_retry(self, key: str, stage: str, role: str, model: str, reason: str) -> None:
        with self._lock:
            self._db.execute("INSERT INTO retry_events (key, stage, role, model, reason, n, at) VALUES (?,?,?,?,?,1,?)",
                             (key, stage, role, model, reason[:300], time.time()))

    # -- claims: one provider call per key across processes sharing this store ---------------------
    def claim(self, key: str) -> bool:
        """Take the right to call the provider for ``key``; False when another owner holds it."""
        with self._lock:
            cur = self._db.execute("INSERT OR IGNORE INTO claims VALUES (?,?,?,?,?)",
                                   (key, process_owner(), HOST, os.getpid(), time.time()))
            return cur.rowcount == 1

    def claim_many(self, keys: Sequence[str]) -> Claims:
        """``claim`` for each of ``keys`` in one transaction, then, in it, the ok records of all of them (a claim
        taken on a key that has one is dropped again) and the holders of those another owner holds."""
        out = Claims()
        keys = sorted(set(keys))
        if not keys:
            return out
        row = (process_owner(), HOST, os.getpid(), time.time())
        with self._lock, _transaction(self._db):
            claimed = [k for k in keys
                       if self._db.execute("INSERT OR IGNORE INTO claims VALUES (?,?,?,?,?)", (k, *row)).rowcount == 1]
            out.done = self._get_ok(keys)
            made = [k for k in claimed if k in out.done]  # finished by another process since our batch began
            for chunk in _chunks(made, 500):
                self._db.execute(f"DELETE FROM claims WHERE owner=? AND key IN ({','.join('?' * len(chunk))})",
                                 [row[0], *chunk])
            out.claimed = [k for k in claimed if k not in out.done]
            taken = set(claimed)
            others = [k for k in keys if k not in taken and k not in out.done]
            for chunk in _chunks(others, 500):
                for k, *holder in self._db.execute(
                        f"SELECT key, owner, host, pid, claimed_at FROM claims WHERE key IN ({','.join('?' * len(chunk))})",
                        chunk):
                    out.held[k] = dict(zip(("owner", "host", "pid", "claimed_at"), holder))
        return out

    def renew(self, key: str) -> None:
        """Keep our claim on ``key`` fresh while its call runs (a claim not renewed for CLAIM_LEASE_S is taken over)."""
        with self._lock:
            self._db.execute("UPDATE claims SET claimed_at=? WHERE key=? AND owner=?", (time.time(), key, process_owner()))

    def renew_many(self, keys: Sequence[str]) -> None:
        """``renew`` for each of ``keys``, in one transaction."""
        now, owner = time.time(), process_owner()
        with self._lock, _transaction(self._db):
            for chunk in _chunks(sorted(set(keys)), 500):
                self._db.execute(f"UPDATE claims SET claimed_at=? WHERE owner=? AND key IN ({','.join('?' * len(chunk))})",
                                 [now, owner, *chunk])

    def claim_holder(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT owner, host, pid, claimed_at FROM claims WHERE key=?", (key,)).fetchone()
        return None if row is None else dict(zip(("owner", "host", "pid", "claimed_at"), row))

    def release(self, key: str, holder: dict[str, Any] | None = None) -> None:
        """Drop our claim on ``key`` (or, with ``holder``, that owner's stale claim)."""
        owner = holder["owner"] if holder else process_owner()
        with self._lock:
            self._db.execute("DELETE FROM claims WHERE key=? AND owner=?", (key, owner))

    def ledger(self) -> list[dict[str, Any]]:
        """Per (stage, role): provider calls, tokens, cost and ``failed`` provider calls (from the call rows),
        retries (from retry events, so the retries of a killed process's unfinished call count too); items,
        cache hits, ``parse_failures`` and ``transport_failures`` (items whose final result was that failure)
        and ``interrupted_batches`` (never completed) from batch summaries."""
        with self._lock:
            calls = self._db.execute(
                "SELECT stage, role, COUNT(*), SUM(status='ok'), SUM(status='error'), SUM(prompt_tokens),"
                " SUM(completion_tokens), SUM(cost) FROM calls GROUP BY stage, role"
            ).fetchall()
            retries = self._db.execute("SELECT stage, role, SUM(n) FROM retry_events GROUP BY stage, role").fetchall()
            batches = self._db.execute(
                "SELECT stage, role, COUNT(*), SUM(items), SUM(cache_hits), SUM(parse_failures), SUM(completed=0),"
                " SUM(failures) FROM batches GROUP BY stage, role"
            ).fetchall()
        return assemble_ledger(calls, retries, batches)

    def get_embeddings(self, model: str, texts: list[str]) -> dict[str, list[float]]:
        keys = {embed_key(model, t): t for t in texts}
        out: dict[str, list[float]] = {}
        with self._lock:
            items = list(keys)
            for start in range(0, len(items), 500):
                chunk = items[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, vec in self._db.execute(f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk):
                    out[keys[key]] = json.loads(vec)
        return out

    def put_embeddings(self, model: str, vectors: dict[str, list[float]]) -> None:
        rows = [(embed_key(model, t), model, json.dumps(v)) for t, v in vectors.items()]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?,?,?)", rows)
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()
        _OPEN_SQLITE.discard(self)


class _transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` on an autocommit SQLite connection (ROLLBACK on an exception): one write
    transaction, holding the database's write lock from its start (no upgrade deadlock between two writers)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.db.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def embed_key(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()


BATCH_COLUMNS = [
    "stage", "role", "model", "started_at", "wall_s", "items", "cache_hits", "provider_calls", "retries",
    "failures", "parse_failures", "prompt_tokens", "completion_tokens", "cost", "completed",
]


def record_row(record: CallRecord) -> tuple:
    """A CallRecord as a row of the ``calls`` table (both backends)."""
    return (
        record.key, record.model, record.role, record.stage, record.sample_index, record.attempt,
        record.status, record.text, json.dumps(record.extra, default=str), record.prompt_tokens,
        record.completion_tokens, record.cost, record.latency_s, record.retries, record.error,
        json.dumps(record.request, ensure_ascii=False, default=str), record.created_at,
    )


def assemble_ledger(calls: list[tuple], retries: list[tuple], batches: list[tuple]) -> list[dict[str, Any]]:
    """The ledger rows from the three per-(stage, role) aggregates (both backends run the same queries)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for stage, role, n, ok, err, pt, ct, cost in calls:
        rows[(stage, role)] = {  # int()/float(): PostgreSQL sums BIGINT columns as Decimal
            "stage": stage, "role": role, "calls": int(n), "ok": int(ok or 0), "failed": int(err or 0),
            "prompt_tokens": int(pt or 0), "completion_tokens": int(ct or 0), "cost": float(cost or 0.0), "retries": 0,
        }
    for stage, role, n in retries:  # a killed call's retries have events but no call row
        rows.setdefault((stage, role), {"stage": stage, "role": role, "calls": 0, "ok": 0, "failed": 0,
                                        "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0})
        rows[(stage, role)]["retries"] = int(n or 0)
    for stage, role, nb, items, hits, pfail, interrupted, tfail in batches:
        row = rows.setdefault(
            (stage, role),
            {"stage": stage, "role": role, "calls": 0, "ok": 0, "failed": 0, "prompt_tokens": 0,
             "completion_tokens": 0, "cost": 0.0, "retries": 0},
        )
        row.update(batches=int(nb), items=int(items or 0), cache_hits=int(hits or 0), parse_failures=int(pfail or 0),
                   transport_failures=int(tfail or 0), interrupted_batches=int(interrupted or 0))
    for row in rows.values():
        for k in ("batches", "items", "cache_hits", "parse_failures", "transport_failures", "interrupted_batches"):
            row.setdefault(k, 0)
    return sorted(rows.values(), key=lambda r: (r["stage"] or "", r["role"] or ""))


def open_store(location: str | Path) -> CallStore:
    """Open a call store: a path or ``sqlite:///path`` (one machine), or ``postgresql://user@host:port/db``
    (several machines; ``postgresql+psycopg://`` too)."""
    loc = str(location)
    if loc.startswith("sqlite:///"):
        return SQLiteCallStore(loc[len("sqlite:///") :])
    if "://" in loc:
        scheme = loc.split("://", 1)[0]
        if scheme.split("+", 1)[0] in ("postgresql", "postgres"):
            from rubriclab.llm._pgstore import PostgresCallStore

            return PostgresCallStore(loc)
        raise ConfigError(f"llm.store: unsupported call store URL scheme {scheme!r}; expected a path, sqlite:///PATH "
                          "or postgresql://user@host:port/db")
    return SQLiteCallStore(loc)
