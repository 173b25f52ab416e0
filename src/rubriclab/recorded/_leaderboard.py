"""A leaderboard from recorded head-to-head verdicts (AlpacaEval's annotations: each model against one baseline),
computed exactly as the publishers compute it (``alpaca_eval.metrics``: ``get_winrate`` with its absolute and 0–1
scoring rules, ``get_length_controlled_winrate`` / ``predict_winrate``; ``alpaca_eval.main``'s ``avg_length``),
each rate with a percentile-bootstrap interval over instructions, and two judges' leaderboards compared.

Per (annotator, model), over the annotations whose preference is a preference (in [1, 2] after a 0 becomes 1.5):

* ``win_rate`` = 100 × mean(preference − 1) (a draw counts half); ``standard_error`` = 100 × its standard error
  (pandas' ``sem``, ddof 1); ``n_wins`` / ``n_wins_base``: preference − 1 above / below 0.5; ``n_draws``: exactly
  1.5 or 0; ``n_total``: the preferences counted;
* ``discrete_win_rate``: the same after rounding each preference to 1 or 2 (a draw stays a draw);
* ``avg_length``: ``int(mean(len(model output)))``;
* ``length_controlled_winrate``: 100 × mean over instructions of σ(w_gamed + w_difficulty · difficulty), the
  publishers' GLM at a zero length difference, from their weights for the (model, baseline) and the instructions'
  difficulty. Without either it is not computable, and the card says which is missing.

Judge against judge (two annotators over the same models): Spearman's ρ and Kendall's τ between their win rates
over the models (``scipy.stats``), with percentile-bootstrap intervals resampling the instructions both judged
(one draw of instructions for every model, so the models stay paired); per model the win-rate difference on the
instructions both judged, with its percentile paired bootstrap interval, a paired t-test and BH across models
(``rubriclab.stats.adjust_family``).
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from rubriclab.recorded._boot import draw_counts, percentile_interval
from rubriclab.stats import adjust_family, item_bootstrap, paired_bootstrap, paired_test

FIGURES = ("win_rate", "standard_error", "n_wins", "n_wins_base", "n_draws", "n_total", "discrete_win_rate",
           "avg_length", "length_controlled_winrate")
EXACT = 1e-9  # the figures reproduce the publishers' floats to this
LC_TOLERANCE = 1e-3  # the length-controlled rate (a GLM's prediction), in percentage points


def head2head(preferences: Any) -> dict[str, float]:
    """``alpaca_eval``'s ``AbsoluteScoringRule().describe_head2head`` and the 0–1 rule's win rate."""
    p = pd.Series(preferences, dtype=float).replace({0.0: 1.5})
    n_draws = int((p == 1.5).sum())
    valid = p[p.between(1, 2)] - 1
    discrete = pd.Series(preferences, dtype=float).replace({1.5: 0.0}).round().replace({0.0: 1.5})
    discrete = discrete[discrete.between(1, 2)] - 1
    return {"win_rate": float(valid.mean() * 100), "standard_error": float(valid.sem() * 100),
            "n_wins": int((valid > 0.5).sum()), "n_wins_base": int((valid < 0.5).sum()), "n_draws": n_draws,
            "n_total": int(len(valid)), "discrete_win_rate": float(discrete.mean() * 100)}


def _logistic(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0, -x))  # alpaca_eval.metrics.glm_winrate._logistic


def length_controlled(model: str, baseline: str, weights: pd.DataFrame | None,
                      difficulty: pd.Series | None) -> tuple[float | None, str | None]:
    """The publishers' LC win rate (``predict_winrate``: the GLM at zero length difference, model vs baseline
    weights) in percent, or None and why."""
    if weights is None:
        return None, "not computable: no length-controlled weights for this annotator and baseline"
    if model not in weights.index or baseline not in weights.index:
        missing = model if model not in weights.index else baseline
        return None, f"not computable: the length-controlled weights have no row for {missing}"
    if difficulty is None:
        return None, ("not computable here: the publishers' LC rate also needs each instruction's difficulty "
                      "(instruction_difficulty.csv of the tatsu-lab/alpaca_eval dataset on the Hugging Face hub; "
                      "give it as the source's instruction_difficulty)")
    delta = weights.loc[model] - weights.loc[baseline]
    p = _logistic(delta["not_gamed_baseline.astype(float)"] + delta["instruction_difficulty"] * difficulty.to_numpy())
    return float(p.mean() * 100), None


def read_difficulty(path: Any) -> pd.Series:
    """The instructions' difficulty as the publishers store it (a CSV whose first column is the index and whose
    other column is ``instruction_difficulty``)."""
    df = pd.read_csv(path, index_col=0)
    col = "instruction_difficulty" if "instruction_difficulty" in df else df.columns[0]
    return df[col].astype(float)


def _weights_for(extras: dict[str, Any], annotator: str, baseline: str) -> pd.DataFrame | None:
    w = extras.get("weights") or {}
    return w.get((annotator, baseline), w.get((None, baseline)))


def _interval(values: np.ndarray, s: Any) -> dict[str, Any]:
    boot = item_bootstrap(values, "mean", None, n_resamples=s.n_boot, confidence=s.confidence, seed=s.seed)
    return {"low": 100 * boot["low"], "high": 100 * boot["high"], "n": int(len(values)),
            "method": "percentile bootstrap over instructions", "level": s.confidence, "resamples": s.n_boot,
            "reason": boot.get("degenerate")}


def model_lengths(df: pd.DataFrame) -> dict[str, int]:
    """``avg_length`` per model: ``int(mean(len(output)))`` over the model's outputs — each instruction once, from
    any annotator's rows generated by it (the publishers average the model's outputs file, which the annotations
    copy; an annotator's file that misses an instruction does not change it)."""
    out = {}
    for model, g in df.drop_duplicates(["model", "key"]).groupby("model", sort=True):
        out[str(model)] = int(g["output_2"].str.len().mean())
    return out


