"""The rubric sources an audit reads: ``audit.sources`` entries by name (``outputs/rubrics/<dataset>/<name>.json``)
or by path (any stage's rubric file), and explicit files."""

from __future__ import annotations

from pathlib import Path

from rubriclab.errors import ConfigError
from rubriclab.rubrics import RubricSet, load_rubric_file


def source_path(project: Path, dataset: str, entry: str) -> Path | None:
    """The rubric file an ``audit.sources`` entry names when it is a path (``outputs/repair/{dataset}/x.json``:
    any stage's rubric file, ``{dataset}`` filled in, relative to the project); None for a plain source name."""
    if "/" not in entry and not entry.endswith((".json", ".yaml", ".yml", ".md")):
        return None
    path = Path(entry.format(dataset=dataset))
    return path if path.is_absolute() else project / path


def load_sources(project: Path, dataset: str, names: list[str], extra: list[Path] = ()) -> dict[str, RubricSet]:
    """Rubric sources by name from ``outputs/rubrics/<dataset>/<name>.json``, by path (any stage's rubric file,
    named by its file stem, e.g. ``outputs/repair/{dataset}/discovered.robust_constrained.json``) and
    explicit files."""
    out: dict[str, RubricSet] = {}
    folder = project / "outputs/rubrics" / dataset
    for name in names:
        path = source_path(project, dataset, name)
        if path is not None:
            if not path.exists():
                raise ConfigError(f"audit.sources: {name!r} names {path}, which does not exist; run the stage that "
                                  "writes it first (e.g. `dvc repro repair` for outputs/repair/...)")
            out[path.stem] = load_rubric_file(path)
            continue
        path = folder / f"{name}.json"
        if not path.exists():
            have = sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []
            raise ConfigError(f"audit.sources: no rubric source {name!r} for {dataset} ({path}); available: "
                              f"{', '.join(have) or 'none (run `dvc repro discover`)'}; or give a path to any "
                              "stage's rubric file, e.g. outputs/repair/{dataset}/<source>.robust_constrained.json")
        out[name] = load_rubric_file(path)
    for path in extra:
        out[Path(path).stem] = load_rubric_file(path)
    return out
