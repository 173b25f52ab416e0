"""PandaLM's published test set and judges' verdicts (Wang et al. 2024, github.com/WeOpenML/PandaLM, Apache-2.0)::

    <folder>/testset-v1.json            [{idx, motivation_app, cmp_key, instruction, input, response1, response2,
                                          annotator1, annotator2, annotator3}, ...]   annotators: 0 tie, 1, 2
    <folder>/<judge>-testset-v1.json    [{idx, <x>_result, <x>_reason, <x>_reference}, ...] one file per judge

A judge's ``<x>_result`` is ``1``/``2`` (response 1 / 2 better), ``0`` or ``"Tie"`` (a tie); anything else (the
published gpt-3.5-turbo file has ``"garbage"`` where no verdict was parsed) is ``none``, counted wrong, its
reason kept. Response 1 was shown first (one presentation order: ``original``). The reference answer PandaLM
writes after its verdict is kept as generated text (kind ``reference``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubriclab.errors import InputError
from rubriclab.recorded._jsonfile import json_array, require
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, license_name, meta_tuple
from rubriclab.recorded._registry import SourceContext, register_format

TESTSET = "testset-v1.json"
ANNOTATORS = ("annotator1", "annotator2", "annotator3")
_LABELS = {0: "tie", 1: "1", 2: "2"}
_VERDICTS = {"1": "first", "2": "second", "0": "tie", "tie": "tie"}
CONDITION = "published"


def _annotator(value: Any, path: Path, line: int, key: str) -> str:
    if isinstance(value, bool) or value not in _LABELS:
        raise InputError(f"{key} is {value!r}", file=str(path), line=line, field=key, expected="0 (tie), 1 or 2")
    return _LABELS[value]


def read_pairs_pandalm(folder: Path) -> dict[str, RecordedPair]:
    """``testset-v1.json`` as pairs (id = ``idx``), labels from the three annotators."""
    path = folder / TESTSET
    pairs: dict[str, RecordedPair] = {}
    for line, item in json_array(path):
        item = require(item, ("idx", "instruction", "response1", "response2", *ANNOTATORS), file=path, line=line,
                       what="an item")
        pid = str(item["idx"])
        if pid in pairs:
            raise InputError(f"idx {pid} appears twice", file=str(path), line=line, field="idx",
                             expected="a unique idx per item")
        prompt = str(item["instruction"]) + (f"\n\n{item['input']}" if item.get("input") else "")
        pairs[pid] = RecordedPair(id=pid, labels=tuple((a, _annotator(item[a], path, line, a)) for a in ANNOTATORS),
                                  prompt=prompt, output_1=str(item["response1"]), output_2=str(item["response2"]),
                                  domain=str(item.get("motivation_app") or ""))
    return pairs


def _verdict(value: Any) -> str:
    if isinstance(value, bool):
        return "none"
    return _VERDICTS.get(str(value).strip().lower(), "none") if isinstance(value, (int, str)) else "none"


def _judge_file(path: Path, judge: str, pairs: dict[str, RecordedPair]) -> list[Judgment]:
    out = []
    seen: set[str] = set()
    for line, item in json_array(path):
        item = require(item, ("idx",), file=path, line=line, what="an item")
        keys = [k for k in item if k.endswith("_result")]
        if len(keys) != 1:
            raise InputError(f"{len(keys)} '*_result' fields", file=str(path), line=line,
                             expected="exactly one '<judge>_result' field per item")
        prefix = keys[0][: -len("_result")]
        pid = str(item["idx"])
        if pid not in pairs:
            raise InputError(f"idx {pid} is not in {TESTSET}", file=str(path), line=line, field="idx",
                             expected=f"an idx of {TESTSET}")
        if pid in seen:
            raise InputError(f"idx {pid} appears twice", file=str(path), line=line, field="idx",
                             expected="one verdict per item")
        seen.add(pid)
        value = item[keys[0]]
        reason = str(item.get(f"{prefix}_reason") or "")
        reference = str(item.get(f"{prefix}_reference") or "")
        verdict = _verdict(value)
        out.append(Judgment(pair_id=pid, judge=judge, condition=CONDITION, order="original", verdict=verdict,
                            raw=reason if reason else str(value), generated=(reference,) if reference else (),
                            generated_kinds=("reference",) if reference else (),
                            meta=meta_tuple({"result": value})))
    return out


def read_pandalm(folder: str | Path, *, name: str | None = None, judges: Iterable[str] | None = None) -> RecordedSet:
    """The test set and every ``<judge>-testset-v1.json`` beside it (optionally only some judges)."""
    folder = Path(folder)
    pairs = read_pairs_pandalm(folder)
    keep = set(judges) if judges else None
    judgments: list[Judgment] = []
    for path in sorted(folder.glob(f"*-{TESTSET}")):
        judge = path.name[: -len(f"-{TESTSET}")]
        if keep and judge not in keep:
            continue
        judgments += _judge_file(path, judge, pairs)
    if not judgments:
        raise InputError(f"no <judge>-{TESTSET} file", file=str(folder),
                         expected=f"{TESTSET} and one <judge>-{TESTSET} per judge")
    return RecordedSet(
        name=name or folder.name, format="pandalm", path=str(folder), pairs=pairs, judgments=judgments,
        provenance="PandaLM (Wang et al., ICLR 2024; github.com/WeOpenML/PandaLM): the human-annotated test set and "
                   "the judges' verdicts as published",
        license=license_name(folder),
        label_rule="label = the majority of the three annotators (0 = tie, a class of its own); a pair whose three "
                   "annotators all differ has no label",
        notes=["A judge's reply that is no verdict (gpt-3.5-turbo's 'garbage') is `none` and counts as wrong.",
               "Response 1 was always shown first: there is no swapped order, so position metrics are undefined."],
    )


@register_format("pandalm", what="PandaLM's data folder: testset-v1.json and <judge>-testset-v1.json")
def _pandalm_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_pandalm(ctx.path, name=ctx.name, judges=s.judges)
