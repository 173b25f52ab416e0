"""Rubric-item data: one row per (record, rubric item), from HealthBench- and ResearchRubrics-style files.

Source shapes (read from the public sources, never fetched at run time):

* **HealthBench** (openai/simple-evals ``healthbench_eval.py`` JSON lines; mirrors such as the
  healthbenchviewer dumps): ``prompt_id`` (mirrors: ``id``), ``prompt`` -- a list of ``{role, content}``
  messages (mirrors: the first user turn as text plus the list under ``messages``), ``rubrics`` -- a list of
  ``{criterion, points, tags}`` where negative ``points`` mark an undesirable behaviour, ``example_tags``,
  and ``ideal_completions_data`` (``{ideal_completion, ideal_completions_group, ...}`` or null). The
  meta-eval files also carry a graded ``completion`` (text or a message list).
* **ResearchRubrics** (ScaleAI, arXiv:2511.07685; Hugging Face ``ScaleAI/researchrubrics``,
  ``processed_data.jsonl``, 101 tasks): ``sample_id``, ``prompt`` (text), ``domain``, ``conceptual_breadth``,
  ``logical_nesting``, ``exploration`` and ``rubrics`` -- a list of ``{criterion, weight, axis}`` with a signed
  ``weight`` (negative = penalty; the official compliance score is ``sum(w*score)/sum(w>0)``). Field names
  as used by the dataset's downloaders (``load_dataset("ScaleAI/researchrubrics")``, ``example["rubrics"]``)
  and described in the integration notes of projects pinning dataset revision ``85de311``. The release
  carries no responses; a record may add ``response`` (the demo file does) and it is then kept. The older
  pipeline format of the scaleapi/researchrubrics repository (``DATA_FORMAT.md``: ``task_name``, rubric
  items ``{title, weight, category}``) is read too: ``title``/``category`` stand in for ``criterion``/``axis``.

Every malformed record is an :class:`~rubriclab.errors.InputError` naming file, line and field. The only
counted drop is an exact duplicate record (same id, same content), reported in ``df.attrs["drops"]``.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab.data import jsonl_rows, render_messages
from rubriclab.errors import ConfigError, InputError
from rubriclab.paths import display_path
from rubriclab.settings import ITEM_FORMATS as SCHEMA_ITEM_FORMATS

RUBRIC_ITEM_COLUMNS = [
    "item_id",
    "dataset",
    "record_id",
    "prompt",
    "criterion",
    "points",
    "tags",
    "response",
    "response_source",
]

ITEM_FORMATS = SCHEMA_ITEM_FORMATS
DEMO_ITEM_SETS = ("healthbench", "researchrubrics")
PAIR_SIDES = ("chosen", "rejected")


# --- reading --------------------------------------------------------------------------------------------


def _records(path: Path) -> list[tuple[int, dict]]:
    """``(line, record)`` from a JSON-lines file (or a JSON array); strict UTF-8, ``.gz`` allowed."""
    if not path.is_file():
        raise InputError("file not found", file=str(path), expected="an existing .jsonl or .json file")
    raw = path.read_bytes()
    if path.name.lower().endswith(".gz"):
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"bytes are not valid UTF-8 (byte {exc.start})", file=str(path), line=line, expected="UTF-8 text"
        ) from None
    text = text.lstrip("\ufeff")
    if text.lstrip().startswith("["):  # a JSON array of records
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise InputError(
                f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno, expected="a JSON array of objects"
            ) from None
        out = []
        for i, item in enumerate(items, start=1):  # "line" is the record's 1-based index here
            if not isinstance(item, dict):
                raise InputError(
                    f"record {i} is a JSON {type(item).__name__}", file=str(path), line=i, expected="an object"
                )
            out.append((i, item))
        return out
    return jsonl_rows(text, path)  # the data package's JSON-lines reader: same errors as pair files


def detect_format(record: dict) -> str | None:
    """``healthbench`` / ``researchrubrics`` from a record's keys, or None when neither fits."""
    items = record.get("rubrics")
    first = items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else {}
    if "points" in first:
        return "healthbench"
    if "weight" in first:
        return "researchrubrics"
    if {"prompt_id", "messages", "example_tags", "ideal_completions_data", "completion"} & record.keys():
        return "healthbench"
    if {"sample_id", "task_name", "conceptual_breadth", "logical_nesting"} & record.keys():
        return "researchrubrics"
    return None


