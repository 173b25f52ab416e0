"""The fast recorded-verdicts analysis (one draw of the source's pairs per replicate shared by every estimate,
batched matrix products, arrays instead of per-cell frames) gives the numbers of a slow, straightforward
reference: per replicate, each pair's weight is how often the draw took it (``draws``, scipy's stream), and every
statistic is recomputed from its rows with those weights in plain Python/numpy — means, κ and macro F1 re-counted
from the weighted confusion matrix, paired differences. Where an estimate covers every pair of the source, it is
also ``rubriclab.stats.item_bootstrap`` / ``paired_bootstrap`` (scipy) on that estimate alone, bit for bit. A
future "optimisation" that changes a number fails here (benchmarks/recorded_scale.py times the fast path)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rubriclab.recorded import (
    Judgment,
    RecordedPair,
    RecordedSet,
    Settings,
    analyze,
    judgments_frame,
    kappa_from_confusion,
    macro_prf_from_confusion,
)
from rubriclab.recorded._biases import favoured_sides
from rubriclab.recorded._boot import Resampling, draws, mean_bootstrap, paired_differences, percentile_interval
from rubriclab.stats import bh_adjust, item_bootstrap, majority_vote, mde_paired_t, paired_bootstrap

N_BOOT = 199
UNIVERSE: list[str] = []  # the source's sorted pair ids, set per test


def _random_set(seed: int) -> RecordedSet:
    """3 judges × 3 conditions over 14 pairs: labels from three annotators (some pairs without a majority),
    ties and none verdicts, some judgments missing (pairs judged in one order), one cell in one order only."""
    rng = np.random.default_rng(seed)
    pairs = {}
    for i in range(14):
        labels = tuple((f"a{k}", str(rng.choice(["1", "2", "tie"], p=[0.45, 0.45, 0.1]))) for k in range(3))
        outs = ["w " * int(rng.integers(1, 9)) + ("\n- x\n- y" if rng.random() < 0.4 else "") for _ in range(2)]
        pairs[f"p{i}"] = RecordedPair(id=f"p{i}", labels=labels, output_1=outs[0], output_2=outs[1])
    judgments = []
    for judge in ("A", "B", "C"):
        for cond in ("x", "y", "z"):
            for pid in pairs:
                for order in ("original", "swapped"):
                    if rng.random() < 0.1 or (judge, cond, order) == ("C", "z", "swapped"):
                        continue
                    verdict = str(rng.choice(["first", "second", "tie", "none"], p=[0.45, 0.4, 0.1, 0.05]))
                    judgments.append(Judgment(pair_id=pid, judge=judge, condition=cond, order=order, verdict=verdict))
    return RecordedSet(name="random", format="table", path="(test)", pairs=pairs, judgments=judgments)


def _weights(s: Settings) -> np.ndarray:
    """Per replicate, each source pair's weight: how often the draw took it."""
    idx = draws(len(UNIVERSE), s.n_boot, s.seed)
    return np.stack([np.bincount(row, minlength=len(UNIVERSE)) for row in idx]).astype(float)


def _same(a: object, b: object) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b))


