"""One entry of ``recorded.sources`` in params.yaml → the importer for its format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubriclab._params_schema import Params
from rubriclab.errors import ConfigError
from rubriclab.paths import display_path
from rubriclab.recorded._llmbar import read_llmbar
from rubriclab.recorded._mlflow import read_mlflow
from rubriclab.recorded._pandalm import read_pandalm
from rubriclab.recorded._records import FORMATS, RecordedSet
from rubriclab.recorded._shipped import resolve_path
from rubriclab.recorded._table import read_table

KEYS = ("path", "format", "experiment", "assessments", "judges", "conditions", "baseline", "contrasts",
        "contrast_judges", "title", "license",
        # format store: what the stage judged with (each enters the stored calls' keys)
        "pairs", "rubrics", "seed", "samples", "both_orders", "judge_model", "temperature")
STORE_KEYS = ("pairs", "rubrics", "seed", "samples", "both_orders", "judge_model", "temperature")


def tracking_location(path: str, project: Path) -> str:
    """A tracking URI as given (``sqlite:///…``, ``http://…``), or a local ``.db`` file as ``sqlite:///<abs path>``."""
    if "://" in path:
        return path
    p = Path(path)
    return f"sqlite:///{(p if p.is_absolute() else project / p).resolve().as_posix()}"


def _store_source(spec: dict[str, Any], project: Path, name: str, params: dict[str, Any]) -> RecordedSet:
    """``format: store``: the judge's pairwise verdicts on ``pairs`` under ``rubrics`` read back from the call
    store at ``path`` (``llm.store`` for the project's own), with the judge role of ``llm.roles.judge``."""
    from rubriclab.data import read_pairs
    from rubriclab.judging import load_pairwise_rubric
    from rubriclab.llm import panel, roles_from_params, store_location
    from rubriclab.recorded._callstore import read_store

    where = f"params.yaml: recorded.sources.{name}"
    if not spec.get("pairs") or not isinstance(spec.get("rubrics"), dict) or not spec["rubrics"]:
        raise ConfigError(f"{where}: format store needs 'pairs' (the pairs file the stage judged) and 'rubrics' "
                          "(condition name: rubric file, a RIPD line as file.jsonl#prompt_id)")
    p = Params.of(params)
    roles = roles_from_params(p.llm)
    if "judge" not in roles:
        raise ConfigError(f"{where}: format store needs llm.roles.judge (the role the stage judged with)")
    judge = panel(roles["judge"])[0]
    if spec.get("judge_model"):
        judge = judge.with_(model=str(spec["judge_model"]), name="judge")
    if spec.get("temperature") is not None:
        judge = judge.with_(temperature=float(spec["temperature"]))
    loc = str(spec["path"])
    loc = store_location(p.llm, project) if loc == "llm.store" else (
        loc if "://" in loc else str(resolve_path(loc, project)))
    rubrics = {}
    for cond, ref in spec["rubrics"].items():
        file, _, prompt_id = str(ref).partition("#")
        rubrics[str(cond)] = load_pairwise_rubric(resolve_path(file, project), prompt_id or None)
    seed = spec.get("seed")
    seed = p.data.seed if seed is None else int(seed)
    display = display_path(loc, project)
    return read_store(loc, read_pairs(resolve_path(str(spec["pairs"]), project)), rubrics, judge, seed=seed,
                      samples=int(spec.get("samples") or 1), both_orders=bool(spec.get("both_orders")),
                      templates_dir=p.llm.templates_dir, name=name, where=display)


def read_source(spec: dict[str, Any], project: Path, name: str, params: dict[str, Any] | None = None) -> RecordedSet:
    """Read ``recorded.sources.<name>``: ``{path, format, …}`` (relative paths from the project folder;
    ``shipped:<set>`` a set shipped with the package, e.g. ``shipped:llmbar_natural``). ``params`` (the whole
    params.yaml) is needed by ``format: store`` only (the judge role, the store, the data seed)."""
    from rubriclab._params_schema import given

    params = given(params)
    if not isinstance(spec, dict) or "path" not in spec or "format" not in spec:
        raise ConfigError(f"params.yaml: recorded.sources.{name}: expected a mapping with path and format "
                          f"({', '.join(FORMATS)})")
    unknown = sorted(set(spec) - set(KEYS))
    if unknown:
        raise ConfigError(f"params.yaml: recorded.sources.{name}: unknown key(s) {', '.join(unknown)}; expected some "
                          f"of {', '.join(KEYS)}")
    fmt, raw = spec["format"], str(spec["path"])
    path = resolve_path(raw, project)
    judges, conditions = spec.get("judges"), spec.get("conditions")
    if fmt == "llmbar":
        rs = read_llmbar(path, name=name, judges=judges, conditions=conditions)
    elif fmt == "pandalm":
        rs = read_pandalm(path, name=name, judges=judges)
    elif fmt == "table":
        rs = read_table(path, name=name)
    elif fmt == "mlflow":
        if not spec.get("experiment"):
            raise ConfigError(f"params.yaml: recorded.sources.{name}: format mlflow needs 'experiment' (a name or id)")
        rs = read_mlflow(tracking_location(raw, project), str(spec["experiment"]), name=name,
                         assessments=spec.get("assessments"))
    elif fmt == "store":
        rs = _store_source(spec, project, name, params or {})
    else:
        raise ConfigError(f"params.yaml: recorded.sources.{name}.format: got {fmt!r}; expected one of "
                          f"{', '.join(FORMATS)}")
    stray = sorted(k for k in STORE_KEYS if k in spec) if fmt != "store" else []
    if stray:
        raise ConfigError(f"params.yaml: recorded.sources.{name}: {', '.join(stray)} apply to format store only")
    if fmt in ("table", "mlflow") and (judges or conditions):
        keep_j, keep_c = set(judges or []), set(conditions or [])
        rs.judgments = [j for j in rs.judgments if (not keep_j or j.judge in keep_j)
                        and (not keep_c or j.condition in keep_c)]
    if fmt != "store":  # the card names the source as params.yaml does, never this machine's folder
        rs.path = raw if raw.startswith("shipped:") or "://" in raw else display_path(path, project)
    if spec.get("title"):
        rs.provenance = f"{spec['title']} — {rs.provenance}"
    if spec.get("license"):
        rs.license = str(spec["license"])
    if not rs.judgments:
        raise ConfigError(f"params.yaml: recorded.sources.{name}: no judgment left after the judges/conditions filter")
    return rs