class _Ctx:
    def __init__(self, file: str, line: int) -> None:
        self.file, self.line = file, line

    def err(self, problem: str, field: str, expected: str) -> InputError:
        return InputError(problem, file=self.file, line=self.line, field=field, expected=expected)


def _text(ctx: _Ctx, value: Any, field: str) -> str:
    if isinstance(value, list):  # content as a list of {type, text} parts
        parts = []
        for part in value:
            if not isinstance(part, dict) or (part.get("type") or "text") != "text":
                raise ctx.err("content part is not text", field, "text content")
            parts.append(str(part.get("text") or ""))
        value = "".join(parts)
    if not isinstance(value, str) or not value.strip():
        shown = "empty" if isinstance(value, str) else f"a {type(value).__name__}"
        raise ctx.err(f"value is {shown}", field, "non-empty text")
    return value


def _messages(ctx: _Ctx, value: Any, field: str) -> list[tuple[str, str]]:
    if not isinstance(value, list) or not value:
        raise ctx.err("not a non-empty list", field, "a list of {role, content} messages")
    out = []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise ctx.err(f"message {i} has no role", field, "a list of {role, content} messages")
        out.append((msg["role"].lower(), _text(ctx, msg.get("content"), f"{field}[{i}].content")))
    return out


def _record_id(ctx: _Ctx, record: dict, keys: Sequence[str]) -> str:
    for key in keys:
        value = record.get(key)
        if value is not None and str(value).strip():
            return str(value)
    raise ctx.err("record has no id", keys[0], "a non-empty id (" + " or ".join(keys) + ")")


