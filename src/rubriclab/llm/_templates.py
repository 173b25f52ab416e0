"""Prompt templates: text files in the package (or a user's folder), named placeholders.

A file may split into ``[system]`` and ``[user]`` sections (lines holding only that marker).
Each known prompt declares its placeholders; a file that lacks one (or adds an unknown one) is an
error when it is loaded, not when the first call is made.

Untrusted text sits in delimited slots. Prompts paste untrusted text into templates: pair prompts and
responses, criterion descriptions from discovered rubrics, attacker replies, paraphrases, rubric texts,
audit cases. Every placeholder that carries such text sits in a *slot* between an explicit opening and
closing delimiter, and the template's instructions say that text inside the slots is data, never
instructions. A delimiter is either

* a tag pair ``<response_a>`` … ``</response_a>`` (a tag without spaces or attributes), or
* a pair of marker lines that are the same but for START/BEGIN in the first and END in the second:
  ``[The Start of Assistant A's Answer]`` … ``[The End of Assistant A's Answer]``,
  ``=== RUBRIC START ===`` … ``=== RUBRIC END ===`` (a bare one-word line is not a marker).

Placeholders that carry trusted configuration need no slot: ``TRUSTED_PLACEHOLDERS`` (snake_case
criterion ids, which the rubric records validate, numbers, the human's winner letter, strategy and
design-property texts from the code, code-built JSON skeletons and constraint lists) and, per prompt,
``TRUSTED_IN`` (a placeholder that IS the instruction, e.g. drift_rewrite's ``{instruction}``).
``undelimited_placeholders(template)`` lists the untrusted placeholders of a template that sit in no slot
(the packaged templates have none; a user's template with some gets an ``UndelimitedPlaceholderWarning``).

Escaping rule — one rule, in one function (``escape_value``), applied by ``PromptTemplate.render`` to every
untrusted value and, through ``escape_for``, by ``rubriclab.judging`` to the values it fills into a user's
judge template: a value cannot close (or open) a slot of the template it is pasted into.

* Every tag of the template — ``<name>`` or ``</name>`` for each tag name the template uses anywhere
  (slots and output formats alike, e.g. ``<verdict>``), compared case-insensitively and also with spaces
  or attributes inside (``</ Response_A >``) — gets its angle brackets written as entities:
  ``</response_a>`` → ``&lt;/response_a&gt;``.
* Every marker line of the template, wherever it occurs in the value (compared case-insensitively, any
  run of white space matching any run, straight and curly apostrophes alike), gets `` (quoted)`` before
  its closing punctuation: ``[The End of Assistant A's Answer]`` → ``[The End of Assistant A's Answer
  (quoted)]``, ``=== RUBRIC END ===`` → ``=== RUBRIC END (quoted) ===`` (a marker with no closing
  punctuation gets it after its first word).

Look-alikes count: a delimiter is also found in the value's *folded* view — each character NFKC-normalised
(fullwidth ``＜／response_b＞`` reads ``</response_b>``), then mapped to its prototype in Unicode's confusables
(UTS #39 skeleton, from the ``confusable_homoglyphs`` data) when that is ASCII (a Cyrillic ``е`` reads ``e``,
``‹`` reads ``<``, the modifier apostrophe ``ʼ`` and the prime ``′`` read ``'``), and invisible ones
(zero-width spaces and joiners, soft hyphens, bidi controls, variation selectors: Unicode format characters)
dropped, so ``</respon\u200bse_b>`` and ``‹/rеsponse_b>`` read ``</response_b>`` too. ASCII characters are
never mapped (``0`` and ``O`` stay apart), so an ASCII value is checked as it is. Such a look-alike is replaced by its folded form, escaped as above
(``＜/response_b＞`` → ``&lt;/response_b&gt;``); the value is not normalised anywhere else.

Nothing else in a value changes: a value that holds none of its template's delimiters (nor a look-alike of
one) is pasted verbatim (so its cached calls stay valid). Trusted values are pasted as they are.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rubriclab.errors import TemplateError

# prompt name -> placeholders its file must contain (later stages register theirs here)
PROMPTS: dict[str, frozenset[str]] = {
    "judge_direct": frozenset({"rubric", "prompt", "response_a", "response_b"}),
    "judge_no_rubric": frozenset({"prompt", "response_a", "response_b"}),
    "pointwise_yes_no": frozenset({"criterion", "prompt", "response"}),
    "pointwise_score": frozenset({"criterion_id", "criterion", "prompt", "response"}),
    "discover_extract": frozenset({"prompt", "response_a", "response_b", "winner", "min_criteria", "max_criteria"}),
    "discover_subgroup": frozenset({"rubrics_text"}),
    "discover_describe": frozenset({"rubrics_text"}),
    "task_criteria": frozenset({"task", "k"}),
    "judge_per_rubric": frozenset({"prompt", "response_a", "response_b", "traits", "trait_template"}),
    "audit_pairwise_score": frozenset({"criterion_id", "criterion", "prompt", "response_a", "response_b"}),
    "audit_paraphrase": frozenset({"criterion"}),
    "audit_structure": frozenset({"criterion_id", "criterion", "property_name", "property_description"}),
    "audit_applicability": frozenset({"criterion_id", "criterion", "prompt"}),
    "audit_attacker": frozenset({"criterion_id", "criterion", "prompt", "strategy", "strategy_description"}),
    # reference_section/calibration: the paper's "Reference (good) Response" block for attacks, a neutral
    # one (or none) for the baseline pool of genuine responses
    "audit_verifier": frozenset({"criterion_id", "criterion", "prompt", "response", "reference_section",
                                 "calibration"}),
}


# placeholders that carry trusted configuration, in every prompt: no slot, no escaping
TRUSTED_PLACEHOLDERS: frozenset[str] = frozenset({
    "criterion_id",  # a snake_case id (rubrics._records validates it): cannot hold a delimiter or a sentence
    "min_criteria", "max_criteria", "k", "max_words",  # numbers
    "winner",  # the human's letter, A or B
    "strategy", "strategy_description", "property_name", "property_description", "calibration",  # code texts
    "trait_template", "operators", "constraints",  # code-built from ids and the operator library
    "task",  # the user's own task description (params.yaml)
})
# per prompt: a placeholder that IS the instruction the model is to follow
TRUSTED_IN: dict[str, frozenset[str]] = {
    "drift_rewrite": frozenset({"instruction"}),
    "drift_random": frozenset({"guidelines"}),
}


class UndelimitedPlaceholderWarning(UserWarning):
    """A template pastes untrusted text outside any delimited slot (see ``undelimited_placeholders``)."""


def register_prompt(name: str, placeholders: set[str] | frozenset[str]) -> None:
    """Declare a prompt and the placeholders its template must hold."""
    PROMPTS[name] = frozenset(placeholders)


def placeholders_of(text: str) -> set[str]:
    """Named placeholders in a format string (``{{``/``}}`` are literal braces)."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str | None
    user: str
    source: str

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; a missing value is an error."""
        missing = PROMPTS.get(self.name, placeholders_of(self.user)) - set(values)
        if missing:
            raise TemplateError(f"no value for placeholder(s) {sorted(missing)}", file=self.source,
                                expected=f"values for {sorted(PROMPTS.get(self.name, ()))}")
        trusted = trusted_placeholders(self.name)
        delims = delimiters_of(self.text)
        values = {k: v if k in trusted or not isinstance(v, str) else escape_value(v, delims)
                  for k, v in values.items()}
        messages = []
        if self.system:
            messages.append({"role": "system", "content": self.system.format(**values)})
        messages.append({"role": "user", "content": self.user.format(**values)})
        return messages

    @property
    def text(self) -> str:
        """System and user text together (what the delimiters are read from)."""
        return "\n".join(t for t in (self.system, self.user) if t)


def parse_prompt(name: str, text: str, source: str) -> PromptTemplate:
    """Split sections and check placeholders against the prompt's declaration."""
    system, user, current = [], [], None
    lines = text.splitlines()
    if not any(line.strip() in ("[system]", "[user]") for line in lines):
        user, current = lines, "user"
    else:
        for line in lines:
            if line.strip() == "[system]":
                current = "system"
            elif line.strip() == "[user]":
                current = "user"
            elif current == "system":
                system.append(line)
            elif current == "user":
                user.append(line)
    sys_text = "\n".join(system).strip() or None
    user_text = "\n".join(user).strip()
    if not user_text:
        raise TemplateError("template has no [user] section", file=source, expected="a user message")
    try:
        found = placeholders_of(user_text) | (placeholders_of(sys_text) if sys_text else set())
    except ValueError as exc:
        raise TemplateError(f"malformed braces ({exc})", file=source, expected="{name} placeholders; {{ }} for literal braces") from None
    required = PROMPTS.get(name)
    if required is not None:
        missing, unknown = required - found, found - required
        if missing:
            raise TemplateError(f"template lacks placeholder(s) {', '.join('{' + m + '}' for m in sorted(missing))}",
                                file=source, expected=f"placeholders {', '.join('{' + r + '}' for r in sorted(required))}")
        if unknown:
            raise TemplateError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in sorted(unknown))}",
                                file=source, expected=f"only {', '.join('{' + r + '}' for r in sorted(required))}")
    return PromptTemplate(name=name, system=sys_text, user=user_text, source=source)


