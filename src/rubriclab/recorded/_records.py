"""The record of one recorded judgment, the labelled pair it judged, and the set an importer returns.

Vocabulary (strings, so files and frames stay readable):

* ``verdict`` — what the judge said **as presented**: ``first`` | ``second`` | ``tie`` | ``none``. ``none`` is
  anything that is not a verdict (an empty reply, a refusal, text no parser of the publisher's read as a
  verdict, a score that is not a number): it is counted, its raw text kept, and never guessed into a verdict.
* ``order`` — ``original`` (output 1 shown first) | ``swapped`` (output 2 shown first).
* ``choice`` — the verdict mapped to the pair's outputs: ``1`` | ``2`` | ``tie`` | ``none``. In the original
  order ``first`` is ``1``; in the swapped order ``first`` is ``2``.
* a pair's labels — one per annotator, each ``1`` | ``2`` | ``tie``; the pair's ``label`` is the most frequent one
  when it is unique (the majority of three annotators), else ``None`` (no label: the pair is left out of every
  metric against the label, and counted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import InputError
from rubriclab.settings import RECORDED_FORMATS

VERDICTS = ("first", "second", "tie", "none")
ORDERS = ("original", "swapped")
CHOICES = ("1", "2", "tie", "none")
LABELS = ("1", "2", "tie")
FORMATS = RECORDED_FORMATS

_TO_CHOICE = {
    ("original", "first"): "1", ("original", "second"): "2",
    ("swapped", "first"): "2", ("swapped", "second"): "1",
}


def to_choice(order: str, verdict: str) -> str:
    """The verdict as presented, mapped to the pair's outputs (``1``/``2``/``tie``/``none``)."""
    if order not in ORDERS:
        raise InputError(f"order {order!r}", field="order", expected=f"one of {', '.join(ORDERS)}")
    if verdict not in VERDICTS:
        raise InputError(f"verdict {verdict!r}", field="verdict", expected=f"one of {', '.join(VERDICTS)}")
    return _TO_CHOICE.get((order, verdict), verdict)


def to_verdict(order: str, choice: str) -> str:
    """Inverse of ``to_choice``: the pair's output (``1``/``2``/``tie``/``none``) as presented in ``order``."""
    if choice not in CHOICES:
        raise InputError(f"choice {choice!r}", field="choice", expected=f"one of {', '.join(CHOICES)}")
    for (o, v), c in _TO_CHOICE.items():
        if o == order and c == choice:
            return v
    if order not in ORDERS:
        raise InputError(f"order {order!r}", field="order", expected=f"one of {', '.join(ORDERS)}")
    return choice


def plurality(labels: Iterable[str]) -> str | None:
    """The most frequent label when it is unique (with three annotators: the majority), else ``None``."""
    top = Counter(labels).most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


@dataclass(frozen=True)
class RecordedPair:
    """A judged pair: its id, the annotators' labels (``((annotator, label), ...)``), and, where the source has
    them, the prompt and both outputs (for the surface-bias analyses) and a domain."""

    id: str
    labels: tuple[tuple[str, str], ...] = ()
    prompt: str = ""
    output_1: str = ""
    output_2: str = ""
    domain: str = ""

    def __post_init__(self) -> None:
        for annotator, label in self.labels:
            if label not in LABELS:
                raise InputError(f"pair {self.id!r}: annotator {annotator!r} gave {label!r}", field="label",
                                 expected=f"one of {', '.join(LABELS)}")

    @cached_property  # a pair is frozen: its plurality once (the analyses ask it per judgment)
    def label(self) -> str | None:
        """The pair's label: the annotators' plurality (``plurality``), or ``None`` without one."""
        return plurality(label for _, label in self.labels)


