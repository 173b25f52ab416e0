"""A generic long table of recorded judgments: CSV, JSON lines (or a JSON array) or parquet, one row per judgment.

Columns (``*`` = required):

=================  ===================================================================================
``pair_id`` *      the judged pair
``judge`` *        the judge (model) that gave the verdict
``verdict`` / ``choice`` *  one of the two: ``verdict`` as presented (``first``, ``second``, ``tie``, ``none``;
                   ``A``/``B`` also read as first/second), or ``choice``, the pair's output it preferred (``1``,
                   ``2``, ``tie``, ``none``; ``output_1``/``output_2`` also read). An empty cell or any other
                   value is ``none``: counted, never guessed, the value kept as raw text
``condition``      strategy, rubric or template id (default ``default``)
``order``          ``original`` (output 1 shown first, the default) or ``swapped``
``label``          the pair's label (``1``, ``2``, ``tie``) from one annotator, and/or
``label.<name>``   one column per annotator (the pair's label is their majority)
``raw``            the judge's reply; ``finish_reason``; ``generated`` (text the judge wrote before its verdict);
                   ``score`` (a number)
``prompt``, ``output_1``, ``output_2``, ``domain``   the pair's texts (length and list biases need the outputs)
=================  ===================================================================================

A pair's label and texts may repeat on each of its rows but must not contradict each other. A bad value in a
required or typed column is an error naming the file, the line and the column.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rubriclab.data import read_rows
from rubriclab.errors import InputError
from rubriclab.recorded._records import LABELS, Judgment, RecordedPair, RecordedSet, to_verdict
from rubriclab.recorded._registry import SourceContext, register_format

_VERDICT_WORDS = {"first": "first", "second": "second", "tie": "tie", "none": "none", "a": "first", "b": "second"}
_CHOICE_WORDS = {"1": "1", "2": "2", "tie": "tie", "none": "none", "output_1": "1", "output_2": "2"}
_LABEL_WORDS = {"1": "1", "2": "2", "tie": "tie", "output_1": "1", "output_2": "2"}
PAIR_TEXT = ("prompt", "output_1", "output_2", "domain")


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _word(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).strip().lower()


def _label(v: Any, file: str, line: int, col: str) -> str:
    got = _LABEL_WORDS.get(_word(v))
    if got is None or got not in LABELS:
        raise InputError(f"label {v!r}", file=file, line=line, field=col, expected="1, 2 or tie")
    return got


def read_table(path: str | Path, *, name: str | None = None, default_condition: str = "default") -> RecordedSet:
    """A long table of judgments (columns in the module docstring) as a RecordedSet."""
    path = Path(path)
    file = str(path)
    rows = read_rows(path)
    if not rows:
        raise InputError("no rows", file=file, expected="one row per recorded judgment")
    cols = {k for _, r in rows for k in r}
    for col in ("pair_id", "judge"):
        if col not in cols:
            raise InputError("required column is missing", file=file, field=col,
                             expected="columns pair_id, judge and verdict or choice (see rubriclab.recorded.formats.table)")
    if ("verdict" in cols) == ("choice" in cols):
        raise InputError("has both or neither of 'verdict' and 'choice'", file=file, field="verdict",
                         expected="a 'verdict' column (as presented) or a 'choice' column (the pair's output)")
    label_cols = sorted(c for c in cols if c == "label" or c.startswith("label."))
    pair_fields: dict[str, dict[str, Any]] = {}
    pair_line: dict[str, int] = {}
    judgments: list[Judgment] = []
    not_verdicts = 0
    first_line: dict[tuple[str, str, str, str], int] = {}
    for line, row in rows:
        pid, judge = row.get("pair_id"), row.get("judge")
        for col, v in (("pair_id", pid), ("judge", judge)):
            if _blank(v):
                raise InputError("is empty", file=file, line=line, field=col, expected="a non-empty value")
        pid, judge = _word(pid) if isinstance(pid, (int, float)) else str(pid).strip(), str(judge).strip()
        order = "original" if _blank(row.get("order")) else _word(row["order"])
        if order not in ("original", "swapped"):
            raise InputError(f"order {row['order']!r}", file=file, line=line, field="order",
                             expected="original or swapped (empty = original)")
        condition = default_condition if _blank(row.get("condition")) else str(row["condition"]).strip()
        key = (pid, judge, condition, order)
        if key in first_line:
            raise InputError(f"pair {pid!r} judged again by {judge!r} under {condition!r} in the {order} order "
                             f"(first on line {first_line[key]})", file=file, line=line, field="pair_id",
                             expected="one row per pair, judge, condition and order")
        first_line[key] = line
        raw = "" if _blank(row.get("raw")) else str(row["raw"])
        if "verdict" in cols:
            value = row.get("verdict")
            verdict = "none" if _blank(value) else _VERDICT_WORDS.get(_word(value), None)
        else:
            value = row.get("choice")
            choice = "none" if _blank(value) else _CHOICE_WORDS.get(_word(value), None)
            verdict = None if choice is None else to_verdict(order, choice)
        if verdict is None:
            not_verdicts += 1
            verdict = "none"
            raw = raw or str(value)
        score = None
        if not _blank(row.get("score")):
            try:
                score = float(row["score"])
            except (TypeError, ValueError):
                raise InputError(f"score {row['score']!r}", file=file, line=line, field="score",
                                 expected="a number or empty") from None
        judgments.append(Judgment(
            pair_id=pid, judge=judge, condition=condition, order=order, verdict=verdict, raw=raw,
            finish_reason=None if _blank(row.get("finish_reason")) else str(row["finish_reason"]),
            generated=() if _blank(row.get("generated")) else (str(row["generated"]),),
            generated_kinds=() if _blank(row.get("generated")) else ("generated",), score=score))
        fields: dict[str, Any] = {k: str(row[k]) for k in PAIR_TEXT if not _blank(row.get(k))}
        for col in label_cols:
            if not _blank(row.get(col)):
                who = "label" if col == "label" else col.split(".", 1)[1]
                fields[f"label:{who}"] = _label(row[col], file, line, col)
        known = pair_fields.setdefault(pid, {})
        for k, v in fields.items():
            if k in known and known[k] != v:
                col = k.replace("label:", "label.") if k != "label:label" else "label"
                raise InputError(f"pair {pid!r} has {v!r} here but {known[k]!r} on line {pair_line[pid]}", file=file,
                                 line=line, field=col, expected="the same value on every row of a pair")
            known[k] = v
        pair_line.setdefault(pid, line)
    pairs = {pid: RecordedPair(id=pid, labels=tuple((k.split(":", 1)[1], v) for k, v in sorted(f.items())
                                                    if k.startswith("label:")),
                               **{k: f.get(k, "") for k in PAIR_TEXT}) for pid, f in pair_fields.items()}
    notes = []
    if not_verdicts:
        notes.append(f"{not_verdicts} row(s) held a value that is not a verdict: read as none (counted), the value "
                     "kept as raw text.")
    rule = ("label = the majority of the annotators' label columns (" + ", ".join(label_cols) + "); a pair "
            "without a majority has no label") if len(label_cols) > 1 else (
        "label = the 'label' column" if label_cols else "no label column: nothing is compared with a label")
    return RecordedSet(name=name or path.stem, format="table", path=file, pairs=pairs, judgments=judgments,
                       provenance=f"a table of recorded judgments ({path.name})", label_rule=rule, notes=notes)


@register_format("table", what="a long table of judgments: CSV, JSON lines or parquet, one row per judgment")
def _table_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_table(ctx.path, name=ctx.name)
