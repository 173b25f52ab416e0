"""Read and write rubric sets and judge templates (JSON, YAML, markdown)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rubriclab.atomic import write_text
from rubriclab.errors import InputError
from rubriclab.rubrics._importers import from_criteria_list, from_markdown, rubric_set_from_template
from rubriclab.rubrics._records import RubricSet
from rubriclab.rubrics._ripd import load_ripd
from rubriclab.rubrics._template import JudgeTemplate, template_from_dict

_JSON = (".json",)
_JSONL = (".jsonl", ".ndjson")
_YAML = (".yaml", ".yml")
_MARKDOWN = (".md", ".markdown", ".txt")


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (templates, long descriptions) as ``|`` blocks so saved YAML stays readable."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str_representer)


def _write_atomic(path: Path, text: str) -> None:
    # A killed run must not leave a half-written rubric behind for the next DVC stage.
    write_text(path, text)


def dump_data(data: object, path: str | Path) -> None:
    """Write plain data as JSON or YAML by ``path``'s extension, keys in insertion order."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in _JSON:
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    elif suffix in _YAML:
        text = yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)
    else:
        raise InputError(
            f"cannot write a {suffix or 'suffix-less'} file", file=str(path), expected=".json, .yaml or .yml"
        )
    _write_atomic(path, text)


def _parse(text: str, path: Path, kind: str) -> object:
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"invalid JSON ({exc.msg})", file=str(path), line=exc.lineno, expected="valid JSON"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "parse error"
        context, opened = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and opened is not None and (mark is None or opened.line != mark.line):
            # e.g. an unclosed [ : the error surfaces lines later, so say where the construct began
            problem += f", {context} opened on line {opened.line + 1}"
        raise InputError(
            f"invalid YAML ({problem})", file=str(path), line=mark.line + 1 if mark else None, expected="valid YAML"
        ) from None


def _json_lines(text: str, path: Path) -> list[dict]:
    """The objects of a JSON-lines file, one per non-empty line; an error names the line that is not one."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", file=str(path), line=lineno,
                             expected="one JSON object per line") from None
        if not isinstance(obj, dict):
            raise InputError(f"line holds a JSON {type(obj).__name__}, not an object", file=str(path), line=lineno,
                             expected="one JSON object per line")
        rows.append(obj)
    if not rows:
        raise InputError("no lines", file=str(path), expected="one JSON object per line")
    return rows


def _read(path: str | Path) -> tuple[Path, str]:
    path = Path(path)
    try:
        return path, path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=str(path), expected="an existing rubric file") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 ({exc.reason} 0x{exc.object[exc.start]:02x} at byte offset {exc.start})",
            file=str(path),
            line=exc.object.count(b"\n", 0, exc.start) + 1,
            expected="a UTF-8 text file",
        ) from None


def _kind(path: Path, text: str) -> str:
    suffix = path.suffix.lower()
    if suffix in _JSON:
        return "json"
    if suffix in _YAML:
        return "yaml"
    if suffix in _JSONL:
        return "jsonl"
    if suffix in _MARKDOWN:
        return "markdown"
    return "json" if text.lstrip()[:1] in ("{", "[") else "markdown"


def save_rubric_set(rs: RubricSet, path: str | Path) -> Path:
    """Write ``rs`` to ``.json`` or ``.yaml``/``.yml``; returns the path."""
    dump_data(rs.to_dict(), path)
    return Path(path)


def load_rubric_set(path: str | Path) -> RubricSet:
    """Read a rubric set written by :func:`save_rubric_set`."""
    path, text = _read(path)
    kind = _kind(path, text)
    if kind in ("markdown", "jsonl"):
        raise InputError(
            f"cannot read a rubric set from {path.suffix or 'a suffix-less file'}",
            file=str(path),
            expected=".json, .yaml or .yml (use load_rubric_file for markdown lists and JSON lines)",
        )
    return RubricSet.from_dict(_parse(text, path, kind), file=str(path))


def save_template(template: JudgeTemplate, path: str | Path) -> Path:
    """Write ``template`` as ``{"name", "template"}`` JSON or YAML."""
    dump_data(template.to_dict(), path)
    return Path(path)


def load_template(path: str | Path) -> JudgeTemplate:
    """Read a judge template file ``{"name", "template"}``; errors name the file."""
    path, text = _read(path)
    kind = _kind(path, text)
    if kind == "jsonl":  # RIPD's format: the last line is the selected rubric
        _json_lines(text, path)
        return load_ripd(path)
    return template_from_dict(_parse(text, path, "yaml" if kind == "yaml" else "json"), file=str(path))


def _not_empty(rs: RubricSet, path: Path) -> RubricSet:
    """``rs``, unless it has no criteria with nothing to say why: a template carries its rubric itself, and a stage
    that found nothing writes an empty set with ``provenance.shortfall`` (the audit reports it "not audited")."""
    if rs.criteria or rs.template is not None or "shortfall" in (rs.provenance or {}):
        return rs
    raise InputError(f"rubric set {rs.name!r} has no criteria and no template", file=str(path), field="criteria",
                     expected="at least one criterion, or a judge template")


def load_rubric_file(path: str | Path, *, name: str | None = None, source: str | None = None) -> RubricSet:
    """Load any supported rubric file as a RubricSet.

    Dispatch: a saved rubric set (object with ``criteria``), a judge template (object with ``template``),
    a JSON/YAML list of criteria, JSON lines (``.jsonl``: RIPD's ``{prompt_id, prompt}`` lines, read as the last
    line's template, or one criterion object per line), or a markdown list. ``name`` defaults to the file stem
    for lists.

    A rubric with no criteria (``criteria: []``, an empty list) is refused, unless a template carries the rubric
    or the stage that wrote it says why it is empty (``provenance.shortfall``, e.g. discovery found nothing).
    """
    path, text = _read(path)
    kind = _kind(path, text)
    default_name = name or path.stem
    if kind == "markdown":
        return from_markdown(text, default_name, source or "imported", file=str(path), provenance={"file": path.name})
    if kind == "jsonl":
        data: object = _json_lines(text, path)
        if all("prompt_id" in row and "prompt" in row for row in data):  # RIPD lines
            return rubric_set_from_template(load_ripd(path), name=name, **({"source": source} if source else {}))
        if len(data) == 1 and ("criteria" in data[0] or "template" in data[0]):
            data = data[0]  # one object on one line: the same as that object in a .json file
    else:
        data = _parse(text, path, kind)
    if isinstance(data, dict) and "criteria" in data:
        rs = _not_empty(RubricSet.from_dict(data, file=str(path)), path)
    elif isinstance(data, dict) and "template" in data:
        rs = rubric_set_from_template(template_from_dict(data, file=str(path)))
    elif isinstance(data, list):
        return _not_empty(from_criteria_list(
            data, default_name, source or "imported", file=str(path), provenance={"file": path.name}
        ), path)
    else:
        raise InputError(
            f"unrecognised rubric file content ({type(data).__name__})",
            file=str(path),
            expected='a rubric set {"name", "criteria"}, a template {"name", "template"}, a list of criteria or a markdown list',
        )
    changes = {k: v for k, v in (("name", name), ("source", source)) if v}
    return rs.with_criteria(rs.criteria, **changes) if changes else rs
