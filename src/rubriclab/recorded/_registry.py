"""The importer registry: a format is one module that registers its reader (``@register_format``), as a provider
registers itself with ``rubriclab.llm.register_provider``. ``recorded.sources.<name>.format``, the CLI's
``--format`` choices and the error for an unknown format all read it, so adding a format touches one new file
(imported in ``rubriclab/recorded/__init__.py``) and its tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubriclab.errors import ConfigError

# keys every source may set (recorded.sources.<name>), whatever its format
COMMON_KEYS = ("path", "format", "judges", "conditions", "baseline", "contrasts", "contrast_judges", "title",
               "license")


@dataclass(frozen=True)
class SourceContext:
    """What a reader gets besides its ``recorded.sources.<name>`` entry: the entry's ``path`` resolved (a
    ``shipped:`` set's folder, a project-relative path made absolute; the raw string in ``raw_path``), the
    project folder, the source's name, the ``llm`` section and ``data.seed`` (for the formats that judge)."""

    path: Path
    raw_path: str
    project: Path
    name: str
    llm: Any = None
    data_seed: int = 0


@dataclass(frozen=True)
class Format:
    """A registered importer: ``read(source, context) -> RecordedSet``; ``what`` the path it expects (one line,
    for errors and docs); ``keys`` the source keys it reads beyond the common ones; ``required`` those it
    cannot do without. ``judges``/``conditions`` filter the judgments it returns (a reader may also apply them
    while reading, to read less)."""

    name: str
    read: Callable[[Any, SourceContext], Any]
    what: str
    keys: tuple[str, ...] = ()
    required: tuple[tuple[str, str], ...] = ()  # (key, what it holds)


_FORMATS: dict[str, Format] = {}
_CHECKS: dict[str, Callable[[Any, Any], dict[str, Any] | None]] = {}


def register_format(name: str, *, what: str, keys: tuple[str, ...] = (),
                    required: dict[str, str] | None = None) -> Callable[[Callable], Callable]:
    """Register ``fn(source, context)`` as the reader of format ``name`` (a decorator)."""
    def deco(fn: Callable) -> Callable:
        if name in _FORMATS and _FORMATS[name].read is not fn:
            raise ConfigError(f"recorded format {name!r} is registered twice ({_FORMATS[name].read.__module__} and "
                              f"{fn.__module__}); a format name names one importer")
        _FORMATS[name] = Format(name, fn, what, tuple(keys), tuple((required or {}).items()))
        return fn
    return deco


def register_check(name: str) -> Callable[[Callable], Callable]:
    """Register ``fn(recorded_set, analysis) -> {"kind", "rows", "summary"} | None``: the check of format ``name``'s
    sources against what their publisher printed (its leaderboard, its statistics files), by the publisher's own
    definitions (a decorator)."""
    def deco(fn: Callable) -> Callable:
        _CHECKS[name] = fn
        return fn
    return deco


def publisher_check_of(name: str) -> Callable[[Any, Any], dict[str, Any] | None] | None:
    return _CHECKS.get(name)


def registered_formats() -> dict[str, Format]:
    """Every registered format, by name (sorted). Not ``formats``: that name is the subpackage of readers
    (``rubriclab.recorded.formats.inspect_ai``), which a function of the same name hid."""
    return dict(sorted(_FORMATS.items()))


def format_names() -> list[str]:
    return list(registered_formats())


def get_format(name: str, where: str = "recorded.sources.<name>.format") -> Format:
    """The format ``name``, or a one-line error listing the registered ones and what each reads."""
    if name not in _FORMATS:
        listed = "; ".join(f"{f.name} ({f.what})" for f in registered_formats().values())
        raise ConfigError(f"{where}: unknown format {name!r}; expected one of: {listed}")
    return _FORMATS[name]


def check_keys(fmt: Format, given: dict[str, Any], where: str) -> None:
    """The rules between a source's keys and its format: keys of other formats are refused, required ones must
    be there."""
    own = set(COMMON_KEYS) | set(fmt.keys)
    stray = sorted(k for k, v in given.items() if v is not None and k not in own)
    if stray:
        owners = {k: [f.name for f in _FORMATS.values() if k in f.keys] for k in stray}
        raise ConfigError(f"{where}: {', '.join(stray)} do not apply to format {fmt.name} ("
                          + "; ".join(f"{k}: format {' / '.join(v) or '—'}" for k, v in owners.items()) + ")")
    missing = [(k, what) for k, what in fmt.required if given.get(k) in (None, "", [], {})]
    if missing:
        raise ConfigError(f"{where}: format {fmt.name} needs " + " and ".join(f"{k!r} ({what})" for k, what in missing))
