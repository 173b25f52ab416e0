"""Assemble the report: sections from the stages' outputs, the MLflow run behind each, the models, the banner."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from rubriclab.atomic import write_text
from rubriclab.report._collect import collect_sections
from rubriclab.report._html import render_report
from rubriclab.report._runs import run_link, stage_runs

DEFAULT_UI = "http://127.0.0.1:5000"


def _models(tags: dict[str, str]) -> str:
    if tags.get("recorded") == "True":  # a recorded-judges run: real judges' published verdicts, no call
        return f"recorded verdicts of {tags.get('judges') or '—'} (no model call)"
    return tags.get("models") or tags.get("judge_models") or "—"


def build_report(project: Path, out_dir: Path, *, tracking_uri: str, experiment: str, ledger_rows: list[dict[str, Any]],
                 store: str, ui_url: str = DEFAULT_UI, commit: str = "unknown") -> dict[str, Any]:
    """Write ``out_dir/index.html``; returns ``{"path", "sections", "runs", "embedded"}``."""
    runs = stage_runs(tracking_uri, experiment)
    sections = collect_sections(project, ledger_rows, store)
    for s in sections:
        s["run"] = runs.get(s["run_name"]) if s.get("run_name") else None
        s["link"] = run_link(ui_url, s["run"])
    model_rows = [{"run_name": name, "models": _models(r["tags"]), "run_id": r["run_id"], "link": run_link(ui_url, r)}
                  for name, r in sorted(runs.items())]
    # stages whose numbers came from the embedded chat model (embedding-only use of MiniLM is not flagged)
    embedded = sorted(name for name, r in runs.items()
                      if r["tags"].get("embedded_model") == "True" or "smollm2" in _models(r["tags"]))
    html = render_report(sections, {
        "project_name": project.name, "commit": commit[:12], "tracking_uri": tracking_uri, "experiment": experiment,
        "made_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "embedded": embedded,
        "model_rows": model_rows, "recorded": [s["title"] for s in sections if s["kind"] == "recorded"
                                               and not (s["run"] or {}).get("tags", {}).get("embedded_model") == "True"]})
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    write_text(path, html)
    return {"path": path, "sections": sections, "runs": runs, "embedded": embedded}
