"""The four-axis audit of a rubric-conditioned judge (PReMISE §3.2): structure, reliability,
preference fit and adversarial robustness, summarised in an audit card."""

from __future__ import annotations

from rubriclab.audit._accuracy import audit_accuracy
from rubriclab.audit._adversarial import STRATEGIES, attack_arrays, audit_adversarial
from rubriclab.audit._card import (
    COLUMNS,
    LEGEND,
    best_sources,
    cross_source_table,
    flat_metrics,
    interval_legend,
    numeric_table,
)
from rubriclab.audit._compare import adjust_family
from rubriclab.audit._context import (
    ORIENTATIONS,
    AuditContext,
    Tally,
    context_from_params,
    from_bootstrap,
    interval,
    interval_label,
    metric,
)
from rubriclab.audit._fit import audit_applicability, audit_score_structure
from rubriclab.audit._injection import INJECTIONS, audit_injection, injection_figure
from rubriclab.audit._leakage import add_leakage
from rubriclab.audit._markdown import card_markdown, card_settings, injection_table
from rubriclab.audit._reliability import ALPHA_COLUMN, alpha_on, audit_reliability, pairwise_requests
from rubriclab.audit._run import AXES, check_axes, not_audited_reason, run_audit
from rubriclab.audit._sources import load_sources, source_path
from rubriclab.audit._structure import PROPERTIES, audit_structure
from rubriclab.reporting import to_markdown  # the cards' markdown tables (kept here for the stages' imports)

__all__ = [
    "ALPHA_COLUMN", "STRATEGIES", "alpha_on", "attack_arrays",
    "AXES", "COLUMNS", "LEGEND", "ORIENTATIONS", "PROPERTIES", "AuditContext", "Tally", "adjust_family",
    "INJECTIONS", "audit_injection", "injection_figure",
    "add_leakage", "card_markdown", "card_settings", "injection_table", "load_sources", "source_path",
    "audit_accuracy", "audit_adversarial", "audit_applicability", "audit_reliability", "audit_score_structure",
    "audit_structure", "best_sources", "context_from_params",
    "check_axes", "cross_source_table", "flat_metrics", "from_bootstrap", "interval", "interval_label",
    "interval_legend", "metric", "not_audited_reason", "numeric_table", "pairwise_requests", "run_audit",
    "to_markdown",
]
