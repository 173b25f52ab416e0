"""Rubric-only probe classifiers (_classify.py) and their bootstrap metrics (_metrics.py)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from rubriclab.errors import ConfigError, InputError
from rubriclab.probe import classification_metrics, paired_metric_difference, probe_transfer, run_probe

FILLER = ["the dosage", "a follow-up visit", "red-flag symptoms", "the source paper", "the main finding",
          "hydration advice", "side effects", "the study limits", "an emergency number", "the citation"]
VERBS = ["states", "explains", "notes", "covers", "lists", "discusses"]
N_BOOT = 2000


def planted_items(n_records: int = 100, per: int = 3, seed: int = 0, cue: str = "must mention",
                  dataset: str = "hb") -> pd.DataFrame:
    """Label 1 iff the rubric text contains ``cue``; filler wording varies."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n_records):
        for j in range(per):
            pos = rng.random() < 0.4
            head = f"Response {cue}" if pos else f"Response {rng.choice(VERBS)}"
            text = f"{head} {rng.choice(FILLER)} and {rng.choice(FILLER)}"
            rows.append({"item_id": f"{dataset}-{r}-{j}", "record_id": f"{dataset}-r{r}", "criterion": text,
                         "label": int(pos), "dataset": dataset})
    return pd.DataFrame(rows)


def fake_embed(texts: list[str]) -> np.ndarray:
    """Hashed bag-of-words vectors (64 dims)."""
    out = np.zeros((len(texts), 64))
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
    return out


def _est(table: pd.DataFrame, model: str, metric: str) -> pd.Series:
    return table[(table["model"] == model) & (table["metric"] == metric)].iloc[0]


# -- (1) planted signal --------------------------------------------------------------------------------


def test_planted_wording_is_recovered():
    # the default grouping merges records that share criterion text: 4 held-out clusters, too few for an interval
    few = run_probe(planted_items(), models=("majority", "nb", "lr"), n_boot=N_BOOT, seed=1)["table"]
    for model in ("nb", "lr"):
        row = _est(few, model, "balanced_accuracy")
        assert row["estimate"] > 0.8 and np.isnan(row["low"]) and row["ci_unit"] == "record-text clusters"
        assert row["reason"].startswith("no interval: 4 record-text clusters, fewer than the 30")
    # 200 records split by record: 40 held out, an interval, and it excludes chance by far
    res = run_probe(planted_items(n_records=200), models=("majority", "nb", "lr"), n_boot=N_BOOT, seed=1,
                    group_by="record")
    t = res["table"]
    for model in ("nb", "lr"):
        row = _est(t, model, "balanced_accuracy")
        assert row["low"] > 0.8, (model, row.to_dict())
        assert row["ci_unit"] == "records" and row["n_groups"] >= 30
    assert _est(t, "majority", "balanced_accuracy")["estimate"] == pytest.approx(0.5)
    leak = res["leakage"]
    assert leak["model"] in ("nb", "lr") and leak["selected_by"].startswith("cv mean balanced accuracy (folds with")
    assert leak["low"] > 0 and leak["p_value"] < 0.01
    cv = res["cv"]
    lr_cv = cv[(cv["model"] == "lr") & (cv["metric"] == "balanced_accuracy")].iloc[0]
    assert lr_cv["n_folds"] == 5 and lr_cv["mean"] > 0.8 and np.isfinite(lr_cv["sd"])
    assert set(res["fitted"]) == {"majority", "nb", "lr"}
    assert {"pred_lr", "score_lr", "item_id", "label"} <= set(res["predictions"].columns)


def test_without_cv_the_leakage_model_is_fixed_in_advance_not_chosen_on_the_held_out_set():
    """With no CV result (cv_folds=0) the held-out set's best model was taken and its difference from the majority
    measured on that same set: random labels gave +0.077 on average (a review's 60 seeds). Now the first model run
    is taken, whatever the held-out set says."""
    items = planted_items(n_records=200, seed=5)
    items["label"] = np.random.default_rng(5).integers(0, 2, len(items))
    ho = run_probe(items, models=("majority", "nb", "lr"), cv_folds=0, n_boot=200, seed=5, group_by="record")
    ba = {m: _est(ho["table"], m, "balanced_accuracy")["estimate"] for m in ("nb", "lr")}
    assert ba["nb"] != ba["lr"]
    worse = min(ba, key=ba.get)
    order = ("majority", worse, *[m for m in ("nb", "lr") if m != worse])
    res = run_probe(items, models=order, cv_folds=0, n_boot=200, seed=5, group_by="record")
    assert res["leakage"]["model"] == worse  # the held-out set's best would be the other one
    assert res["leakage"]["selected_by"].startswith(f"fixed in advance: {worse}, the first model run")


