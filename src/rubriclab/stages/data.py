"""DVC stage `data`: load sources, drop bad rows (counted), write seeded disjoint splits."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rubriclab import atomic
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import build_splits
from rubriclab.errors import ConfigError
from rubriclab.settings import Params, given
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

OUT_DIR = Path("outputs/data")
METRICS = Path("metrics/data.json")


def split_counts(report: dict[str, Any]) -> dict[str, Any]:
    """Flat counts for metrics: loaded/kept/dropped per source, written rows per split."""
    flat: dict[str, Any] = {}
    for name, src in report["sources"].items():
        flat[f"source.{name}.dropped"] = sum((src.get("drops") or {}).values())
        for k, v in src.items():
            if isinstance(v, (int, float)):
                flat[f"source.{name}.{k}"] = v
            elif isinstance(v, dict):
                for reason, n in v.items():
                    flat[f"source.{name}.{k}.{reason}"] = n
    for name, splits in report["premise"].items():
        for split, c in splits.items():
            flat[f"premise.{name}.{split}"] = c["written"]
    flat["sources.unused"] = len(report.get("unused_sources") or {})  # defined, used by no split, not loaded
    for setting, info in report["ripd"].items():
        flat[f"ripd.{setting}.overlap_removed_from_target"] = info.get("overlap_removed_from_target", 0)
        for side, splits in info["splits"].items():
            for split, c in splits.items():
                flat[f"ripd.{setting}.{side}_{split}"] = c["written"]
    return flat


def _plot(counts: dict[str, Any]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(k, v) for k, v in counts.items() if k.startswith(("premise.", "ripd."))]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(rows) + 1.2))
    ax.barh([k for k, _ in rows], [v for _, v in rows], color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel("pairs written")
    ax.set_title("data: split sizes")
    fig.tight_layout()
    return fig


def run_data_stage(params: dict[str, Any], project_dir: Path) -> dict[str, Any]:
    """Build the splits under ``outputs/data`` and log the run; returns the report and flat counts."""
    p, out = Params.of(params), project_dir / OUT_DIR
    if "data" not in given(params):
        raise ConfigError("params.yaml: missing key 'data'")
    sources = "+".join(p.data.sources) or "none"
    with stage_run("data", f"data@{sources}", p.effective(), project_dir, experiment=p.tracking.experiment,
                   record_dir=out) as run:
        report = build_splits(p.data, out, base_dir=project_dir)
        counts = split_counts(report)
        run.log_metrics(counts)
        run.log_dict(report, "data_report.json")
        run.log_table([{"split": k, "pairs": v} for k, v in counts.items()], "split_counts.json")
        run.log_figure(_plot(counts), "split_sizes.png")
    write_metrics_json(project_dir / METRICS, counts)
    atomic.write_json(out / "report.json", report, indent=2, sort_keys=True)
    return {"report": report, "counts": counts}


def main(argv: list[str] | None = None) -> int:
    project = find_project_dir()
    run_data_stage(load_params(project / "params.yaml", argv or sys.argv[1:]), project)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "data"))
