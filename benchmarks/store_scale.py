"""Call store at scale: lookup and insert latency as the store grows to 1M rows, SQLite and PostgreSQL.

At each size the store is filled in bulk (a direct multi-row insert, which is not what is timed), then timed:
``put`` of 500 new records one by one (what the gateway does per call) and ``get_ok`` of 500 random existing
keys in batches of 50 (what a batch does at its start). A paper-scale run (millions of judge calls) must not
slow down as the store grows: the ratio of the 1M-row latency to the 10k-row one is printed per backend.

    python benchmarks/store_scale.py [--sizes 10000,100000,1000000] [--no-postgres]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import tempfile
import time
from pathlib import Path

from rubriclab.llm import CallRecord, open_store
from rubriclab.llm._store import record_row


def _record(i: int) -> CallRecord:
    key = hashlib.sha256(f"call {i}".encode()).hexdigest()
    return CallRecord(key=key, model="openai/judge", role="judge", stage="audit@bench", sample_index=i % 5,
                      attempt=0, status="ok", text=f"REASONING: item {i}.\nVERDICT: [[A]]",
                      extra={"finish_reason": "stop"}, prompt_tokens=900, completion_tokens=40,
                      request={"messages": [{"role": "user", "content": "x" * 2000}]})


def _bulk(store, start: int, stop: int) -> None:
    rows = [record_row(_record(i)) for i in range(start, stop)]
    if hasattr(store, "path"):  # SQLite
        with store._lock:
            store._db.execute("BEGIN")
            store._db.executemany(f"INSERT OR IGNORE INTO calls VALUES ({','.join('?' * 17)})", rows)
            store._db.execute("COMMIT")
    else:  # COPY: the fill is not what is timed, and 1M single-row inserts would take most of an hour
        with store._lock, store._db.cursor() as cur, cur.copy("COPY calls FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)


def _time_at(store, size: int, rng: random.Random) -> tuple[float, float]:
    fresh = [_record(10_000_000 + size + j) for j in range(500)]
    t0 = time.perf_counter()
    for rec in fresh:
        store.put(rec)
    put_ms = (time.perf_counter() - t0) / len(fresh) * 1000
    keys = [_record(rng.randrange(size)).key for _ in range(500)]
    times = []
    for start in range(0, len(keys), 50):
        t0 = time.perf_counter()
        got = store.get_ok(keys[start : start + 50])
        times.append((time.perf_counter() - t0) / 50 * 1000)
        assert len(got) == len(set(keys[start : start + 50]))
    return put_ms, statistics.mean(times)


def bench(name: str, store, sizes: list[int]) -> list[tuple[str, int, float, float]]:
    rng = random.Random(0)
    rows, filled = [], 0
    for size in sizes:
        for start in range(filled, size, 50_000):
            _bulk(store, start, min(size, start + 50_000))
        filled = size
        put_ms, get_ms = _time_at(store, size, rng)
        rows.append((name, size, put_ms, get_ms))
        print(f"  {name} {size:>9,} rows: put {put_ms:.3f} ms, get {get_ms:.3f} ms per key", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--no-postgres", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results += bench("sqlite", open_store(Path(tmp) / "calls.sqlite"), sizes)
        if not args.no_postgres:
            from rubriclab.testing import find_postgres_bindir, postgres_server

            if find_postgres_bindir() is None:
                print("PostgreSQL not installed: skipped (apt-get install postgresql)")
            else:
                with postgres_server() as url:
                    results += bench("postgresql", open_store(url), sizes)
    print("\n| backend | rows | put ms/call | get_ok ms/key |\n|---|---|---|---|")
    for name, size, put_ms, get_ms in results:
        print(f"| {name} | {size:,} | {put_ms:.3f} | {get_ms:.3f} |")
    for name in dict.fromkeys(r[0] for r in results):
        mine = [r for r in results if r[0] == name]
        print(f"{name}: {mine[-1][1]:,} vs {mine[0][1]:,} rows: put ×{mine[-1][2] / mine[0][2]:.2f}, "
              f"get ×{mine[-1][3] / mine[0][3]:.2f}")


if __name__ == "__main__":
    main()