def test_a_tie_in_cv_is_said_and_the_first_model_run_is_taken():
    res = run_probe(planted_items(n_records=200), models=("majority", "nb", "lr"), n_boot=200, seed=1,
                    group_by="record")
    cv = res["cv"][res["cv"]["metric"] == "balanced_accuracy"].set_index("model")
    assert cv.loc["nb", "mean"] == cv.loc["lr", "mean"]  # the planted cue: both perfect in every fold
    assert res["leakage"]["model"] == "nb"
    assert "a tie at 1.000 between nb, lr: nb, the first run, is taken" in res["leakage"]["selected_by"]


# -- (2) no signal ----------------------------------------------------------------------------------------


def test_random_labels_cover_chance():
    """A 95% CI misses 0.5 in ~5% of null data sets: check the coverage over 10 independent ones."""
    covered = []
    for rep in range(10):
        items = planted_items(n_records=200, seed=10 + rep)  # 40 held-out records: enough for an interval
        items["label"] = np.random.default_rng(rep).integers(0, 2, len(items))
        res = run_probe(items, models=("majority", "lr"), cv_folds=2, n_boot=1000, seed=rep, group_by="record")
        row = _est(res["table"], "lr", "balanced_accuracy")
        covered.append(row["low"] <= 0.5 <= row["high"])
    assert sum(covered) >= 8, covered


# -- (3) group split --------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_split_keeps_records_and_texts_together(seed):
    items = planted_items(n_records=40, per=4)  # the filler wording recurs across records
    res = run_probe(items, models=("majority", "lr"), n_boot=200, seed=seed)
    test_records = set(res["predictions"]["record_id"])
    train = items[~items["record_id"].isin(test_records)]
    test = items[items["record_id"].isin(test_records)]
    # every item of a held-out record is held out, and no wording (casefolded) is on both sides
    assert len(res["predictions"]) == len(test)
    assert not set(train["criterion"].str.lower()) & set(test["criterion"].str.lower())
    s = res["split"]
    assert s["overlap_records"] == 0 and s["overlap_texts"] == 0 and s["n_test_items_overlapping"] == 0
    assert s["n_train_records"] + s["n_test_records"] == 40
    assert s["n_test_groups"] == int(np.ceil(0.2 * s["n_groups"]))  # 20% of the clusters
    shared = items.groupby(items["criterion"].str.lower())["record_id"].nunique()
    assert s["n_texts_in_several_records"] == int((shared > 1).sum()) > 0


# -- (4) failed labels --------------------------------------------------------------------------------------


def test_failed_labels_counted_and_excluded():
    items = planted_items(n_records=50)
    items.loc[[0, 5, 17], "label"] = np.nan
    res = run_probe(items, models=("majority", "lr"), n_boot=200)
    c = res["counts"]
    assert c["n_items"] == 150 and c["n_failed_labels_excluded"] == 3 and c["n_used"] == 147
    assert not res["predictions"]["item_id"].isin(items.loc[[0, 5, 17], "item_id"]).any()
    assert res["split"]["n_train_items"] + res["split"]["n_test_items"] == 147


def test_degenerate_inputs_raise_clear_errors():
    items = planted_items(n_records=20)
    one = items.assign(label=1)
    with pytest.raises(InputError, match="both labels"):
        run_probe(one, models=("lr",), n_boot=50)
    with pytest.raises(InputError, match="record"):
        run_probe(items.assign(record_id="r0"), models=("lr",), n_boot=50)
    with pytest.raises(InputError, match="columns"):
        run_probe(items.drop(columns="criterion"), n_boot=50)
    with pytest.raises(InputError, match="label"):
        run_probe(items.assign(label=2), n_boot=50)
    with pytest.raises(ConfigError, match="GPU"):
        run_probe(items, encoder="bert-base-uncased", n_boot=50)
    with pytest.raises(ConfigError):
        run_probe(items, balance="oversample", n_boot=50)
    # too few records for the folds: CV is NaN with a reason, the held-out part still runs
    res = run_probe(planted_items(n_records=5), models=("majority", "lr"), cv_folds=5, n_boot=50)
    assert res["cv"]["mean"].isna().all() and res["cv"]["reason"].str.contains("group folds").all()


