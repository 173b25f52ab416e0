"""The four-axis audit of a rubric-conditioned judge (PReMISE §3.2): structure, reliability,
preference fit and adversarial robustness, summarised in an audit card."""

from __future__ import annotations

from rubriclab.audit._card import COLUMNS, best_sources, cross_source_table, flat_metrics, numeric_table, to_markdown
from rubriclab.audit._context import AuditContext, from_bootstrap, metric
from rubriclab.audit._fit import audit_applicability, audit_score_structure
from rubriclab.audit._reliability import audit_reliability, pairwise_requests
from rubriclab.audit._run import AXES, DEFAULTS, check_axes, run_audit
from rubriclab.audit._structure import PROPERTIES, audit_structure

__all__ = [
    "AXES", "COLUMNS", "DEFAULTS", "PROPERTIES", "AuditContext", "audit_applicability", "audit_reliability",
    "audit_score_structure", "audit_structure", "best_sources", "check_axes", "cross_source_table",
    "flat_metrics", "from_bootstrap", "metric", "numeric_table", "pairwise_requests", "run_audit", "to_markdown",
]
