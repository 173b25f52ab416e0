"""The recorded-judges card: ``card.md`` (read it), ``card.json`` (everything, machine-readable) and ``card.csv``
(one row per judge × condition: each metric's value, interval and n), plus the long tables beside it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.recorded._analysis import CELL_METRICS, MIN_MAJORITY_JUDGES, RecordedAnalysis
from rubriclab.recorded._disagreements import COLUMNS as DISAGREE_COLUMNS
from rubriclab.recorded._disagreements import disagreements_md, trace_link
from rubriclab.reporting import files_line
from rubriclab.stats import TIES_COMMON

CONFUSION_COLUMNS = ["judge", "condition", "label", "choice_1", "choice_2", "choice_tie", "choice_none", "n"]
MAIN_COLUMNS = {
    "accuracy": "Acc", "accuracy_original": "Acc orig", "accuracy_swapped": "Acc swap", "both_correct": "Both",
    "positional_agreement": "Pos. agree", "first_position_rate": "1st-pos", "kappa": "κ", "macro_f1": "macro-F1",
}


CONTRAST_COLUMNS = ["family", "metric", "contrast", "judge", "a", "b", "n_pairs", "mean_a", "mean_b", "diff", "low",
                    "high", "se", "p_value", "p_adjusted", "mde", "mde_alpha", "family_size", "label", "ci", "test",
                    "boot_se", "degenerate"]


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
        alt = (c["metrics"].get("accuracy") or {}).get("at_other_tie_credit")
        row.update({"tie_credit": s.tie_credit, "accuracy_other_tie_credit": alt["tie_credit"] if alt else None,
                    "accuracy_at_other_tie_credit": alt["value"] if alt else None})
        rows.append(row)
    return pd.DataFrame(rows)


def _other_rule(analysis: RecordedAnalysis) -> tuple[str, str] | None:
    """The column of accuracies under the other tie rule and its note, when some cell's ties are common."""
    alts = [c["metrics"]["accuracy"]["at_other_tie_credit"] for c in analysis.cells
            if (c["metrics"].get("accuracy") or {}).get("at_other_tie_credit")]
    if not alts:
        return None
    other = alts[0]["tie_credit"]
    return (f"Acc, ties at {other:g}",
            f"Acc, ties at {other:g}: the accuracy under the other tie rule, given where a cell's tie verdicts on pairs "
            f"labelled 1 or 2 are more than {100 * TIES_COMMON:g}% of its labelled judgments ({len(alts)} of "
            f"{len(analysis.cells)} cells; — elsewhere: there the two rules differ by at most "
            f"{TIES_COMMON * abs(other - analysis.settings.tie_credit):.3f}). The card's rule is the project's: a tie "
            f"earns {analysis.settings.tie_credit:g}.")


def _interval_line(analysis: RecordedAnalysis) -> str:
    s = analysis.settings
    return (f"Intervals: {s.interval('pairs')} — all judgments of a drawn pair come along. n: pairs for Acc (mean over "
            "the orders a pair was judged in), Both and Pos. agree (pairs judged in both orders); judgments for Acc "
            "orig / Acc swap, κ and macro-F1 (both orders pooled), and 1st-pos (first/second verdicts only). "
            f"A tie earns credit {s.tie_credit:g} (the project's one rule: a fair coin's expected credit; column ties: "
            "tie verdicts); a reply that is no verdict (`none`) is wrong and stays in every denominator (column none).")


def _linked(analysis: RecordedAnalysis, mlflow_ui: str | None) -> pd.DataFrame:
    """The analysis' disagreements with their MLflow UI links (the UI's address is the card writer's to know)."""
    table = analysis.disagreements if analysis.disagreements is not None else pd.DataFrame(columns=DISAGREE_COLUMNS)
    if mlflow_ui and len(table):
        table = table.copy()
        table["link"] = [trace_link(mlflow_ui, e, t) for e, t in zip(
            table.get("experiment_id", [None] * len(table)), table["trace_id"], strict=True)]
    return table


