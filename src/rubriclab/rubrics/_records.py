"""Criterion and RubricSet records and their dict (JSON/YAML) form."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from rubriclab.errors import InputError
from rubriclab.rubrics._template import JudgeTemplate, template_from_dict

FORMAT_VERSION = 1
SOURCES = ("discovered", "pref_repaired", "robust_repaired", "imported", "task_derived", "template", "drifted")
_ID_RE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
_ID_EXPECTED = "a snake_case id (lowercase letters, digits and single underscores, starting with a letter)"
_CRITERION_KEYS = ("id", "title", "description", "support", "provenance", "meta")
_SET_KEYS = ("format_version", "name", "source", "criteria", "provenance", "template")


def is_snake_case(value: object) -> bool:
    """True when ``value`` is a valid criterion id."""
    return isinstance(value, str) and bool(_ID_RE.match(value))


def slugify(text: str, *, max_words: int = 6, max_len: int = 48) -> str:
    """A snake_case id from free text (first ``max_words`` words); ``criterion`` when nothing is left."""
    words = re.findall(r"[a-z0-9]+", text.lower().replace("'", "").replace("\u2019", ""))
    slug = ""
    for word in words[:max_words]:
        candidate = f"{slug}_{word}" if slug else word
        if len(candidate) > max_len and slug:
            break
        slug = candidate[:max_len]
    if not slug:
        return "criterion"
    return slug if slug[0].isalpha() else f"c_{slug}"


def unique_id(base: str, taken: set[str]) -> str:
    """``base`` or ``base_2``, ``base_3``, … whichever is not in ``taken``."""
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _sorted_dict(value: object) -> object:
    # Nested provenance/meta dicts get sorted keys so saved files diff cleanly across runs.
    if isinstance(value, dict):
        return {str(k): _sorted_dict(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_sorted_dict(v) for v in value]
    return value


def _check_criterion(c: Criterion, file: str | None, where: str) -> None:
    if not is_snake_case(c.id):
        raise InputError(
            f"criterion id {c.id!r} is not snake_case", file=file, field=where + "id", expected=_ID_EXPECTED
        )
    if not isinstance(c.description, str) or not c.description.strip():
        raise InputError(
            f"criterion '{c.id}' has an empty description",
            file=file,
            field=where + "description",
            expected="non-empty text",
        )
    if not isinstance(c.title, str):
        raise InputError(
            f"criterion '{c.id}' title is not a string", file=file, field=where + "title", expected="a string"
        )
    if isinstance(c.support, bool) or not isinstance(c.support, int) or c.support < 0:
        raise InputError(
            f"criterion '{c.id}' support is {c.support!r}",
            file=file,
            field=where + "support",
            expected="an integer >= 0",
        )
    for name in ("provenance", "meta"):
        if not isinstance(getattr(c, name), dict):
            raise InputError(
                f"criterion '{c.id}' {name} is not a mapping", file=file, field=where + name, expected="an object"
            )


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion; ``provenance`` records where it came from (candidates, pairs, parents, operator)."""

    id: str
    description: str
    title: str = ""
    support: int = 0
    provenance: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_criterion(self, None, "")
        # Detach from the caller's dicts so a shared dict cannot change a frozen record later.
        object.__setattr__(self, "provenance", dict(self.provenance))
        object.__setattr__(self, "meta", dict(self.meta))

    @property
    def label(self) -> str:
        """Title when set, else the id."""
        return self.title or self.id

    def to_dict(self) -> dict:
        """Plain dict with a stable key order."""
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "support": self.support,
            "provenance": _sorted_dict(self.provenance),
            "meta": _sorted_dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: object, *, file: str | None = None, field_prefix: str = "") -> Criterion:
        """Build from :meth:`to_dict` output; errors name ``file`` and the field path."""
        where = field_prefix + "." if field_prefix else ""
        if not isinstance(data, dict):
            raise InputError(
                f"criterion is a {type(data).__name__}",
                file=file,
                field=field_prefix or None,
                expected="an object with id and description",
            )
        unknown = sorted(set(data) - set(_CRITERION_KEYS), key=str)
        if unknown:
            raise InputError(
                f"unknown criterion key {unknown[0]!r}",
                file=file,
                field=where + str(unknown[0]),
                expected="keys among " + ", ".join(_CRITERION_KEYS),
            )
        for key in ("id", "description"):
            if key not in data:
                raise InputError(
                    f"criterion lacks '{key}'", file=file, field=where + key, expected="id and description"
                )
        try:
            return cls(**{k: data[k] for k in _CRITERION_KEYS if k in data})
        except InputError as exc:
            raise _relocated(exc, file, where) from None


