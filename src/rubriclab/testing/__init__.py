"""Fixtures shared by tests, benchmarks and users: scripted providers and a fake OpenAI server."""

from __future__ import annotations

from rubriclab.testing._fake_server import (
    FAULT_KINDS,
    FakeOpenAIServer,
    FaultPlan,
    default_responder,
    fake_embedding,
    request_key,
)
from rubriclab.testing._scripted import ScriptedProvider, last_user_text, scripted_model, scripted_provider

__all__ = [
    "FAULT_KINDS", "FakeOpenAIServer", "FaultPlan", "ScriptedProvider", "default_responder", "fake_embedding",
    "last_user_text", "request_key", "scripted_model", "scripted_provider",
]
