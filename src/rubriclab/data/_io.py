"""Reading raw rows from local files and writing/reading canonical pair files."""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path

from rubriclab.atomic import atomic_path, write_parquet
from rubriclab.data._clean import _meta
from rubriclab.data._schema import PAIR_FIELDS, Pair
from rubriclab.errors import InputError

FORMATS = ("jsonl", "json", "parquet", "csv")


def file_format(path: Path) -> str:
    """``jsonl|json|parquet|csv`` from the file name (a trailing ``.gz`` is allowed for text)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    fmt = suffixes[-1].lstrip(".") if suffixes else ""
    if fmt not in FORMATS:
        raise InputError(
            f"unknown file type '{''.join(Path(path).suffixes) or '(none)'}'",
            file=str(path),
            expected="one of .jsonl, .json, .parquet, .csv (text formats may end in .gz)",
        )
    return fmt


# One JSON line (one pair) longer than this is refused before it is parsed: no judge's context holds 16 Mi
# characters, so such a line is a broken export (records run together, an embedded blob), not a pair to judge.
MAX_LINE_CHARS = 16 * 2**20


def _read_text(path: Path, strict: bool = False) -> str:
    raw = Path(path).read_bytes()
    if str(path).lower().endswith(".gz"):
        raw = gzip.decompress(raw)
    if not strict:
        # bad bytes become U+FFFD, which clean_pairs then counts as undecodable_text per row
        return raw.decode("utf-8", errors="replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 ({exc.reason} 0x{raw[exc.start]:02x} at byte offset {exc.start})",
            file=str(path),
            line=raw.count(b"\n", 0, exc.start) + 1,
            expected="UTF-8 text",
        ) from None


def jsonl_rows(text: str, path: Path) -> list[tuple[int, dict]]:
    """``(line number, object)`` of each non-blank line of JSON-lines ``text`` read from ``path``; a line that is not one
    JSON object, or is past ``MAX_LINE_CHARS``, is an ``InputError`` naming the file and the line."""
    rows = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise InputError(
                f"line is {len(line):,} characters long",
                file=str(path),
                line=line_no,
                expected=f"one JSON object per line of at most {MAX_LINE_CHARS:,} characters",
            )
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(
                f"invalid JSON: {exc}", file=str(path), line=line_no, expected="one JSON object per line"
            ) from None
        if not isinstance(obj, dict):
            raise InputError(
                f"line holds a JSON {type(obj).__name__}, not an object",
                file=str(path),
                line=line_no,
                expected="one JSON object per line",
            )
        rows.append((line_no, obj))
    return rows


def _json_rows(text: str, path: Path) -> list[tuple[int, dict]]:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        if text.lstrip().startswith("["):
            raise InputError(
                f"invalid JSON: {exc.msg}",
                file=str(path),
                line=getattr(exc, "lineno", None),
                expected="a JSON array of objects",
            ) from None
        return jsonl_rows(text, path)  # many ".json" files on the hub are JSON lines
    items = obj if isinstance(obj, list) else [obj]
    rows = []
    for i, item in enumerate(items, start=1):  # "line" is the item's 1-based index here
        if not isinstance(item, dict):
            raise InputError(
                f"item {i} is a JSON {type(item).__name__}, not an object",
                file=str(path),
                expected="a JSON array of objects",
            )
        rows.append((i, item))
    return rows


def _csv_rows(path: Path, strict: bool = False) -> list[tuple[int, dict]]:
    import pandas as pd

    text = _read_text(path, strict)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except Exception as exc:  # pandas raises several parser error types
        m = re.search(r"line (\d+)", str(exc))
        raise InputError(
            f"unparseable CSV: {str(exc).strip().splitlines()[-1]}",
            file=str(path),
            line=int(m.group(1)) if m else None,
            expected="a CSV file with a header row",
        ) from None
    # line 1 is the header; assumes no embedded newlines when reporting a line
    return [(i + 2, rec) for i, rec in enumerate(df.to_dict(orient="records"))]


def _parquet_rows(path: Path) -> list[tuple[int, dict]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise InputError(f"unreadable parquet: {exc}", file=str(path), expected="a parquet file") from None
    # to_pylist keeps nested lists/structs as plain Python (pandas would give numpy arrays)
    return [(i + 1, rec) for i, rec in enumerate(table.to_pylist())]


def read_rows(path: str | Path, *, strict_utf8: bool = False) -> list[tuple[int, dict]]:
    """Raw rows of a jsonl/json/parquet/csv file as ``(line_no, dict)``; line numbers are 1-based.

    A corrupt line is an error naming the file and line: a half-broken file is not silently shortened.
    Bytes that are not UTF-8 become U+FFFD (rows holding them are dropped and counted by ``clean_pairs``),
    or with ``strict_utf8`` an error naming the file, line and byte offset.
    """
    path = Path(path)
    fmt = file_format(path)
    if not path.is_file():
        raise InputError("file not found", file=str(path), expected=f"an existing .{fmt} file")
    if fmt == "parquet":
        return _parquet_rows(path)
    if fmt == "csv":
        return _csv_rows(path, strict_utf8)
    text = _read_text(path, strict_utf8)
    return jsonl_rows(text, path) if fmt == "jsonl" else _json_rows(text, path)


def columns_of(rows: Iterable[tuple[int, dict]]) -> list[str]:
    """Every key that appears in any row, in first-seen order."""
    seen: dict[str, None] = {}
    for _, row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)


def require_columns(columns: Iterable[str], required: Iterable[str], *, file: str) -> None:
    """Raise InputError naming the first required column absent from ``columns``."""
    present = list(columns)
    for name in required:
        if name not in present:
            raise InputError(
                "required column is missing",
                file=file,
                field=name,
                expected=f"a column '{name}' (available: {', '.join(present) or 'none'})",
            )


def _pair_records(pairs: Iterable[Pair]) -> list[dict]:
    records = []
    for p in pairs:
        rec = p.to_dict()
        rec["meta"] = json.dumps(rec["meta"], ensure_ascii=False, sort_keys=True, default=str)
        records.append(rec)
    return records


def write_pairs(pairs: Iterable[Pair], path: str | Path) -> Path:
    """Write pairs to ``.parquet`` (meta as a JSON string column) or ``.jsonl``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if file_format(path) == "jsonl":
        with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
            for p in pairs:
                fh.write(json.dumps(p.to_dict(), ensure_ascii=False, default=str) + "\n")
        return path
    import pandas as pd

    df = pd.DataFrame(_pair_records(pairs), columns=list(PAIR_FIELDS))
    write_parquet(df, path, index=False)
    return path


