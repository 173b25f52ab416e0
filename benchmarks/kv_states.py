"""The embedded engine with and without saved KV states (``rubriclab.llm._kvstates``), on a finished run's calls.

Each stage's embedded chat calls of a call store are replayed in the order the run made them on two engines in
one process: the engine as the pipeline loads it (``load_chat_model``: the previous prompt's state in place plus
earlier prompts' states up to ``KV_STATE_BYTES``) and the same engine keeping only the state in place (before).
The arms alternate per call (which goes first alternates too); each stage starts both engines empty, as its own
process would. Printed per stage: calls, prompt tokens evaluated, seconds, and whether every reply (text, or the
first-token distribution in the yes/no-logit mode) is identical.

    python benchmarks/kv_states.py --store .rubriclab/calls.sqlite [--limit 150] [--stages audit,repair]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from collections import defaultdict

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def calls_by_stage(store: str, stages: list[str], limit: int) -> dict[str, list[dict]]:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("select stage, request from calls where model like 'local/smollm2%' and status = 'ok' "
                      "order by created_at").fetchall()
    out: dict[str, list[dict]] = defaultdict(list)
    for stage, raw in rows:
        if stage.split("@")[0] in stages and len(out[stage]) < limit:
            out[stage].append(json.loads(raw))
    if not out:
        raise SystemExit(f"{store}: no embedded chat call of stages {stages}; run `make repro` first")
    return dict(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a finished run's call store (.rubriclab/calls.sqlite)")
    ap.add_argument("--stages", default="audit,repair", help="comma-separated stage names")
    ap.add_argument("--limit", type=int, default=150, help="the first N calls of each stage")
    args = ap.parse_args()

    from llama_cpp import Llama

    from rubriclab.llm import _local
    from rubriclab.llm._kvstates import kv_states
    from rubriclab.llm._sampling import grammar_last
    from rubriclab.llm._weights import chat_weights

    path = chat_weights("smollm2-135m")
    engines = {"state in place (before)": grammar_last(_local.guard_prefix_reuse(
                   Llama(model_path=str(path), n_ctx=_local.N_CTX, n_threads=_local.local_threads(), verbose=False,
                         seed=0))),
               "saved states (now)": _local.load_chat_model(path)}
    evaluated = {name: 0 for name in engines}
    current: list[str] = []
    cut = _local.limit_prefix_reuse

    def counting(llm, tokens):  # what each prompt leaves to evaluate, per arm
        keep = cut(llm, tokens)
        evaluated[current[0]] += len(tokens) - keep
        return keep

    _local.limit_prefix_reuse = counting

    def run(llm, req):
        params = req.get("params") or {}
        if params.get("logprobs") and params.get("max_tokens", 1) <= 1:
            out = _local._first_token_distribution(llm, req["messages"], int(params.get("top_logprobs") or 5))
            return json.dumps(out["logprobs"])
        return _local._chat(llm, req["messages"], params)["text"]

    print(f"{'stage':22} {'calls':>5} {'prompt tok':>10} " + " ".join(f"{n[:18]:>18} {'s':>6}" for n in engines)
          + f" {'ratio':>6} {'same replies':>12}")
    totals = {name: [0, 0.0] for name in engines}
    all_same = True
    for stage, reqs in calls_by_stage(args.store, [s.strip() for s in args.stages.split(",")], args.limit).items():
        for llm in engines.values():
            llm.reset()
            states = kv_states(llm)
            if states is not None:
                states.clear()
        seconds = {name: 0.0 for name in engines}
        before = dict(evaluated)
        same = True
        prompt_tokens = 0
        for i, req in enumerate(reqs):
            replies = {}
            for name in (list(engines) if i % 2 == 0 else list(engines)[::-1]):
                current[:] = [name]
                t0 = time.perf_counter()
                replies[name] = run(engines[name], req)
                seconds[name] += time.perf_counter() - t0
            same &= len(set(replies.values())) == 1
            llm = engines["saved states (now)"]
            prompt_tokens += len(llm.tokenize(_local._format(llm, req["messages"]).encode("utf-8"), add_bos=False,
                                              special=True))
            print(f"\r{stage}: {i + 1}/{len(reqs)}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        names = list(engines)
        ratio = seconds[names[0]] / seconds[names[1]]
        print(f"{stage:22} {len(reqs):5d} {prompt_tokens:10d} "
              + " ".join(f"{evaluated[n] - before[n]:18d} {seconds[n]:6.1f}" for n in names)
              + f" {ratio:5.2f}x {str(same):>12}")
        for n in names:
            totals[n][0] += evaluated[n] - before[n]
            totals[n][1] += seconds[n]
        all_same &= same
    names = list(engines)
    print(f"{'all':22} {'':5} {'':10} " + " ".join(f"{totals[n][0]:18d} {totals[n][1]:6.1f}" for n in names)
          + f" {totals[names[0]][1] / totals[names[1]][1]:5.2f}x {str(all_same):>12}")
    print("columns per arm: prompt tokens evaluated (not reused), seconds; ratio = before / now")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
