"""The report a user opens after ``dvc repro``: one self-contained HTML page with every stage's numbers (each
interval with its method, level and n), figures, the models behind them, links to their MLflow runs, and the
call ledger."""

from rubriclab.report._build import DEFAULT_UI, build_report
from rubriclab.report._collect import SECTION_ORDER, collect_sections
from rubriclab.report._html import render_report
from rubriclab.report._runs import run_link, stage_runs

__all__ = ["DEFAULT_UI", "SECTION_ORDER", "build_report", "collect_sections", "render_report", "run_link",
           "stage_runs"]