def write_splits(splits: dict[str, list[Pair]], out_dir: str | Path, *, prefix: str = "") -> dict[str, str]:
    """Write each split to ``out_dir/<prefix><name>.parquet``; return ``{name: path}``."""
    out_dir = Path(out_dir)
    return {name: str(write_pairs(pairs, out_dir / f"{prefix}{name}.parquet")) for name, pairs in splits.items()}


def read_pairs(path: str | Path) -> list[Pair]:
    """Read canonical pairs back from parquet or jsonl (or json/csv in the same shape).

    Strict, unlike the source loaders (which drop and count bad rows): a canonical file was written by
    ``write_pairs`` from clean pairs, so a bad byte, an empty file or an empty text is an error naming
    the file, line and field."""
    rows = read_rows(path, strict_utf8=True)
    required = ("id", "domain", "prompt", "chosen", "rejected")
    if not rows:
        raise InputError("file holds no pairs", file=str(path), expected=f"rows with {', '.join(required)}")
    require_columns(columns_of(rows), required, file=str(path))
    pairs = []
    for line_no, row in rows:
        for key in required:
            if row.get(key) is None:
                raise InputError("value is missing", file=str(path), line=line_no, field=key, expected="a value")
        for key in ("prompt", "chosen", "rejected"):
            value = row[key]
            if not isinstance(value, str):
                raise InputError(f"value is a {type(value).__name__}", file=str(path), line=line_no, field=key,
                                 expected="text")
            if not value.strip():
                raise InputError("value is empty", file=str(path), line=line_no, field=key,
                                 expected="non-empty text")
        row = dict(row)
        row["meta"] = _meta(row.get("meta"))
        pairs.append(Pair.from_dict(row))
    return pairs
