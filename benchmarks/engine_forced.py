"""The embedded engine's speed on the same work: weight formats and samplers compared on teacher-forced replies.

`engine_weights.py` replays requests and lets each arm sample its own reply; at T>0 the replies part at the first
differing logit, so arms generate different numbers of tokens and their times are not the same work. Here every
arm does exactly the same work: each request of a finished run (a call store, in the order the run made them, so
prompts share prefixes as they did) is prefilled with the pipeline's prefix reuse, then its recorded reply is
forced token by token: at each token the arm's sampler runs on the logits as it would (its draw is discarded) and
the recorded token is accepted and evaluated. Times are split into prefill, sampling and decoding.

Arms (rotating per request in one process; a name ending in ``_gl`` samples with the grammar checked on the
sampled token first, ``rubriclab.llm._sampling``, the others with llama-cpp-python's chain, grammar first):
``q4_1`` (the file as shipped), ``f16`` (the copy ``rubriclab.llm._weights`` makes), ``q8_0`` (another copy by
llama.cpp), each with or without ``_gl``.

    python benchmarks/engine_forced.py --store .rubriclab/calls.sqlite [--n 60] [--arms q4_1,q4_1_gl,f16_gl,q8_0_gl]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

FORMATS = ("q4_1", "f16", "q8_0")


def recorded(store: str, n: int, seed: int) -> list[dict]:
    """``n`` embedded-model chat calls with a reply, drawn at random, in the order the run made them."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("select substr(stage, 1, instr(stage || '@', '@') - 1) || ' ' || role, request, text, "
                      "extra, created_at from calls where model like 'local/smollm2%' and completion_tokens > 1 "
                      "and status = 'ok' and text is not null order by created_at").fetchall()
    if not rows:
        raise SystemExit(f"{store}: no embedded-model chat calls with a reply; run `make repro` first")
    picked = sorted(random.Random(seed).sample(range(len(rows)), min(n, len(rows))))
    out = []
    for i in picked:
        where, req, text, extra, _ = rows[i]
        out.append({"where": where, "request": json.loads(req), "text": text,
                    "finish": (json.loads(extra or "{}") or {}).get("finish_reason")})
    return out


def grammar_of(params: dict):
    from llama_cpp import LlamaGrammar
    from llama_cpp.llama_grammar import JSON_GBNF

    rf = params.get("response_format")
    if not isinstance(rf, dict):
        return None
    schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else rf.get("schema")
    if schema:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    return LlamaGrammar.from_string(JSON_GBNF, verbose=False)


class Forced:
    """One arm: a model and a way of sampling, doing the forced work and timing it."""

    def __init__(self, name: str, path: str) -> None:
        from llama_cpp import Llama

        from rubriclab.llm._local import N_CTX, guard_prefix_reuse, llama_threads

        self.name, self.grammar_last = name, name.endswith("_gl")
        self.llm = guard_prefix_reuse(Llama(model_path=path, n_ctx=N_CTX, **llama_threads(),
                                            verbose=False, seed=0))
        self.size_mb = os.path.getsize(path) / 1e6
        self.prefill_s = self.sample_s = self.decode_s = 0.0
        self.new_tokens = self.forced_tokens = self.rejected = 0

    def run(self, call: dict) -> None:
        import llama_cpp

        from rubriclab.llm._local import _format, eval_after_prefix
        from rubriclab.llm._sampling import GrammarLastSampler

        llm, params = self.llm, dict(call["request"].get("params") or {})
        prompt = llm.tokenize(_format(llm, call["request"]["messages"]).encode("utf-8"), add_bos=False, special=True)
        t = time.perf_counter()
        keep = eval_after_prefix(llm, prompt)
        self.prefill_s += time.perf_counter() - t
        self.new_tokens += len(prompt) - keep
        reply = llm.tokenize(call["text"].encode("utf-8"), add_bos=False, special=False)
        reply = reply[: int(params.get("max_tokens", 256))]
        if call["finish"] == "stop":
            reply.append(llm.token_eos())
        grammar = grammar_of(params)
        kwargs = {"temp": float(params.get("temperature", 0.0)), "repeat_penalty": 1.1}  # the chat handler's
        if grammar is not None and self.grammar_last:
            sampler = GrammarLastSampler(llm, llm._init_sampler(**kwargs), grammar)
        else:
            sampler = llm._init_sampler(**kwargs, grammar=grammar)
        for i, tok in enumerate(reply):
            t = time.perf_counter()
            if isinstance(sampler, GrammarLastSampler):
                picked = sampler._pick(sampler._chain, sampler._candidates(llm._ctx, -1))
                if not sampler.allows(picked):
                    self.rejected += 1
                    arr = sampler._candidates(llm._ctx, -1)
                    llama_cpp.llama_sampler_apply(sampler._grammar.sampler, ctypes.byref(arr))
                    sampler._pick(sampler._chain, arr)
                sampler._grammar.accept(tok)
                sampler._chain.accept(tok)
            else:
                arr = _candidates(llm)
                llama_cpp.llama_sampler_apply(sampler.sampler, ctypes.byref(arr))
                sampler.accept(tok)
            self.sample_s += time.perf_counter() - t
            if i == len(reply) - 1 and tok == llm.token_eos():
                break  # an end-of-text token ends the reply: nothing to evaluate after it
            t = time.perf_counter()
            llm.eval([tok])
            self.decode_s += time.perf_counter() - t
            self.forced_tokens += 1

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.sample_s + self.decode_s


