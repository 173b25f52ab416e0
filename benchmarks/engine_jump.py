"""Forced runs evaluated in one batch, and JSON without optional spaces, on the embedded engine (issue 25).

A JSON-schema reply is mostly text the grammar forces: the per-rubric judge's ~300-token replies repeat
``"candidate_reasoning"``, ``"baseline_adherence"`` ... six times over, and a verdict is ``{"answer":"`` before its
one free token. The engine used to decode every such token one at a time (~12 ms each on 2 cores, plus the
sampler). Three engines replay the same requests of a finished run (a call store), the arms alternating per
request (which goes first rotates), each with its own KV state, in one process:

- ``before``: the engine as it was (grammar-last sampling, every token decoded, llama-cpp-python's schema grammar
  with its optional space after each token of JSON syntax);
- ``runs``: the forced text found from the grammar and evaluated in one batch with the token before it;
- ``runs+compact``: the same with the schema grammar's optional spaces removed (what the engine runs now).

For each group: seconds, reply tokens, decoded (sampled) tokens, forced tokens, replies that ended and parse as
JSON, and replies the same as ``before``'s.

    python benchmarks/engine_jump.py --store .rubriclab/calls.sqlite     # after `make repro`; ~5 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SCHEMA = "json_extract(request, '$.params.response_format') is not null"
GROUPS = (
    ("audit · per-rubric JSON", f"{SCHEMA} and stage like 'audit%' and role = 'judge[0]' "
                                "and json_extract(request, '$.params.max_tokens') > 256"),
    ("judges · short verdict JSON", f"{SCHEMA} and role like '%judge%' "
                                    "and json_extract(request, '$.params.max_tokens') <= 32"),
    ("repair · verifier JSON", f"{SCHEMA} and role = 'verifier'"),
    ("discover · extractor JSON", f"{SCHEMA} and role = 'extractor'"),
)
ARMS = ("before", "runs", "runs+compact")


def stored_requests(store: str, condition: str, limit: int) -> list[dict]:
    """Up to ``limit`` first-attempt requests matching ``condition``, spread evenly over the run's order."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute(f"select request from calls where model like 'local/smollm2%' and status = 'ok' "
                      f"and attempt = 0 and ({condition}) order by created_at").fetchall()
    step = max(1, len(rows) // limit) if limit else 1
    return [json.loads(r[0]) for r in rows[::step][:limit]]


def engines() -> dict[str, tuple[object, bool]]:
    """Arm name -> (engine, compact JSON grammar)."""
    from llama_cpp import Llama

    from rubriclab.llm import _local
    from rubriclab.llm._sampling import grammar_last
    from rubriclab.llm._weights import chat_weights

    path = chat_weights("smollm2-135m")
    before = Llama(model_path=str(path), n_ctx=_local.N_CTX, n_threads=_local.local_threads(), verbose=False, seed=0)
    before = grammar_last(_local.guard_prefix_reuse(before, kv_state_bytes=_local.KV_STATE_BYTES), jump=False)
    return {"before": (before, False), "runs": (_local.load_chat_model(path), False),
            "runs+compact": (_local.load_chat_model(path), True)}


def _ended_json(reply: dict) -> bool:
    if reply["finish_reason"] != "stop":
        return False
    try:
        json.loads(reply["text"], strict=False)
    except ValueError:
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a finished run's call store (.rubriclab/calls.sqlite)")
    ap.add_argument("--limit", type=int, default=8, help="requests per group (default 8)")
    args = ap.parse_args()

    from rubriclab.llm import _local
    from rubriclab.llm._sampling import GrammarLastSampler

    made: list[GrammarLastSampler] = []
    init = GrammarLastSampler.__init__

    def record(self, *a, **k):
        init(self, *a, **k)
        made.append(self)

    GrammarLastSampler.__init__ = record
    arms = engines()
    print(f"requests of {args.store}, arms rotating per request, {_local.local_threads()} llama.cpp thread(s)")
    head = f"{'group':30s} {'arm':13s} {'n':>3s} {'s':>7s} {'vs before':>9s} {'tokens':>7s} {'decoded':>7s} " \
           f"{'forced':>6s} {'runs':>5s} {'ended JSON':>10s} {'same':>5s}"
    print(head)
    totals = dict.fromkeys(ARMS, 0.0)
    for label, condition in GROUPS:
        requests = stored_requests(args.store, condition, args.limit)
        if not requests:
            print(f"{label:30s} (no such call in {args.store})")
            continue
        stats = {a: {"s": 0.0, "tokens": 0, "decoded": 0, "forced": 0, "runs": 0, "ok": 0, "same": 0} for a in ARMS}
        for i, req in enumerate(requests):
            order = ARMS[i % 3:] + ARMS[:i % 3]
            replies = {}
            for arm in order:
                llm, compact = arms[arm]
                made.clear()
                t0 = time.perf_counter()
                replies[arm] = _local._chat(llm, req["messages"], req["params"], compact_json=compact)
                st = stats[arm]
                st["s"] += time.perf_counter() - t0
                st["tokens"] += int(replies[arm]["usage"].get("completion_tokens") or 0)
                st["decoded"] += sum(m.sampled for m in made)
                st["forced"] += sum(m.forced for m in made)
                st["runs"] += sum(m.runs for m in made)
                st["ok"] += _ended_json(replies[arm])
            for arm in ARMS:
                stats[arm]["same"] += replies[arm]["text"] == replies["before"]["text"]
        for arm in ARMS:
            st = stats[arm]
            totals[arm] += st["s"]
            print(f"{label:30s} {arm:13s} {len(requests):3d} {st['s']:7.1f} {stats['before']['s'] / st['s']:8.2f}x "
                  f"{st['tokens']:7d} {st['decoded']:7d} {st['forced']:6d} {st['runs']:5d} "
                  f"{st['ok']:6d}/{len(requests):<3d} {st['same']:3d}/{len(requests)}")
    print("all: " + "  ".join(f"{a} {totals[a]:.1f} s ({totals['before'] / totals[a]:.2f}x)" for a in ARMS if totals[a]))


if __name__ == "__main__":
    main()
