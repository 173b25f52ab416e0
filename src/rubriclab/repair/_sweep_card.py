"""What a repair run says about its sweep: the diff of the named sets, the operating curve's caption, the summary
section of one rubric source and the flat metrics (``metrics/repair/<dataset>.json``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rubriclab.repair._outputs import diff_markdown
from rubriclab.repair._refinement import delta_label
from rubriclab.reporting import to_markdown
from rubriclab.rubrics import RubricSet

SUMMARY_COLUMNS = ["point", "delta", "candidates", "alpha_heldout", "alpha_low", "alpha_high", "alpha_n",
                   "vfr_heldout", "vfr_low", "vfr_high", "vfr_n", "delta_alpha", "delta_alpha_low",
                   "delta_alpha_high", "delta_vfr", "delta_vfr_low", "delta_vfr_high", "n_changed"]
POINT_METRICS = ("alpha_heldout", "vfr_heldout", "delta_alpha", "delta_alpha_low", "delta_alpha_high", "delta_vfr",
                 "delta_vfr_low", "delta_vfr_high", "n_changed")


def sweep_diff(name: str, dataset: str, rs: RubricSet, res: dict[str, Any]) -> str:
    """``diff.md``: per named operating point, every criterion unchanged (and why) or before/after."""
    md = [f"# Repair of {name} ({dataset})", ""]
    for label, entry in res["named"].items():
        md.append(diff_markdown(rs, entry["rubric"], entry["decisions"],
                                f"{label} (δ = {delta_label(entry['delta'])}, {res['max_n']} candidates per criterion)"))
    return "\n".join(md) + "\n"


def curve_caption(before: dict[str, Any], n_boot: int, confidence: float, models: list[str]) -> str:
    level = f"{100 * confidence:g}%"
    return (f"Held-out split: α n={before['alpha'].get('n')} pairs, VFR n={before['vfr'].get('n')} prompts; bars: "
            f"{level} percentile bootstrap (B={n_boot}) over pairs (α) and prompts (VFR). Models: "
            f"{', '.join(models)}." + (" Embedded model: the curve shows the pipeline runs, not findings."
                                       if any(m.startswith("local/") for m in models) else ""))


def sweep_metrics(name: str, res: dict[str, Any]) -> dict[str, Any]:
    """The named points' held-out α, VFR and Δ, the original's, proposals made and checker rejections by rule."""
    flat: dict[str, Any] = {}
    for _, r in res["curve"].iterrows():
        if r["point"]:
            for k in POINT_METRICS:
                flat[f"{name}.{r['point']}.{k}"] = r[k]
    flat[f"{name}.original.alpha_heldout"] = res["before"]["alpha"].get("value")
    flat[f"{name}.original.vfr_heldout"] = res["before"]["vfr"].get("value")
    flat[f"{name}.candidates_proposed"] = int(res["candidates"]["candidate"].notna().sum())
    for rule, n in res["rejected"].items():
        flat[f"{name}.rejected.{rule}"] = n
    return flat


def sweep_summary(name: str, res: dict[str, Any]) -> list[str]:
    """The summary section of one rubric source: the original, how Δ is measured, rejections, the curve."""
    curve = res["curve"].copy()
    curve["delta"] = curve["delta"].map(delta_label)
    curve["point"] = curve["point"].where(curve["point"].astype(bool), "grid")  # a named point, else a grid one
    unchanged = curve["n_changed"] == 0
    for k in ("delta_alpha_low", "delta_alpha_high", "delta_vfr_low", "delta_vfr_high"):
        curve[k] = curve[k].where(~unchanged)  # the same set: Δ = 0 by construction, no interval ("—")
    b = res["before"]
    rej = ", ".join(f"{k} {v}" for k, v in sorted(res["rejected"].items())) or "none"
    skipped = {cid: e["skipped"] for cid, e in res["found"]["criteria"].items() if e["skipped"]}
    md = [f"## {name}", "",
          f"Original on held-out: α {_fmt(b['alpha'])}, VFR {_fmt(b['vfr'])} (intervals: {_ci_label(b['alpha'])} "
          f"over pairs for α, over prompts for VFR).", "",
          f"Δα and ΔVFR (repaired − original): {_delta_method(curve)}; the original and the repaired set are "
          "resampled together, so the interval is of the change itself, not a difference of two intervals"
          + ("; at a point that changed no criterion the set is the original, Δ = 0 by construction and no "
             "interval is given (—)." if unchanged.any() else "."), "",
          f"Candidates rejected by the checker, by rule: {rej}.", ""]
    if skipped:
        md += ["Criteria not repaired:", ""] + [f"- {cid}: {why}" for cid, why in skipped.items()] + [""]
    md += [to_markdown(curve[SUMMARY_COLUMNS].round(3).fillna("—")), "",
           "point: constrained (δ = 0) and unconstrained (δ = ∞) are the named operating points, grid the sweep's "
           "others; n_changed: criteria the point replaced.", "", f"Diffs: `{name}/diff.md`; candidates: "
           f"`{name}/candidates.csv`; plot: `{name}/curve.png`.", ""]
    return md


def _delta_method(curve: pd.DataFrame) -> str:
    parts = []
    for name, what in (("delta_alpha", "Δα"), ("delta_vfr", "ΔVFR")):
        known = curve[curve[f"{name}_ci"] != "no interval"]
        if known.empty:
            parts.append(f"{what}: no interval")
        else:
            parts.append(f"{what}: {known[f'{name}_ci'].iloc[0]}, n={known[f'{name}_n'].iloc[0]}")
    return "; ".join(parts)


def _fmt(m: dict[str, Any]) -> str:
    if m.get("value") is None:
        return f"— ({m.get('reason', 'undefined')})"
    ci = f" [{m['low']:.3f}, {m['high']:.3f}]" if m.get("low") is not None else ""
    why = m.get("degenerate") or (m.get("reason") if m.get("low") is None else None)
    return f"{m['value']:.3f}{ci} n={m.get('n')}" + (f" ({why})" if why else "")


def _ci_label(m: dict[str, Any]) -> str:
    ci = m.get("ci") or {}
    level, b = ci.get("level"), ci.get("resamples")
    return (f"{100 * float(level):g}% percentile bootstrap (B={b})" if level is not None and b is not None
            else "percentile bootstrap")