def _candidates(llm):
    import llama_cpp
    import numpy as np

    n = llm.n_vocab()
    data = (llama_cpp.llama_token_data * n)()
    view = np.ctypeslib.as_array(data)
    view["id"] = np.arange(n, dtype=np.int32)
    view["logit"] = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n,))
    arr = llama_cpp.llama_token_data_array(data=ctypes.cast(data, ctypes.POINTER(llama_cpp.llama_token_data)),
                                           size=n, selected=-1, sorted=False)
    arr._keep = data  # the buffer lives as long as the array
    return arr


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=".rubriclab/calls.sqlite", help="a call store of a finished run")
    ap.add_argument("--n", type=int, default=60, help="calls replayed on every arm")
    ap.add_argument("--arms", default="q4_1,q4_1_gl,f16_gl,q8_0_gl")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    arms = list(dict.fromkeys(a.strip() for a in args.arms.split(",") if a.strip()))
    bad = [a for a in arms if a.removesuffix("_gl") not in FORMATS]
    if bad or not arms:
        ap.error(f"--arms {args.arms!r}; expected names from {', '.join(FORMATS)}, each optionally with _gl")

    from engine_weights import quantized

    from rubriclab.llm import CHAT_MODELS, locate_model_file

    shipped = str(locate_model_file(*CHAT_MODELS["smollm2-135m"]))
    calls = recorded(args.store, args.n, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {f: shipped if f == "q4_1" else quantized(shipped, f, Path(tmp))
                 for f in dict.fromkeys(a.removesuffix("_gl") for a in arms)}
        runs = {a: Forced(a, paths[a.removesuffix("_gl")]) for a in arms}
        for i, call in enumerate(calls):
            for a in arms[i % len(arms):] + arms[:i % len(arms)]:  # rotating order: no arm always runs first
                runs[a].run(call)
            print(f"\r{i + 1}/{len(calls)} calls", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)

    first = runs[arms[0]]
    print(f"{len(calls)} calls of {args.store} (seed {args.seed}) in the run's order, replies forced; "
          f"{first.new_tokens} prompt tokens prefilled after prefix reuse, {first.forced_tokens} reply tokens; "
          f"{os.cpu_count()} cores; arms rotating per call")
    print(f"{'arm':9} {'MB':>5} {'prefill s':>9} {'sample s':>9} {'decode s':>9} {'total s':>8} "
          f"{'vs ' + arms[0]:>10} {'grammar redraws':>15}")
    for a in arms:
        r = runs[a]
        print(f"{a:9} {r.size_mb:5.0f} {r.prefill_s:9.1f} {r.sample_s:9.1f} {r.decode_s:9.1f} {r.total_s:8.1f} "
              f"{first.total_s / r.total_s:9.2f}x {r.rejected:15d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
