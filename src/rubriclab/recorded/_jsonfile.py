"""Reading publishers' JSON files so that an error can name the line: a top-level array is decoded item by item
(``json.JSONDecoder.raw_decode``), each item with the line it starts on; a JSON-lines file line by line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rubriclab.errors import InputError

_WS = " \t\n\r"


def _text(path: Path) -> str:
    if not path.is_file():
        raise InputError("file not found" if not path.exists() else "is not a file", file=str(path),
                         expected="a JSON file as the publisher ships it")
    return path.read_text(encoding="utf-8", errors="replace")


def json_array(path: str | Path) -> list[tuple[int, Any]]:
    """Items of a JSON file holding one top-level array, each as ``(line it starts on, value)``."""
    path = Path(path)
    text = _text(path)
    decoder = json.JSONDecoder()
    n = len(text)
    pos, line, counted = 0, 1, 0

    def line_at(i: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, i)
        counted = i
        return line

    def skip(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    pos = skip(pos)
    if pos >= n or text[pos] != "[":
        raise InputError("does not start with '['", file=str(path), line=line_at(pos) if pos < n else None,
                         expected="a JSON array of records")
    pos = skip(pos + 1)
    items: list[tuple[int, Any]] = []
    if pos < n and text[pos] == "]":
        return items
    while True:
        start = line_at(pos)
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno,
                             expected="a JSON array of records") from None
        items.append((start, obj))
        pos = skip(pos)
        if pos < n and text[pos] == ",":
            pos = skip(pos + 1)
            continue
        if pos < n and text[pos] == "]":
            break
        raise InputError("expected ',' or ']' after an item", file=str(path), line=line_at(min(pos, n)),
                         expected="a JSON array of records")
    if skip(pos + 1) < n:
        raise InputError("text after the closing ']'", file=str(path), line=line_at(skip(pos + 1)),
                         expected="one JSON array")
    return items


def require(obj: Any, keys: tuple[str, ...], *, file: Path, line: int, what: str) -> dict[str, Any]:
    """``obj`` as a dict holding ``keys``, or an InputError naming the file, line and first missing key."""
    if not isinstance(obj, dict):
        raise InputError(f"{what} is a JSON {type(obj).__name__}", file=str(file), line=line,
                         expected="a JSON object")
    for key in keys:
        if key not in obj:
            raise InputError(f"{what} has no '{key}'", file=str(file), line=line, field=key,
                             expected=f"an object with {', '.join(keys)}")
    return obj


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """The JSON value of every non-blank line of ``path`` (blank lines skipped, as the publishers' ``read_jsonl``
    does), each as ``(line number, value)``, read a line at a time (a ``.gz`` file decompressed as it is read): memory
    is one line, not the file. An undecodable line is a one-line error naming it; bytes that are not UTF-8 read as
    U+FFFD."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found" if not path.exists() else "is not a file", file=str(path),
                         expected="a JSON-lines file as the publisher ships it")
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise InputError(f"invalid JSON: {exc}", file=str(path), line=line,
                                 expected="one JSON object a line") from None
            yield line, value


def jsonl_rows(path: Path) -> list[tuple[int, Any]]:
    """``iter_jsonl``'s rows, all of them."""
    return list(iter_jsonl(path))
