"""Deterministic structural-budget check for refined criteria (METHODS: reliability-constrained refinement).

Heuristics, all on the criterion's description (the title is a label and is not counted):

- words: whitespace-separated tokens holding at least one letter or digit (list markers like ``1.`` count).
- first paragraph: the text before the first blank line or the first list item.
- sentences: prose split at ``.``/``!``/``?`` (abbreviations like "e.g." protected) and at ``;``; every list
  item is its own unit. A *segment* below is one such sentence.
- nested conditional: a conditional opener (if, when, whenever, unless, provided that, in case, as long as)
  whose clause — up to the next ``,`` ``;`` ``:`` dash or "then" — contains another opener,
  e.g. "Reward it if the answer cites a source when one exists". "If A, and if B, then C" is not nested.
  Checked in the first paragraph unless ``nested_conditional_scope="all"``.
- anti-gaming clause: a segment with "do/does/should not reward|credit|award|favor", "do not give credit",
  "never reward", "no credit for", "not rewarded", "regardless of" or "irrespective of".
- applicability gate: a segment with "applies only when/if/to", "only applies/applicable", "applicable only",
  "N/A if/when", "not applicable if/when", "does not apply if/when/to".
- numbered items: lines starting ``N.`` or ``N)``; nested numbering is ``1.1``-style markers or any list
  item indented deeper than the numbered item above it.
- prompt-specific: "this prompt/question/query/conversation/request/task", "in this chat", "the above
  question", "the user's question about …", "the prompt regarding …", or template placeholders
  (``{question}``, ``<prompt>``). Quoted phrases are *not* flagged: false-positive anchors legitimately
  quote generic phrases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rubriclab.rubrics._records import Criterion, RubricSet
from rubriclab.settings import Budget

RULES = (
    "total_words",
    "first_paragraph_words",
    "nested_conditional",
    "anti_gaming_count",
    "anti_gaming_clause_words",
    "applicability_gates",
    "numbered_items",
    "nested_items",
    "prompt_specific",
)


# The limits are ``repair.budget``: its fields, defaults (the paper's) and ranges are rubriclab.settings.Budget,
# read here as they are (``Params.of(params).repair.budget``, or ``BudgetLimits(max_words=100)`` in code).
BudgetLimits = Budget


@dataclass(frozen=True)
class Violation:
    """One broken budget rule: the measured ``value`` against ``limit``."""

    rule: str
    message: str
    value: int
    limit: int
    excerpt: str = ""

    def __str__(self) -> str:
        return self.message


_ITEM_RE = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+\u2022]|\d+(?:\.\d+)+\.?|\d+[.)]|\(?[a-zA-Z][.)]|[ivx]+[.)])[ \t]+\S")
_NUMBERED_RE = re.compile(r"^(?P<indent>[ \t]*)\d+[.)][ \t]+\S")
_DOTTED_RE = re.compile(r"^[ \t]*\d+\.\d+(?:\.\d+)*\.?[ \t]+\S")
_MARKER_RE = re.compile(r"^[ \t]*(?:[-*+\u2022]|\d+(?:\.\d+)+\.?|\d+[.)]|\(?[a-zA-Z][.)]|[ivx]+[.)])[ \t]+")
_ABBREV_RE = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf|approx|incl)\.", re.IGNORECASE)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\s*;\s*")
_COND_RE = re.compile(r"\b(?:if|when|whenever|unless|provided\s+that|in\s+case|as\s+long\s+as)\b", re.IGNORECASE)
_CLAUSE_END_RE = re.compile(r"[,;:\u2014\u2013]|\s-\s|\bthen\b", re.IGNORECASE)
_ANTI_GAMING_RE = re.compile(
    r"\b(?:do|does|did|should|must|will|shall)\s+not\s+(?:reward|credit|award|favou?r|give\s+(?:any\s+|extra\s+)?(?:credit|points))\b"
    r"|\b(?:don't|doesn't|never)\s+(?:reward|credit|award|favou?r|give\s+(?:any\s+)?credit)\b"
    r"|\bno\s+(?:extra\s+)?(?:credit|points)\s+(?:for|is\s+given)\b"
    r"|\bnot\s+(?:be\s+)?(?:rewarded|credited)\b"
    r"|\b(?:regardless|irrespective)\s+of\b",
    re.IGNORECASE,
)
_GATE_RE = re.compile(
    r"\bappl(?:y|ies)\s+only\s+(?:when|if|to|where)\b"
    r"|\bonly\s+(?:appl(?:y|ies)|applicable)\b"
    r"|\bapplicable\s+only\b"
    r"|\bN/?A\s+(?:if|when|unless|for)\b"
    r"|\bnot\s+applicable\s+(?:if|when|unless|to|for)\b"
    r"|\b(?:does|do)\s+not\s+apply\s+(?:if|when|unless|to)\b",
    re.IGNORECASE,
)
_PROMPT_SPECIFIC_RE = re.compile(
    r"\bth(?:is|ese)\s+(?:specific\s+|particular\s+)?(?:prompts?|questions?|quer(?:y|ies)|conversations?|requests?|tasks?|instructions?)\b"
    r"|\bin\s+this\s+(?:chat|dialog(?:ue)?|thread|exchange)\b"
    r"|\bthe\s+above\s+(?:prompt|question|query|conversation|request)\b"
    r"|\b(?:the\s+)?user'?s\s+(?:question|prompt|request|query)\s+(?:about|regarding|concerning|on)\b"
    r"|\bthe\s+(?:question|prompt|request|query)\s+(?:about|regarding|concerning)\b"
    r"|\{\{?\s*[A-Za-z_][\w.]*\s*\}?\}"
    r"|<\s*(?:prompt|question|instruction|query|user_input)\s*>",
    re.IGNORECASE,
)


def _words(text: str) -> int:
    return sum(1 for tok in text.split() if re.search(r"\w", tok))


def _excerpt(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def _units(text: str) -> list[str]:
    """Prose paragraphs and list items (markers stripped), in order."""
    units: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            current = None
        elif _ITEM_RE.match(line):
            current = [_MARKER_RE.sub("", line, count=1)]
            units.append(current)
        elif current is None:
            current = [line.strip()]
            units.append(current)
        else:
            current.append(line.strip())
    return [" ".join(u) for u in units]


def _segments(text: str) -> list[str]:
    out = []
    for unit in _units(text):
        protected = _ABBREV_RE.sub(lambda m: m.group(0).replace(".", "\x00"), unit)
        out += [s.replace("\x00", ".").strip() for s in _SENTENCE_SPLIT_RE.split(protected) if s.strip()]
    return out


def _first_paragraph(text: str) -> str:
    lines = []
    for line in text.strip().splitlines():
        if not line.strip() or _ITEM_RE.match(line):
            break
        lines.append(line)
    return "\n".join(lines)


def _has_nested_conditional(sentence: str) -> bool:
    for m in _COND_RE.finditer(sentence):
        rest = sentence[m.end() :]
        end = _CLAUSE_END_RE.search(rest)
        clause = rest[: end.start()] if end else rest
        if _COND_RE.search(clause):
            return True
    return False


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


def _nested_items(text: str) -> list[str]:
    hits = []
    numbered_indent: int | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        width = _indent(line)
        if _DOTTED_RE.match(line):
            hits.append(line)
        elif _NUMBERED_RE.match(line) and (numbered_indent is None or width <= numbered_indent):
            numbered_indent = width
        elif numbered_indent is not None and _ITEM_RE.match(line) and width > numbered_indent:
            hits.append(line)
        elif width == 0 and not _ITEM_RE.match(line):
            numbered_indent = None  # unindented prose ends the numbered list
    return hits


def check_budget(criterion_or_text: Criterion | str, limits: BudgetLimits | None = None) -> list[Violation]:
    """Every budget rule the criterion (or its description text) breaks; empty when within budget."""
    lim = limits or BudgetLimits()
    text = criterion_or_text.description if isinstance(criterion_or_text, Criterion) else str(criterion_or_text)
    out: list[Violation] = []

    def add(rule: str, value: int, limit: int, message: str, excerpt: str = "") -> None:
        out.append(Violation(rule, f"{rule}: {message}", value, limit, _excerpt(excerpt) if excerpt else ""))

    total = _words(text)
    if total > lim.max_words:
        add("total_words", total, lim.max_words, f"{total} words > {lim.max_words}")
    first = _first_paragraph(text)
    first_words = _words(first)
    if first_words > lim.max_first_paragraph_words:
        add(
            "first_paragraph_words",
            first_words,
            lim.max_first_paragraph_words,
            f"first paragraph has {first_words} words > {lim.max_first_paragraph_words}",
            first,
        )
    if not lim.allow_nested_conditionals:
        scope = first if lim.nested_conditional_scope == "first_paragraph" else text
        nested = [s for s in _segments(scope) if _has_nested_conditional(s)]
        if nested:
            add(
                "nested_conditional",
                len(nested),
                0,
                f"{len(nested)} sentence(s) nest a conditional inside another: {_excerpt(nested[0], 60)!r}",
                nested[0],
            )
    segments = _segments(text)
    gaming = [s for s in segments if _ANTI_GAMING_RE.search(s)]
    if len(gaming) > lim.max_anti_gaming_clauses:
        add(
            "anti_gaming_count",
            len(gaming),
            lim.max_anti_gaming_clauses,
            f"{len(gaming)} anti-gaming clauses > {lim.max_anti_gaming_clauses}",
            gaming[lim.max_anti_gaming_clauses],
        )
    for clause in gaming:
        n = _words(clause)
        if n > lim.max_anti_gaming_clause_words:
            add(
                "anti_gaming_clause_words",
                n,
                lim.max_anti_gaming_clause_words,
                f"anti-gaming clause has {n} words > {lim.max_anti_gaming_clause_words}: {_excerpt(clause, 60)!r}",
                clause,
            )
    gates = [s for s in segments if _GATE_RE.search(s)]
    if len(gates) > lim.max_applicability_gates:
        add(
            "applicability_gates",
            len(gates),
            lim.max_applicability_gates,
            f"{len(gates)} applicability gates > {lim.max_applicability_gates}",
            gates[lim.max_applicability_gates],
        )
    numbered = [ln for ln in text.splitlines() if _NUMBERED_RE.match(ln) or _DOTTED_RE.match(ln)]
    top = [ln for ln in numbered if not _DOTTED_RE.match(ln)]
    if top:
        min_indent = min(_indent(ln) for ln in top)
        top = [ln for ln in top if _indent(ln) == min_indent]
    if len(top) > lim.max_numbered_items:
        add("numbered_items", len(top), lim.max_numbered_items, f"{len(top)} numbered items > {lim.max_numbered_items}")
    if not lim.allow_nested_items:
        nested_items = _nested_items(text)
        if nested_items:
            add(
                "nested_items",
                len(nested_items),
                0,
                f"{len(nested_items)} nested list item(s); numbered items must be flat: {_excerpt(nested_items[0], 60)!r}",
                nested_items[0],
            )
    if lim.require_prompt_agnostic:
        hits = list(_PROMPT_SPECIFIC_RE.finditer(text))
        if hits:
            add(
                "prompt_specific",
                len(hits),
                0,
                f"{len(hits)} reference(s) to a specific prompt, e.g. {hits[0].group(0)!r}",
                hits[0].group(0),
            )
    return out


def within_budget(criterion_or_text: Criterion | str, limits: BudgetLimits | None = None) -> bool:
    """True when :func:`check_budget` finds no violation."""
    return not check_budget(criterion_or_text, limits)


def budget_report(rs: RubricSet, limits: BudgetLimits | None = None) -> dict[str, list[Violation]]:
    """Violations per criterion id (empty lists for criteria within budget)."""
    return {c.id: check_budget(c, limits) for c in rs.criteria}