def leaderboard(rs: Any, s: Any, by: str = "model") -> list[dict[str, Any]]:
    """One row per (annotator, model): the publishers' figures and the rates' intervals. ``by``: ``model`` (the
    rows' generator_2) or ``listed_as`` (the model the publishers' layout files them under, as their leaderboard
    is keyed)."""
    df = rs.extras["alpaca_eval"]
    difficulty = read_difficulty(rs.extras["difficulty"]) if rs.extras.get("difficulty") else None
    lengths = model_lengths(df)
    rows = []
    for (annotator, model, baseline), g in df.groupby(["annotator", by, "baseline"], sort=True):
        row: dict[str, Any] = {"annotator": annotator, "model": model, "baseline": baseline, **head2head(
            g["preference"].to_numpy())}
        row["generated_by"] = sorted(g["model"].unique())
        row["avg_length"] = lengths.get(str(model), int(g["output_2"].str.len().mean()))
        row["length_controlled_winrate"], row["lc_reason"] = length_controlled(
            model, baseline, _weights_for(rs.extras, annotator, baseline), difficulty)
        p = pd.Series(g["preference"].to_numpy(), dtype=float).replace({0.0: 1.5})
        valid = (p[p.between(1, 2)] - 1).to_numpy()
        discrete = pd.Series(g["preference"].to_numpy(), dtype=float).replace({1.5: 0.0}).round().replace({0.0: 1.5})
        row["win_rate_ci"] = _interval(valid, s)
        row["discrete_win_rate_ci"] = _interval((discrete[discrete.between(1, 2)] - 1).to_numpy(), s)
        row["n_no_verdict"] = int(g["preference"].isna().sum())
        row["price_per_1000"] = float(g["price_per_example"].mean() * 1000)
        row["seconds_per_1000"] = float(g["time_per_example"].mean() * 1000)
        rows.append(row)
    return rows


def publisher_rows(rs: Any, s: Any) -> list[dict[str, Any]]:
    """Every figure of the publishers' leaderboard rows found beside the annotations, against the reproduction from
    the annotations filed under that model (``leaderboard(by="listed_as")``, as the publishers key it):
    ``{annotator, model, figure, published, reproduced, match, tolerance, note}``."""
    mine = {(r["annotator"], r["model"]): r for r in leaderboard(rs, s, by="listed_as")}
    out = []
    for annotator, table in sorted((rs.extras.get("leaderboard") or {}).items()):
        for model, pub in table.iterrows():
            got = mine.get((annotator, str(model)))
            for fig in FIGURES:
                if fig not in pub.index or pd.isna(pub[fig]):
                    continue
                want = float(pub[fig])
                row = {"annotator": annotator, "model": str(model), "figure": fig, "published": want,
                       "reproduced": None, "match": False, "tolerance": LC_TOLERANCE if fig.startswith("length")
                       else EXACT, "note": ""}
                if got is None:
                    row["note"] = f"no annotations of {model} by {annotator} were read"
                elif got.get(fig) is None:
                    row["note"] = got.get("lc_reason") or "not computed"
                else:
                    row["reproduced"] = float(got[fig])
                    row["match"] = bool(abs(row["reproduced"] - want) <= row["tolerance"])
                out.append(row)
    return out


