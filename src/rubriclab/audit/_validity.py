"""Cheap checks on generated text before the audit uses it: a paraphrase must still say what its
original says, an attack must be a response. A text that fails is counted as a failure with its
reason, never used (a gibberish "paraphrase" cached as a criterion would measure nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from rubriclab.errors import ConfigError
from rubriclab.llm import embed_texts
from rubriclab.settings import AttackCheck, ParaphraseCheck

# audit.paraphrase_check / audit.attack_check: their one definition (and docs) in rubriclab.settings
PARAPHRASE_BOUNDS: dict[str, float] = ParaphraseCheck().model_dump()
ATTACK_BOUNDS: dict[str, float] = AttackCheck().model_dump()

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_VOWELS = set("aeiouyáéíóúàèìòùäëïöüâêîôûåæøœ")


def bounds_of(defaults: dict[str, float], given: dict[str, Any] | None, where: str) -> dict[str, float]:
    """``defaults`` updated with ``given``; an unknown key or a non-number is a ConfigError naming it."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(defaults)}")
    for k, v in given.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"{where}.{k}: {v!r}; expected a number")
    return {**defaults, **given}


def norm(text: str) -> str:
    """Lower-case words only: what "the same text" means for the copy checks."""
    return " ".join(_WORD.findall(text.lower()))


def gibberish_share(text: str) -> float:
    """Share of alphabetic words (≥3 letters, Latin script) with no vowel or a run of ≥5 consonants: ~0 for
    prose in Latin-script languages, ~1 for keyboard mash such as "hpdrsncl gnvprpf cnqjzzsrc"."""
    words = [w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w.isascii()]
    if not words:
        return 0.0
    bad = sum(1 for w in words if not (set(w) & _VOWELS) or re.search(r"[^aeiouy]{5,}", w))
    return bad / len(words)


def text_problem(text: str | None, *, min_words: int = 1, max_words: int | None = None) -> str | None:
    """Why ``text`` is not usable generated text ("empty", "too short", "too long", "gibberish"), or None."""
    if text is None or not text.strip():
        return "empty"
    n = len(text.split())
    if n < min_words:
        return "too short"
    if max_words is not None and n > max_words:
        return "too long"
    if gibberish_share(text) > 0.3:  # most words are not words
        return "gibberish"
    return None


def check_paraphrases(rows: Sequence[tuple[Any, str, str | None, str | None]], ctx: Any,
                      bounds: dict[str, float] | None = None) -> dict[Any, tuple[str | None, str | None]]:
    """``rows`` = (tag, original, candidate text or None, call error or None). Returns tag → (cleaned
    text, problem): problem None when the paraphrase is usable, else a short reason code for counting. Checks: a reply at all, length ratio to
    the original, not gibberish, not a copy, and — when ``ctx.embedder`` is set — cosine similarity to
    the original within [min_similarity, max_similarity)."""
    b = bounds_of(PARAPHRASE_BOUNDS, bounds, "audit.paraphrase_check")
    out: dict[Any, tuple[str | None, str | None]] = {}
    pending = []
    for tag, original, text, error in rows:
        if error is not None:
            out[tag] = (None, "no usable reply")  # the call or its parse failed
            continue
        text = (text or "").strip().strip('"').strip()
        problem = text_problem(text)
        if problem is None:
            ratio = len(text.split()) / max(1, len(original.split()))
            if not b["min_length_ratio"] <= ratio <= b["max_length_ratio"]:
                problem = "length ratio"
            elif norm(text) == norm(original):
                problem = "copy"
        out[tag] = (text, problem)
        if problem is None:
            pending.append((tag, original, text))
    if pending and ctx.embedder is not None:
        texts = [t for _, o, c in pending for t in (o, c)]
        X = embed_texts(texts, ctx.embedder, ctx.gateway.store, progress=ctx.progress, stage=ctx.gateway.stage)
        sims = np.sum(X[0::2] * X[1::2], axis=1)
        for (tag, _, text), sim in zip(pending, sims):
            if sim < b["min_similarity"]:
                out[tag] = (text, "meaning drifted")
            elif sim >= b["max_similarity"]:
                out[tag] = (text, "copy")
    return out


def template_markers(template_text: str) -> list[str]:
    """The fixed headings of a prompt template ("## Rubric:", "**Definition:**"): a reply that contains
    one has copied its instructions instead of answering. A heading ends where its placeholder or the
    placeholder's slot tag begins."""
    out = []
    for line in template_text.splitlines():
        head = re.split(r"[{<]", line, maxsplit=1)[0].strip()
        if line.lstrip().startswith(("#", "**")) and len(head) > 3:
            out.append(head)
    return out


def attack_problem(text: str | None, *, prompt: str, strategy_description: str,
                   bounds: dict[str, float] | None = None, markers: Sequence[str] = ()) -> str | None:
    """Why an attacker reply is not an attack response: empty, too short/long, gibberish, a copy of the
    prompt, or a copy of its own instructions (the strategy description, or one of the template's
    headings in ``markers``). None when usable."""
    b = bounds_of(ATTACK_BOUNDS, bounds, "audit.attack_check")
    problem = text_problem(text, min_words=int(b["min_words"]), max_words=int(b["max_words"]))
    if problem is not None:
        return problem
    body = norm(text or "")
    if body == norm(prompt):
        return "copy of the prompt"
    if (norm(strategy_description) and norm(strategy_description) in body) or any(m in (text or "") for m in markers):
        return "copy of the attack instructions"
    return None
