"""Is a model-written criterion a criterion? One rule set for the extraction step (E.1), the
task-derived source and the consolidation describe step (E.3).

Any model can copy the prompt's example, answer with a field name or a letter, or say the same
thing for every pair; a small one (SmolLM2-135M) does little else. Such text must never reach a
rubric file, so each rule rejects with a short, stable reason code:

- ``malformed``: the item lacks a field or a value has the wrong type or range.
- ``example_copy``: name or description equals an example value of the prompt's output format
  (``criterion_name``, ``concise_snake_case_name``, ...) or contains a multi-word one.
- ``field_name``: name or description is a field/placeholder name (``name``, ``rubric_id``, ...).
- ``instruction_copy``: a multi-word name, or a description, found verbatim in the prompt's fixed
  text, or a description sharing a run of ``INSTRUCTION_RUN`` words with it.
- ``single_token``: a name with no word of ≥3 letters ("A", "B", "Q1"; a one-word name such as
  "Accuracy" is fine), or a one-word description.
- ``too_few_words``: a description shorter than the step's minimum (whitespace-separated words).
- ``duplicate_in_reply``: same name or same description as an earlier criterion of the same reply.
- ``identical_across_pairs``: the same name+description, verbatim, in more than ``identical_limit``
  of the accepted extraction replies (and in ≥ ``IDENTICAL_MIN_PAIRS`` pairs): a model saying the same
  thing about unrelated pairs is not reading them. Judged after all replies.

Comparisons use lowercase alphanumeric words, trailing numbers dropped ("Criterion_Name 2" is
``criterion name``), so case, punctuation, underscores and numbering do not hide a copy.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from rubriclab.errors import ParseFailure
from rubriclab.llm import PromptTemplate, extract_json

REASONS = ("malformed", "example_copy", "field_name", "instruction_copy", "single_token", "too_few_words",
           "duplicate_in_reply", "identical_across_pairs")
EXPLAIN = {
    "malformed": "lacks a field or has a value of the wrong type or range",
    "example_copy": "repeats the example value of the prompt's output format",
    "field_name": "is a field name of the output format, not a quality of a response",
    "instruction_copy": "repeats the prompt's instructions",
    "single_token": "is a single letter or word where a quality's name or a sentence is expected",
    "too_few_words": "has a description too short to judge by",
    "duplicate_in_reply": "repeats an earlier criterion of the same reply",
    "identical_across_pairs": "is repeated verbatim for unrelated pairs",
}
# words of the output formats and prompt labels; the template's own keys and placeholders are added
FIELD_NAMES = frozenset({
    "name", "description", "criteria", "criterion", "criterion id", "model a score", "model b score", "score",
    "rubric", "rubric id", "rubric description", "rubrics", "subgroups", "unmerged", "id", "title", "winner",
    "response", "response a", "response b", "prompt", "task", "k", "json", "null", "none", "n a",
})
INSTRUCTION_RUN = 8  # a description sharing this many consecutive words with the prompt copied it
IDENTICAL_MIN_PAIRS = 3  # "identical across pairs" needs at least this many distinct pairs

_WORD = re.compile(r"[a-z0-9]+")
_KEY_VALUE = re.compile(r'"([^"\n]+)"\s*:\s*"([^"\n]*)"')
_KEY = re.compile(r'"([^"\n]+)"\s*:')


def words(text: str) -> list[str]:
    """Lowercase alphanumeric words of ``text`` (underscores and punctuation split words)."""
    return _WORD.findall(str(text).lower())


def norm(text: str) -> str:
    """The comparison form: words joined by spaces, trailing numbers dropped."""
    w = words(text)
    while w and w[-1].isdigit():
        w.pop()
    if w:
        w[-1] = w[-1].rstrip("0123456789") or w[-1]
    return " ".join(w)


@dataclass(frozen=True)
class Echo:
    """What a reply to one prompt must not echo back: its example values, field names and fixed text."""

    examples: frozenset[str]
    fields: frozenset[str]
    text: str  # the prompt's fixed text (placeholders removed) in comparison form, space-padded
    runs: frozenset[tuple[str, ...]]  # its INSTRUCTION_RUN-word runs


def echo_of(template: PromptTemplate) -> Echo:
    """The Echo of a prompt template (its placeholders' values — pair texts, members — are not part of it)."""
    raw = "\n".join(t for t in (template.system, template.user) if t)
    parts = list(string.Formatter().parse(raw))
    fixed = "\n".join(lit for lit, _, _, _ in parts)  # `{{` already unescaped to `{`
    placeholders = {f for _, f, _, _ in parts if f}
    examples = {norm(v) for _, v in _KEY_VALUE.findall(fixed)} - {""}
    fields = FIELD_NAMES | {norm(k) for k in _KEY.findall(fixed)} | {norm(p) for p in placeholders}
    w = words(fixed)
    runs = {tuple(w[i : i + INSTRUCTION_RUN]) for i in range(len(w) - INSTRUCTION_RUN + 1)}
    return Echo(frozenset(examples), frozenset(fields) - {""}, f" {' '.join(w)} ", frozenset(runs))


def _copies_example(key: str, echo: Echo) -> bool:
    padded = f" {key} "
    return key in echo.examples or any(" " in ex and f" {ex} " in padded for ex in echo.examples)


def _copies_instructions(key: str, echo: Echo) -> bool:
    return key.count(" ") >= 1 and f" {key} " in echo.text


def _shares_run(description: str, echo: Echo) -> bool:
    w = words(description)
    return any(tuple(w[i : i + INSTRUCTION_RUN]) in echo.runs for i in range(len(w) - INSTRUCTION_RUN + 1))


def check_criterion(name: str, description: str, echo: Echo, min_words: int) -> str | None:
    """The reason code ``name``/``description`` is rejected for, or None when it is usable.

    Rules are tried in ``REASONS`` order, so a copied example is reported as ``example_copy`` even
    when it is also too short."""
    if not str(name).strip() or not str(description).strip():
        return "malformed"
    n, d = norm(name), norm(description)
    if not n or not d:
        return "single_token"  # punctuation only
    if _copies_example(n, echo) or _copies_example(d, echo):
        return "example_copy"
    if n in echo.fields or d in echo.fields:
        return "field_name"
    if _copies_instructions(n, echo) or _copies_instructions(d, echo) or _shares_run(description, echo):
        return "instruction_copy"
    if not any(sum(ch.isalpha() for ch in w) >= 3 for w in words(name)) or len(description.split()) <= 1:
        return "single_token"
    if len(description.split()) < min_words:
        return "too_few_words"
    return None


def criteria_items(text: str, model: type, max_n: int) -> tuple[list, list, list]:
    """(raw items, parsed items or None, (name, description) or None) of a reply that must be a JSON object
    with a ``criteria`` list of at most ``max_n`` items of pydantic ``model``; ParseFailure otherwise.
    An item that does not fit ``model`` is None (``malformed``), not a reason to drop the whole reply."""
    data = extract_json(text)
    raw = data.get("criteria") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise ParseFailure("reply is not a JSON object with a 'criteria' list")
    if len(raw) > max_n:
        raise ParseFailure(f"reply has {len(raw)} criteria; expected at most {max_n}")
    parsed = []
    for item in raw:
        try:
            parsed.append(model.model_validate(item))
        except ValidationError:
            parsed.append(None)
    return raw, parsed, [(c.name, c.description) if c else None for c in parsed]


def check_reply(items: Sequence[tuple[str, str] | None], echo: Echo, min_words: int) -> list[str | None]:
    """One reason (or None) per item of one reply; ``None`` items (failed the shape check) are
    ``malformed``. Later items that repeat an earlier usable item's name or description are
    ``duplicate_in_reply``."""
    names: set[str] = set()
    descriptions: set[str] = set()
    reasons: list[str | None] = []
    for item in items:
        if item is None:
            reasons.append("malformed")
            continue
        reason = check_criterion(item[0], item[1], echo, min_words)
        n, d = norm(item[0]), norm(item[1])
        if reason is None and (n in names or d in descriptions):
            reason = "duplicate_in_reply"
        if reason is None:
            names.add(n)
            descriptions.add(d)
        reasons.append(reason)
    return reasons


def repeated_texts(rows: Iterable[tuple[str, str, str]], replies: int, limit: float) -> set[tuple[str, str]]:
    """(name, description) comparison forms found in more than ``limit`` × ``replies`` distinct pairs
    and in at least ``IDENTICAL_MIN_PAIRS``; ``rows`` are (pair id, name, description)."""
    pairs: dict[tuple[str, str], set[str]] = {}
    for pair_id, name, description in rows:
        pairs.setdefault((norm(name), norm(description)), set()).add(pair_id)
    return {key for key, ps in pairs.items() if len(ps) >= IDENTICAL_MIN_PAIRS and len(ps) > limit * replies}


def count_reasons(reasons: Iterable[str | None]) -> dict[str, int]:
    """Counts of the non-None reasons, in ``REASONS`` order (unknown codes last)."""
    c = Counter(r for r in reasons if r)
    order = {r: i for i, r in enumerate(REASONS)}
    return {r: c[r] for r in sorted(c, key=lambda r: (order.get(r, len(order)), r))}


def merge_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Sum of several reason counts, in ``REASONS`` order."""
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    return count_reasons(total.elements())


def format_counts(counts: dict[str, int]) -> str:
    """``example_copy: 10, single_token: 2`` (largest first)."""
    return ", ".join(f"{r}: {n}" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n)


def rejection_problem(items: Sequence[tuple[str, str] | None], reasons: Sequence[str | None], need: int,
                      what: str = "criteria") -> str:
    """The ParseFailure text for a reply with fewer than ``need`` usable items: the counts and the
    first rejected items with why, so a re-ask tells the model what to change."""
    usable = sum(r is None for r in reasons)
    shown = []
    for i, (item, reason) in enumerate(zip(items, reasons)):
        if reason and len(shown) < 4:
            label = repr(item[0][:40]) if item else "?"
            shown.append(f"#{i + 1} {label} {EXPLAIN.get(reason, reason)} ({reason})")
    return (f"only {usable} of {len(reasons)} {what} usable, at least {need} needed "
            f"[{format_counts(count_reasons(reasons))}]: " + "; ".join(shown)
            + ". Name real qualities of the responses in your own words, with a full-sentence description")