def card_markdown(analysis: RecordedAnalysis, publisher: dict[str, Any] | None = None,
                  mlflow_ui: str | None = None) -> str:
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
    other = _other_rule(analysis)
    header = ["judge", "condition", *MAIN_COLUMNS.values(), "ties", *([other[0]] if other else []), "none", "n pairs"]
    rows = []
    for c in analysis.cells:
        m = c["metrics"]
        alt = (m.get("accuracy") or {}).get("at_other_tie_credit")
        rows.append([c["judge"], c["condition"], *(fmt(m.get(k)) if m.get(k, {}).get("value") is not None else "—"
                                                   for k in MAIN_COLUMNS), c["n_tie"],
                     *([_num(alt["value"]) if alt else "—"] if other else []), c["n_none"], c["n_pairs"]])
    md += _md_table(header, rows) + [""]
    if other:
        md += [other[1], ""]
    missing = sorted({f"{MAIN_COLUMNS[k]}: {c['metrics'][k]['reason']}" for c in analysis.cells for k in MAIN_COLUMNS
                      if c["metrics"].get(k, {}).get("value") is None})
    if missing:
        md += ["Empty cells: " + "; ".join(missing) + ".", ""]
    md += leaderboard_md(analysis.leaderboard, analysis.judges_compared)
    md += _contrasts_md(analysis)
    md += _comparisons_md(analysis)
    md += _agreement_md(analysis)
    md += _majority_md(analysis)
    md += _bias_md(analysis)
    md += disagreements_md(_linked(analysis, mlflow_ui), pd.DataFrame(analysis.confusion, columns=CONFUSION_COLUMNS),
                           _md_table)
    if publisher:
        md += [f"## Publisher check ({publisher['kind']})", "", publisher["summary"], ""]
        if publisher["kind"].startswith("pandalm"):
            md += _md_table(["metric", "no verdict counted", "pandalm-7b", "gpt-3.5-turbo", "ratio", "claimed"],
                            [[r["metric"], r["convention"], _num(r["pandalm-7b"], 4), _num(r["gpt-3.5-turbo"], 4),
                              f"{100 * r['ratio']:.2f}%", "93.75%" if r["claimed"] else "—"]
                             for r in publisher["rows"]]) + [""]
    md += [files_line([("card.json", "everything"), ("card.csv", "this table with every metric's interval and n"),
                       ("comparisons.csv", None), ("contrasts.csv", None), ("agreement.csv", None),
                       ("majority.csv", None), ("biases.csv", None), ("disagreements.csv", None),
                       ("confusion.csv", None),
                       ("judgments.parquet", "every judgment: verdict as presented, choice, label, raw text, "
                                             "generated text"),
                       *([("publisher_check.csv", None)] if publisher else [])], empty_tables(analysis)), ""]
    return "\n".join(md)


def empty_tables(analysis: RecordedAnalysis) -> dict[str, str]:
    """Why each of the card's tables is empty on this source (only those that are)."""
    src = analysis.source
    out = {}
    if not analysis.comparisons:
        out["comparisons.csv"] = "no judge has two conditions and no condition two judges: nothing to compare"
    if not analysis.contrasts:
        out["contrasts.csv"] = ("no named contrast: the source's format defines none and `recorded.contrasts` is "
                                "null (set {name: [condition a, condition b]} to ask one)" if not src.get("contrasts")
                                else "no judge has both conditions of a named contrast")
    if not analysis.judge_agreement and not analysis.annotator_agreement:
        out["agreement.csv"] = "fewer than 2 judges in every condition and fewer than 2 annotators on every pair"
    if not analysis.majority:
        out["majority.csv"] = (f"a majority of judges needs ≥ {MIN_MAJORITY_JUDGES} judges with labelled pairs in "
                               "one condition; no condition has them")
    if not analysis.biases:
        out["biases.csv"] = "no pair's outputs differ in length or lists (or the source holds no output texts)"
    if not analysis.confusion:
        out["disagreements.csv"] = out["confusion.csv"] = "no labelled judgment: the source has no labels"
    elif analysis.disagreements is not None and analysis.disagreements.empty:
        out["disagreements.csv"] = "every labelled judgment agrees with its label"
    return out


