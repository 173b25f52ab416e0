"""Build rubric sets from plain criteria lists, markdown lists and judge templates."""

from __future__ import annotations

import re
from collections.abc import Iterable

from rubriclab.errors import InputError
from rubriclab.rubrics._records import Criterion, RubricSet, _relocated, is_snake_case, slugify, unique_id
from rubriclab.rubrics._template import JudgeTemplate

_ITEM_RE = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+]|(?P<num>\d+(?:\.\d+)*)[.)])[ \t]+(?P<body>\S.*)$")
_BOLD_RE = re.compile(r"^(?:\*\*|__)(?P<title>.+?)(?:\*\*|__)\s*(?:[:\u2014\u2013]|\s-\s)?\s*(?P<desc>.*)$")
# A short lead phrase (≤6 words) before ':' or a dash reads as a title; longer ones are sentences.
_TITLED_RE = re.compile(r"^(?P<title>[^:\u2014\u2013]{1,60}?)\s*(?::|\u2014|\u2013|\s-)\s+(?P<desc>\S.*)$")
_FIELDS = ("id", "title", "description", "support", "provenance", "meta")
_CHECKBOX_RE = re.compile(r"^\[[ xX]\]\s+")
_FACTORS_RE = re.compile(r"\b(?:factors|criteria|aspects|dimensions)\s+such\s+as\s+(?P<list>[^.;:]+)", re.IGNORECASE)


def split_title(body: str) -> tuple[str, str]:
    """``(title, description)`` from ``**Title**: text``, ``Title — text``, ``Title: text`` or plain text."""
    body = _CHECKBOX_RE.sub("", body.strip())
    m = _BOLD_RE.match(body)
    if m:
        title = m.group("title").strip().rstrip(":").strip()
        return title, (m.group("desc").strip() or title)
    m = _TITLED_RE.match(body)
    if m and len(m.group("title").split()) <= 6 and not m.group("title").rstrip().endswith((".", "?", "!")):
        return m.group("title").strip(), m.group("desc").strip()
    return "", body


def _assign_ids(drafts: list[dict], file: str | None) -> list[Criterion]:
    """Keep given ids (must be snake_case and unique), derive the rest as deduplicated slugs."""
    taken: set[str] = set()
    for d in drafts:
        cid = d.get("id")
        if cid is None:
            continue
        if not is_snake_case(cid):
            raise InputError(
                f"criterion id {cid!r} is not snake_case",
                file=file,
                line=d.get("_line"),
                field=f"{d['_where']}id",
                expected="a snake_case id such as 'factual_accuracy', or no id to derive one",
            )
        if cid in taken:
            raise InputError(
                f"duplicate criterion id '{cid}'",
                file=file,
                line=d.get("_line"),
                field=f"{d['_where']}id",
                expected="unique criterion ids",
            )
        taken.add(cid)
    out = []
    for d in drafts:
        if d.get("id") is None:
            d["id"] = unique_id(slugify(d.get("title") or d["description"]), taken)
            taken.add(d["id"])
        where, line = d.pop("_where"), d.pop("_line", None)
        try:
            out.append(Criterion(**d))
        except InputError as exc:
            raise type(exc)(
                exc.problem, file=file, line=line, field=where + (exc.field or ""), expected=exc.expected
            ) from None
    return out


def from_criteria_list(
    items: Iterable[object],
    name: str,
    source: str = "imported",
    *,
    provenance: dict | None = None,
    file: str | None = None,
) -> RubricSet:
    """Rubric set from strings or dicts ``{id?, description, title?, support?, provenance?, meta?}``.

    Missing ids become snake_case slugs of the title or description, deduplicated with ``_2``, ``_3``…;
    other dict keys are kept in ``meta``.
    """
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise InputError(
            f"criteria list is a {type(items).__name__}", file=file, expected="a list of strings or objects"
        )
    drafts = []
    for i, item in enumerate(items):
        where = f"[{i}]."
        if isinstance(item, str):
            title, desc = split_title(item)
            drafts.append(
                {"title": title, "description": desc, "provenance": {"importer": "list", "index": i}, "_where": where}
            )
        elif isinstance(item, dict):
            if len(item) == 1 and isinstance(next(iter(item.values())), str) and next(iter(item)) not in _FIELDS:
                # YAML reads "- Accuracy: text" as a one-key mapping; treat it as "Title: text".
                ((title, desc),) = item.items()
                item = {"title": str(title), "description": desc}
            if "description" not in item:
                raise InputError(
                    "criterion lacks 'description'",
                    file=file,
                    field=f"[{i}].description",
                    expected="an object with a description",
                )
            known = {k: item[k] for k in _FIELDS if k in item}
            extra = {str(k): v for k, v in item.items() if k not in known}
            if extra:
                known["meta"] = {**extra, **dict(known.get("meta") or {})}
            known.setdefault("provenance", {"importer": "list", "index": i})
            drafts.append({**known, "_where": where})
        else:
            raise InputError(
                f"criterion entry is a {type(item).__name__}",
                file=file,
                field=f"[{i}]",
                expected="a string or an object",
            )
    return _make_set(name, _assign_ids(drafts, file), source, provenance, None, file)


