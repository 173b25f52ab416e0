"""Model roles from params.yaml: ``llm.roles.<role>`` → one RoleSpec, or a panel of them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from rubriclab.errors import ConfigError

# evaluator: an independent LLM evaluator — the drift stealth check (refined vs seed rubric quality).
# align: policy (a Hugging Face model trained by DPO, loaded by transformers in rubriclab.align, never through
# litellm: local/smollm2-135m, hf/<org>/<name> or a checkpoint folder), reward (hf/<id>: a sequence-classification
# reward model; any other model: a pointwise 1-10 judge through the gateway), pairwise_judge (the third party).
ROLES = (
    "judge", "extractor", "consolidator", "paraphraser", "attacker", "verifier", "refiner", "generator", "embedder",
    "evaluator", "policy", "reward", "pairwise_judge",
)
# roles whose model transformers loads in-process (not a litellm chat model)
HF_ROLES = ("policy",)
_FIELDS = {
    "model", "temperature", "max_tokens", "top_p", "timeout", "concurrency", "rpm", "tpm", "max_retries",
    "parse_retries", "api_base", "api_key_env", "seed", "structured", "extra",
}


@dataclass(frozen=True)
class RoleSpec:
    """How one role calls one model. Frozen: it is part of what a stage's results depend on."""

    name: str
    model: str
    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float | None = None
    timeout: float = 120.0
    concurrency: int = 8
    rpm: float | None = None
    tpm: float | None = None
    max_retries: int = 6
    parse_retries: int = 2
    api_base: str | None = None
    api_key_env: str | None = None  # name of the env var holding the key; the value is never stored
    seed: int = 0
    structured: bool | None = None  # answer fixed-format prompts as schema-constrained JSON; None: local models
    extra: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> RoleSpec:
        """A copy with some fields changed (e.g. ``temperature=0.7`` for re-runs)."""
        return replace(self, **changes)

    @property
    def use_schema(self) -> bool:
        """Whether fixed-format answers (verdicts, scores) are requested as schema-constrained JSON.
        Default: only for the embedded models, whose llama.cpp decoder enforces the schema."""
        return self.structured if self.structured is not None else self.model.startswith("local/")

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    def decoding_params(self) -> dict[str, Any]:
        """Params that change what the model says (they enter the cache key)."""
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.top_p is not None:
            params["top_p"] = self.top_p
        params.update(self.extra)
        return params

    def transport_params(self) -> dict[str, Any]:
        """Params that only say how to reach the model (never keyed, never stored)."""
        params: dict[str, Any] = {}
        if self.api_base:
            params["api_base"] = self.api_base
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key:
                params["api_key"] = key
        return params


def role_from_dict(name: str, spec: dict[str, Any] | str, defaults: dict[str, Any] | None = None) -> RoleSpec | list[RoleSpec]:
    """Build a role; ``model`` may be a list (a panel) → one RoleSpec per member."""
    if isinstance(spec, str):
        spec = {"model": spec}
    merged = {**(defaults or {}), **spec}
    unknown = set(merged) - _FIELDS
    if unknown:
        raise ConfigError(
            f"params.yaml: llm.roles.{name}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_FIELDS)}"
        )
    model = merged.get("model")
    if not model:
        raise ConfigError(f"params.yaml: llm.roles.{name}.model is missing; expected a litellm model string")
    if isinstance(model, list):
        if not model:
            raise ConfigError(f"params.yaml: llm.roles.{name}.model is an empty list; expected ≥1 model string")
        return [RoleSpec(**{**merged, "name": f"{name}[{i}]", "model": m}) for i, m in enumerate(model)]
    return RoleSpec(**{**merged, "name": name})


def roles_from_params(params: dict[str, Any]) -> dict[str, RoleSpec | list[RoleSpec]]:
    """All roles under ``llm.roles`` (with ``llm.defaults`` applied)."""
    llm = params.get("llm") or {}
    roles = llm.get("roles") or {}
    defaults = llm.get("defaults") or {}
    out = {}
    for name, spec in roles.items():
        if name not in ROLES:
            raise ConfigError(f"params.yaml: llm.roles.{name}: unknown role; allowed: {', '.join(ROLES)}")
        out[name] = role_from_dict(name, spec, defaults)
    return out


def panel(role: RoleSpec | list[RoleSpec]) -> list[RoleSpec]:
    """A role as a list of panel members (a single model is a panel of one)."""
    return list(role) if isinstance(role, list) else [role]