def test_subsample_and_unweighted_options_run():
    items = planted_items(n_records=60)
    for cw, bal in ((None, "subsample"), ("balanced", "subsample"), (None, "none")):
        res = run_probe(items, models=("majority", "nb", "lr"), class_weight=cw, balance=bal, n_boot=200)
        assert _est(res["table"], "lr", "balanced_accuracy")["estimate"] > 0.8


def test_embed_skipped_without_function():
    res = run_probe(planted_items(n_records=30), n_boot=100)
    assert "embed" in res["skipped"] and "embed" not in res["fitted"]


# -- (5) metrics vs sklearn; cluster vs item bootstrap ------------------------------------------------------


def test_metrics_match_sklearn_and_ci_contains_estimate():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 500)
    score = y * 0.8 + rng.normal(size=500)
    pred = (score > 0.4).astype(int)
    groups = rng.integers(0, 120, 500)
    m = classification_metrics(y, pred, score, groups=groups, n_boot=N_BOOT)
    expected = {"accuracy": accuracy_score(y, pred), "precision": precision_score(y, pred),
                "recall": recall_score(y, pred), "f1": f1_score(y, pred),
                "balanced_accuracy": balanced_accuracy_score(y, pred), "roc_auc": roc_auc_score(y, score)}
    for name, value in expected.items():
        e = m[name]
        assert e["estimate"] == pytest.approx(value, abs=1e-12), name
        assert e["low"] <= e["estimate"] <= e["high"], name
        assert e["n"] == 500 and e["n_groups"] == len(np.unique(groups))
        assert e["ci"] == {"method": "percentile bootstrap over records", "level": 0.95, "unit": "records",
                           "resamples": N_BOOT}


def test_auc_handles_ties_like_sklearn():
    y = np.array([0, 0, 1, 1, 0, 1, 1, 0])
    score = np.array([0.1, 0.5, 0.5, 0.9, 0.5, 0.2, 0.9, 0.1])
    m = classification_metrics(y, (score > 0.4).astype(int), score, n_boot=100)
    assert m["roc_auc"]["estimate"] == pytest.approx(roc_auc_score(y, score))


def test_cluster_bootstrap_wider_on_clustered_data():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(60), 20)
    correct = np.repeat(rng.random(60) < 0.7, 20)  # whole records right or wrong
    y = rng.integers(0, 2, len(groups))
    pred = np.where(correct, y, 1 - y)
    item = classification_metrics(y, pred, n_boot=N_BOOT)["accuracy"]
    clus = classification_metrics(y, pred, groups=groups, n_boot=N_BOOT)["accuracy"]
    assert item["estimate"] == clus["estimate"]
    assert (clus["high"] - clus["low"]) > 2 * (item["high"] - item["low"])
    assert item["ci"]["unit"] == "items"


def test_degenerate_metrics_are_nan_with_reason():
    y = np.array([1, 1, 1, 1])
    m = classification_metrics(y, np.array([1, 0, 1, 1]), np.array([0.9, 0.1, 0.8, 0.7]), n_boot=100)
    assert np.isnan(m["balanced_accuracy"]["estimate"]) and "one class" in m["balanced_accuracy"]["reason"]
    assert np.isnan(m["roc_auc"]["estimate"]) and m["roc_auc"]["reason"]
    assert m["accuracy"]["estimate"] == 0.75
    m = classification_metrics([0, 1, 0, 1], [0, 0, 0, 0], n_boot=100)
    assert np.isnan(m["precision"]["estimate"]) and "predicted positives" in m["precision"]["reason"]
    assert np.isnan(m["roc_auc"]["estimate"]) and "y_score" in m["roc_auc"]["reason"]
    # resamples that drop a class are counted, interval from the finite ones
    m = classification_metrics([0] * 2 + [1] * 34, [0, 1] + [1, 0] * 17, n_boot=500)  # 36 items, 2 negatives
    assert m["balanced_accuracy"]["n_invalid_resamples"] > 0
    assert np.isfinite(m["balanced_accuracy"]["low"]) and "resamples undefined" in m["balanced_accuracy"]["reason"]
    few = classification_metrics([0, 1, 1, 1, 1, 1], [0, 1, 1, 0, 1, 1], n_boot=500)["balanced_accuracy"]
    assert np.isnan(few["low"]) and few["reason"].startswith("no interval: 6 items")
    assert few["n_invalid_resamples"] > 0 and "resamples undefined" in few["reason"]
    with pytest.raises(InputError, match="y_true"):
        classification_metrics([0, np.nan, 1], [0, 1, 1])
    assert classification_metrics([], [], n_boot=10)["accuracy"]["reason"] == "no items"


