"""Reliability-constrained refinement (PReMISE §3.4, App. C): failure packets, the fixed operator library,
the refiner and its deterministic checker, acceptance on a dev split with the Pareto frontier on (α, VFR),
the δ sweep (run as a study by ``rubriclab.studies``), and the human calibration of the verifier (App. B.5)."""

from __future__ import annotations

from rubriclab.repair._accept import pareto_front, select, verdict
from rubriclab.repair._calibration import (
    calibration_report,
    calibration_sample,
    export_sheet,
    read_labels,
    report_markdown,
    sampling_notes,
)
from rubriclab.repair._evaluate import evaluate_criterion, evaluate_set
from rubriclab.repair._operators import (
    OPERATOR_NAMES,
    OPERATORS,
    Operator,
    check_operator_names,
    describe_operators,
    operator_subsets,
)
from rubriclab.repair._outputs import candidates_table, criterion_diff, curve_figure, diff_markdown
from rubriclab.repair._packets import KINDS, failure_packets, plan_subsets, render_packet
from rubriclab.repair._paired import paired_delta_alpha, paired_delta_vfr, paired_deltas
from rubriclab.repair._refine import Revision, check_candidate, propose, refine_requests
from rubriclab.repair._refinement import (
    RepairSettings,
    delta_label,
    operating_point,
    parse_delta,
    report_heldout,
    search,
)
from rubriclab.repair._sweep import (
    NAMED,
    metric_row,
    sweep_grid,
    sweep_source,
    sweep_study_name,
    unrepaired_reason,
    unrepaired_sets,
)
from rubriclab.repair._sweep_card import curve_caption, sweep_diff, sweep_metrics, sweep_summary

__all__ = [
    "KINDS", "NAMED", "OPERATORS", "calibration_report", "calibration_sample", "export_sheet", "read_labels",
    "report_markdown", "OPERATOR_NAMES", "Operator", "RepairSettings", "Revision", "candidates_table",
    "check_candidate", "check_operator_names", "criterion_diff", "curve_caption", "curve_figure", "delta_label",
    "describe_operators", "diff_markdown", "evaluate_criterion", "evaluate_set", "failure_packets", "metric_row",
    "operating_point", "operator_subsets", "paired_delta_alpha", "paired_delta_vfr", "paired_deltas",
    "pareto_front", "parse_delta", "plan_subsets", "propose", "refine_requests", "render_packet", "report_heldout",
    "sampling_notes", "search", "select", "sweep_diff", "sweep_grid", "sweep_metrics", "sweep_source",
    "sweep_study_name", "sweep_summary", "unrepaired_reason", "unrepaired_sets", "verdict",
]