def _pct(x: Any, digits: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):.{digits}f}"


def _ci_pct(value: Any, ci: dict[str, Any] | None) -> str:
    if value is None:
        return "—"
    if not ci or ci.get("low") is None or ci.get("high") is None:
        return _pct(value)
    return f"{_pct(value)} [{_pct(ci['low'])}, {_pct(ci['high'])}]"


def leaderboard_md(rows: list[dict[str, Any]], compared: list[dict[str, Any]]) -> list[str]:
    """The leaderboard per judge (each model against its baseline) and the judges' leaderboards compared."""
    if not rows:
        return []
    ci = rows[0]["win_rate_ci"]
    md = ["## Leaderboard", "",
          "Per judge (annotator) and model, as the publishers compute it (alpaca_eval.metrics.get_winrate): win rate "
          "= 100 × mean(preference − 1), a draw half; s.e. its standard error; wins / baseline wins / draws / "
          "counted; discrete: each preference rounded to a side first; avg length of the model's outputs; LC: the "
          f"length-controlled win rate where computable. Rates in %, with {100 * ci['level']:g}% percentile "
          f"bootstrap intervals over instructions (B={ci['resamples']}, n = instructions counted). No verdict: "
          "annotations without a preference (left out of every rate, counted).", ""]
    table = []
    for r in rows:
        table.append([r["annotator"], r["model"], r["baseline"], _ci_pct(r["win_rate"], r["win_rate_ci"]),
                      _pct(r["standard_error"]), f"{r['n_wins']} / {r['n_wins_base']} / {r['n_draws']} / "
                      f"{r['n_total']}", _ci_pct(r["discrete_win_rate"], r["discrete_win_rate_ci"]), r["avg_length"],
                      _pct(r["length_controlled_winrate"]) if r["length_controlled_winrate"] is not None else "—",
                      r["n_no_verdict"], _pct(r["price_per_1000"]), _pct(r["seconds_per_1000"], 0)])
    md += _md_table(["judge", "model", "baseline", "win rate [CI]", "s.e.", "wins / base / draws / n",
                     "discrete [CI]", "avg length", "LC", "no verdict", "$ / 1000", "s / 1000"], table) + [""]
    reasons = sorted({r["lc_reason"] for r in rows if r.get("lc_reason")})
    if reasons:
        md += ["LC —: " + "; ".join(reasons) + ".", ""]
    for c in compared:
        md += judges_compared_md(c)
    return md


def judges_compared_md(c: dict[str, Any]) -> list[str]:
    """Two judges' leaderboards compared: rank agreement, the pairs they order differently, each model's Δ."""
    md = [f"### Judge against judge: {c['a']} vs {c['b']}", ""]
    if c.get("reason"):
        return md + [c["reason"] + ".", ""]
    bases = c["baselines"]
    same = bases[c["a"]] == bases[c["b"]]
    md += [f"Over the {c['n_models']} models both judged ({', '.join(c['models'])}), on the "
           f"{c['n_instructions']} instructions both judged for every one of them: Spearman's ρ "
           f"{_rank(c['spearman'])}, Kendall's τ {_rank(c['kendall'])} ({c['spearman']['method']}, "
           f"{100 * c['spearman']['level']:g}%, B={c['spearman']['resamples']}). Does switching the judge "
           "reorder the leaderboard? " + _reversal_text(c)
           + ("" if same else f" The two judges' runs compare the models with different baselines ("
              f"{c['a']}: {', '.join(bases[c['a']])}; {c['b']}: {', '.join(bases[c['b']])}): each model's Δ "
              "below mixes the judge with the baseline; the ranks compare like with like."), ""]
    md += _md_table(["model", f"win rate {c['a']} (shared instructions)", f"win rate {c['b']}", "Δ (b − a) [CI]",
                     "q (BH)", "result"],
                    [[m["model"], _pct(m.get("win_rate_a")), _pct(m.get("win_rate_b")),
                      f"{_pct(m.get('diff'))} [{_pct(m.get('low'))}, {_pct(m.get('high'))}]",
                      _num(m.get("p_adjusted")), m.get("label") or m.get("degenerate") or "—"]
                     for m in c["models_compared"]]) + [""]
    return md


