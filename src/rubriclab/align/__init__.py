"""Propagation through alignment (seed 003 §4.2, §5.3, App. A.3–A.4): label preference pairs under a seed and a
second (e.g. drifted) rubric, train DPO policies with TRL on each label set in three regimes (benchmark-only,
target-only, benchmark+target), and compare the policies by best-of-n sampling on held-out prompts, scored by a
reward model and a third-party pairwise judge."""

from rubriclab.align._context import (
    DOMAINS,
    RUBRICS,
    STEPS,
    AlignContext,
    adapter_dir,
    label_digest,
    policy_name,
    read_labels,
    ripd_split,
)
from rubriclab.align._evaluate import (
    REGIME_LABELS,
    TIE_CREDIT,
    best_of_n,
    comparisons_for,
    generate_candidates,
    judge_outcomes,
    judge_scores,
    reward_model_scores,
    reward_outcomes,
    win_rate_table,
    win_rates,
)
from rubriclab.align._labels import LABEL_COLUMNS, label_agreement, label_pairs, preference_rows
from rubriclab.align._policy import (
    chat_prompt,
    checkpoint_from_gguf,
    inference_precision,
    load_policy,
    load_tokenizer,
    pick_device,
    policy_dtype,
    policy_source,
    require_align,
    trained_folder,
)
from rubriclab.align._steps import Trial, run_evaluate, run_label, run_train
from rubriclab.align._summary import summarize
from rubriclab.align._train import DPOSettings, dpo_dataset, preference_margins, sequence_logprobs, train_dpo
from rubriclab.llm import register_prompt
from rubriclab.settings import ALIGN_REGIMES

register_prompt("align_reward", {"prompt", "response"})

REGIMES = ALIGN_REGIMES

__all__ = [
    "AlignContext", "DOMAINS", "RUBRICS", "STEPS", "Trial", "adapter_dir", "label_digest", "policy_name",
    "read_labels", "ripd_split", "run_evaluate", "run_label", "run_train", "summarize",
    "DPOSettings", "LABEL_COLUMNS", "REGIMES", "REGIME_LABELS", "TIE_CREDIT", "best_of_n", "chat_prompt",
    "checkpoint_from_gguf", "comparisons_for", "dpo_dataset", "generate_candidates", "judge_outcomes", "judge_scores",
    "label_agreement", "label_pairs", "load_policy", "load_tokenizer", "pick_device", "policy_dtype", "inference_precision",
    "policy_source", "preference_margins", "preference_rows", "require_align", "reward_model_scores",
    "reward_outcomes", "sequence_logprobs", "train_dpo", "trained_folder", "win_rate_table", "win_rates",
]