def load_prompt(name: str, directory: str | Path | None = None) -> PromptTemplate:
    """Load ``<name>.txt`` from ``directory`` (user overrides) or from the package's templates."""
    if directory is not None and (Path(directory) / f"{name}.txt").exists():
        path = Path(directory) / f"{name}.txt"
        prompt = parse_prompt(name, path.read_text(encoding="utf-8"), str(path))
        warn_undelimited(prompt, str(path))  # a user's override: warn, never refuse
        return prompt
    res = resources.files("rubriclab.llm") / "templates" / f"{name}.txt"
    if not res.is_file():
        known = sorted(p.name[:-4] for p in (resources.files("rubriclab.llm") / "templates").iterdir()
                       if p.name.endswith(".txt"))
        raise TemplateError(f"no prompt template named {name!r}", expected=f"one of {known}")
    return parse_prompt(name, res.read_text(encoding="utf-8"), f"rubriclab/llm/templates/{name}.txt")


# -- untrusted slots: delimiters, escaping, checks (see the module docstring) ----------------------------

_TAG = re.compile(r"<(/?)([A-Za-z][\w.-]*)>")  # a template's tags: no spaces, no attributes
_MARKER_WORD = re.compile(r"\b(start|begin)\b", re.IGNORECASE)
_APOSTROPHES = "'\u2019"


