"""Grammar-constrained sampling that checks the grammar on the sampled token first (llama.cpp's own
``common_sampler``, ``grammar_first = false``), for the embedded engine.

llama-cpp-python puts the grammar first in its sampler chain, so every generated token runs the grammar over all
49,152 candidates before top-k: decoding inside a JSON schema took twice as long as free decoding on 2 cores
(benchmarks/README.md). Here the chain without the grammar picks a token; when the grammar accepts it, it is kept;
only when the grammar rejects it are all candidates filtered and the chain run again. At T=0 the result is the
grammar-first result (the argmax, or when it is not allowed the argmax among the allowed tokens). At T>0 a token
the grammar allows keeps the chance the unconstrained draw gives it, plus its share of the redraw: the reply is
always in the grammar, the draw is not the grammar-first one.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any


class GrammarLastSampler:
    """A drop-in for llama-cpp-python's ``LlamaSampler`` in ``Llama.generate`` (it only calls ``sample``)."""

    def __init__(self, llm: Any, chain: Any, grammar: Any) -> None:
        import llama_cpp
        import numpy as np
        from llama_cpp import _internals

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

    def sample(self, ctx: Any, idx: int = -1) -> int:
        import llama_cpp

        token = self._pick(self._chain, self._candidates(ctx, idx))
        self.sampled += 1
        if not self.allows(token):
            self.rejected += 1
            arr = self._candidates(ctx, idx)  # afresh: the chain sorted and cut the first array in place
            llama_cpp.llama_sampler_apply(self._grammar.sampler, ctypes.byref(arr))
            token = self._pick(self._chain, arr)
        self._grammar.accept(token)
        self._chain.accept(token)
        return token


def grammar_last(llm: Any) -> Any:
    """Make ``llm`` sample grammar-constrained replies with :class:`GrammarLastSampler`."""
    original = llm._init_sampler

    def init_sampler(*args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        if grammar is None or kwargs.get("mirostat_mode"):
            return original(*args, grammar=grammar, **kwargs)
        return GrammarLastSampler(llm, original(*args, grammar=None, **kwargs), grammar)

    llm._init_sampler = init_sampler
    return llm