def _reversal_text(c: dict[str, Any]) -> str:
    rev = c["reversals"]
    pairs = rev["pairs"]
    if not pairs:
        return f"No: every one of the {rev['n_pairs_compared']} pairs of models is in the same order."
    parts = [f"{a} − {b}: {_pct(p['diff_a'])} under {c['a']} (q {_num(p['q_a'])}), {_pct(p['diff_b'])} under "
             f"{c['b']} (q {_num(p['q_b'])}): " + ("**a supported reversal**" if p["supported"] else "not supported")
             for p in pairs for a, b in [p["models"]]]
    n_sup = sum(p["supported"] for p in pairs)
    return (f"{len(pairs)} of {rev['n_pairs_compared']} pairs of models swap order (win-rate points) — "
            + "; ".join(parts) + ". "
            + (f"{n_sup} reversal(s) supported" if n_sup else "None of the swaps is supported by both judges' data")
            + f" ({rev['rule']}).")


def leaderboard_gate_markdown(result: dict[str, Any], source: str) -> str:
    """The leaderboard gate's report: the verdict, then the comparison it rests on."""
    md = [f"# Leaderboard gate: {source}", "", f"**{result['verdict']}**", "",
          f"Old judge: `{result['old']}`; new judge: `{result['new']}`. No model was called (recorded verdicts).", ""]
    return "\n".join(md + judges_compared_md(result["comparison"])) + "\n"


def _rank(e: dict[str, Any]) -> str:
    return f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]" if e.get("value") is not None else "—"


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
          + f") at {s.alpha:g} of two-sided paired t-test p-values; MDE: the t-test's at the Bonferroni level α/m, "
          f"power {s.power:g}.", ""]
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
          f"{s.alpha:g} of two-sided paired t-test p-values; \"none detected\" states the t-test's MDE at the "
          f"Bonferroni level α/m of the family, power {s.power:g} (m and the full labels in comparisons.csv).", ""]
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
          "Per (pair, order) the judges' most frequent choice (a split vote is a tie, no vote `none`). The best single "
          "judge is picked on a seeded half of the labelled pairs (its accuracy there: \"on the picking half\") and "
          "compared with the majority on the other half (paired bootstrap): picked and compared on the same pairs, "
          "its luck in the pick would count as skill.", ""]
    md += _md_table(["condition", "judges", "majority accuracy (all pairs)", "best judge", "on the picking half",
                     "n compared", "majority, compared half", "best judge, compared half", "Δ [CI]"],
                    [[r["condition"], len(r["judges"]), fmt(r["majority_accuracy"]), r["best_judge"],
                      _num(r["best_judge_selection_accuracy"]), r["n_evaluation_pairs"],
                      _num(r["majority_evaluation_accuracy"]), _num(r["best_judge_accuracy"]),
                      f"{_num(r['diff_vs_best'])} [{_num(r['diff_low'])}, {_num(r['diff_high'])}]"]
                     for r in analysis.majority]) + [""]
    return md


BIAS_TITLES = {"prefers_longer": "Prefers the longer output", "prefers_list": "Prefers the output with a list"}


