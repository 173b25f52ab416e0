"""params.yaml: loading, dotted overrides, and typed access with errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rubriclab.errors import ConfigError, InputError

if TYPE_CHECKING:
    from rubriclab.settings import Params


def find_project_dir(start: Path | None = None) -> Path:
    """The nearest folder (upwards from ``start``/cwd) holding params.yaml; cwd when none does."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "params.yaml").exists():
            return folder
    return here


def load_params(path: str | Path | None = None, overrides: list[str] | None = None) -> Params:
    """Read params.yaml, apply ``a.b.c=value`` overrides (values parsed as YAML) and return the typed settings.

    Validation (``rubriclab.settings.Params``) checks types, ranges, allowed values and unknown keys and
    fills in every default; a problem is a one-line ConfigError naming the file, the key and the ``--set`` it came
    from. A literal credential is refused too (``refuse_literal_credentials``). ``.given()`` is what the file
    said."""
    path = Path(path) if path else find_project_dir() / "params.yaml"
    if not path.exists():
        raise ConfigError(f"{path}: no params.yaml; run from the project folder or pass --params")
    try:
        params = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML ({getattr(exc, 'problem', exc)})", file=str(path),
                         line=mark.line + 1 if mark else None, expected="a YAML mapping") from None
    if not isinstance(params, dict):
        raise InputError("top level is not a mapping", file=str(path), expected="a YAML mapping of sections")
    for item in overrides or []:
        set_dotted(params, item)
    from rubriclab.paths import display_path
    from rubriclab.settings import validate_params

    typed = validate_params(params, display_path(path), list(overrides or []))
    refuse_literal_credentials(params, display_path(path))
    return typed


def refuse_literal_credentials(params: dict[str, Any], source: str = "params.yaml") -> None:
    """Raise a one-line ConfigError at a literal credential in params: dvc.lock copies the ``llm`` params (and
    every section a stage lists) into git. A role's ``extra`` holds literally only the documented decoding
    parameters; every other field is an ``os.environ/NAME`` reference, resolved at call time
    (``rubriclab.secrets.literal_credential`` says exactly what is refused)."""
    from rubriclab.secrets import literal_credential

    problem = literal_credential(params)
    if problem is not None:
        raise ConfigError(f"{source}: {problem}")


def set_dotted(params: dict[str, Any], assignment: str) -> None:
    """Apply one ``a.b.c=value`` override in place."""
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r}: expected KEY.PATH=VALUE")
    key, raw = assignment.split("=", 1)
    node = params
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {assignment!r}: {part} is not a section")
    node[parts[-1]] = yaml.safe_load(raw)
