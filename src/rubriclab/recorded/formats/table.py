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

import itertools
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from rubriclab.data import file_format, read_rows
from rubriclab.errors import InputError
from rubriclab.recorded._jsonfile import iter_jsonl
from rubriclab.recorded._records import JudgmentColumns, RecordedPair, RecordedSet
from rubriclab.recorded._registry import SourceContext, register_format

_VERDICT_WORDS = {"first": "first", "second": "second", "tie": "tie", "none": "none", "a": "first", "b": "second"}
_CHOICE_WORDS = {"1": "1", "2": "2", "tie": "tie", "none": "none", "output_1": "1", "output_2": "2"}
_LABEL_WORDS = {"1": "1", "2": "2", "tie": "tie", "output_1": "1", "output_2": "2"}
PAIR_TEXT = ("prompt", "output_1", "output_2", "domain")


PAGE_ROWS = 250_000  # rows read and checked at a time: a large table never sits in memory as Python objects
_ORDER_TO_CHOICE = {("original", "first"): "1", ("original", "second"): "2", ("swapped", "first"): "2",
                    ("swapped", "second"): "1"}


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _word(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v).strip().lower()


class _Col:
    """A column by its distinct values (each looked at once, however many rows repeat it): ``codes`` per row
    (-1 = missing), the values as given, stripped (an integer float without its .0), and which are blank."""

    def __init__(self, col: pd.Series | None, n: int) -> None:
        if col is None:
            self.codes, self.values, self.text, self.blank_value = np.full(n, -1), [], [], np.zeros(0, bool)
        else:
            try:
                cat = pd.Categorical(col)
            except TypeError:  # mixed types (numbers and text) do not sort: compare them as text
                cat = pd.Categorical(col.map(lambda v: v if v is None or isinstance(v, (str, float)) else str(v)))
            self.codes, self.values = np.asarray(cat.codes), list(cat.categories)
            self.text = [(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)).strip()
                         for v in self.values]
            self.blank_value = np.array([_blank(v) for v in self.values], dtype=bool)

    @property
    def blank(self) -> np.ndarray:
        out = self.codes < 0
        if len(self.blank_value):
            out |= np.where(self.codes >= 0, self.blank_value[np.maximum(self.codes, 0)], False)
        return out

    def map(self, fn: Any, missing: Any = None) -> np.ndarray:
        """``fn`` of each row's stripped value (``missing`` for a blank one), as an object array."""
        table = np.array([missing if b else fn(t) for t, b in zip(self.text, self.blank_value, strict=True)] + [missing],
                         dtype=object)
        return table[np.where(self.codes >= 0, self.codes, len(self.text))]

    def first(self, mask: np.ndarray) -> int | None:
        hit = np.flatnonzero(mask)
        return int(hit[0]) if len(hit) else None

    def given(self, i: int) -> Any:
        return None if self.codes[i] < 0 else self.values[self.codes[i]]


def _pages(path: Path) -> Iterator[pd.DataFrame]:
    """The table in pages of at most ``PAGE_ROWS`` rows, each with its rows' ``_line`` (CSV: the record's first
    physical line, line 1 the header, a quoted field's line breaks counted; a blank line between records, which
    pandas skips, is not. JSON lines: the physical line; parquet: the 1-based row)."""
    fmt = file_format(path)
    if not path.is_file():
        raise InputError("file not found", file=str(path), expected=f"an existing .{fmt} file")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            reader = pq.ParquetFile(path)
        except Exception as exc:
            raise InputError(f"unreadable parquet: {exc}", file=str(path), expected="a parquet file") from None
        start = 1
        for batch in reader.iter_batches(batch_size=PAGE_ROWS):
            df = batch.to_pandas()
            df["_line"] = np.arange(start, start + len(df))
            start += len(df)
            yield df
    elif fmt == "csv" and not str(path).endswith(".gz"):
        try:
            # bytes that are not UTF-8 read as U+FFFD, as read_rows reads them (a fallback that re-read the whole
            # file after the first pages had been yielded counted those pages twice)
            chunks = pd.read_csv(path, dtype=str, keep_default_na=False, chunksize=PAGE_ROWS, encoding_errors="replace")
            quoted = _has_quote(path)  # without a quote no field spans lines: each record is one line
            start = 2
            for df in chunks:
                span = np.ones(len(df), dtype=np.int64)  # the physical lines of each record
                if quoted:
                    for c in df.columns:
                        span += df[c].str.count("\n").to_numpy(dtype=np.int64, na_value=0)
                df["_line"] = start + np.cumsum(span) - span
                start += int(span.sum())
                yield df
        except (pd.errors.ParserError, ValueError) as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise InputError(f"unparseable CSV: {str(exc).strip().splitlines()[-1]}", file=str(path),
                             line=int(m.group(1)) if m else None, expected="a CSV file with a header row") from None
    elif fmt == "jsonl":  # read a line at a time: a page of rows in memory, never the file
        yield from _frames(_objects(iter_jsonl(path), path))
    else:  # a JSON array, a gzipped CSV: the project's line-aware reader, then a page at a time
        yield from _frames(iter(read_rows(path)))


