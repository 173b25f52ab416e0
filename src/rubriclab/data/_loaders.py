"""Source loaders: one params entry (``data.sources.<name>``) in, cleaned pairs and drop counts out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rubriclab.data._clean import _meta, clean_pairs, drop_oversized, max_chars_of
from rubriclab.data._io import columns_of, jsonl_rows, read_rows, require_columns
from rubriclab.data._parsers import format_options, get_format, parse_rows
from rubriclab.data._schema import Pair, stable_hash, stable_id
from rubriclab.errors import ConfigError, InputError

DEMO_DOMAINS = ("helpful", "harmless")
_COMMON_KEYS = ("loader", "domain", "limit")
_HF_KEYS = ("dataset", "path", "name", "data_dir", "data_files", "split", "revision", "cache_dir")
_LOCAL_COLUMNS = ("id", "prompt", "chosen", "rejected", "domain")


@dataclass
class LoadResult:
    """What one source gave: kept pairs, drops by reason, and how many were available before ``limit``."""

    source: str
    pairs: list[Pair]
    drops: Counter = field(default_factory=Counter)
    available: int = 0


def _check_keys(spec: dict, allowed: tuple[str, ...] | list[str], where: str) -> None:
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; expected some of: {', '.join(allowed)}")


def _resolve(path: str | Path, base_dir: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(base_dir) / p


def _finish(parsed: list, parse_drops: Counter, source: str, default_domain: str | None) -> LoadResult:
    pairs, drops = clean_pairs(parsed, source, default_domain=default_domain)
    drops.update(parse_drops)
    return LoadResult(source, pairs, drops, len(pairs))


def _format_opts(spec: dict, dataset: str) -> dict:
    allowed = set(format_options(dataset))
    return {k: v for k, v in spec.items() if k in allowed}


# --- loaders -----------------------------------------------------------------------------------


def load_demo(spec: dict, base_dir: Path, name: str) -> LoadResult:
    """The synthetic demo pairs bundled with rubriclab (``domain`` picks one file, else all)."""
    where = f"data.sources.{name}"
    _check_keys(spec, _COMMON_KEYS, where)
    domain = spec.get("domain")
    if domain is not None and domain not in DEMO_DOMAINS:
        raise ConfigError(f"{where}.domain: unknown demo domain '{domain}'; expected one of: {', '.join(DEMO_DOMAINS)}")
    result = LoadResult("rubriclab/data/demo", [])
    for d in [domain] if domain else list(DEMO_DOMAINS):
        label = f"rubriclab/data/demo/{d}.jsonl"
        text = resources.files("rubriclab.data").joinpath("demo", f"{d}.jsonl").read_text(encoding="utf-8")
        part = _finish(jsonl_rows(text, Path(label)), Counter(), label, None)
        result.pairs += part.pairs
        result.drops.update(part.drops)
        result.source = label if domain else result.source
    result.available = len(result.pairs)
    return result


def load_hf(spec: dict, base_dir: Path, name: str) -> LoadResult:
    """A hub dataset via ``datasets.load_dataset``, parsed by the parser of ``spec['dataset']``."""
    where = f"data.sources.{name}"
    if "dataset" not in spec:
        raise ConfigError(f"{where}: missing key 'dataset'; expected one of: {', '.join(_dataset_names())}")
    fmt = get_format(spec["dataset"])
    if fmt.hub_path is None:
        raise ConfigError(f"{where}: dataset '{fmt.name}' is not on the hub; use loader: {fmt.name}")
    _check_keys(spec, [*_COMMON_KEYS, *_HF_KEYS, *format_options(fmt.name)], where)
    path = spec.get("path") or fmt.hub_path
    hub_name = spec.get("name", fmt.hub_name if path == fmt.hub_path else None)
    split = spec.get("split") or fmt.default_split
    data_files = spec.get("data_files")
    if data_files is not None:  # local copies in the hub's format, e.g. path: json
        files = data_files if isinstance(data_files, list) else [data_files]
        # a path that exists locally is resolved against the project; others stay hub-relative
        data_files = [str(_resolve(f, base_dir)) if _resolve(f, base_dir).exists() else f for f in files]
    source = (
        f"hf:{path}" + (f"/{hub_name}" if hub_name else "") + (f":{spec['data_dir']}" if spec.get("data_dir") else "")
    )
    source += f"[{split}]"

    import datasets

    try:
        ds = datasets.load_dataset(
            path,
            hub_name,
            data_dir=spec.get("data_dir"),
            data_files=data_files,
            split=split,
            revision=spec.get("revision"),
            cache_dir=spec.get("cache_dir"),
        )
    except Exception as exc:  # hub, network and file errors come in many types
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(
            f"could not load dataset: {msg}", file=source, expected="a reachable hub dataset or local data_files"
        ) from exc
    require_columns(ds.column_names, fmt.required, file=source)
    # drop unused columns first: Arena's full_conversation alone is most of its bytes
    ds = ds.select_columns([c for c in fmt.columns if c in ds.column_names])
    opts = _format_opts(spec, fmt.name)
    if fmt.name == "hh_rlhf":
        # e.g. hh-harmless-base-test-00042: subset, split and row index
        subset = Path(spec["data_dir"]).name if spec.get("data_dir") else hub_name or "all"
        opts.setdefault("id_prefix", f"hh-{subset}-{split}-")
    parsed, drops = parse_rows(fmt.name, enumerate(ds), columns=ds.column_names, source=source, **opts)
    return _finish(parsed, drops, source, None)


def load_rmb(spec: dict, base_dir: Path, name: str) -> LoadResult:
    """RMB pairwise files (a JSON array per file); ``path`` is one file or a folder searched recursively."""
    where = f"data.sources.{name}"
    _check_keys(spec, [*_COMMON_KEYS, "path", "pattern", "id_prefix"], where)
    if "path" not in spec:
        raise ConfigError(f"{where}: missing key 'path' (an RMB Pairwise_set .json file or folder)")
    root = _resolve(spec["path"], base_dir)
    files = sorted(root.glob(spec.get("pattern", "**/*.json"))) if root.is_dir() else [root]
    if not files:
        raise InputError(
            "no RMB files found", file=str(root), expected=f"files matching {spec.get('pattern', '**/*.json')}"
        )
    parsed, drops = [], Counter()
    for f in files:
        rows = read_rows(f)
        # ids are pair_uid, unique across RMB, so rows of all files go through one clean step
        out, d = parse_rows("rmb", rows, columns=columns_of(rows), source=str(f), **_format_opts(spec, "rmb"))
        parsed.extend(out)
        drops.update(d)
    return _finish(parsed, drops, str(root), None)


def load_local(spec: dict, base_dir: Path, name: str) -> LoadResult:
    """A local jsonl/json/parquet/csv file: a column mapping, or ``dataset:`` to reuse a hub parser."""
    where = f"data.sources.{name}"
    dataset = spec.get("dataset")
    extra = list(format_options(dataset)) if dataset else []
    _check_keys(spec, [*_COMMON_KEYS, "path", "columns", "dataset", "meta_columns", *extra], where)
    if "path" not in spec:
        raise ConfigError(f"{where}: missing key 'path'")
    path = _resolve(spec["path"], base_dir)
    rows = read_rows(path)
    if not rows:
        raise InputError("file has no rows", file=str(path), expected="at least one record")
    cols = columns_of(rows)
    if dataset:
        parsed, drops = parse_rows(dataset, rows, columns=cols, source=str(path), **_format_opts(spec, dataset))
        return _finish(parsed, drops, str(path), None)

    mapping = dict(spec.get("columns") or {})
    _check_keys(mapping, _LOCAL_COLUMNS, f"{where}.columns")
    col = {k: mapping.get(k, k) for k in _LOCAL_COLUMNS}
    require_columns(cols, [col["prompt"], col["chosen"], col["rejected"]], file=str(path))
    for key in ("id", "domain"):  # named explicitly → must exist; default name → optional
        if key in mapping:
            require_columns(cols, [col[key]], file=str(path))
    meta_cols = list(spec.get("meta_columns") or [])
    require_columns(cols, meta_cols, file=str(path))
    fallback_domain = spec.get("domain") or name
    parsed = []
    for line_no, row in rows:
        prompt, chosen, rejected = row.get(col["prompt"]), row.get(col["chosen"]), row.get(col["rejected"])
        rid = row.get(col["id"]) if col["id"] in cols else None
        meta = {**_meta(row.get("meta")), **{c: row.get(c) for c in meta_cols}}
        parsed.append(
            (
                line_no,
                {
                    # no id column: a content hash keeps ids stable across re-runs and row order
                    "id": rid if rid not in (None, "") else stable_id(prompt, chosen, rejected, prefix=f"{name}-"),
                    "domain": (row.get(col["domain"]) if col["domain"] in cols else None) or fallback_domain,
                    "prompt": prompt,
                    "chosen": chosen,
                    "rejected": rejected,
                    "meta": meta,
                },
            )
        )
    return _finish(parsed, Counter(), str(path), fallback_domain)


LOADERS: dict[str, Callable[[dict, Path, str], LoadResult]] = {
    "demo": load_demo,
    "hf": load_hf,
    "rmb": load_rmb,
    "local": load_local,
}


def _dataset_names() -> list[str]:
    from rubriclab.data._parsers import FORMATS

    return sorted(n for n, f in FORMATS.items() if f.hub_path)


def _apply_limit(result: LoadResult, limit: Any, seed: int, where: str) -> LoadResult:
    if limit is None:
        return result
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ConfigError(f"{where}.limit: {limit!r}; expected a non-negative integer or null")
    if len(result.pairs) > limit:
        # seeded choice by id hash: the same pairs survive however the source orders its rows
        ranked = sorted(result.pairs, key=lambda p: stable_hash("limit", seed, p.id))
        keep_ids = {p.id for p in ranked[:limit]}
        result.pairs = [p for p in result.pairs if p.id in keep_ids]
    return result


def load_source_detailed(spec: dict, base_dir: str | Path = ".", *, name: str = "source", seed: int = 42,
                         max_chars: dict[str, int] | None = None) -> LoadResult:
    """Like :func:`load_source` but also says where the pairs came from and how many were available.

    Pairs past ``max_chars`` (``data.max_chars``; defaults ``DEFAULT_MAX_CHARS``) are dropped and counted before
    ``limit`` samples, so ``available`` is what could be used."""
    where = f"data.sources.{name}"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a mapping with a 'loader' key, got {type(spec).__name__}")
    loader = spec.get("loader")
    if loader not in LOADERS:
        raise ConfigError(f"{where}.loader: unknown loader {loader!r}; expected one of: {', '.join(LOADERS)}")
    result = LOADERS[loader](spec, Path(base_dir), name)
    result.pairs = drop_oversized(result.pairs, result.drops, max_chars_of(max_chars))
    result.available = len(result.pairs)
    return _apply_limit(result, spec.get("limit"), seed, where)


def load_source(
    spec: dict, base_dir: str | Path = ".", *, name: str = "source", seed: int = 42
) -> tuple[list[Pair], Counter]:
    """Load one ``data.sources.<name>`` entry; return cleaned pairs and drops by reason.

    ``limit`` keeps a seeded sample of that many cleaned pairs (chosen by a stable hash of the id).
    """
    result = load_source_detailed(spec, base_dir, name=name, seed=seed)
    return result.pairs, result.drops
