"""Integer bounds the embedded engine can enforce.

llama-cpp-python turns a JSON schema into a grammar without ``minimum``/``maximum`` (a TODO in its converter):
an ``{"type": "integer", "minimum": 0, "maximum": 10}`` score let SmolLM2 write 24 or 33, and 15 of the demo
audit's 28 per-rubric replies failed validation for it (each one then re-asked). Its converter does honour
``enum``, so a bounded integer with a small range is sent as the enum of its values; the schema the caller
validates against is unchanged. Wider ranges and one-sided bounds stay as they are (validation still rejects
what falls outside them). The project's own score schemas come from ``bounded_integer``, which states the enum
itself: such a request has another cache key than the replies written before the bounds were enforced.
"""

from __future__ import annotations

import math
from typing import Any

MAX_ENUM_VALUES = 1000  # a 0-1000 grammar is still small; beyond that the rule list grows with the range


def bounded_integer(lo: int, hi: int) -> dict[str, Any]:
    """The schema of an integer score ``lo``-``hi``: the bounds and the enum of its values."""
    return {"type": "integer", "minimum": lo, "maximum": hi, "enum": list(range(lo, hi + 1))}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer_range(schema: dict[str, Any]) -> tuple[int, int] | None:
    lows = [math.ceil(schema["minimum"])] if _number(schema.get("minimum")) else []
    highs = [math.floor(schema["maximum"])] if _number(schema.get("maximum")) else []
    if _number(schema.get("exclusiveMinimum")):  # the draft-06 form; draft-04's boolean form is ignored
        lows.append(math.floor(schema["exclusiveMinimum"]) + 1)
    if _number(schema.get("exclusiveMaximum")):
        highs.append(math.ceil(schema["exclusiveMaximum"]) - 1)
    if not lows or not highs:
        return None
    lo, hi = max(lows), min(highs)
    return (lo, hi) if 0 <= hi - lo < MAX_ENUM_VALUES else None


def enforceable_schema(schema: Any) -> Any:
    """A copy of ``schema`` where every ``integer`` with both bounds (range under ``MAX_ENUM_VALUES``) and no
    ``enum``/``const`` of its own also lists its values as ``enum``; everything else is copied as it is."""
    if isinstance(schema, list):
        return [enforceable_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: enforceable_schema(v) for k, v in schema.items()}
    if out.get("type") == "integer" and "enum" not in out and "const" not in out:
        bounds = _integer_range(out)
        if bounds is not None:
            out["enum"] = list(range(bounds[0], bounds[1] + 1))
    return out
