"""DVC stage `recorded@<name>`: audit a source of recorded judgments (``recorded.sources.<name>`` in params.yaml)
without a model call. Reads the source (LLMBar's or PandaLM's published files, a long table, MLflow traces),
analyses it (``rubriclab.recorded.analyze``), checks the publisher's own figures where it printed some, writes the
card into ``outputs/recorded/<name>/`` and ``metrics/recorded/<name>.json``, and logs one MLflow run
(``recorded@<name>``) with a nested run per judge × condition so the MLflow UI compares them side by side.

params.yaml::

    recorded:
      confidence: 0.95     # interval level
      n_boot: 2000         # bootstrap resamples (pairs)
      seed: 0
      alpha: 0.05          # BH level of each comparison family
      power: 0.8           # for the MDE
      tie_credit: 0.5      # credit of a tie verdict when the label is not a tie (the project's one rule)
      baseline: null       # a condition compared with each other one within a judge (null: every pair)
      contrasts: null      # {name: [a, b]}: Δ = a − b within each judge, one BH family per metric (null: the
                           # importer's own, e.g. LLMBar's rules: [Vanilla, Vanilla_NoRules], own rubric first:
                           # [Metrics, Vanilla]; {}: none)
      contrast_judges: null  # the judges the contrasts are drawn for (null: every judge)
      sources:
        <name>: {path: ... (or shipped:llmbar_natural / shipped:pandalm), format: llmbar|pandalm|table|mlflow|store,
                 experiment: (mlflow), baseline, contrasts, contrast_judges: (override the above), ...}
        # format store: a stage's own judgments read back from the call store (path: llm.store), found by
        # rebuilding its requests: pairs: <pairs file>, rubrics: {name: <rubric file>}, seed, samples,
        # both_orders, judge_model / temperature (over llm.roles.judge) — all as the stage judged
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
    publisher_check,
    read_source,
    write_card,
)
from rubriclab.report import DEFAULT_UI
from rubriclab.settings import Gate, Params, RecordedCalibrate, RecordedSource
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

SUMMARY_METRICS = ("accuracy", "accuracy_original", "accuracy_swapped", "both_correct", "positional_agreement",
                   "first_position_rate", "kappa", "macro_f1")


def source_entry(params: Params | dict[str, Any], name: str) -> RecordedSource:
    sources = Params.of(params).recorded.sources
    if name not in sources:
        raise ConfigError(f"params.yaml: recorded.sources has no {name!r}; configured: "
                          f"{', '.join(sorted(sources)) or '(none)'}")
    return sources[name]


def stage_metrics(rs: RecordedSet, analysis: RecordedAnalysis, publisher: dict[str, Any] | None) -> dict[str, Any]:
    """What ``metrics/recorded/<name>.json`` holds: counts, per judge × condition the headline metrics with their
    interval bounds and n, agreement, the publisher check's tally, and model_calls = 0."""
    cells: dict[str, Any] = {}
    for c in analysis.cells:
        row: dict[str, Any] = {"n_pairs": c["n_pairs"], "n_none": c["n_none"], "n_tie": c["n_tie"]}
        for m in SUMMARY_METRICS:
            e = c["metrics"].get(m) or {}
            row[m] = e.get("value")
            if e.get("low") is not None:
                row[f"{m}_low"], row[f"{m}_high"] = e["low"], e["high"]
        cells.setdefault(c["judge"], {})[c["condition"]] = row
    out: dict[str, Any] = {"source": rs.name, "format": rs.format, "model_calls": 0, "counts": analysis.counts,
                           "cells": cells,
                           "comparisons": {"n": len(analysis.comparisons),
                                           "differences": sum(r.get("label") == "difference"
                                                              for r in analysis.comparisons)},
                           "contrasts": {f"{r['judge']} · {r['contrast']} · {r['metric']}": {
                               k: r.get(k) for k in ("diff", "low", "high", "p_adjusted", "mde", "n_pairs")}
                               for r in analysis.contrasts},
                           "judge_alpha": {r["condition"]: r["krippendorff_alpha"]["value"]
                                           for r in analysis.judge_agreement}}
    if analysis.leaderboard:  # per judge and model: the publishers' rates with their intervals
        out["leaderboard"] = {f"{r['annotator']} · {r['model']}": {
            "win_rate": r["win_rate"], "win_rate_low": r["win_rate_ci"]["low"], "win_rate_high": r["win_rate_ci"]["high"],
            "discrete_win_rate": r["discrete_win_rate"], "n_total": r["n_total"],
            "length_controlled_winrate": r["length_controlled_winrate"]} for r in analysis.leaderboard}
        out["judges_compared"] = {f"{c['a']} vs {c['b']}": {
            "spearman": (c.get("spearman") or {}).get("value"), "kendall": (c.get("kendall") or {}).get("value"),
            "swapped_pairs": len((c.get("reversals") or {}).get("pairs", [])),
            "supported_reversals": sum(p["supported"] for p in (c.get("reversals") or {}).get("pairs", []))}
            for c in analysis.judges_compared}
    if analysis.annotator_agreement:
        a = analysis.annotator_agreement
        out["annotator_alpha"] = a["krippendorff_alpha"]["value"]
        out["annotator_fleiss_kappa"] = a["fleiss_kappa"]["value"]
    if publisher:
        rows = publisher["rows"]
        if publisher.get("metrics"):  # a check that states its own headline figures
            out["publisher_check"] = publisher["metrics"]
        elif "match" in (rows[0] if rows else {}):
            checked = [r for r in rows if r["match"] is not None]  # a row with nothing published to match is no figure
            out["publisher_check"] = {"figures": len(checked), "reproduced": sum(bool(r["match"]) for r in checked)}
        else:
            out["publisher_check"] = {f"{r['metric']} ({r['convention']})" if r.get("convention") else r["metric"]:
                                      r["ratio"] for r in rows}
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _track(rs: RecordedSet, analysis: RecordedAnalysis, p: Params, project: Path,
           paths: dict[str, Path], metrics: dict[str, Any]) -> str:
    tags = {"source": rs.name, "format": rs.format, "judges": ", ".join(rs.judges),
            "conditions": ", ".join(rs.conditions), "provenance": rs.provenance, "model_calls": "0",
            "embedded_model": str(any(j.startswith("local/") for j in rs.judges)), "recorded": "True"}
    with stage_run("recorded", f"recorded@{rs.name}", p.effective(), project, experiment=p.tracking.experiment,
                   tags=tags) as run:
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
    paths = write_card(analysis, out, publisher, mlflow_ui=p.report.mlflow_ui or DEFAULT_UI)
    paths["judgments.parquet"] = atomic.write_parquet(rs.frame(), out / "judgments.parquet", index=False)
    paths.update(write_calibration(rs, analysis, p.recorded.calibrate, out))
    metrics = stage_metrics(rs, analysis, publisher)
    if out_dir is None:
        paths["metrics"] = write_metrics_json(project / "metrics/recorded" / f"{name}.json", metrics)
    run_id = _track(rs, analysis, p, project, {k: v for k, v in paths.items() if k != "metrics"},
                    metrics) if track else None
    return {"set": rs, "analysis": analysis, "publisher": publisher, "paths": paths, "metrics": metrics,
            "out": out, "run_id": run_id}


