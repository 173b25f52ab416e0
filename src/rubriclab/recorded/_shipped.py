"""The published sets shipped inside the package (``rubriclab/recorded/published/<name>``, in their publishers'
layouts, with their licences; provenance in ``rubriclab/recorded/published/README.md``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rubriclab.errors import ConfigError

SHIPPED_FORMATS = {"llmbar_natural": "llmbar", "pandalm": "pandalm", "alpaca_eval": "alpaca_eval"}
SCHEME = "shipped:"


def shipped_path(name: str) -> Path:
    """The folder of a shipped set (``llmbar_natural``, ``pandalm``, ``alpaca_eval``) inside the installed package."""
    if name not in SHIPPED_FORMATS:
        raise ConfigError(f"no shipped set {name!r}; shipped: {', '.join(SHIPPED_FORMATS)}")
    folder = resources.files("rubriclab.recorded").joinpath("published", name)
    path = Path(str(folder))
    if not path.is_dir():  # a zipped install: the importers read plain files
        raise ConfigError(f"the shipped set {name!r} is not a folder on disk ({folder}); install rubriclab unzipped")
    return path


def resolve_path(raw: str, project: Path) -> Path:
    """A source path as params.yaml gives it: ``shipped:<name>`` (a set shipped with the package), an absolute
    path, or a path relative to the project folder."""
    if raw.startswith(SCHEME):
        return shipped_path(raw[len(SCHEME):])
    p = Path(raw)
    return p if p.is_absolute() else project / p
