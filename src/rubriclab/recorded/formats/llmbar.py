"""LLMBar's published layout, read as downloaded (Zeng et al. 2024, github.com/princeton-nlp/LLMBar, MIT)::

    <folder>/dataset.json                                  [{input, output_1, output_2, label: 1|2}, ...]
    <folder>/evaluators/<judge>/<strategy>/result.json     the dataset's items, each with "results"
    <folder>/evaluators/<judge>/<strategy>/statistics.json the publisher's figures (optional here)

An item's ``results`` is a list: first the texts the judge generated before judging (``[text, finish_reason]``
each: "Metrics" = its own evaluation questions, "Reference" = its own answer, "Metrics_Reference" = both, in
that order), then one dict ``{"swap = False": {...}, "swap = True": {...}}`` per judging round. ``swap = True``
shows output 2 first; its ``winner`` is already mapped back to the outputs (``"1"``/``"2"``), or ``null`` when
the publisher's parser found no verdict in the completion. "Swap" strategies have a second round (a synthesis)
only when the first round's two orders disagreed; the last round is the verdict. "Rating" strategies score each
output alone (``score_1``, ``score_2``: ``[text, finish_reason]``); there is no presentation order, and the
publisher's ``winner`` breaks equal scores toward the second-presented output and unparsable ones toward the
first. Here a rating's verdict is the larger score, ``tie`` for equal scores and ``none`` for a score that is not
an integer; ``llmbar_statistics`` applies the publisher's tie-breaks to reproduce ``statistics.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from rubriclab.errors import InputError
from rubriclab.recorded._agreement import cohen_kappa
from rubriclab.recorded._jsonfile import json_array, require
from rubriclab.recorded._records import (
    Judgment,
    RecordedPair,
    RecordedSet,
    license_name,
    meta_tuple,
    to_choice,
    to_verdict,
)
from rubriclab.recorded._registry import SourceContext, register_format

ANNOTATOR = "dataset"
STAT_KEYS = ("correct_False", "correct_True", "correct_average", "correct_both", "equal")
KAPPA_KEYS = ("kappa_False", "kappa_True", "kappa_average", "kappa_agreement")
SWAP_KEYS = {"original": "swap = False", "swapped": "swap = True"}
_GENERATED = ("Metrics", "Reference")
# the publisher's own questions about its strategies (the card's named contrasts, Δ = a − b within a judge):
# its general rules in the prompt or not, and the judge writing its own evaluation questions (a rubric) first
CONTRASTS = (("rules", "Vanilla", "Vanilla_NoRules"), ("own rubric first", "Metrics", "Vanilla"))


def _label(value: Any, path: Path, line: int) -> str:
    if value in (1, 2) and not isinstance(value, bool):
        return str(value)
    if value in ("1", "2"):
        return value
    raise InputError(f"label {value!r}", file=str(path), line=line, field="label", expected="1 or 2")


def read_pairs_llmbar(folder: Path) -> dict[str, RecordedPair]:
    """``dataset.json`` as pairs with ids ``"0"``, ``"1"``, … (the item's position)."""
    path = folder / "dataset.json"
    pairs = {}
    for i, (line, item) in enumerate(json_array(path)):
        item = require(item, ("input", "output_1", "output_2", "label"), file=path, line=line, what=f"item {i}")
        pairs[str(i)] = RecordedPair(id=str(i), labels=((ANNOTATOR, _label(item["label"], path, line)),),
                                     prompt=str(item["input"]), output_1=str(item["output_1"]),
                                     output_2=str(item["output_2"]))
    return pairs


def _completion(value: Any, path: Path, line: int, where: str) -> tuple[str, str | None]:
    if not (isinstance(value, list) and len(value) == 2):
        raise InputError(f"{where} is {type(value).__name__} {str(value)[:60]!r}", file=str(path), line=line,
                         expected="[completion text, finish reason]")
    text, finish = value
    return ("" if text is None else str(text)), (str(finish) if finish not in (None, "") else None)


def _winner(value: Any, path: Path, line: int, where: str) -> str:
    if value is None:
        return "none"
    if value in ("1", "2"):
        return value
    raise InputError(f"{where} winner {value!r}", file=str(path), line=line, expected='"1", "2" or null')


def _score(text: str) -> int | None:
    try:  # exactly the publisher's int(): no digit is fished out of prose
        return int(text)
    except ValueError:
        return None


def _rating(final: dict, path: Path, line: int, base: dict[str, Any]) -> list[Judgment]:
    s1_text, f1 = _completion(final.get("score_1"), path, line, "score_1")
    s2_text, f2 = _completion(final.get("score_2"), path, line, "score_2")
    s1, s2 = _score(s1_text), _score(s2_text)
    raw = f"output_1: {s1_text}\noutput_2: {s2_text}"
    finish = f1 if f1 == f2 else (f"{f1}/{f2}" if (f1 or f2) else None)
    out = []
    for order in SWAP_KEYS:
        first, second = (s1, s2) if order == "original" else (s2, s1)
        if first is None or second is None:
            verdict, score = "none", None
        else:
            verdict = "first" if first > second else "second" if second > first else "tie"
            score = float(first - second)
        out.append(Judgment(order=order, verdict=verdict, raw=raw, finish_reason=finish, score=score,
                            meta=meta_tuple({"mode": "rating"}), **base))
    return out


def _judgments(item: dict, pair_id: str, judge: str, strategy: str, path: Path, line: int) -> list[Judgment]:
    results = item["results"]
    if not isinstance(results, list) or not results or not isinstance(results[-1], dict):
        raise InputError(f"item {pair_id}: 'results' does not end with a judging round", file=str(path), line=line,
                         field="results", expected="[generated texts..., {'swap = False': ..., 'swap = True': ...}]")
    aux = [_completion(r, path, line, "a generated text") for r in results if not isinstance(r, dict)]
    rounds = [r for r in results if isinstance(r, dict)]
    kinds = tuple(t.lower() for t in strategy.split("_") if t in _GENERATED)
    if len(kinds) != len(aux):
        kinds = tuple(f"generated_{i + 1}" for i in range(len(aux)))
    base = {"pair_id": pair_id, "judge": judge, "condition": strategy,
            "generated": tuple(t for t, _ in aux), "generated_kinds": kinds}
    final = rounds[-1]
    for key in SWAP_KEYS.values():
        if not isinstance(final.get(key), dict):
            raise InputError(f"item {pair_id}: the last round has no '{key}'", file=str(path), line=line,
                             field=key, expected="a dict with the winner of that order")
    if "score_1" in final or "score_2" in final:
        return _rating(final, path, line, base)
    out = []
    for order, key in SWAP_KEYS.items():
        text, finish = _completion(final[key].get("completion"), path, line, f"'{key}' completion")
        choice = _winner(final[key].get("winner"), path, line, f"'{key}'")
        extra: dict[str, Any] = {}
        generated, kinds = base["generated"], base["generated_kinds"]
        if len(rounds) > 1:  # swap-and-synthesize: the first round's explanations were shown to the judge
            first = rounds[0]
            extra = {"synthesized": "yes"}
            generated = generated + tuple(_completion(first.get(k, {}).get("completion"), path, line,
                                                      f"first round '{k}' completion")[0] for k in SWAP_KEYS.values())
            kinds = kinds + ("first_round_original", "first_round_swapped")
            for o, k in SWAP_KEYS.items():
                extra[f"first_round_{o}"] = _winner(first.get(k, {}).get("winner"), path, line, f"first round '{k}'")
        out.append(Judgment(pair_id=pair_id, judge=judge, condition=strategy, order=order,
                            verdict=to_verdict(order, choice), raw=text, finish_reason=finish, generated=generated,
                            generated_kinds=kinds, meta=meta_tuple(extra)))
    return out


def read_llmbar(folder: str | Path, *, name: str | None = None, judges: Iterable[str] | None = None,
                conditions: Iterable[str] | None = None) -> RecordedSet:
    """Every ``evaluators/<judge>/<strategy>/result.json`` under ``folder`` (optionally only some judges or
    strategies) as judgments of ``dataset.json``'s pairs; each ``statistics.json`` found is kept in
    ``extras["statistics"][(judge, strategy)]`` for ``llmbar_check``."""
    folder = Path(folder)
    pairs = read_pairs_llmbar(folder)
    ev = folder / "evaluators"
    if not ev.is_dir():
        raise InputError("no evaluators/ folder", file=str(folder),
                         expected="LLMBar's layout: dataset.json and evaluators/<judge>/<strategy>/result.json")
    keep_j = set(judges) if judges else None
    keep_c = set(conditions) if conditions else None
    judgments: list[Judgment] = []
    statistics: dict[tuple[str, str], dict[str, Any]] = {}
    for result in sorted(ev.glob("*/*/result.json")):
        strategy, judge = result.parent.name, result.parent.parent.name
        if (keep_j and judge not in keep_j) or (keep_c and strategy not in keep_c):
            continue
        items = json_array(result)
        if len(items) != len(pairs):
            raise InputError(f"{len(items)} items but dataset.json has {len(pairs)}", file=str(result),
                             expected="one result per dataset item, in the dataset's order")
        for i, (line, item) in enumerate(items):
            item = require(item, ("input", "output_1", "output_2", "results"), file=result, line=line,
                           what=f"item {i}")
            pair = pairs[str(i)]
            if item["input"] != pair.prompt or item["output_1"] != pair.output_1 or item["output_2"] != pair.output_2:
                raise InputError(f"item {i} is not dataset.json's item {i}", file=str(result), line=line,
                                 expected="the dataset's items in the dataset's order")
            judgments += _judgments(item, str(i), judge, strategy, result, line)
        stats_path = result.with_name("statistics.json")
        if stats_path.is_file():
            import json

            try:
                statistics[(judge, strategy)] = json.loads(stats_path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise InputError(f"invalid JSON: {exc}", file=str(stats_path), expected="a JSON object") from None
    if not judgments:
        raise InputError("no result.json matched", file=str(ev),
                         expected="evaluators/<judge>/<strategy>/result.json" + (" for the judges/conditions asked"
                                                                                if keep_j or keep_c else ""))
    ratings = sorted({j.condition for j in judgments if j.meta_value("mode") == "rating"})
    notes = ["Verdicts are the publisher's parse of each completion (its `winner` field); a completion it found "
             "no verdict in is `none` (counted wrong), its text kept.",
             "Strategies (LLMBar's names): Vanilla_NoRules asks for the better output plainly; Vanilla, and every "
             "strategy without the _NoRules suffix, adds LLMBar's general rules for judging; Metrics: the judge first "
             "writes its own question-specific evaluation questions (a rubric), then judges; Reference: it first "
             "writes its own answer; CoT: it explains before its verdict; Swap: it judges both orders and "
             "synthesises where they disagree; Rating: it scores each output alone; 1shot/2shot: worked examples."]
    if ratings:
        notes.append(f"Rating strategies ({', '.join(ratings)}) score each output alone: the verdict is the larger "
                     "score, equal scores are a tie and a score that is not an integer is none. LLMBar's own "
                     "statistics instead credit equal scores to the second-presented output and unparsable ones to "
                     "the first (the publisher check applies that rule to reproduce them); averaged over the two "
                     "orders that gives a tie half credit, so with recorded.tie_credit 0.5 the card's accuracy equals "
                     "LLMBar's correct_average for these strategies too.")
    return RecordedSet(
        name=name or folder.name, format="llmbar", path=str(folder), pairs=pairs, judgments=judgments,
        provenance="LLMBar (Zeng et al., ICLR 2024; github.com/princeton-nlp/LLMBar): the judges' published "
                   "completions and verdicts, read from the publisher's files",
        license=license_name(folder), label_rule="the dataset's label (one gold label per pair; no ties)",
        notes=notes, extras={"statistics": statistics, "contrasts": CONTRASTS},
    )


# -- the publisher's figures --------------------------------------------------------------------------------------
def publisher_winner(j: Judgment) -> str | None:
    """The publisher's ``winner`` for a judgment: its choice, with a rating's tie-breaks (equal scores → the
    second-presented output, an unparsable score → the first); ``None`` for none."""
    verdict = j.verdict
    if j.meta_value("mode") == "rating":
        verdict = {"tie": "second", "none": "first"}.get(verdict, verdict)
    choice = to_choice(j.order, verdict)
    return None if choice == "none" else choice


def _pct(count: int, n: int) -> str:
    return f"{count} / {n} = {count / n * 100}%"


def llmbar_statistics(judgments: list[Judgment], pairs: dict[str, RecordedPair]) -> dict[str, Any]:
    """LLMBar's ``statistics.json`` figures for one judge × strategy, by the publisher's definitions: over the
    dataset's n pairs, ``correct_<swap>`` counts pairs whose winner in that order equals the label (a missing
    winner is wrong), ``correct_average`` is their mean, ``correct_both`` counts pairs right in both orders,
    ``equal`` pairs whose two winners are equal (two missing winners are equal). Formatted as the publisher
    formats them. The ``kappa_*`` reproduce the publisher's script, which encodes a winner ``"2"`` (and a missing
    one) as 0 and compares with labels 1/2 — so they are not Cohen's κ between verdict and label."""
    by: dict[str, dict[str, str | None]] = {}
    for j in judgments:
        by.setdefault(j.pair_id, {})[j.order] = publisher_winner(j)
    ids = sorted(by, key=lambda s: (len(s), s))
    n = len(ids)
    if n == 0:
        raise InputError("no judgments", field="judgments", expected="the judgments of one judge and strategy")
    c_f = c_t = both = equal = 0
    y_f, y_t, y = [], [], []
    for pid in ids:
        label = pairs[pid].label
        w_f, w_t = by[pid].get("original"), by[pid].get("swapped")
        c_f += w_f == label
        c_t += w_t == label
        both += (w_f == label) and (w_t == label)
        equal += w_f == w_t
        y_f.append(int(w_f) if w_f in ("0", "1") else 0)
        y_t.append(int(w_t) if w_t in ("0", "1") else 0)
        y.append(int(label) if label in ("1", "2") else 0)
    out: dict[str, Any] = {
        "correct_False": _pct(c_f, n), "correct_True": _pct(c_t, n),
        "correct_average": f"{(c_f + c_t) / 2 / n * 100}%", "correct_both": _pct(both, n), "equal": _pct(equal, n),
    }
    k_f, k_t = cohen_kappa(np.array(y_f), np.array(y)), cohen_kappa(np.array(y_t), np.array(y))
    out.update(kappa_False=k_f, kappa_True=k_t, kappa_average=(k_f + k_t) / 2,
               kappa_agreement=cohen_kappa(np.array(y_f), np.array(y_t)))
    return out


def llmbar_check(rs: RecordedSet, *, kappa_tolerance: float = 1e-9) -> list[dict[str, Any]]:
    """Every figure of every ``statistics.json`` read with ``rs`` against ``llmbar_statistics`` of the same
    judge × strategy: one row per (judge, strategy, key) with published, reproduced and match (strings equal;
    κ within ``kappa_tolerance``)."""
    stats = rs.extras.get("statistics") or {}
    by: dict[tuple[str, str], list[Judgment]] = {}
    for j in rs.judgments:
        by.setdefault((j.judge, j.condition), []).append(j)
    rows = []
    for (judge, strategy), published in sorted(stats.items()):
        mine = llmbar_statistics(by.get((judge, strategy), []), rs.pairs)
        for key in (*STAT_KEYS, *KAPPA_KEYS):
            if key not in published:
                continue
            got, want = mine[key], published[key]
            if key in KAPPA_KEYS:
                ok = isinstance(want, (int, float)) and abs(float(got) - float(want)) <= kappa_tolerance
            else:
                ok = got == want
            rows.append({"judge": judge, "condition": strategy, "key": key, "published": want,
                         "reproduced": got, "match": bool(ok)})
    return rows


@register_format("llmbar", what="LLMBar's folder as downloaded: dataset.json and evaluators/<judge>/<strategy>/result.json")
def _llmbar_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_llmbar(ctx.path, name=ctx.name, judges=s.judges, conditions=s.conditions)