@dataclass(frozen=True)
class Delimiters:
    """What can open or close a slot of a template: its tag names and its (opening, closing) marker lines."""

    tags: frozenset[str]
    markers: tuple[tuple[str, str], ...]


def trusted_placeholders(name: str | None) -> frozenset[str]:
    """Placeholders of prompt ``name`` that carry trusted configuration (no slot, no escaping)."""
    return TRUSTED_PLACEHOLDERS | TRUSTED_IN.get(name or "", frozenset())


def _end_of(word: str) -> str:
    return "END" if word.isupper() else "End" if word[0].isupper() else "end"


def _norm_line(line: str) -> str:
    return " ".join(line.replace("\u2019", "'").split()).lower()


@functools.lru_cache(maxsize=256)
def delimiters_of(text: str) -> Delimiters:
    """The tag names and marker-line pairs of a template text (placeholders are not delimiters)."""
    tags = frozenset(m.group(2).lower() for m in _TAG.finditer(text))
    lines = [ln.strip() for ln in text.splitlines()]
    markers = []
    for i, line in enumerate(lines):
        if "{" in line or len(line.split()) < 2 and not re.search(r"[^\w\s]", line):
            continue
        m = _MARKER_WORD.search(line)
        if not m:
            continue
        close = line[:m.start()] + _end_of(m.group(1)) + line[m.end():]
        if any(_norm_line(later) == _norm_line(close) for later in lines[i + 1:]):
            markers.append((line, close))
    return Delimiters(tags=tags, markers=tuple(dict.fromkeys(markers)))


@functools.lru_cache(maxsize=512)
def _tag_pattern(tags: frozenset[str]) -> re.Pattern | None:
    if not tags:
        return None
    names = "|".join(re.escape(t) for t in sorted(tags, key=len, reverse=True))
    return re.compile(rf"<\s*/?\s*(?:{names})(?![\w.-])[^<>]*>", re.IGNORECASE)


@functools.lru_cache(maxsize=512)
def _marker_pattern(marker: str) -> re.Pattern:
    parts = []
    for token in marker.replace("\u2019", "'").split():
        parts.append("".join(f"[{_APOSTROPHES}]" if ch == "'" else re.escape(ch) for ch in token))
    body = r"\s+".join(parts)
    head = r"(?<!\w)" if marker[:1].isalnum() else ""
    tail = r"(?!\w)" if marker[-1:].isalnum() else ""
    return re.compile(head + body + tail, re.IGNORECASE)


