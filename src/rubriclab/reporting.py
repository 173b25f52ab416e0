"""Plain-text tables: for the terminal, and the markdown tables of the cards and summaries."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

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


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            text = "—"
        elif isinstance(v, float):
            text = f"{v:.0f}" if v.is_integer() and abs(v) < 1e12 else f"{v:.3f}"  # counts read as counts
        else:
            text = str(v)
        return text.replace("|", "\\|").replace("\n", " ")  # a literal pipe (e.g. "mean |ρ|") must not split

    cols = list(table.columns)
    lines = ["| " + " | ".join(cell(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)
