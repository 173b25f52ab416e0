"""Parsers for model replies. A reply that does not match is a ParseFailure, never coerced."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from rubriclab.errors import ParseFailure

_BRACKET = re.compile(r"\[\[\s*([AB])\s*\]\]")
_TAG = re.compile(r"<verdict>\s*([AB])\s*</verdict>", re.IGNORECASE)
_SCORE = re.compile(r"SCORE\s*[:=]\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_PASS_FAIL = re.compile(r"\b(PASS|FAIL)\b")
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def parse_verdict(text: str) -> str:
    """Return "A" or "B" from ``[[A]]``/``[[B]]`` or ``<verdict>A</verdict>``.

    The last verdict marker wins (judges often restate the format before answering), but a reply
    whose markers name both letters in its final verdict tokens is ambiguous and fails.
    """
    found = [m.group(1).upper() for m in _TAG.finditer(text)] or [m.group(1) for m in _BRACKET.finditer(text)]
    if not found:
        raise ParseFailure(f"no verdict ([[A]]/[[B]] or <verdict>A</verdict>) in reply: {_snippet(text)!r}")
    if len(set(found)) > 1 and _mentions_format(text):
        found = [found[-1]]
    if len(set(found)) > 1:
        raise ParseFailure(f"ambiguous verdict {found} in reply: {_snippet(text)!r}")
    return found[-1]


def _mentions_format(text: str) -> bool:
    # "output [[A]] if A is better, [[B]] if B is better ... [[B]]" restates the format first
    return bool(re.search(r"\[\[A\]\][\"']?\s*if", text)) and bool(re.search(r"\[\[B\]\][\"']?\s*if", text))


def score_parser(lo: float, hi: float) -> Callable[[str], float]:
    """Parser for ``SCORE: n`` with n in [lo, hi]; the last SCORE line wins."""

    def parse(text: str) -> float:
        found = _SCORE.findall(text)
        if not found:
            raise ParseFailure(f"no 'SCORE: n' in reply: {_snippet(text)!r}")
        value = float(found[-1])
        if not lo <= value <= hi:
            raise ParseFailure(f"score {value:g} outside [{lo:g}, {hi:g}] in reply: {_snippet(text)!r}")
        return value

    return parse


def parse_pass_fail(text: str) -> bool:
    """True for PASS, False for FAIL; both or neither is a failure."""
    found = set(_PASS_FAIL.findall(text.upper()))
    if len(found) != 1:
        raise ParseFailure(f"expected exactly one of PASS/FAIL, got {sorted(found) or 'none'}: {_snippet(text)!r}")
    return found.pop() == "PASS"


def parse_yes_no(text: str) -> bool:
    """True for a reply starting with yes, False for no."""
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
