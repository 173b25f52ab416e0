"""Counterfactual consistency of a rubric-item judge (seed 004 §5, App. E).

Output perturbation (App. E.1): the conversation and rubric item are fixed; a generator writes one
response that satisfies the item and one that violates it; the judge labels both. Per item the
transition (label_satisfying, label_violating) is

* (1, 0) a desired flip,
* (1, 1) sticky-satisfied and (0, 0) sticky-violated (the verdict did not follow the response),
* (0, 1) a wrong-direction flip.

Rubric perturbation (App. E.2): the conversation and response are fixed; a rewriter reverses the rubric
item; the judge labels the same response under the original and the reversed item. A desired flip is any
change of label (1→0 or 0→1, both directions aggregated as in the paper); sticky = unchanged. A
wrong-direction flip has no meaning here (the reversal has no "intended" label, only an intended change),
so it is reported as None, not as 0.

Rates are over valid pairs (both generations and both judgments succeeded); failures are counted and
excluded, never scored; so are output pairs whose two responses are the same text (counted as
``identical``). Inconsistency = 1 − desired flip rate. As in the paper, each sampled conversation contributes
one rubric item (drawn seeded), and each rate carries a percentile bootstrap CI over records
(``rubriclab.stats.item_bootstrap`` with ``"mean"``, clustered by ``record_id``).

Nothing here is format-specific: items are rows with ``item_id``, ``prompt``, ``criterion`` (and, for the
rubric perturbation, ``response``), so the criteria of a pairwise audit rubric set laid out as items over
preference pairs' responses work the same way as HealthBench-style rubric items. The label is always
"criterion met" (see ``judge_items``), so for a negative-points item "satisfy" means "do what the item
describes", too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import ArgumentError, ParseFailure
from rubriclab.llm import CallRequest, Gateway, RoleSpec, distinct_draws, load_prompt, register_prompt
from rubriclab.probe._label import is_missing_text, judge_items, parse_free_text
from rubriclab.probe._metrics import too_few_units
from rubriclab.stats import item_bootstrap

register_prompt("probe_satisfy", {"prompt", "criterion"})
register_prompt("probe_violate", {"prompt", "criterion"})
register_prompt("probe_reverse", {"criterion"})

_KEEP = ["item_id", "dataset", "record_id", "prompt", "criterion", "points", "tags"]
_QUOTES = "\"'“”‘’`"


def _sample(items: pd.DataFrame, n_items: int | None, seed: int) -> pd.DataFrame:
    """One rubric item per conversation (record), drawn seeded — seed 004 §5 samples conversations and "selects
    one rubric per conversation" — then a seeded sample of ``n_items`` of those conversations (all, in order,
    when None or not fewer than there are)."""
    if n_items is not None and n_items < 0:
        raise ArgumentError(f"n_items must be >= 0 or None, got {n_items}")
    if "record_id" in items.columns and len(items):
        items = items.groupby("record_id", sort=False, group_keys=False).sample(n=1, random_state=seed).sort_index()
    if n_items is None or n_items >= len(items):
        return items.reset_index(drop=True)
    return items.sample(n=n_items, random_state=seed).reset_index(drop=True)


def _objects(values: list[Any]) -> pd.Series:
    """A column that keeps None as None (pandas ≥ 3 would infer ``str`` and turn None into NaN). The rows
    frames here have a 0..n-1 index, which this Series shares."""
    return pd.Series(values, index=pd.RangeIndex(len(values)), dtype=object)


def _item_ids(df: pd.DataFrame) -> np.ndarray:
    if "item_id" in df.columns:
        return df["item_id"].astype(str).to_numpy()
    return np.arange(len(df)).astype(str)


def _unit_ids(df: pd.DataFrame) -> np.ndarray:
    """Resampling units of the rates: records (conversations), so items of one record are resampled together."""
    if "record_id" in df.columns:
        return df["record_id"].astype(str).to_numpy()
    return _item_ids(df)


def _rate(indicator: np.ndarray, ids: np.ndarray, *, seed: int, n_resamples: int, confidence: float) -> dict[str, Any]:
    out = item_bootstrap(np.asarray(indicator, dtype=float), "mean", ids, n_resamples=n_resamples,
                         confidence=confidence, seed=seed)
    n_records = int(len(np.unique(ids)))
    few = too_few_units(n_records, "records", confidence)
    if few:  # the estimate stays; an interval over so few records would not hold its level
        out = {**out, "low": np.nan, "high": np.nan, "reason": few}
    return {**out, "n_records": n_records,
            "ci": {"method": "percentile bootstrap over records", "level": confidence, "unit": "records",
                   "resamples": n_resamples}}


def _table(a: pd.Series, b: pd.Series, row_name: str, col_name: str) -> pd.DataFrame:
    """2×2 counts, rows = ``row_name`` label (1, 0), columns = ``col_name`` label (1, 0)."""
    table = pd.DataFrame(0, index=pd.Index([1, 0], name=row_name), columns=pd.Index([1, 0], name=col_name))
    for x, y in zip(a.astype(int), b.astype(int), strict=True):
        table.loc[x, y] += 1
    return table


def _base_rows(sample: pd.DataFrame) -> pd.DataFrame:
    rows = sample[[c for c in _KEEP if c in sample.columns]].copy()
    if "item_id" not in rows.columns:
        rows.insert(0, "item_id", _item_ids(sample))
    return rows


def output_perturbation(items: pd.DataFrame, *, gateway, generator: RoleSpec, judge: RoleSpec,
                        n_items: int | None = None, seed: int = 0, templates_dir: str | Path | None = None,
                        n_resamples: int = 2000, confidence: float = 0.95) -> dict[str, Any]:
    """Output perturbation over ``n_items`` conversations (all when None), one seeded rubric item each.

    The generator writes a satisfying and a violating response per item (prompts ``probe_satisfy`` and
    ``probe_violate``, placeholders ``{prompt}``, ``{criterion}``; one batch); the judge labels both with
    ``judge_items`` (one batch). Returns a dict:

    * ``rows``: one row per sampled item — its columns, ``response_satisfying``, ``response_violating``,
      ``label_satisfying``, ``label_violating``, ``status`` (``"ok"``, ``"generation_failed"``,
      ``"identical_responses"`` — both texts the same, not judged —, ``"judge_failed"``, ``"skipped"``), ``transition`` (``desired_flip``, ``sticky_satisfied``,
      ``sticky_violated``, ``wrong_direction``, or None) and ``error``;
    * ``table``: 2×2 counts over valid pairs (index ``label_satisfying`` 1/0, columns ``label_violating`` 1/0);
    * ``counts``: the four transitions by name;
    * ``rates``: ``desired_flip_rate``, ``stickiness_rate``, ``wrong_direction_rate``, ``inconsistency``,
      each an ``item_bootstrap`` dict (``estimate``, ``low``, ``high``, …) resampling records, with
      ``n_records`` and ``ci`` (method, level, unit, resamples);
    * ``n`` (valid pairs), ``n_sampled``, ``failures`` (``generation``, ``identical``, ``judge``, ``skipped``),
      ``notes``.
    """
    sample = _sample(items, n_items, seed)
    rows = _base_rows(sample)
    n = len(sample)
    status = ["ok"] * n
    error: list[str | None] = [None] * n
    resp = {"satisfying": [None] * n, "violating": [None] * n}
    tpls = {"satisfying": load_prompt("probe_satisfy", templates_dir),
            "violating": load_prompt("probe_violate", templates_dir)}
    reqs = []
    for pos, row in sample.iterrows():
        if is_missing_text(row.get("criterion")) or is_missing_text(row.get("prompt")):
            status[pos], error[pos] = "skipped", "no prompt or criterion"
            continue
        for kind, tpl in tpls.items():
            msgs = tpl.render(prompt=str(row["prompt"]), criterion=str(row["criterion"]))
            reqs.append(CallRequest(role=generator, messages=msgs, parser=parse_free_text, tag=(pos, kind)))
    results = gateway.run(distinct_draws(reqs), desc="probe:perturb-output") if reqs else []
    for res in results:
        pos, kind = res.tag
        if res.ok:
            resp[kind][pos] = res.value
        elif status[pos] == "ok":
            status[pos], error[pos] = "generation_failed", f"{kind}: {res.parse_error or res.error}"
    rows["response_satisfying"] = _objects(resp["satisfying"])
    rows["response_violating"] = _objects(resp["violating"])
    _reject_identical(resp, status, error)

    valid = [pos for pos in range(n) if status[pos] == "ok"]
    to_judge = pd.concat(
        [sample.loc[valid].assign(response=[resp[kind][p] for p in valid], cf_pos=valid, cf_kind=kind)
         for kind in ("satisfying", "violating")], ignore_index=True) if valid else pd.DataFrame()
    labels = _judge_variants(to_judge, ("satisfying", "violating"), n, status, error, gateway=gateway, judge=judge,
                             templates_dir=templates_dir)
    rows["label_satisfying"] = labels["satisfying"]
    rows["label_violating"] = labels["violating"]
    rows["status"] = status
    names = {(1, 0): "desired_flip", (1, 1): "sticky_satisfied", (0, 0): "sticky_violated", (0, 1): "wrong_direction"}
    rows["transition"] = _objects([names[(int(s), int(v))] if st == "ok" else None
                                   for s, v, st in zip(labels["satisfying"], labels["violating"], status, strict=True)])
    rows["error"] = _objects(error)

    ok = rows[rows["status"] == "ok"]
    ids = _unit_ids(ok)
    tr = ok["transition"].to_numpy()
    kw = {"seed": seed, "n_resamples": n_resamples, "confidence": confidence}
    rates = {
        "desired_flip_rate": _rate(tr == "desired_flip", ids, **kw),
        "stickiness_rate": _rate(np.isin(tr, ["sticky_satisfied", "sticky_violated"]), ids, **kw),
        "wrong_direction_rate": _rate(tr == "wrong_direction", ids, **kw),
        "inconsistency": _rate(tr != "desired_flip", ids, **kw),
    }
    notes = []
    if len(ok) == 0:
        notes.append("no valid pairs: every sampled item failed generation or judgment (rates are NaN)")
    return {
        "rows": rows,
        "table": _table(ok["label_satisfying"], ok["label_violating"], "label_satisfying", "label_violating"),
        "counts": {name: int((tr == name).sum()) for name in names.values()},
        "rates": rates,
        "n": len(ok),
        "n_sampled": n,
        "failures": {"generation": status.count("generation_failed"), "identical": status.count("identical_responses"),
                     "judge": status.count("judge_failed"), "skipped": status.count("skipped")},
        "notes": notes,
    }


def _reject_identical(resp: dict[str, list], status: list, error: list) -> None:
    """A satisfying and a violating response with the same text (ignoring case, whitespace, quotes and a final
    period) cannot test whether the judge follows the response: mark the item, do not judge it (in place)."""
    for pos, (sat, vio) in enumerate(zip(resp["satisfying"], resp["violating"], strict=True)):
        if status[pos] == "ok" and _norm(str(sat)) == _norm(str(vio)):
            status[pos], error[pos] = "identical_responses", "the satisfying and violating responses are identical"


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(_QUOTES + " .")


def reversal_parser(original: str):
    """Parser of a rewriter's reply: one non-empty line/paragraph (surrounding quotes stripped) that differs
    from ``original`` (ignoring case, whitespace, quotes and a final period); else a ParseFailure."""
    def parse(text: str) -> str:
        body = (text or "").strip()
        if not body:
            raise ParseFailure("empty reply; expected the reversed rubric item")
        if re.search(r"\n\s*\n", body):
            raise ParseFailure("several paragraphs; expected the reversed rubric item only, as a single line")
        body = " ".join(body.split()).strip(_QUOTES).strip()
        if not body:
            raise ParseFailure("empty reply; expected the reversed rubric item")
        if _norm(body) == _norm(original):
            raise ParseFailure("the reply repeats the original rubric item; expected its reversal")
        return body

    return parse


def rubric_perturbation(items: pd.DataFrame, *, gateway, rewriter: RoleSpec, judge: RoleSpec,
                        n_items: int | None = None, seed: int = 0, templates_dir: str | Path | None = None,
                        n_resamples: int = 2000, confidence: float = 0.95) -> dict[str, Any]:
    """Rubric perturbation over ``n_items`` conversations with a response (all when None), one seeded rubric
    item each.

    The rewriter reverses each sampled criterion (prompt ``probe_reverse``, placeholder ``{criterion}``;
    the reply must be one non-empty line/paragraph that differs from the original, else — after the role's
    parse re-asks — a counted failure); the judge labels the item's own response under the original and the
    reversed criterion (``judge_items``, one batch). Items without a response are not sampled (counted in
    ``failures["no_response"]``). Returns a dict like ``output_perturbation``'s:

    * ``rows``: item columns, ``response``, ``criterion_reversed``, ``label_original``, ``label_reversed``,
      ``status`` (``"ok"``, ``"rewrite_failed"``, ``"judge_failed"``), ``transition`` (``flip_1_to_0``,
      ``flip_0_to_1``, ``sticky_satisfied``, ``sticky_violated`` or None), ``error``;
    * ``table``: 2×2 counts (index ``label_original`` 1/0, columns ``label_reversed`` 1/0);
    * ``counts``; ``rates`` — ``desired_flip_rate`` (both flip directions), ``stickiness_rate``,
      ``inconsistency`` (bootstrap dicts) and ``wrong_direction_rate = None`` (undefined for a reversal; see
      ``notes``); ``n``, ``n_sampled``, ``failures`` (``rewrite``, ``judge``, ``no_response``), ``notes``.
    """
    has_response = ~items["response"].map(is_missing_text) if "response" in items.columns else \
        pd.Series(False, index=items.index)
    has_criterion = ~items["criterion"].map(is_missing_text)
    usable = items[has_response & has_criterion]
    sample = _sample(usable, n_items, seed)
    rows = _base_rows(sample)
    rows["response"] = sample["response"].to_numpy() if len(sample) else []
    n = len(sample)
    status = ["ok"] * n
    error: list[str | None] = [None] * n
    reversed_: list[str | None] = [None] * n
    tpl = load_prompt("probe_reverse", templates_dir)
    reqs = [CallRequest(role=rewriter, messages=tpl.render(criterion=str(row["criterion"])),
                        parser=reversal_parser(str(row["criterion"])), tag=pos)
            for pos, row in sample.iterrows()]
    results = gateway.run(distinct_draws(reqs), desc="probe:reverse") if reqs else []
    for res in results:
        if res.ok:
            reversed_[res.tag] = res.value
        else:
            status[res.tag], error[res.tag] = "rewrite_failed", str(res.parse_error or res.error)
    rows["criterion_reversed"] = _objects(reversed_)

    valid = [pos for pos in range(n) if status[pos] == "ok"]
    base = sample.loc[valid]
    to_judge = pd.concat([base.assign(cf_pos=valid, cf_kind="original"),
                          base.assign(criterion=[reversed_[p] for p in valid], cf_pos=valid, cf_kind="reversed")],
                         ignore_index=True) if valid else pd.DataFrame()
    labels = _judge_variants(to_judge, ("original", "reversed"), n, status, error, gateway=gateway, judge=judge,
                             templates_dir=templates_dir)
    rows["label_original"] = labels["original"]
    rows["label_reversed"] = labels["reversed"]
    rows["status"] = status
    names = {(1, 0): "flip_1_to_0", (0, 1): "flip_0_to_1", (1, 1): "sticky_satisfied", (0, 0): "sticky_violated"}
    rows["transition"] = _objects([names[(int(a), int(b))] if st == "ok" else None
                                   for a, b, st in zip(labels["original"], labels["reversed"], status, strict=True)])
    rows["error"] = _objects(error)

    ok = rows[rows["status"] == "ok"]
    ids = _unit_ids(ok)
    tr = ok["transition"].to_numpy()
    flip = np.isin(tr, ["flip_1_to_0", "flip_0_to_1"])
    kw = {"seed": seed, "n_resamples": n_resamples, "confidence": confidence}
    rates = {
        "desired_flip_rate": _rate(flip, ids, **kw),
        "stickiness_rate": _rate(~flip, ids, **kw),
        "wrong_direction_rate": None,
        "inconsistency": _rate(~flip, ids, **kw),
    }
    notes = ["wrong_direction_rate is None: a reversed criterion has no intended label for the response, only "
             "an intended change, so any change of label is the desired flip and no change is sticky; there is "
             "no wrong direction (reporting 0 would claim a measurement that was not made)."]
    if len(ok) == 0:
        notes.append("no valid pairs: every sampled item failed rewriting or judgment (rates are NaN)")
    return {
        "rows": rows,
        "table": _table(ok["label_original"], ok["label_reversed"], "label_original", "label_reversed"),
        "counts": {name: int((tr == name).sum()) for name in names.values()},
        "rates": rates,
        "n": len(ok),
        "n_sampled": n,
        "failures": {"rewrite": status.count("rewrite_failed"), "judge": status.count("judge_failed"),
                     "no_response": int(len(items) - int(has_response.sum()))},
        "notes": notes,
    }


def _judge_variants(to_judge: pd.DataFrame, kinds: tuple[str, str], n: int, status: list, error: list, *,
                    gateway: Gateway, judge: RoleSpec, templates_dir: str | None) -> dict[str, list]:
    """Labels of both variants of each sampled item (rows carry ``cf_kind``/``cf_pos``), one judge batch; a
    failed label marks its item ``judge_failed`` in ``status``/``error`` (in place)."""
    labels = {k: [np.nan] * n for k in kinds}
    if to_judge.empty:
        return labels
    judged = judge_items(to_judge, gateway=gateway, judge=judge, templates_dir=templates_dir)
    for r in judged.itertuples(index=False):
        labels[r.cf_kind][r.cf_pos] = r.label
        if r.label_status != "ok" and status[r.cf_pos] == "ok":
            status[r.cf_pos], error[r.cf_pos] = "judge_failed", f"{r.cf_kind}: {r.label_error}"
    return labels
