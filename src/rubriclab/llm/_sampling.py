"""Grammar-constrained sampling that checks the grammar on the sampled token first (llama.cpp's own
``common_sampler``, ``grammar_first = false``), for the embedded engine.

llama-cpp-python puts the grammar first in its sampler chain, so every generated token runs the grammar over all
49,152 candidates before top-k: decoding inside a JSON schema took twice as long as free decoding on 2 cores
(benchmarks/README.md). Here the chain without the grammar picks a token; when the grammar accepts it, it is kept;
only when the grammar rejects it are all candidates filtered and the chain run again. At T=0 the result is the
grammar-first result (the argmax, or when it is not allowed the argmax among the allowed tokens). At T>0 a token
the grammar allows keeps the chance the unconstrained draw gives it, plus its share of the redraw: the reply is
always in the grammar, the draw is not the grammar-first one.

Text the grammar forces is not decoded token by token (``jump`` on, as the engine runs): after every token, the
characters the grammar leaves exactly one choice for (a JSON key and its quotes, a closing brace) are found by
asking the grammar about the 256 one-byte tokens, tokenized as one string and evaluated in a single batch with the
token before them (``forced_runs`` drives llama-cpp-python's ``generate`` through the tokens it lets a caller
send). Eight tokens in one batch cost about what 2.5 decoded one at a time do on 2 cores (benchmarks/README.md).
The forced text is what the grammar allowed anyway, in the tokenizer's own split of it rather than the model's
(and a batch rounds its logits slightly differently from single tokens), so the reply after a run can differ from
the one decoded token by token.
"""

from __future__ import annotations

import ctypes
import json
import math
import weakref
from collections import deque
from collections.abc import Generator
from typing import Any

# A forced run is planned only with room for this many more cells (its bytes bound its tokens), and ends there.
MAX_RUN_BYTES = 128
_byte_tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def byte_tokens(llm: Any) -> tuple[Any, bool]:
    """For each byte value 0-255, a token of the model whose text is that byte alone (-1 where none): the probe
    that shows which next characters a grammar allows. And whether it sees every choice: every token of the
    vocabulary starts with a byte that has such a token (SmolLM2 has none for six control characters and the
    bytes UTF-8 never starts a character with, and no token starts with them)."""
    import numpy as np

    found = _byte_tokens.get(llm)
    if found is None:
        ids = np.full(256, -1, dtype=np.int32)
        firsts = set()
        for token in range(llm.n_vocab()):
            piece = llm.detokenize([token])
            if piece:
                firsts.add(piece[0])
            if len(piece) == 1 and ids[piece[0]] < 0:
                ids[piece[0]] = token
        found = (ids, all(ids[b] >= 0 for b in firsts))
        _byte_tokens[llm] = found
    return found


