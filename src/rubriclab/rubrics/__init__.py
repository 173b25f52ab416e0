"""Criterion / RubricSet records, import/export formats, judge templates and the structural-budget checker."""

from __future__ import annotations

from rubriclab.rubrics._budget import RULES, BudgetLimits, Violation, budget_report, check_budget, within_budget
from rubriclab.rubrics._importers import (
    extract_template_criteria,
    from_criteria_list,
    from_markdown,
    rubric_set_from_template,
    split_title,
)
from rubriclab.rubrics._io import (
    load_rubric_file,
    load_rubric_set,
    load_template,
    save_rubric_set,
    save_template,
)
from rubriclab.rubrics._records import SOURCES, Criterion, RubricSet, is_snake_case, slugify, unique_id
from rubriclab.rubrics._ripd import RIPD_KEYS, is_ripd_file, load_ripd, read_ripd_lines, write_ripd
from rubriclab.rubrics._template import (
    ALLOWED_FIELDS,
    PROMPT_FIELDS,
    JudgeTemplate,
    check_template_text,
    parse_template,
    template_from_dict,
)

__all__ = [
    "RIPD_KEYS",
    "is_ripd_file",
    "load_ripd",
    "read_ripd_lines",
    "write_ripd",
    "ALLOWED_FIELDS",
    "PROMPT_FIELDS",
    "RULES",
    "SOURCES",
    "BudgetLimits",
    "Criterion",
    "JudgeTemplate",
    "RubricSet",
    "Violation",
    "budget_report",
    "check_budget",
    "check_template_text",
    "extract_template_criteria",
    "from_criteria_list",
    "from_markdown",
    "is_snake_case",
    "load_rubric_file",
    "load_rubric_set",
    "load_template",
    "parse_template",
    "rubric_set_from_template",
    "save_rubric_set",
    "save_template",
    "slugify",
    "split_title",
    "template_from_dict",
    "unique_id",
    "within_budget",
]
