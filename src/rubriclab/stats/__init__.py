"""Statistics for the audit: item-level bootstrap CIs, paired comparisons with BH and MDE, reliability
(Krippendorff's α, flip rate, paraphrase stability), structural fit (EffDim, BT diagnostics), majority
vote with exact early stopping, and accuracy / position consistency with parse failures counted.

Every function takes plain numpy arrays / pandas objects and returns numbers or a dict; undefined
quantities come back as NaN together with a ``reason`` (or ``degenerate``) string, never silently.
"""

from __future__ import annotations

from rubriclab.stats._accuracy import (
    TIE_CREDIT,
    TIES_COMMON,
    accuracy,
    accuracy_both_orders,
    at_tie_credit,
    other_tie_credit,
    position_consistency,
    ties_common,
)
from rubriclab.stats._agreement import (
    flip_rate,
    krippendorff_alpha,
    mean_alpha,
    mean_paraphrase_stability,
    paraphrase_stability,
)
from rubriclab.stats._bootstrap import finish_distribution, item_bootstrap, paired_bootstrap, two_sample_bootstrap
from rubriclab.stats._checks import item_codes, positive_int, probability
from rubriclab.stats._grouped import by_group, macro_rate, mean_over_groups
from rubriclab.stats._inference import (
    PAIRED_TEST,
    adjust_family,
    bh_adjust,
    exact_k_min,
    label_comparison,
    mde_drop,
    mde_paired,
    mde_paired_proportions,
    mde_paired_t,
    paired_t_tests,
    paired_test,
    sign_test,
    t_mde_factor,
)
from rubriclab.stats._majority import early_stop_majority, majority_decided, majority_vote, samples_still_needed
from rubriclab.stats._structure import bt_diagnostics, bt_weight_entropy, effective_dimensionality
from rubriclab.stats._too_few import no_interval_reason

__all__ = [
    "PAIRED_TEST",
    "TIES_COMMON",
    "TIE_CREDIT",
    "accuracy",
    "adjust_family",
    "accuracy_both_orders",
    "at_tie_credit",
    "bh_adjust",
    "bt_diagnostics",
    "bt_weight_entropy",
    "by_group",
    "early_stop_majority",
    "exact_k_min",
    "finish_distribution",
    "effective_dimensionality",
    "flip_rate",
    "item_bootstrap",
    "item_codes",
    "krippendorff_alpha",
    "label_comparison",
    "macro_rate",
    "majority_decided",
    "majority_vote",
    "mde_drop",
    "mde_paired",
    "no_interval_reason",
    "mde_paired_proportions",
    "mde_paired_t",
    "mean_alpha",
    "mean_over_groups",
    "mean_paraphrase_stability",
    "other_tie_credit",
    "paired_bootstrap",
    "paired_t_tests",
    "paired_test",
    "paraphrase_stability",
    "position_consistency",
    "positive_int",
    "probability",
    "samples_still_needed",
    "sign_test",
    "t_mde_factor",
    "ties_common",
    "two_sample_bootstrap",
]
