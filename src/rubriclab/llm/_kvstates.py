"""KV states of earlier prompts, kept so a prompt can resume from the longest prefix it shares with any of them.

llama-cpp-python keeps one KV state: the previous prompt and its reply. A batch whose prompts share prefixes
two or more calls apart (an audit's judge prompts per criterion and pair, a repair's verifier and judge prompts
taking turns) evaluated the shared part again each time. ``KVStates`` copies the state of sequence 0 out
(``llama_state_seq_get_data``: ~23 kB a token for SmolLM2-135M) before a prompt cuts it back, up to a byte budget,
least recently used dropped first, and puts the best one back (``llama_state_seq_set_data``, into a cleared cache,
so its cells lie where a fresh evaluation would put them) when it shares more with the next prompt than the
state in place does. Only a state's prompt cells are reused, never its reply's (decoded one token at a time, they
give other logits than a prompt's: ``rubriclab.llm._local.PROMPT_CELLS_ATTR``). The tokens after the reused prefix
are evaluated as they would be after the previous prompt: the logits are bit-identical to a fresh evaluation
(tests/llm/test_llm_local.py).
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any

import numpy as np

ATTR = "_rubriclab_kv_states"


class KVStates:
    """Saved sequence-0 states of one llama-cpp-python ``Llama``, keyed by the tokens they hold."""

    def __init__(self, llm: Any, budget_bytes: int) -> None:
        self.llm, self.budget = llm, int(budget_bytes)
        self._states: OrderedDict[tuple[int, ...], Any] = OrderedDict()  # tokens -> ctypes buffer; LRU order
        self._prompt: dict[tuple[int, ...], int] = {}  # tokens -> how many of them its prompt holds (reusable)
        self.bytes = 0
        self.restores = 0  # prompts that resumed from a saved state, not from the one in place
        self.tokens_restored = 0  # prompt tokens those resumptions did not evaluate again

    def __len__(self) -> int:
        return len(self._states)

    def save(self, prompt_cells: int) -> None:
        """Copy out the state in place (the last prompt and its reply: ``prompt_cells`` of its leading cells were
        evaluated as a prompt, only those are ever reused); a saved state it extends is dropped."""
        llm = self.llm
        n = int(llm.n_tokens)
        if n == 0 or self.budget <= 0 or prompt_cells <= 0:
            return
        key = tuple(int(t) for t in llm.input_ids[:n])
        if key in self._states:
            self._states.move_to_end(key)
            return
        ctx = llm._ctx.ctx
        import llama_cpp

        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        if size > self.budget:
            return
        buf = (ctypes.c_uint8 * size)()
        if int(llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)) != size:
            return  # not copied whole: keep nothing rather than half a state
        prompt = min(int(prompt_cells), n)
        for old in [k for k in self._states if len(k) <= n and key[: len(k)] == k and self._prompt[k] <= prompt]:
            self._drop(old)
        self._states[key] = buf
        self._prompt[key] = prompt
        self.bytes += size
        while self.bytes > self.budget:
            self._drop(next(iter(self._states)))

    def longest(self, tokens: list[int]) -> tuple[tuple[int, ...] | None, int]:
        """The saved state sharing the longest prefix with ``tokens`` within its prompt's cells, and that length."""
        best, best_n = None, 0
        want = np.asarray(tokens, dtype=np.int64)
        for key in self._states:
            m = min(self._prompt[key], len(want))
            if m <= best_n:
                continue
            diff = np.flatnonzero(np.asarray(key[:m], dtype=np.int64) != want[:m])
            common = int(diff[0]) if len(diff) else m
            if common > best_n:
                best, best_n = key, common
        return best, best_n

    def restore(self, key: tuple[int, ...], keep: int) -> bool:
        """Put the saved state ``key`` in place (the caller cuts it back to ``keep`` tokens). False when llama.cpp
        refused it: the cache is then empty and the prompt is evaluated from its start."""
        import llama_cpp

        llm, buf = self.llm, self._states[key]
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm._ctx.ctx), False)
        llm.reset()
        if not llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(buf), 0):
            self._drop(key)
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm._ctx.ctx), False)
            return False
        llm.input_ids[: len(key)] = key
        llm.n_tokens = len(key)
        self._states.move_to_end(key)
        self.restores += 1
        self.tokens_restored += keep
        return True

    def clear(self) -> None:
        self._states.clear()
        self._prompt.clear()
        self.bytes = 0

    def _drop(self, key: tuple[int, ...]) -> None:
        self.bytes -= len(self._states.pop(key))
        del self._prompt[key]


def kv_states(llm: Any) -> KVStates | None:
    """The engine's saved states, or None when it keeps only the state in place."""
    return getattr(llm, ATTR, None)
