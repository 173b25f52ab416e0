"""One entry of ``recorded.sources`` in params.yaml → the importer for its format."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubriclab.errors import ConfigError
from rubriclab.paths import display_path
from rubriclab.recorded._records import RecordedSet
from rubriclab.recorded._registry import SourceContext, check_keys, get_format
from rubriclab.recorded._shipped import resolve_path
from rubriclab.recorded.formats.mlflow import tracking_location
from rubriclab.settings import Data, Llm, Params, RecordedSource, as_section

__all__ = ["read_source", "tracking_location"]


def _entry(source: RecordedSource | Mapping[str, Any], name: str) -> RecordedSource:
    """``source`` as the typed ``recorded.sources.<name>``: a mapping validated as params.yaml's would be."""
    if isinstance(source, RecordedSource):
        return source
    return Params.of({"recorded": {"sources": {name: source}}}).recorded.sources[name]


def read_source(source: RecordedSource | Mapping[str, Any], project: Path, name: str, *,
                llm: Llm | Mapping[str, Any] | None = None, data_seed: int = Data().seed) -> RecordedSet:
    """Read ``recorded.sources.<name>`` (typed, or a mapping validated as params.yaml's): ``{path, format, …}``
    with the format's registered importer (``rubriclab.recorded.registered_formats()``; relative paths from the project
    folder; ``shipped:<set>`` a set shipped with the package, e.g. ``shipped:llmbar_natural``). ``llm`` (the
    ``llm`` section: the judge role, the store, the templates) and ``data_seed`` (``data.seed``, the default
    presentation seed) are read by ``format: store`` only."""
    s = _entry(source, name)
    where = f"params.yaml: recorded.sources.{name}"
    fmt = get_format(s.format, f"{where}.format")
    check_keys(fmt, s.model_dump(exclude_unset=True), where)
    path = resolve_path(s.path, project) if not (s.format == "store" and s.path == "llm.store") else Path(s.path)
    ctx = SourceContext(path=path, raw_path=s.path, project=project, name=name,
                        llm=as_section("llm", llm) if s.format == "store" else llm, data_seed=data_seed)
    rs = fmt.read(s, ctx)
    if s.judges or s.conditions:
        keep_j, keep_c = set(s.judges or []), set(s.conditions or [])
        rs.judgments = [j for j in rs.judgments if (not keep_j or j.judge in keep_j)
                        and (not keep_c or j.condition in keep_c)]
    if s.format != "store":  # the card names the source as params.yaml does, never this machine's folder
        rs.path = s.path if s.path.startswith("shipped:") or "://" in s.path else display_path(path, project)
    if s.title:
        rs.provenance = f"{s.title} — {rs.provenance}"
    if s.license:
        rs.license = s.license
    if not rs.judgments:
        raise ConfigError(f"{where}: no judgment left after the judges/conditions filter")
    return rs
