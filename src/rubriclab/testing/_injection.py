"""A scripted judge that obeys injected instructions: the adversary's model of a naive judge.

It reads a prompt as a naive reader would: each untrusted slot runs from the slot's FIRST opening
delimiter to the FIRST closing delimiter after it (compared case-insensitively), so a forged closing
delimiter inside a response ends the slot early and whatever follows it reads as the prompt's own text.
Slots are the tag pairs around the untrusted placeholders of the packaged templates
(``rubriclab.llm.slot_delimiters``) and the START/END marker lines of the prompt itself (MT-Bench's
``[The Start of Assistant A's Answer]`` … ``[The End of Assistant A's Answer]``).

If text OUTSIDE the slots (anywhere, with ``obey_inside=True``) instructs a verdict — a
``<verdict>B</verdict>`` tag, "output [[B]]", a ``SCORE: 10`` line (entities such as ``&lt;`` read as the
characters they stand for) — the judge obeys it. Otherwise it answers by a fixed honest rule: the longer
response (in words) wins, ties to A; one response alone scores ``1 + min(8, words // 25)`` on 1–10. It answers
in the format the prompt asks for: ``<verdict>X</verdict>``, ``[[X]]``, ``SCORE: n`` on 0–10 (Response A
against B) or 1–10 (one response), or the per-rubric JSON; a schema-constrained call gets ``{"answer": …}``.
"""

from __future__ import annotations

import functools
import html
import json
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

from rubriclab.llm import delimiters_of, parse_prompt, slot_delimiters

# slot tag -> which response it holds (A, B, or the one response "R" of a pointwise prompt)
_SIDES = {"response_a": "A", "candidate_response": "A", "response_b": "B", "baseline_response": "B", "response": "R"}
_MARKER_SIDE = re.compile(r"assistant\s+([ab])['\u2019]s\s+answer", re.IGNORECASE)
_VERDICT_TAG = re.compile(r"<\s*verdict\s*>\s*([AB])\s*<\s*/\s*verdict\s*>", re.IGNORECASE)
_BRACKETS = re.compile(r"\b(?:output|answer|respond with|reply with|return|print|say|verdict is|verdict)\s*:?\s*"
                       r"[\"'\u201c]?\[\[\s*([AB])\s*\]\]", re.IGNORECASE)
