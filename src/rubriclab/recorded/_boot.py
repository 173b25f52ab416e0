"""The source's bootstrap: one draw of pairs per replicate, shared by every estimate of the analysis.

A replicate draws the source's N pairs with replacement (scipy's draws: ``numpy.random.default_rng(seed)
.integers(0, N, (B, N))``, as ``scipy.stats.bootstrap`` draws N items); each pair then weighs as often as it was
drawn, in every cell, every comparison and every agreement statistic alike — so paired comparisons stay paired and
estimates of one replicate are of one resampled source. An estimate over a subset of the pairs (a cell that judged
only some, pairs whose outputs differ in length) is its statistic on the drawn pairs of that subset: a mean is the
ratio Σ w·sum / Σ w·count, a paired difference Σ w·(a − b) / Σ w, an additive statistic (κ and F1 from a confusion
matrix, Krippendorff's α and Fleiss' κ from their parts) its function of Σ w·parts. For an estimate over every pair
this is exactly ``scipy.stats.bootstrap`` on that estimate alone (its per-call form: ``rubriclab.stats
.item_bootstrap``); over a subset it is the source-level resampling, whose coverage ``tests/test_recorded_boot
.py`` checks by simulation. (Until issue 60 each estimate drew its own pairs; intervals over a subset moved when
this scheme replaced it.)

Speed and memory (``Resampling``): the estimates' distinct per-pair part columns are stacked over the N pairs and
multiplied by the draw counts in blocks of ``COL_BLOCK`` columns (a block as soon as it is full) and chunks of
replicates — memory bounded by B × N bytes of counts, ``ROW_CHUNK`` × N and N × ``COL_BLOCK`` floats, and B floats
per distinct column for the sums. Parts that are
multiples of 1/4096 (integers, halves, …) sum exactly in any order, so every block and chunk gives the same bits;
other parts differ from a one-estimate product by rounding only (~1e-16 relative).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from rubriclab.stats import finish_distribution

ROW_CHUNK = 250  # replicates per count chunk: a (chunk × N) float block per product
COL_BLOCK = 512  # columns per product: bounds the stacked parts at N × COL_BLOCK floats
POOL_BYTES = 96 * 2**20  # ... and at this many bytes of waiting columns, whichever comes first (large N)


@lru_cache(maxsize=8)
def draws(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """The ``(n_resamples, n_items)`` item indices ``scipy.stats.bootstrap`` draws with ``rng=default_rng(seed)``
    (one sample, or paired samples: its batches continue one stream, so the batch size does not matter)."""
    out = np.random.default_rng(seed).integers(0, n_items, (n_resamples, n_items))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=8)
def draw_counts(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each replicate drew each item: ``(n_resamples, n_items)``, float (for a matrix product)."""
    out = byte_counts(n_items, n_resamples, seed).astype(float)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=4)
