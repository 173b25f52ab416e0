"""What a refinement leaves behind: before/after diffs per criterion, the candidate table and the α–VFR
operating-curve plot."""

from __future__ import annotations

import difflib
import math
from typing import Any

import pandas as pd

from rubriclab.repair._refinement import delta_label
from rubriclab.rubrics import RubricSet


def criterion_diff(before: str, after: str) -> str:
    """A sentence-level unified diff of one criterion's text (``-`` removed, ``+`` added sentences)."""
    a, b = before.split(". "), after.split(". ")
    return "\n".join(difflib.unified_diff(a, b, "before", "after", lineterm="", n=len(a) + len(b)))


def diff_markdown(original: RubricSet, repaired: RubricSet, decisions: dict[str, dict[str, Any]], title: str) -> str:
    """Per criterion: unchanged (and why) or the before/after text, the diff and the operators applied."""
    md = [f"## {title}", ""]
    for c in original.criteria:
        d = decisions[c.id]
        new = repaired.get(c.id)
        if not d["changed"]:
            md += [f"### {c.id}: unchanged — {d['why']}", ""]
            continue
        dev0, dev1 = d["original_dev"], d["chosen_dev"]
        md += [f"### {c.id}: repaired with {', '.join(d['operators'])} (candidate {d['chosen']})", "",
               f"dev: α {_f(dev0['alpha'])} → {_f(dev1['alpha'])}, VFR {_f(dev0['vfr'])} → {_f(dev1['vfr'])}", "",
               f"- before: {c.description}", f"- after: {new.description}", "", "```diff",
               criterion_diff(c.description, new.description), "```", ""]
    return "\n".join(md)


def _f(x: Any) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):.3f}"


def candidates_table(found: dict[str, Any]) -> pd.DataFrame:
    """Every proposal: operators asked and named, the checker's verdict, dev α/VFR of those judged."""
    rows = []
    for cid, entry in found["criteria"].items():
        scores = {c["index"]: c for c in entry["candidates"]}
        orig = entry["original"] or {}
        for r in entry["rows"]:
            s = scores.get(r["candidate"], {})
            rows.append({"criterion": cid, "candidate": r["candidate"], "requested": "+".join(r["requested"]),
                         "operators": "+".join(r["operators"] or []), "checker": ", ".join(r["broken"]) or "ok",
                         "alpha_dev": s.get("alpha"), "vfr_dev": s.get("vfr"), "alpha_dev_original": orig.get("alpha"),
                         "vfr_dev_original": orig.get("vfr"), "description": r["description"]})
        if not entry["rows"]:
            rows.append({"criterion": cid, "candidate": None, "checker": f"not repaired: {entry['skipped']}",
                         "alpha_dev_original": orig.get("alpha"), "vfr_dev_original": orig.get("vfr")})
    return pd.DataFrame(rows)


def curve_figure(curve: pd.DataFrame, before: dict[str, Any], title: str, caption: str):
    """α (x) against VFR (y) on the held-out split: one point per trial labelled δ (and n candidates when
    several), intervals as error bars, the original set as a star, the named operating points circled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    several_n = curve["candidates"].nunique() > 1

    def err(v, lo, hi):
        if v is None or lo is None or hi is None or any(isinstance(x, float) and math.isnan(x) for x in (v, lo, hi)):
            return None
        return [[v - lo], [hi - v]]

    def point(x, y, xs, ys, **kw):
        if x is None or y is None or (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
            return False
        ax.errorbar([x], [y], xerr=err(x, *xs), yerr=err(y, *ys), capsize=3, **kw)
        return True

    a0, v0 = before["alpha"].get("value"), before["vfr"].get("value")
    point(a0, v0, (before["alpha"].get("low"), before["alpha"].get("high")),
          (before["vfr"].get("low"), before["vfr"].get("high")), fmt="*", ms=14, color="black", label="original")
    labels: dict[tuple, list[str]] = {}  # points at one place share one label: "δ=0, 0.1, 0.5"
    for _, r in curve.iterrows():
        named = r["point"] in ("constrained", "unconstrained")
        ok = point(r["alpha_heldout"], r["vfr_heldout"], (r["alpha_low"], r["alpha_high"]),
                   (r["vfr_low"], r["vfr_high"]), fmt="o", ms=8 if named else 5,
                   color="tab:red" if r["point"] == "unconstrained" else "tab:blue" if named else "tab:gray",
                   label=r["point"] if named else None, alpha=0.8)
        if ok:
            at = (round(float(r["alpha_heldout"]), 6), round(float(r["vfr_heldout"]), 6))
            labels.setdefault(at, []).append(delta_label(r["delta"]) + (f" (n={r['candidates']})" if several_n else ""))
    for (x, y), ds in labels.items():
        ax.annotate("δ=" + ", ".join(ds), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    ax.set_xlabel("Krippendorff's α (held-out, higher = more reliable)")
    ax.set_ylabel("VFR (held-out, lower = more robust)")
    ax.set_title(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="best")
    fig.text(0.01, 0.01, caption, fontsize=7, wrap=True)
    fig.subplots_adjust(bottom=0.22)
    return fig
