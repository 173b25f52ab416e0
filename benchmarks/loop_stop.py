"""The embedded engine with and without its loop stop (``rubriclab.llm._loops``), on the requests it applies to.

Every greedy request without a grammar of a finished run (a call store: in `make repro` the drift refiner's rubric
rewrites and the probe's refiner) is replayed on the engine twice, once with the loop stop and once without it,
the arms alternating per request (which goes first alternates too) in one process. Printed per arm: replies,
tokens generated and seconds; per request whether the reply with the stop is the start of the reply without it
(the stop only ends a reply, it never changes one).

    python benchmarks/loop_stop.py --store .rubriclab/calls.sqlite     # after `make repro`; about 3 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def greedy_free_requests(store: str) -> list[tuple[str, dict]]:
    """(stage · role, request) of the store's embedded chat calls at T=0 without a response format."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("select substr(stage, 1, instr(stage || '@', '@') - 1) || ' · ' || role, request from calls "
                      "where model like 'local/smollm2%' and status = 'ok' order by created_at").fetchall()
    out = []
    for where, raw in rows:
        req = json.loads(raw)
        params = req.get("params") or {}
        if float(params.get("temperature") or 0) == 0 and params.get("response_format") is None \
                and int(params.get("max_tokens") or 0) > 1:
            out.append((where, req))
    if not out:
        raise SystemExit(f"{store}: no greedy embedded chat call without a grammar; run `make repro` first")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a finished run's call store (.rubriclab/calls.sqlite)")
    args = ap.parse_args()

    from rubriclab.llm import _local
    from rubriclab.llm._weights import chat_weights

    requests = greedy_free_requests(args.store)
    llm = _local.load_chat_model(chat_weights("smollm2-135m"))
    guard = _local.loop_guard
    arms = {"without stop": lambda llm, kwargs: None, "with stop": guard}
    totals = {name: {"replies": 0, "tokens": 0, "seconds": 0.0, "stopped": 0} for name in arms}
    rows = []
    for i, (where, req) in enumerate(requests):
        order = list(arms) if i % 2 == 0 else list(reversed(arms))
        replies = {}
        for name in order:
            _local.loop_guard = arms[name]
            t0 = time.perf_counter()
            out = _local._chat(llm, req["messages"], req["params"])
            seconds = time.perf_counter() - t0
            t = totals[name]
            t["replies"] += 1
            t["tokens"] += int(out["usage"].get("completion_tokens") or 0)
            t["seconds"] += seconds
            t["stopped"] += out["finish_reason"] == "repetition"
            replies[name] = out
        _local.loop_guard = guard
        off, on = replies["without stop"], replies["with stop"]
        rows.append((where, off["usage"].get("completion_tokens"), off["finish_reason"],
                     on["usage"].get("completion_tokens"), on["finish_reason"], off["text"].startswith(on["text"])))

    print(f"{len(requests)} greedy requests without a grammar from {args.store}; arms alternating per request")
    print(f"{'request':24s} {'tokens without':>14s} {'finish':>8s} {'tokens with':>11s} {'finish':>10s}  prefix")
    for where, a, fa, b, fb, prefix in rows:
        print(f"{where:24s} {a:>14} {fa:>8s} {b:>11} {fb:>10s}  {prefix}")
    print(f"\n{'arm':14s} {'replies':>7s} {'stopped':>7s} {'tokens':>7s} {'seconds':>8s}")
    for name, t in totals.items():
        print(f"{name:14s} {t['replies']:>7} {t['stopped']:>7} {t['tokens']:>7} {t['seconds']:>8.1f}")
    off, on = totals["without stop"], totals["with stop"]
    print(f"\nwith the stop: {on['tokens'] / max(1, off['tokens']):.2f}x the tokens, "
          f"{off['seconds'] / max(1e-9, on['seconds']):.2f}x faster; "
          f"every reply with the stop starts the reply without it: {all(r[-1] for r in rows)}")


if __name__ == "__main__":
    main()
