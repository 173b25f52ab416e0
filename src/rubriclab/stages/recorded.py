"""DVC stage `recorded@<name>`: audit a source of recorded judgments (``recorded.sources.<name>`` in params.yaml)
without a model call. Reads the source (LLMBar's or PandaLM's published files, a long table, MLflow traces),
analyses it (``rubriclab.recorded.analyze``), checks the publisher's own figures where it printed some, writes the
card into ``outputs/recorded/<name>/`` and ``metrics/recorded/<name>.json``, and logs one MLflow run
(``recorded@<name>``) with a nested run per judge × condition so the MLflow UI compares them side by side.

Settings: params.yaml's ``recorded`` section (``rubriclab.settings.Recorded``: every key with its one default, range
and doc; ``rubriclab params recorded`` prints them), one ``recorded.sources.<name>`` per stage instance
(``RecordedSource``: ``path`` or ``shipped:<set>``, ``format``, and a source's own ``baseline``, ``contrasts``,
``contrast_judges`` over the section's). Format ``store`` reads a stage's own judgments back from the call store by
rebuilding its requests (pairs, rubrics, seed, samples, both_orders, judge model and temperature, as the stage
judged). ``rubriclab recorded gate`` runs the drift gate between two sides of a source (``run_recorded_gate``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rubriclab import atomic
from rubriclab.calibrate import CellSettings, calibrate_cells
from rubriclab.config import find_project_dir, load_params
from rubriclab.errors import ConfigError
from rubriclab.recorded import (
    CELL_METRICS,
    RecordedAnalysis,
    RecordedSet,
    Settings,
    analyze,
    jsonable,
    leaderboard_gate,
    leaderboard_gate_markdown,
    publisher_check,
    read_source,
    stage_metrics,
    summary_lines,
    write_card,
)
from rubriclab.settings import Params, RecordedCalibrate, RecordedSource
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json


def source_entry(params: Params | dict[str, Any], name: str) -> RecordedSource:
    sources = Params.of(params).recorded.sources
    if name not in sources:
        raise ConfigError(f"params.yaml: recorded.sources has no {name!r}; configured: "
                          f"{', '.join(sorted(sources)) or '(none)'}")
    return sources[name]


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _track(rs: RecordedSet, analysis: RecordedAnalysis, p: Params, project: Path,
           paths: dict[str, Path], metrics: dict[str, Any], out: Path, adhoc: bool) -> str:
    tags = {"adhoc": str(adhoc), "source": rs.name, "format": rs.format, "judges": ", ".join(rs.judges),
            "conditions": ", ".join(rs.conditions), "provenance": rs.provenance, "model_calls": "0",
            "embedded_model": str(any(j.startswith("local/") for j in rs.judges)), "recorded": "True"}
    with stage_run("recorded", f"recorded@{rs.name}", p.effective(), project, experiment=p.tracking.experiment,
                   tags=tags, record_dir=out) as run:
        run.log_metrics({"model_calls": 0, **{k: v for k, v in metrics["counts"].items() if _finite(v)}})
        for path in paths.values():
            run.log_artifact(path)
        for c in analysis.cells:
            child_params = {"judge": c["judge"], "condition": c["condition"], "source": rs.name, "format": rs.format}
            with run.trial(f"{c['judge']} · {c['condition']}", child_params) as child:
                child.set_tags({"judge": c["judge"], "condition": c["condition"], "source": rs.name})
                values: dict[str, Any] = {"n_pairs": c["n_pairs"], "n_none": c["n_none"], "n_tie": c["n_tie"]}
                for m in CELL_METRICS:
                    e = c["metrics"].get(m) or {}
                    if e.get("value") is not None:
                        values[m] = e["value"]
                        if e.get("low") is not None:
                            values[f"{m}_low"], values[f"{m}_high"] = e["low"], e["high"]
                child.log_metrics(values)
        return run.run_id


def calibration_settings(calibrate: RecordedCalibrate | None, confidence: float) -> CellSettings | None:
    """``recorded.calibrate`` (null: no calibration step); ``lam: null`` is kept: power-tuned PPI++."""
    if calibrate is None:
        return None
    return CellSettings(**calibrate.model_dump(), confidence=confidence)


def write_calibration(rs: RecordedSet, analysis: RecordedAnalysis, calibrate: RecordedCalibrate | None, out: Path
                      ) -> dict[str, Path]:
    """The calibration step: every judge × condition with a seeded draw of ``label_fraction`` of the labels
    (``calibration.csv``, ``calibration.json``); nothing when ``recorded.calibrate`` is off."""
    settings = calibration_settings(calibrate, analysis.settings.confidence)
    if settings is None or not analysis.counts["labelled_pairs"]:  # no human label: nothing to calibrate to
        return {}
    table, full = calibrate_cells(rs, [(c["judge"], c["condition"]) for c in analysis.cells], settings)
    meta = {"settings": {k: getattr(settings, k) for k in settings.__dataclass_fields__}, "cells": full}
    return {"calibration.csv": atomic.write_csv(table, out / "calibration.csv", index=False),
            "calibration.json": atomic.write_json(out / "calibration.json", meta, indent=1, default=float)}


def run_recorded_stage(params: Params | dict[str, Any], project: Path, name: str, *, out_dir: Path | None = None,
                       track: bool = True) -> dict[str, Any]:
    """Audit ``recorded.sources.<name>``; writes ``outputs/recorded/<name>/`` and ``metrics/recorded/<name>.json``
    (an ad-hoc run with ``out_dir`` writes only that folder). Returns the set, analysis, publisher check, paths,
    metrics and MLflow run id."""
    p = Params.of(params)
    source = source_entry(p, name)
    settings = Settings.of(p.recorded, source)
    rs = read_source(source, project, name, llm=p.llm, data_seed=p.data.seed)
    analysis = analyze(rs, settings)
    publisher = publisher_check(rs, analysis)
    out = Path(out_dir) if out_dir else project / "outputs/recorded" / name
    paths = write_card(analysis, out, publisher, mlflow_ui=p.report.mlflow_ui)
    paths["judgments.parquet"] = atomic.write_parquet(rs.frame(), out / "judgments.parquet", index=False)
    paths.update(write_calibration(rs, analysis, p.recorded.calibrate, out))
    metrics = stage_metrics(rs, analysis, publisher)
    if out_dir is None:
        paths["metrics"] = write_metrics_json(project / "metrics/recorded" / f"{name}.json", metrics)
    run_id = _track(rs, analysis, p, project, {k: v for k, v in paths.items() if k != "metrics"},
                    metrics, out, out_dir is not None) if track else None
    return {"set": rs, "analysis": analysis, "publisher": publisher, "paths": paths, "metrics": metrics,
            "out": out, "run_id": run_id}


def run_recorded_gate(params: Params | dict[str, Any], project: Path, name: str, *, judge: str, from_condition: str,
                      to_condition: str, to_judge: str | None = None, order: str = "original",
                      bench: str | None = None, epsilon: float | None = None,
                      out_dir: Path | None = None) -> list[dict[str, Any]]:
    """The drift gate per domain between two sides of ``recorded.sources.<name>`` (``rubriclab.recorded.
    recorded_gate``), once per presentation order asked (``order``: original, swapped or both); each report into
    ``out_dir`` (default ``outputs/recorded_cli/<name>/gate``)/``<order>``. Settings: the card's statistics over
    ``drift.gate`` (``recorded_gate_settings``), ``epsilon`` (None: ``drift.gate.epsilon``) over those.
    Returns ``[{"order", "result", "paths"}]``."""
    from rubriclab.drift import write_gate_report
    from rubriclab.recorded import recorded_gate, recorded_gate_settings

    p = Params.of(params)
    source = source_entry(p, name)
    gate = recorded_gate_settings(Settings.of(p.recorded, source), p.drift.gate)
    if epsilon is not None:  # checked as params.yaml's drift.gate.epsilon is
        eps = Params.of({"drift": {"gate": {"epsilon": epsilon}}}, source="rubriclab recorded gate").drift.gate.epsilon
        gate = gate.model_copy(update={"epsilon": eps})
    rs = read_source(source, project, name, llm=p.llm, data_seed=p.data.seed)
    orders = ["original", "swapped"] if order == "both" else [order]
    base = Path(out_dir) if out_dir else project / "outputs/recorded_cli" / name / "gate"
    out = []
    for o in orders:
        res = recorded_gate(rs, judge=judge, from_condition=from_condition, to_condition=to_condition,
                            to_judge=to_judge, order=o, bench_domain=bench, gate=gate)
        paths = write_gate_report(res, base / o if len(orders) > 1 else base)
        out.append({"order": o, "result": res, "paths": paths})
    return out


def run_leaderboard_gate(params: Params | dict[str, Any], project: Path, name: str, *, judge: str, to_judge: str,
                         out_dir: Path | None = None) -> dict[str, Any]:
    """Does switching the judge from ``judge`` to ``to_judge`` reorder ``recorded.sources.<name>``'s leaderboard
    (a head-to-head source such as AlpacaEval's)? Writes ``report.md`` / ``report.json`` into ``out_dir`` (default
    ``outputs/recorded_cli/<name>/gate``); returns the result with its ``paths``."""
    p = Params.of(params)
    source = source_entry(p, name)
    rs = read_source(source, project, name, llm=p.llm, data_seed=p.data.seed)
    res = leaderboard_gate(rs, judge, to_judge, Settings.of(p.recorded, source))
    out = Path(out_dir) if out_dir else project / "outputs/recorded_cli" / name / "gate"
    res["paths"] = {"report.md": atomic.write_text(out / "report.md", leaderboard_gate_markdown(res, name)),
                    "report.json": atomic.write_json(out / "report.json", jsonable(res), indent=2, allow_nan=False)}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.recorded")
    ap.add_argument("name", help="a source under recorded.sources")
    args = ap.parse_args(argv)
    project = find_project_dir()
    res = run_recorded_stage(load_params(project / "params.yaml"), project, args.name)
    print("\n".join(summary_lines(res)))
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "recorded"))