def _close(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    return bool(np.isclose(a, b, rtol=1e-12, atol=1e-15)) or _same(float(a), float(b))


def _check(entry: dict, ref: dict | None) -> None:
    if ref is None:
        assert entry["value"] is None
        return
    got = (entry["value"], entry["low"], entry["high"])
    want = tuple(None if v is None or np.isnan(v) else float(v) for v in (ref["estimate"], ref["low"], ref["high"]))
    assert all(_close(g, w) for g, w in zip(got, want, strict=True)), (got, want)


def _mean_ref(values: pd.Series, ids: pd.Series, s: Settings) -> dict | None:
    """The weighted mean per replicate, the percentile interval of the replicates."""
    if not len(values):
        return None
    v = values.to_numpy(float)
    pos = np.searchsorted(np.array(UNIVERSE), ids.to_numpy().astype(str))
    est = float(v.mean())
    if len(set(pos)) < 2 or np.ptp(pd.Series(v).groupby(pos).mean().to_numpy()) == 0:
        return {"estimate": est, "low": est, "high": est}
    w = _weights(s)[:, pos]
    with np.errstate(invalid="ignore"):
        dist = (w @ v) / w.sum(axis=1)  # a replicate that drew none of these pairs: NaN, left out and counted
    good = dist[np.isfinite(dist)]
    tail = (1 - s.confidence) / 2
    low, high = (percentile_interval(dist, s.confidence) if good.size == dist.size else
                 tuple(float(q) for q in np.quantile(good, [tail, 1 - tail])))
    if len(set(pos)) == len(UNIVERSE):  # over every pair: scipy's bootstrap of this estimate alone
        ref = item_bootstrap(v, "mean", ids.to_numpy(), n_resamples=s.n_boot, confidence=s.confidence, seed=s.seed)
        assert _close(ref["low"], low) and _close(ref["high"], high)
    return {"estimate": est, "low": low, "high": high}


def _confusion_ref(rows: pd.DataFrame, cats: list[str], classes: list[str], s: Settings, which: str) -> dict | None:
    """The statistic re-counted on every replicate from the weighted confusion matrix (a loop, not vectorised)."""
    if rows.empty:
        return None
    cls = [cats.index(c) for c in classes]

    def stat(cm: np.ndarray) -> float:
        return kappa_from_confusion(cm) if which == "kappa" else macro_prf_from_confusion(cm, cls)[which]

    pos = np.searchsorted(np.array(UNIVERSE), rows["pair_id"].to_numpy().astype(str))
    cell = [cats.index(lab) * len(cats) + cats.index(ch) for lab, ch in zip(rows["label"], rows["choice"], strict=True)]

    def counts(weights: np.ndarray) -> np.ndarray:
        return np.bincount(cell, weights=weights[pos], minlength=len(cats) ** 2).reshape(len(cats), len(cats))

    est = stat(counts(np.ones(len(UNIVERSE))))
    if len(set(pos)) < 2:
        return {"estimate": est, "low": est, "high": est}
    with np.errstate(all="ignore"):
        dist = np.array([stat(counts(w)) for w in _weights(s)])
    good = dist[np.isfinite(dist)]
    tail = (1 - s.confidence) / 2
    low, high = np.quantile(good, [tail, 1 - tail]) if good.size else (np.nan, np.nan)
    return {"estimate": est, "low": low, "high": high}


def _cell_ref(sub: pd.DataFrame, classes: list[str], s: Settings) -> dict[str, dict | None]:
    lab = sub[sub["label"].notna()]
    out: dict[str, dict | None] = {}
    for order in ("original", "swapped"):
        rows = lab[lab["order"] == order]
        out[f"accuracy_{order}"] = _mean_ref(rows["credit"], rows["pair_id"], s)
    per_pair = lab.groupby("pair_id")["credit"].mean()
    out["accuracy"] = _mean_ref(per_pair, pd.Series(per_pair.index), s)
    wide = sub.pivot(index="pair_id", columns="order", values="choice")
    if {"original", "swapped"} <= set(wide.columns):
        wide = wide.dropna()
        agree = ((wide["original"] == wide["swapped"]) & (wide["original"] != "none")).astype(float)
        out["positional_agreement"] = _mean_ref(agree, pd.Series(wide.index), s)
        lw = wide.join(lab.groupby("pair_id")["label"].first(), how="inner")
        both = ((lw["original"] == lw["label"]) & (lw["swapped"] == lw["label"])).astype(float)
        out["both_correct"] = _mean_ref(both, pd.Series(lw.index), s)
    else:
        out["positional_agreement"] = out["both_correct"] = None
    decided = sub[sub["verdict"].isin(["first", "second"])]
    out["first_position_rate"] = _mean_ref((decided["verdict"] == "first").astype(float), decided["pair_id"], s)
    cats = list(dict.fromkeys([*classes, "1", "2", "tie", "none"]))
    for suffix, rows in (("", lab), ("_original", lab[lab["order"] == "original"]),
                         ("_swapped", lab[lab["order"] == "swapped"])):
        out[f"kappa{suffix}"] = _confusion_ref(rows, cats, classes, s, "kappa")
    for which in ("precision", "recall", "f1"):
        out[f"macro_{which}"] = _confusion_ref(lab, cats, classes, s, which)
    return out


def _per_pair(sub: pd.DataFrame, metric: str) -> pd.Series:
    if metric == "accuracy":
        return sub[sub["label"].notna()].groupby("pair_id")["credit"].mean()
    wide = sub.pivot(index="pair_id", columns="order", values="choice")
    if not {"original", "swapped"} <= set(wide.columns):
        return pd.Series(dtype=float)
    wide = wide.dropna()
    return ((wide["original"] == wide["swapped"]) & (wide["original"] != "none")).astype(float)


def _t_ref(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """scipy's paired t-test p-value and its SE (sd of the differences, ddof 1, / √n); constant differences:
    p 1 (all 0) or 0, SE 0."""
    d = a - b
    if np.ptp(d) == 0:
        return (1.0 if d[0] == 0 else 0.0), 0.0
    return float(stats.ttest_rel(a, b).pvalue), float(np.std(d, ddof=1) / np.sqrt(len(d)))


def _paired_ref(xa: np.ndarray, xb: np.ndarray, ids: list[str], s: Settings) -> dict:
    """Δ and its interval: per replicate Σ w (a − b) / Σ w over the shared pairs; over every pair also scipy's."""
    pos = np.searchsorted(np.array(UNIVERSE), np.array(ids, dtype=str))
    w = _weights(s)[:, pos]
    with np.errstate(invalid="ignore"):
        dist = (w @ (xa - xb)) / w.sum(axis=1)
    dist = dist[np.isfinite(dist)]  # a replicate that drew none of these pairs: left out (and counted)
    low, high = percentile_interval(dist, s.confidence)
    out = {"diff": float((xa.sum() - xb.sum()) / len(xa)), "low": low, "high": high, "se": float(np.std(dist, ddof=1)),
           "mean_a": float(xa.mean()), "mean_b": float(xb.mean())}
    if len(ids) == len(UNIVERSE):
        ref = paired_bootstrap(xa, xb, n_resamples=s.n_boot, seed=s.seed, confidence=s.confidence)
        assert all(_close(ref[k], out[k]) for k in ("diff", "low", "high", "se"))
    return out


def _comparisons_ref(df: pd.DataFrame, s: Settings) -> dict[tuple, dict]:
    out = {}
    for metric in ("accuracy", "positional_agreement"):
        for key, other in (("judge", "condition"), ("condition", "judge")):
            for name, g in df.groupby(key):
                values = {o: _per_pair(go, metric) for o, go in g.groupby(other)}
                values = {o: v for o, v in values.items() if len(v)}
                family = []
                for a, b in combinations(sorted(values), 2):
                    common = values[a].index.intersection(values[b].index)
                    xa, xb = values[a].loc[common].to_numpy(), values[b].loc[common].to_numpy()
                    res = _paired_ref(xa, xb, list(common), s) if len(common) >= 2 else None
                    test = _t_ref(xa, xb) if len(common) >= 2 else None
                    family.append(((f"{key}:{name}", metric, a, b), len(common), res, test))
                p = np.array([np.nan if t is None else t[0] for *_, t in family])
                q = bh_adjust(p)
                m = int(np.isfinite(p).sum())
                for (k, n, res, test), qv in zip(family, q, strict=True):
                    out[k] = {"n_pairs": n, "res": res, "q": None if np.isnan(qv) else float(qv), "test": test,
                              "mde": None if res is None else mde_paired_t(test[1], n, s.alpha / m, s.power)}
    return out


def _majority_ref(df: pd.DataFrame, s: Settings) -> dict[str, tuple]:
    out = {}
    lab = df[df["label"].notna()]
    for cond, g in lab.groupby("condition"):
        credits = []
        for (pid, _), u in g.groupby(["pair_id", "order"]):
            mv = majority_vote([c for c in u["choice"] if c != "none"]) or "none"
            label = u["label"].iloc[0]
            credits.append((pid, 1.0 if mv == label else (s.tie_credit if mv == "tie" else 0.0)))
        per_pair = pd.DataFrame(credits, columns=["pair_id", "credit"]).groupby("pair_id")["credit"].mean()
        singles = {j: gj.groupby("pair_id")["credit"].mean() for j, gj in g.groupby("judge")}
        # the best judge is picked on a seeded half of the labelled pairs and compared on the other half
        ids = np.array(sorted(df["pair_id"].unique()))  # the analysis' pair codes: sorted ids
        codes = np.array([int(np.searchsorted(ids, p)) for p in per_pair.index])
        order = np.random.default_rng(s.seed).permutation(np.sort(codes))
        chosen = set(ids[order[: len(order) // 2]])
        sel = {j: v[v.index.isin(chosen)] for j, v in singles.items()}
        best = max(sorted(singles), key=lambda j: sel[j].mean() if len(sel[j]) else -1.0)
        held = per_pair[~per_pair.index.isin(chosen)]
        common = held.index.intersection(singles[best].index)
        cmp = _paired_ref(held.loc[common].to_numpy(), singles[best].loc[common].to_numpy(), list(common), s)
        out[cond] = (_mean_ref(per_pair, pd.Series(per_pair.index), s), best,
                     float(singles[best].loc[common].mean()), cmp)
    return out


@pytest.mark.parametrize(("seed", "tie_credit"), [(1, 0.0), (2, 0.3)])  # 0.3: sums that are not exact in floats
def test_analysis_equals_the_straightforward_reference(seed: int, tie_credit: float) -> None:
    rs = _random_set(seed)
    UNIVERSE[:] = sorted(rs.pairs)
    s = Settings(n_boot=N_BOOT, seed=seed, tie_credit=tie_credit)
    res = analyze(rs, s)
    df = judgments_frame(rs, tie_credit)
    classes = res.source["classes"]
    cells = df.groupby(["judge", "condition"])
    assert [(c["judge"], c["condition"]) for c in res.cells] == list(cells.groups)
    for cell in res.cells:
        ref = _cell_ref(cells.get_group((cell["judge"], cell["condition"])), classes, s)
        for metric, want in ref.items():
            _check(cell["metrics"][metric], want)
    assert res.cell("C", "z")["metrics"]["positional_agreement"]["value"] is None  # one order only

    ref = _comparisons_ref(df, s)
    assert len(res.comparisons) == len(ref)
    for row in res.comparisons:
        want = ref[(row["family"], row["metric"], row["a"], row["b"])]
        assert row["n_pairs"] == want["n_pairs"]
        assert row["p_adjusted"] == (None if want["q"] is None else pytest.approx(want["q"], rel=1e-9))
        assert row["mde"] == (None if want["mde"] is None else pytest.approx(want["mde"], rel=1e-9))
        if want["res"] is None:
            assert row["diff"] is None
            continue
        for key in ("diff", "low", "high", "mean_a", "mean_b"):
            assert _close(row[key], want["res"][key]), key
        assert _close(row["boot_se"], want["res"]["se"])
        assert row["p_value"] == pytest.approx(want["test"][0], rel=1e-9, abs=1e-300)
        assert row["se"] == pytest.approx(want["test"][1], rel=1e-12)

    majority = _majority_ref(df, s)
    assert [r["condition"] for r in res.majority] == sorted(majority)
    for row in res.majority:
        acc, best, best_acc, cmp = majority[row["condition"]]
        _check(row["majority_accuracy"], acc)
        assert (row["best_judge"], row["best_judge_accuracy"]) == (best, best_acc)
        assert all(_close(g, w) for g, w in zip((row["diff_vs_best"], row["diff_low"], row["diff_high"]),
                                                 (cmp["diff"], cmp["low"], cmp["high"]), strict=True))

    sides = favoured_sides(rs, s.length_delta, s.min_list_items)
    decided = df[df["choice"].isin(["1", "2"])]
    for row in res.biases[:-1]:  # the last row is the labels' own (unchanged code)
        g = decided[(decided["judge"] == row["judge"]) & (decided["condition"] == row["condition"])]
        for name, side in sides.items():
            s_ = g["pair_id"].map(side)
            ok = s_.notna()
            _check(row[name], _mean_ref((g.loc[ok, "choice"] == s_[ok]).astype(float), g.loc[ok, "pair_id"], s))


@pytest.mark.parametrize("values", [[0.0, 1.0], [0.0, 0.5, 1.0], [0.0, 0.3, 0.7, 1.0]])
def test_an_estimate_over_every_pair_is_scipys_bootstrap_of_it_alone(values: list[float]) -> None:
    """Means, paired differences and additive statistics over every pair of the source (one batched run): the
    numbers of one scipy call each."""
    from rubriclab.recorded._boot import additive_bootstraps

    rng = np.random.default_rng(7)
    for n in (2, 3, 9, 30):
        universe = [f"p{i:02d}" for i in range(n)]
        res = Resampling(universe, N_BOOT, 4)
        ids = np.array(universe + [str(x) for x in rng.choice(universe, n)])  # every pair, some twice
        codes = np.searchsorted(universe, ids)
        x = rng.choice(values, len(ids))
        got_mean = mean_bootstrap(x, codes, res, 0.9)
        a, b = rng.choice(values, n), rng.choice(values, n)
        (got_diff,) = paired_differences([(np.arange(n), a, b)], res, 0.9)
        parts = rng.choice(values, (len(ids), 3))

        def ratio(summed: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                return summed[..., 0] / (summed[..., 1] + summed[..., 2])

        got_add = additive_bootstraps(parts, {"": ratio}, codes, res, 0.9)[""]
        res.run()
        want = item_bootstrap(x, "mean", ids, n_resamples=N_BOOT, confidence=0.9, seed=4)
        assert all(_close(got_mean[k], want[k]) if isinstance(want[k], float) else got_mean[k] == want[k]
                   for k in ("estimate", "low", "high", "se", "n_items", "n_obs")), (got_mean, want)
        want = paired_bootstrap(a, b, n_resamples=N_BOOT, seed=4, confidence=0.9)
        assert all(_close(got_diff[k], want[k]) for k in ("diff", "low", "high", "se", "p_value")), (got_diff, want)
        per_item = pd.DataFrame(parts).groupby(pd.Series(ids)).sum().to_numpy()  # sorted ids, as np.unique
        dist = stats.bootstrap((np.arange(len(per_item)),), lambda i, t=per_item: ratio(t[i].sum(axis=0)),
                               vectorized=False, n_resamples=N_BOOT, method="percentile",
                               rng=np.random.default_rng(4)).bootstrap_distribution
        good = dist[np.isfinite(dist)]
        tail = (1 - 0.9) / 2  # as the analysis computes it (not the literal 0.05)
        assert all(_close(g, w) for g, w in zip((got_add["low"], got_add["high"]),
                                                 np.quantile(good, [tail, 1 - tail]), strict=True))
