"""PReMISE discovery: criteria from preference pairs, consolidation, MMR selection, and the
preference-rank repair; plus an AgentEval-style task-derived rubric source."""

from __future__ import annotations

from rubriclab.discover._consolidate import Node, check_subgroups, consolidate, nodes_from_candidates, salvage
from rubriclab.discover._extract import extract_candidates, extraction_schema
from rubriclab.discover._pipeline import DiscoveryResult, discover
from rubriclab.discover._prefrank import MODES, preference_fit, rank_by_fit
from rubriclab.discover._select import filter_pool, mmr_select
from rubriclab.discover._shortfall import shortfall
from rubriclab.discover._task import task_derived_rubric
from rubriclab.discover._validate import REASONS, Echo, check_criterion, check_reply, echo_of

__all__ = [
    "MODES", "REASONS", "DiscoveryResult", "Echo", "Node", "check_criterion", "check_reply",
    "check_subgroups", "consolidate", "discover", "echo_of", "extract_candidates", "extraction_schema", "filter_pool",
    "mmr_select", "nodes_from_candidates", "preference_fit", "rank_by_fit", "salvage", "shortfall",
    "task_derived_rubric",
]
