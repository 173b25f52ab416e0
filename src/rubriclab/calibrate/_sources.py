"""A source named on the command line → a ``RecordedSet``: a source of params.yaml's ``recorded.sources``, a
shipped set (``shipped:llmbar_natural``), or a path with its format — whatever ``rubriclab.recorded`` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubriclab.errors import ConfigError


def load_recorded(source: str, project: Path, params: Any = None, fmt: str | None = None):
    """Read ``source`` with ``rubriclab.recorded.read_source``; ``params``: a Params or a params mapping."""
    from rubriclab._params_schema import Params
    from rubriclab.recorded import SHIPPED_FORMATS, read_source

    p = Params.of(params)
    sources, store = p.recorded.sources, {"llm": p.llm, "data_seed": p.data.seed}  # what format store reads
    if source in sources and fmt is None:
        return read_source(sources[source], project, source, **store)
    if source.startswith("shipped:"):
        name = source.removeprefix("shipped:")
        fmt = fmt or SHIPPED_FORMATS.get(name)
        return read_source({"path": source, "format": fmt or "?"}, project, name, **store)
    if fmt is None:
        raise ConfigError(f"calibrate: source {source!r} is neither under recorded.sources ("
                          f"{', '.join(sorted(sources)) or 'none'}) nor shipped:<set>; expected one of those, or a "
                          "path with --format")
    return read_source({"path": str(Path(source).resolve()), "format": fmt}, project, Path(source).stem, **store)