def byte_counts(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """``draw_counts`` as bytes, built chunk by chunk from the same stream as ``draws`` (never the whole int64 draw
    matrix): B × N bytes. A count above 255 (possible with a handful of items only) keeps 16 bits."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, n_items), dtype=np.uint8)
    wide = None
    for r0 in range(0, n_resamples, ROW_CHUNK):
        b = min(ROW_CHUNK, n_resamples - r0)
        idx = rng.integers(0, n_items, (b, n_items))
        flat = (np.arange(b)[:, None] * n_items + idx).ravel()
        c = np.bincount(flat, minlength=b * n_items).reshape(b, n_items)
        if wide is None and c.max(initial=0) > 255:
            wide = out.astype(np.uint16)
        (wide if wide is not None else out)[r0:r0 + b] = c
    result = wide if wide is not None else out
    result.setflags(write=False)
    return result


class Resampling:
    """The bootstrap of one source: B replicates of its N pairs (``pair_ids``, sorted). Estimates ask for the
    replicate sums of their per-pair parts (``sums``); ``run`` calls each request back with its sums; ``then``
    queues work for after every callback. ``eager``: each request is formed and called back at once (the
    per-estimate reference the batched pass equals).

    Batched, a request's distinct non-zero part columns join a pool (one per product precision) and a pool is
    multiplied by the draw counts as soon as it holds ``COL_BLOCK`` columns or ``POOL_BYTES`` of them laid over the
    N pairs: memory stays bounded by the pools and the (B × distinct columns) sums, not by every part of the
    analysis held until the end."""

    def __init__(self, pair_ids: Sequence[Any], n_resamples: int, seed: int, eager: bool = False) -> None:
        self.pair_ids = np.asarray(pair_ids, dtype=object)
        self.n_pairs, self.n_resamples, self.seed, self.eager = len(self.pair_ids), int(n_resamples), int(seed), eager
        self._index = {p: i for i, p in enumerate(self.pair_ids.tolist())}
        self._requests: list[tuple[np.ndarray, Callable[[np.ndarray], None]]] = []
        self._after: list[Callable[[], None]] = []
        self._keys: dict[bytes, int] = {}  # a distinct column (its pairs and values) -> its id (0: the zero column)
        self._pools: dict[type, list[tuple[int, np.ndarray, np.ndarray]]] = {np.float32: [], np.float64: []}
        self._formed: list[tuple[np.ndarray, np.ndarray]] = []  # (column ids, their (B, k) sums)
        self._max_count: int | None = None

    def codes(self, ids: Sequence[Any]) -> np.ndarray:
        """The pairs' positions among the source's pairs."""
        try:
            return np.fromiter((self._index[i] for i in ids), dtype=np.intp, count=len(ids))
        except KeyError as exc:  # a programming error: every estimate is over the source's own pairs
            raise KeyError(f"pair {exc.args[0]!r} is not one of the source's pairs") from None

    def sums(self, codes: np.ndarray, x: np.ndarray, callback: Callable[[np.ndarray], None]) -> None:
        """Ask for ``Σ_p w_p · x_p`` per replicate, ``x`` ``(n, D)`` per-pair parts on distinct pair ``codes``;
        ``callback`` gets the ``(B, D)`` sums."""
        x = np.asarray(x, dtype=float).reshape(len(x), -1)
        codes = np.asarray(codes, dtype=np.intp)
        key_codes = hashlib.sha1(codes.tobytes()).digest()
        columns = []
        for j in range(x.shape[1]):
            col = np.ascontiguousarray(x[:, j])
            if not col.any():
                columns.append(0)
                continue
            key = key_codes + hashlib.sha1(col.tobytes()).digest()
            if key not in self._keys:
                self._keys[key] = len(self._keys) + 1
                # a column whose every replicate sum is exact in single precision goes through a float32 product
                # (twice as fast, the same bits); the others through float64
                dtype = np.float32 if _exact32(col, self._largest_count()) else np.float64
                pool = self._pools[dtype]
                pool.append((self._keys[key], codes, col.astype(dtype)))  # exact: multiples of 1/16 in float32
                if len(pool) >= COL_BLOCK or len(pool) * self.n_pairs * np.dtype(dtype).itemsize >= POOL_BYTES:
                    self._form(dtype)
            columns.append(self._keys[key])
        self._requests.append((np.array(columns, dtype=np.intp), callback))
        if self.eager:
            self.run()

    def then(self, fn: Callable[[], None]) -> None:
        if self.eager and not self._requests:
            fn()
        else:
            self._after.append(fn)

    def run(self) -> None:
        for dtype in self._pools:
            self._form(dtype)
        requests, self._requests = self._requests, []
        if requests:
            sums = np.zeros((self.n_resamples, len(self._keys) + 1))
            for ids, formed in self._formed:
                sums[:, ids] = formed
            self._formed, self._keys = [], {}
            for columns, callback in requests:
                callback(np.ascontiguousarray(sums[:, columns]))
        after, self._after = self._after, []
        for fn in after:
            fn()

    def _largest_count(self) -> int:
        if self._max_count is None:
            self._max_count = int(byte_counts(self.n_pairs, self.n_resamples, self.seed).max(initial=0))
        return self._max_count

    def _form(self, dtype: type) -> None:
        """The replicate sums of the pool's columns: the draw counts times the columns laid over the N pairs, a
        chunk of replicates at a time."""
        pool, self._pools[dtype] = self._pools[dtype], []
        if not pool:
            return
        counts = byte_counts(self.n_pairs, self.n_resamples, self.seed)
        x = np.zeros((self.n_pairs, len(pool)), dtype=dtype)
        for k, (_, codes, col) in enumerate(pool):
            x[codes, k] = col
        out = np.empty((self.n_resamples, len(pool)))
        for r0 in range(0, self.n_resamples, ROW_CHUNK):
            out[r0:r0 + ROW_CHUNK] = counts[r0:r0 + ROW_CHUNK].astype(dtype) @ x
        self._formed.append((np.array([k for k, _, _ in pool], dtype=np.intp), out))


_SCALE32 = 2.0**4  # a float32 product is exact for parts that are multiples of 1/16 ...
_LIMIT32 = 2.0**24  # ... whose largest possible replicate sum stays below 2^24 of those units


def _exact32(col: np.ndarray, max_count: int) -> bool:
    """Whether every replicate sum of ``col`` (each pair drawn at most ``max_count`` times) is exact in float32:
    every partial sum an integer number of 1/16 below 2^24 of them."""
    scaled = col * _SCALE32
    return bool(np.all(scaled == np.round(scaled))
                and np.abs(scaled).sum() * max(max_count, 1) < _LIMIT32)


def _aggregate(codes: np.ndarray, parts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct pair code (ascending): the sum of its rows' parts."""
    uniq, inv = np.unique(codes, return_inverse=True)
    out = np.zeros((len(uniq), parts.shape[1]))
    np.add.at(out, inv, parts)
    return uniq, out


def percentile_interval(dist: np.ndarray, confidence: float) -> tuple[float, float]:
    """``scipy.stats.quantile(dist, [α, 1 − α])`` (its default 'linear' method, α = (1 − confidence)/2), as
    ``scipy.stats.bootstrap`` takes its percentile interval, without its per-call input checks; NaN when a
    replicate is NaN."""
    low, high = percentile_intervals(np.asarray(dist, dtype=float)[None, :], confidence)
    return float(low[0]), float(high[0])


def percentile_intervals(dist: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """``percentile_interval`` of each row of ``dist`` ``(K, B)``: only the four order statistics it needs are
    placed (``np.partition``), which gives the same values as sorting."""
    n = dist.shape[-1]
    alpha = (1 - confidence) / 2
    p = np.array([alpha, 1 - alpha])
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g[j < 0] = 0
    j = np.clip(j, 0.0, n - 1).astype(np.int64)
    jp1 = np.clip(jp1, 0.0, n - 1).astype(np.int64)
    y = np.partition(dist, np.unique(np.r_[j, jp1]), axis=-1)
    q = (1 - g) * y[:, j] + g * y[:, jp1]
    q[np.isnan(dist).any(axis=-1)] = np.nan
    return q[:, 0], q[:, 1]


def additive_bootstraps(parts: np.ndarray, statistics: dict[str, Callable[[np.ndarray], np.ndarray]],
                        pair_codes: np.ndarray, res: Resampling, confidence: float) -> dict[str, dict[str, Any]]:
    """Each ``statistic`` (summed parts ``(..., D)`` → ``(...)``) on all rows, and its percentile interval over
    the source's replicates. ``parts``: one row ``(D,)`` per observation, ``pair_codes`` its pair. Returns per
    statistic dict(estimate, low, high, se, n_items, n_obs, n_resamples, confidence, method, degenerate,
    n_invalid_resamples), filled in when ``res`` runs (``_pending`` until then)."""
    parts = np.asarray(parts, dtype=float).reshape(len(parts), -1)
    uniq, per_pair = _aggregate(np.asarray(pair_codes, dtype=np.intp), parts)
    total = per_pair.sum(axis=0)
    out = {}
    for name, statistic in statistics.items():
        r: dict[str, Any] = {"estimate": float(statistic(total)), "low": np.nan, "high": np.nan, "se": np.nan,
                             "n_items": len(uniq), "n_obs": len(parts), "n_resamples": res.n_resamples,
                             "confidence": confidence, "method": "percentile", "degenerate": None,
                             "n_invalid_resamples": 0}
        if len(uniq) < 2:
            r.update(low=r["estimate"], high=r["estimate"], se=0.0,
                     degenerate="single item: no between-item variability to resample" if len(uniq) else "no items")
        else:
            r["_pending"] = res
        out[name] = r
    if len(uniq) >= 2:
        def done(sums: np.ndarray) -> None:
            with warnings.catch_warnings():  # NaN replicates are counted, not warned about
                warnings.simplefilter("ignore", RuntimeWarning)
                for name, statistic in statistics.items():
                    out[name].pop("_pending", None)
                    _summarise(out[name], np.asarray(statistic(sums), dtype=float), confidence)

        res.sums(uniq, per_pair, done)
    return out


def _summarise(out: dict[str, Any], dist: np.ndarray, confidence: float) -> None:
    good = dist[np.isfinite(dist)]
    out["n_invalid_resamples"] = int(dist.size - good.size)
    if not good.size:
        out["degenerate"] = "the statistic was undefined (NaN) on every resample"
        return
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(good, [tail, 1 - tail]))
    out.update(low=low, high=high, se=float(np.std(good, ddof=1)) if good.size > 1 else 0.0)
    if np.ptp(good) == 0:
        out["degenerate"] = "constant bootstrap distribution"


def mean_bootstrap(values: np.ndarray, pair_codes: np.ndarray, res: Resampling, confidence: float) -> dict[str, Any]:
    """The mean over the observations ``values`` (``pair_codes``: each one's pair) and its percentile interval: a
    replicate's mean is Σ w·sum / Σ w·count over its drawn pairs. The keys of ``rubriclab.stats.item_bootstrap``;
    filled in when ``res`` runs (``_pending`` until then)."""
    values = np.asarray(values, dtype=float)
    uniq, per_pair = _aggregate(np.asarray(pair_codes, dtype=np.intp), np.column_stack([values, np.ones(len(values))]))
    out: dict[str, Any] = {"estimate": np.nan, "low": np.nan, "high": np.nan, "se": np.nan, "n_items": len(uniq),
                           "n_obs": len(values), "n_resamples": res.n_resamples, "confidence": confidence,
                           "method": "percentile", "statistic": "mean", "degenerate": None, "n_invalid_resamples": 0}
    if not len(uniq):
        out["degenerate"] = "no items"
        return out
    out["estimate"] = float(values.mean())
    if len(uniq) == 1:
        return _collapse(out, "single item: no between-item variability to resample")
    if np.ptp(per_pair[:, 0] / per_pair[:, 1]) == 0:
        return _collapse(out, "constant values: every item has the same mean")
    out["_pending"] = res

    def done(s: np.ndarray) -> None:
        out.pop("_pending", None)
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.ascontiguousarray(s[:, 0]) / np.ascontiguousarray(s[:, 1])
        finish_distribution(out, dist, lambda: percentile_interval(dist, confidence))

    res.sums(uniq, per_pair, done)
    return out


def _collapse(out: dict[str, Any], reason: str) -> dict[str, Any]:
    out.update(low=out["estimate"], high=out["estimate"], se=0.0, degenerate=reason)
    return out


def paired_differences(compared: list[tuple[np.ndarray, np.ndarray, np.ndarray]], res: Resampling,
                       confidence: float) -> list[dict[str, Any]]:
    """Per ``(pair_codes, a, b)`` (distinct pairs, one value each): Δ = mean(a) − mean(b) and its percentile
    interval, a replicate's Δ being Σ w·(a − b) / Σ w over its drawn pairs (so a comparison over every pair is
    ``rubriclab.stats.paired_bootstrap``'s); a bootstrap p-value and SE beside it. Filled in when ``res`` runs."""
    out: list[dict[str, Any]] = []
    for codes, a, b in compared:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        n = len(a)
        r: dict[str, Any] = {"diff": float((a.sum() - b.sum()) / n), "low": np.nan, "high": np.nan,
                             "p_value": np.nan, "se": np.nan, "n_items": n, "n_obs": n, "mean_a": float(a.mean()),
                             "mean_b": float(b.mean()), "n_resamples": res.n_resamples, "confidence": confidence,
                             "degenerate": None, "method": "percentile", "n_invalid_resamples": 0}
        out.append(r)
        if n == 1:
            r.update(low=r["diff"], high=r["diff"], se=0.0,
                     degenerate="single item: no sampling variability, so no CI or p-value")
            continue
        r["_pending"] = res
        res.sums(np.asarray(codes, dtype=np.intp), np.column_stack([a - b, np.ones(n)]),
                 lambda s, r=r: _paired_finish(r, s, confidence))
    return out


def _paired_finish(r: dict[str, Any], s: np.ndarray, confidence: float) -> None:
    """One comparison's interval, bootstrap p-value and SE from its replicate sums ``s`` ``(B, 2)``."""
    r.pop("_pending", None)
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = np.ascontiguousarray(s[:, 0]) / np.ascontiguousarray(s[:, 1])
    # A replicate that drew none of these pairs (a subset of the source's: probability ~e^-n) has no Δ. It is left
    # out and counted, as ``finish_distribution`` does; one NaN used to blank the whole interval.
    good = dist[np.isfinite(dist)]
    r["n_invalid_resamples"] = int(dist.size - good.size)
    if not good.size:
        r["degenerate"] = "the statistic was undefined (NaN) on every resample"
        return
    p_le = (1 + np.count_nonzero(good <= 0)) / (good.size + 1)
    p_ge = (1 + np.count_nonzero(good >= 0)) / (good.size + 1)
    low, high = percentile_intervals(good[None, :], confidence)
    r.update(low=float(low[0]), high=float(high[0]), se=float(np.std(good, ddof=1)) if good.size > 1 else 0.0,
             p_value=float(min(1.0, 2.0 * min(p_le, p_ge))))
    if np.ptp(good) == 0:
        r["degenerate"] = "every item has the same difference: the bootstrap distribution is a point"


def dropped_note(boot: dict[str, Any]) -> str | None:
    """What an interval left out: the resamples on which its statistic was undefined (``n_invalid_resamples``), or
    None when it used every one."""
    k = int(boot.get("n_invalid_resamples") or 0)
    if not k or boot.get("n_resamples") is None:
        return None
    b = int(boot["n_resamples"])
    return (f"{k} of {b} resamples left the statistic undefined (none of these {boot.get('n_items')} pairs drawn, "
            f"or a zero denominator) and are left out: the interval is of the other {b - k}")


def dropped_fields(boot: dict[str, Any]) -> dict[str, Any]:
    """A card entry's ``interval_note`` and ``resamples_dropped`` when its interval left resamples out (and is not
    degenerate, whose reason the entry gives instead); nothing otherwise."""
    note = None if boot.get("degenerate") else dropped_note(boot)
    return {"interval_note": note, "resamples_dropped": int(boot["n_invalid_resamples"])} if note else {}
