"""One entry of ``recorded.sources`` in params.yaml → the importer for its format."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rubriclab._params_schema import Data, Llm, Params, RecordedSource, as_section
from rubriclab.errors import ConfigError
from rubriclab.paths import display_path
from rubriclab.recorded._llmbar import read_llmbar
from rubriclab.recorded._mlflow import read_mlflow
from rubriclab.recorded._pandalm import read_pandalm
from rubriclab.recorded._records import RecordedSet
from rubriclab.recorded._shipped import resolve_path
from rubriclab.recorded._table import read_table

# what format store judged with (each enters the stored calls' keys): meaningless for the other formats
STORE_KEYS = ("pairs", "rubrics", "seed", "samples", "both_orders", "judge_model", "temperature")


def tracking_location(path: str, project: Path) -> str:
    """A tracking URI as given (``sqlite:///…``, ``http://…``), or a local ``.db`` file as ``sqlite:///<abs path>``."""
    if "://" in path:
        return path
    p = Path(path)
    return f"sqlite:///{(p if p.is_absolute() else project / p).resolve().as_posix()}"


def _entry(source: RecordedSource | Mapping[str, Any], name: str) -> RecordedSource:
    """``source`` as the typed ``recorded.sources.<name>``: a mapping validated as params.yaml's would be."""
    if isinstance(source, RecordedSource):
        return source
    return Params.of({"recorded": {"sources": {name: source}}}).recorded.sources[name]


def _check(s: RecordedSource, where: str) -> None:
    """The rules between keys, which the schema (one key at a time) does not hold."""
    stray = sorted(k for k in STORE_KEYS if getattr(s, k) is not None) if s.format != "store" else []
    if stray:
        raise ConfigError(f"{where}: {', '.join(stray)} apply to format store only")
    if s.format == "mlflow" and not s.experiment:
        raise ConfigError(f"{where}: format mlflow needs 'experiment' (a name or id)")
    if s.format == "store" and not (s.pairs and s.rubrics):
        raise ConfigError(f"{where}: format store needs 'pairs' (the pairs file the stage judged) and 'rubrics' "
                          "(condition name: rubric file, a RIPD line as file.jsonl#prompt_id)")


def _store_source(s: RecordedSource, project: Path, name: str, llm: Llm, data_seed: int) -> RecordedSet:
    """``format: store``: the judge's pairwise verdicts on ``pairs`` under ``rubrics`` read back from the call
    store at ``path`` (``llm.store`` for the project's own), with the judge role of ``llm.roles.judge``."""
    from rubriclab.data import read_pairs
    from rubriclab.judging import load_pairwise_rubric
    from rubriclab.llm import panel, roles_from_params, store_location
    from rubriclab.recorded._callstore import read_store

    roles = roles_from_params(llm)
    if "judge" not in roles:
        raise ConfigError(f"params.yaml: recorded.sources.{name}: format store needs llm.roles.judge (the role the "
                          "stage judged with)")
    judge = panel(roles["judge"])[0]
    if s.judge_model:
        judge = judge.with_(model=s.judge_model, name="judge")
    if s.temperature is not None:
        judge = judge.with_(temperature=float(s.temperature))
    loc = store_location(llm, project) if s.path == "llm.store" else (
        s.path if "://" in s.path else str(resolve_path(s.path, project)))
    rubrics = {}
    for cond, ref in s.rubrics.items():
        file, _, prompt_id = ref.partition("#")
        rubrics[cond] = load_pairwise_rubric(resolve_path(file, project), prompt_id or None)
    kept = {k: v for k in ("samples", "both_orders") if (v := getattr(s, k)) is not None}  # else read_store's
    return read_store(loc, read_pairs(resolve_path(s.pairs, project)), rubrics, judge,
                      seed=data_seed if s.seed is None else s.seed, templates_dir=llm.templates_dir, name=name,
                      where=display_path(loc, project), **kept)


def read_source(source: RecordedSource | Mapping[str, Any], project: Path, name: str, *,
                llm: Llm | Mapping[str, Any] | None = None, data_seed: int = Data().seed) -> RecordedSet:
    """Read ``recorded.sources.<name>`` (typed, or a mapping validated as params.yaml's): ``{path, format, …}``
    (relative paths from the project folder; ``shipped:<set>`` a set shipped with the package, e.g.
    ``shipped:llmbar_natural``). ``llm`` (the ``llm`` section: the judge role, the store, the templates) and
    ``data_seed`` (``data.seed``, the default presentation seed) are read by ``format: store`` only."""
    s = _entry(source, name)
    _check(s, f"params.yaml: recorded.sources.{name}")
    path = resolve_path(s.path, project)
    if s.format == "llmbar":
        rs = read_llmbar(path, name=name, judges=s.judges, conditions=s.conditions)
    elif s.format == "pandalm":
        rs = read_pandalm(path, name=name, judges=s.judges)
    elif s.format == "table":
        rs = read_table(path, name=name)
    elif s.format == "mlflow":
        rs = read_mlflow(tracking_location(s.path, project), s.experiment, name=name, assessments=s.assessments)
    else:  # store (the schema allows no other format)
        rs = _store_source(s, project, name, as_section("llm", llm), data_seed)
    if s.format in ("table", "mlflow") and (s.judges or s.conditions):
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
        raise ConfigError(f"params.yaml: recorded.sources.{name}: no judgment left after the judges/conditions filter")
    return rs
