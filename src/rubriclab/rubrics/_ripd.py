"""RIPD's own rubric format: JSON lines ``{prompt_id, parent_prompt_id?, gen_step?, prompt}``.

``prompt`` is a whole pairwise judge template (``{instruction}`` or ``{question}``, ``{answer_a}``,
``{answer_b}``; verdict ``[[A]]``/``[[B]]``). A file holds the seed line and the candidates derived from
it; a search archive is written in the same shape, so rubrics move between RIPD's code and this one
unchanged. Extra keys on a line (our bench/target numbers) are kept when read and ignored by RIPD.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubriclab.atomic import write_text
from rubriclab.errors import InputError
from rubriclab.rubrics._template import JudgeTemplate, parse_template

RIPD_KEYS = ("prompt_id", "parent_prompt_id", "gen_step", "prompt")


def is_ripd_file(path: str | Path) -> bool:
    """Whether ``path`` looks like a RIPD JSON-lines file (first non-empty line has ``prompt_id``/``prompt``)."""
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return False
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    data = json.loads(line)
                    return isinstance(data, dict) and "prompt" in data and "prompt_id" in data
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return False


def read_ripd_lines(path: str | Path) -> list[dict[str, Any]]:
    """Every line of a RIPD file, validated: a ``prompt_id`` and a ``prompt`` that is a judge template."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path), expected="a RIPD JSON-lines rubric file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 ({exc.reason} at byte {exc.start})", file=str(path),
                         expected="a UTF-8 JSON-lines file") from None
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", file=str(path), line=lineno,
                             expected='one object {"prompt_id", "prompt", ...} per line') from None
        if not isinstance(data, dict):
            raise InputError(f"line is a {type(data).__name__}", file=str(path), line=lineno,
                             expected='an object {"prompt_id", "prompt", ...}')
        for key in ("prompt_id", "prompt"):
            if key not in data:
                raise InputError(f"missing '{key}'", file=str(path), line=lineno, field=key,
                                 expected='{"prompt_id", "parent_prompt_id"?, "gen_step"?, "prompt"}')
        pid = str(data["prompt_id"])
        if pid in seen:
            raise InputError(f"duplicate prompt_id {pid!r}", file=str(path), line=lineno, field="prompt_id",
                             expected="a unique prompt_id per line")
        seen.add(pid)
        parse_template(data["prompt"], pid, file=f"{path}:{lineno}")  # placeholders and verdict format
        rows.append({**data, "prompt_id": pid, "_line": lineno})
    if not rows:
        raise InputError("no rubric lines", file=str(path), expected="at least one RIPD rubric line")
    return rows


def load_ripd(path: str | Path, prompt_id: str | None = None) -> JudgeTemplate:
    """The judge template of one line (``prompt_id``; default the last line, i.e. the selected rubric)."""
    rows = read_ripd_lines(path)
    if prompt_id is None:
        row = rows[-1]
    else:
        match = [r for r in rows if r["prompt_id"] == str(prompt_id)]
        if not match:
            ids = ", ".join(r["prompt_id"] for r in rows[:10]) + (" …" if len(rows) > 10 else "")
            raise InputError(f"no line with prompt_id {prompt_id!r}", file=str(path), field="prompt_id",
                             expected=f"one of {ids}")
        row = match[0]
    return JudgeTemplate(name=row["prompt_id"], text=row["prompt"])


def write_ripd(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write RIPD lines atomically; RIPD's keys first, extra keys (our numbers) after them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for row in rows:
        if "prompt_id" not in row or "prompt" not in row:
            raise InputError("row lacks prompt_id or prompt", file=str(path), expected="RIPD rows")
        ordered = {k: row[k] for k in RIPD_KEYS if row.get(k) is not None}
        ordered.update({k: v for k, v in row.items() if k not in RIPD_KEYS and not k.startswith("_")})
        lines.append(json.dumps(ordered, ensure_ascii=False, default=_jsonable))
    write_text(path, "\n".join(lines) + ("\n" if lines else ""))
    return path


def _jsonable(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)