def _values(df: pd.DataFrame, annotator: str) -> dict[str, pd.Series]:
    """Per model: the annotator's preference − 1 per instruction key (draws ½; no verdict left out)."""
    g = df[df["annotator"] == annotator]
    out = {}
    for model, gm in g.groupby("model", sort=True):
        p = pd.Series(gm["preference"].to_numpy(), index=gm["key"].to_numpy(), dtype=float).replace({0.0: 1.5})
        out[str(model)] = p[p.between(1, 2)] - 1
    return out


def judge_vs_judge(rs: Any, s: Any) -> list[dict[str, Any]]:
    """Every pair of annotators over the models both judged: rank agreement and per-model differences."""
    df = rs.extras["alpaca_eval"]
    out = []
    for a, b in combinations(sorted(df["annotator"].unique()), 2):
        va, vb = _values(df, a), _values(df, b)
        models = sorted(set(va) & set(vb))
        row: dict[str, Any] = {"a": a, "b": b, "models": models,
                               "baselines": {a: sorted(df.loc[df["annotator"] == a, "baseline"].unique()),
                                             b: sorted(df.loc[df["annotator"] == b, "baseline"].unique())}}
        if len(models) < 2:
            out.append({**row, "reason": f"{len(models)} model(s) judged by both: no ranking to compare"})
            continue
        keys = sorted(set.intersection(*(set(va[m].index) & set(vb[m].index) for m in models)))
        row.update(_rank_agreement(va, vb, models, keys, s))
        row["reversals"] = reversals(va, vb, models, keys, s)
        row["models_compared"] = adjust_family([_model_diff(va[m], vb[m], m, s) for m in models], alpha=s.alpha,
                                               power=s.power)
        out.append(row)
    return out


