"""Count the write transactions an SQLite call store commits (tests and benchmarks/gateway.py)."""

from __future__ import annotations

from typing import Any


def count_write_transactions(store: Any) -> list[int]:
    """Trace ``store``'s SQLite connection; the returned one-item list holds the running count of write
    transactions: explicit BEGIN…COMMIT blocks, and writes made outside one (each its own autocommit)."""
    count, state = [0], {"open": False}

    def trace(sql: str) -> None:
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head == "BEGIN":
            state["open"] = True
        elif head in ("COMMIT", "END", "ROLLBACK"):
            state["open"] = False
            count[0] += 1
        elif head in ("INSERT", "UPDATE", "DELETE", "REPLACE") and not state["open"]:
            count[0] += 1

    store._db.set_trace_callback(trace)
    return count
