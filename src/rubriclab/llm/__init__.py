"""The only door to models: litellm calls through one gateway with a call store, limits, retries,
parsers, prompt templates, the embedded local provider and judge panels."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubriclab.llm._answers import KINDS, answer_format, parse_exploit, parse_verdict_line, register_answer_kind
from rubriclab.llm._notes import EMBEDDED_NOTE, card_head, embedded_note
from rubriclab.llm._parsers import (
    extract_json,
    json_parser,
    json_schema_of,
    parse_pass_fail,
    parse_verdict,
    parse_yes_no,
    score_parser,
)
from rubriclab.llm._roles import HF_ROLES, ROLES, RoleSpec, panel, role_from_dict, roles_from_params
from rubriclab.llm._schema_bounds import bounded_integer
from rubriclab.llm._scoring import yes_no_gap
from rubriclab.llm._store import CallRecord, CallStore, SQLiteCallStore, call_key, open_store, store_salt
from rubriclab.llm._templates import (
    PROMPTS,
    TRUSTED_IN,
    TRUSTED_PLACEHOLDERS,
    Delimiters,
    PromptTemplate,
    UndelimitedPlaceholderWarning,
    delimiters_of,
    escape_for,
    escape_value,
    load_prompt,
    parse_prompt,
    register_prompt,
    slot_delimiters,
    trusted_placeholders,
    undelimited_placeholders,
    warn_undelimited,
)
from rubriclab.llm._weights import CHAT_MODELS, locate_model_file
from rubriclab.settings import Llm, Params, section_of

# Names from the modules that import litellm (3-6 s of a process's start here: litellm and the openai SDK's types), loaded
# on first use, so what reads the call store, templates or parsers (the report and recorded-verdicts stages,
# `rubriclab calls`) starts without it. `from rubriclab.llm import Gateway` works as before.
_LAZY = {
    "BudgetExceededError": "_budget", "SpendBudget": "_budget",
    "distinct_draws": "_draws", "draw_identity": "_draws",
    "embed_texts": "_embed",
    # not imported with the package: `python -m rubriclab.llm._engine` (the install's smoke check) runs it as __main__
    "PORTABLE_ISA": "_engine", "EngineBuild": "_engine", "engine_build": "_engine", "smoke_check": "_engine",
    "DEFAULT_MAX_FAILURE_SHARE": "_failures", "CallTally": "_failures", "RoleTally": "_failures",
    "TalliedGateway": "_failures", "check_calls": "_failures",
    "CallRequest": "_gateway", "CallResult": "_gateway", "Gateway": "_gateway",
    "LocalProvider": "_local", "local_provider": "_local",
    "chat_response": "_providers", "fill_embedding_response": "_providers", "register_provider": "_providers",
    "registered_providers": "_providers",
}

if TYPE_CHECKING:
    from rubriclab.llm._budget import BudgetExceededError, SpendBudget
    from rubriclab.llm._draws import distinct_draws, draw_identity
    from rubriclab.llm._embed import embed_texts
    from rubriclab.llm._engine import PORTABLE_ISA, EngineBuild, engine_build, smoke_check
    from rubriclab.llm._failures import DEFAULT_MAX_FAILURE_SHARE, CallTally, RoleTally, TalliedGateway, check_calls
    from rubriclab.llm._gateway import CallRequest, CallResult, Gateway
    from rubriclab.llm._local import LocalProvider, local_provider
    from rubriclab.llm._providers import chat_response, fill_embedding_response, register_provider, registered_providers


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


DEFAULT_STORE = Llm().store  # rubriclab.settings.Llm: its one definition


def store_location(llm: Llm | Params | Mapping[str, Any], project_dir: Path) -> str:
    """Where the call store lives: ``llm.store`` (path or URL), relative paths under the project. ``llm``: the
    typed ``llm`` section (a Params or a params mapping is read through the schema)."""
    loc = str(section_of(llm, "llm").store or DEFAULT_STORE)
    if "://" in loc or Path(loc).is_absolute():
        return loc
    return str(project_dir / loc)


def prepare_roles(roles: dict[str, RoleSpec | list[RoleSpec]]) -> None:
    """Register in-process providers that the configured roles need (``local/...``)."""
    if any(m.model.startswith("local/") for r in roles.values() for m in panel(r)):
        from rubriclab.llm._local import local_provider

        local_provider()



def gateway_from_params(llm: Llm | Params | Mapping[str, Any], stage: str, project_dir: Path,
                        progress: bool = True) -> TalliedGateway:
    """A gateway on the project's call store, with providers for the configured roles registered. It tallies its
    results per role, so the stage ends with ``check_calls(gateway)`` (failed calls → non-zero exit). ``llm``: the
    typed ``llm`` section (a Params or a params mapping is read through the schema)."""
    from rubriclab.llm._budget import SpendBudget
    from rubriclab.llm._failures import TalliedGateway

    llm = section_of(llm, "llm")
    prepare_roles(roles_from_params(llm))
    budget = llm.budget.model_dump() if llm.budget is not None else None
    return TalliedGateway(open_store(store_location(llm, project_dir)), stage=stage, progress=progress,
                          prefix_schedule=llm.prefix_order, budget=SpendBudget.of(budget),
                          provider_processes=llm.provider_processes)


__all__ = [
    "EMBEDDED_NOTE", "card_head", "embedded_note",
    "KINDS", "answer_format", "parse_exploit", "parse_verdict_line", "register_answer_kind",
    "BudgetExceededError", "SpendBudget",
    "CallTally", "DEFAULT_MAX_FAILURE_SHARE", "RoleTally", "TalliedGateway", "check_calls",
    "distinct_draws", "draw_identity",
    "CallRecord", "CallRequest", "CallResult", "CallStore", "DEFAULT_STORE", "Gateway", "LocalProvider", "PROMPTS",
    "PromptTemplate", "ROLES", "RoleSpec", "SQLiteCallStore", "call_key", "embed_texts", "extract_json",
    "gateway_from_params", "json_parser", "json_schema_of", "load_prompt", "local_provider", "locate_model_file",
    "open_store", "panel", "parse_pass_fail", "parse_prompt", "parse_verdict", "parse_yes_no", "prepare_roles",
    "register_prompt", "register_provider", "registered_providers", "role_from_dict", "roles_from_params",
    "score_parser", "store_location", "yes_no_gap",
    "CHAT_MODELS", "HF_ROLES", "PORTABLE_ISA", "EngineBuild", "bounded_integer", "chat_response", "engine_build",
    "fill_embedding_response", "smoke_check", "store_salt",
    "Delimiters", "TRUSTED_IN", "TRUSTED_PLACEHOLDERS", "UndelimitedPlaceholderWarning", "delimiters_of", "escape_for",
    "escape_value", "slot_delimiters", "trusted_placeholders", "undelimited_placeholders", "warn_undelimited",
]
