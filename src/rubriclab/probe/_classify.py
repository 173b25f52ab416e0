"""Rubric-only probe classifiers: predict the judge's label (1 = rubric item satisfied) from the rubric text.

Models (``PROBE_MODELS``):

* ``majority`` — ``DummyClassifier(strategy="most_frequent")`` fitted on the *full* training rows without
  weights or subsampling (the trivial baseline; balanced accuracy 0.5 by construction);
* ``nb`` — TF-IDF (word 1–2-grams, sublinear tf) + ``MultinomialNB``; class weighting via ``sample_weight``;
* ``lr`` — the same TF-IDF + L2 ``LogisticRegression`` (C=1) with ``class_weight``;
* ``embed`` — ``LogisticRegression`` on vectors from a caller-supplied ``embed(list[str]) -> ndarray``
  (each distinct text is embedded once and cached; skipped, with a reason, when ``embed`` is None).

Evaluation (seed 004, App. C): a group split (``GroupShuffleSplit``, 80/20), ``GroupKFold(cv_folds)``
cross-validation on the 80% (mean and sd of the fold metrics), and held-out metrics with percentile
cluster-bootstrap CIs over the same groups (``classification_metrics``). The groups (``group_by``) are by
default the connected components of records and normalised criterion texts (``normalise_text``): an item
joins its record's and its text's cluster, so no record and no wording is on both sides. Grouping by record
alone lets a criterion reused in several records sit on both sides, and a probe that only memorises which
wording got which label scores far above chance (see tests/probe/test_probe_grouping.py). ``group_by="record"``
is for a fixed rubric whose criteria are judged on every record (the audit's prior leakage), where the
question is new responses, not new wording. Items must come from one response source (one cohort). ``balance="subsample"`` undersamples the majority class of every *training*
set (seeded); test sets are never altered. Failed judge labels (NaN) are counted and excluded.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.dummy import DummyClassifier
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, GroupShuffleSplit
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline
from sklearn.utils.class_weight import compute_sample_weight

from rubriclab.errors import ConfigError, InputError
from rubriclab.probe._metrics import (
    COUNT_METRICS,
    METRICS,
    _weighted_auc,
    classification_metrics,
    metrics_from_counts,
    metrics_table,
    paired_metric_difference,
)
from rubriclab.settings import PROBE_MODELS as SCHEMA_PROBE_MODELS
from rubriclab.settings import Probe

PROBE_MODELS = SCHEMA_PROBE_MODELS
REQUIRED_COLUMNS = ("item_id", "record_id", "criterion", "label")
GROUPINGS = {"record+text": "record-text clusters", "record": "records"}  # group_by -> resampling unit
ENCODER_ERROR = ("probe.encoder is set, but fine-tuning an encoder needs a GPU; set probe.encoder: null "
                 "(use the 'embed' model with the project's embedder role instead)")

Embed = Callable[[list[str]], np.ndarray]


class EmbeddingFeatures(BaseEstimator, TransformerMixin):
    """Texts -> embedding matrix through ``embed``; every distinct text is embedded once (cached)."""

    def __init__(self, embed: Embed | None = None) -> None:
        self.embed = embed

    def fit(self, X: Sequence[str], y: Any = None) -> EmbeddingFeatures:
        self.transform(X)
        return self

    def transform(self, X: Sequence[str]) -> np.ndarray:
        cache: dict[str, np.ndarray] = self.__dict__.setdefault("_cache", {})
        texts = [str(t) for t in X]
        missing = list(dict.fromkeys(t for t in texts if t not in cache))
        if missing:
            vecs = np.asarray(self.embed(missing), dtype=float)
            if vecs.ndim != 2 or vecs.shape[0] != len(missing):
                raise InputError(f"returned shape {vecs.shape} for {len(missing)} texts", field="embed",
                                 expected="a 2-D array with one row per text")
            cache.update(zip(missing, vecs))
        return np.vstack([cache[t] for t in texts]) if texts else np.empty((0, 0))


def _tfidf() -> TfidfVectorizer:
    return TfidfVectorizer(lowercase=True, ngram_range=(1, 2), sublinear_tf=True)


def _make_model(name: str, *, embed: Embed | None, class_weight: str | None, seed: int) -> Pipeline:
    if name == "majority":
        return Pipeline([("tfidf", _tfidf()), ("clf", DummyClassifier(strategy="most_frequent"))])
    if name == "nb":
        return Pipeline([("tfidf", _tfidf()), ("clf", MultinomialNB())])
    if name == "lr":
        return Pipeline([("tfidf", _tfidf()), ("clf", LogisticRegression(
            C=1.0, class_weight=class_weight, max_iter=2000, random_state=seed))])
    if name == "embed":
        return Pipeline([("embed", EmbeddingFeatures(embed)), ("clf", LogisticRegression(
            C=1.0, class_weight=class_weight, max_iter=2000, random_state=seed))])
    raise ConfigError(f"probe model {name!r} is unknown; expected some of {list(PROBE_MODELS)}")


def _check_options(models: Sequence[str], embed: Embed | None, class_weight: Any, balance: str,
                   encoder: Any) -> tuple[list[str], dict[str, str]]:
    if encoder is not None:
        raise ConfigError(ENCODER_ERROR)
    if class_weight not in ("balanced", None):
        raise ConfigError(f"probe class_weight={class_weight!r}; expected 'balanced' or null")
    if balance not in ("none", "subsample"):
        raise ConfigError(f"probe balance={balance!r}; expected 'none' or 'subsample'")
    models = [models] if isinstance(models, str) else list(models)
    unknown = [m for m in models if m not in PROBE_MODELS]
    if unknown or not models:
        raise ConfigError(f"probe models={models!r}; expected a non-empty subset of {list(PROBE_MODELS)}")
    skipped = {}
    if embed is not None and not callable(embed):
        raise ConfigError(f"probe embed is {type(embed).__name__}; expected a callable list[str] -> ndarray")
    if "embed" in models and embed is None:
        skipped["embed"] = "no embedding function given (embed=None): the embedder role is not configured"
    return [m for m in models if m not in skipped], skipped


def normalise_text(text: Any) -> str:
    """A criterion's wording for grouping: Unicode-normalised (NFKC), casefolded, punctuation and symbols dropped
    (a trailing period, quotes or a bullet do not make another wording), runs of whitespace collapsed to one space."""
    folded = unicodedata.normalize("NFKC", str(text)).casefold()
    return " ".join("".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in folded).split())


def _clusters(records: Sequence[Any], texts: Sequence[str]) -> np.ndarray:
    """Cluster id per item: connected components of the graph that links each item's record to its text
    (union-find), so a split on these ids keeps every record and every wording on one side."""
    parent: dict[tuple[str, Any], tuple[str, Any]] = {}

    def find(x: tuple[str, Any]) -> tuple[str, Any]:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r, t in zip(records, texts, strict=True):
        a, b = find(("record", r)), find(("text", t))
        if a != b:
            parent[a] = b
    ids: dict[tuple[str, Any], int] = {}
    return np.array([ids.setdefault(find(("record", r)), len(ids)) for r in records], dtype=int)


def _groups(data: pd.DataFrame, group_by: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Group ids for split, CV and bootstrap, and how much criterion text is shared between records."""
    if group_by not in GROUPINGS:
        raise ConfigError(f"probe group_by={group_by!r}; expected one of {list(GROUPINGS)}")
    text = data["criterion"].map(normalise_text)
    rec = data["record_id"].astype(str)
    recs_per_text = rec.groupby(text).nunique()
    shared = recs_per_text[recs_per_text > 1].index
    groups = _clusters(rec.tolist(), text.tolist()) if group_by == "record+text" else pd.factorize(rec)[0]
    sizes = np.bincount(groups) if len(groups) else np.array([0])
    report = {"group_by": group_by, "unit": GROUPINGS[group_by], "n_texts": int(text.nunique()),
              "n_texts_in_several_records": int(len(shared)), "n_items_with_shared_text": int(text.isin(shared).sum()),
              "n_groups": int(len(sizes)), "largest_group_items": int(sizes.max())}
    if group_by == "record+text" and report["n_groups"] < 2 and data["record_id"].nunique() >= 2:
        raise InputError(f"{data['record_id'].nunique()} records and {report['n_texts']} distinct criterion texts form "
                         f"one cluster: {report['n_texts_in_several_records']} texts recur across records and chain "
                         "every record together", field="criterion",
                         expected="criterion wording not shared across all records (a split that keeps each record "
                                  "and each wording on one side needs at least 2 clusters)")
    return groups, report