# -- (6) paired difference ----------------------------------------------------------------------------------


def test_paired_metric_difference():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 600)
    groups = rng.integers(0, 150, 600)
    good = np.where(rng.random(600) < 0.85, y, 1 - y)
    majority = np.ones(600, dtype=int)
    d = paired_metric_difference(y, good, majority, groups=groups, n_boot=N_BOOT)
    assert d["estimate"] == pytest.approx(balanced_accuracy_score(y, good) - 0.5)
    assert d["low"] > 0.2 and d["p_value"] < 0.001 and d["n"] == 600 and d["ci"]["unit"] == "records"
    same = paired_metric_difference(y, good, good, groups=groups, n_boot=200)
    assert same["estimate"] == 0 and same["low"] == same["high"] == 0 and same["p_value"] == 1.0
    noisy = np.where(rng.random(600) < 0.85, y, 1 - y)
    d2 = paired_metric_difference(y, good, noisy, metric="accuracy", groups=groups, n_boot=N_BOOT)
    assert d2["low"] <= 0 <= d2["high"] or abs(d2["estimate"]) > 0.03
    with pytest.raises(InputError):
        paired_metric_difference(y, good, majority, metric="roc_auc")


# -- (7) transfer --------------------------------------------------------------------------------------------


def test_transfer_between_datasets():
    a = planted_items(n_records=80, seed=0, dataset="eval")
    b = planted_items(n_records=40, seed=5, dataset="hard")
    b.loc[b.index[:2], "label"] = np.nan
    t = probe_transfer(a, b, models=("majority", "lr", "embed"), embed=None, seed=0, class_weight="balanced",
                       balance="none", n_boot=500, confidence=0.95)
    lr = _est(t, "lr", "balanced_accuracy")
    assert lr["train"] == "eval" and lr["test"] == "hard" and lr["low"] > 0.8
    # test items whose wording is also in training are left out and counted (none shares a record here)
    labelled = b[b["label"].notna()]
    fresh = ~labelled["criterion"].str.lower().isin(set(a["criterion"].str.lower()))
    assert lr["n"] == lr["n_test"] == int(fresh.sum()) and lr["n_test_dropped_overlap"] == int((~fresh).sum()) > 0
    assert lr["n_test_dropped_record"] == 0 and lr["n_failed_labels_excluded"] == 2
    assert lr["ci_unit"] == "record-text clusters"
    assert t[t["model"] == "embed"]["reason"].str.contains("embed").all()
    # a different cue in the test set: the wording does not transfer
    c = planted_items(n_records=40, seed=6, cue="should cover", dataset="rr")
    t2 = probe_transfer(a, c, models=("lr",), n_boot=500)
    assert _est(t2, "lr", "balanced_accuracy")["estimate"] < 0.75


# -- (8) embedding classifier ----------------------------------------------------------------------------------


def test_embed_model_with_fake_embedder():
    calls: list[int] = []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return fake_embed(texts)

    items = planted_items(n_records=200)
    res = run_probe(items, models=("majority", "embed"), embed=embed, n_boot=N_BOOT, group_by="record")
    row = _est(res["table"], "embed", "balanced_accuracy")
    assert row["low"] > 0.8
    assert "embed" in res["fitted"] and res["leakage"]["model"] == "embed"
    # each distinct text is sent to the embedder once per run (CV folds and final fit share a cache)
    assert sum(calls) == items["criterion"].nunique()
