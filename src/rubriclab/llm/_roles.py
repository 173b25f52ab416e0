"""Model roles from params.yaml: ``llm.roles.<role>`` → one RoleSpec, or a panel of them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from rubriclab.errors import ConfigError
from rubriclab.secrets import (
    ENV_REF,
    is_env_ref,
    keyed_private,
    register_secret,
    register_url_credentials,
    resolve_env,
    sealed_digest,
    secret_strings,
    split_extra,
    unstored_names,
)
from rubriclab.settings import Llm, Params, RoleDefaults, RoleFields, Roles, section_of

# evaluator: an independent LLM evaluator — the drift stealth check (refined vs seed rubric quality).
# align: policy (a Hugging Face model trained by DPO, loaded by transformers in rubriclab.align, never through
# litellm: local/smollm2-135m, hf/<org>/<name> or a checkpoint folder), reward (hf/<id>: a sequence-classification
# reward model; any other model: a pointwise 1-10 judge through the gateway), pairwise_judge (the third party).
ROLES = tuple(Roles.model_fields)  # rubriclab.settings.Roles: the one list
# roles whose model transformers loads in-process (not a litellm chat model)
HF_ROLES = ("policy",)
_FIELDS = set(RoleFields.model_fields)
_D = RoleDefaults()  # llm.defaults' defaults (rubriclab.settings.RoleDefaults, docs there)


@dataclass(frozen=True)
class RoleSpec:
    """How one role calls one model. Frozen: it is part of what a stage's results depend on."""

    name: str
    model: str
    temperature: float = _D.temperature
    max_tokens: int = _D.max_tokens
    top_p: float | None = _D.top_p
    timeout: float = _D.timeout
    concurrency: int = _D.concurrency
    rpm: float | None = _D.rpm
    tpm: float | None = _D.tpm
    max_retries: int = _D.max_retries
    parse_retries: int = _D.parse_retries
    api_base: str | None = _D.api_base
    api_key_env: str | None = _D.api_key_env  # name of the env var holding the key; the value is never stored
    seed: int = _D.seed
    structured: bool | None = _D.structured  # schema-constrained JSON for fixed-format prompts; None: local models
    extra: dict[str, Any] = field(default_factory=dict)
    # a stage fails when more of this role's calls than this share end in an error (rubriclab.llm._failures)
    max_failure_share: float = _D.max_failure_share

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

    @property
    def where(self) -> str:
        """This role's place in params.yaml (``llm.roles.judge``), for messages."""
        return f"llm.roles.{self.name.split('[')[0]}"

    def decoding_params(self) -> dict[str, Any]:
        """Params that change what the model says, in clear: they enter the cache key, the stored request and the
        logs. Only the allow-listed part of ``extra`` (``rubriclab.secrets.PUBLIC_PARAMS``) is among them."""
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.top_p is not None:
            params["top_p"] = self.top_p
        params.update(split_extra(self.extra)[0])
        return params

    def private_params(self) -> dict[str, Any]:
        """Every other ``extra`` field, ``os.environ/NAME`` references resolved now: sent with each call, never
        stored or logged (the key changes with the body fields only through ``sealed_digest``)."""
        private = split_extra(self.extra)[1]
        if not private:
            return {}
        resolved = resolve_env(private, f"{self.where}.extra")
        register_secret(*secret_strings(resolved))  # literal ones too (a RoleSpec made in code)
        return resolved

    def unstored_names(self) -> list[str]:
        """Names of the fields sent but not stored (``extra_body.passphrase``)."""
        return unstored_names(split_extra(self.extra)[1])

    def sealed_digest(self, salt: bytes) -> str | None:
        """A salted hash of the private body fields (None without any): what the cache key holds of them."""
        return sealed_digest(keyed_private(self.private_params()), salt)

    def secret_values(self) -> list[str]:
        """The private values as sent (an error text must not repeat them)."""
        return secret_strings(self.private_params())

    @property
    def endpoint(self) -> str | None:
        """``api_base``, resolved when it is an ``os.environ/NAME`` reference; the user, password and query values
        of the URL are registered as credentials (``rubriclab.secrets.register_url_credentials``)."""
        url = resolve_env(self.api_base, f"{self.where}.api_base", register=False) if is_env_ref(self.api_base) \
            else self.api_base
        register_url_credentials(url)
        return url

    def transport_params(self) -> dict[str, Any]:
        """Params that only say how to reach the model (never keyed, never stored). The key read through
        ``api_key_env`` is registered as a credential the moment it is read, whatever the variable's name. An
        endpoint whose URL has a query is refused (ConfigError): litellm's clients append the route after it
        (``/v1/?key=…chat/completions``), so no call could succeed, and its 404 would quote the query."""
        params: dict[str, Any] = {}
        endpoint = self.endpoint
        if endpoint:
            check_endpoint(endpoint, self.where, self.api_base)
            params["api_base"] = endpoint
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key:
                register_secret(key)
                params["api_key"] = key
        return params


def check_endpoint(url: str, where: str, given: str | None = None) -> None:
    """Refuse an endpoint URL with a query string or a fragment, in one line that shows neither (``given``: how
    params.yaml spelled it, e.g. ``os.environ/VLLM_URL``)."""
    try:
        parts = urlsplit(str(url).strip())
        bad = bool(parts.query or parts.fragment)
    except ValueError:
        bad = True
    if bad:
        source = f" (from {given})" if isinstance(given, str) and given.startswith(ENV_REF) else ""
        raise ConfigError(
            f"{where}.api_base{source}: the endpoint URL has a query string or a fragment (not shown); litellm "
            "appends the route after it (/v1/?…chat/completions), so every call would fail with a 404 quoting it. "
            "Give the endpoint without ?…, and a key as api_key_env: NAME, extra.api_key or an extra_headers "
            f"entry ({ENV_REF}NAME)")


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


def roles_from_params(llm: Llm | Params | Mapping[str, Any]) -> dict[str, RoleSpec | list[RoleSpec]]:
    """All roles under ``llm.roles`` (with ``llm.defaults`` applied). ``llm``: the typed ``llm`` section (a Params
    or a params mapping is read through the schema)."""
    llm = section_of(llm, "llm")
    roles = llm.roles.model_dump(exclude_unset=True)
    defaults = llm.defaults.model_dump(exclude_unset=True)
    return {name: role_from_dict(name, spec, defaults) for name, spec in roles.items()}  # names: checked by Roles


def panel(role: RoleSpec | list[RoleSpec]) -> list[RoleSpec]:
    """A role as a list of panel members (a single model is a panel of one)."""
    return list(role) if isinstance(role, list) else [role]