def bias_tables(biases: list[dict[str, Any]], info: dict[str, Any], interval: str) -> list[tuple[str, str, list]]:
    """Per bias: its title, what it is (AlpacaEval's definition, the pairs it covers, what was left out and why)
    and its table rows (judge, condition, rate [CI], n, left out, the labels on the same pairs, judge − labels)."""
    out = []
    for name, title in BIAS_TITLES.items():
        rows = []
        for r in biases:
            e = r.get(name) or {}
            left = "; ".join(f"{why} {k}" for why, k in (e.get("excluded") or {}).items() if k)
            same = r.get(f"{name}_same_pairs")
            rows.append([r["judge"], r["condition"], fmt(e), e.get("n", 0), left or "—",
                         fmt(same["labels"]) if same else "—", fmt(same["excess"]) if same else "—",
                         same["n_pairs"] if same else "—"])
        what = (f"{(info.get('definitions') or {}).get(name, '')}; {info.get('n_pairs_differing', {}).get(name, 0)} "
                f"of {info.get('n_pairs', 0)} pairs qualify. n = judgments (the labels' row: pairs); left out: "
                "judgments on pairs that do not qualify and tie / no-verdict judgments (the labels' row: pairs "
                "labelled a tie). Labels, same pairs: the labels' rate on exactly the pairs where the judge decided "
                "and the label is 1 or 2; judge − labels: the paired difference on those pairs (percentile paired "
                f"bootstrap over pairs). {interval}.")
        out.append((title, what, rows))
    return out


BIAS_HEADER = ["judge", "condition", "rate [CI]", "n", "left out", "labels, same pairs [CI]", "judge − labels [CI]",
               "n pairs"]


def _bias_md(analysis: RecordedAnalysis) -> list[str]:
    if not analysis.biases:
        return []
    info = analysis.bias_info
    md = ["## Surface biases (AlpacaEval's definitions)", "",
          f"AlpacaEval's evaluator-leaderboard quantities (`alpaca_eval.analyze`), thresholds as settings: lengths "
          f"differ by more than `recorded.length_delta` = {info.get('length_delta')} characters; a list is "
          f"≥ `recorded.min_list_items` = {info.get('min_list_items')} line(s) matched by `alpaca_eval.utils."
          f"contains_list`. {info.get('n_pairs_with_an_empty_output', 0)} pair(s) have an empty output: kept, as "
          "AlpacaEval keeps them (the empty one is the shorter, with no list).", ""]
    for title, what, rows in bias_tables(analysis.biases, info, analysis.settings.interval("pairs")):
        md += [f"### {title}", "", what, ""] + _md_table(BIAS_HEADER, rows) + [""]
    return md


def _flat(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per dict, nested dicts as ``a.b.c`` columns, lists joined."""
    def walk(prefix: str, v: Any, flat: dict[str, Any]) -> None:
        if isinstance(v, dict):
            for kk, vv in v.items():
                walk(f"{prefix}.{kk}" if prefix else str(kk), vv, flat)
        elif isinstance(v, list):
            flat[prefix] = ", ".join(map(str, v))
        else:
            flat[prefix] = v

    out = []
    for r in rows:
        flat: dict[str, Any] = {}
        walk("", r, flat)
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


def write_card(analysis: RecordedAnalysis, out_dir: str | Path, publisher: dict[str, Any] | None = None,
               mlflow_ui: str | None = None) -> dict[str, Path]:
    """Write card.md / card.json / card.csv and the long tables into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("card.md", "card.json", "card.csv", "comparisons.csv", "contrasts.csv",
                                           "agreement.csv", "majority.csv", "biases.csv")}
    atomic.write_text(paths["card.md"], card_markdown(analysis, publisher, mlflow_ui))
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
    paths["disagreements.csv"] = atomic.write_csv(_linked(analysis, mlflow_ui), out / "disagreements.csv", index=False)
    paths["confusion.csv"] = atomic.write_csv(pd.DataFrame(analysis.confusion, columns=CONFUSION_COLUMNS),
                                              out / "confusion.csv", index=False)
    if publisher:
        paths["publisher_check.csv"] = out / "publisher_check.csv"
        atomic.write_csv(pd.DataFrame(publisher["rows"]), paths["publisher_check.csv"], index=False)
    return paths
