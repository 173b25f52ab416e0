"""Rubric artifacts (seed 004): rubric-item data, judge labels, rubric-only probe classifiers with bootstrap
CIs, counterfactual flip tests, and semantic analyses of what the rubric text alone gives away."""

from __future__ import annotations

__all__: list[str] = []

# -- rubric-item data (_data.py) -----------------------------------------------------------------------
from rubriclab.probe._data import (  # noqa: E402
    RUBRIC_ITEM_COLUMNS,
    demo_items_path,
    items_from_rubric_set,
    load_rubric_items,
)

__all__ += ["RUBRIC_ITEM_COLUMNS", "demo_items_path", "items_from_rubric_set", "load_rubric_items"]

# -- probe classifiers and metrics (_classify.py, _metrics.py) -----------------------------------------
from rubriclab.probe._classify import PROBE_MODELS, EmbeddingFeatures, probe_transfer, run_probe  # noqa: E402
from rubriclab.probe._metrics import (  # noqa: E402
    METRICS,
    MIN_INTERVAL_UNITS,
    classification_metrics,
    metrics_table,
    paired_metric_difference,
)

__all__ += ["METRICS", "MIN_INTERVAL_UNITS", "PROBE_MODELS", "EmbeddingFeatures", "classification_metrics", "metrics_table",
            "paired_metric_difference", "probe_transfer", "run_probe"]

# -- judge labels and counterfactuals (_label.py, _counterfactual.py) ----------------------------------
from rubriclab.probe._counterfactual import output_perturbation, reversal_parser, rubric_perturbation  # noqa: E402
from rubriclab.probe._label import generate_responses, judge_items  # noqa: E402

__all__ += ["generate_responses", "judge_items", "output_perturbation", "reversal_parser", "rubric_perturbation"]

# -- semantic analyses (_semantics.py) -----------------------------------------------------------------
from rubriclab.probe._semantics import (  # noqa: E402
    DEFAULT_CUES,
    UMAP_MIN_ITEMS,
    lexical_cues,
    lr_weights,
    projection,
    semantic_report,
    topics,
    word_counts,
    write_semantic_report,
)

__all__ += ["DEFAULT_CUES", "UMAP_MIN_ITEMS", "lexical_cues", "lr_weights", "word_counts", "topics", "projection",
            "semantic_report", "write_semantic_report"]

# -- rubric prior leakage for the audit card (_leakage.py) ---------------------------------------------
from rubriclab.probe._leakage import baseline_rubric_items, rubric_prior_leakage  # noqa: E402

__all__ += ["baseline_rubric_items", "rubric_prior_leakage"]

# -- the probe stage's analyses per cohort and its summary.md pieces (_cohorts.py, _summary.py) ------------------
from rubriclab.probe._cohorts import (  # noqa: E402
    counterfactual_sections,
    probe_cohort,
    semantic_sections,
    split_cohorts,
    transfer_section,
)
from rubriclab.probe._summary import file_part, label_line, probe_markdown, rates_markdown  # noqa: E402

__all__ += ["counterfactual_sections", "file_part", "label_line", "probe_cohort", "probe_markdown", "rates_markdown",
            "semantic_sections", "split_cohorts", "transfer_section"]
