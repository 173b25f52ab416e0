"""Batch order for in-process models: calls that share a prompt prefix run one after another.

llama.cpp keeps the KV state of the last prompt and re-evaluates only the tokens after the longest common
prefix (llama-cpp-python's ``generate``; ``_first_token_distribution`` here does the same). Prompt processing
dominates the embedded judge's cost, and a batch's prompts share long prefixes (instructions and rubric first;
panel seats, flip-rate runs and majority samples repeat whole prompts), so sorting the batch by prompt text
lets each prefix be paid for once. Replies do not depend on the order: every call sets its own seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# providers whose calls share one model state in this process (remote servers keep their own caches)
KV_SHARING_PREFIXES = ("local/",)


def shares_kv_state(model: str) -> bool:
    return model.startswith(KV_SHARING_PREFIXES)


def prompt_text(messages: list[dict[str, Any]]) -> str:
    """The messages as one string in chat order: what the model's prompt tokens are made from."""
    return "\x00".join(f"{m.get('role')}\x01{m.get('content')}" for m in messages)


def prefix_order(requests: Sequence[Any], indices: Sequence[int]) -> list[int]:
    """``indices`` with the calls to KV-sharing models sorted by (model, prompt text), so prompts with a common
    prefix are adjacent; other calls keep their order and go first (they run concurrently anyway)."""
    shared = [i for i in indices if shares_kv_state(requests[i].role.model)]
    if len(shared) < 2:
        return list(indices)
    keep = set(shared)
    shared.sort(key=lambda i: (requests[i].role.model, prompt_text(requests[i].messages)))
    return [i for i in indices if i not in keep] + shared
