"""The "Recorded judges" sections: one per ``outputs/recorded/<name>/card.json`` (the ``recorded@<name>`` stage) —
which real judges, where their verdicts came from and under what licence, the judge × condition table with its
intervals, the source's named contrasts (paired Δ, interval, BH q, MDE) with how consistent each judge is across
the two presentation orders, the publisher check, and a plot of accuracy per condition per judge.

Built from the card's JSON (not its markdown) so the report words the answer to the contrasts itself; agreement,
majority-of-judges, surface biases and every paired comparison (comparisons.csv) are folded away under their
titles."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab.report._figures import accuracy_by_condition, judges_leaderboards
from rubriclab.settings import TIE_CREDIT

CELL_COLUMNS = {"accuracy": "Acc (mean over orders)", "accuracy_original": "Acc original", "accuracy_swapped": "Acc swapped",
                "both_correct": "Both orders right", "positional_agreement": "Pos. agreement",
                "first_position_rate": "1st-position rate", "kappa": "κ", "macro_f1": "macro-F1"}
CONSISTENCY = ("accuracy_original", "accuracy_swapped", "positional_agreement", "both_correct", "first_position_rate")
COMPARISON_COLUMNS = ["family", "metric", "a", "b", "n_pairs", "diff", "low", "high", "p_adjusted", "mde", "label"]


def _num(x: Any, digits: int = 3, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    x = round(float(x), digits) + 0.0  # no "-0.000"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _entry(e: dict[str, Any] | None) -> str:
    """``value [low, high]``, ``value`` without an interval, ``—`` without a value."""
    if not e or e.get("value") is None:
        return "—"
    text = _num(e["value"])
    if e.get("low") is not None and e.get("high") is not None:
        text += f" [{_num(e['low'])}, {_num(e['high'])}]"
    return text


def _esc(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _pct(x: float) -> str:
    return f"{100 * x:g}%"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _interval_text(settings: dict[str, Any], paired: bool = False) -> str:
    kind = "percentile paired bootstrap" if paired else "percentile bootstrap"
    return f"{_pct(settings.get('confidence', 0.95))} {kind} over pairs (B={settings.get('n_boot', '?')})"


def _where(path: str, project: Path) -> str:
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(project):
        return p.relative_to(project).as_posix()
    parts = p.parts
    for i in range(len(parts) - 2, -1, -1):  # a set shipped inside the installed package
        if parts[i] == "rubriclab" and parts[i + 1] == "recorded":
            return "/".join(parts[i:]) + " (shipped with rubriclab)"
    return path


def _header(card: dict[str, Any], project: Path) -> str:
    from rubriclab.recorded import headline

    src, n = card["source"], card["counts"]
    lines = [f"**{headline(src)}: no model was called for this section (ledger: 0 calls).** "
             f"Judges: {', '.join(src['judges'])}. Conditions ({len(src['conditions'])}): "
             f"{', '.join(src['conditions'])}.", "",
             f"- Where the verdicts came from: {src.get('provenance') or '—'} (`{_where(src['path'], project)}`, "
             f"format `{src['format']}`; licence: {src.get('license') or 'not stated'}).",
             f"- Labels: {src.get('label_rule') or '—'}.",
             f"- {n['pairs']} pairs ({n['labelled_pairs']} with a label), {n['judgments']} judgments: "
             f"{n['verdict_first']} first, {n['verdict_second']} second, {n['verdict_tie']} tie, {n['verdict_none']} "
             "none (a reply that is no verdict: counted wrong, never guessed)."]
    lines += [f"- {note}" for note in card.get("notes") or []]
    return "\n".join(lines)


def _cells_md(card: dict[str, Any]) -> str:
    s = card["settings"]
    rows = []
    alts = [(m.get("accuracy") or {}).get("at_other_tie_credit") for m in (c["metrics"] for c in card["cells"])]
    other = next((a["tie_credit"] for a in alts if a), None)
    for c, alt in zip(card["cells"], alts, strict=True):
        m = c["metrics"]
        rows.append([c["judge"], c["condition"], *(_entry(m.get(k)) for k in CELL_COLUMNS), c["n_none"], c["n_tie"],
                     *([_num(alt["value"]) if alt else "—"] if other is not None else []), c["n_pairs"]])
    alt_note = (f" Acc, ties at {other:g}: the accuracy under the other tie rule, shown where a cell's ties on pairs "
                f"labelled 1 or 2 are more than 5% of its labelled judgments (— elsewhere)." if other is not None else "")
    return ("### Judges × conditions\n\n"
            f"Each value with its {_interval_text(s)} interval; all judgments of a drawn pair come along. n: "
            "pairs for Acc (mean over the orders a pair was judged in), Both orders right and Pos. agreement; judgments for the per-order "
            "accuracies, κ and macro-F1; first/second verdicts for the 1st-position rate (per cell in card.csv). "
            f"A tie earns credit {s.get('tie_credit', TIE_CREDIT):g} (the project's one rule); `none` is wrong and stays in "
            f"every denominator.{alt_note} — : not defined here (e.g. one presentation order only).\n\n"
            + _table(["judge", "condition", *CELL_COLUMNS.values(), "none", "ties",
                      *([f"Acc, ties at {other:g}"] if other is not None else []), "n pairs"], rows))


def _contrast_label(row: dict[str, Any]) -> str:
    label = str(row.get("label") or "")
    if label == "difference":
        return "**difference**"
    if label.startswith("no detectable difference"):
        return f"no detectable difference (MDE {_num(row.get('mde'))})" if row.get("mde") is not None else label
    return label or str(row.get("degenerate") or "—")


def _contrasts_md(card: dict[str, Any]) -> str:
    rows = card.get("contrasts") or []
    if not rows:
        return ""
    s = card["settings"]
    alpha = s.get("alpha", 0.05)
    named = {r["contrast"]: (r["a"], r["b"]) for r in rows}
    cells = {(c["judge"], c["condition"]): c["metrics"] for c in card["cells"]}
    judges = list(dict.fromkeys(r["judge"] for r in rows))
    acc = [r for r in rows if r["metric"] == "accuracy"]
    pos = [r for r in rows if r["metric"] == "positional_agreement"]
    question = (f"Within {_and(judges)}: does accuracy change between the two conditions of "
                + ("each contrast" if len(named) > 1 else "the contrast") + " ("
                + "; ".join(f"**{name}**: {a} vs {b}" for name, (a, b) in named.items())
                + "), and how consistent is each judge across the two presentation orders?")
    md = ["### The questions: " + ", ".join(named), "", question, "",
          f"Paired on the pairs both conditions judged (Δ = a − b); {_interval_text(s, paired=True)}; q: "
          f"Benjamini–Hochberg over the family (every judge × contrast of one metric, m={len(acc)} for accuracy) at "
          f"α={alpha:g}; MDE: the smallest |Δ| this n detects with power {s.get('power', 0.8):g} at the Bonferroni "
          f"level α/m.", ""]
    found = [r for r in acc if r.get("label") == "difference"]
    mdes = [r["mde"] for r in acc if r.get("mde") is not None]
    answer = (f"**Answer on these data:** {len(found)} of {len(acc)} accuracy contrasts show a difference at BH "
              f"q < {alpha:g}")
    if found:
        answer += " (" + "; ".join(f"{r['judge']} {r['contrast']}: Δ {_num(r['diff'], sign=True)}" for r in found) + ")"
    if mdes and len(found) < len(acc):
        answer += (f"; where none is detected, a change smaller than {_num(min(mdes))}–{_num(max(mdes))} in accuracy "
                   "could go unseen at this n")
    md += [answer + ".", ""]
    table = []
    for r in acc:
        ma = (cells.get((r["judge"], r["a"])) or {}).get("accuracy")
        mb = (cells.get((r["judge"], r["b"])) or {}).get("accuracy")
        table.append([r["judge"], f"{r['contrast']}: {r['a']} − {r['b']}", r["n_pairs"], _entry(ma), _entry(mb),
                      f"{_num(r.get('diff'), sign=True)} [{_num(r.get('low'), sign=True)}, "
                      f"{_num(r.get('high'), sign=True)}]", _num(r.get("p_value")), _num(r.get("p_adjusted")),
                      _num(r.get("mde")), _contrast_label(r)])
    md += [_table(["judge", "contrast (a − b)", "n pairs", "accuracy a", "accuracy b", "Δ accuracy [CI]", "p",
                   "q (BH)", "MDE", "result"], table), ""]
    # consistency across the two presentation orders, for the conditions the contrasts involve
    conds = list(dict.fromkeys(c for a, b in named.values() for c in (b, a)))
    table = [[j, c, *(_entry(cells[(j, c)].get(k)) for k in CONSISTENCY)] for j in judges for c in conds
             if (j, c) in cells]
    md += ["#### Consistency across the two presentation orders", "",
           "Accuracy with output 1 shown first (original) and with output 2 shown first (swapped), the share of pairs "
           "whose verdict is the same in both orders (positional agreement) and right in both, and the rate of "
           f"choosing the first-shown output; {_interval_text(s)}.", "",
           _table(["judge", "condition", "Acc original", "Acc swapped", "Pos. agreement", "Both orders right",
                   "1st-position rate"], table), ""]
    if pos:
        table = [[r["judge"], f"{r['contrast']}: {r['a']} − {r['b']}", r["n_pairs"],
                  f"{_num(r.get('diff'), sign=True)} [{_num(r.get('low'), sign=True)}, "
                  f"{_num(r.get('high'), sign=True)}]", _num(r.get("p_adjusted")), _num(r.get("mde")),
                  _contrast_label(r)] for r in pos]
        md += [f"Does the contrast change that consistency? Δ positional agreement, paired, BH over its own family "
               f"(m={len(pos)}):", "",
               _table(["judge", "contrast (a − b)", "n pairs", "Δ pos. agreement [CI]", "q (BH)", "MDE", "result"],
                      table), ""]
    return "\n".join(md)


def _publisher_md(card: dict[str, Any]) -> str:
    pub = card.get("publisher_check")
    if not pub:
        return ""
    md = [f"### Publisher check ({pub['kind']})", "", pub.get("summary") or ""]
    rows = pub.get("rows") or []
    if rows and "figure" in rows[0]:  # a leaderboard's figures (AlpacaEval)
        figures = list(dict.fromkeys(r["figure"] for r in rows))
        md += ["", _table(["figure", "published rows", "reproduced", "not computable here"],
                          [[f, sum(r["figure"] == f for r in rows), sum(bool(r["match"]) for r in rows if r["figure"] == f),
                            sum(r["reproduced"] is None for r in rows if r["figure"] == f)] for f in figures])]
    elif rows and "key" in rows[0] and "match" in rows[0]:
        main = [r for r in rows if not str(r["key"]).startswith("kappa")]
        kappas = [r for r in rows if str(r["key"]).startswith("kappa")]
        md += ["", _table(["figures", "published", "reproduced exactly", "cells (judge × condition)"],
                          [["accuracy (correct_False, correct_True, correct_average, correct_both, equal)", len(main),
                            sum(bool(r["match"]) for r in main), len({(r["judge"], r["condition"]) for r in main})],
                           ["kappa_* (the publisher's encoding)", len(kappas), sum(bool(r["match"]) for r in kappas),
                            len({(r["judge"], r["condition"]) for r in kappas})]])]
    elif rows and "metric" in rows[0]:
        judges = [k for k in rows[0] if k not in ("claim", "metric", "convention", "ratio", "claimed", "agrees",
                                                  "rule", "n")]
        md += ["", f"Labels: {rows[0].get('rule', '—').split(';')[0]}; n = {rows[0].get('n', '—')} pairs.", "",
               _table(["metric", "no verdict counted", *judges, f"ratio {judges[0]} / {judges[-1]}", "claimed",
                       "the files give the claim?"],
                      [[r["metric"], r.get("convention", "—"), *(_num(r.get(j), 4) for j in judges),
                        f"{100 * r['ratio']:.2f}%", f"{100 * r['claimed']:.2f}%" if r.get("claimed") else "—",
                        "—" if r.get("agrees") is None else ("yes" if r["agrees"] else "**no**")] for r in rows])]
    return "\n".join(md)


def _agreement_md(card: dict[str, Any]) -> str:
    a = card.get("annotator_agreement")
    if not a:
        return ""
    return ("### Agreement among the annotators\n\n"
            f"{len(a['annotators'])} annotators on {a['pairs']} pairs ({a['pairs_without_majority']} without a "
            f"majority label): Krippendorff's α (nominal) {_entry(a['krippendorff_alpha'])}, Fleiss' κ "
            f"{_entry(a['fleiss_kappa'])} (n = {a['fleiss_kappa']['n']} pairs), mean pairwise agreement "
            f"{_num(a['pairwise_agreement']['value'])}; {_interval_text(card['settings'])}.")


def _frame_details(rows: list[list[Any]], columns: list[str], title: str) -> tuple[str, str, str] | None:
    if not rows:
        return None
    return ("details", title, pd.DataFrame(rows, columns=columns).to_html(index=False, na_rep="—", border=0,
                                                                          classes="data"))


def _agreement_details(card: dict[str, Any]) -> tuple[str, str, str] | None:
    rows = [[r["condition"], ", ".join(r["judges"]), _entry(r["krippendorff_alpha"]), r["krippendorff_alpha"]["n"],
             _entry(r["fleiss_kappa"]), r["fleiss_kappa"]["n"], _num(r["pairwise_agreement"]["value"])]
            for r in card.get("judge_agreement") or []]
    return _frame_details(rows, ["condition", "judges", "Krippendorff's α (nominal) [CI]", "n units",
                                 "Fleiss' κ [CI]", "n units (every judge decided)", "mean pairwise agreement"],
                          f"Agreement among judges per condition, on the (pair, order) judgments "
                          f"({_interval_text(card['settings'])})")


def _majority_details(card: dict[str, Any]) -> tuple[str, str, str] | None:
    rows = [[r["condition"], len(r["judges"]), _entry(r["majority_accuracy"]), r["best_judge"],
             _num(r.get("best_judge_selection_accuracy")), r.get("n_evaluation_pairs"),
             _num(r.get("majority_evaluation_accuracy")), _num(r["best_judge_accuracy"]),
             f"{_num(r.get('diff_vs_best'), sign=True)} "
             f"[{_num(r.get('diff_low'), sign=True)}, {_num(r.get('diff_high'), sign=True)}]"]
            for r in card.get("majority") or []]
    return _frame_details(rows, ["condition", "judges", "majority accuracy [CI]", "best single judge",
                                 "its accuracy where picked", "n compared", "majority, compared half",
                                 "best judge, compared half", "Δ majority − best [paired CI]"],
                          "Majority of judges against the best single judge of each condition (picked on a seeded "
                          "half of the pairs, compared on the other half)")


def _bias_details(card: dict[str, Any]) -> list[tuple[str, str, str]]:
    from rubriclab.recorded import BIAS_HEADER, bias_tables

    out = []
    for title, what, rows in bias_tables(card.get("biases") or [], card.get("bias_info") or {},
                                         _interval_text(card["settings"])):
        block = _frame_details(rows, BIAS_HEADER, f"{title} (AlpacaEval's definition): {what}")
        if block:
            out.append(block)
    return out


def _csv(path: Path, title: str, columns: list[str] | None = None) -> tuple[str, str, str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        table = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return None
    if table.empty:
        return None
    if columns:
        table = table[[c for c in columns if c in table.columns]]
    return ("details", title, table.to_html(index=False, na_rep="—", border=0, classes="data",
                                            float_format=lambda v: f"{v:.4g}"))


def _ci(row: Any, method: str) -> str:
    """``value [low, high]`` with the interval's simulated coverage; ✗ where the coverage does not support the
    nominal level (the table's header states it only for the intervals that hold it)."""
    value = row.get(method)
    if value is None or pd.isna(value):
        return "—"
    text = f"{value:.3f} [{row[method + '_low']:.3f}, {row[method + '_high']:.3f}]"
    cov = row.get(f"{method}_coverage")
    if cov is not None and not pd.isna(cov):
        held = str(row.get(f"{method}_level") or "").startswith("not a")
        text += f" cov {cov:.3f}" + (" ✗" if held else "")
    return text


def _coverage_text(done: pd.DataFrame, s: dict[str, Any], level: str) -> str:
    """What the coverage simulation found, per estimator: median and least coverage over the cells, and in how
    many cells the nominal level held."""
    draws = s.get("coverage_draws") or 0
    cols = [m for m in ("labels_only", "ppi", "isotonic", "judge_only") if f"{m}_coverage" in done]
    if not draws or not cols or done[cols[0] + "_coverage"].isna().all():
        return (f"their coverage was not simulated (`recorded.calibrate.coverage_draws`: {draws}, or the source is "
                f"not fully labelled), so no interval here is claimed to hold {level}.")
    names = {"labels_only": "labels-only", "ppi": "PPI", "isotonic": "isotonic", "judge_only": "judge-only"}
    parts = []
    for m in cols:
        cov = done[f"{m}_coverage"].dropna()
        if cov.empty:
            continue
        held = int((~done[f"{m}_level"].astype(str).str.startswith("not a")).sum())
        parts.append(f"{names[m]} median {cov.median():.3f} (least {cov.min():.3f}; {level} held in {held} of "
                     f"{len(cov)} cells)")
    return (f"checked by simulation: over {draws} seeded label draws of the same size per cell, the share whose "
            f"interval holds the all-labels value — " + "; ".join(parts) + ". An interval is called "
            f"{level} only where that coverage is within the simulation's error of it (marked ✗ otherwise, and "
            "calibration.csv's `<method>_level` says so).")


def _calibration(d: Path) -> list[tuple]:
    """The calibration step (``calibration.csv`` / ``.json``): one paragraph and the per-cell table."""
    if not (d / "calibration.csv").exists() or not (d / "calibration.json").exists():
        return []
    table = pd.read_csv(d / "calibration.csv", keep_default_na=False, na_values=[""])
    s = json.loads((d / "calibration.json").read_text(encoding="utf-8"))["settings"]
    done = table[table["skipped"].fillna("") == ""] if "skipped" in table else table
    if done.empty:
        return [("md", "### Calibration with a few human labels\n\nNo cell could be calibrated: "
                       + "; ".join(sorted(set(table.get("skipped", pd.Series(dtype=str)).astype(str)))))]
    n, n_pairs = int(done["n_labelled"].iloc[0]), int(done["n_pairs"].max())
    level = _pct(s["confidence"])
    held = ((done["ppi_low"] <= done["all_labels"]) & (done["all_labels"] <= done["ppi_high"])).sum()
    w_ppi = (done["ppi_high"] - done["ppi_low"]).median()
    w_lab = (done["labels_only_high"] - done["labels_only_low"]).median()
    bias = (done["judge_only"] - done["all_labels"]).abs()
    md = ("### Calibration with a few human labels\n\n"
          f"Target: the human preference rate for output 1 (ties ½). For each judge × condition, a seeded draw of "
          f"{_pct(s['label_fraction'])} of the labelled pairs (n = {n} of {n_pairs}; seed {s['seed']}, the same "
          "pairs in every cell) plays the few human labels; the rest of the labels are hidden and give the "
          "all-labels value the estimates try to recover. Labels-only: the mean of the n labels. Judge-only: the "
          "judge's mean over every pair (its interval covers sampling noise, not the judge's bias). PPI: "
          f"prediction-powered inference (`ppi_py`, {'PPI++ power-tuned' if s.get('lam') is None else 'λ = ' + str(s['lam'])}): "
          "the judge on every pair, corrected by its error on the labelled ones. Isotonic: a cross-fitted "
          f"judge→human map (`ppi_py.crossppi_mean_ci`). Every interval is a nominal {level} normal (CLT) interval; "
          + _coverage_text(done, s, level) + " In this one draw, "
          f"PPI's interval held the all-labels value in {held} of {len(done)} cells; median width PPI "
          f"{w_ppi:.3f} vs labels-only {w_lab:.3f}; median effective sample size {done['ess'].median():.1f} labels "
          f"(n = {n}); judge-only |bias| median {bias.median():.3f}, largest {bias.max():.3f}. One draw illustrates; "
          "the same simulation over every cell and estimate: `benchmarks/calibrate_llmbar.py` (benchmarks/README.md)."
          + (f" In {int((done['ess'] < n).sum())} of {len(done)} cells the effective sample size is below n: there "
             "the judge's errors add more variance than its verdicts remove, PPI with λ = 1 is wider than labels-only, "
             "and a power-tuned λ (`recorded.calibrate.lam: null`, reliable with more labels) would fall back toward "
             "labels-only." if (done["ess"] < n).any() else "")
          + (f" Not calibrated: {len(table) - len(done)} cell(s) (reason in the table)." if len(done) < len(table) else ""))
    rows = [[r["judge"], r["condition"], f"{r['all_labels']:.3f}" if not pd.isna(r.get("all_labels")) else "—",
             _ci(r, "labels_only"), _ci(r, "judge_only"), _ci(r, "ppi"), _ci(r, "isotonic"),
             f"{r['ess']:.1f}" if not pd.isna(r.get("ess")) else "—", r.get("skipped") or ""]
            for r in table.to_dict("records")]
    details = _frame_details(rows, ["judge", "condition", "all labels", f"labels-only [CI] cov, n={n}",
                                    "judge-only [CI] cov", "PPI [CI] cov", "isotonic [CI] cov", "ESS (labels)",
                                    "not calibrated"],
                             "Calibration per judge × condition (calibration.csv): each interval with its simulated "
                             f"coverage (cov); ✗: below the nominal {level} by more than the simulation's error — not "
                             f"a {level} interval")
    return [("md", md), *([details] if details else [])]


def recorded_sections(project: Path) -> list[dict[str, Any]]:
    """One section per ``outputs/recorded/<name>/card.json``."""
    out = []
    for path in sorted((project / "outputs/recorded").glob("*/card.json")):
        d = path.parent
        card = json.loads(path.read_text(encoding="utf-8"))
        blocks: list[tuple] = [("md", _header(card, project))]
        contrasts = _contrasts_md(card)
        if contrasts:
            blocks.append(("md", contrasts))
        png, left_out = accuracy_by_condition(card["cells"], card["settings"].get("confidence", 0.95))
        if png is not None:
            note = f" Not plotted (no accuracy): {', '.join(left_out)}." if left_out else ""
            blocks.append(("img", f"{card['source']['name']}: accuracy (mean over the presentation orders a pair was "
                                  f"judged in) per condition and judge; error bars: "
                                  f"{_interval_text(card['settings'])} intervals from card.json.{note}", png))
        if card.get("leaderboard"):  # a head-to-head source: the publishers' leaderboard, judge against judge
            from rubriclab.recorded import leaderboard_md

            blocks.append(("md", "\n".join(leaderboard_md(card["leaderboard"], card.get("judges_compared") or []))
                           .replace("## Leaderboard", "### Leaderboard", 1).replace("### Judge against", "#### Judge against")))
            for c in card.get("judges_compared") or []:
                png = judges_leaderboards(card["leaderboard"], c) if not c.get("reason") else None
                if png is not None:
                    blocks.append(("img", f"{c['a']} vs {c['b']}: each model's win rate (%) with its "
                                          f"{_pct(card['settings'].get('confidence', 0.95))} percentile bootstrap "
                                          "interval over instructions, per judge; the title gives "
                                          "each judge's ranking (a pair ranked differently is a reversal: the section "
                                          "above says whether it is supported).", png))
        blocks.append(("md", _cells_md(card)))
        for md in (_publisher_md(card), _agreement_md(card)):
            if md:
                blocks.append(("md", md))
        blocks += _calibration(d)
        for block in (_agreement_details(card), _majority_details(card), *_bias_details(card),
                      _csv(d / "comparisons.csv", "Every paired comparison (conditions within a judge, judges within "
                                                  "a condition; BH per family; comparisons.csv)", COMPARISON_COLUMNS)):
            if block:
                blocks.append(block)
        out.append({"id": f"recorded-{d.name}", "kind": "recorded", "title": f"Recorded judges: {d.name}",
                    "run_name": f"recorded@{d.name}", "blocks": blocks})
    return out