def run_recorded_gate(params: Params | dict[str, Any], project: Path, name: str, *, judge: str, from_condition: str,
                      to_condition: str, to_judge: str | None = None, order: str = "original",
                      bench: str | None = None, epsilon: float | None = None,
                      out_dir: Path | None = None) -> list[dict[str, Any]]:
    """The drift gate per domain between two sides of ``recorded.sources.<name>`` (``rubriclab.recorded.
    recorded_gate``), once per presentation order asked (``order``: original, swapped or both); each report into
    ``out_dir`` (default ``outputs/recorded_cli/<name>/gate``)/``<order>``. Returns ``[{"order", "result", "paths"}]``."""
    from rubriclab.drift import write_gate_report
    from rubriclab.recorded import recorded_gate

    p = Params.of(params)
    source = source_entry(p, name)
    s = Settings.of(p.recorded, source)
    rs = read_source(source, project, name, llm=p.llm, data_seed=p.data.seed)
    eps = float(epsilon if epsilon is not None else (p.drift.gate or Gate()).epsilon)
    orders = ["original", "swapped"] if order == "both" else [order]
    base = Path(out_dir) if out_dir else project / "outputs/recorded_cli" / name / "gate"
    out = []
    for o in orders:
        res = recorded_gate(rs, judge=judge, from_condition=from_condition, to_condition=to_condition,
                            to_judge=to_judge, order=o, bench_domain=bench, alpha=s.alpha, power=s.power,
                            n_boot=s.n_boot, confidence=s.confidence, tie_credit=s.tie_credit, epsilon=eps,
                            seed=s.seed)
        paths = write_gate_report(res, base / o if len(orders) > 1 else base)
        out.append({"order": o, "result": res, "paths": paths})
    return out


def run_leaderboard_gate(params: Params | dict[str, Any], project: Path, name: str, *, judge: str, to_judge: str,
                         out_dir: Path | None = None) -> dict[str, Any]:
    """Does switching the judge from ``judge`` to ``to_judge`` reorder ``recorded.sources.<name>``'s leaderboard
    (a head-to-head source such as AlpacaEval's)? Writes ``report.md`` / ``report.json`` into ``out_dir`` (default
    ``outputs/recorded_cli/<name>/gate``); returns the result with its ``paths``."""
    from rubriclab.recorded._card import jsonable, leaderboard_gate_markdown
    from rubriclab.recorded._leaderboard import leaderboard_gate

    p = Params.of(params)
    source = source_entry(p, name)
    rs = read_source(source, project, name, llm=p.llm, data_seed=p.data.seed)
    res = leaderboard_gate(rs, judge, to_judge, Settings.of(p.recorded, source))
    out = Path(out_dir) if out_dir else project / "outputs/recorded_cli" / name / "gate"
    res["paths"] = {"report.md": atomic.write_text(out / "report.md", leaderboard_gate_markdown(res, name)),
                    "report.json": atomic.write_json(out / "report.json", jsonable(res), indent=2, allow_nan=False)}
    return res


def summary_lines(res: dict[str, Any]) -> list[str]:
    """A few lines for the terminal: accuracy per judge × condition and the publisher check."""
    a: RecordedAnalysis = res["analysis"]
    lines = [f"{a.source['name']}: {a.counts['pairs']} pairs, {a.counts['judgments']} judgments "
             f"({a.counts['verdict_none']} none), {len(a.cells)} judge × condition cells, 0 model calls"]
    for c in a.cells:
        e = c["metrics"]["accuracy"]
        if e.get("value") is not None:
            ci = f" [{e['low']:.3f}, {e['high']:.3f}]" if e.get("low") is not None else ""
            lines.append(f"  {c['judge']:<16} {c['condition']:<26} accuracy {e['value']:.3f}{ci} n={e['n']}")
    for r in a.leaderboard:
        ci = r["win_rate_ci"]
        lines.append(f"  {r['annotator']:<32} {r['model']:<22} win rate {r['win_rate']:6.2f}% [{ci['low']:.2f}, "
                     f"{ci['high']:.2f}] n={r['n_total']} (vs {r['baseline']})")
    if res.get("publisher"):
        lines.append(res["publisher"]["summary"])
    return lines


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