def _has_quote(path: Path) -> bool:
    with path.open("rb") as fh:
        while block := fh.read(1 << 24):
            if b'"' in block:
                return True
    return False


def _objects(rows: Iterator[tuple[int, Any]], path: Path) -> Iterator[tuple[int, dict]]:
    for line, obj in rows:
        if not isinstance(obj, dict):
            raise InputError(f"line holds a JSON {type(obj).__name__}, not an object", file=str(path), line=line,
                             expected="one JSON object per line")
        yield line, obj


def _frames(rows: Iterator[tuple[int, dict]]) -> Iterator[pd.DataFrame]:
    while part := list(itertools.islice(rows, PAGE_ROWS)):
        df = pd.DataFrame.from_records([r for _, r in part])
        df["_line"] = [line for line, _ in part]
        yield df


class _Errors:
    """The first error of a table, as a row-by-row reading would meet it: the lowest line, and on one line the
    check that comes first (``rank``)."""

    def __init__(self) -> None:
        self.best: tuple[int, int, InputError] | None = None

    def add(self, line: int, rank: int, exc: InputError) -> None:
        if self.best is None or (line, rank) < self.best[:2]:
            self.best = (int(line), rank, exc)

    def raise_first(self) -> None:
        if self.best is not None:
            raise self.best[2]


def _page(df: pd.DataFrame, cols: set[str], label_cols: list[str], file: str, default_condition: str,
          errors: _Errors) -> pd.DataFrame:
    """One page checked and mapped: pair_id, judge, condition, order, verdict, raw, finish_reason, generated, score,
    the pair's texts and labels, ``_line``, ``_not_verdict``."""
    n = len(df)
    line = df["_line"].to_numpy()
    out = pd.DataFrame({"_line": line})

    def col(name: str) -> _Col:
        return _Col(df[name] if name in df else None, n)

    for rank, name in enumerate(("pair_id", "judge")):
        c = col(name)
        i = c.first(c.blank)
        if i is not None:
            errors.add(line[i], rank, InputError("is empty", file=file, line=int(line[i]), field=name,
                                                 expected="a non-empty value"))
        out[name] = pd.Categorical(c.map(str, missing=""))
    c = col("order")
    order = c.map(str.lower, missing="original")
    i = c.first(~np.isin(order, ["original", "swapped"]))
    if i is not None:
        errors.add(line[i], 2, InputError(f"order {c.given(i)!r}", file=file, line=int(line[i]), field="order",
                                          expected="original or swapped (empty = original)"))
    out["order"] = pd.Categorical(order)
    out["condition"] = pd.Categorical(col("condition").map(str, missing=default_condition))
    c = col("raw")
    raw = np.array([None if b else str(v) for v, b in zip(c.values, c.blank_value, strict=True)] + [None],
                   dtype=object)[np.where(c.codes >= 0, c.codes, len(c.values))]
    key = "verdict" if "verdict" in cols else "choice"
    c = col(key)
    words = c.map(lambda t: t.lower(), missing="")
    if key == "verdict":
        verdict = np.array([_VERDICT_WORDS.get(w) for w in words], dtype=object)
    else:
        choice = [_CHOICE_WORDS.get(w) for w in words]
        verdict = np.array([None if ch is None else _ORDER_TO_CHOICE_INV.get((o, ch), ch)
                            for o, ch in zip(order, choice, strict=True)], dtype=object)
    blank = c.blank
    verdict[blank] = "none"
    not_verdict = np.array([v is None for v in verdict], dtype=bool)
    if not_verdict.any():  # a value that is not a verdict: none, the value kept as raw text
        given = [c.given(i) for i in np.flatnonzero(not_verdict)]
        keep = raw[not_verdict]
        raw[not_verdict] = [k if k else str(g) for k, g in zip(keep, given, strict=True)]
        verdict[not_verdict] = "none"
    out["verdict"] = pd.Categorical(verdict)
    out["raw"] = pd.Categorical(raw) if n else raw
    out["_not_verdict"] = not_verdict
    if "score" in df:
        c = col("score")
        nums = [math.nan if b else _number(v) for v, b in zip(c.values, c.blank_value, strict=True)] + [math.nan]
        score = np.array(nums, dtype=float)[np.where(c.codes >= 0, c.codes, len(c.values))]
        i = c.first(~c.blank & np.isnan(score))
        if i is not None:
            errors.add(line[i], 4, InputError(f"score {c.given(i)!r}", file=file, line=int(line[i]), field="score",
                                              expected="a number or empty"))
        out["score"] = score
    else:
        out["score"] = np.nan
    for name in ("finish_reason", "generated", *PAIR_TEXT):
        c = col(name)
        out[name] = pd.Categorical(np.array([None if b else str(v) for v, b in zip(c.values, c.blank_value,
                                                                                   strict=True)] + [None],
                                            dtype=object)[np.where(c.codes >= 0, c.codes, len(c.values))])
    for name in label_cols:
        c = col(name)
        got = c.map(lambda t: _LABEL_WORDS.get(t.lower(), "?"), missing=None)
        i = c.first(got == "?")
        if i is not None:
            errors.add(line[i], 5, InputError(f"label {c.given(i)!r}", file=file, line=int(line[i]), field=name,
                                              expected="1, 2 or tie"))
        out[name] = pd.Categorical(got)
    return out


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


