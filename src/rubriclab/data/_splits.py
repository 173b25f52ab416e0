"""Seeded, disjoint splits (PReMISE per source, RIPD bench/target) and the data-stage driver."""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from rubriclab.data._io import write_splits
from rubriclab.data._loaders import LoadResult, load_source_detailed
from rubriclab.data._schema import Pair
from rubriclab.errors import ArgumentError, ConfigError
from rubriclab.settings import Data, Premise, RipdSetting, as_section

log = logging.getLogger(__name__)

PREMISE_SPLITS = ("extraction", "audit", "heldout", "dev")
# dev (the repair stage's acceptance split) comes last: a group goes to the first split with room, so adding
# it leaves the other three splits exactly as they were whenever they fit.
OPTIONAL_SPLITS = {"dev": 0}
RIPD_SPLITS = ("train", "val", "test")
# PReMISE paper sizes. The paper names a development split for refinement but not its size: it is 0 unless
# set (data.premise.dev), so params written before it existed keep their splits; `repair` asks for it.
PREMISE_DEFAULTS = Premise().model_dump(exclude={"sources"})  # rubriclab.settings: the one definition


def allocate(available: int, sizes: dict[str, int]) -> dict[str, int]:
    """Split sizes that fit in ``available`` pairs.

    If the request fits it is returned as is. Otherwise every split shrinks by the same factor
    ``available / sum(sizes)``: each gets the floor of its share and the pairs left over go one each
    to the splits with the largest fractional parts (ties: earlier split first).
    """
    total = sum(sizes.values())
    if total <= available:
        return dict(sizes)
    shares = {k: available * v / total for k, v in sizes.items()}
    got = {k: int(s) for k, s in shares.items()}
    names = list(sizes)
    by_fraction = sorted(names, key=lambda k: (-(shares[k] - got[k]), names.index(k)))
    for k in by_fraction[: available - sum(got.values())]:
        got[k] += 1
    return got


def _check_sizes(sizes: dict, names: tuple[str, ...], where: str,
                 optional: dict[str, int] | None = None) -> dict[str, int]:
    optional = optional or {}
    if isinstance(sizes, dict):
        sizes = {**{k: v for k, v in optional.items() if k in names}, **sizes}
    if not isinstance(sizes, dict) or set(sizes) != set(names):
        got = ", ".join(sizes) if isinstance(sizes, dict) else type(sizes).__name__
        raise ConfigError(f"{where}: split sizes must name exactly {', '.join(names)}; got {got}")
    for k, v in sizes.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ConfigError(f"{where}.{k}: {v!r}; expected a non-negative integer")
    return {k: sizes[k] for k in names}


def _split(pairs: Iterable[Pair], sizes: dict[str, int], seed: int, salt: str) -> dict[str, list[Pair]]:
    pairs = sorted(pairs, key=lambda p: p.id)  # the input's order must not change the result
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        dup = next(i for i, c in Counter(ids).items() if c > 1)
        raise ArgumentError(f"pair id '{dup}' occurs more than once; clean_pairs the input first")
    want = allocate(len(pairs), sizes)
    if want != sizes:
        log.warning("%s: only %d pairs for %s requested; shrunk to %s", salt, len(pairs), sizes, want)
    # pairs sharing a prompt stay in one split, so no prompt leaks from probe/extraction to test
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        groups.setdefault(p.prompt.strip(), []).append(p)
    order = list(groups.values())
    random.Random(f"{salt}:{seed}").shuffle(order)
    out: dict[str, list[Pair]] = {k: [] for k in sizes}
    for group in order:
        for k in sizes:
            if want[k] - len(out[k]) >= len(group):
                out[k].extend(group)
                break
    _assert_disjoint(out.values())
    return out


def _assert_disjoint(splits: Iterable[list[Pair]]) -> None:
    seen: set[str] = set()
    for split in splits:
        ids = {p.id for p in split}
        if len(ids) != len(split) or ids & seen:
            raise AssertionError("splits overlap")  # a bug here would leak test pairs into training
        seen |= ids


def premise_splits(pairs: Iterable[Pair], sizes: dict[str, int], seed: int = 42) -> dict[str, list[Pair]]:
    """Disjoint ``extraction``/``audit``/``heldout``/``dev`` splits of one source (shrunk if too few pairs).
    ``dev`` (the repair stage's acceptance split) may be left out: then the result has no ``dev``."""
    asked = set(sizes) if isinstance(sizes, dict) else set()
    sizes = _check_sizes(sizes, PREMISE_SPLITS, "data.premise", OPTIONAL_SPLITS)
    out = _split(pairs, sizes, seed, "premise")
    return {k: v for k, v in out.items() if k in asked or k not in OPTIONAL_SPLITS}


