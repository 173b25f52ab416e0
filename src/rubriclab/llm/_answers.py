"""Fixed-format answers (verdicts, scores, yes/no): one place that knows how to ask for them.

A real judge answers in the paper's text format and is parsed with the text parsers. A role with
``use_schema`` (the embedded model by default) gets the same prompt plus a JSON schema that its
decoder enforces; its reply is parsed from the JSON. Either way the caller receives the same value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rubriclab.errors import ConfigError, ParseFailure
from rubriclab.llm._parsers import extract_json, parse_pass_fail, parse_verdict, parse_yes_no, score_parser
from rubriclab.llm._roles import RoleSpec
from rubriclab.llm._schema_bounds import bounded_integer

_EXPLOIT = re.compile(r"<verdict>\s*(GENUINE|EXPLOITING)\s*</verdict>", re.IGNORECASE)
# "VERDICT: PASS or FAIL" restates the format: the word must not be one of two alternatives.
_PASS_FAIL_LINE = re.compile(r"VERDICT\s*:\s*\**\s*(PASS|FAIL)\b(?!\s*\**\s*(?:or|/|\|)\s*\**\s*(?:PASS|FAIL))",
                             re.IGNORECASE)


def parse_verdict_line(text: str) -> bool:
    """``VERDICT: PASS|FAIL`` (the structure prompt), or a reply that is only PASS/FAIL. A lone PASS or
    FAIL word inside reasoning is not read as a verdict; differing VERDICT lines are ambiguous."""
    m = [v.upper() for v in _PASS_FAIL_LINE.findall(text)]
    if len(set(m)) > 1:
        raise ParseFailure(f"conflicting verdicts {m} in reply: {text[:80]!r}")
    if m:
        return m[-1] == "PASS"
    try:
        return parse_pass_fail(text)
    except ParseFailure:
        raise ParseFailure(f"no 'VERDICT: PASS|FAIL' line in reply: {' '.join(text.split())[:80]!r}") from None


def parse_exploit(text: str) -> bool:
    """True when the verifier says EXPLOITING (``<verdict>…</verdict>``)."""
    m = _EXPLOIT.findall(text)
    if not m:
        raise ParseFailure(f"no <verdict>GENUINE|EXPLOITING</verdict> in reply: {text[:80]!r}")
    if len({v.upper() for v in m}) > 1:
        raise ParseFailure("both GENUINE and EXPLOITING given")
    return m[-1].upper() == "EXPLOITING"


def _enum(values: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": {"answer": {"type": "string", "enum": values}}, "required": ["answer"]}


def _bounded(lo: int, hi: int) -> Callable[[Any], int]:
    # a decoder may not enforce minimum/maximum (llama.cpp grammars don't): check the range here; the
    # same integer-only rule as the text parser (7.0 reads as 7, 7.5 fails)
    def read(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise ParseFailure(f"answer {v!r} is not a number in [{lo}, {hi}]")
        if not float(v).is_integer():
            raise ParseFailure(f"answer {v!r} is not an integer (the scale is integer {lo}-{hi})")
        return int(v)

    return read


def _choice(values: list[str], convert: Callable[[str], Any]) -> Callable[[Any], Any]:
    def read(v: Any) -> Any:
        if v not in values:
            raise ParseFailure(f"answer {v!r} is not one of {values}")
        return convert(v)

    return read


def _int(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "object", "properties": {"answer": bounded_integer(lo, hi)}, "required": ["answer"]}


# kind -> (text parser, schema, how to read the JSON answer)
KINDS: dict[str, tuple[Callable[[str], Any], dict[str, Any], Callable[[Any], Any]]] = {
    "ab": (parse_verdict, _enum(["A", "B"]), _choice(["A", "B"], str)),
    "pass_fail": (parse_verdict_line, _enum(["PASS", "FAIL"]), _choice(["PASS", "FAIL"], lambda v: v == "PASS")),
    "yes_no": (parse_yes_no, _enum(["yes", "no"]), _choice(["yes", "no"], lambda v: v == "yes")),
    "exploit": (parse_exploit, _enum(["GENUINE", "EXPLOITING"]),
                _choice(["GENUINE", "EXPLOITING"], lambda v: v == "EXPLOITING")),
    "score_0_10": (score_parser(0, 10), _int(0, 10), _bounded(0, 10)),
    "score_1_10": (score_parser(1, 10), _int(1, 10), _bounded(1, 10)),
}


def register_answer_kind(kind: str, text_parser: Callable[[str], Any], values: list[str]) -> None:
    """Declare a fixed-choice answer ``kind`` (e.g. a stage's own verdict markers): ``text_parser`` reads a
    real model's reply; a schema role gets a JSON enum of ``values`` and its answer is returned as is."""
    KINDS[kind] = (text_parser, _enum(list(values)), _choice(list(values), str))


def answer_format(role: RoleSpec, kind: str) -> dict[str, Any]:
    """CallRequest fields (``parser``, ``response_format``, and a role with a small ``max_tokens``
    when schema-constrained) for an answer of ``kind``."""
    if kind not in KINDS:
        raise ConfigError(f"unknown answer kind {kind!r}; allowed: {', '.join(KINDS)}")
    text_parser, schema, read = KINDS[kind]
    if not role.use_schema:
        return {"role": role, "parser": text_parser}

    def parse(text: str) -> Any:
        data = extract_json(text)
        if not isinstance(data, dict) or "answer" not in data:
            raise ParseFailure(f"expected {{\"answer\": …}}, got {text[:80]!r}")
        return read(data["answer"])

    return {"role": role.with_(max_tokens=min(role.max_tokens, 16)), "parser": parse,
            "response_format": {"type": "json_object", "schema": schema}}
