"""The drift gate's data: preference pairs from local files in any layout the data package reads, or from
``data.sources`` entries, relabelled by a domain field, and limited per domain by a seeded choice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rubriclab.data import (
    FORMATS,
    Pair,
    drop_oversized,
    load_source_detailed,
    max_chars_of,
    read_pairs,
    read_rows,
    stable_hash,
)
from rubriclab.errors import ConfigError, InputError
from rubriclab.settings import Data, as_section

PAIR_COLUMNS = {"id", "domain", "prompt", "chosen", "rejected"}


def detect_layout(path: Path) -> str:
    """``pairs`` (canonical pair records), ``columns`` (plain prompt/chosen/rejected columns) or the name of
    the dataset parser whose columns the file has (``hh_rlhf``, ``ultrafeedback``, ``helpsteer3``, …)."""
    rows = read_rows(path)
    if not rows:
        raise InputError("file has no rows", file=str(path), expected="at least one preference pair")
    cols = {key for _, row in rows for key in row}
    if PAIR_COLUMNS <= cols:
        return "pairs"
    if {"prompt", "chosen", "rejected"} <= cols:
        return "columns" if isinstance(rows[0][1].get("chosen"), str) else "ultrafeedback"
    if {"chosen", "rejected"} <= cols:
        return "hh_rlhf"
    for name, f in FORMATS.items():
        if name not in ("hh_rlhf", "ultrafeedback", "arena_expert") and set(f.required) <= cols:
            return name
    raise InputError(f"no known layout for columns {', '.join(sorted(cols))}", file=str(path),
                     expected="canonical pairs (id, domain, prompt, chosen, rejected), prompt/chosen/rejected "
                              f"columns, or a dataset layout named with --format ({', '.join(sorted(FORMATS))})")


def load_file(path: Path, *, fmt: str | None = None, domain_field: str | None = None,
              seed: int = 0, max_chars: dict[str, int] | None = None) -> tuple[list[Pair], Counter]:
    """Pairs from one local file, in any layout the data package reads. ``fmt``: ``pairs`` (canonical
    records, e.g. a data-stage split parquet), ``columns`` (prompt/chosen/rejected, optional id/domain) or a
    dataset parser name (``hh_rlhf``, ``ultrafeedback``, ``helpsteer3``, ``arena``, ``pku_saferlhf``, ``rmb``);
    default: detected from the file's columns. Pairs past ``max_chars`` (``data.max_chars``) are dropped and
    counted, whatever the layout, as the data stage drops them."""
    known = ("pairs", "columns", *FORMATS)
    if fmt is not None and fmt not in known:
        raise ConfigError(f"--format {fmt!r}: unknown; expected one of: {', '.join(known)}")
    fmt = fmt or detect_layout(path)
    if fmt == "pairs":
        drops: Counter = Counter()
        return drop_oversized(read_pairs(path), drops, max_chars_of(max_chars)), drops
    spec: dict[str, Any] = {"loader": "local", "path": str(path.resolve())}
    if fmt != "columns":
        spec["dataset"] = fmt
    elif domain_field and domain_field != "domain":
        spec["meta_columns"] = [domain_field]  # relabelled from meta by load_gate_data
    result = load_source_detailed(spec, path.parent, name=path.stem, seed=seed, max_chars=max_chars)
    return result.pairs, result.drops


def load_gate_data(specs: list[str], data: Data | dict, project: Path, *, fmt: str | None = None,
                   domain_field: str | None = None) -> tuple[list[Pair], list[str]]:
    """Pairs from each ``--data`` value: a file (cwd, then project relative) or a ``data.sources.<name>``
    entry of ``data`` (params.yaml's ``data`` section; its ``seed`` seeds a source's ``limit``); ``domain_field``
    relabels domains from that field. Returns the pairs and notes (drops, sources)."""
    if not specs:
        raise ConfigError("drift check: --data is required (a pair file or a data.sources name)")
    data = as_section("data", data)
    sources, seed = data.sources, data.seed
    max_chars = data.max_chars.model_dump()  # the data stage's size limits hold here too
    pairs: list[Pair] = []
    notes = []
    for spec in specs:
        path = next((p for p in (Path(spec), project / spec) if p.is_file()), None)
        if path is not None:
            got, drops = load_file(path, fmt=fmt, domain_field=domain_field, seed=seed, max_chars=max_chars)
            where = str(path)
        elif spec in sources:
            # the loader gets the source's keys as given: unset common keys (domain, limit) stay absent
            got, drops = _load_source(sources[spec].model_dump(exclude_unset=True), spec, project, seed, max_chars)
            where = f"data.sources.{spec}"
        else:
            raise InputError("is neither a file nor a data.sources entry", file=spec, field="--data",
                             expected="a pair file (jsonl/json/parquet/csv) or one of: "
                                      f"{', '.join(sorted(sources)) or '(no data.sources in params.yaml)'}")
        if domain_field and domain_field != "domain":
            got = [_relabel(p, domain_field, where) for p in got]
        dropped = sum(drops.values())
        notes.append(f"{where}: {len(got)} pairs" + (f" ({dropped} rows dropped: "
                                                    f"{', '.join(f'{k} {v}' for k, v in sorted(drops.items()))})"
                                                    if dropped else ""))
        pairs += got
    seen: set[str] = set()
    for p in pairs:
        if p.id in seen:
            raise InputError(f"pair id {p.id!r} appears more than once across --data", field="--data",
                             expected="each pair once (no file or source given twice)")
        seen.add(p.id)
    if not pairs:
        raise InputError("no pairs loaded", field="--data", expected="at least one preference pair")
    return pairs, notes


def _load_source(spec: Any, name: str, project: Path, seed: int,
                 max_chars: dict[str, int] | None = None) -> tuple[list[Pair], Counter]:
    res = load_source_detailed(spec, project, name=name, seed=seed, max_chars=max_chars)
    return res.pairs, res.drops


def _relabel(p: Pair, field: str, where: str) -> Pair:
    value = p.meta.get(field)
    if value in (None, ""):
        raise InputError(f"pair {p.id!r} has no value", file=where, field=field,
                         expected=f"a '{field}' field on every pair (--domain-field)")
    return Pair(id=p.id, domain=str(value), prompt=p.prompt, chosen=p.chosen, rejected=p.rejected,
                meta={**p.meta, "original_domain": p.domain})


def limit_per_domain(pairs: list[Pair], limit: int | None, seed: int) -> list[Pair]:
    """At most ``limit`` pairs per domain, a seeded choice by id hash (order kept)."""
    if not limit:
        return pairs
    by: dict[str, list[Pair]] = {}
    for p in pairs:
        by.setdefault(p.domain, []).append(p)
    keep = {p.id for group in by.values()
            for p in sorted(group, key=lambda q: stable_hash("drift-gate-limit", seed, q.id))[:limit]}
    return [p for p in pairs if p.id in keep]