def bench_target_splits(
    bench_pairs: Iterable[Pair], target_pairs: Iterable[Pair], sizes: dict[str, int], seed: int = 42
) -> dict[str, dict[str, list[Pair]]]:
    """``{"bench"|"target": {"train"|"val"|"test": pairs}}``, all six disjoint.

    Target pairs whose id is also a bench pair are left out, so a pair is never on both sides.
    """
    sizes = _check_sizes(sizes, RIPD_SPLITS, "data.ripd")
    bench_pairs = list(bench_pairs)
    bench_ids = {p.id for p in bench_pairs}
    target_pairs = [p for p in target_pairs if p.id not in bench_ids]
    out = {
        "bench": _split(bench_pairs, sizes, seed, "ripd-bench"),
        "target": _split(target_pairs, sizes, seed, "ripd-target"),
    }
    _assert_disjoint([*out["bench"].values(), *out["target"].values()])
    return out


def _counts(splits: dict[str, list[Pair]], sizes: dict[str, int]) -> dict:
    return {k: {"requested": sizes[k], "written": len(splits[k])} for k in splits}


def _source_report(res: LoadResult) -> dict:
    return {
        "source": res.source,
        "available": res.available,
        "loaded": len(res.pairs),
        "drops": dict(sorted(res.drops.items())),
        "domains": dict(sorted(Counter(p.domain for p in res.pairs).items())),
    }


def unused_sources(sources: Iterable[str], premise_sources: list[str], ripd: dict[str, RipdSetting]) -> dict[str, str]:
    """``data.sources`` entries no split uses, each with a one-line warning naming the splits that exist.

    Not an error: ``rubriclab drift check --data NAME`` reads a ``data.sources`` entry directly, so an entry kept
    only for it is legitimate. The data stage does not load such an entry; it says so (a warning on stderr, the
    report's ``unused_sources`` and the ``sources.unused`` metric) instead of skipping it silently."""
    used = set(premise_sources) | {name for cfg in ripd.values() for name in (cfg.bench, cfg.target)}
    splits = [f"data.premise.sources: {', '.join(premise_sources) or 'none'}"]
    splits += [f"data.ripd.{name}: bench {cfg.bench}, target {cfg.target}" for name, cfg in ripd.items()]
    return {name: (f"data.sources.{name}: not used by any split, so the data stage does not load it (splits: "
                   f"{'; '.join(splits)}); add it to data.premise.sources or a data.ripd setting to split it "
                   f"(`rubriclab drift check --data {name}` reads it as it is)")
            for name in sources if name not in used}


def build_splits(data: Data | dict, out_dir: str | Path, base_dir: str | Path = ".") -> dict:
    """Load the sources ``data`` (params.yaml's typed ``data`` section) names, split them and write parquet files;
    return a report. A mapping is validated as params.yaml's ``data:`` (every default from the schema).

    Writes ``out_dir/premise/<source>/{extraction,audit,heldout,dev}.parquet`` for each source in
    ``data.premise.sources`` and ``out_dir/ripd/<setting>/{bench,target}_{train,val,test}.parquet``
    for each ``data.ripd.<setting>``. The report (JSON-able) has per-source counts and drops and
    per-split requested vs written counts, and ``unused_sources``: the ``data.sources`` entries no split uses
    (not loaded; a warning each, see :func:`unused_sources`).
    """
    data, out_dir = as_section("data", data), Path(out_dir)
    seed, premise, ripd = data.seed, data.premise, data.ripd
    max_chars = data.max_chars.model_dump()
    premise_sizes = premise.model_dump(include=set(PREMISE_SPLITS))
    needed = [*premise.sources, *(name for cfg in ripd.values() for name in (cfg.bench, cfg.target))]
    for name in needed:
        if name not in data.sources:
            raise ConfigError(
                f"data: source '{name}' is not defined; expected one of data.sources: {', '.join(data.sources)}"
            )
    unused = unused_sources(data.sources, premise.sources, ripd)
    for why in unused.values():
        log.warning("warning: %s", why)

    loaded: dict[str, LoadResult] = {}
    for name in dict.fromkeys(needed):
        # the loaders get a source's keys as given: unset common keys (domain, limit) stay absent
        spec = data.sources[name].model_dump(exclude_unset=True)
        loaded[name] = load_source_detailed(spec, base_dir, name=name, seed=seed, max_chars=max_chars)
        drops = loaded[name].drops
        if drops:
            log.info("source %s: dropped %s", name, dict(drops))

    report: dict = {
        "seed": seed,
        "sources": {n: _source_report(r) for n, r in loaded.items()},
        "premise": {},
        "ripd": {},
        "unused_sources": unused,
        "max_chars": max_chars,
    }
    for name in premise.sources:
        splits = premise_splits(loaded[name].pairs, premise_sizes, seed)
        write_splits(splits, out_dir / "premise" / name)
        report["premise"][name] = _counts(splits, premise_sizes)

    for setting, cfg in ripd.items():
        sizes = cfg.model_dump(include=set(RIPD_SPLITS))
        bench, target = loaded[cfg.bench].pairs, loaded[cfg.target].pairs
        overlap = len({p.id for p in bench} & {p.id for p in target})
        res = bench_target_splits(bench, target, sizes, seed)
        for side in ("bench", "target"):
            write_splits(res[side], out_dir / "ripd" / setting, prefix=f"{side}_")
        report["ripd"][setting] = {
            "bench": cfg.bench,
            "target": cfg.target,
            "overlap_removed_from_target": overlap,
            "splits": {side: _counts(res[side], sizes) for side in ("bench", "target")},
        }
    return report
