"""Compare two call stores made by the same pipeline: are the replies identical, call by call?

Calls are matched by key (the hash of model, request and sample index), so only the order or the machine
may differ between the two runs. Prints, per kind of call (T=0, T>0, one-token logprob mode), how many
replies differ (text, and for the logprob mode the top-token log-probabilities), and the ledger of each
store: calls, prompt and completion tokens, summed model seconds.

    python benchmarks/compare_stores.py A.sqlite B.sqlite [--show 5]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter


def load(path: str) -> dict[str, dict]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = {}
    for key, stage, status, text, extra, request, pt, ct, lat in db.execute(
            "SELECT key, stage, status, text, extra, request, prompt_tokens, completion_tokens, latency_s FROM calls"):
        params = (json.loads(request or "{}") or {}).get("params") or {}
        logprobs = ((json.loads(extra or "{}") or {}).get("logprobs")) if params.get("logprobs") else None
        kind = "logprob mode" if params.get("logprobs") else ("T=0" if not params.get("temperature") else "T>0")
        rows[key] = {"stage": stage, "status": status, "text": text, "logprobs": logprobs, "kind": kind,
                     "prompt_tokens": pt or 0, "completion_tokens": ct or 0, "latency_s": lat or 0.0}
    return rows


def ledger(rows: dict[str, dict]) -> str:
    return (f"{len(rows)} calls, {sum(r['prompt_tokens'] for r in rows.values())} prompt tokens, "
            f"{sum(r['completion_tokens'] for r in rows.values())} completion tokens, "
            f"{sum(r['latency_s'] for r in rows.values()):.0f} model seconds")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--show", type=int, default=5, help="print this many differing replies")
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    print(f"A {args.a}: {ledger(a)}\nB {args.b}: {ledger(b)}")
    common = sorted(set(a) & set(b))
    only = len(set(a) ^ set(b))
    total, differ, shown = Counter(), Counter(), 0
    for key in common:
        x, y = a[key], b[key]
        total[x["kind"]] += 1
        if (x["status"], x["text"], x["logprobs"]) != (y["status"], y["text"], y["logprobs"]):
            differ[x["kind"]] += 1
            if shown < args.show:
                shown += 1
                print(f"  differs ({x['kind']}, {x['stage']}): {x['text']!r:.80} | {y['text']!r:.80}")
    print(f"calls in both stores: {len(common)}; in only one: {only}")
    print("| kind | calls | replies that differ |\n|---|---|---|")
    for kind in ("T=0", "T>0", "logprob mode"):
        print(f"| {kind} | {total[kind]} | {differ[kind]} |")
    print(f"| all | {sum(total.values())} | {sum(differ.values())} |")


if __name__ == "__main__":
    main()