SPLIT_CANDIDATES = 20


def _held_out(data: pd.DataFrame, groups: np.ndarray, test_size: float, seed: int, tolerance: float,
              sharing: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """A group split whose held-out *item* share is within ``tolerance`` of ``test_size``. GroupShuffleSplit's
    ``test_size`` counts groups, so one large cluster makes the held-out share of items lopsided: of its seeded
    candidates (``SPLIT_CANDIDATES``, the first is the paper's single split) the first within the tolerance is
    used — chosen by size alone, never by labels. None within it: an InputError saying how far the closest was."""
    best, best_miss = None, math.inf
    splitter = GroupShuffleSplit(n_splits=SPLIT_CANDIDATES, test_size=test_size, random_state=seed)
    for k, (tr, te) in enumerate(splitter.split(data, groups=groups), 1):
        miss = abs(len(te) / len(data) - test_size)
        if miss <= tolerance:
            return tr, te, k
        if miss < best_miss:
            best, best_miss = (tr, te), miss
    assert best is not None
    share = len(best[1]) / len(data)
    raise InputError(f"no group split holds out {test_size:.0%} of the items within ±{tolerance:.0%}: the closest of "
                     f"{SPLIT_CANDIDATES} seeded splits held out {share:.0%} ({len(best[1])} of {len(data)} items; the "
                     f"largest of {sharing['n_groups']} {sharing['unit']} holds {sharing['largest_group_items']} items)",
                     field="record_id", expected="groups small enough to split the items near test_size (more records, "
                     "less criterion wording shared across records, or a wider probe.split_tolerance)")


def _one_cohort(items: pd.DataFrame, name: str) -> None:
    """Refuse to pool responses of several sources: in seed 004 each probe cohort is one model's responses."""
    if "response_source" not in items.columns:
        return
    counts = items["response_source"].dropna().astype(str).value_counts()
    if len(counts) > 1:
        listed = ", ".join(f"{k} ({v} items)" for k, v in counts.items())
        raise InputError(f"mixes {len(counts)} response sources: {listed}", field=f"{name}.response_source",
                         expected="one response source per probe cohort (split the items by response_source)")


def _overlap(train: pd.DataFrame, test: pd.DataFrame) -> dict[str, int]:
    """Records and normalised criterion texts found on both sides, and the test items they touch."""
    tr_text, te_text = train["criterion"].map(normalise_text), test["criterion"].map(normalise_text)
    rec_hit = test["record_id"].isin(set(train["record_id"]))
    text_hit = te_text.isin(set(tr_text))
    return {"overlap_records": int(len(set(train["record_id"]) & set(test["record_id"]))),
            "overlap_texts": int(len(set(tr_text) & set(te_text))),
            "n_test_items_record_in_train": int(rec_hit.sum()), "n_test_items_text_in_train": int(text_hit.sum()),
            "n_test_items_overlapping": int((rec_hit | text_hit).sum())}


def _clean(items: pd.DataFrame, name: str = "items") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Validate columns and labels; drop failed labels (NaN) and report how many."""
    if not isinstance(items, pd.DataFrame):
        raise InputError(f"is {type(items).__name__}", field=name, expected="a pandas DataFrame of rubric items")
    missing = [c for c in REQUIRED_COLUMNS if c not in items.columns]
    if missing:
        raise InputError(f"lacks columns {missing} (has {list(items.columns)})", field=name,
                         expected=f"columns {list(REQUIRED_COLUMNS)}")
    label = pd.to_numeric(items["label"], errors="coerce")
    bad = label.notna() & ~label.isin((0, 1))
    nonnum = items["label"].notna() & label.isna()
    if (bad | nonnum).any():
        i = items.index[bad | nonnum][0]
        raise InputError(f"row {i} has label {items.loc[i, 'label']!r}", field="label",
                         expected="0, 1, or NaN for a failed judge label")
    no_text = items["criterion"].isna()
    if no_text.any():
        raise InputError(f"{int(no_text.sum())} rows without rubric text (first: row {items.index[no_text][0]})",
                         field="criterion", expected="the rubric item text on every row")
    if items["record_id"].isna().any():
        raise InputError("has missing values", field="record_id", expected="a record id on every row")
    failed = label.isna()
    clean = items.loc[~failed].copy()
    clean["label"] = label[~failed].astype(int)
    clean["criterion"] = clean["criterion"].astype(str)
    n_pos = int(clean["label"].sum())
    counts = {"n_items": int(len(items)), "n_failed_labels_excluded": int(failed.sum()),
              "n_used": int(len(clean)), "n_records": int(clean["record_id"].nunique()),
              "n_positive": n_pos, "n_negative": int(len(clean) - n_pos),
              "share_positive": float(n_pos / len(clean)) if len(clean) else float("nan")}
    return clean, counts


def _fit(name: str, x: pd.Series, y: np.ndarray, *, embed: Embed | None, class_weight: str | None,
         balance: str, seed: int) -> Pipeline:
    if len(np.unique(y)) < 2:
        raise InputError(f"the training set has only class {int(y[0]) if len(y) else None}", field="label",
                         expected="both labels (0 and 1) among the training items")
    model = _make_model(name, embed=embed, class_weight=class_weight, seed=seed)
    if name == "majority":  # the trivial baseline: the most frequent label of the full training rows
        return model.fit(x, y)
    if balance == "subsample":
        idx = _subsample(y, seed)
        x, y = x.iloc[idx], y[idx]
    if name == "nb" and class_weight == "balanced":
        return model.fit(x, y, clf__sample_weight=compute_sample_weight("balanced", y))
    return model.fit(x, y)


def _subsample(y: np.ndarray, seed: int) -> np.ndarray:
    """Indices of a balanced undersample: all minority items and as many majority items, drawn seeded."""
    rng = np.random.default_rng(seed)
    idx0, idx1 = np.flatnonzero(y == 0), np.flatnonzero(y == 1)
    k = min(len(idx0), len(idx1))
    keep = np.concatenate([rng.choice(idx0, k, replace=False), rng.choice(idx1, k, replace=False)])
    return np.sort(keep)


def _predict(model: Pipeline, x: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    proba = model.predict_proba(x)
    classes = list(model.classes_)
    score = proba[:, classes.index(1)] if 1 in classes else np.zeros(len(x))
    return model.predict(x).astype(int), score


def run_probe(
    items: pd.DataFrame,
    *,
    models: Sequence[str] = PROBE_MODELS,
    embed: Embed | None = None,
    encoder: str | None = None,
    seed: int = 0,
    test_size: float = 0.2,
    cv_folds: int = 5,
    class_weight: str | None = "balanced",
    balance: str = "none",
    n_boot: int = 10000,
    confidence: float = 0.95,
    group_by: str = "record+text",
    split_tolerance: float = Probe().split_tolerance,
    unit_name: str | None = None,
) -> dict[str, Any]:
    """Train the rubric-only probes, cross-validate them, and evaluate them on a held-out group split.

    Returns a dict with

    * ``split``: method, group_by, unit, seed, test_size, item / record / group counts per side, how much
      criterion text recurs across records (``n_texts_in_several_records``, ``n_items_with_shared_text``) and
      the overlap between the sides (``overlap_records``, ``overlap_texts``, test items whose record or text
      is in training; all 0 with ``group_by="record+text"``);
    * ``counts``: n_items, n_failed_labels_excluded, n_used, n_records, class balance;
    * ``table``: held-out metrics, one row per (model, metric) with estimate/low/high, n, n_groups,
      n_invalid_resamples, ci_* columns and ``reason`` (cluster bootstrap over records);
    * ``cv``: per (model, metric) mean and sd (ddof=1) over the ``GroupKFold(cv_folds)`` folds of the 80%,
      n_folds (folds where the metric was defined) and ``reason``;
    * ``predictions``: held-out item_id, record_id, label (and dataset) with ``pred_<model>`` / ``score_<model>``;
    * ``fitted``: model -> sklearn Pipeline fitted on the 80% (``fitted["lr"]`` holds the TF-IDF weights);
    * ``leakage``: balanced accuracy of the best non-majority model minus the majority baseline's on the
      held-out items, with a paired cluster-bootstrap CI and p-value. The best model is chosen by CV mean
      balanced accuracy (not on the test set); if CV is unavailable, by held-out balanced accuracy;
    * ``skipped``: model -> reason (e.g. ``embed`` without an embedding function).

    ``unit_name``: what one resampling group is called in the split, reasons and CI columns, plural (default by
    ``group_by``: "records" or "record-text clusters"; the audit's leakage says "pool pairs").

    Raises ConfigError for bad options (an ``encoder`` id included) and InputError for unusable data (one
    class only, fewer than 2 records or groups, several response sources, a training side with one class).
    """
    names, skipped = _check_options(models, embed, class_weight, balance, encoder)
    if not 0 < test_size < 1:
        raise ConfigError(f"probe test_size={test_size!r}; expected a fraction in (0, 1)")
    data, counts = _clean(items)
    if counts["n_positive"] == 0 or counts["n_negative"] == 0:
        raise InputError(f"all {counts['n_used']} usable labels are {int(counts['n_positive'] > 0)}", field="label",
                         expected="both labels (0 and 1): a probe needs two classes")
    _one_cohort(items, "items")
    if counts["n_records"] < 2:
        raise InputError(f"has {counts['n_records']} distinct record(s)", field="record_id",
                         expected="at least 2 records for a group train/test split")
    groups, sharing = _groups(data, group_by)
    if unit_name:
        sharing["unit"] = unit_name
    train_idx, test_idx, tried = _held_out(data, groups, test_size, seed, split_tolerance, sharing)
    train, test = data.iloc[train_idx], data.iloc[test_idx]
    overlap = _overlap(train, test)
    leaked = overlap["overlap_records"] or (group_by == "record+text" and overlap["overlap_texts"])
    if leaked:  # cannot happen with these groups; guard the guarantee the analysis relies on
        raise InputError(f"{overlap['overlap_records']} records and {overlap['overlap_texts']} criterion texts on "
                         "both sides of the split", field="record_id", expected="disjoint sides")
    split = {"method": f"GroupShuffleSplit by {sharing['unit']}", **sharing, "seed": seed, "test_size": test_size,
             "n_train_items": len(train), "n_test_items": len(test), "test_item_share": len(test) / len(data),
             "split_tolerance": split_tolerance, "splits_tried": tried,
             "n_train_records": int(train["record_id"].nunique()), "n_test_records": int(test["record_id"].nunique()),
             "n_train_groups": int(len(np.unique(groups[train_idx]))),
             "n_test_groups": int(len(np.unique(groups[test_idx]))), **overlap,
             "train_share_positive": float(train["label"].mean()),
             "test_share_positive": float(test["label"].mean())}
    y_train = train["label"].to_numpy()
    if len(np.unique(y_train)) < 2:
        raise InputError(f"the 80% training split (seed {seed}) has only label {int(y_train[0])}", field="label",
                         expected="both labels among the training records (more records, or another seed)")
    opts = {"embed": _memoised(embed), "class_weight": class_weight, "balance": balance, "seed": seed}
    unit = sharing["unit"]

    cv = _cross_validate(train, groups[train_idx], names, cv_folds, opts, unit)

    fitted: dict[str, Pipeline] = {}
    preds = test[[c for c in ("item_id", "record_id", "dataset", "label") if c in test.columns]].reset_index(drop=True)
    y_test = test["label"].to_numpy()
    g_test = groups[test_idx]
    frames = []
    for name in names:
        fitted[name] = _fit(name, train["criterion"], y_train, **opts)
        pred, score = _predict(fitted[name], test["criterion"])
        preds[f"pred_{name}"], preds[f"score_{name}"] = pred, score
        m = classification_metrics(y_test, pred, score, groups=g_test, n_boot=n_boot, confidence=confidence,
                                   seed=seed, unit=unit)
        frames.append(metrics_table(m, model=name))
    table = pd.concat(frames, ignore_index=True) if frames else _empty_table()
    leakage = _leakage(table, cv, preds, y_test, g_test, n_boot=n_boot, confidence=confidence, seed=seed, unit=unit)
    return {"split": split, "counts": counts, "table": table, "cv": cv, "predictions": preds,
            "fitted": fitted, "leakage": leakage, "skipped": skipped}


def probe_transfer(
    train_items: pd.DataFrame,
    test_items: pd.DataFrame,
    *,
    models: Sequence[str] = PROBE_MODELS,
    embed: Embed | None = None,
    encoder: str | None = None,
    seed: int = 0,
    class_weight: str | None = "balanced",
    balance: str = "none",
    n_boot: int = 10000,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Cross-dataset transfer: fit every probe on all of ``train_items``, evaluate on all of ``test_items``.

    Same rows as ``run_probe``'s ``table`` (cluster bootstrap over the test side's record-text clusters) plus ``train`` / ``test``
    (the datasets' names from a ``dataset`` column, else "train"/"test"), ``n_train``,
    ``n_failed_labels_excluded`` (train + test) and the overlap left out of the test side: a test item whose
    record or normalised criterion text is also in training (HealthBench-Hard is a subset of HealthBench) is
    dropped and counted (``n_test_dropped_overlap``, of which ``n_test_dropped_record`` /
    ``n_test_dropped_text`` share a record / a text; ``n_test`` is what remains). Skipped models get one row
    with metric NaN and the reason. Raises InputError when every test item overlaps or a side mixes
    response sources.
    """
    names, skipped = _check_options(models, embed, class_weight, balance, encoder)
    tr, ctr = _clean(train_items, "train_items")
    te, cte = _clean(test_items, "test_items")
    _one_cohort(train_items, "train_items")
    _one_cohort(test_items, "test_items")
    if te.empty:
        raise InputError("has no item with a usable label", field="test_items", expected="judged rubric items")
    ov = _overlap(tr, te)
    seen_text = set(tr["criterion"].map(normalise_text))
    keep = ~(te["record_id"].isin(set(tr["record_id"])) | te["criterion"].map(normalise_text).isin(seen_text))
    if not keep.any():
        raise InputError(f"all {len(te)} test items share a record or a criterion text with the training items",
                         field="test_items", expected="test items disjoint from training (records and wording)")
    te = te.loc[keep]
    opts = {"embed": _memoised(embed), "class_weight": class_weight, "balance": balance, "seed": seed}
    y_te = te["label"].to_numpy()
    g_te = _clusters(te["record_id"].astype(str).tolist(), te["criterion"].map(normalise_text).tolist())
    info = {"train": _dataset_name(tr, "train"), "test": _dataset_name(te, "test"), "n_train": len(tr),
            "n_test": len(te), "n_test_dropped_overlap": ov["n_test_items_overlapping"],
            "n_test_dropped_record": ov["n_test_items_record_in_train"],
            "n_test_dropped_text": ov["n_test_items_text_in_train"],
            "n_failed_labels_excluded": ctr["n_failed_labels_excluded"] + cte["n_failed_labels_excluded"]}
    frames = []
    for name in names:
        model = _fit(name, tr["criterion"], tr["label"].to_numpy(), **opts)
        pred, score = _predict(model, te["criterion"])
        m = classification_metrics(y_te, pred, score, groups=g_te, n_boot=n_boot, confidence=confidence, seed=seed,
                                   unit=GROUPINGS["record+text"])
        frames.append(metrics_table(m, **info, model=name))
    for name, why in skipped.items():
        frames.append(pd.DataFrame([{**info, "model": name, "metric": None, "estimate": np.nan, "reason": why}]))
    return pd.concat(frames, ignore_index=True)


# -- internals -------------------------------------------------------------------------------------------


def _memoised(embed: Embed | None) -> Embed | None:
    """``embed`` with a cache shared by every fit of one run (CV folds and the final fit): each distinct
    text is sent to the embedder once."""
    if embed is None:
        return None
    cache: dict[str, np.ndarray] = {}

    def cached(texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in cache))
        if todo:
            vecs = np.asarray(embed(todo), dtype=float)
            if vecs.ndim != 2 or vecs.shape[0] != len(todo):
                raise InputError(f"returned shape {vecs.shape} for {len(todo)} texts", field="embed",
                                 expected="a 2-D array with one row per text")
            cache.update(zip(todo, vecs))
        return np.vstack([cache[t] for t in texts])

    return cached


def _dataset_name(df: pd.DataFrame, default: str) -> str:
    if "dataset" not in df.columns:
        return default
    return "+".join(sorted(map(str, df["dataset"].dropna().unique()))) or default


def _empty_table() -> pd.DataFrame:
    return pd.DataFrame(columns=["model", "metric", "estimate", "low", "high", "n", "n_groups",
                                 "n_invalid_resamples", "ci_method", "ci_level", "ci_unit", "ci_resamples", "reason"])


def _cross_validate(train: pd.DataFrame, g: np.ndarray, names: list[str], folds: int, opts: dict,
                    unit: str) -> pd.DataFrame:
    n_groups = len(np.unique(g))
    rows = []
    if folds < 2 or n_groups < folds:
        why = (f"cv_folds={folds} < 2" if folds < 2 else
               f"only {n_groups} training {unit} for {folds} group folds")
        for name in names:
            for metric in METRICS:
                rows.append({"model": name, "metric": metric, "mean": np.nan, "sd": np.nan, "n_folds": 0,
                             "n_groups": n_groups, "unit": unit, "reason": why})
        return pd.DataFrame(rows)
    values: dict[str, dict[str, list[float]]] = {n: {m: [] for m in METRICS} for n in names}
    notes: dict[str, set[str]] = {n: set() for n in names}
    x, y = train["criterion"], train["label"].to_numpy()
    for k, (tr, va) in enumerate(GroupKFold(n_splits=folds).split(x, y, groups=g)):
        for name in names:
            if len(np.unique(y[tr])) < 2:
                notes[name].add(f"fold {k}: one class in training")
                continue
            model = _fit(name, x.iloc[tr], y[tr], **opts)
            pred, score = _predict(model, x.iloc[va])
            yt = y[va]
            counts = [((yt == a) & (pred == b)).sum() for a, b in ((1, 1), (0, 1), (1, 0), (0, 0))]
            for metric, v in metrics_from_counts(*counts).items():
                values[name][metric].append(float(v))
            values[name]["roc_auc"].append(_auc(yt, score))
    for name in names:
        for metric in METRICS:
            v = np.asarray(values[name][metric], dtype=float)
            good = v[np.isfinite(v)]
            reason = "; ".join(sorted(notes[name])) or None
            if good.size < v.size:
                reason = "; ".join(filter(None, [reason, f"undefined in {v.size - good.size} fold(s)"]))
            rows.append({"model": name, "metric": metric,
                         "mean": float(good.mean()) if good.size else np.nan,
                         "sd": float(good.std(ddof=1)) if good.size > 1 else np.nan,
                         "n_folds": int(good.size), "n_groups": n_groups, "unit": unit, "reason": reason})
    return pd.DataFrame(rows)


def _auc(y: np.ndarray, score: np.ndarray) -> float:
    if y.min() == y.max():
        return float("nan")
    return float(_weighted_auc(y, np.asarray(score, dtype=float), np.ones((1, len(y))))[0])


def _cv_choice(cvb: pd.DataFrame) -> tuple[str, str]:
    """The candidate with the best CV mean balanced accuracy, and how it was chosen: a tie at the top is said (the
    first model run among the tied is taken), with the folds the means are over."""
    top = cvb["mean"].max()
    tied = cvb[np.isclose(cvb["mean"], top, rtol=0, atol=1e-12)]
    best = str(tied.iloc[0]["model"])
    folds = ", ".join(f"{m} {int(k)}" for m, k in zip(cvb["model"], cvb["n_folds"]))
    how = f"cv mean balanced accuracy (folds with a value: {folds})"
    if len(tied) > 1:
        how += (f"; a tie at {top:.3f} between {', '.join(map(str, tied['model']))}: {best}, the first run, is "
                "taken, and no model is better than the others by this")
    return best, how


def _leakage(table: pd.DataFrame, cv: pd.DataFrame, preds: pd.DataFrame, y: np.ndarray, g: np.ndarray, *,
             n_boot: int, confidence: float, seed: int, unit: str) -> dict[str, Any]:
    out: dict[str, Any] = {"model": None, "baseline": "majority", "metric": "balanced_accuracy",
                           "selected_by": None, "estimate": np.nan, "low": np.nan, "high": np.nan,
                           "p_value": np.nan, "model_value": np.nan, "baseline_value": np.nan,
                           "n": int(len(y)), "n_groups": int(len(np.unique(g))), "n_invalid_resamples": 0, "ci": None,
                           "reason": None}
    run = set(table["model"]) if len(table) else set()
    candidates = [m for m in table["model"].unique() if m != "majority"] if run else []
    if "majority" not in run:
        out["reason"] = "the majority baseline was not run"
        return out
    if not candidates:
        out["reason"] = "no non-majority model was run"
        return out
    cvb = cv[(cv["metric"] == "balanced_accuracy") & cv["model"].isin(candidates)].dropna(subset=["mean"])
    if len(cvb):
        best, out["selected_by"] = _cv_choice(cvb)
    else:
        # never the held-out set's best: the difference would then be measured on the data that chose the model
        # (random labels gave +0.077 on average, against +0.008 chosen by CV)
        best = candidates[0]
        out["selected_by"] = (f"fixed in advance: {best}, the first model run (no CV balanced accuracy to choose "
                              "by; choosing on the held-out set would bias the difference upward)")
    ho = table[(table["metric"] == "balanced_accuracy") & (table["model"] == best)].dropna(subset=["estimate"])
    if not len(ho):
        out["reason"] = "balanced accuracy undefined on the held-out set (one class in it)"
        return out
    d = paired_metric_difference(y, preds[f"pred_{best}"], preds["pred_majority"], metric="balanced_accuracy",
                                 groups=g, n_boot=n_boot, confidence=confidence, seed=seed, unit=unit)
    out.update(model=best, estimate=d["estimate"], low=d["low"], high=d["high"], p_value=d["p_value"],
               model_value=d["metric_a"], baseline_value=d["metric_b"], n_invalid_resamples=d["n_invalid_resamples"],
               ci=d["ci"], reason=d["reason"])
    return out


__all__ = ["COUNT_METRICS", "GROUPINGS", "METRICS", "PROBE_MODELS", "EmbeddingFeatures", "normalise_text",
           "probe_transfer", "run_probe"]
