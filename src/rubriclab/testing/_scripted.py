"""Scripted litellm providers: replies chosen by a function of the prompt. For tests and users' own
checks of a stage's logic without a real model."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import litellm

from rubriclab.llm import chat_response, fill_embedding_response, register_provider

Script = Callable[[list[dict[str, Any]], dict[str, Any]], "str | dict[str, Any]"]


class ScriptedProvider(litellm.CustomLLM):
    """Serves ``scripted/<name>`` models. A script returns the reply text, or a dict with ``text``
    and optionally ``logprobs`` (OpenAI shape) / ``usage`` / ``finish_reason`` (``"length"`` for a reply
    cut at the token limit, ``"repetition"`` with ``loop`` for one the engine ended in a loop); raising an
    exception fails the call. ``kwargs[name]`` keeps the last call's keyword arguments as litellm passed them
    (what a real provider would have been sent)."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: dict[str, Script] = {}
        self.calls: Counter[str] = Counter()
        self.kwargs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def completion(self, model: str, messages: list, *args: Any, optional_params: dict | None = None,
                   **kwargs: Any) -> litellm.ModelResponse:
        name = model.split("/", 1)[-1]
        if name not in self.scripts:
            raise litellm.NotFoundError(f"no script registered for scripted/{name}; known: {sorted(self.scripts)}",
                                        model=model, llm_provider="scripted")
        with self._lock:
            self.calls[name] += 1
            self.kwargs[name] = {**kwargs, "optional_params": dict(optional_params or {})}
        out = self.scripts[name](messages, dict(optional_params or {}))
        if isinstance(out, str):
            out = {"text": out}
        n_in = sum(len(str(m.get("content", "")).split()) for m in messages)
        n_out = len(out["text"].split())
        usage = out.get("usage") or {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        return chat_response(f"scripted/{name}", out["text"], usage=usage, logprobs=out.get("logprobs"),
                             finish_reason=out.get("finish_reason", "stop"), loop=out.get("loop"))

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> litellm.ModelResponse:
        return self.completion(model, messages, *args, **kwargs)

    def embedding(self, model: str, input: list, model_response: Any, *args: Any, **kwargs: Any) -> Any:
        """Embedding scripts take ``[{"role": "user", "content": text}]`` and return a vector."""
        name = model.split("/", 1)[-1]
        if name not in self.scripts:
            raise litellm.NotFoundError(f"no script registered for scripted/{name}", model=model,
                                        llm_provider="scripted")
        texts = [input] if isinstance(input, str) else list(input)
        with self._lock:
            self.calls[name] += len(texts)
        vectors = [self.scripts[name]([{"role": "user", "content": t}], {}) for t in texts]
        return fill_embedding_response(model_response, f"scripted/{name}", vectors, len(texts))

    async def aembedding(self, model: str, input: list, model_response: Any, *args: Any, **kwargs: Any) -> Any:
        return self.embedding(model, input, model_response, *args, **kwargs)


_provider: ScriptedProvider | None = None


def scripted_provider() -> ScriptedProvider:
    """The process-wide scripted provider (registered with litellm on first use)."""
    global _provider
    if _provider is None:
        _provider = ScriptedProvider()
        register_provider("scripted", _provider)
    return _provider


def scripted_model(name: str, script: Script) -> str:
    """Register ``script`` and return its model string ``scripted/<name>``."""
    scripted_provider().scripts[name] = script
    scripted_provider().calls.pop(name, None)
    return f"scripted/{name}"


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The content of the last user message (what most scripts key their reply on)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            return str(m.get("content", ""))
    return ""