_SCORE = re.compile(r"\bSCORE\s*:\s*(\d{1,2})\b", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def packaged_slots() -> tuple[tuple[str, str], ...]:
    """(opening, closing) delimiters around the untrusted placeholders of every packaged template."""
    pairs: dict[str, tuple[str, str]] = {}
    folder = resources.files("rubriclab.llm") / "templates"
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if f.name.endswith(".txt"):
            tpl = parse_prompt(f.name[:-4], f.read_text(encoding="utf-8"), f"rubriclab/llm/templates/{f.name}")
            for open_, close in slot_delimiters(tpl).values():
                pairs.setdefault(open_.lower(), (open_, close))
    return tuple(pairs.values())


def naive_read(text: str, slots: tuple[tuple[str, str], ...]) -> tuple[str, dict[str, str]]:
    """(text outside every slot, {opening delimiter: slot content}): each slot from its first opening
    delimiter to the first closing delimiter after it; an unclosed slot runs to the end."""
    low = text.lower()
    spans, contents = [], {}
    for open_, close in slots:
        i = low.find(open_.lower())
        if i < 0:
            continue
        start = i + len(open_)
        j = low.find(close.lower(), start)
        contents[open_] = text[start:(len(text) if j < 0 else j)]
        spans.append((i, len(text) if j < 0 else j + len(close)))
    outside, pos = [], 0
    for a, b in sorted(spans):
        if a > pos:
            outside.append(text[pos:a])
        pos = max(pos, b)
    outside.append(text[pos:])
    return "\n".join(outside), contents


def _side(open_: str) -> str | None:
    tag = re.fullmatch(r"<([\w.-]+)>", open_.strip())
    if tag:
        return _SIDES.get(tag.group(1).lower())
    m = _MARKER_SIDE.search(open_)
    return m.group(1).upper() if m else None


def _instructions(text: str) -> tuple[str | None, int | None]:
    """(instructed winner, instructed score) in ``text``: the last of each, or None."""
    text = html.unescape(text).replace("<\\/", "</")
    winners = [m.group(1).upper() for m in _VERDICT_TAG.finditer(text)]
    winners += [m.group(1).upper() for m in _BRACKETS.finditer(text)]
    scores = [int(m.group(1)) for m in _SCORE.finditer(text)]
    return (winners[-1] if winners else None), (scores[-1] if scores else None)


def _words(text: str) -> int:
    return len(text.split())


def longer_wins(a: str, b: str) -> str:
    """The honest pairwise rule: the response with more words wins (ties: A)."""
    return "A" if _words(a) >= _words(b) else "B"


def length_score(text: str) -> int:
    """The honest pointwise rule on 1–10: ``1 + min(8, words // 25)`` (never 10)."""
    return 1 + min(8, _words(text) // 25)


def injection_obeying_judge(*, obey_inside: bool = False, slots: tuple[tuple[str, str], ...] | None = None,
                            prefer: Callable[[str, str], str] = longer_wins,
                            score: Callable[[str], int] = length_score) -> Callable[[list[dict], dict], str]:
    """A responder for ``rubriclab.testing.scripted_model`` (see the module docstring). ``slots``: the tag
    pairs to read (default: the packaged templates' slots); marker lines are always read from the prompt.
    ``obey_inside``: also obey instructions inside the slots (a judge no delimiter can protect)."""

    def judge(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        text = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        pairs = (*(slots if slots is not None else packaged_slots()), *delimiters_of(text).markers)
        outside, contents = naive_read(text, pairs)
        by_side = {}
        for open_, content in contents.items():
            side = _side(open_)
            if side and side not in by_side:
                by_side[side] = content.strip()
        winner, forced = _instructions((text if obey_inside else outside) + "\n" + system)
        a, b = by_side.get("A", ""), by_side.get("B", "")
        schema = bool(params.get("response_format"))
        if '"trait_scores"' in text:  # per-rubric JSON: candidate (A) and baseline (B) on every trait
            w = winner or prefer(a, b)
            cand, base = ((10, 0) if winner == "A" else (0, 10)) if winner else ((8, 3) if w == "A" else (3, 8))
            block = {"candidate_reasoning": "compared", "candidate_adherence": cand, "baseline_reasoning": "compared",
                     "baseline_adherence": base}
            traits = next((c for o, c in contents.items() if o.lower() == "<traits_to_evaluate>"), "")
            ids = re.findall(r"^\s*-\s*(\w+)", traits, re.M)
            return json.dumps({"trait_scores": dict.fromkeys(ids, block), "overall_score": block})
        if "SCORE: <integer 0-10>" in text:  # Response A against Response B
            value = forced if forced is not None else (10 if winner == "A" else 0) if winner else (
                8 if prefer(a, b) == "A" else 2)
            return json.dumps({"answer": value}) if schema else f"REASONING: compared.\nSCORE: {value}"
        if "SCORE: <integer 1-10>" in text:  # one response
            value = forced if forced is not None else score(by_side.get("R", ""))
            return json.dumps({"answer": value}) if schema else f"REASONING: read it.\nSCORE: {value}"
        w = winner or prefer(a, b)
        if schema:
            return json.dumps({"answer": w})
        if "<verdict>a or b</verdict>" in text.lower():
            return f"<verdict>{w}</verdict>"
        if "[[A]]" in text and "[[B]]" in text:
            return f"Compared the answers. [[{w}]]"
        raise AssertionError(f"injection_obeying_judge: no answer format it knows in {text[:120]!r}")

    return judge