_ORDER_TO_CHOICE_INV = {(o, c): v for (o, v), c in _ORDER_TO_CHOICE.items()}


def _cross_checks(f: pd.DataFrame, fields: list[str], file: str, errors: _Errors) -> None:
    """What needs every row: one row per pair, judge, condition and order; a pair's texts and labels the same on
    every row that gives them."""
    key = ["pair_id", "judge", "condition", "order"]
    dup = f.duplicated(key, keep="first").to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        r = f.iloc[i]
        first = f.loc[(f[key] == r[key]).all(axis=1), "_line"].min()
        errors.add(r["_line"], 3, InputError(
            f"pair {r['pair_id']!r} judged again by {r['judge']!r} under {r['condition']!r} in the {r['order']} order "
            f"(first on line {first})", file=file, line=int(r["_line"]), field="pair_id",
            expected="one row per pair, judge, condition and order"))
    pair_line = f.groupby("pair_id", observed=True)["_line"].transform("min")
    for rank, col in enumerate(fields):
        given = f.loc[f[col].notna().to_numpy(), ["pair_id", col, "_line"]]
        if given.empty:
            continue
        first = given.groupby("pair_id", observed=True)[col].transform("first")
        off = (given[col] != first).to_numpy()
        if off.any():
            i = int(np.flatnonzero(off)[0])
            r = given.iloc[i]
            errors.add(r["_line"], 6 + rank, InputError(
                f"pair {r['pair_id']!r} has {r[col]!r} here but {first.iloc[i]!r} on line "
                f"{int(pair_line.loc[given.index[i]])}", file=file, line=int(r["_line"]), field=col,
                expected="the same value on every row of a pair"))


def read_table(path: str | Path, *, name: str | None = None, default_condition: str = "default") -> RecordedSet:
    """A long table of judgments (columns in the module docstring) as a RecordedSet, read and checked a page at a
    time and kept as columns (``JudgmentColumns``): millions of rows fit where one object per judgment would not."""
    path = Path(path)
    file = str(path)
    pages = _pages(path)
    first = next(pages, None)
    if first is None or first.empty:
        raise InputError("no rows", file=file, expected="one row per recorded judgment")
    cols = {c for c in first.columns if c != "_line"}
    for col in ("pair_id", "judge"):
        if col not in cols:
            raise InputError("required column is missing", file=file, field=col,
                             expected="columns pair_id, judge and verdict or choice (see rubriclab.recorded.formats.table)")
    if ("verdict" in cols) == ("choice" in cols):
        raise InputError("has both or neither of 'verdict' and 'choice'", file=file, field="verdict",
                         expected="a 'verdict' column (as presented) or a 'choice' column (the pair's output)")
    label_cols = sorted(c for c in cols if c == "label" or c.startswith("label."))
    errors = _Errors()
    parts = [_page(first, cols, label_cols, file, default_condition, errors)]
    for page in pages:
        _no_new_columns(page, cols, file)
        parts.append(_page(page, cols, label_cols, file, default_condition, errors))
    f = _concat(parts)
    _cross_checks(f, [*PAIR_TEXT, *label_cols], file, errors)
    errors.raise_first()
    pairs = _pairs(f, label_cols)
    n = len(f)
    frame = pd.DataFrame({
        "pair_id": f["pair_id"], "judge": f["judge"], "condition": f["condition"], "order": f["order"],
        "verdict": f["verdict"], "choice": _choices(f["verdict"], f["order"]), "raw": _strings(f["raw"]),
        "finish_reason": f["finish_reason"].astype(object), "generated": _strings(f["generated"]),
        "generated_kinds": pd.Categorical.from_codes(f["generated"].notna().to_numpy().astype(np.int8),
                                                     ["", "generated"]),
        "score": f["score"], "meta": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""])})
    not_verdicts = int(f["_not_verdict"].sum())
    notes = []
    if not_verdicts:
        notes.append(f"{not_verdicts} row(s) held a value that is not a verdict: read as none (counted), the value "
                     "kept as raw text.")
    rule = ("label = the majority of the annotators' label columns (" + ", ".join(label_cols) + "); a pair "
            "without a majority has no label") if len(label_cols) > 1 else (
        "label = the 'label' column" if label_cols else "no label column: nothing is compared with a label")
    return RecordedSet(name=name or path.stem, format="table", path=file, pairs=pairs,
                       judgments=JudgmentColumns(frame), provenance=f"a table of recorded judgments ({path.name})",
                       label_rule=rule, notes=notes)