def _points(ctx: _Ctx, value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ctx.err(f"points are {value!r}", field, "a finite number")
    return float(value)


def _tags(ctx: _Ctx, value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ctx.err(f"tags are {value!r}", field, "a list of strings")
    return list(value)


def _rubric_list(ctx: _Ctx, record: dict) -> list:
    items = record.get("rubrics")
    if isinstance(items, str):  # compiled CSV/parquet dumps store the list as a JSON string
        try:
            items = json.loads(items)
        except ValueError:
            raise ctx.err("not valid JSON", "rubrics", "a list of rubric items") from None
    if not isinstance(items, list) or not items:
        raise ctx.err("record has no rubric items", "rubrics", "a non-empty list of rubric items")
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            raise ctx.err(f"item is a {type(item).__name__}", f"rubrics[{k}]", "an object")
    return items


def _healthbench(ctx: _Ctx, record: dict) -> dict:
    rid = _record_id(ctx, record, ("prompt_id", "id"))
    prompt = record.get("prompt")
    if record.get("messages") is not None:
        prompt_text = render_messages(_messages(ctx, record["messages"], "messages"))
    elif isinstance(prompt, list):
        prompt_text = render_messages(_messages(ctx, prompt, "prompt"))
    else:
        prompt_text = _text(ctx, prompt, "prompt")
    items = []
    for k, item in enumerate(_rubric_list(ctx, record)):
        f = f"rubrics[{k}]"
        items.append(
            (
                _text(ctx, item.get("criterion"), f + ".criterion"),
                _points(ctx, item.get("points"), f + ".points"),
                _tags(ctx, item.get("tags"), f + ".tags"),
            )
        )
    response, source = None, None
    completion = record.get("completion")
    ideal = record.get("ideal_completions_data")
    if completion is not None:
        if isinstance(completion, list):  # a message list: the graded turn is the last assistant one
            msgs = _messages(ctx, completion, "completion")
            if msgs[-1][0] not in ("assistant", "gpt"):
                raise ctx.err("last message is not the assistant's", "completion", "an assistant turn last")
            response = msgs[-1][1]
        else:
            response = _text(ctx, completion, "completion")
        source = "data:completion"
    elif ideal is not None:
        if not isinstance(ideal, dict):
            raise ctx.err(f"value is a {type(ideal).__name__}", "ideal_completions_data", "an object or null")
        response = _text(ctx, ideal.get("ideal_completion"), "ideal_completions_data.ideal_completion")
        source = "data:ideal_completion"
    elif record.get("response") is not None:
        response, source = _text(ctx, record["response"], "response"), "data:response"
    return {"record_id": rid, "prompt": prompt_text, "items": items, "response": response, "source": source}


def _researchrubrics(ctx: _Ctx, record: dict) -> dict:
    rid = _record_id(ctx, record, ("sample_id", "task_name", "id"))
    prompt_text = _text(ctx, record.get("prompt"), "prompt")
    items = []
    for k, item in enumerate(_rubric_list(ctx, record)):
        f = f"rubrics[{k}]"
        key = "criterion" if "criterion" in item or "title" not in item else "title"
        axis = item.get("axis", item.get("category"))
        if axis is not None and not isinstance(axis, str):
            raise ctx.err(f"axis is {axis!r}", f + ".axis", "a string")
        items.append(
            (
                _text(ctx, item.get(key), f"{f}.{key}"),
                _points(ctx, item.get("weight"), f + ".weight"),
                [f"axis:{axis.strip()}"] if axis and axis.strip() else [],
            )
        )
    response, source = None, None
    if record.get("response") is not None:
        response, source = _text(ctx, record["response"], "response"), "data:response"
    return {"record_id": rid, "prompt": prompt_text, "items": items, "response": response, "source": source}


_PARSERS = {"healthbench": _healthbench, "researchrubrics": _researchrubrics}


def _frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as a frame with the fixed columns; a missing response stays ``None`` (pandas would make NaN)."""
    df = pd.DataFrame(rows, columns=RUBRIC_ITEM_COLUMNS)
    df["points"] = df["points"].astype(float)
    for col in ("response", "response_source"):
        df[col] = pd.Series([r[col] for r in rows], index=df.index, dtype=object)
    return df


def load_rubric_items(
    path: str | Path,
    *,
    fmt: str = "auto",
    dataset: str | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Rubric items of a HealthBench- or ResearchRubrics-format file, one row per (record, item).

    ``fmt`` is ``healthbench``, ``researchrubrics`` or ``auto`` (from each record's keys; a file mixing
    both is an error). ``dataset`` names the rows (default: the format). ``limit`` keeps a ``seed``-ed
    sample of *records* (all items of a kept record), in file order. Columns: :data:`RUBRIC_ITEM_COLUMNS`;
    ``item_id`` is ``f"{record_id}#{k}"`` with ``k`` the item's position in the record. ``df.attrs``
    holds ``format``, ``file``, ``n_records`` and ``drops`` (reason -> count; only exact duplicate records).
    """
    if fmt not in ITEM_FORMATS:
        raise ConfigError(f"unknown rubric-item format {fmt!r}; expected one of {', '.join(ITEM_FORMATS)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive integer or None, got {limit!r}")
    path = Path(path)
    rows = _records(path)
    if not rows:
        raise InputError("file holds no records", file=str(path), expected="at least one rubric-item record")

    parsed: list[dict] = []
    seen: dict[str, tuple[int, dict]] = {}
    drops: Counter[str] = Counter()
    used_fmt: str | None = None if fmt == "auto" else fmt
    for line, record in rows:
        ctx = _Ctx(str(path), line)
        rec_fmt = fmt
        if fmt == "auto":
            rec_fmt = detect_format(record)
            if rec_fmt is None:
                raise ctx.err(
                    "cannot tell the format from the record's keys",
                    "rubrics",
                    "HealthBench items {criterion, points, tags} or ResearchRubrics items {criterion, weight, axis}",
                )
            if used_fmt is not None and rec_fmt != used_fmt:
                raise ctx.err(
                    f"record looks like {rec_fmt} but earlier ones are {used_fmt}", "rubrics", "one format per file"
                )
            used_fmt = rec_fmt
        rec = _PARSERS[rec_fmt](ctx, record)
        rid = rec["record_id"]
        if rid in seen:
            first_line, first = seen[rid]
            if first == record:
                drops["duplicate_record"] += 1
                continue
            raise ctx.err(
                f"id {rid!r} already used on line {first_line} by a different record", "id", "unique record ids"
            )
        seen[rid] = (line, record)
        parsed.append(rec)

    if limit is not None and limit < len(parsed):
        keep = set(random.Random(seed).sample(range(len(parsed)), limit))
        parsed = [rec for i, rec in enumerate(parsed) if i in keep]

    name = dataset or used_fmt
    out = []
    for rec in parsed:
        for k, (criterion, points, tags) in enumerate(rec["items"]):
            out.append(
                {
                    "item_id": f"{rec['record_id']}#{k}",
                    "dataset": name,
                    "record_id": rec["record_id"],
                    "prompt": rec["prompt"],
                    "criterion": criterion,
                    "points": points,
                    "tags": tags,
                    "response": rec["response"],
                    "response_source": rec["source"],
                }
            )
    df = _frame(out)
    df.attrs.update(format=used_fmt, file=display_path(path), n_records=len(parsed), drops=dict(drops))
    return df


# --- demo files -------------------------------------------------------------------------------------------


def demo_items_path(name: str = "healthbench") -> Path:
    """Path of a small SYNTHETIC demo rubric-item file shipped in the package (``rubriclab/data/demo``)."""
    if name not in DEMO_ITEM_SETS:
        raise ConfigError(f"unknown demo rubric-item set {name!r}; expected one of {', '.join(DEMO_ITEM_SETS)}")
    ref = resources.files("rubriclab.data").joinpath("demo", f"rubric_items_{name}.jsonl")
    path = Path(str(ref))
    if not path.is_file():
        raise InputError("demo file missing from the installed package", file=str(path), expected="package data")
    return path


# --- rubric sets over preference pairs --------------------------------------------------------------------


def items_from_rubric_set(
    rubric_set: Any,
    pairs: Iterable[Any],
    *,
    dataset: str,
    responses: Sequence[str] = PAIR_SIDES,
) -> pd.DataFrame:
    """A RubricSet's criteria as rubric items over preference pairs: one row per (pair, side, criterion).

    ``criterion`` is ``"<label>: <description>"``, ``points`` 1.0, ``tags`` ``[criterion id]``, ``response``
    the pair's chosen/rejected text (``response_source`` ``pair:chosen`` / ``pair:rejected``), ``record_id``
    the pair's id (both sides answer one prompt: one cluster for splits and intervals) and ``item_id``
    ``f"{pair.id}:{side}#{k}"`` with ``k`` the criterion's position.
    """
    sides = tuple(responses)
    bad = [s for s in sides if s not in PAIR_SIDES]
    if not sides or bad or len(set(sides)) != len(sides):
        raise ConfigError(f"responses must be distinct values from {PAIR_SIDES}, got {responses!r}")
    criteria = list(rubric_set.criteria)
    out = []
    for pair in pairs:
        for side in sides:
            for k, c in enumerate(criteria):
                out.append(
                    {
                        "item_id": f"{pair.id}:{side}#{k}",
                        "dataset": dataset,
                        "record_id": str(pair.id),
                        "prompt": pair.prompt,
                        "criterion": f"{c.label}: {c.description.strip()}",
                        "points": 1.0,
                        "tags": [c.id],
                        "response": getattr(pair, side),
                        "response_source": f"pair:{side}",
                    }
                )
    df = _frame(out)
    if df["item_id"].duplicated().any():
        dup = df.loc[df["item_id"].duplicated(), "item_id"].iloc[0]
        raise InputError(f"duplicate item id {dup!r}", field="id", expected="unique pair ids")
    df.attrs.update(format="rubric_set", rubric_set=rubric_set.name, drops={})
    return df
