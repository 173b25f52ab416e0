"""The drift gate for rubric edits: does a new rubric lower the judge's agreement with the reference labels
anywhere — on some domain, or some prompt cluster — compared with the old one?

Both rubrics judge the same pairs in the same seeded A/B presentation (``judge_pairs``), so per pair the
agreement credits are paired. Per domain (or prompt cluster):

- **Pairs used**: those with a verdict under both rubrics; a pair that failed under either (no verdict
  after the gateway's re-asks, a reply cut off at the token limit) is left out of both sides and counted
  (``n_failed_old``, ``n_failed_new``, ``n_failed_either``).
- **Failures**: an edit that makes the judge state no verdict hides whatever it does to those pairs, so the
  failures are compared too: the exact two-sided sign test on the pairs that failed under one rubric only
  (``n_failed_new_only`` vs ``n_failed_old_only``): ``p_failures``, Benjamini–Hochberg across domains:
  ``q_failures``; ``more_failures`` when ``q_failures < alpha`` and the new rubric failed more.
- **Change**: ``diff = agreement_new − agreement_old`` (negative = a drop), credits 1 agree,
  ``tie_credit`` tie, 0 disagree. Interval: the paired percentile bootstrap over pairs
  (``stats.paired_bootstrap``, ``n_boot`` resamples, level ``confidence``); none for one pair, and
  ``ci_note`` says why where the interval is missing or degenerate (every pair the same difference).
- **Test**: the exact two-sided sign test on the pairs whose credit changed (McNemar's exact test when
  credits are 0/1): ``p = P(Binom(k, 1/2) ≤ min(k₋, k₊)) · 2`` capped at 1, with ``k₋`` pairs losing
  credit, ``k₊`` gaining and ``k = k₋ + k₊``. An exact test because the discordant pairs of a neutral
  edit are few, where the bootstrap's p-value is too small (anti-conservative); the bootstrap p-value is
  reported beside it (``p_boot``).
- **Benjamini–Hochberg** across every domain with a p-value (the benchmark included): ``q``.
- **Significant drop**: ``q < alpha`` and ``diff < 0`` and the bootstrap CI's upper end ``< 0``.
- **MDE** (minimum detectable drop): the smallest drop δ that the exact sign test above flags with
  probability ``power``, at the strictest level BH can apply, Bonferroni ``α' = alpha / m`` with m the
  number of tested domains (``stats.mde_drop``). Its power is computed exactly, not by a normal formula: a
  share ψ0 of the n pairs changes credit without the drop (half each way; ψ0 = the observed share of
  changed pairs), and a drop δ makes another δ·n pairs lose credit, so the drop *adds* to the discordance
  (ψ = ψ0 + δ): ``K ~ Binom(n, ψ0 + δ)`` discordant pairs, ``L | K ~ Binom(K, (ψ0/2 + δ)/(ψ0 + δ))`` of
  them lost, power ``= P(two-sided sign-test p < α' and L > K/2)``, solved for δ. Plugging the observed ψ
  into ``(z_{1−α'/2} + z_power)·sqrt(ψ/n)`` instead, as if the drop did not add to ψ, overstated the power
  (a drop of that size was flagged about half the time). Reported beside it: ``mde_normal`` (the normal
  approximation with ψ0 + δ, Connor 1987) and ``mde_floor = k_min / n``, ``k_min = ceil(log2(2 / α'))``,
  the smallest drop the exact test could flag at all. ``inf`` when no drop reaches the power at this n.
  A pass on a domain says only that no drop of at least its MDE was seen. A domain whose ``mde_floor``
  exceeds 1 (fewer pairs than the k_min lost ones the test needs) cannot flag any drop: it is not
  ``testable`` and counts as undetermined, as a domain without pairs does.

**Benchmark preservation** (``bench_domain`` given): the benchmark is preserved when its agreement does not
drop by more than ``epsilon`` (RIPD's ε_train, on the point estimate as RIPD defines it) and shows no
significant drop. The reason gives n and the interval, and says when the interval's lower end is below −ε
(``noninferior`` False: preservation is RIPD's point criterion, not shown at the interval's level).

**Settings**: one ``rubriclab.settings.Gate`` (params.yaml's ``drift.gate``: ``alpha``, ``power``, ``n_boot``,
``confidence``, ``tie_credit``, ``epsilon``, ``samples``, ``seed``), passed whole; every default is the schema's.
The seed must be resolved (``drift.gate.seed``, else ``data.seed``: ``rubriclab drift check`` does so).

**Flags** (any flag fails the gate):

- ``directional_drift``: a non-benchmark domain drops significantly while the benchmark is preserved —
  the signature of a benchmark-preserving biased edit (RIPD);
- ``regression``: a non-benchmark domain drops significantly and the benchmark is not preserved either;
- ``benchmark_drop``: the benchmark itself drops significantly;
- ``drift``: without a benchmark domain, any significant drop (benchmark preservation not assessed);
- ``more_failures``: a domain (the benchmark included) where the new rubric leaves significantly more pairs
  without a verdict than the old one;
- ``not_assessed``: no domain was testable (pairs judged under both rubrics, enough of them for the exact
  test to flag a drop), or (``bench_domain`` given) none but the benchmark was, so no domain the edit could
  hurt was checked: the verdict is ``NOT ASSESSED``, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.data import Pair, stable_hash
from rubriclab.errors import InputError
from rubriclab.judging import PairwiseRubric, credit, judge_pairs
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.settings import Gate
from rubriclab.stats import bh_adjust, mde_drop, paired_bootstrap, sign_test

OLD, NEW = "old", "new"
DOMAIN_COLUMNS = [
    "domain", "role", "n_pairs", "n", "n_failed_old", "n_failed_new", "n_failed_either", "n_failed_old_only",
    "n_failed_new_only", "p_failures", "q_failures", "more_failures", "n_tie_old", "n_tie_new",
    "agreement_old", "agreement_new", "diff", "ci_low", "ci_high", "ci_method", "ci_level", "ci_resamples", "ci_note",
    "n_lost", "n_gained", "discordance", "p_value", "p_boot", "q_value", "alpha_mde", "mde_normal", "mde_floor",
    "mde", "testable", "significant_drop", "significant_gain", "verdict",
]
FLIPPED_COLUMNS = ["pair_id", "domain", "change", "human", "old_verdict", "new_verdict", "old_status", "new_status",
                   "prompt"]


def fmt_mde(mde: float) -> str:
    if mde is not None and np.isinf(mde):
        return "inf: too few pairs for any drop to reach the power"
    return "?" if mde is None or not np.isfinite(mde) else f"{mde:.3g}"


@dataclass
class DriftCheck:
    """The gate's result. ``domains``: one row per domain (``DOMAIN_COLUMNS``); ``flipped``: pairs whose
    verdict changed (``FLIPPED_COLUMNS``); ``items``: every judged row of both rubrics; ``flags``: dicts
    ``{kind, domain, message}``; ``bench``: the benchmark-preservation assessment."""

    old: dict[str, Any]
    new: dict[str, Any]
    settings: dict[str, Any]
    domains: pd.DataFrame
    flipped: pd.DataFrame
    items: pd.DataFrame
    flags: list[dict[str, Any]] = field(default_factory=list)
    bench: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return bool(self.flags)

    @property
    def assessed(self) -> bool:
        return not any(f["kind"] == "not_assessed" for f in self.flags)

    @property
    def exit_code(self) -> int:
        """0 pass, 1 flagged or not assessed (the CI gate's status: nothing checked is no pass)."""
        return 1 if self.flagged else 0

    @property
    def verdict(self) -> str:
        """One line: ``FLAGGED: …``, ``NOT ASSESSED: …`` or ``PASS: no detectable drift (MDE=…) …``."""
        if self.flagged:
            found = any(f["kind"] != "not_assessed" for f in self.flags)
            return ("FLAGGED: " if found else "NOT ASSESSED: ") + "; ".join(f["message"] for f in self.flags)
        tested = self.domains[self.domains["testable"].astype(bool)]
        worst = tested.loc[tested["mde"].astype(float).idxmax()]
        gaps = self.domains[~self.domains["testable"].astype(bool)]
        tail = (f"; {len(gaps)} domain(s) undetermined (too few pairs judged under both: "
                f"{', '.join(f'{d!r} n={int(n)}' for d, n in zip(gaps['domain'], gaps['n']))})" if len(gaps) else "")
        failed = int(self.domains["n_failed_either"].sum())
        if failed:
            tail += f"; {failed} pair(s) without a verdict under one rubric or both left out"
        return (f"PASS: no detectable drift (MDE={fmt_mde(worst['mde'])}) on {len(tested)} domain(s); the largest "
                f"MDE is on {worst['domain']!r} (n={int(worst['n'])}): a drop smaller than that could go unseen"
                + tail)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary: settings, rubrics, per-domain rows (CI as ``{method, level, n, resamples}``),
        flags, the benchmark assessment and the flipped pairs."""
        rows = []
        for r in self.domains.to_dict(orient="records"):
            rows.append({**{k: _py(v) for k, v in r.items() if not k.startswith("ci_")},
                         "ci": {"low": _py(r["ci_low"]), "high": _py(r["ci_high"]), "method": r["ci_method"],
                                "level": _py(r["ci_level"]), "n": _py(r["n"]), "resamples": _py(r["ci_resamples"]),
                                "note": _py(r["ci_note"])}})
        return {"verdict": self.verdict, "flagged": self.flagged, "exit_code": self.exit_code,
                "old": self.old, "new": self.new, "settings": {k: _py(v) for k, v in self.settings.items()},
                "bench": {k: _py(v) for k, v in self.bench.items()}, "flags": self.flags, "notes": self.notes,
                "domains": rows, "n_flipped": len(self.flipped),
                "flipped": [{k: _py(v) for k, v in r.items()} for r in self.flipped.to_dict(orient="records")]}


def _py(v: Any) -> Any:
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def rubric_info(rubric: PairwiseRubric) -> dict[str, Any]:
    return {"name": rubric.name, "kind": rubric.kind, "digest": rubric.digest}


def gate_seed(gate: Gate) -> int:
    """The gate's seed; a ``Gate`` whose seed is null (``drift.gate.seed: null`` means ``data.seed``) is refused."""
    if gate.seed is None:
        raise InputError("gate.seed is null", field="seed",
                         expected="a resolved seed: drift.gate.seed, else data.seed (Gate(seed=...))")
    return int(gate.seed)


def drift_check(old: PairwiseRubric, new: PairwiseRubric, pairs: Sequence[Pair], *, gateway: Gateway,
                judge: RoleSpec, gate: Gate, bench_domain: str | None = None, templates_dir: str | None = None,
                grouping: str = "domain") -> DriftCheck:
    """Judge ``pairs`` under ``old`` and ``new`` with ``judge`` and compare them per ``pair.domain``
    (see the module docstring for the statistics and the flags) with the settings of ``gate``
    (``drift.gate``, its seed resolved: it fixes the A/B presentation)."""
    seed = gate_seed(gate)
    if not pairs:
        raise InputError("no pairs to judge", field="pairs", expected="at least one preference pair")
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputError(f"pair id {dup!r} appears more than once", field="pairs", expected="unique pair ids")
    if bench_domain is not None and bench_domain not in {p.domain for p in pairs}:
        raise InputError(f"benchmark domain {bench_domain!r} is not in the data", field="bench",
                         expected=f"one of: {', '.join(sorted({p.domain for p in pairs}))}")
    samples = int(gate.samples)
    rows = judge_pairs({OLD: old, NEW: new}, pairs, gateway=gateway, judge=judge, seed=seed, samples=samples,
                       templates_dir=templates_dir, desc="drift gate: judge pairs")
    settings = {**_statistics(gate), "seed": seed, "samples": samples, "bench_domain": bench_domain,
                "judge": judge.model, "judge_temperature": judge.temperature, "grouping": grouping,
                "n_pairs": len(pairs)}
    result = compare_verdicts(rows, pairs, gate, bench_domain=bench_domain)
    result.old, result.new = rubric_info(old), rubric_info(new)
    result.settings = {**settings, **result.settings}
    if old.digest == new.digest:
        result.notes.append("The two rubrics have the same text: every verdict is identical by construction.")
    return result


def _statistics(gate: Gate) -> dict[str, Any]:
    """The gate's statistical settings as numbers, in the order the report lists them."""
    return {"alpha": float(gate.alpha), "power": float(gate.power), "n_boot": int(gate.n_boot),
            "confidence": float(gate.confidence), "tie_credit": float(gate.tie_credit),
            "epsilon": float(gate.epsilon)}


def compare_verdicts(rows: pd.DataFrame, pairs: Sequence[Pair], gate: Gate, *,
                     bench_domain: str | None = None) -> DriftCheck:
    """The gate's statistics on already-judged rows (``judge_pairs`` output with rubrics named ``"old"`` and
    ``"new"``) with the settings of ``gate`` (its seed resolved); the grouping is each pair's ``domain``. No model
    calls."""
    stats = _statistics(gate)
    alpha, power, n_boot, confidence, tie_credit, epsilon = stats.values()
    seed = gate_seed(gate)
    if not 0 < alpha < 1:
        raise InputError(f"alpha={alpha!r}", field="alpha", expected="a level in (0, 1)")
    if epsilon < 0:
        raise InputError(f"epsilon={epsilon!r}", field="epsilon", expected="a tolerance >= 0")
    by_id = {p.id: p for p in pairs}
    wide = _wide(rows, tie_credit)
    domains = list(dict.fromkeys(p.domain for p in pairs))
    stats_rows = []
    for i, d in enumerate(domains):
        sub = wide[wide["domain"] == d]
        stats_rows.append(_domain_stats(d, sub, n_boot=n_boot, confidence=confidence,
                                        seed=seed + stable_hash("drift-gate", d) % 10_000 + i))
    table = pd.DataFrame(stats_rows)
    table["role"] = ["bench" if d == bench_domain else "tested" for d in table["domain"]]
    table["q_value"] = bh_adjust(table["p_value"].to_numpy(dtype=float))
    m = int(np.isfinite(table["p_value"].to_numpy(dtype=float)).sum())
    alpha_mde = alpha / max(m, 1)
    # ψ0 = share of pairs whose credit changed (= discordance with 0/1 credits; larger with half-credit ties)
    mdes = [mde_drop(int(r["n"]), (r["n_lost"] + r["n_gained"]) / r["n"] if r["n"] else 0.0, alpha_mde, power)
            for _, r in table.iterrows()]
    table["alpha_mde"] = alpha_mde
    for k in ("mde_normal", "mde_floor", "mde"):
        table[k] = [x[k] for x in mdes]
    q = table["q_value"].to_numpy(dtype=float)
    sig = np.where(np.isfinite(q), q, 1.0) < alpha
    diff = table["diff"].to_numpy(dtype=float)
    floor = table["mde_floor"].to_numpy(dtype=float)
    table["testable"] = (table["n"].to_numpy() > 0) & (np.nan_to_num(floor, nan=np.inf) <= 1)
    table["q_failures"] = bh_adjust(table["p_failures"].to_numpy(dtype=float))
    qf = table["q_failures"].to_numpy(dtype=float)
    table["more_failures"] = ((np.where(np.isfinite(qf), qf, 1.0) < alpha)
                              & (table["n_failed_new_only"].to_numpy() > table["n_failed_old_only"].to_numpy()))
    table["significant_drop"] = sig & (diff < 0) & (table["ci_high"].to_numpy(dtype=float) < 0)
    table["significant_gain"] = sig & (diff > 0) & (table["ci_low"].to_numpy(dtype=float) > 0)
    table["verdict"] = [_label(r) for _, r in table.iterrows()]
    table = table[DOMAIN_COLUMNS]

    bench, flags = _flags(table, bench_domain, epsilon)
    flipped = _flipped(wide, by_id)
    settings = {"alpha": alpha, "power": power, "n_boot": n_boot, "confidence": confidence, "tie_credit": tie_credit,
                "epsilon": epsilon, "seed": seed, "bench_domain": bench_domain, "alpha_mde": alpha_mde,
                "n_domains_tested": m,
                "test": "exact two-sided sign test (McNemar) on pairs whose credit changed; BH across domains",
                "failures_test": "exact two-sided sign test on pairs that failed under one rubric only; BH across "
                                 "domains",
                "ci": f"paired percentile bootstrap over pairs, {n_boot} resamples, level {confidence:g}",
                "mde_formula": "smallest drop the exact sign test flags with the given power at a' = alpha/m "
                               "(exact binomial power; psi0 = the observed share of changed pairs, a drop adds to "
                               "it; with psi0 estimated so, the power averages 0.78-0.79 for 0.8 asked at n = 40-200)"}
    return DriftCheck(old={"name": OLD}, new={"name": NEW}, settings=settings, domains=table, flipped=flipped,
                      items=rows.reset_index(drop=True), flags=flags, bench=bench)


def _wide(rows: pd.DataFrame, tie_credit: float) -> pd.DataFrame:
    """One row per pair: old/new verdict, status and credit side by side."""
    missing = {OLD, NEW} - set(rows["rubric"])
    if missing:
        raise InputError(f"no rows for rubric(s) {sorted(missing)}", field="rubric",
                         expected='judge_pairs rows for rubrics named "old" and "new"')
    cols = ["pair_id", "domain", "human", "verdict", "status"]
    o = rows[rows["rubric"] == OLD][cols].set_index("pair_id")
    n = rows[rows["rubric"] == NEW][cols].set_index("pair_id")
    wide = o.join(n[["verdict", "status"]], lsuffix="_old", rsuffix="_new", how="inner").reset_index()
    wide["credit_old"] = credit(wide["status_old"], tie_credit) if len(wide) else []
    wide["credit_new"] = credit(wide["status_new"], tie_credit) if len(wide) else []
    return wide


def _domain_stats(domain: str, sub: pd.DataFrame, *, n_boot: int, confidence: float, seed: int) -> dict[str, Any]:
    failed_old = sub["status_old"] == "failed"
    failed_new = sub["status_new"] == "failed"
    used = sub[~(failed_old | failed_new)]
    a, b = used["credit_old"].to_numpy(dtype=float), used["credit_new"].to_numpy(dtype=float)
    d = b - a
    n = len(used)
    new_only, old_only = int((failed_new & ~failed_old).sum()), int((failed_old & ~failed_new).sum())
    row: dict[str, Any] = {
        "domain": domain, "n_pairs": len(sub), "n": n, "n_failed_old": int(failed_old.sum()),
        "n_failed_new": int(failed_new.sum()), "n_failed_either": int((failed_old | failed_new).sum()),
        "n_failed_old_only": old_only, "n_failed_new_only": new_only,
        "p_failures": sign_test(new_only, old_only) if new_only + old_only else np.nan,
        "n_tie_old": int((used["status_old"] == "tie").sum()), "n_tie_new": int((used["status_new"] == "tie").sum()),
        "agreement_old": float(a.mean()) if n else np.nan, "agreement_new": float(b.mean()) if n else np.nan,
        "diff": float(d.mean()) if n else np.nan, "ci_low": np.nan, "ci_high": np.nan,
        "ci_method": "percentile bootstrap over pairs (paired)", "ci_level": confidence, "ci_resamples": n_boot,
        "ci_note": "no pair judged under both rubrics" if n == 0 else None,
        "n_lost": int((d < 0).sum()), "n_gained": int((d > 0).sum()),
        "discordance": float(np.mean(d ** 2)) if n else np.nan, "p_value": np.nan, "p_boot": np.nan,
    }
    if n == 0:
        return row
    row["p_value"] = sign_test(row["n_lost"], row["n_gained"])
    if n == 1:
        row["ci_note"] = "one pair: no sampling variability, so no interval"
        return row
    boot = paired_bootstrap(b, a, None, n_resamples=n_boot, seed=seed, confidence=confidence)
    row.update(ci_low=boot["low"], ci_high=boot["high"], p_boot=boot["p_value"], ci_note=boot["degenerate"])
    return row


def _label(r: pd.Series) -> str:
    more = "; more failed verdicts under the new rubric" if r["more_failures"] else ""
    if r["n"] == 0:
        return "undetermined (no pair judged under both rubrics)" + more
    if r["significant_drop"]:
        return "significant drop" + (" (benchmark)" if r["role"] == "bench" else "") + more
    if r["significant_gain"]:
        return "significant gain" + more
    if not r["testable"]:
        return (f"undetermined (n={int(r['n'])}: the exact test needs at least {_k_min(r)} lost pairs to flag a drop "
                f"at α'={r['alpha_mde']:.3g})") + more
    return f"no detectable drift (MDE={fmt_mde(r['mde'])})" + more


def _k_min(r: pd.Series) -> int:
    return int(round(float(r["mde_floor"]) * int(r["n"])))


def _flags(table: pd.DataFrame, bench_domain: str | None, epsilon: float) -> tuple[dict[str, Any], list[dict]]:
    flags = [_failures_flag(r) for _, r in table[table["more_failures"]].iterrows()]
    if not (table["n"] > 0).any():
        return ({"domain": bench_domain, "assessed": False, "preserved": None, "reason": "nothing judged"},
                flags + [{"kind": "not_assessed", "domain": None,
                          "message": "no pair was judged under both rubrics (every verdict failed): nothing was checked"}])
    drops = table[(table["role"] == "tested") & table["significant_drop"]]
    if bench_domain is None:
        bench = {"domain": None, "assessed": False, "preserved": None,
                 "reason": "benchmark preservation not assessed (no benchmark domain given)"}
        for _, r in drops.iterrows():
            flags.append({"kind": "drift", "domain": r["domain"], "message": _drop_msg(r) + " (benchmark "
                          "preservation not assessed)"})
        if not table["testable"].any():
            flags.append(_none_testable(table))
        return bench, flags
    b = table[table["domain"] == bench_domain].iloc[0]
    if b["n"] == 0:
        bench = {"domain": bench_domain, "assessed": False, "preserved": None,
                 "reason": "no benchmark pair was judged under both rubrics"}
        for _, r in drops.iterrows():
            flags.append({"kind": "drift", "domain": r["domain"],
                          "message": _drop_msg(r) + " (benchmark preservation not assessed: no benchmark verdicts)"})
        if not ((table["role"] == "tested") & table["testable"]).any():
            flags.append(_none_testable(table))
        return bench, flags
    preserved = bool(b["diff"] >= -epsilon and not b["significant_drop"])
    noninferior = bool(np.isfinite(b["ci_low"]) and b["ci_low"] >= -epsilon)
    shown = f"Δ={b['diff']:+.3f} {_ci(b)}, n={int(b['n'])}, ε={epsilon:g}"
    reason = (f"benchmark {bench_domain!r}: {shown}"
              + ("; significant drop" if b["significant_drop"] else "")
              + ("; preserved" if preserved else "; not preserved")
              + ("" if noninferior or not preserved else
                 " by RIPD's criterion (Δ ≥ −ε); the interval's lower end is not ≥ −ε, so the data do not show it"))
    bench = {"domain": bench_domain, "assessed": True, "preserved": preserved, "noninferior": noninferior,
             "diff": float(b["diff"]), "ci_low": _py(float(b["ci_low"])), "ci_high": _py(float(b["ci_high"])),
             "n": int(b["n"]), "epsilon": epsilon, "reason": reason}
    for _, r in drops.iterrows():
        if preserved:
            flags.append({"kind": "directional_drift", "domain": r["domain"],
                          "message": _drop_msg(r) + f" while the benchmark {bench_domain!r} is preserved ({shown})"})
        else:
            flags.append({"kind": "regression", "domain": r["domain"],
                          "message": _drop_msg(r) + f" and the benchmark {bench_domain!r} is not preserved ({shown})"})
    if b["significant_drop"]:
        flags.append({"kind": "benchmark_drop", "domain": bench_domain, "message": _drop_msg(b)})
    if not ((table["role"] == "tested") & table["testable"]).any():
        flags.append(_bench_only(table, bench_domain))
    return bench, flags


def _ci(r: pd.Series) -> str:
    if not (np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"])):
        return "[no interval]"
    return f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"


def _failures_flag(r: pd.Series) -> dict[str, Any]:
    return {"kind": "more_failures", "domain": r["domain"],
            "message": f"{r['domain']!r}: the new rubric left {int(r['n_failed_new_only'])} pair(s) without a verdict "
                       f"that the old one judged ({int(r['n_failed_old_only'])} the other way; exact sign test "
                       f"p={r['p_failures']:.3g}, q={r['q_failures']:.3g}); those pairs are out of the agreement "
                       "comparison, so what the edit does to them is unseen"}


def _untestable(table: pd.DataFrame, domains: list[str]) -> str:
    rows = table.set_index("domain")
    parts = []
    for d in domains:
        r = rows.loc[d]
        parts.append(f"{d!r} n={int(r['n'])}" + ("" if r["n"] == 0 else f" (< {_k_min(r)}, the fewest lost pairs "
                                                                          "the exact test can flag)"))
    return ", ".join(parts)


def _none_testable(table: pd.DataFrame) -> dict[str, Any]:
    return {"kind": "not_assessed", "domain": None,
            "message": "drift not assessed: no domain has enough pairs judged under both rubrics for the exact test "
                       f"to flag any drop ({_untestable(table, list(table['domain']))}): add pairs, or group "
                       "fewer domains"}


def _bench_only(table: pd.DataFrame, bench_domain: str) -> dict[str, Any]:
    """Only the benchmark was compared: a pass would say nothing about the domains an edit could hurt."""
    others = [d for d in table["domain"] if d != bench_domain]
    empty = [d for d in others if not (table.loc[table["domain"] == d, "n"] > 0).any()]
    if others and len(empty) == len(others):
        what = f"no pair of {', '.join(map(repr, others))} was judged under both rubrics"
    elif others:
        what = f"too few pairs judged under both rubrics: {_untestable(table, others)}"
    else:
        what = "the data holds no other domain"
    return {"kind": "not_assessed", "domain": None,
            "message": f"drift not assessed: only the benchmark {bench_domain!r} was compared ({what}); add pairs "
                       f"from the domains to check, labelled with a domain other than {bench_domain!r} (another "
                       "--data file or source, or --domain-field), or leave out --bench"}


def _drop_msg(r: pd.Series) -> str:
    return f"{r['domain']!r} drops {r['diff']:+.3f} {_ci(r)} (n={int(r['n'])}, q={r['q_value']:.3g})"


def _flipped(wide: pd.DataFrame, by_id: dict[str, Pair], snippet: int = 160) -> pd.DataFrame:
    both = wide[(wide["status_old"] != "failed") & (wide["status_new"] != "failed")]
    changed = both[both["verdict_old"] != both["verdict_new"]]
    out = []
    for _, r in changed.iterrows():
        change = ("lost" if r["credit_new"] < r["credit_old"] else "gained" if r["credit_new"] > r["credit_old"]
                  else "changed")
        prompt = " ".join(str(by_id[r["pair_id"]].prompt).split()) if r["pair_id"] in by_id else ""
        out.append({"pair_id": r["pair_id"], "domain": r["domain"], "change": change, "human": r["human"],
                    "old_verdict": r["verdict_old"], "new_verdict": r["verdict_new"], "old_status": r["status_old"],
                    "new_status": r["status_new"],
                    "prompt": prompt[:snippet] + ("…" if len(prompt) > snippet else "")})
    df = pd.DataFrame(out, columns=FLIPPED_COLUMNS)
    order = {"lost": 0, "changed": 1, "gained": 2}
    return df.sort_values(["change", "domain", "pair_id"], key=lambda s: s.map(order) if s.name == "change" else s,
                          kind="stable").reset_index(drop=True)
