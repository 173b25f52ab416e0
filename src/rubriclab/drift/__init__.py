"""Rubric-induced preference drift (RIPD, seed 003): biased rubric search and its baselines, selection on
validation and the test report, the stealth check and transfer, and the drift gate for rubric edits."""

from __future__ import annotations

__all__: list[str] = []

# -- search, baselines, selection (drift stage) --------------------------------------------------------
from rubriclab.drift._baselines import few_shot_icl, random_search, textgrad  # noqa: E402
from rubriclab.drift._engine import (  # noqa: E402
    METHODS,
    Candidate,
    DriftData,
    DriftSettings,
    Judging,
    Registry,
)
from rubriclab.drift._refine import check_candidate, constraints_text, serialize_cases  # noqa: E402
from rubriclab.drift._run import (  # noqa: E402
    DriftContext,
    archive_frame,
    archive_lines,
    run_method,
    selected_template,
)
from rubriclab.drift._search import biased_search, final_pool, icl_candidates  # noqa: E402
from rubriclab.drift._select import report_on_test, seed_on_val, select, validate  # noqa: E402

__all__ += [
    "METHODS", "Candidate", "DriftContext", "DriftData", "DriftSettings", "Judging", "Registry",
    "archive_frame", "archive_lines", "biased_search", "check_candidate", "constraints_text", "few_shot_icl",
    "final_pool", "icl_candidates", "random_search", "run_method", "seed_on_val", "select", "selected_template",
    "serialize_cases", "report_on_test", "textgrad", "validate",
]

# -- stealth check and transfer ------------------------------------------------------------------------
from rubriclab.drift._stealth import (  # noqa: E402
    STEALTH_PROMPT,
    parse_stealth_verdict,
    stealth_check,
    transfer,
)

__all__ += ["STEALTH_PROMPT", "parse_stealth_verdict", "stealth_check", "transfer"]

# -- drift gate ----------------------------------------------------------------------------------------
from rubriclab.drift._clusters import cluster_names, default_k, prompt_clusters  # noqa: E402
from rubriclab.drift._gate import (  # noqa: E402
    DriftCheck,
    compare_verdicts,
    drift_check,
)
from rubriclab.drift._gate_report import gate_markdown, write_gate_report  # noqa: E402

__all__ += ["DriftCheck", "cluster_names", "compare_verdicts", "default_k", "drift_check", "gate_markdown",
            "prompt_clusters", "write_gate_report"]

