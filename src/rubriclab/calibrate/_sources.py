"""A source named on the command line → a ``RecordedSet``: a source of params.yaml's ``recorded.sources``, a
shipped set (``shipped:llmbar_natural``), or a path with its format — whatever ``rubriclab.recorded`` reads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubriclab.errors import ConfigError
from rubriclab.settings import Data


def load_recorded(source: str, project: Path, fmt: str | None = None, *, sources: Mapping[str, Any] | None = None,
                  llm: Any = None, data_seed: int = Data().seed):
    """Read ``source`` with ``rubriclab.recorded.read_source``: a name in ``sources`` (params.yaml's typed
    ``recorded.sources``), ``shipped:<set>``, or a path with its ``fmt``. ``llm`` (the typed ``llm`` section) and
    ``data_seed`` are read by a ``format: store`` source only (``llm`` None: the schema's defaults)."""
    from rubriclab.recorded import SHIPPED_FORMATS, read_source

    sources = sources or {}
    store = {"llm": llm, "data_seed": data_seed}  # what format store reads
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
