"""Study storages: a journal file, SQLite or PostgreSQL (``study_storage``), and the locks that exclude every other
process working on the same study (``grid_lock``): a PostgreSQL advisory lock, or an ``flock`` on a file next to the
SQLite database / journal file. Messages never show a URL's password."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

from rubriclab.errors import ConfigError, MissingDependencyError
from rubriclab.secrets import public_endpoint

ALLOWED_URLS = "'' or None (journal file), 'sqlite:///PATH', 'postgresql://…' or 'postgresql+psycopg://…'"

# storages made by study_storage() -> the file their cross-process grid lock lives in (journal, SQLite)
_LOCK_FILES: weakref.WeakKeyDictionary[BaseStorage, Path] = weakref.WeakKeyDictionary()
_THREAD_LOCKS: weakref.WeakKeyDictionary[BaseStorage, threading.Lock] = weakref.WeakKeyDictionary()
_THREAD_LOCKS_GUARD = threading.Lock()


def _masked(url: str) -> str:
    """The URL as it may appear in a message: password shown as ***, no query string (it may hold credentials)."""
    try:
        return repr(_make_url(url).set(query={}).render_as_string(hide_password=True))
    except Exception:
        pass
    try:
        shown = public_endpoint(url) or ""  # drops user:password@, query and fragment
    except ValueError:  # e.g. a port that is not a number
        shown = url.split("://", 1)[0] + "://…" if "://" in url else "…"
    if "@" in shown:  # not parsed as user info (malformed URL): drop everything before the last '@'
        shown = "***@" + shown.rsplit("@", 1)[1]
    return repr(shown)


def _redact(text: str, url: str) -> str:
    try:
        password = _make_url(url).password
    except Exception:
        password = None
    return text.replace(str(password), "***") if password else text


def _make_url(url: str):  # -> sqlalchemy.engine.URL
    import sqlalchemy

    return sqlalchemy.engine.make_url(url)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (and threads): ``flock`` on ``path``, released by the kernel when the
    holder dies. Where there is no fcntl (Windows), Optuna's O_EXCL lock file is used instead."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        lock = JournalFileOpenLock(str(path), grace_period=300)
        lock.acquire()
        try:
            yield
        finally:
            lock.release()
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def _pg_key(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"rubriclab:{name}".encode(), digest_size=8).digest(), "big", signed=True)


@contextlib.contextmanager
def _pg_lock(engine, name: str) -> Iterator[None]:
    """A PostgreSQL session-level advisory lock on a connection of its own (autocommit, so no transaction is held
    open); the server drops it if the process dies."""
    import sqlalchemy

    key = _pg_key(name)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
        try:
            yield
        finally:
            try:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            except Exception:  # the connection is gone, and the lock with it; never pool it
                conn.invalidate()


def _sqlite_lock_path(url) -> Path | None:
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db + ".rubriclab.lock")


def _open_rdb(url: str) -> RDBStorage:
    """RDBStorage for an SQLite or PostgreSQL URL, schema creation serialized across processes."""
    import sqlalchemy

    raw = url
    try:
        parsed = _make_url(url)
    except Exception:
        raise ConfigError(f"storage URL {_masked(raw)} is not a valid database URL; expected {ALLOWED_URLS}") from None
    if parsed.drivername == "postgresql":  # SQLAlchemy's default driver is psycopg2; we ship psycopg 3
        parsed = parsed.set(drivername="postgresql+psycopg")
    url = parsed.render_as_string(hide_password=False)
    try:
        if parsed.drivername == "sqlite":
            lock_path = _sqlite_lock_path(parsed)
            if lock_path is not None:
                lock_path.parent.mkdir(parents=True, exist_ok=True)
            lock = _file_lock(lock_path) if lock_path else contextlib.nullcontext()
            with lock:  # a busy SQLite file waits up to 60 s rather than failing at once
                storage = RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 60}})
            if lock_path is not None:
                _LOCK_FILES[storage] = lock_path
            return storage
        engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        try:
            with _pg_lock(engine, "optuna-schema"):
                return RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
        finally:
            engine.dispose()
    except ConfigError:
        raise
    except ImportError as e:
        raise MissingDependencyError(f"study storage {_masked(raw)} ({e.name or e})", "'psycopg[binary]>=3.2,<4'") \
            from None
    except ( sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError, OSError) as e:
        first = _redact(str(e).strip().splitlines()[0] if str(e).strip() else "", raw)
        raise ConfigError(f"cannot open study storage {_masked(raw)}: {type(e).__name__}: {first}") from None


def study_storage(url: str | None, *, journal: str | Path) -> BaseStorage:
    """The Optuna storage for ``url``.

    ``None``/``''`` -> a journal file at ``journal`` (its parent directory created), locked across processes with
    Optuna's O_EXCL lock file (works on local disks and NFSv3+). ``sqlite:///PATH`` or ``postgresql://…`` /
    ``postgresql+psycopg://…`` -> ``RDBStorage`` (a plain ``postgresql://`` URL is given the psycopg 3 driver).
    Anything else raises :class:`ConfigError`; messages never show the URL's password.
    """
    if url is None or not str(url).strip():
        path = Path(journal)
        path.parent.mkdir(parents=True, exist_ok=True)
        storage = JournalStorage(JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path))))
        _LOCK_FILES[storage] = path.with_name(path.name + ".grid-lock")
        return storage
    return open_url(str(url))


def open_url(url: str) -> RDBStorage:
    url = url.strip()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("sqlite", "postgresql", "postgresql+psycopg"):
        raise ConfigError(f"study storage URL {_masked(url)} is not supported; expected {ALLOWED_URLS}")
    return _open_rdb(url)


def _unwrap(storage: BaseStorage) -> BaseStorage:
    """The storage under Optuna's cache wrapper (``_CachedStorage`` around an RDBStorage)."""
    inner = getattr(storage, "_backend", None)
    return inner if isinstance(inner, RDBStorage) else storage


@contextlib.contextmanager
def grid_lock(storage: BaseStorage, study_name: str) -> Iterator[None]:
    """Excludes every other process (and thread) reconciling the same study on the same storage."""
    base = _unwrap(storage)
    if base in _LOCK_FILES:
        with _file_lock(_LOCK_FILES[base]):
            yield
        return
    if isinstance(base, RDBStorage):
        if base.engine.dialect.name == "postgresql":
            with _pg_lock(base.engine, f"grid:{study_name}"):
                yield
            return
        if base.engine.dialect.name == "sqlite":
            path = _sqlite_lock_path(base.engine.url)
            with _file_lock(path) if path else _thread_lock(base):
                yield
            return
    if isinstance(base, JournalStorage) and isinstance(getattr(base, "_backend", None), JournalFileBackend):
        path = Path(base._backend._file_path)
        with _file_lock(path.with_name(path.name + ".grid-lock")):
            yield
        return
    if isinstance(base, InMemoryStorage):
        with _thread_lock(base):
            yield
        return
    raise ConfigError(f"run_grid cannot lock a {type(base).__name__} across processes; open the storage with "
                      f"rubriclab.studies.study_storage() ({ALLOWED_URLS})")


@contextlib.contextmanager
def _thread_lock(storage: BaseStorage) -> Iterator[None]:
    with _THREAD_LOCKS_GUARD:
        lock = _THREAD_LOCKS.setdefault(storage, threading.Lock())
    with lock:
        yield