def _quote_marker(found: str) -> str:
    m = re.match(r"^(.*?[\w)])(\W*)$", found, re.S)
    if m and m.group(2):
        return f"{m.group(1)} (quoted){m.group(2)}"
    first = re.search(r"\s", found)
    return f"{found[:first.start()]} (quoted){found[first.start():]}" if first else f"{found} (quoted)"


def _entities(found: str) -> str:
    return found.replace("<", "&lt;").replace(">", "&gt;")


def _invisible(ch: str) -> bool:
    """A character that renders as nothing and so can hide inside a delimiter: a format character (zero-width
    space/joiners, word joiner, soft hyphen, BOM, bidi controls), the combining grapheme joiner, a variation
    selector, a Hangul filler."""
    return (unicodedata.category(ch) == "Cf" or ch in "\u034f\u115f\u1160\u3164\uffa0"
            or "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef")


@functools.lru_cache(maxsize=8192)
def _prototype(ch: str) -> str:
    """A non-ASCII character's prototype in Unicode's confusables (confusables.txt, UTS #39) when that is ASCII
    text (Cyrillic ``а`` → ``a``, ``‹`` → ``<``, ``ʼ`` → ``'``), else the character itself."""
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(ch, greedy=True, preferred_aliases=[])
    targets = {h["c"] for h in found[0]["homoglyphs"] if h["c"].isascii()} if found else set()
    return targets.pop() if len(targets) == 1 else ch  # one prototype per character in the data


def _fold(value: str) -> tuple[str, list[int]]:
    """``value`` with each character NFKC-normalised and mapped to its ASCII prototype (``_prototype``), invisible
    ones dropped, and for each folded character the index of the character of ``value`` it came from."""
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(value):
        if ch.isascii():
            out.append(ch)
            origin.append(i)
        elif not _invisible(ch):
            folded = "".join(c if c.isascii() else _prototype(c) for c in unicodedata.normalize("NFKC", ch))
            out.append(folded)
            origin.extend([i] * len(folded))
    return "".join(out), origin


def _escape_lookalikes(value: str, delimiters: Delimiters) -> str:
    """``value`` with every look-alike of a delimiter (found in its folded view, see ``_fold``) replaced by the
    folded form, escaped; ``value`` itself when it holds none."""
    folded, origin = _fold(value)
    if folded == value:
        return value
    found: list[tuple[int, int, Any]] = []  # folded spans and how to escape them
    pattern = _tag_pattern(delimiters.tags)
    if pattern is not None:
        found += [(m.start(), m.end(), _entities) for m in pattern.finditer(folded)]
    for marker in {m for pair in delimiters.markers for m in pair}:
        found += [(m.start(), m.end(), _quote_marker) for m in _marker_pattern(marker).finditer(folded)]
    if not found:
        return value
    out, last, last_end = [], 0, -1
    for start, end, escape in sorted(found, key=lambda f: (f[0], -f[1])):
        if start < last_end:  # overlaps one already replaced
            continue
        lo, hi = origin[start], origin[end - 1] + 1  # the characters of ``value`` the span came from, whole
        head = folded[origin.index(lo):start]  # the rest of a character that folded to several
        tail_end = end
        while tail_end < len(folded) and origin[tail_end] < hi:
            tail_end += 1
        out += [value[last:lo], head, escape(folded[start:end]), folded[end:tail_end]]
        last, last_end = hi, end
    out.append(value[last:])
    return "".join(out)


def escape_value(value: str, delimiters: Delimiters) -> str:
    """``value`` with every delimiter of its template, and every look-alike of one, neutralised (the rule in the
    module docstring)."""
    pattern = _tag_pattern(delimiters.tags)
    if pattern is not None:
        value = pattern.sub(lambda m: _entities(m.group(0)), value)
    for marker in {m for pair in delimiters.markers for m in pair}:
        value = _marker_pattern(marker).sub(lambda m: _quote_marker(m.group(0)), value)
    if not value.isascii():
        value = _escape_lookalikes(value, delimiters)
    return value


def escape_for(template_text: str, value: str) -> str:
    """``value`` escaped against the delimiters of ``template_text`` (for templates filled outside ``render``,
    e.g. a user's pairwise judge template)."""
    return escape_value(value, delimiters_of(template_text))


