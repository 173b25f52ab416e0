"""Assemble the report: sections from the stages' outputs, the MLflow run behind each, the models, the banner."""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from rubriclab.atomic import write_text
from rubriclab.report._collect import collect_sections
from rubriclab.report._html import render_blocks, render_report
from rubriclab.report._runs import run_link, stage_runs
from rubriclab.secrets import redact_urls
from rubriclab.settings import Report

DEFAULT_UI = Report().mlflow_ui  # the schema's default (rubriclab.settings)
BUILD_FILE = "build.js"
# Each section's page in the documentation site (mkdocs.yml; `make docs` builds it into <project>/site/, plain .html
# pages). The page links it relative to outputs/report/ (the same bytes wherever it is built); build.js, which the
# page reads when opened, points the links at RUBRICLAB_DOCS_URL when set (a published site), else at this
# project's site/ from where the page was written. Links are navigation: the page still loads nothing.
DOCS_ENV = "RUBRICLAB_DOCS_URL"
DOCS_DEFAULT_BASE = "../../site"
DOCS_PAGES = {
    "models": "tutorials/your-judge.html",
    "recorded": "tutorials/recorded-verdicts.html#2-what-a-card-holds",
    "audit": "tutorials/default-run.html#5-read-the-audit-card",
    "repair": "explanation/methods.html#repair",
    "drift": "explanation/methods.html#drift",
    "drift_check": "how-to/drift-gate.html",
    "probe": "explanation/methods.html#probe",
    "align": "explanation/methods.html#align",
    "ledger": "explanation/call-store.html",
}


def docs_base(project: Path, out_dir: Path) -> str:
    """Where build.js points the page's "docs" links: ``$RUBRICLAB_DOCS_URL``, else ``<project>/site`` relative
    to ``out_dir``."""
    url = os.environ.get(DOCS_ENV, "").strip()
    if url:
        return url.rstrip("/")
    return Path(os.path.relpath(Path(project).resolve() / "site", Path(out_dir).resolve())).as_posix()


def _models(tags: dict[str, str]) -> str:
    if tags.get("recorded") == "True":  # a recorded-judges run: real judges' published verdicts, no call
        return f"recorded verdicts of {tags.get('judges') or '—'} (no model call)"
    return tags.get("models") or tags.get("judge_models") or "—"


def build_report(project: Path, out_dir: Path, *, tracking_uri: str, experiment: str, ledger_rows: list[dict[str, Any]],
                 store: str, ui_url: str = DEFAULT_UI, commit: str = "unknown") -> dict[str, Any]:
    """Write ``out_dir/index.html`` and ``out_dir/build.js``; returns ``{"path", "build_path", "sections", "runs",
    "embedded"}``.

    The page holds what the stages' outputs determine, so the same outputs give the same bytes in any clone
    (DVC hashes it). What differs on every build (when, which commit, which MLflow runs, the call store's
    ledger at report time) goes to ``build.js`` beside it, which the page reads when opened."""
    runs = stage_runs(tracking_uri, experiment, project)
    sections = collect_sections(project, ledger_rows, store)
    build = {"project_name": project.name, "commit": commit[:12], "tracking_uri": redact_urls(tracking_uri),
             "made_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "runs": {}, "html": {},
             "docs_base": docs_base(project, out_dir)}
    for s in sections:
        s.setdefault("docs", DOCS_PAGES.get(s["kind"]))
        if s.get("run_name"):
            run = runs.get(s["run_name"])
            build["runs"][s["run_name"]] = _run_fact(ui_url, run)
        if s["kind"] == "ledger":  # the store's history at report time, not a function of the outputs
            build["html"]["ledger"] = render_blocks(s["blocks"])
            s["blocks"] = [("html", '<div data-build-html="ledger"><p class="run">The call ledger is in '
                                    "<code>build.js</code> beside this page, written at each build.</p></div>")]
    # the stages behind the outputs; not the report's own run, which a fresh clone's first build has not logged yet
    # and every later build has (the page, which DVC hashes, would differ between them)
    model_rows = [{"run_name": name, "models": _models(r["tags"])} for name, r in sorted(runs.items())
                  if r["tags"].get("stage") != "report"]
    build["runs"].update({name: _run_fact(ui_url, r) for name, r in runs.items()})
    # stages whose numbers came from the embedded chat model (embedding-only use of MiniLM is not flagged)
    embedded = sorted(name for name, r in runs.items()
                      if r["tags"].get("embedded_model") == "True" or "smollm2" in _models(r["tags"]))
    html = render_report(sections, {
        "experiment": experiment, "embedded": embedded, "model_rows": model_rows,
        "docs_default_base": DOCS_DEFAULT_BASE, "models_docs": DOCS_PAGES["models"],
        "recorded": [s["title"] for s in sections if s["kind"] == "recorded"
                     and not (runs.get(s.get("run_name") or "") or {}).get("tags", {}).get("embedded_model") == "True"]})
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    write_text(path, html)
    build_path = write_text(out_dir / BUILD_FILE, f"window.RUBRICLAB_BUILD = {json.dumps(build, indent=1)};\n")
    return {"path": path, "build_path": build_path, "sections": sections, "runs": runs, "embedded": embedded}


def _run_fact(ui_url: str, run: dict[str, Any] | None) -> dict[str, Any] | None:
    if not run:
        return None
    return {"run_id": run["run_id"], "status": run["status"], "link": run_link(ui_url, run),
            "found_by": run.get("found_by", "newest by name")}
