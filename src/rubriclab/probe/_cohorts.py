"""The probe stage's analyses, cohort by cohort (one response source each, never pooled): the probe on held-out
clusters, cross-dataset transfer, the counterfactual flip tests and the semantic analyses; each writes its tables
under the output folder and returns its summary.md section."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.errors import ConfigError
from rubriclab.probe._classify import probe_transfer, run_probe
from rubriclab.probe._counterfactual import output_perturbation, rubric_perturbation
from rubriclab.probe._semantics import semantic_report, write_semantic_report
from rubriclab.probe._summary import file_part, probe_markdown, rates_markdown
from rubriclab.reporting import to_markdown
from rubriclab.settings import Counterfactual


def split_cohorts(name: str, items: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], str | None]:
    """One probe cohort per response source (seed 004: each cohort is one model's responses); a dataset with
    one source keeps its name. Items without a source (no response, so no label) are left out and counted."""
    src = items["response_source"] if "response_source" in items.columns else pd.Series(None, index=items.index)
    kinds = sorted(src.dropna().astype(str).unique())
    if len(kinds) <= 1:
        return {name: items}, None
    parts = {f"{name}[{k}]": items[src.astype(str).eq(k) & src.notna()] for k in kinds}
    n_none = int(src.isna().sum())
    note = (f"Responses come from {len(kinds)} sources ({', '.join(kinds)}): one probe cohort per source, never "
            f"pooled" + (f"; {n_none} items without a response left out." if n_none else "."))
    return parts, note


def probe_cohort(cohort: str, items: pd.DataFrame, probe_kw: dict[str, Any], out: Path,
                 flat: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """Probe one cohort (``run_probe`` with ``probe_kw``); write its tables under ``out``; add its metrics to
    ``flat``; return the result (None when it could not run) and its markdown."""
    safe = file_part(cohort)
    try:
        res = run_probe(items, **probe_kw)
    except Exception as exc:  # noqa: BLE001 - a cohort too small to split is reported, not fatal
        flat[f"{safe}.probe_error"] = 1
        return None, [f"Probe not run: {exc}", ""]
    atomic.write_csv(res["table"], out / f"{safe}.probe.csv", index=False)
    atomic.write_csv(res["cv"], out / f"{safe}.cv.csv", index=False)
    atomic.write_csv(res["predictions"], out / f"{safe}.predictions.csv", index=False)
    sp = res["split"]
    md = [f"Split: {sp['method']} — {sp['n_groups']} clusters; {sp['n_texts_in_several_records']} of "
          f"{sp['n_texts']} criterion texts recur in several records ({sp['n_items_with_shared_text']} items); "
          f"records on both sides: {sp['overlap_records']}, texts on both sides: {sp['overlap_texts']}; held out: "
          f"{sp['n_test_items']} of {sp['n_train_items'] + sp['n_test_items']} items ({sp['test_item_share']:.0%}; "
          f"asked {sp['test_size']:.0%} ± {sp['split_tolerance']:.0%}, seeded split {sp['splits_tried']} of "
          "those tried).", "",
          "Probe on held-out clusters:", "", probe_markdown(res["table"]), ""]
    lk = res.get("leakage") or {}
    md += leakage_lines(lk, sp["unit"])
    if lk and math.isfinite(lk.get("estimate", math.nan)):
        flat[f"{safe}.leakage"] = lk["estimate"]
        flat[f"{safe}.leakage.n"] = lk.get("n")
        flat[f"{safe}.leakage.n_clusters"] = lk.get("n_groups")
    for r in res["table"].to_dict("records"):
        if r["metric"] in ("balanced_accuracy", "roc_auc") and isinstance(r["estimate"], float) \
                and math.isfinite(r["estimate"]):
            flat[f"{safe}.{r['model']}.{r['metric']}"] = r["estimate"]
    return res, md


def leakage_lines(lk: dict[str, Any], unit: str) -> list[str]:
    """The leakage line, always: with its interval, or with why there is none, or why there is no estimate."""
    if not lk:
        return ["Rubric prior leakage: not estimated (no result).", ""]
    where = f"n={lk.get('n')} items in {lk.get('n_groups')} clusters"
    if not math.isfinite(lk.get("estimate", math.nan)):
        return [f"Rubric prior leakage: not estimated: {lk.get('reason') or 'undefined'} ({where}).", ""]
    low, high = lk.get("low", math.nan), lk.get("high", math.nan)
    ci = (f"[{low:.2f}, {high:.2f}] (paired bootstrap over {unit}" if math.isfinite(low) and math.isfinite(high)
          else f"({lk.get('reason') or 'no interval'}")
    return [f"Rubric prior leakage: {lk.get('model')} balanced accuracy − majority baseline = {lk['estimate']:+.3f} "
            f"{ci}; {where}; model chosen by {lk.get('selected_by')}).", ""]


def transfer_section(results: dict[str, Any], cohorts: dict[str, tuple[str, pd.DataFrame]],
                     probe_kw: dict[str, Any], out: Path) -> list[str]:
    """Train on one cohort, test on a cohort of another dataset; test items seen in training are dropped."""
    names = [n for n in results if not cohorts[n][0].startswith("rubric_set:")]
    kw = {k: v for k, v in probe_kw.items() if k not in ("test_size", "split_tolerance", "cv_folds")}
    rows, md = [], []
    for a in names:
        for b in names:
            if cohorts[a][0] == cohorts[b][0]:
                continue
            try:
                rows.append(probe_transfer(cohorts[a][1], cohorts[b][1], **kw).assign(train=a, test=b))
            except Exception as exc:  # noqa: BLE001 - e.g. every test item also in training: said, not fatal
                md += [f"Train {a} → test {b}: not run: {exc}", ""]
    if not rows and not md:
        return []
    md = ["## Cross-dataset transfer (train on one, test on the other)", "", *md]
    if rows:
        transfer = pd.concat(rows, ignore_index=True)
        atomic.write_csv(transfer, out / "transfer.csv", index=False)
        for (a, b), g in transfer.groupby(["train", "test"], sort=False):
            first = g.iloc[0]
            md += [f"Train {a} → test {b} ({int(first['n_test_dropped_overlap'])} test items left out: their "
                   f"record or criterion text is also in training; {int(first['n_test'])} tested):", "",
                   probe_markdown(g), ""]
    return md


def counterfactual_sections(labelled: dict[str, pd.DataFrame], cf: Counterfactual, seed: int, out: Path,
                            flat: dict[str, Any], **roles: Any) -> list[str]:
    """The output and rubric counterfactual flip tests on ``probe.counterfactual.datasets`` (default: the first):
    their tables under ``out``, their desired flip rates into ``flat``; returns their summary.md sections."""
    md: list[str] = []
    n_cf = cf.n_items
    for name in list(cf.datasets or list(labelled)[:1]):
        if name not in labelled:
            raise ConfigError(f"params.yaml: probe.counterfactual.datasets: unknown dataset {name!r}; "
                              f"known: {', '.join(labelled)}")
        safe = file_part(name)
        common = {"gateway": roles["gateway"], "judge": roles["judge"], "n_items": n_cf, "seed": seed,
                  "templates_dir": roles["templates_dir"]}
        outp = output_perturbation(labelled[name], generator=roles["generator"], **common)
        rubp = rubric_perturbation(labelled[name], rewriter=roles["rewriter"], **common)
        for kind, res in (("output", outp), ("rubric", rubp)):
            # rows/cols: labels 1, 0
            atomic.write_csv(res["table"], out / f"{safe}.{kind}_perturbation.transitions.csv")
            atomic.write_csv(pd.DataFrame(res["rows"]), out / f"{safe}.{kind}_perturbation.items.csv", index=False)
            t = res["table"]
            md += [f"## Counterfactual: {kind} perturbation ({name})", "",
                   f"Transitions (rows: {t.index.name}, columns: {t.columns.name}; 1 = criterion met):", "",
                   to_markdown(t.rename_axis(index=f"{t.index.name} ↓ / {t.columns.name} →").reset_index()), ""]
            md += rates_markdown(res) + [""]
            m = (res.get("rates") or {}).get("desired_flip_rate")
            if isinstance(m, dict) and math.isfinite(float(m.get("estimate", math.nan))):
                flat[f"{safe}.{kind}_perturbation.desired_flip_rate"] = m["estimate"]
    return md


def semantic_sections(results: dict[str, Any], cohorts: dict[str, tuple[str, pd.DataFrame]], embed: Any,
                      seed: int, out: Path, projection: str = "auto") -> tuple[list[str], list[tuple[Path, str]]]:
    """Semantic analyses per cohort (never pooled across datasets), under ``semantics/<cohort>/``; the LR
    weights are the cohort's own probe, fitted on its training clusters, and its title counts those items.
    Returns the markdown and the files written, each with its artifact folder (``semantics/<cohort>``)."""
    md: list[str] = []
    written: list[tuple[Path, str]] = []
    for cohort, (dataset, items) in cohorts.items():
        if dataset.startswith("rubric_set:"):
            continue
        safe = file_part(cohort)
        res = results.get(cohort) or {}
        held_out = set(res["predictions"]["item_id"]) if res else set()
        train = items[~items["item_id"].isin(held_out)] if res else None
        vectors = embed(items["criterion"].tolist()) if len(items) else None  # one row per item
        report = semantic_report(items, fitted_lr=res.get("fitted", {}).get("lr"), vectors=vectors, seed=seed,
                                 lr_items=train, name=cohort, projection_method=projection)
        md += [f"## Semantic analyses: {cohort}", ""]
        for key, part in report.items():
            md += [f"- `{key}`: `semantics/{safe}/{key}.csv`, `semantics/{safe}/{key}.png`"
                   + (f" — {'; '.join(part['notes'])}" if part.get("notes") else "")]
        written += [(path, f"semantics/{safe}") for path in write_semantic_report(report, out / "semantics" / safe)]
        md += [""]
    return md, written