@dataclass(frozen=True)
class Judgment:
    """One recorded judgment of one pair by one judge under one condition in one presentation order.

    ``raw`` is the judge's reply as recorded (kept whatever the verdict); ``generated`` holds text the judge
    wrote before its verdict (e.g. LLMBar's "Metrics": its own evaluation questions; "Reference": its own
    answer; a swap-and-synthesize round's first explanations), with ``generated_kinds`` naming each piece;
    ``score`` a number the judge stated (for a pointwise rating: the first presented output's score minus the
    second's); ``meta`` importer-specific facts as ``((key, value), ...)``."""

    pair_id: str
    judge: str
    condition: str
    order: str
    verdict: str
    raw: str = ""
    finish_reason: str | None = None
    generated: tuple[str, ...] = ()
    generated_kinds: tuple[str, ...] = ()
    score: float | None = None
    meta: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise InputError(f"judgment of pair {self.pair_id!r}: order {self.order!r}", field="order",
                             expected=f"one of {', '.join(ORDERS)}")
        if self.verdict not in VERDICTS:
            raise InputError(f"judgment of pair {self.pair_id!r}: verdict {self.verdict!r}", field="verdict",
                             expected=f"one of {', '.join(VERDICTS)}")

    @property
    def choice(self) -> str:
        """The verdict mapped to the pair's outputs (``to_choice``)."""
        return _TO_CHOICE.get((self.order, self.verdict), self.verdict)

    def meta_value(self, key: str, default: str | None = None) -> str | None:
        return dict(self.meta).get(key, default)


FRAME_COLUMNS = ("pair_id", "judge", "condition", "order", "verdict", "choice", "raw", "finish_reason", "generated",
                 "generated_kinds", "score", "meta")


