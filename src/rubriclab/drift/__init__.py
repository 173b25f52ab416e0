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

# -- the search as a grid study, and the run's summary (drift stage) -------------------------------------
from rubriclab.drift._study import (  # noqa: E402
    KNOBS,
    point_label,
    search_grid,
    search_study,
    search_study_name,
)
from rubriclab.drift._summary import empty_reasons, run_summary, stealth_table, transfer_table  # noqa: E402

__all__ += ["KNOBS", "empty_reasons", "point_label", "run_summary", "search_grid", "search_study",
            "search_study_name", "stealth_table", "transfer_table"]

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
    gate_seed,
)
from rubriclab.drift._gate_data import (  # noqa: E402
    PAIR_COLUMNS,
    detect_layout,
    limit_per_domain,
    load_file,
    load_gate_data,
)
from rubriclab.drift._gate_report import gate_markdown, write_gate_report  # noqa: E402

__all__ += ["DriftCheck", "PAIR_COLUMNS", "cluster_names", "compare_verdicts", "default_k", "detect_layout",
            "drift_check", "gate_markdown", "gate_seed", "limit_per_domain", "load_file", "load_gate_data",
            "prompt_clusters", "write_gate_report"]


# -- the drift stage's comparison table and figure (matplotlib: imported on first use) --------------------------
_OUTPUTS = ("LABELS", "comparison_figure", "comparison_markdown", "method_rows", "transfer_markdown")

__all__ += list(_OUTPUTS)


def __getattr__(name: str):
    if name in _OUTPUTS:
        from rubriclab.drift import _outputs

        return getattr(_outputs, name)
    raise AttributeError(f"module 'rubriclab.drift' has no attribute {name!r}")