def _make_set(name, criteria, source, provenance, template, file) -> RubricSet:
    try:
        return RubricSet(
            name=name, criteria=tuple(criteria), source=source, provenance=provenance or {}, template=template
        )
    except InputError as exc:
        raise _relocated(exc, file, "") from None


def from_markdown(
    text: str, name: str, source: str = "imported", *, file: str | None = None, provenance: dict | None = None
) -> RubricSet:
    """Rubric set from a markdown bulleted or numbered list.

    Items may read ``**Title**: text``, ``Title — text``, ``Title: text`` or plain text. Indented lines
    and nested items belong to the item above; the nearest ``#`` heading is kept as ``meta["section"]``.
    """
    drafts: list[dict] = []
    top_indent: int | None = None
    section = ""
    current: dict | None = None
    blank_before = False
    in_fence = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.expandtabs(4)
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
            current = None
            continue
        if in_fence:
            continue
        if not stripped:
            blank_before = True
            continue
        indent = len(line) - len(line.lstrip())
        m = _ITEM_RE.match(line)
        if stripped.startswith("#") and indent < 4:
            section, current = stripped.lstrip("#").strip(), None
        elif m and (top_indent is None or indent <= top_indent):
            top_indent = indent if top_indent is None else top_indent
            title, desc = split_title(m.group("body"))
            current = {
                "title": title,
                "description": desc,
                "provenance": {"importer": "markdown", "line": lineno},
                "meta": {"section": section} if section else {},
                "_where": "",  # markdown errors point at the line, not a JSON path
                "_line": lineno,
            }
            drafts.append(current)
        elif current is not None and m:
            current["description"] += "\n- " + m.group("body").strip()
        elif current is not None and (indent > (top_indent or 0) or not blank_before):
            current["description"] += " " + stripped
        else:
            current = None
        blank_before = False
    if not drafts:
        raise InputError(
            "no list items found",
            file=file,
            expected="a markdown bulleted or numbered list ('- **Title**: text' or '1. Title — text')",
        )
    return _make_set(name, _assign_ids(drafts, file), source, provenance, None, file)


_TEMPLATE_ITEM_RE = re.compile(
    r"^[ \t]{0,3}(?P<num>\d+)[.)][ \t]+(?:\*\*|__)?(?P<title>[^:\n*\u2014\u2013]{1,60}?)(?:\*\*|__)?"
    r"\s*(?::|\u2014|\u2013|\s-)\s*(?P<desc>\S.*)$"
)


def extract_template_criteria(template: JudgeTemplate) -> tuple[Criterion, ...]:
    """Criteria embedded in a template: numbered ``N. Title: text`` lines, else a "factors such as a, b" list."""
    drafts: list[dict] = []
    current: dict | None = None
    for lineno, line in enumerate(template.text.splitlines(), 1):
        m = _TEMPLATE_ITEM_RE.match(line)
        if m and len(m.group("title").split()) <= 6:
            current = {
                "title": m.group("title").strip(),
                "description": m.group("desc").strip(),
                "provenance": {
                    "operator": "template_extract",
                    "mode": "numbered",
                    "template": template.name,
                    "line": lineno,
                },
                "_where": "",
                "_line": lineno,
            }
            drafts.append(current)
        elif current is not None and line.startswith((" ", "\t")) and line.strip():
            current["description"] += " " + line.strip()
        else:
            current = None
    if not drafts:
        m = _FACTORS_RE.search(template.text)
        if m:
            for term in _split_factor_list(m.group("list")):
                drafts.append(
                    {
                        "title": term[:1].upper() + term[1:],
                        "description": f"The {term} of the response.",
                        "provenance": {
                            "operator": "template_extract",
                            "mode": "factor_list",
                            "template": template.name,
                        },
                        "_where": "",
                    }
                )
    return tuple(_assign_ids(drafts, None))


def _split_factor_list(text: str) -> list[str]:
    text = re.sub(r"\s+of\s+(?:their|the|its|each)\s+(?:responses?|answers?)\s*$", "", text.strip())
    terms = []
    for part in re.split(r",|\band\b|\bor\b", text):
        term = re.sub(r"^(?:the|a|an)\s+", "", part.strip(), flags=re.IGNORECASE).strip()
        if term:
            terms.append(term)
    return terms


def rubric_set_from_template(
    template: JudgeTemplate, *, source: str = "template", name: str | None = None
) -> RubricSet:
    """The template's embedded criteria as a RubricSet that carries the template itself."""
    return RubricSet(
        name=name or template.name,
        criteria=extract_template_criteria(template),
        source=source,
        provenance={"template": template.name},
        template=template,
    )
