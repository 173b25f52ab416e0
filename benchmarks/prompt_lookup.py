"""Speculative decoding with prompt-lookup drafts on the embedded engine: measured, not adopted (issue 25).

llama-cpp-python can verify drafted tokens in one batched decode (``LlamaPromptLookupDecoding``: the draft is what
followed the last n-gram's previous occurrence in the prompt or the reply so far). It would keep replies only if a
token got the same logits in a batch as alone, and it is faster only if a batched decode costs little more than one
token's. This script measures both, in one process:

1. the cost of decoding k tokens in one batch after a 500-token context (k = 1 … 16), best of 30;
2. whether a token's logits are the same decoded alone or in a batch (they are not: llama.cpp's batched matrix
   products round differently, so a verified draft can change a reply);
3. requests of a finished run (a call store), replayed on two engines that differ only in the drafts, the arms
   alternating per request (which goes first alternates too): seconds, tokens, decodes, and whether every reply is
   the same text.

The engine's stock wiring does not serve drafts (its logits buffer holds ``n_batch`` rows and only the last token
gets logits), so the drafting engine here gets a logits buffer of ``n_ctx`` rows and logits for every token of a
short (draft-sized) decode; the prompt itself is decoded as before, last token only.

    python benchmarks/prompt_lookup.py --store .rubriclab/calls.sqlite     # after `make repro`; ~3 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# (label, SQL condition on the calls table): the demo's long replies, grammar-constrained or not
GROUPS = (
    ("audit · per-rubric JSON (grammar)", "stage like 'audit%' and role = 'judge[0]' "
                                          "and json_extract(request, '$.params.max_tokens') > 256"),
    ("discover · extractor JSON (grammar)", "role = 'extractor'"),
    ("drift · refiner (free text, T=0)", "stage like 'drift%' and role = 'refiner'"),
    ("repair · attacker (free text, T=0.9)", "role = 'attacker'"),
)


TEXT = b"The judge reads both answers and scores each criterion carefully. "


def _llama(path: object, **extra: object) -> object:
    """A llama.cpp model with the embedded engine's settings (``_local.load_chat_model``) plus ``extra``."""
    from llama_cpp import Llama

    from rubriclab.llm import _local

    return Llama(model_path=str(path), n_ctx=_local.N_CTX, n_threads=_local.local_threads(), verbose=False, seed=0,
                 **extra)


def stored_requests(store: str, condition: str, limit: int) -> list[dict]:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute(f"select request from calls where model like 'local/smollm2%' and status = 'ok' and attempt = 0 "
                      f"and ({condition}) order by created_at limit ?", (limit,)).fetchall()
    return [json.loads(r[0]) for r in rows]


def engines(draft_tokens: int) -> tuple[object, object, dict]:
    """(plain, drafting, counts): the engine as `_local.load_chat_model` built it before forced runs, and the same
    with drafts."""
    import numpy as np
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from rubriclab.llm import _local
    from rubriclab.llm._sampling import grammar_last
    from rubriclab.llm._weights import chat_weights

    path = chat_weights("smollm2-135m")
    # forced runs off in both (they were not in the engine when this was measured, and they drive generate() too)
    plain = grammar_last(_local.guard_prefix_reuse(_llama(path), kv_state_bytes=_local.KV_STATE_BYTES), jump=False)
    llm = _llama(path, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=draft_tokens))
    llm.scores = np.ndarray((_local.N_CTX, llm.n_vocab()), dtype=np.single)
    counts = {"decodes": 0, "tokens": 0}
    evaluate = llm.eval

    def eval_with_draft_logits(tokens):  # a prompt: last token's logits; a token and its draft: every token's
        llm._logits_all = len(tokens) <= draft_tokens + 1
        if llm._logits_all:
            counts["decodes"] += 1
            counts["tokens"] += len(tokens)
        return evaluate(tokens)

    llm.eval = eval_with_draft_logits
    drafting = grammar_last(_local.guard_prefix_reuse(llm, kv_state_bytes=_local.KV_STATE_BYTES), jump=False)
    return plain, drafting, counts


