"""Recorded judgments: audit real judges' verdicts without a model call.

Importers read what publishers and tools already store — LLMBar's and PandaLM's published files, a generic long
table, MLflow 3 traces with LLM-judge and human feedback, the project's own call store (``read_store``: a stage's
live pairwise verdicts, found by rebuilding its requests) — into one record (``Judgment``: pair, judge, condition,
presentation order, verdict as presented and mapped to the pair's outputs, raw text, generated text before the
verdict) over labelled pairs (``RecordedPair``: one or several annotators). ``analyze`` gives per judge ×
condition accuracy in each order, both-orders-correct, positional agreement, first-position rate, Cohen's κ and
macro precision / recall / F1 against the label, paired comparisons (BH, MDE), agreement among judges and among
annotators, majority-of-judges accuracy and AlpacaEval's length / list biases (judge and labels on the same pairs), each with its interval's method, level and n;
``write_card`` writes card.md / card.json / card.csv; ``recorded_gate`` runs the drift gate per domain between two
conditions (or two judges) of recorded verdicts; ``shipped_path`` finds the published sets shipped with the
package. A verdict is never guessed: anything that is not one is ``none``, counted (wrong), its raw text kept.
"""

from __future__ import annotations

from rubriclab.recorded._agreement import (
    alpha_from_parts,
    alpha_parts,
    category_counts,
    cohen_kappa,
    confusion,
    fleiss_kappa,
    kappa_from_confusion,
    macro_prf_from_confusion,
    pairwise_agreement,
)
from rubriclab.recorded._analysis import (
    CELL_METRICS,
    RecordedAnalysis,
    Settings,
    analyze,
    judgments_frame,
    rater_agreement,
)
from rubriclab.recorded._biases import contains_list
from rubriclab.recorded._card import (
    BIAS_HEADER,
    bias_tables,
    card_markdown,
    cells_frame,
    headline,
    jsonable,
    leaderboard_gate_markdown,
    leaderboard_md,
    write_card,
)
from rubriclab.recorded._leaderboard import leaderboard_gate
from rubriclab.recorded._metrics import SUMMARY_METRICS, stage_metrics, summary_lines
from rubriclab.recorded._publisher import pandalm_claims, publisher_check
from rubriclab.recorded._records import (
    CHOICES,
    FORMATS,
    LABELS,
    ORDERS,
    VERDICTS,
    Judgment,
    RecordedPair,
    RecordedSet,
    plurality,
    to_choice,
    to_verdict,
)
from rubriclab.recorded._registry import (
    Format,
    SourceContext,
    format_names,
    get_format,
    register_format,
    registered_formats,
)
from rubriclab.recorded._shipped import SHIPPED_FORMATS, shipped_path
from rubriclab.recorded._sources import read_source, tracking_location
from rubriclab.recorded.formats.inspect_ai import read_inspect
from rubriclab.recorded.formats.llmbar import llmbar_check, llmbar_statistics, publisher_winner, read_llmbar
from rubriclab.recorded.formats.mlflow import read_mlflow
from rubriclab.recorded.formats.pandalm import read_pandalm
from rubriclab.recorded.formats.table import read_table

for _format in FORMATS:  # every module of formats/ registers its reader (rubriclab.recorded.formats)
    __import__(f"rubriclab.recorded.formats.{_format}")

_LAZY = {"recorded_gate": "rubriclab.recorded._gate", "gate_inputs": "rubriclab.recorded._gate",
         "recorded_gate_settings": "rubriclab.recorded._gate",
         "read_store": "rubriclab.recorded._callstore"}


def __getattr__(name: str):  # the gate and the call store import rubriclab.llm (litellm): only when asked for
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rubriclab.recorded' has no attribute {name!r}")


__all__ = [
    "BIAS_HEADER",
    "CELL_METRICS",
    "CHOICES",
    "FORMATS",
    "LABELS",
    "ORDERS",
    "VERDICTS",
    "Format",
    "Judgment",
    "RecordedAnalysis",
    "RecordedPair",
    "RecordedSet",
    "SHIPPED_FORMATS",
    "Settings",
    "SourceContext",
    "alpha_from_parts",
    "alpha_parts",
    "analyze",
    "bias_tables",
    "card_markdown",
    "category_counts",
    "cells_frame",
    "cohen_kappa",
    "confusion",
    "fleiss_kappa",
    "format_names",
    "gate_inputs",
    "get_format",
    "headline",
    "jsonable",
    "contains_list",
    "judgments_frame",
    "kappa_from_confusion",
    "leaderboard_gate",
    "leaderboard_gate_markdown",
    "leaderboard_md",
    "llmbar_check",
    "llmbar_statistics",
    "macro_prf_from_confusion",
    "pairwise_agreement",
    "pandalm_claims",
    "plurality",
    "publisher_check",
    "publisher_winner",
    "rater_agreement",
    "read_inspect",
    "read_llmbar",
    "read_mlflow",
    "read_pandalm",
    "read_source",
    "read_store",
    "read_table",
    "register_format",
    "registered_formats",
    "recorded_gate",
    "recorded_gate_settings",
    "shipped_path",
    "to_choice",
    "to_verdict",
    "tracking_location",
    "write_card",
    "SUMMARY_METRICS",
    "stage_metrics",
    "summary_lines",
]
