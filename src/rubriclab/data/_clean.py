"""Row validation: turn canonical row dicts into Pairs, counting every drop by reason."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable

from rubriclab.data._schema import Pair
from rubriclab.settings import MaxChars

# Reasons clean_pairs itself uses; parsers add source-specific ones (tie, both_bad, ...).
DROP_REASONS = (
    "missing_field",
    "empty_prompt",
    "empty_response",
    "identical_responses",
    "duplicate_id",
    "undecodable_text",
    "prompt_too_long",
    "response_too_long",
)

# Per-field size limits in characters (``data.max_chars``): a pair past one is dropped, counted, before any model
# sees it — one 5 MB response would otherwise go whole into every judge prompt of every stage. ~8k tokens each.
DEFAULT_MAX_CHARS = MaxChars().model_dump()  # rubriclab.settings: the one definition

# U+FFFD means a decoder already gave up on the bytes; lone surrogates cannot be encoded at all.
_BAD_TEXT = re.compile("[\ufffd\ud800-\udfff]")


def text_problem(value: object) -> str | None:
    """The drop reason for one text value, or None when it is usable."""
    if value is None:
        return "missing_field"
    if not isinstance(value, str) or _BAD_TEXT.search(value):
        return "undecodable_text"
    return None


def _meta(value: object) -> dict:
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):  # meta stored as a JSON string (parquet, csv)
        try:
            decoded = json.loads(value) if value.strip() else {}
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            return decoded
    return {"meta": value}  # keep whatever it was rather than lose it


def _row_problem(row: dict) -> str | None:
    for key in ("id", "domain"):
        if row.get(key) is None or (isinstance(row[key], str) and not row[key].strip()):
            return "missing_field"
    for key in ("prompt", "chosen", "rejected"):
        problem = text_problem(row.get(key))
        if problem:
            return problem
    if not row["prompt"].strip():
        return "empty_prompt"
    if not row["chosen"].strip() or not row["rejected"].strip():
        return "empty_response"
    if row["chosen"].strip() == row["rejected"].strip():
        return "identical_responses"
    return None


def clean_pairs(
    rows: Iterable[tuple[int, dict]], source: str, *, default_domain: str | None = None
) -> tuple[list[Pair], Counter]:
    """Validate ``(line_no, row)`` items of canonical dicts; return kept Pairs and drops by reason.

    Keeps the first occurrence of a duplicated id. Adds ``meta.source`` and ``meta.line`` for
    provenance. Never drops silently: every dropped row is counted in the returned Counter.
    """
    kept: list[Pair] = []
    drops: Counter = Counter()
    seen: set[str] = set()
    for line_no, row in rows:
        row = dict(row)
        if row.get("domain") is None and default_domain is not None:
            row["domain"] = default_domain
        problem = _row_problem(row)
        if problem is None and str(row["id"]) in seen:
            problem = "duplicate_id"
        if problem:
            drops[problem] += 1
            continue
        meta = _meta(row.get("meta"))
        meta.setdefault("source", source)
        meta.setdefault("line", line_no)
        pair_id = str(row["id"])
        seen.add(pair_id)
        kept.append(
            Pair(
                id=pair_id,
                domain=str(row["domain"]),
                prompt=row["prompt"].strip(),
                chosen=row["chosen"].strip(),
                rejected=row["rejected"].strip(),
                meta=meta,
            )
        )
    return kept, drops


def max_chars_of(section: dict | None, where: str = "data.max_chars") -> dict[str, int]:
    """``data.max_chars`` over the defaults, checked (positive integers; keys prompt, response)."""
    from rubriclab.errors import ConfigError

    out = dict(DEFAULT_MAX_CHARS)
    for key, value in (section or {}).items():
        if key not in out:
            raise ConfigError(f"{where}: unknown key {key!r}; expected one of {', '.join(out)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}.{key}: got {value!r}; expected an integer >= 1 (characters)")
        out[key] = value
    return out


def drop_oversized(pairs: list[Pair], drops: Counter, max_chars: dict[str, int]) -> list[Pair]:
    """The pairs within ``max_chars`` (prompt; each response); the others counted in ``drops`` by reason."""
    kept = []
    for p in pairs:
        if len(p.prompt) > max_chars["prompt"]:
            drops["prompt_too_long"] += 1
        elif max(len(p.chosen), len(p.rejected)) > max_chars["response"]:
            drops["response_too_long"] += 1
        else:
            kept.append(p)
    return kept
