"""Reliability of a rubric-conditioned judge: inter-rater α, re-run flip rate, paraphrase stability.

Paper 000 App. B.1.1: α — 3 judges score n pairs on an ordinal 0–10 scale, Krippendorff's α with
ordinal weighting per criterion, averaged over criteria; flip rate — R=5 re-runs of one judge at T=0.7;
paraphrase stability — Spearman ρ between win-rate vectors under each pair of P=5 paraphrases,
averaged over pairs and criteria.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import krippendorff
import numpy as np
from scipy import stats

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats._checks import as_float, as_object_2d, missing_mask
from rubriclab.stats._majority import majority_vote

_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def krippendorff_alpha(
    ratings: Any,
    level: str = "ordinal",
    value_domain: Any = range(0, 11),
) -> dict[str, Any]:
    """Krippendorff's α of a raters × items matrix (NaN = not rated), computed by ``krippendorff.alpha``.

    ``α = 1 − D_o / D_e``: observed over expected disagreement, from the coincidence matrix of pairable
    values (items rated by ≥ 2 raters) and the level's distance δ; ordinal:
    ``δ(c, k) = (Σ_{g=c..k} n_g − (n_c + n_k)/2)²`` over the ordered value domain.

    ``value_domain`` (default the paper's 0–10 scale) is passed to ``krippendorff.alpha`` so that the
    category set and its order are the declared scale, not "whatever values happened to be used":
    it rejects out-of-scale values (an 11, a −1, a 1–10 scale mislabelled 0–10) instead of silently
    rescaling, and keeps α computable when the raters used few categories. Unused categories enter the
    ordinal metric with n_g = 0; with the package's metric they therefore leave α unchanged (checked in
    tests) — declaring them is about fixing the scale, not about changing the number. ``None`` uses the
    observed values (required for string labels at nominal level).

    Returns dict(alpha, reason, level, n_raters, n_items, n_pairable_items, n_values). ``alpha`` is NaN
    with a ``reason`` (never an exception) when fewer than 2 raters rate any common item, or every
    pairable rating has the same value (D_e = 0).
    """
    if level not in _LEVELS:
        raise ConfigError(f"level={level!r} is unknown; expected one of {_LEVELS}")
    data, missing = _ratings_matrix(ratings, level, value_domain)
    present = ~missing
    per_item = present.sum(axis=0)
    pairable = per_item >= 2
    out: dict[str, Any] = {
        "alpha": np.nan, "reason": None, "level": level, "n_raters": int(data.shape[0]),
        "n_items": int(data.shape[1]), "n_pairable_items": int(pairable.sum()), "n_values": 0,
    }
    if data.shape[0] < 2 or not pairable.any():
        out["reason"] = (f"fewer than 2 raters have paired values: {data.shape[0]} rater(s), "
                         f"{int(pairable.sum())} item(s) rated by ≥2 raters")
        return out
    values = data[:, pairable][present[:, pairable]]
    distinct = np.unique(values)
    out["n_values"] = int(len(distinct))
    if len(distinct) < 2:
        out["reason"] = (f"every pairable rating is {distinct[0]!r}: expected disagreement is 0, so α is "
                         "undefined (perfect agreement on a single value carries no reliability information)")
        return out
    if value_domain is None:
        domain = None
    else:
        domain = np.asarray(list(value_domain) if data.dtype.kind == "f" else [str(d) for d in value_domain])
        if len(domain) < 2:
            raise ConfigError(f"value_domain={list(domain)!r} has fewer than 2 values; expected the full scale")
    out["alpha"] = float(krippendorff.alpha(reliability_data=data, value_domain=domain,
                                            level_of_measurement=level))
    return out


def mean_alpha(
    per_criterion: Mapping[str, Any],
    level: str = "ordinal",
    value_domain: Any = range(0, 11),
) -> dict[str, Any]:
    """Per-criterion α (``krippendorff_alpha`` on each raters × items matrix), then the plain mean.

    ``mean_alpha = (1/K') Σ_{c defined} α_c`` over the K' criteria whose α is defined; criteria with
    undefined α are excluded from the mean and listed in ``excluded`` with their reason.
    Returns dict(mean_alpha, per_criterion, n_criteria, n_used, excluded, reason).
    """
    if not per_criterion:
        raise InputError("is empty", field="per_criterion", expected="a dict criterion -> raters × items ratings")
    results = {name: krippendorff_alpha(r, level=level, value_domain=value_domain)
               for name, r in per_criterion.items()}
    alphas = {name: res["alpha"] for name, res in results.items()}
    used = [a for a in alphas.values() if np.isfinite(a)]
    excluded = {name: res["reason"] for name, res in results.items() if not np.isfinite(res["alpha"])}
    return {
        "mean_alpha": float(np.mean(used)) if used else np.nan,
        "per_criterion": alphas, "n_criteria": len(alphas), "n_used": len(used), "excluded": excluded,
        "reason": None if used else "α undefined for every criterion",
    }


def flip_rate(verdicts: Any) -> dict[str, Any]:
    """Share of items whose R re-run verdicts are not unanimous (R × items input, None/NaN = failed run).

    Paper (000 B.1.1): "a flip occurs when the majority verdict across 5 runs differs from at least one
    individual run's verdict; the flip rate is the fraction of pairs exhibiting at least one flip".
    Whatever the majority is (and however a tie is resolved), it is a single value, so some run differs
    from it iff the runs are not all equal: ``flip_rate = (1/n) Σ_i 1[|{v_ir : r valid}| > 1]``.
    Failed runs are dropped per item; items with fewer than 2 valid runs cannot flip observably and are
    excluded from n (counted in ``n_excluded``). Returns dict(flip_rate, n_items, n_excluded, n_runs,
    flips (bool per item, False where excluded), evaluated (bool per item), majority (per item,
    ``"tie"`` for ties, None where no run parsed), reason).
    """
    v = as_object_2d(verdicts, "verdicts", expected="an R × items array of verdicts (one row per re-run)")
    missing = missing_mask(v)
    n_items = v.shape[1]
    flips = np.zeros(n_items, dtype=bool)
    evaluated = np.zeros(n_items, dtype=bool)
    majority: list[Any] = []
    for i in range(n_items):
        runs = [x for x, m in zip(v[:, i], missing[:, i], strict=True) if not m]
        majority.append(majority_vote(runs))
        if len(runs) >= 2:
            evaluated[i] = True
            flips[i] = len(set(runs)) > 1
    n = int(evaluated.sum())
    return {
        "flip_rate": float(flips[evaluated].mean()) if n else np.nan, "n_items": n,
        "n_excluded": int(n_items - n), "n_runs": int(v.shape[0]), "flips": flips, "evaluated": evaluated,
        "majority": majority, "reason": None if n else "no item has at least 2 parsed runs",
    }


def paraphrase_stability(vectors: Any) -> dict[str, Any]:
    """Mean Spearman ρ over all C(P, 2) pairs of a P × items matrix (one per-item win-rate vector per paraphrase).

    ``ρ̄ = mean_{p<q, ρ_pq defined} spearmanr(v_p, v_q)``, each pair on the items where both are present
    (NaN = missing). A pair with a constant vector (or < 3 common items) has no defined ρ: it is
    excluded from the mean and counted in ``n_undefined``. Returns dict(rho, pair_rhos
    [(p, q, ρ)], n_pairs, n_undefined, reason).
    """
    m = as_float(vectors, "vectors", ndim=2, allow_nan=True,
                 expected="a P × items array (one row of per-item win rates per paraphrase)")
    pair_rhos: list[tuple[int, int, float]] = []
    for p, q in itertools.combinations(range(m.shape[0]), 2):
        both = ~np.isnan(m[p]) & ~np.isnan(m[q])
        x, y = m[p, both], m[q, both]
        if both.sum() < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
            # Checked before spearmanr so a constant vector is counted here, not left as a warning.
            pair_rhos.append((p, q, np.nan))
        else:
            pair_rhos.append((p, q, float(stats.spearmanr(x, y).statistic)))
    rhos = np.array([r for *_, r in pair_rhos], dtype=float)
    defined = np.isfinite(rhos)
    reason = None
    if m.shape[0] < 2:
        reason = f"{m.shape[0]} paraphrase(s): need at least 2 to form a pair"
    elif not defined.any():
        reason = "ρ undefined for every pair (constant vectors or < 3 common items)"
    return {
        "rho": float(rhos[defined].mean()) if defined.any() else np.nan, "pair_rhos": pair_rhos,
        "n_pairs": len(pair_rhos), "n_undefined": int((~defined).sum()), "reason": reason,
    }


def mean_paraphrase_stability(per_criterion: Mapping[str, Any]) -> dict[str, Any]:
    """``paraphrase_stability`` per criterion, then the plain mean over criteria with a defined ρ.

    Averaging per criterion first weights criteria equally (the paper averages "across all pairs and
    all K rubrics"; with equal P and no undefined pairs the two orders give the same number).
    Returns dict(mean_rho, per_criterion, n_criteria, n_used, n_undefined_pairs, excluded, reason).
    """
    if not per_criterion:
        raise InputError("is empty", field="per_criterion", expected="a dict criterion -> P × items matrix")
    results = {name: paraphrase_stability(v) for name, v in per_criterion.items()}
    rhos = {name: res["rho"] for name, res in results.items()}
    used = [r for r in rhos.values() if np.isfinite(r)]
    return {
        "mean_rho": float(np.mean(used)) if used else np.nan, "per_criterion": rhos,
        "n_criteria": len(rhos), "n_used": len(used),
        "n_undefined_pairs": sum(res["n_undefined"] for res in results.values()),
        "excluded": {n: res["reason"] for n, res in results.items() if not np.isfinite(res["rho"])},
        "reason": None if used else "ρ undefined for every criterion",
    }


def _ratings_matrix(ratings: Any, level: str, value_domain: Any) -> tuple[np.ndarray, np.ndarray]:
    expected = "a raters × items matrix (rows = raters), NaN for missing"
    raw = as_object_2d(ratings, "ratings", expected=expected)
    missing = missing_mask(raw)
    observed = raw[~missing]
    numeric = all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
                  for x in observed)
    if numeric:
        data = np.where(missing, np.nan, raw).astype(float)
    elif level == "nominal" or value_domain is not None:
        data = np.where(missing, "nan", raw.astype(str)).astype(str)  # the package's missing marker for strings
    else:
        raise InputError("holds non-numeric labels", field="ratings",
                         expected=f"numbers, or an ordered value_domain for level='{level}'")
    if value_domain is not None:
        domain = list(value_domain)
        present = data[~missing]
        if numeric:
            bad = ~np.isin(present, np.asarray(domain, dtype=float))
        else:
            bad = ~np.isin(present, np.asarray([str(d) for d in domain]))
        if bad.any():
            shown = sorted({str(x) for x in present[bad]})[:5]
            raise InputError(f"contains value(s) outside the value domain: {', '.join(shown)}",
                             field="ratings", expected=f"values in {domain[:3]}…{domain[-1:]}, or NaN")
    return data, missing
