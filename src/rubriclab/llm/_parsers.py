"""Parsers for model replies. A reply that does not match is a ParseFailure, never coerced."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from rubriclab.errors import ParseFailure

_BRACKET = re.compile(r"\[\[\s*([AB])\s*\]\]")
_TAG = re.compile(r"<verdict>\s*([AB])\s*</verdict>", re.IGNORECASE)
# A marker followed by "if"/"when" is the answer format being restated ("[[A]]" if A is better), and
# two markers joined by or, / or and are the alternatives being restated: neither states a verdict.
_RESTATED_IF = re.compile(r"[\"'`*]*\s*(?:if|when|means)\b", re.IGNORECASE)
_ALTERNATIVES = re.compile(r"(\[\[\s*[AB]\s*\]\]|<verdict>\s*[AB]\s*</verdict>)[\"'`*]*\s*(?:or|/|and|,)\s*[\"'`*]*"
                           r"(\[\[\s*[AB]\s*\]\]|<verdict>\s*[AB]\s*</verdict>)", re.IGNORECASE)
# the packaged judge prompts' own format line, "<verdict>A or B</verdict>", echoed back
_TAG_ALTERNATIVES = re.compile(r"<verdict>\s*[AB]\s*(?:or|/|\|)\s*[AB]\s*</verdict>", re.IGNORECASE)
_SCORE = re.compile(r"SCORE\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)(\s*(?:-|–|to)\s*\d+)?", re.IGNORECASE)
_PASS_FAIL_ONLY = re.compile(r"^[\s*_`\"'#>-]*(PASS|FAIL)[\s*_`\"'.!]*$", re.IGNORECASE)
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_YES_OR_NO = re.compile(r"^\W*(yes|no)\W*\s*(?:or|/)\s*\W*(yes|no)\b", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_ONE_VERDICT = "exactly one verdict, [[A]] or [[B]] (or <verdict>A</verdict> / <verdict>B</verdict>)"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def stated_markers(text: str, pattern: re.Pattern) -> list[str]:
    """Letters of the verdict markers in ``text`` that state a verdict: markers that restate the answer
    format (followed by "if"/"when", or joined to another marker by or, / and) are left out."""
    restated: set[int] = set()
    for m in _ALTERNATIVES.finditer(text):
        restated.update((m.start(1), m.start(2)))
    found = []
    for m in pattern.finditer(text):
        if m.start() in restated or _RESTATED_IF.match(text, m.end()):
            continue
        found.append(m.group(1).upper())
    return found


def parse_verdict(text: str) -> str:
    """Return "A" or "B" from ``[[A]]``/``[[B]]`` or ``<verdict>A</verdict>``.

    Only markers that state a verdict count (see ``stated_markers``): a reply that only restates the
    format — e.g. one cut off after 'Output "[[A]]" if A is better, "[[B]]" if B is better.' — has
    none and fails, and a reply stating both letters is ambiguous and fails. Never a letter from prose.
    """
    found = stated_markers(text, _TAG) or stated_markers(text, _BRACKET)
    if not found:
        if _TAG.search(text) or _BRACKET.search(text) or _TAG_ALTERNATIVES.search(text):
            raise ParseFailure(f"the reply only restates the answer format; it states no verdict: {_snippet(text)!r}; "
                               f"expected {_ONE_VERDICT}")
        raise ParseFailure(f"no verdict in reply: {_snippet(text)!r}; expected {_ONE_VERDICT}")
    if len(set(found)) > 1:
        raise ParseFailure(f"ambiguous verdict {found} in reply: {_snippet(text)!r}; expected {_ONE_VERDICT}")
    return found[-1]


def score_parser(lo: float, hi: float) -> Callable[[str], int]:
    """Parser for ``SCORE: n``: an integer in [lo, hi]; the last stated SCORE wins.

    One rule for every score: the scales are integer scales, so a decimal (``SCORE: 7.5``) is a parse
    failure (re-asked, then counted), never rounded; ``7.0`` reads as 7. A restated range
    (``SCORE: 0-10``) is not a score."""

    expected = f"one integer 'SCORE: n' with n from {lo:g} to {hi:g}"

    def parse(text: str) -> int:
        found = [m.group(1) for m in _SCORE.finditer(text) if not m.group(2)]
        if not found:
            raise ParseFailure(f"no 'SCORE: n' in reply: {_snippet(text)!r}")
        value = float(found[-1])
        if not value.is_integer():
            raise ParseFailure(f"score {found[-1]} is not an integer in reply: {_snippet(text)!r}; "
                               f"expected {expected}")
        if not lo <= value <= hi:
            raise ParseFailure(f"score {value:g} outside [{lo:g}, {hi:g}] in reply: {_snippet(text)!r}; "
                               f"expected {expected}")
        return int(value)

    return parse


def parse_pass_fail(text: str) -> bool:
    """True for PASS, False for FAIL, when the reply *is* that word (or ends with a line that is only that
    word). A PASS/FAIL inside reasoning ("…could pass over…") is not a verdict."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    for candidate in (text, lines[-1] if lines else ""):
        m = _PASS_FAIL_ONLY.match(candidate.strip())
        if m:
            return m.group(1).upper() == "PASS"
    raise ParseFailure(f"expected a reply that is PASS or FAIL (or ends with a line that is): {_snippet(text)!r}")


def parse_yes_no(text: str) -> bool:
    """True for a reply starting with yes, False for no; "Yes or no" restates the question and fails."""
    if _YES_OR_NO.match(text.strip()):
        raise ParseFailure(f"the reply restates the options instead of answering: {_snippet(text)!r}")
    m = _YES_NO.match(text.strip())
    if not m:
        raise ParseFailure(f"expected a reply starting with Yes or No: {_snippet(text)!r}")
    return m.group(1).lower() == "yes"


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole reply, or the body of one fenced ```json block."""
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)]
    last_error = None
    for cand in candidates:
        try:
            return json.loads(cand)
        except json.JSONDecodeError as exc:
            last_error = exc
    raise ParseFailure(f"reply is not JSON ({last_error}): {_snippet(text)!r}")


def json_parser(model: type | None = None) -> Callable[[str], Any]:
    """Parser returning the reply's JSON, validated against a pydantic model when given."""

    def parse(text: str) -> Any:
        data = extract_json(text)
        if model is None:
            return data
        from pydantic import ValidationError

        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "<root>"
            raise ParseFailure(
                f"JSON does not match {model.__name__}: {where}: {first['msg']} ({exc.error_count()} errors)"
            ) from None

    return parse


def json_schema_of(model: type) -> dict:
    """JSON schema of a pydantic model, for ``response_format`` constrained decoding."""
    return model.model_json_schema()