class GrammarLastSampler:
    """A drop-in for llama-cpp-python's ``LlamaSampler`` in ``Llama.generate`` (it only calls ``sample``)."""

    def __init__(self, llm: Any, chain: Any, grammar: Any, jump: bool = False) -> None:
        import llama_cpp
        import numpy as np
        from llama_cpp import _internals

        self._llm = llm
        self._chain = chain
        self._grammar = _internals.LlamaSampler()
        self._grammar.add_grammar(llm._model, grammar)
        self._n = llm.n_vocab()
        self._data = (llama_cpp.llama_token_data * self._n)()
        self._view = np.ctypeslib.as_array(self._data)
        self._ids = np.arange(self._n, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()
        self.rejected = 0  # tokens the chain picked that the grammar did not allow (then redrawn)
        self.sampled = 0
        self.forced = 0  # tokens of forced runs: accepted without a draw, evaluated in batches
        self.runs = 0
        self._queue: deque[int] = deque()  # forced tokens accepted by the grammar and the chain, not yet returned
        self._to_send: list[int] = []  # of them, the ones ``generate`` should evaluate in one batch next
        self._started = False
        self.jump = bool(jump)
        if self.jump:
            ids, complete = byte_tokens(llm)
            self.jump = complete  # else a token could start with a byte the probe does not ask about: no runs
            self._probe = (llama_cpp.llama_token_data * 257)()
            self._probe_view = np.ctypeslib.as_array(self._probe)
            self._probe_view["id"][:256] = np.where(ids >= 0, ids, llm.token_eos())
            self._probe_view["id"][256] = llm.token_eos()
            self._byte_ids = ids

    def _candidates(self, ctx: Any, idx: int) -> Any:
        import llama_cpp
        import numpy as np

        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n,))
        self._view["id"] = self._ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        return llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._data, ctypes.POINTER(llama_cpp.llama_token_data)), size=self._n, selected=-1,
            sorted=False)

    def _pick(self, sampler: Any, arr: Any) -> int:
        import llama_cpp

        llama_cpp.llama_sampler_apply(sampler.sampler, ctypes.byref(arr))
        if not 0 <= arr.selected < arr.size:
            raise RuntimeError(f"llama.cpp sampler selected no token (index {arr.selected} of {arr.size})")
        return int(arr.data[arr.selected].id)

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its current state, allows ``token`` next."""
        import llama_cpp

        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        one = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, ctypes.POINTER(llama_cpp.llama_token_data)), size=1, selected=-1,
            sorted=False)
        llama_cpp.llama_sampler_apply(self._grammar.sampler, ctypes.byref(one))
        return math.isfinite(self._one[0].logit)

    def _forced_bytes(self) -> bytes:
        """The characters the grammar, from its current state, forces next (accepted into it one by one): while
        exactly one of the 256 bytes is allowed, that byte is ASCII and the reply may not end. Empty when none."""
        import llama_cpp
        import numpy as np

        out = bytearray()
        arr = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._probe, ctypes.POINTER(llama_cpp.llama_token_data)), size=257, selected=-1,
            sorted=False)
        while len(out) < MAX_RUN_BYTES:
            self._probe_view["logit"] = 0.0
            self._probe_view["p"] = 0.0
            arr.size, arr.selected, arr.sorted = 257, -1, False
            llama_cpp.llama_sampler_apply(self._grammar.sampler, ctypes.byref(arr))
            allowed = np.flatnonzero(np.isfinite(self._probe_view["logit"]))
            if len(allowed) != 1 or allowed[0] >= 0x80:  # a choice, a non-ASCII character, or the end (256)
                break
            self._grammar.accept(int(self._byte_ids[allowed[0]]))
            out.append(int(allowed[0]))
        return bytes(out)

    def _plan_run(self, room: int) -> list[int]:
        """Tokens of the text forced from here (grammar and chain have accepted them), if ``room`` cells allow."""
        if not self.jump or room < MAX_RUN_BYTES + 1:
            return []
        text = self._forced_bytes()
        if not text:
            return []
        tokens = [int(t) for t in self._llm.tokenize(text, add_bos=False, special=False)]
        for t in tokens:
            self._chain.accept(t)
        self.forced += len(tokens)
        self.runs += 1
        return tokens

    def take_run(self) -> list[int]:
        """The forced tokens to evaluate in one batch with the token just returned (once; then empty)."""
        run, self._to_send = self._to_send, []
        return run

    def sample(self, ctx: Any, idx: int = -1) -> int:
        import llama_cpp

        if self._queue:  # inside a forced run: its token, drawn from nothing
            return self._queue.popleft()
        llm = self._llm
        if not self._started:
            self._started = True
            run = self._plan_run(llm.n_ctx() - llm.n_tokens)  # what the grammar forces before any choice
            if run:
                self._queue.extend(run[1:])
                self._to_send = run[1:]
                return run[0]
        token = self._pick(self._chain, self._candidates(ctx, idx))
        self.sampled += 1
        if not self.allows(token):
            self.rejected += 1
            arr = self._candidates(ctx, idx)  # afresh: the chain sorted and cut the first array in place
            llama_cpp.llama_sampler_apply(self._grammar.sampler, ctypes.byref(arr))
            token = self._pick(self._chain, arr)
        self._grammar.accept(token)
        self._chain.accept(token)
        run = self._plan_run(llm.n_ctx() - llm.n_tokens - 1)
        if run:
            self._queue.extend(run)
            self._to_send = list(run)
        return token


def forced_runs(llm: Any) -> Any:
    """Make ``llm.generate`` evaluate each forced run of a :class:`GrammarLastSampler` in one batch: after a token,
    the run is sent into llama-cpp-python's generator, which evaluates the token and the run together and then
    takes the run's tokens back from the sampler one by one (each matching what it evaluated)."""
    original = llm.generate

    def generate(tokens: Any, *args: Any, **kwargs: Any) -> Generator[int, Any, None]:
        inner = original(tokens, *args, **kwargs)
        try:
            token = next(inner)
            while True:
                yield token
                sampler = llm._sampler
                run = sampler.take_run() if isinstance(sampler, GrammarLastSampler) else []
                token = inner.send(run or None)
        except StopIteration:
            return
        finally:
            inner.close()

    llm.generate = generate
    return llm


def compact_json_grammar(schema: dict) -> Any:
    """llama-cpp-python's grammar for ``schema`` without its optional space after every token of JSON syntax
    (``space ::= " "?``): the only whitespace left is inside strings, so between two values everything up to the
    next value's first character is forced (``{"answer":"`` is one run) and the model spends no token on spaces."""
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    rules = json_schema_to_gbnf(json.dumps(schema)).splitlines()
    return LlamaGrammar.from_string("\n".join('space ::= ""' if r.startswith("space ::=") else r for r in rules),
                                    verbose=False)


def grammar_last(llm: Any, jump: bool = True) -> Any:
    """Make ``llm`` sample grammar-constrained replies with :class:`GrammarLastSampler`; with ``jump``, the text
    the grammar forces is evaluated in batches, not decoded (``forced_runs``)."""
    original = llm._init_sampler

    def init_sampler(*args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        if grammar is None or kwargs.get("mirostat_mode"):
            return original(*args, grammar=grammar, **kwargs)
        return GrammarLastSampler(llm, original(*args, grammar=None, **kwargs), grammar, jump=jump)

    llm._init_sampler = init_sampler
    return forced_runs(llm) if jump else llm