def _rank_agreement(va: dict[str, pd.Series], vb: dict[str, pd.Series], models: list[str], keys: list[str],
                    s: Any) -> dict[str, Any]:
    """ρ and τ of the two judges' win rates over the models (on the instructions both judged for every model),
    with percentile intervals from one shared draw of instructions per replicate."""
    A = np.column_stack([va[m].reindex(keys).to_numpy() for m in models])  # instructions × models
    B = np.column_stack([vb[m].reindex(keys).to_numpy() for m in models])
    wa, wb = A.mean(axis=0), B.mean(axis=0)
    out: dict[str, Any] = {"n_instructions": len(keys), "n_models": len(models),
                           "win_rates": {m: {"a": 100 * x, "b": 100 * y} for m, x, y in zip(models, wa, wb, strict=True)}}
    counts = draw_counts(len(keys), s.n_boot, s.seed)  # replicate × instruction
    ra, rb = counts @ A / len(keys), counts @ B / len(keys)
    for name, fn in (("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        est = float(fn(wa, wb).statistic)
        with np.errstate(invalid="ignore"):
            dist = np.array([fn(x, y).statistic for x, y in zip(ra, rb, strict=True)], dtype=float)
        good = dist[np.isfinite(dist)]
        low, high = percentile_interval(good, s.confidence) if len(good) else (math.nan, math.nan)
        out[name] = {"value": est, "low": low, "high": high, "n": len(models), "n_instructions": len(keys),
                     "method": "percentile bootstrap over instructions (one draw for every model)",
                     "level": s.confidence, "resamples": s.n_boot, "n_invalid_resamples": int(len(dist) - len(good))}
    return out


def reversals(va: dict[str, pd.Series], vb: dict[str, pd.Series], models: list[str], keys: list[str],
              s: Any) -> dict[str, Any]:
    """Pairs of models the two judges order differently, and whether each reversal is supported: under each judge
    the pair's win-rate difference (paired over the shared instructions) is tested (paired t-test), BH over every
    pair × judge; a reversal is supported when both judges' differences are significant, in opposite directions."""
    tests = []
    for m1, m2 in combinations(models, 2):
        for judge, v in (("a", va), ("b", vb)):
            x1, x2 = v[m1].reindex(keys).to_numpy(), v[m2].reindex(keys).to_numpy()
            t = paired_test(x1, x2)
            tests.append({"pair": (m1, m2), "judge": judge, "diff": 100 * float(np.mean(x1 - x2)),
                          "p_value": t["p_value"], "se": 100 * t["se"], "n_test": t["n_test"]})
    adjust_family(tests, alpha=s.alpha, power=s.power)
    out = []
    for m1, m2 in combinations(models, 2):
        ta, tb = (next(t for t in tests if t["pair"] == (m1, m2) and t["judge"] == j) for j in ("a", "b"))
        if np.sign(ta["diff"]) == np.sign(tb["diff"]):
            continue
        supported = all(t["p_adjusted"] is not None and t["p_adjusted"] < s.alpha for t in (ta, tb))
        out.append({"models": [m1, m2], "diff_a": ta["diff"], "diff_b": tb["diff"], "q_a": ta["p_adjusted"],
                    "q_b": tb["p_adjusted"], "mde_a": ta["mde"], "mde_b": tb["mde"], "supported": supported})
    return {"pairs": out, "n_pairs_compared": len(models) * (len(models) - 1) // 2, "family_size": len(tests),
            "rule": "each judge's win-rate difference of the two models on the shared instructions: paired t-test, "
                    "BH over every pair × judge; a reversal is supported when both are significant, in opposite "
                    "directions"}


def _model_diff(a: pd.Series, b: pd.Series, model: str, s: Any) -> dict[str, Any]:
    keys = sorted(set(a.index) & set(b.index))
    xa, xb = a.reindex(keys).to_numpy(), b.reindex(keys).to_numpy()
    row: dict[str, Any] = {"model": model, "n_pairs": len(keys), "n_test": len(keys), "p_value": None, "se": None}
    if len(keys) < 2:
        return {**row, "degenerate": "fewer than 2 instructions judged by both"}
    res = paired_bootstrap(xb, xa, n_resamples=s.n_boot, seed=s.seed, confidence=s.confidence)
    return {**row, "win_rate_a": 100 * float(xa.mean()), "win_rate_b": 100 * float(xb.mean()),
            "diff": 100 * res["diff"], "low": 100 * res["low"], "high": 100 * res["high"],
            "p_value": (t := paired_test(xb, xa))["p_value"], "se": 100 * t["se"],  # percentage points, as diff
            "ci": f"{100 * s.confidence:g}% percentile paired bootstrap over instructions (B={s.n_boot})",
            "degenerate": res.get("degenerate")}


def leaderboard_gate(rs: Any, old: str, new: str, s: Any) -> dict[str, Any]:
    """The drift gate's question asked of a leaderboard: does switching the judge from ``old`` to ``new`` reorder
    the models? ``verdict``, ``exit_code`` (1 when a reversal is supported), and the comparison behind it."""
    from rubriclab.errors import ConfigError

    if "alpaca_eval" not in rs.extras:
        raise ConfigError(f"{rs.name}: a leaderboard gate needs a head-to-head source (format alpaca_eval); use "
                          "--from/--to for the drift gate between two conditions")
    judges = sorted(rs.extras["alpaca_eval"]["annotator"].unique())
    for j in (old, new):
        if j not in judges:
            raise ConfigError(f"{rs.name}: no judge {j!r}; expected one of {', '.join(judges)}")
    a, b = sorted((old, new))
    (row,) = [c for c in judge_vs_judge(rs, s) if c["a"] == a and c["b"] == b]
    if row.get("reason"):
        return {"old": old, "new": new, "comparison": row, "verdict": f"not assessed: {row['reason']}",
                "exit_code": 0}
    supported = [p for p in row["reversals"]["pairs"] if p["supported"]]
    swaps = row["reversals"]["pairs"]
    if supported:
        verdict = (f"REORDERED: switching the judge from {old} to {new} reverses {len(supported)} pair(s) of models "
                   "with both judges' differences significant (BH)")
    elif swaps:
        verdict = (f"no supported reversal: {len(swaps)} pair(s) swap order, but not significantly under both judges "
                   "— a pass says no supported reversal was seen, not that the order is the same")
    else:
        verdict = f"order preserved: every pair of the {row['n_models']} models is in the same order"
    return {"old": old, "new": new, "comparison": row, "verdict": verdict, "exit_code": 1 if supported else 0}
