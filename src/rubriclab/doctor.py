"""``rubriclab doctor``: what each role calls, whether its keys are set (never their values),
and whether the embedded models load and answer."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from rubriclab.llm import HF_ROLES, RoleSpec, panel, roles_from_params, store_location
from rubriclab.secrets import looks_like_secret_value, merge_params, redact_text, redact_urls


def key_status(role: RoleSpec) -> tuple[bool, list[str]]:
    """(keys present, what is missing) for a role's model, by the resolution the gateway's calls use: the role's
    private ``extra`` (``extra.api_key: os.environ/NAME``), its ``api_key_env`` and ``api_base``
    (``RoleSpec.private_params``/``transport_params``), then litellm's own check of the environment for what
    those leave out. Never a value."""
    import litellm

    from rubriclab.errors import ConfigError

    if role.model.startswith(("local/", "scripted/", "hf/")) or role.name in HF_ROLES:
        return True, []  # in-process models (llama.cpp, transformers): no provider key
    if role.api_key_env and (not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", role.api_key_env)
                             or looks_like_secret_value(role.api_key_env)):
        return False, [f"{role.where}.api_key_env (must be the NAME of an environment variable; the value looks "
                       "like a key, not shown)"]
    try:
        sent = merge_params(role.private_params(), role.transport_params())
    except ConfigError as exc:  # an unset os.environ/NAME, an endpoint with a query: the field and the variable
        return False, [str(exc)]
    if role.api_key_env and "api_key" not in sent:
        return False, [role.api_key_env]
    try:
        env = litellm.validate_environment(model=role.model, api_key=sent.get("api_key"),
                                           api_base=sent.get("api_base"))
    except Exception as exc:  # noqa: BLE001 - unknown provider string
        return False, [f"<unknown provider: {type(exc).__name__}>"]
    return bool(env.get("keys_in_environment")), list(env.get("missing_keys") or [])


def try_embedded_models(models: set[str]) -> list[tuple[str, bool, str]]:
    """Load each embedded model and make one tiny call; (model, ok, detail)."""
    import litellm

    from rubriclab.llm import local_provider

    local_provider()
    out = []
    for model in sorted(models):
        t0 = time.perf_counter()
        try:
            if model == "local/minilm":
                resp = litellm.embedding(model=model, input=["doctor"])
                detail = f"embedding dim {len(resp.data[0]['embedding'])}"
            else:
                resp = litellm.completion(model=model, messages=[{"role": "user", "content": "Say OK."}],
                                          max_tokens=4, temperature=0.0, num_retries=0)
                detail = f"replied {resp.choices[0].message.content!r}"
            out.append((model, True, f"{detail} in {time.perf_counter() - t0:.1f}s"))
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            out.append((model, False, f"{type(exc).__name__}: {exc}"))
    return out


def print_engine() -> bool:
    """The llama.cpp build's instruction set and a one-token smoke check in a child process (a fault there is
    reported, not fatal to doctor)."""
    from rubriclab.llm import PORTABLE_ISA, engine_build, smoke_check

    try:
        build = engine_build()
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        print(f"engine: llama.cpp not usable ({type(exc).__name__}: {exc})")
        return False
    print(f"engine: llama.cpp built for {build.describe()} (other: {' '.join(build.other) or 'none'})")
    if build.outside_portable:
        print(f"engine: WARNING: {' '.join(build.outside_portable)} outside the portable set "
              f"({' '.join(sorted(PORTABLE_ISA))}); some machines fault on them")
    result = smoke_check()
    print(result.line)
    return result.ok


def run_doctor(params: dict[str, Any], project_dir: Path, check_embedded: bool = True) -> int:
    """Print the report; 0 when every role can be called, 1 otherwise."""
    from rubriclab.settings import given

    params = given(params)
    roles = roles_from_params(params)
    ok = True
    print(f"project: {project_dir}")
    print(f"call store: {redact_urls(store_location(params, project_dir))}")
    print("roles:")
    local_models: set[str] = set()
    for spec in roles.values():
        for member in panel(spec):
            present, missing = key_status(member)
            ok &= present
            keys = "keys: ok" if present else redact_text(f"keys MISSING: {', '.join(missing)}")
            if member.model.startswith("local/"):
                keys = "embedded (no key needed)"
                local_models.add(member.model)
            print(f"  {member.name:<14} {member.model:<36} {keys}")
    if local_models:
        if check_embedded:
            ok &= print_engine()
            print("embedded models:")
            for model, good, detail in try_embedded_models(local_models):
                ok &= good
                print(f"  {model:<36} {'ok' if good else 'FAILED'}: {detail}")
        print("note: the embedded SmolLM2-135M is at chance as a pairwise judge; its numbers are not findings.")
    print("doctor: all checks passed" if ok else "doctor: some checks FAILED")
    return 0 if ok else 1