@dataclass(frozen=True)
class RubricSet:
    """A named, ordered set of criteria with unique ids, optionally carried by a judge template."""

    name: str
    criteria: tuple[Criterion, ...] = ()
    source: str = "imported"
    provenance: dict = field(default_factory=dict)
    template: JudgeTemplate | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "criteria", tuple(self.criteria))
        object.__setattr__(self, "provenance", dict(self.provenance))
        _check_set(self, None)

    @property
    def K(self) -> int:  # noqa: N802 - the papers' name for the number of criteria
        """Number of criteria."""
        return len(self.criteria)

    def __len__(self) -> int:
        return len(self.criteria)

    def __iter__(self) -> Iterator[Criterion]:
        return iter(self.criteria)

    @property
    def criterion_ids(self) -> tuple[str, ...]:
        """Ids in order."""
        return tuple(c.id for c in self.criteria)

    def get(self, criterion_id: str) -> Criterion:
        """The criterion with this id (KeyError when absent)."""
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)

    def with_criteria(self, criteria: Iterable[Criterion], **changes: object) -> RubricSet:
        """A copy holding ``criteria``; ``changes`` may also set name, source, provenance or template."""
        return replace(self, criteria=tuple(criteria), **changes)

    def render_list(self, *, numbered: bool = True) -> str:
        """Criteria as a prompt-ready list: ``1. Title: description`` (continuation lines indented)."""
        lines = []
        for i, c in enumerate(self.criteria, 1):
            marker = f"{i}." if numbered else "-"
            pad = " " * (len(marker) + 1)
            body = c.description.strip().replace("\n", "\n" + pad)
            lines.append(f"{marker} {c.label}: {body}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Plain dict with a stable key order (the template in the shared ``{"name", "template"}`` shape)."""
        return {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "source": self.source,
            "provenance": _sorted_dict(self.provenance),
            "template": self.template.to_dict() if self.template is not None else None,
            "criteria": [c.to_dict() for c in self.criteria],
        }

    @classmethod
    def from_dict(cls, data: object, *, file: str | None = None) -> RubricSet:
        """Build from :meth:`to_dict` output; errors name ``file`` and the field path."""
        if not isinstance(data, dict):
            raise InputError(
                f"rubric set is a {type(data).__name__}", file=file, expected="an object with name and criteria"
            )
        unknown = sorted(set(data) - set(_SET_KEYS), key=str)
        if unknown:
            raise InputError(
                f"unknown rubric-set key {unknown[0]!r}",
                file=file,
                field=str(unknown[0]),
                expected="keys among " + ", ".join(_SET_KEYS),
            )
        version = data.get("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise InputError(
                f"unsupported format_version {version!r}",
                file=file,
                field="format_version",
                expected=str(FORMAT_VERSION),
            )
        raw = data.get("criteria")
        if not isinstance(raw, list):
            raise InputError(
                "criteria is missing or not a list", file=file, field="criteria", expected="a list of criteria"
            )
        criteria = tuple(Criterion.from_dict(c, file=file, field_prefix=f"criteria[{i}]") for i, c in enumerate(raw))
        tpl = data.get("template")
        template = template_from_dict(tpl, file=file, field_prefix="template") if tpl is not None else None
        provenance = data.get("provenance", {}) or {}
        if not isinstance(provenance, dict):
            raise InputError("provenance is not a mapping", file=file, field="provenance", expected="an object")
        try:
            return cls(
                name=data.get("name"),
                criteria=criteria,
                source=data.get("source", "imported"),
                provenance=provenance,
                template=template,
            )
        except InputError as exc:
            raise _relocated(exc, file, "") from None


def _relocated(exc: InputError, file: str | None, prefix: str) -> InputError:
    """The same error re-pointed at ``file`` and a field path under ``prefix``."""
    return type(exc)(exc.problem, file=file, field=prefix + (exc.field or "") or None, expected=exc.expected)


def _check_set(rs: RubricSet, file: str | None) -> None:
    if not isinstance(rs.name, str) or not rs.name.strip():
        raise InputError("rubric set name is empty", file=file, field="name", expected="a non-empty string")
    if not isinstance(rs.source, str) or not rs.source.strip():
        raise InputError(
            "rubric set source is empty", file=file, field="source", expected="a source such as " + ", ".join(SOURCES)
        )
    seen: set[str] = set()
    for i, c in enumerate(rs.criteria):
        if not isinstance(c, Criterion):
            raise InputError(
                f"criteria[{i}] is a {type(c).__name__}", file=file, field=f"criteria[{i}]", expected="a Criterion"
            )
        if c.id in seen:
            raise InputError(
                f"duplicate criterion id '{c.id}'",
                file=file,
                field=f"criteria[{i}].id",
                expected="unique criterion ids",
            )
        seen.add(c.id)
    template = getattr(rs, "template", None)
    if template is not None and not isinstance(template, JudgeTemplate):
        raise InputError(
            f"template is a {type(template).__name__}", file=file, field="template", expected="a JudgeTemplate or null"
        )
