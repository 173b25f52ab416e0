"""The drift gate's report: markdown for people, CSV and JSON for machines.

Files written by :func:`write_gate_report` into one folder: ``report.md``, ``report.json``
(``DriftCheck.to_dict``), ``domains.csv`` (one row per domain), ``flipped.csv`` (pairs whose verdict
changed), ``items.csv`` (every judged row under both rubrics) and, for a clustered run, ``clusters.csv``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.drift._gate import DriftCheck, fmt_mde
from rubriclab.stats import TIE_CREDIT, other_tie_credit, ties_common

SHOWN_FLIPPED = 20


def _num(v: Any, fmt: str = "{:.3f}") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return fmt.format(v)


def _table(df: pd.DataFrame) -> list[str]:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(str(r[c]).replace("|", "\\|").replace("\n", " ") for c in cols) + " |")
    return lines


def gate_markdown(result: DriftCheck, *, clusters: pd.DataFrame | None = None,
                  note: str | None = None) -> str:
    """The report as markdown: verdict, settings, the per-domain table, flags and flipped examples."""
    s = result.settings
    md = ["# Drift gate", "", f"**{result.verdict}**", ""]
    if note:
        md += [f"> {note}", ""]
    md += [f"- Old rubric: `{result.old.get('name')}` ({result.old.get('kind', '?')}, digest "
           f"`{result.old.get('digest', '?')}`)",
           f"- New rubric: `{result.new.get('name')}` ({result.new.get('kind', '?')}, digest "
           f"`{result.new.get('digest', '?')}`)",
           f"- Judge: `{s.get('judge', '?')}` (temperature {s.get('judge_temperature', '?')}, "
           f"{s.get('samples', 1)} sample(s) per verdict, presentation seed {s.get('seed')})",
           f"- Pairs: {s.get('n_pairs', '?')}, grouped by {s.get('grouping', 'domain')}; benchmark domain: "
           f"{s.get('bench_domain') or 'none'}",
           f"- {result.bench.get('reason', '')}",
           ""]
    md += ["## Per domain", ""]
    d = result.domains
    view = pd.DataFrame({
        "domain": d["domain"], "role": d["role"], "n": d["n"].astype(int),
        "failed (old/new/either)": [f"{a}/{b}/{c}" for a, b, c in zip(d["n_failed_old"], d["n_failed_new"],
                                                                        d["n_failed_either"])],
        "agreement old": [_num(v) for v in d["agreement_old"]], "agreement new": [_num(v) for v in d["agreement_new"]],
        "Δ [CI]": [f"{_num(x, '{:+.3f}')} [{_num(lo, '{:+.3f}')}, {_num(hi, '{:+.3f}')}]"
                   for x, lo, hi in zip(d["diff"], d["ci_low"], d["ci_high"])],
        "lost/gained": [f"{a}/{b}" for a, b in zip(d["n_lost"], d["n_gained"])],
        "p": [_num(v, "{:.3g}") for v in d["p_value"]], "q (BH)": [_num(v, "{:.3g}") for v in d["q_value"]],
        "MDE": [fmt_mde(v) for v in d["mde"]], "verdict": d["verdict"],
    })
    credit_used = float(s.get("tie_credit", TIE_CREDIT))
    other = other_tie_credit(credit_used)
    common = [ties_common(int(t_old) + int(t_new), 2 * int(n)) for t_old, t_new, n in
              zip(d.get("n_tie_old", [0] * len(d)), d.get("n_tie_new", [0] * len(d)), d["n"])]
    if any(common):  # the other tie rule's Δ beside the card's, where ties are common
        view.insert(view.columns.get_loc("Δ [CI]") + 1, f"Δ, ties at {other:g}", [
            _num(x + (other - credit_used) * (int(t_new) - int(t_old)) / int(n), "{:+.3f}") if c and int(n) else "—"
            for x, t_old, t_new, n, c in zip(d["diff"], d["n_tie_old"], d["n_tie_new"], d["n"], common)])
    md += _table(view) + [""]
    notes = [(dom, n) for dom, n in zip(d["domain"], d.get("ci_note", [None] * len(d))) if isinstance(n, str) and n]
    if notes:
        md += [f"Intervals: {'; '.join(f'{dom!r}: {n}' for dom, n in notes)}.", ""]
    if any(common):
        md += [f"Δ, ties at {other:g}: the same Δ with ties credited {other:g} (the other tie rule), given where tie "
               "verdicts are more than 5% of a domain's verdicts (— elsewhere).", ""]
    md += [f"Δ = agreement(new) − agreement(old) on pairs judged under both rubrics (ties credited "
           f"{s.get('tie_credit', TIE_CREDIT):g}, the project's one rule); CI: {s.get('ci')}; p: {s.get('test')}; significant drop: q < "
           f"{s.get('alpha')} with Δ < 0 and the CI's upper end < 0. MDE: the minimum detectable drop, the "
           f"{s.get('mde_formula')} (α' = {_num(s.get('alpha_mde'), '{:.3g}')}, power {s.get('power')}, n = pairs "
           "used; `domains.csv` adds the normal approximation `mde_normal` and the floor `mde_floor` = k_min / n). "
           "A pass on a domain says no drop of at least its MDE was seen — not that the domain is safe. Pairs "
           "that failed under either rubric are left out of both sides.", ""]
    if clusters is not None and len(clusters):
        md += ["## Prompt clusters", "", "The data had no domain labels (or `--by cluster`): prompts were "
               "embedded and grouped by k-means; each cluster is named by its top TF-IDF terms.", ""]
        md += _table(clusters) + [""]
    md += ["## Flags", ""]
    md += [f"- **{f['kind']}**: {f['message']}" for f in result.flags] or ["None."]
    md += [""]
    if result.notes:
        md += ["## Notes", ""] + [f"- {n}" for n in result.notes] + [""]
    fl = result.flipped
    md += ["## Flipped pairs", "",
           f"{len(fl)} pair(s) changed verdict ({int((fl['change'] == 'lost').sum())} lost agreement, "
           f"{int((fl['change'] == 'gained').sum())} gained, {int((fl['change'] == 'changed').sum())} other)"
           + (f"; the first {SHOWN_FLIPPED} below, all in `flipped.csv`." if len(fl) > SHOWN_FLIPPED else "."), ""]
    if len(fl):
        md += _table(fl.head(SHOWN_FLIPPED)[["pair_id", "domain", "change", "human", "old_verdict", "new_verdict",
                                             "prompt"]]) + [""]
    return "\n".join(md) + "\n"


def write_gate_report(result: DriftCheck, out_dir: str | Path, *, clusters: pd.DataFrame | None = None,
                      note: str | None = None) -> dict[str, Path]:
    """Write the report files into ``out_dir`` (created); returns ``{name: path}``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"report.md": out / "report.md", "report.json": out / "report.json", "domains.csv": out / "domains.csv",
             "flipped.csv": out / "flipped.csv", "items.csv": out / "items.csv"}
    atomic.write_text(paths["report.md"], gate_markdown(result, clusters=clusters, note=note), encoding="utf-8")
    data = result.to_dict()
    if note:
        data["note"] = note
    if clusters is not None:
        data["clusters"] = clusters.to_dict(orient="records")
    atomic.write_json(paths["report.json"], data, indent=2, default=str, allow_nan=False)
    atomic.write_csv(result.domains, paths["domains.csv"], index=False)
    atomic.write_csv(result.flipped, paths["flipped.csv"], index=False)
    atomic.write_csv(result.items, paths["items.csv"], index=False)
    if clusters is not None:
        paths["clusters.csv"] = out / "clusters.csv"
        atomic.write_csv(clusters, paths["clusters.csv"], index=False)
    elif (out / "clusters.csv").exists():  # left by an earlier clustered run into the same folder
        (out / "clusters.csv").unlink()
    return paths
