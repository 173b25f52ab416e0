"""Registry of in-process litellm providers (`local/...`, `scripted/...`).

litellm keeps one global ``custom_provider_map``; this is the only place that edits it.
"""

from __future__ import annotations

import threading

import litellm

from rubriclab.llm._loops import REPETITION

_lock = threading.Lock()
_handlers: dict[str, object] = {}


def register_provider(name: str, handler: litellm.CustomLLM) -> None:
    """Route model strings ``<name>/<anything>`` to ``handler`` (a ``litellm.CustomLLM``)."""
    with _lock:
        _handlers[name] = handler
        litellm.custom_provider_map = [
            {"provider": p, "custom_handler": h} for p, h in _handlers.items()
        ]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()


def registered_providers() -> dict[str, object]:
    """Providers registered so far, by name."""
    return dict(_handlers)


def in_process(model: str) -> bool:
    """Whether ``model`` is served by a provider registered here (no network, no provider bill)."""
    return "/" in model and model.split("/", 1)[0] in _handlers


def chat_response(model: str, text: str, *, usage: dict | None = None, logprobs: dict | None = None,
                  finish_reason: str = "stop", loop: dict | None = None) -> litellm.ModelResponse:
    """An OpenAI-shaped chat completion for in-process providers. ``finish_reason="repetition"`` (a reply the
    engine ended in a verbatim loop, ``loop``: its period and repeats) is not one litellm knows, and it would
    turn it into "stop": it travels in the choice's ``provider_specific_fields``, where the gateway reads it."""
    import time
    import uuid

    choice: dict = {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": text}}
    if finish_reason == REPETITION:
        choice["finish_reason"] = "stop"
        choice["provider_specific_fields"] = {"stopped_by": REPETITION, "loop": loop}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    usage = usage or {}
    return litellm.ModelResponse(
        id=f"{model.split('/')[0]}-{uuid.uuid4().hex[:12]}", created=int(time.time()), model=model,
        object="chat.completion", choices=[choice],
        usage={"prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
               "total_tokens": usage.get("total_tokens", 0)})


def fill_embedding_response(model_response, model: str, vectors: list[list[float]], prompt_tokens: int):
    """Fill litellm's EmbeddingResponse in place (OpenAI shape) and return it."""
    model_response.model = model
    model_response.object = "list"
    model_response.data = [{"object": "embedding", "index": i, "embedding": list(map(float, v))}
                           for i, v in enumerate(vectors)]
    model_response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=0, total_tokens=prompt_tokens)
    return model_response