def batch_costs(llm: object) -> dict[int, float]:
    """Milliseconds to decode k tokens in one batch after a 500-token context (best of 30)."""
    tokens = llm.tokenize(TEXT * 80, add_bos=False)
    llm.reset()
    llm.eval(tokens[:500])
    out = {}
    for k in (1, 2, 4, 8, 16):
        best = float("inf")
        for _ in range(30):
            llm.n_tokens = 500
            t0 = time.perf_counter()
            llm.eval(tokens[500:500 + k])
            best = min(best, time.perf_counter() - t0)
        out[k] = best * 1000
    llm.reset()
    return out


def batched_logits_differ(path: object) -> tuple[float, bool]:
    """Eight tokens after a 200-token context decoded one by one and then in batches of two: the largest logit
    difference and whether every position's argmax agrees."""
    import numpy as np

    llm = _llama(path, logits_all=True)
    tokens = llm.tokenize(TEXT * 20, add_bos=False)
    rows = []
    for step in (1, 2):
        llm.reset()
        llm.eval(tokens[:200])
        for start in range(200, 208, step):
            llm.eval(tokens[start:start + step])
        rows.append(llm.scores[200:208].copy())
    return float(np.abs(rows[0] - rows[1]).max()), bool((rows[0].argmax(1) == rows[1].argmax(1)).all())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="a finished run's call store (.rubriclab/calls.sqlite)")
    ap.add_argument("--limit", type=int, default=4, help="requests per group (default 4)")
    ap.add_argument("--draft", type=int, default=4, help="tokens drafted per lookup (default 4)")
    args = ap.parse_args()

    from rubriclab.llm import _local
    from rubriclab.llm._weights import chat_weights

    diff, argmax_same = batched_logits_differ(chat_weights("smollm2-135m"))
    print(f"logits of 8 tokens decoded one by one vs in batches of 2: max |difference| {diff:.4f}, "
          f"argmax the same at every position: {argmax_same}")
    plain, drafting, counts = engines(args.draft)
    costs = batch_costs(plain)
    print(f"decode of k tokens in one batch after 500 tokens of context (best of 30), {_local.local_threads()} "
          "thread(s):")
    print("  " + "  ".join(f"k={k}: {ms:.1f} ms ({ms / k:.1f}/token)" for k, ms in costs.items()))
    print(f"\nreplayed requests, arms alternating; drafts of {args.draft} tokens")
    print(f"{'group':40s} {'n':>3s} {'tokens':>7s} {'plain s':>8s} {'drafts s':>9s} {'ratio':>6s} "
          f"{'tok/decode':>10s} {'same':>5s}")
    total = {"plain": 0.0, "drafts": 0.0}
    for label, condition in GROUPS:
        requests = stored_requests(args.store, condition, args.limit)
        if not requests:
            print(f"{label:40s} (no such call in {args.store})")
            continue
        seconds = {"plain": 0.0, "drafts": 0.0}
        before = dict(counts)
        tokens = same = 0
        for i, req in enumerate(requests):
            arms = [("plain", plain), ("drafts", drafting)]
            replies = {}
            for name, llm in (arms if i % 2 == 0 else arms[::-1]):
                t0 = time.perf_counter()
                replies[name] = _local._chat(llm, req["messages"], req["params"])
                seconds[name] += time.perf_counter() - t0
            tokens += int(replies["plain"]["usage"].get("completion_tokens") or 0)
            same += replies["plain"]["text"] == replies["drafts"]["text"]
        decodes = counts["decodes"] - before["decodes"]
        accepted = tokens / decodes if decodes else float("nan")
        for k in total:
            total[k] += seconds[k]
        print(f"{label:40s} {len(requests):3d} {tokens:7d} {seconds['plain']:8.1f} {seconds['drafts']:9.1f} "
              f"{seconds['plain'] / seconds['drafts']:6.2f} {accepted:10.2f} {same:3d}/{len(requests)}")
    if total["drafts"]:
        print(f"{'all':40s} {'':3s} {'':7s} {total['plain']:8.1f} {total['drafts']:9.1f} "
              f"{total['plain'] / total['drafts']:6.2f}   (ratio = plain / drafts: > 1 means drafts are faster)")


if __name__ == "__main__":
    main()
