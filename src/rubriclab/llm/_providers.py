"""Registry of in-process litellm providers (`local/...`, `scripted/...`).

litellm keeps one global ``custom_provider_map``; this is the only place that edits it.
"""

from __future__ import annotations

import threading

import litellm

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
