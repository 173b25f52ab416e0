"""Rubric prior leakage on the audit card: a rubric-only probe over the adversarial baseline pool's verdicts.
Planted (one criterion always met, the other never) it is far above the majority baseline; verdicts that do not
depend on the criterion give an interval covering 0; an undefined value says why."""

from __future__ import annotations

import random

import pandas as pd

from rubriclab.probe import baseline_rubric_items, rubric_prior_leakage
from rubriclab.rubrics import Criterion, RubricSet

RS = RubricSet(name="two", criteria=(
    Criterion(id="cites_sources", description="The response cites a verifiable source for each factual claim."),
    Criterion(id="warm_tone", description="The response greets the user warmly and thanks them for asking."),
    Criterion(id="numbered_steps", description="The response gives numbered steps the user can follow."),
    Criterion(id="names_risks", description="The response names the main risk of the advice and how to avoid it."),
))


def _baseline(n_pairs: int, label, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n_pairs):
        for c in RS.criteria:
            rows.append({"criterion": c.id, "pair_id": f"p{i}", "item_id": f"p{i}", "response": f"resp {i}",
                         "score": 0.0, "high": bool(label(c.id, rng)), "status": "ok"})
    return rows


def test_planted_criterion_verdicts_leak_and_random_ones_do_not():
    planted = _baseline(200, lambda cid, rng: cid in ("cites_sources", "numbered_steps"))  # >= 30 held-out pairs
    lk = rubric_prior_leakage(planted, RS, n_boot=500, seed=1)
    assert lk["value"] > 0.3 and lk["low"] > 0 and lk["n"] > 0
    assert lk["ci"]["unit"] == "pairs" and lk["ci"]["resamples"] == 500
    noise = _baseline(200, lambda cid, rng: rng.random() < 0.5, seed=3)
    lk = rubric_prior_leakage(noise, RS, n_boot=500, seed=1)
    assert lk["low"] <= 0 <= lk["high"]
    few = rubric_prior_leakage(_baseline(60, lambda cid, rng: cid in ("cites_sources", "numbered_steps")), RS,
                               n_boot=500, seed=1)
    assert few["value"] > 0.3 and few["low"] is None and few["high"] is None  # no interval over 12 held-out pairs
    assert few["reason"].startswith("no interval: 12 pool pairs, fewer than the 30 ") \
        and few["reason"].endswith("(raise audit.pool_size)")  # the probe's unit named as the audit's pool pairs


def test_failed_scores_are_counted_and_a_single_class_is_undefined_with_a_reason():
    rows = _baseline(10, lambda cid, rng: True)
    rows[0]["status"] = "parse_failure"
    items = baseline_rubric_items(rows, RS)
    assert items["label"].isna().sum() == 1
    assert items.loc[0, "criterion"].startswith("Cites sources") or "verifiable source" in items.loc[0, "criterion"]
    lk = rubric_prior_leakage(rows, RS, n_boot=100)
    assert lk["value"] is None and "nothing to predict" in lk["reason"] and lk["n_failed"] == 1
    assert isinstance(pd.DataFrame(rows), pd.DataFrame)


def test_the_audit_card_shows_leakage_with_its_interval_or_why_it_has_none():
    from rubriclab.audit import cross_source_table, interval, metric

    ci = interval("paired percentile bootstrap (probe − majority)", 0.95, "pairs", 1000)
    card = {"a": {"K": 4, "leakage": metric(0.4, 0.1, 0.7, 12, ci=ci)},
            "b": {"K": 4, "leakage": metric(-0.25, n=5, reason="the held-out set is one pool pair: no interval")},
            "c": {"K": 4, "leakage": metric(None, reason="every verdict is 1: nothing to predict")}}
    table = cross_source_table(card).set_index("source")
    assert table.loc["a", "Prior leak"] == "0.400 [0.100, 0.700] n=12" and "Prior leak" not in table.loc["a", "notes"]
    assert table.loc["b", "Prior leak"] == "-0.250 n=5" and "one pool pair" in table.loc["b", "notes"]
    assert table.loc["c", "Prior leak"] == "—" and "nothing to predict" in table.loc["c", "notes"]
