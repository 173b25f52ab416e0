"""A source named on the command line → a ``RecordedSet``: a source of params.yaml's ``recorded.sources``, a
shipped set (``shipped:llmbar_natural``), or a path with its format — whatever ``rubriclab.recorded`` reads."""

from __future__ import annotations

from pathlib import Path

from rubriclab.errors import ConfigError


def load_recorded(source: str, project: Path, params: dict | None = None, fmt: str | None = None):
    """Read ``source`` with ``rubriclab.recorded.read_source``."""
    from rubriclab._params_schema import given
    from rubriclab.recorded import SHIPPED_FORMATS, read_source

    params = given(params) or {}
    sources = (params.get("recorded") or {}).get("sources") or {}
    if source in sources and fmt is None:
        return read_source(sources[source], project, source, params)
    if source.startswith("shipped:"):
        name = source.removeprefix("shipped:")
        fmt = fmt or SHIPPED_FORMATS.get(name)
        return read_source({"path": source, "format": fmt or "?"}, project, name, params)
    if fmt is None:
        raise ConfigError(f"calibrate: source {source!r} is neither under recorded.sources ("
                          f"{', '.join(sorted(sources)) or 'none'}) nor shipped:<set>; expected one of those, or a "
                          "path with --format")
    return read_source({"path": str(Path(source).resolve()), "format": fmt}, project, Path(source).stem, params)
