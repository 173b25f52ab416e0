"""Plain-text tables for the terminal."""

from __future__ import annotations

from typing import Any

_LEDGER_COLS = [
    ("stage", "stage"), ("role", "role"), ("items", "items"), ("cache_hits", "hits"), ("calls", "calls"),
    ("failed", "failed"), ("retries", "retries"), ("parse_failures", "parse_fail"),
    ("transport_failures", "transport_fail"), ("interrupted_batches", "interrupted"), ("prompt_tokens", "tok_in"),
    ("completion_tokens", "tok_out"), ("cost", "cost_usd"),
]


def format_table(rows: list[dict[str, Any]], cols: list[tuple[str, str]]) -> str:
    """Left-aligned text columns, numbers right-aligned."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4f}"
        return "" if v is None else str(v)

    body = [[cell(r.get(k)) for k, _ in cols] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, (_, h) in enumerate(cols)]
    def line(vals: list[str]) -> str:
        return "  ".join(v.rjust(w) if v.replace(".", "").replace("-", "").isdigit() else v.ljust(w)
                         for v, w in zip(vals, widths)).rstrip()
    out = [line([h for _, h in cols]), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    return "\n".join(out)


def format_ledger(rows: list[dict[str, Any]]) -> str:
    """The `rubriclab calls` table, with a total row. ``calls`` counts provider calls ever made
    (stored rows); ``hits`` counts items served from the store; ``retries`` counts every transport retry as it
    happened; ``interrupted`` counts batches that never completed (a killed or failed stage)."""
    if not rows:
        return "no calls recorded"
    total: dict[str, Any] = {"stage": "TOTAL", "role": ""}
    for k, _ in _LEDGER_COLS[2:]:
        total[k] = sum(r.get(k, 0) or 0 for r in rows)
    return format_table([*rows, total], _LEDGER_COLS)


def files_line(files: list[tuple[str, str | None]], empty: dict[str, str] | None = None) -> str:
    """The ``Files:`` line of a card or summary: each file (with what it holds), and for a file left empty on this
    run, why (``empty``: name -> reason) — an empty table is never listed without its reason."""
    empty = empty or {}
    parts = []
    for name, what in files:
        text = f"`{name}`" + (f" ({what})" if what else "")
        if name in empty:
            text += f" — empty: {empty[name]}"
        parts.append(text)
    return "Files: " + "; ".join(parts) + "."