def _no_new_columns(page: pd.DataFrame, cols: set[str], file: str) -> None:
    """A key that JSON lines first give after the first page would be read on no row at all: an error, not a drop."""
    new = sorted(set(page.columns) - cols - {"_line"})
    if new:
        name = new[0]
        given = page[name].notna().to_numpy()
        line = int(page["_line"].iloc[int(np.argmax(given)) if given.any() else 0])
        raise InputError(f"column '{name}' first appears after the first {PAGE_ROWS:,} rows", file=file, line=line,
                         field=name, expected="every column on one of the first rows (a key with a null value will do)")


def _choices(verdict: pd.Series, order: pd.Series) -> pd.Categorical:
    """The pair's output each verdict chose (``first``/``second`` as presented → ``1``/``2``; ``tie``, ``none``
    as they are), from the columns' codes: no string per row."""
    verdict, order = pd.Categorical(verdict), pd.Categorical(order)
    words = [str(w) for w in verdict.categories]
    cats = sorted({"1", "2"} | {w for w in words if w not in ("first", "second")})
    pos = {c: i for i, c in enumerate(cats)}
    as_is = np.array([pos.get(w, -1) for w in words] + [-1], dtype=np.int16)[verdict.codes]
    swapped = (np.asarray(order.categories) == "swapped")[order.codes] & (order.codes >= 0)
    codes = as_is
    for word, shown_first in (("first", "1"), ("second", "2")):
        if word in words:
            hit = verdict.codes == words.index(word)
            other = "2" if shown_first == "1" else "1"
            codes = np.where(hit, np.where(swapped, pos[other], pos[shown_first]), codes)
    return pd.Categorical.from_codes(codes.astype(np.int16), cats).remove_unused_categories()


def _strings(col: pd.Series) -> np.ndarray:
    """A text column as strings, "" where it is missing."""
    values = np.array(col.astype(object).to_numpy(), dtype=object)  # a copy: the column's own may be read-only
    values[pd.isna(values)] = ""
    return values


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The pages as one frame, the categorical columns' categories united."""
    if len(parts) == 1:
        return parts[0]
    out = {}
    for col in parts[0].columns:
        if isinstance(parts[0][col].dtype, pd.CategoricalDtype):
            cats = [p[col] for p in parts]
            if len({c.cat.categories.dtype for c in cats}) > 1:  # a page without a value: object, not str, categories
                cats = [c.cat.set_categories(c.cat.categories.astype(object)) for c in cats]
            out[col] = union_categoricals(cats)
        else:
            out[col] = np.concatenate([p[col].to_numpy() for p in parts])
    return pd.DataFrame(out)


def _pairs(f: pd.DataFrame, label_cols: list[str]) -> dict[str, RecordedPair]:
    """Each pair (in order of first appearance) with its texts and its annotators' labels."""
    firsts = f["pair_id"].drop_duplicates().astype(str)
    fields = {}
    for col in [*PAIR_TEXT, *label_cols]:
        given = f.loc[f[col].notna().to_numpy(), ["pair_id", col]]  # the two columns only, not the whole frame
        # the first value per pair (the cross-checks made every value the same)
        first = given.drop_duplicates("pair_id")
        fields[col] = dict(zip(first["pair_id"].astype(str), first[col], strict=True))
    pairs = {}
    for pid in firsts:
        labels = tuple(sorted(("label" if c == "label" else c.split(".", 1)[1], fields[c][pid])
                              for c in label_cols if pid in fields[c]))
        pairs[pid] = RecordedPair(id=pid, labels=labels, **{k: str(fields[k].get(pid, "")) for k in PAIR_TEXT})
    return pairs


@register_format("table", what="a long table of judgments: CSV, JSON lines or parquet, one row per judgment")
def _table_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_table(ctx.path, name=ctx.name)
