"""The recorded-judges card: ``card.md`` (read it), ``card.json`` (everything, machine-readable) and ``card.csv``
(one row per judge × condition: each metric's value, interval and n), plus the long tables beside it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.recorded._analysis import CELL_METRICS, RecordedAnalysis

MAIN_COLUMNS = {
    "accuracy": "Acc", "accuracy_original": "Acc orig", "accuracy_swapped": "Acc swap", "both_correct": "Both",
    "positional_agreement": "Pos. agree", "first_position_rate": "1st-pos", "kappa": "κ", "macro_f1": "macro-F1",
}


CONTRAST_COLUMNS = ["family", "metric", "contrast", "judge", "a", "b", "n_pairs", "mean_a", "mean_b", "diff", "low",
                    "high", "se", "p_value", "p_adjusted", "mde", "mde_alpha", "family_size", "label", "ci",
                    "degenerate"]


def fmt(e: dict[str, Any] | None, digits: int = 3) -> str:
    """``value [low, high]`` (or ``value`` alone, or ``— (reason)``)."""
    if not e or e.get("value") is None:
        return f"— ({(e or {}).get('reason') or 'not measured'})"
    text = f"{e['value']:.{digits}f}"
    if e.get("low") is not None and e.get("high") is not None:
        text += f" [{e['low']:.{digits}f}, {e['high']:.{digits}f}]"
    return text


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    esc = [[str(c).replace("|", "\\|").replace("\n", " ") for c in r] for r in rows]
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in esc)]


def _num(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{round(float(x), digits) + 0.0:.{digits}f}"  # + 0.0: no "-0.000"


def cells_frame(analysis: RecordedAnalysis) -> pd.DataFrame:
    """``card.csv``: one row per judge × condition: where the verdicts came from, what the intervals are (method,
    level, resampled unit, resamples), and per metric ``<m>``, ``<m>_low``, ``<m>_high``, ``<m>_n``."""
    rows = []
    s = analysis.settings
    src = analysis.source
    for c in analysis.cells:
        row: dict[str, Any] = {k: c[k] for k in ("judge", "condition", "n_pairs", "n_judgments", "n_none", "n_tie",
                                                 "n_unlabelled_pairs")}
        row.update({"source": src["name"], "format": src["format"], "provenance": src["provenance"],
                    "interval_method": "percentile bootstrap", "interval_level": s.confidence,
                    "interval_unit": "pairs", "interval_resamples": s.n_boot})
        for m in CELL_METRICS:
            e = c["metrics"].get(m) or {}
            row.update({m: e.get("value"), f"{m}_low": e.get("low"), f"{m}_high": e.get("high"), f"{m}_n": e.get("n")})
        rows.append(row)
    return pd.DataFrame(rows)


def _interval_line(analysis: RecordedAnalysis) -> str:
    s = analysis.settings
    return (f"Intervals: {s.interval('pairs')} — all judgments of a drawn pair come along. n: pairs for Acc (mean over "
            "the orders a pair was judged in), Both and Pos. agree (pairs judged in both orders); judgments for Acc "
            "orig / Acc swap, κ and macro-F1 (both orders pooled), and 1st-pos (first/second verdicts only). "
            f"A tie earns credit {s.tie_credit:g}; a reply that is no verdict (`none`) is wrong and stays in every "
            "denominator (column none).")


def card_markdown(analysis: RecordedAnalysis, publisher: dict[str, Any] | None = None) -> str:
    """The card as markdown (see the module docstring)."""
    src, n = analysis.source, analysis.counts
    md = [f"# Recorded judges: {src['name']}", "",
          f"**{headline(src)} — no model was called for this card (ledger: 0 calls).** Judges: "
          f"{', '.join(src['judges'])}. Conditions: {', '.join(src['conditions'])}.", "",
          f"- Source: {src['provenance']} — `{src['path']}` (format `{src['format']}`"
          + (f", licence: {src['license']}" if src.get("license") else "") + ").",
          f"- Labels: {src['label_rule']}. Classes: {', '.join(src['classes']) or '—'}.",
          f"- Counts: {n['pairs']} pairs ({n['labelled_pairs']} with a label), {n['judgments']} judgments: "
          f"{n['verdict_first']} first, {n['verdict_second']} second, {n['verdict_tie']} tie, {n['verdict_none']} "
          "none (no verdict; counted wrong, raw text kept in judgments.parquet).", ""]
    if analysis.notes:
        md += [f"- {x}" for x in analysis.notes] + [""]
    md += ["## Judges × conditions", "", _interval_line(analysis), ""]
    header = ["judge", "condition", *MAIN_COLUMNS.values(), "none", "n pairs"]
    rows = []
    for c in analysis.cells:
        m = c["metrics"]
        rows.append([c["judge"], c["condition"], *(fmt(m.get(k)) if m.get(k, {}).get("value") is not None else "—"
                                                   for k in MAIN_COLUMNS), c["n_none"], c["n_pairs"]])
    md += _md_table(header, rows) + [""]
    missing = sorted({f"{MAIN_COLUMNS[k]}: {c['metrics'][k]['reason']}" for c in analysis.cells for k in MAIN_COLUMNS
                      if c["metrics"].get(k, {}).get("value") is None})
    if missing:
        md += ["Empty cells: " + "; ".join(missing) + ".", ""]
    md += _contrasts_md(analysis)
    md += _comparisons_md(analysis)
    md += _agreement_md(analysis)
    md += _majority_md(analysis)
    md += _bias_md(analysis)
    if publisher:
        md += [f"## Publisher check ({publisher['kind']})", "", publisher["summary"], ""]
        if publisher["kind"].startswith("pandalm"):
            md += _md_table(["metric", "pandalm-7b", "gpt-3.5-turbo", "ratio", "claimed"],
                            [[r["metric"], _num(r["pandalm-7b"], 4), _num(r["gpt-3.5-turbo"], 4),
                              f"{100 * r['ratio']:.2f}%", "93.75%" if r["claimed"] else "—"]
                             for r in publisher["rows"]]) + [""]
    md += ["Files: `card.json` (everything), `card.csv` (this table with every metric's interval and n), "
           "`comparisons.csv`, `contrasts.csv`, `agreement.csv`, `majority.csv`, `biases.csv`, `judgments.parquet` (every judgment: "
           "verdict as presented, choice, label, raw text, generated text)"
           + (", `publisher_check.csv`" if publisher else "") + ".", ""]
    return "\n".join(md)


def headline(source: dict[str, Any]) -> str:
    """What the verdicts are: real judges' recorded verdicts, or a stage's own judgments read back from the call
    store (the embedded model's are plumbing, not findings)."""
    if source.get("format") != "store":
        return "Real judges, recorded verdicts"
    if any(str(j).startswith("local/") for j in source.get("judges") or []):
        return ("The embedded model's judgments, read back from the call store: plumbing, not findings (it is at "
                "chance as a pairwise judge)")
    return "A stage's own judgments, read back from the call store"


def _short(row: dict[str, Any] | None) -> tuple[str, str]:
    """``Δ [low, high] (q=…)`` and a short result for one comparison row."""
    if row is None:
        return "—", "—"
    if row.get("diff") is None:
        return "—", str(row.get("degenerate") or "not compared")
    text = f"{_num(row['diff'])} [{_num(row.get('low'))}, {_num(row.get('high'))}] (q={_num(row.get('p_adjusted'))})"
    label = str(row.get("label") or "")
    if label == "difference":
        return text, "**difference**"
    if label.startswith("no detectable difference") and row.get("mde") is not None:
        return text, f"none detected (MDE {row['mde']:.3f})"
    return text, label or "—"


def _contrasts_md(analysis: RecordedAnalysis) -> list[str]:
    rows = analysis.contrasts
    if not rows:
        return []
    s = analysis.settings
    names = {r["contrast"]: f"{r['a']} − {r['b']}" for r in rows}
    md = ["## Contrasts", "",
          "The questions this source was set up to answer, within each judge: "
          + "; ".join(f"**{n}** ({ab})" for n, ab in names.items()) + ". Δ = a − b on the pairs both conditions "
          f"judged; {s.interval('pairs').replace('bootstrap', 'paired bootstrap')}; q = Benjamini–Hochberg over "
          "the family (every judge × contrast of one metric: "
          + ", ".join(f"{m} m={sum(r['metric'] == m for r in rows)}" for m in dict.fromkeys(r["metric"] for r in rows))
          + f") at {s.alpha:g}; MDE at the Bonferroni level α/m, power {s.power:g}.", ""]
    keyed = {(r["judge"], r["contrast"], r["metric"]): r for r in rows}
    table = []
    for judge, name in dict.fromkeys((r["judge"], r["contrast"]) for r in rows):
        acc, pos = keyed.get((judge, name, "accuracy")), keyed.get((judge, name, "positional_agreement"))
        n = (acc or pos or {}).get("n_pairs", "—")
        table.append([judge, f"{name}: {names[name]}", n, *_short(acc), *_short(pos)])
    md += _md_table(["judge", "contrast (a − b)", "n", "Δ accuracy [CI]", "result", "Δ positional agreement [CI]",
                     "result"], table) + [""]
    return md


def _comparisons_md(analysis: RecordedAnalysis) -> list[str]:
    s = analysis.settings
    rows = analysis.comparisons
    if not rows:
        return []
    md = ["## Paired comparisons", "",
          f"On the pairs both sides judged; Δ = a − b; {s.interval('pairs').replace('bootstrap', 'paired bootstrap')}; "
          f"q = Benjamini–Hochberg over the family (one judge's conditions for a metric, or one condition's judges) at "
          f"{s.alpha:g}; \"none detected\" states the MDE at the Bonferroni level α/m of the family, power "
          f"{s.power:g} (m and the full labels in comparisons.csv).", ""]
    within = [r for r in rows if r["family"].startswith("judge:")]
    if within:
        md += ["### Conditions within a judge" + (f" (each against `{s.baseline}`)" if s.baseline else ""), ""]
        keyed = {(r["judge"], r["a"], r["b"], r["metric"]): r for r in within}
        table = []
        for judge, a, b in dict.fromkeys((r["judge"], r["a"], r["b"]) for r in within):
            acc, pos = keyed.get((judge, a, b, "accuracy")), keyed.get((judge, a, b, "positional_agreement"))
            n = (acc or pos or {}).get("n_pairs", "—")
            table.append([judge, f"{a} − {b}", n, *_short(acc), *_short(pos)])
        md += _md_table(["judge", "a − b", "n", "Δ accuracy [CI]", "result", "Δ positional agreement [CI]", "result"],
                        table) + [""]
    between = [r for r in rows if r["family"].startswith("condition:")]
    if between:
        md += ["### Judges within a condition", "",
               "Per condition, the most accurate judge, and which judges the paired comparisons could not tell apart "
               "from it (≈) or found less accurate (<). "
               f"{sum(r.get('label') == 'difference' for r in between)} of {len(between)} comparisons between judges "
               "found a difference (accuracy and positional agreement; every row in comparisons.csv).", ""]
        acc = {(c["condition"], c["judge"]): c["metrics"]["accuracy"]["value"] for c in analysis.cells}
        table = []
        for cond in sorted({r["condition"] for r in between if r["metric"] == "accuracy"}):
            judges = sorted(j for (c, j), v in acc.items() if c == cond and v is not None)
            best = max(judges, key=lambda j: acc[(cond, j)])
            same, below = [], []
            for j in judges:
                if j == best:
                    continue
                row = next((r for r in between if r["metric"] == "accuracy" and r["condition"] == cond
                            and {r["a"], r["b"]} == {best, j}), None)
                favours_best = row is not None and row.get("diff") is not None and (
                    row["diff"] > 0 if row["a"] == best else row["diff"] < 0)
                (below if row is not None and row.get("label") == "difference" and favours_best else same).append(
                    f"{j} {_num(acc[(cond, j)])}")
            table.append([cond, f"{best} {_num(acc[(cond, best)])}", ", ".join(same) or "—", ", ".join(below) or "—"])
        md += _md_table(["condition", "best (accuracy)", "≈ best", "< best"], table) + [""]
    return md


def _agreement_md(analysis: RecordedAnalysis) -> list[str]:
    md = []
    if analysis.judge_agreement:
        md += ["## Agreement among judges", "",
               "Per condition, on the (pair, order) judgments: Krippendorff's α (nominal; `none` missing), Fleiss' κ "
               "(units every judge decided), mean pairwise agreement. " + analysis.settings.interval("pairs") + ".",
               ""]
        md += _md_table(["condition", "judges", "α", "n units", "Fleiss κ", "n units", "pairwise agreement"],
                        [[r["condition"], ", ".join(r["judges"]), fmt(r["krippendorff_alpha"]),
                          r["krippendorff_alpha"]["n"], fmt(r["fleiss_kappa"]), r["fleiss_kappa"]["n"],
                          _num(r["pairwise_agreement"]["value"])] for r in analysis.judge_agreement]) + [""]
    a = analysis.annotator_agreement
    if a:
        md += ["## Agreement among annotators", "",
               f"{len(a['annotators'])} annotators ({', '.join(a['annotators'])}) on {a['pairs']} pairs; "
               f"{a['pairs_without_majority']} pairs without a majority label. Krippendorff's α (nominal) "
               f"{fmt(a['krippendorff_alpha'])} (n={a['krippendorff_alpha']['n']} pairs); Fleiss' κ "
               f"{fmt(a['fleiss_kappa'])} (n={a['fleiss_kappa']['n']}); mean pairwise agreement "
               f"{_num(a['pairwise_agreement']['value'])}. {analysis.settings.interval('pairs')}.", ""]
    return md


def _majority_md(analysis: RecordedAnalysis) -> list[str]:
    if not analysis.majority:
        return []
    md = ["## Majority of judges", "",
          "Per (pair, order) the judges' most frequent choice (a split vote is a tie, no vote `none`), against the "
          "best single judge of the condition on the same pairs (paired bootstrap).", ""]
    md += _md_table(["condition", "judges", "majority accuracy", "best judge", "its accuracy", "Δ [CI]"],
                    [[r["condition"], len(r["judges"]), fmt(r["majority_accuracy"]), r["best_judge"],
                      _num(r["best_judge_accuracy"]), f"{_num(r['diff_vs_best'])} [{_num(r['diff_low'])}, "
                      f"{_num(r['diff_high'])}]"] for r in analysis.majority]) + [""]
    return md


def _bias_md(analysis: RecordedAnalysis) -> list[str]:
    if not analysis.biases:
        return []
    md = ["## Surface biases", "",
          "Probability of preferring the longer output (pairs whose outputs differ in length, in characters) and "
          "the one with a list (pairs where exactly one output has ≥ 2 bulleted or numbered lines), among "
          "first/second verdicts; `(labels)` is the same rate for the pairs' labels. "
          + analysis.settings.interval("pairs") + "; n = judgments.", ""]
    md += _md_table(["judge", "condition", "prefers longer", "n", "prefers list", "n"],
                    [[r["judge"], r["condition"], fmt(r["prefers_longer"]), r["prefers_longer"]["n"],
                      fmt(r["prefers_list"]), r["prefers_list"]["n"]] for r in analysis.biases]) + [""]
    return md


def _flat(rows: list[dict[str, Any]]) -> pd.DataFrame:
    out = []
    for r in rows:
        flat: dict[str, Any] = {}
        for k, v in r.items():
            if isinstance(v, dict):
                flat.update({f"{k}.{kk}": vv for kk, vv in v.items() if not isinstance(vv, (dict, list))})
            elif isinstance(v, list):
                flat[k] = ", ".join(map(str, v))
            else:
                flat[k] = v
        out.append(flat)
    return pd.DataFrame(out)


def jsonable(obj: Any) -> Any:
    """``obj`` with NaN/inf as None and numpy scalars as Python numbers, so card.json is strict JSON."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_card(analysis: RecordedAnalysis, out_dir: str | Path, publisher: dict[str, Any] | None = None
               ) -> dict[str, Path]:
    """Write card.md / card.json / card.csv and the long tables into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("card.md", "card.json", "card.csv", "comparisons.csv", "contrasts.csv",
                                           "agreement.csv", "majority.csv", "biases.csv")}
    atomic.write_text(paths["card.md"], card_markdown(analysis, publisher))
    atomic.write_json(paths["card.json"], jsonable({**analysis.to_dict(), "publisher_check": publisher}), indent=2,
                      default=str, allow_nan=False, ensure_ascii=False)
    atomic.write_csv(cells_frame(analysis), paths["card.csv"], index=False)
    atomic.write_csv(pd.DataFrame(analysis.comparisons), paths["comparisons.csv"], index=False)
    atomic.write_csv(pd.DataFrame(analysis.contrasts, columns=CONTRAST_COLUMNS), paths["contrasts.csv"], index=False)
    agreement = [{"between": "judges", **r} for r in analysis.judge_agreement]
    if analysis.annotator_agreement:
        agreement.append({"between": "annotators", "condition": "—", **analysis.annotator_agreement})
    atomic.write_csv(_flat(agreement), paths["agreement.csv"], index=False)
    atomic.write_csv(_flat(analysis.majority), paths["majority.csv"], index=False)
    atomic.write_csv(_flat(analysis.biases), paths["biases.csv"], index=False)
    if publisher:
        paths["publisher_check.csv"] = out / "publisher_check.csv"
        atomic.write_csv(pd.DataFrame(publisher["rows"]), paths["publisher_check.csv"], index=False)
    return paths
