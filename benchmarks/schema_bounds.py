"""Bounded integers on the embedded engine: the schema's bounds as llama-cpp-python converts them (ignored) vs
sent as an enum (``rubriclab.llm._schema_bounds``), on a finished run's schema-constrained score calls.

Each call of a call store whose JSON schema has a bounded integer (the audit's and repair's 0-10 / 1-10 scores,
the per-rubric judge's adherence scores) is replayed on one engine, both arms per call, alternating which goes
first: (before) the schema without enums on its bounded integers, as llama.cpp received it before; (now) the
schema as the engine sends it now. Printed per arm: replies with an integer outside its bounds (each one a parse
failure the gateway re-asks), generated tokens and seconds; and how many in-bounds replies are the same text and
the same JSON value on both arms.

    python benchmarks/schema_bounds.py --store .rubriclab/calls.sqlite [--limit 30]   # per stage
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _without_enums(schema: Any) -> Any:
    """The schema with the enum taken off every bounded integer (what the engine was asked before)."""
    if isinstance(schema, list):
        return [_without_enums(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _without_enums(v) for k, v in schema.items()}
    if out.get("type") == "integer" and "minimum" in out and "maximum" in out:
        out.pop("enum", None)
    return out


def _out_of_bounds(value: Any, schema: Any) -> int:
    """Integers in ``value`` (a parsed reply) outside the bounds its schema node states."""
    if isinstance(schema, dict) and schema.get("type") == "integer" and "minimum" in schema:
        return int(not (isinstance(value, int) and schema["minimum"] <= value <= schema["maximum"]))
    if isinstance(schema, dict) and isinstance(value, dict):
        props = schema.get("properties") or {}
        return sum(_out_of_bounds(value.get(k), s) for k, s in props.items() if k in value)
    return 0


def _has_bounds(schema: Any) -> bool:
    if isinstance(schema, dict):
        if schema.get("type") == "integer" and "minimum" in schema and "maximum" in schema:
            return True
        return any(_has_bounds(v) for v in schema.values())
    return isinstance(schema, list) and any(_has_bounds(v) for v in schema)


def bounded_calls(store: str, limit: int) -> list[dict]:
    """The first ``limit`` first-attempt calls of each stage and schema (score vs per-rubric) with a bounded
    integer."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    out: list[dict] = []
    taken: dict[tuple[str, str], int] = {}
    for stage, raw in db.execute("select stage, request from calls where model like 'local/smollm2%' and "
                                 "status = 'ok' and attempt = 0 order by created_at"):
        req = json.loads(raw)
        schema = ((req.get("params") or {}).get("response_format") or {}).get("schema")
        if schema and _has_bounds(schema):
            group = (stage, ",".join(sorted(schema.get("properties") or {})))
            if taken.get(group, 0) < limit:
                taken[group] = taken.get(group, 0) + 1
                out.append(req)
    if not out:
        raise SystemExit(f"{store}: no embedded call with a bounded integer in its schema; run `make repro` first")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a finished run's call store (.rubriclab/calls.sqlite)")
    ap.add_argument("--limit", type=int, default=30,
                    help="the first N such calls of each stage and schema (first attempts only)")
    args = ap.parse_args()

    from rubriclab.llm import _local
    from rubriclab.llm._schema_bounds import enforceable_schema
    from rubriclab.llm._weights import chat_weights

    llm = _local.load_chat_model(chat_weights("smollm2-135m"))
    arms = {"bounds as converted (before)": _without_enums, "bounds as enums (now)": enforceable_schema}
    stats = {name: {"out": 0, "not_json": 0, "tokens": 0, "s": 0.0} for name in arms}
    same = same_value = in_both = 0
    reqs = bounded_calls(args.store, args.limit)
    _local.enforceable_schema = lambda s: s  # each arm decides what the engine receives
    for i, req in enumerate(reqs):
        params = dict(req.get("params") or {})
        schema = params["response_format"]["schema"]
        replies = {}
        for name in (list(arms) if i % 2 == 0 else list(arms)[::-1]):
            sent = arms[name](_without_enums(schema))
            p = {**params, "response_format": {"type": "json_object", "schema": sent}}
            t0 = time.perf_counter()
            reply = _local._chat(llm, req["messages"], p)
            stats[name]["s"] += time.perf_counter() - t0
            stats[name]["tokens"] += int((reply.get("usage") or {}).get("completion_tokens") or 0)
            try:
                bad = _out_of_bounds(json.loads(reply["text"]), schema)
            except json.JSONDecodeError:
                stats[name]["not_json"] += 1
                bad = -1
            stats[name]["out"] += int(bad > 0)
            replies[name] = (reply["text"], bad)
        if all(b == 0 for _, b in replies.values()):
            in_both += 1
            same += len({t for t, _ in replies.values()}) == 1
            same_value += len({json.dumps(json.loads(t), sort_keys=True) for t, _ in replies.values()}) == 1
        print(f"\r{i + 1}/{len(reqs)}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"{len(reqs)} first-attempt calls with a bounded integer in their schema (at most {args.limit} per stage "
          "and schema), replayed on both arms")
    print(f"{'arm':30} {'out of bounds':>13} {'not JSON':>8} {'tokens':>7} {'seconds':>8}")
    for name, s in stats.items():
        print(f"{name:30} {s['out']:13d} {s['not_json']:8d} {s['tokens']:7d} {s['s']:8.1f}")
    print(f"replies in bounds on both arms: {in_both}; the same text on both: {same}; the same JSON value: "
          f"{same_value} (the enum's grammar allows no space after the number, the integer's did)")
    return 0 if stats["bounds as enums (now)"]["out"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