class JudgmentColumns(Sequence):
    """The judgments of a large source held as columns (a DataFrame with ``FRAME_COLUMNS``, categoricals for the
    repeated strings) instead of one ``Judgment`` object each (≈ 2 KB): what an importer at scale returns as a
    RecordedSet's ``judgments``. It is a sequence of Judgments all the same — each made when asked for — so every
    consumer reads it; the analysis reads the columns themselves (``RecordedSet.frame``)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
        if missing:
            raise InputError(f"judgment columns lack {', '.join(missing)}", field=missing[0],
                             expected=", ".join(FRAME_COLUMNS))
        self.frame = frame.reset_index(drop=True)

    def __len__(self) -> int:
        return len(self.frame)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return JudgmentColumns(self.frame.iloc[i])
        r = self.frame.iloc[i]
        gen = "" if pd.isna(r["generated"]) else str(r["generated"])
        return Judgment(pair_id=str(r["pair_id"]), judge=str(r["judge"]), condition=str(r["condition"]),
                        order=str(r["order"]), verdict=str(r["verdict"]), raw="" if pd.isna(r["raw"]) else str(r["raw"]),
                        finish_reason=None if pd.isna(r["finish_reason"]) else str(r["finish_reason"]),
                        generated=(gen,) if gen else (), generated_kinds=("generated",) if gen else (),
                        score=None if pd.isna(r["score"]) else float(r["score"]),
                        meta=tuple(tuple(kv.split("=", 1)) for kv in str(r["meta"] or "").split(";") if "=" in kv))

    def __iter__(self):
        for i in range(len(self.frame)):
            yield self[i]

    def where(self, mask: Any) -> JudgmentColumns:
        return JudgmentColumns(self.frame[np.asarray(mask, dtype=bool)])


@dataclass
class RecordedSet:
    """What an importer returns: the pairs (by id), the judgments, and where they came from.

    ``provenance`` names the publisher / file / experiment; ``label_rule`` says how a pair's label is formed;
    ``notes`` are facts the card repeats (e.g. a publisher's tie-break rule, rows skipped and why);
    ``extras`` carries format-specific data for a publisher check (e.g. LLMBar's ``statistics.json`` figures)."""

    name: str
    format: str
    path: str
    pairs: dict[str, RecordedPair]
    judgments: list[Judgment]
    provenance: str = ""
    license: str = ""
    label_rule: str = ""
    notes: list[str] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.judgments, JudgmentColumns):
            self._check_columns()
            return
        seen: set[tuple[str, str, str, str]] = set()
        for j in self.judgments:
            if j.pair_id not in self.pairs:
                raise InputError(f"judgment of unknown pair {j.pair_id!r} (judge {j.judge!r}, condition "
                                 f"{j.condition!r})", file=self.path, expected="a pair id present in the pairs")
            key = (j.pair_id, j.judge, j.condition, j.order)
            if key in seen:
                raise InputError(f"pair {j.pair_id!r} judged twice by {j.judge!r} under {j.condition!r} in the "
                                 f"{j.order} order", file=self.path,
                                 expected="one judgment per pair, judge, condition and order")
            seen.add(key)

    def _check_columns(self) -> None:
        """``__post_init__``'s rules on columns: every pair known, one judgment per pair, judge, condition, order."""
        f = self.judgments.frame
        known = f["pair_id"].isin(pd.Index(list(self.pairs)))
        if not known.all():
            r = f[~known].iloc[0]
            raise InputError(f"judgment of unknown pair {r['pair_id']!r} (judge {r['judge']!r}, condition "
                             f"{r['condition']!r})", file=self.path, expected="a pair id present in the pairs")
        dup = f.duplicated(["pair_id", "judge", "condition", "order"])
        if dup.any():
            r = f[dup].iloc[0]
            raise InputError(f"pair {r['pair_id']!r} judged twice by {r['judge']!r} under {r['condition']!r} in the "
                             f"{r['order']} order", file=self.path,
                             expected="one judgment per pair, judge, condition and order")

    @property
    def judges(self) -> list[str]:
        if isinstance(self.judgments, JudgmentColumns):
            return sorted(map(str, pd.unique(self.judgments.frame["judge"])))
        return sorted({j.judge for j in self.judgments})

    @property
    def conditions(self) -> list[str]:
        if isinstance(self.judgments, JudgmentColumns):
            return sorted(map(str, pd.unique(self.judgments.frame["condition"])))
        return sorted({j.condition for j in self.judgments})

    def frame(self) -> pd.DataFrame:
        """One row per judgment with its pair's label: pair_id, judge, condition, order, verdict, choice, label,
        correct (choice == label; NaN without a label), raw, finish_reason, generated (joined), score."""
        labels = {pid: p.label for pid, p in self.pairs.items()}  # a pair's plurality once, not per judgment
        if isinstance(self.judgments, JudgmentColumns):
            f = self.judgments.frame
            out = f[list(FRAME_COLUMNS)].copy()
            codes, uniq = pd.factorize(out["pair_id"])  # a pair's label looked up once, not once per row
            of_pair = np.array([labels[str(u)] for u in uniq] + [None], dtype=object)
            out.insert(6, "label", of_pair[codes])
            choice, label = out["choice"].astype(str), out["label"]
            out.insert(7, "correct", np.where(label.isna(), np.nan, (choice == label.astype(str)).astype(float)))
            for col in ("raw", "generated", "generated_kinds", "meta"):
                out[col] = out[col].fillna("")
            return out
        rows = []
        for j in self.judgments:
            label = labels[j.pair_id]
            rows.append({
                "pair_id": j.pair_id, "judge": j.judge, "condition": j.condition, "order": j.order,
                "verdict": j.verdict, "choice": j.choice, "label": label,
                "correct": None if label is None else float(j.choice == label), "raw": j.raw,
                "finish_reason": j.finish_reason, "generated": "\n\n".join(j.generated),
                "generated_kinds": ",".join(j.generated_kinds), "score": j.score,
                "meta": ";".join(f"{k}={v}" for k, v in j.meta),
            })
        cols = ["pair_id", "judge", "condition", "order", "verdict", "choice", "label", "correct", "raw",
                "finish_reason", "generated", "generated_kinds", "score", "meta"]
        return pd.DataFrame(rows, columns=cols)

    def counts(self) -> dict[str, Any]:
        """Pairs, labelled pairs, judgments and their verdicts, per kind."""
        verdicts = (Counter(self.judgments.frame["verdict"].astype(str).value_counts().to_dict())
                    if isinstance(self.judgments, JudgmentColumns) else Counter(j.verdict for j in self.judgments))
        return {
            "pairs": len(self.pairs), "labelled_pairs": sum(p.label is not None for p in self.pairs.values()),
            "pairs_without_label": sum(p.label is None for p in self.pairs.values()),
            "judgments": len(self.judgments), "judges": len(self.judges), "conditions": len(self.conditions),
            **{f"verdict_{v}": int(verdicts.get(v, 0)) for v in VERDICTS},
        }


def license_name(folder: Path) -> str:
    """The licence of a shipped folder, from the first lines of its LICENSE file (``MIT``, ``Apache-2.0``, or the
    file's first line)."""
    path = Path(folder) / "LICENSE"
    if not path.is_file():
        return ""
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    head = " ".join(lines[:2])
    if head.startswith("MIT License"):
        return "MIT"
    if head.startswith("Apache License") and "Version 2.0" in head:
        return "Apache-2.0"
    return lines[0] if lines else ""


def meta_tuple(meta: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """A mapping as the sorted ``((key, value), ...)`` a frozen Judgment keeps."""
    return tuple(sorted((str(k), str(v)) for k, v in (meta or {}).items()))