def _fields(text: str) -> list[tuple[str, int]]:
    """(placeholder name, offset) for every ``{name}`` in a format string (``{{``/``}}`` are literal)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith(("{{", "}}"), i):
            i += 2
        elif text[i] == "{":
            j = text.find("}", i)
            if j < 0:
                break
            out.append((re.split(r"[!:]", text[i + 1:j], maxsplit=1)[0], i))
            i = j + 1
        else:
            i += 1
    return out


def _slot_at(text: str, pos: int, delims: Delimiters) -> tuple[str, str] | None:
    """The innermost (opening, closing) delimiter pair around offset ``pos`` of ``text``, or None."""
    best: tuple[int, str, str] | None = None
    for tag in delims.tags:
        opens = [m for m in re.finditer(rf"<{re.escape(tag)}>", text, re.IGNORECASE) if m.start() < pos]
        if not opens:
            continue
        o = opens[-1]
        closes = [m for m in re.finditer(rf"</{re.escape(tag)}>", text, re.IGNORECASE) if m.start() >= o.end()]
        if closes and closes[0].start() >= pos and (best is None or o.start() > best[0]):
            best = (o.start(), o.group(0), closes[0].group(0))
    lines, offset = [], 0
    for line in text.splitlines(keepends=True):
        lines.append((offset, line.strip()))
        offset += len(line)
    for open_, close in delims.markers:
        o = [off for off, ln in lines if off < pos and _norm_line(ln) == _norm_line(open_)]
        c_before = [off for off, ln in lines if o and o[-1] < off < pos and _norm_line(ln) == _norm_line(close)]
        c_after = [off for off, ln in lines if off > pos and _norm_line(ln) == _norm_line(close)]
        if o and not c_before and c_after and (best is None or o[-1] > best[0]):
            best = (o[-1], open_, close)
    return (best[1], best[2]) if best else None


def _sections(template: Any) -> tuple[list[str], frozenset[str]]:
    """(texts to check, trusted placeholder names) of a PromptTemplate, a JudgeTemplate or a text."""
    if isinstance(template, PromptTemplate):
        return [t for t in (template.system, template.user) if t], trusted_placeholders(template.name)
    if isinstance(template, str):
        return [template], TRUSTED_PLACEHOLDERS
    text = getattr(template, "text", None)
    if isinstance(text, str):  # a pairwise judge template: prompt and answers are all untrusted
        return [text], frozenset()
    raise TypeError(f"expected a PromptTemplate, a JudgeTemplate or a template text, got {type(template).__name__}")


def slot_delimiters(template: Any) -> dict[str, tuple[str, str]]:
    """Untrusted placeholder → the (opening, closing) delimiters of the slot it sits in (first occurrence)."""
    texts, trusted = _sections(template)
    out: dict[str, tuple[str, str]] = {}
    for text in texts:
        delims = delimiters_of(text)
        for name, pos in _fields(text):
            if name not in trusted and name not in out:
                slot = _slot_at(text, pos, delims)
                if slot is not None:
                    out[name] = slot
    return out


def undelimited_placeholders(template: Any) -> list[str]:
    """Untrusted placeholders of ``template`` (a PromptTemplate, a JudgeTemplate or a template text) that
    occur outside any delimited slot, sorted; ``[]`` when every untrusted text has its slot."""
    texts, trusted = _sections(template)
    bad = set()
    for text in texts:
        delims = delimiters_of(text)
        bad |= {name for name, pos in _fields(text) if name not in trusted and _slot_at(text, pos, delims) is None}
    return sorted(bad)


_WARNED: set[tuple[str, tuple[str, ...]]] = set()


def warn_undelimited(template: Any, where: str) -> list[str]:
    """Warn when a user's template pastes untrusted text outside any slot: once per prompt name (judge
    templates: once) and set of undelimited placeholders, so a search over many candidate templates with
    the same gap warns once, not once per candidate. Returns the undelimited placeholders."""
    bad = undelimited_placeholders(template)
    key = (template.name if isinstance(template, PromptTemplate) else "judge template", tuple(bad))
    if bad and key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"{where}: placeholder(s) {', '.join('{' + b + '}' for b in bad)} paste untrusted text outside "
                      "any delimited slot, so text in them can pose as instructions; wrap each in a tag pair "
                      "(<response_a>…</response_a>) or START/END marker lines (warned once per such gap)",
                      UndelimitedPlaceholderWarning, stacklevel=3)
    return bad
