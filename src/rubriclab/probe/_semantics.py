"""Semantic analyses of rubric items by judge label (seed 004 §5.3 and Appendix F): lexical cue frequencies,
top logistic-regression weights per class, word-count distributions, per-class topics and a 2-D projection
of rubric embeddings.

Every function takes a DataFrame of rubric items with columns ``item_id, record_id, criterion, label``
(optionally ``dataset``); ``label`` is 1 (the judge said satisfied), 0 (not satisfied) or NaN (the label
failed). Failed labels are excluded and counted; every figure's title states n per class and that count.
Functions return ``(table, figure)``; the table's ``attrs["notes"]`` holds what a reader must know (which
method ran, what degraded, why). The caller owns the figures (save, log, then ``plt.close(fig)``).
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from rubriclab import atomic  # noqa: E402
from rubriclab.errors import ArgumentError  # noqa: E402
from rubriclab.settings import PROBE_PROJECTIONS  # noqa: E402

DEFAULT_CUES: tuple[str, ...] = ("must", "should", "not", "avoid", "recommend", "mention", "explain", "ask",
                                 "refer", "includes", "states", "fails")
UMAP_MIN_ITEMS = 20  # below this many labelled items the projection falls back to PCA
CLASS_NAMES = {0: "not satisfied (0)", 1: "satisfied (1)"}
CLASS_COLORS = {0: "#dd8452", 1: "#4c72b0"}
TOKEN_PATTERN = r"(?u)\b[^\W\d_][\w']*\b"  # words: letters first, apostrophes kept ("don't"), no bare numbers

__all__ = ["DEFAULT_CUES", "UMAP_MIN_ITEMS", "lexical_cues", "lr_weights", "word_counts", "topics", "projection",
           "semantic_report", "write_semantic_report"]


# -- shared ------------------------------------------------------------------------------------------------

def _prepare(items: pd.DataFrame) -> tuple[pd.DataFrame, int, np.ndarray]:
    """Labelled items only (label as int 0/1, criterion as str), the number of failed labels excluded, and the
    boolean mask of kept rows in the input's order."""
    missing = {"criterion", "label"} - set(items.columns)
    if missing:
        raise ArgumentError(f"rubric items lack column(s) {sorted(missing)}")
    lab = pd.to_numeric(items["label"], errors="coerce")
    bad = lab.notna() & ~lab.isin([0, 1])
    if bad.any():
        raise ArgumentError(f"labels must be 0, 1 or NaN (failed); got {sorted(set(lab[bad].tolist()))[:5]}")
    keep = lab.notna().to_numpy()
    df = items.loc[keep].copy()
    df["label"] = lab[keep].astype(int).to_numpy()
    df["criterion"] = df["criterion"].fillna("").astype(str)
    return df.reset_index(drop=True), int((~keep).sum()), keep


def _counts(df: pd.DataFrame) -> dict[int, int]:
    return {c: int((df["label"] == c).sum()) for c in (0, 1)}


def _n_line(df: pd.DataFrame, n_failed: int) -> str:
    n = _counts(df)
    return (f"n = {n[0]} not satisfied (0) / {n[1]} satisfied (1); "
            f"{n_failed} failed label{'s' if n_failed != 1 else ''} excluded")


def _finish(table: pd.DataFrame, df: pd.DataFrame, n_failed: int, notes: list[str], **attrs: Any) -> pd.DataFrame:
    n = _counts(df)
    table.attrs.update({"n_0": n[0], "n_1": n[1], "n_failed": n_failed, "notes": list(notes), **attrs})
    return table


def _empty_fig(title: str, message: str) -> Figure:
    fig, ax = plt.subplots(figsize=(6, 2.5))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=9, wrap=True)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _doc_freq(texts: pd.Series, vocabulary: list[str] | None = None):
    """Binary document-term counts (a word counts once per rubric item)."""
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(lowercase=True, binary=True, token_pattern=TOKEN_PATTERN, vocabulary=vocabulary)
    try:
        X = vec.fit_transform(texts)
    except ValueError:  # empty vocabulary (no words at all)
        return None, []
    return X, list(vec.get_feature_names_out())


# -- lexical cues ------------------------------------------------------------------------------------------

def lexical_cues(items: pd.DataFrame, cues: list[str] | tuple[str, ...] | None = None, top: int = 15,
                 alpha: float = 0.5, min_docs: int = 2) -> tuple[pd.DataFrame, Figure]:
    """How often lexical cues occur in rubric items by judge label (seed 004 Fig. 11).

    Two kinds of rows: ``source="fixed"`` for each cue in ``cues`` (default :data:`DEFAULT_CUES`, modal and
    negation words) and ``source="log-odds"`` for the ``top`` words most associated with each class by the
    smoothed log-odds ratio of document frequencies,
    ``log((d1+a)/(n1-d1+a)) - log((d0+a)/(n0-d0+a))`` with ``a = alpha`` (positive = toward satisfied),
    among words occurring in at least ``min_docs`` items. Columns: ``token, source, count_0, count_1, rate_0,
    rate_1, log_odds, z, toward`` (rates = share of that class's items containing the word; ``z`` = log-odds
    over its approximate standard error). Matching is on lower-cased whole words ("fails" does not match "fail").
    """
    df, n_failed, _ = _prepare(items)
    cues = [c.lower() for c in (DEFAULT_CUES if cues is None else cues)]
    n = _counts(df)
    notes: list[str] = []
    title = "Lexical cues by judge label"
    cols = ["token", "source", "count_0", "count_1", "rate_0", "rate_1", "log_odds", "z", "toward"]
    X, vocab = _doc_freq(df["criterion"]) if len(df) else (None, [])
    if X is None:
        notes.append("no words in the labelled items")
        table = _finish(pd.DataFrame(columns=cols), df, n_failed, notes, alpha=alpha)
        return table, _empty_fig(f"{title}\n{_n_line(df, n_failed)}", "no labelled rubric text")
    y = df["label"].to_numpy()
    d1 = np.asarray(X[y == 1].sum(axis=0)).ravel().astype(float)
    d0 = np.asarray(X[y == 0].sum(axis=0)).ravel().astype(float)
    a = float(alpha)
    missing = list(dict.fromkeys(c for c in cues if c not in set(vocab)))
    tokens = list(vocab) + missing  # fixed cues absent from the text: zero counts
    d1 = np.concatenate([d1, np.zeros(len(missing))])
    d0 = np.concatenate([d0, np.zeros(len(missing))])
    lo = np.log((d1 + a) / (n[1] - d1 + a)) - np.log((d0 + a) / (n[0] - d0 + a))
    se = np.sqrt(1 / (d1 + a) + 1 / (n[1] - d1 + a) + 1 / (d0 + a) + 1 / (n[0] - d0 + a))
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = pd.DataFrame({"token": tokens, "count_0": d0.astype(int), "count_1": d1.astype(int),
                              "rate_0": d0 / n[0] if n[0] else np.nan, "rate_1": d1 / n[1] if n[1] else np.nan,
                              "log_odds": lo, "z": lo / se})
    stats["toward"] = np.where((d0 + d1 > 0) & (stats["log_odds"] > 0), 1,
                               np.where((d0 + d1 > 0) & (stats["log_odds"] < 0), 0, -1))
    in_text = stats.iloc[: len(vocab)]
    if min(n.values()) == 0:
        notes.append("only one class has labelled items: log-odds ranking skipped")
        ranked = stats.iloc[0:0]
    else:
        eligible = in_text[(in_text["count_0"] + in_text["count_1"]) >= min_docs]
        if eligible.empty and len(in_text):
            notes.append(f"no word occurs in {min_docs}+ items: log-odds ranking uses all words")
            eligible = in_text
        pos = eligible[eligible["log_odds"] > 0].sort_values(["log_odds", "token"], ascending=[False, True]).head(top)
        neg = eligible[eligible["log_odds"] < 0].sort_values(["log_odds", "token"], ascending=[True, True]).head(top)
        ranked = pd.concat([pos, neg], ignore_index=True)
    ranked = ranked.assign(source="log-odds")
    index = {t: i for i, t in enumerate(tokens)}
    fixed_rows = [stats.iloc[index[c]].to_dict() for c in cues]
    fixed = pd.DataFrame(fixed_rows, columns=[c for c in cols if c != "source"]).assign(source="fixed")
    table = pd.concat([fixed, ranked], ignore_index=True)[cols]
    table["toward"] = table["toward"].astype(int)
    for c in ("count_0", "count_1"):
        table[c] = table[c].astype(int)
    notes.append(f"log-odds smoothed with alpha={a} on document frequencies; words in ≥{min_docs} items; "
                 f"toward = class the word is more frequent in (-1 = neither)")
    table = _finish(table, df, n_failed, notes, alpha=a, cues=cues)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [len(cues) or 1, max(len(ranked), 1)]})
    for ax, part, label in ((axes[0], table[table["source"] == "fixed"], "fixed modal / negation cues"),
                            (axes[1], table[table["source"] == "log-odds"], f"top {top} log-odds words per class")):
        xs = np.arange(len(part))
        for off, c in ((-0.2, 0), (0.2, 1)):
            ax.bar(xs + off, part[f"rate_{c}"].fillna(0), width=0.4, color=CLASS_COLORS[c], label=CLASS_NAMES[c])
        ax.set_xticks(xs, part["token"], rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("share of items containing the word")
        ax.set_title(label, fontsize=9)
        if len(part) == 0:
            ax.text(0.5, 0.5, "none", ha="center", va="center", transform=ax.transAxes)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{title}\n{_n_line(df, n_failed)}", fontsize=10)
    fig.tight_layout()
    return table, fig


# -- logistic-regression weights ---------------------------------------------------------------------------

def _find_steps(pipeline: Any) -> tuple[Any, Any, list[str]]:
    """The fitted vectorizer (has ``get_feature_names_out`` and ``transform``) and classifier (has ``coef_``)
    of a scikit-learn pipeline, found by type rather than step name."""
    steps = getattr(pipeline, "steps", None)
    if steps is None:
        raise TypeError(f"expected a fitted sklearn Pipeline (vectorizer + classifier), got {type(pipeline).__name__}")
    from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfVectorizer

    vec = clf = None
    names = []
    for name, step in steps:
        names.append(name)
        if isinstance(step, (TfidfVectorizer, CountVectorizer)) and vec is None:
            vec = step
        elif hasattr(step, "coef_") and hasattr(step, "classes_"):
            clf = step
        elif isinstance(step, HashingVectorizer):
            raise TypeError("a HashingVectorizer has no feature names; cannot report word weights")
    if vec is None or clf is None:
        raise TypeError(f"pipeline steps {names}: need a fitted TfidfVectorizer/CountVectorizer and a linear "
                        "classifier with coef_ (e.g. LogisticRegression)")
    return vec, clf, names


def lr_weights(fitted_lr: Any | None, items: pd.DataFrame, top: int = 15, seed: int = 0,
               C: float = 1.0) -> tuple[pd.DataFrame, Figure]:
    """Top logistic-regression TF-IDF weights per class as diverging bars (seed 004 Fig. 12).

    ``fitted_lr``: a fitted sklearn pipeline with a TF-IDF (or count) vectorizer and a binary linear classifier,
    found by type whatever the step names. When ``None``, a TF-IDF + L2 logistic regression
    (``class_weight="balanced"``, ``C``) is fit here on all labelled items — in-sample and descriptive only,
    not an evaluation; the table's notes say so. Columns: ``token, weight, toward, rank`` where weight > 0
    pushes toward satisfied (1) and < 0 toward not satisfied (0); ``top`` rows per class.
    """
    df, n_failed, _ = _prepare(items)
    n = _counts(df)
    notes: list[str] = []
    cols = ["token", "weight", "toward", "rank"]
    title = "Top logistic-regression weights by judge label"
    if fitted_lr is None:
        if min(n.values()) == 0:
            notes.append("only one class has labelled items: no classifier fit")
            table = _finish(pd.DataFrame(columns=cols), df, n_failed, notes, source="none")
            return table, _empty_fig(f"{title}\n{_n_line(df, n_failed)}", "needs both classes")
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import Pipeline

        fitted_lr = Pipeline([("tfidf", TfidfVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN)),
                              ("clf", LogisticRegression(C=C, class_weight="balanced", max_iter=2000,
                                                         random_state=seed))])
        fitted_lr.fit(df["criterion"], df["label"])
        source = f"fit here: TF-IDF + L2 logistic regression (C={C}, class_weight=balanced) on all {len(df)} labelled items"
        notes.append(source + " — in-sample, descriptive only (no fitted probe was passed)")
        vec, clf, _ = _find_steps(fitted_lr)
    else:
        vec, clf, names = _find_steps(fitted_lr)
        source = f"fitted pipeline passed by the caller (steps: {', '.join(names)})"
        notes.append(source)
    coef = np.asarray(clf.coef_)
    classes = list(clf.classes_)
    if coef.shape[0] != 1 or len(classes) != 2:
        raise ArgumentError(f"expected a binary classifier, got classes {classes}")
    feats = np.asarray(vec.get_feature_names_out())
    w = coef[0].astype(float)
    if len(w) != len(feats):
        raise ArgumentError(f"classifier has {len(w)} weights but the vectorizer {len(feats)} features "
                            "(a step between them changes the features)")
    pos_class = classes[1]
    try:
        flip = int(float(pos_class)) == 0
    except (TypeError, ValueError):
        flip = str(pos_class).strip().lower() in {"false", "not satisfied", "no"}
    if flip:  # coef_ points toward classes_[1]; orient so positive = satisfied
        w = -w
        notes.append(f"classifier classes {classes}: weights negated so positive = satisfied")
    order = np.argsort(-w, kind="stable")
    pos = [(feats[i], w[i]) for i in order[:top] if w[i] > 0]
    neg = [(feats[i], w[i]) for i in order[::-1][:top] if w[i] < 0]
    rows = [{"token": t, "weight": float(v), "toward": 1, "rank": r + 1} for r, (t, v) in enumerate(pos)]
    rows += [{"token": t, "weight": float(v), "toward": 0, "rank": r + 1} for r, (t, v) in enumerate(neg)]
    table = _finish(pd.DataFrame(rows, columns=cols), df, n_failed, notes, source=source)

    show = pd.concat([table[table["toward"] == 0].iloc[::-1], table[table["toward"] == 1].iloc[::-1]])
    show = show.sort_values("weight")
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.22 * len(show) + 1.6)))
    ax.barh(np.arange(len(show)), show["weight"], color=[CLASS_COLORS[c] for c in show["toward"]])
    ax.set_yticks(np.arange(len(show)), show["token"], fontsize=8)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("LR weight  (← not satisfied (0)  |  satisfied (1) →)")
    src = "probe passed by caller" if source.startswith("fitted pipeline") else "TF-IDF + L2 LR fit here (in-sample)"
    ax.set_title(f"{title} — {src}\n{_n_line(df, n_failed)}", fontsize=9)
    fig.tight_layout()
    return table, fig


# -- word counts -------------------------------------------------------------------------------------------

def word_counts(items: pd.DataFrame, bins: int = 30) -> tuple[pd.DataFrame, Figure]:
    """Rubric word counts (whitespace-separated words) by judge label (seed 004 Fig. 13).

    One row per label: ``label, n, mean, std, median, q1, q3, min, max``, plus the two-sided Mann–Whitney U
    test of label 0 vs label 1 (``mannwhitney_u``, ``mannwhitney_p``, same on both rows; NaN when a class is
    empty). Figure: overlaid histograms and box plots per label.
    """
    from scipy.stats import mannwhitneyu

    df, n_failed, _ = _prepare(items)
    wc = df["criterion"].str.split().str.len().fillna(0).astype(int)
    groups = {c: wc[df["label"] == c].to_numpy() for c in (0, 1)}
    notes: list[str] = ["word count = number of whitespace-separated words in the criterion"]
    u = p = float("nan")
    if len(groups[0]) and len(groups[1]):
        res = mannwhitneyu(groups[0], groups[1], alternative="two-sided")
        u, p = float(res.statistic), float(res.pvalue)
    else:
        notes.append("a class has no labelled items: Mann–Whitney test skipped")
    rows = []
    for c, g in groups.items():
        q = np.percentile(g, [25, 50, 75]) if len(g) else [np.nan] * 3
        rows.append({"label": c, "n": len(g), "mean": float(g.mean()) if len(g) else np.nan,
                     "std": float(g.std(ddof=1)) if len(g) > 1 else np.nan, "median": float(q[1]),
                     "q1": float(q[0]), "q3": float(q[2]), "min": float(g.min()) if len(g) else np.nan,
                     "max": float(g.max()) if len(g) else np.nan, "mannwhitney_u": u, "mannwhitney_p": p})
    table = _finish(pd.DataFrame(rows), df, n_failed, notes, mannwhitney_u=u, mannwhitney_p=p)

    fig, (ax_h, ax_b) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    allw = wc.to_numpy()
    edges = np.histogram_bin_edges(allw, bins=bins) if len(allw) else np.arange(2)
    for c, g in groups.items():
        if len(g):
            ax_h.hist(g, bins=edges, alpha=0.55, density=True, color=CLASS_COLORS[c], label=f"{CLASS_NAMES[c]}, n={len(g)}")
    ax_h.set_xlabel("words per rubric item")
    ax_h.set_ylabel("density")
    ax_h.legend(fontsize=8)
    present = [c for c in (0, 1) if len(groups[c])]
    if present:
        bp = ax_b.boxplot([groups[c] for c in present], patch_artist=True)
        for patch, c in zip(bp["boxes"], present):
            patch.set_facecolor(CLASS_COLORS[c])
        ax_b.set_xticks(range(1, len(present) + 1), [str(c) for c in present])
    ax_b.set_xlabel("judge label")
    ax_b.set_ylabel("words")
    ptxt = "n/a" if math.isnan(p) else f"{p:.3g}"
    fig.suptitle(f"Rubric word counts by judge label (Mann–Whitney U p = {ptxt})\n{_n_line(df, n_failed)}", fontsize=10)
    fig.tight_layout()
    return table, fig


# -- topics ------------------------------------------------------------------------------------------------

def topics(items: pd.DataFrame, n_topics: int = 3, top_words: int = 8, seed: int = 0,
           stop_words: str | list[str] | None = "english") -> tuple[pd.DataFrame, Figure]:
    """Per-class topics (seed 004 Appendix F.3, which used BERTopic): NMF on TF-IDF, fit separately on each
    label's items. BERTopic is not installed here, so this is NMF (scikit-learn) — a different, bag-of-words
    topic model; topics are comparable in spirit (per-class themes), not in method.

    Table: ``label, topic, top_words`` (comma-joined, most weighted first), ``share`` (fraction of that
    class's items whose strongest topic it is), ``n_docs`` (items with that topic as strongest) and
    ``n_class``. A class with fewer items (or distinct words) than ``n_topics`` gets fewer topics, with a note;
    an empty class gets none.
    """
    from sklearn.decomposition import NMF
    from sklearn.feature_extraction.text import TfidfVectorizer

    df, n_failed, _ = _prepare(items)
    notes: list[str] = ["topic model: NMF on TF-IDF (BERTopic not installed), fit separately per class"]
    rows: list[dict[str, Any]] = []
    weights: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for c in (0, 1):
        docs = df.loc[df["label"] == c, "criterion"]
        if len(docs) == 0:
            notes.append(f"class {c}: no labelled items, no topics")
            continue
        vec = TfidfVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN, stop_words=stop_words)
        try:
            X = vec.fit_transform(docs)
        except ValueError:
            notes.append(f"class {c}: no words left after stop-word removal, no topics")
            continue
        feats = vec.get_feature_names_out()
        k = min(n_topics, X.shape[0], X.shape[1])
        if k < n_topics:
            notes.append(f"class {c}: {X.shape[0]} items / {X.shape[1]} distinct words — {k} topic(s) instead of {n_topics}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning on tiny inputs
            nmf = NMF(n_components=k, init="nndsvda", random_state=seed, max_iter=1000)
            W = nmf.fit_transform(X)
        H = nmf.components_
        assigned = np.where(W.max(axis=1) > 0, W.argmax(axis=1), -1)
        for t in range(k):
            idx = np.argsort(-H[t], kind="stable")[:top_words]
            idx = [i for i in idx if H[t, i] > 0]
            weights[(c, t)] = [(feats[i], float(H[t, i])) for i in idx]
            nd = int((assigned == t).sum())
            rows.append({"label": c, "topic": t, "top_words": ", ".join(feats[i] for i in idx),
                         "share": nd / len(docs), "n_docs": nd, "n_class": len(docs)})
    table = _finish(pd.DataFrame(rows, columns=["label", "topic", "top_words", "share", "n_docs", "n_class"]),
                    df, n_failed, notes, method="NMF on TF-IDF", n_topics=n_topics)
    title = f"Per-class topics (NMF on TF-IDF; BERTopic not installed)\n{_n_line(df, n_failed)}"
    if not rows:
        return table, _empty_fig(title, "no topics (see notes)")
    ncols = max(t for _, t in weights) + 1
    fig, axes = plt.subplots(2, ncols, figsize=(3.3 * ncols + 0.5, 6.2), squeeze=False)
    for c in (0, 1):
        for t in range(ncols):
            ax = axes[c][t]
            if (c, t) not in weights:
                ax.axis("off")
                continue
            words = weights[(c, t)][::-1]
            ax.barh(range(len(words)), [v for _, v in words], color=CLASS_COLORS[c])
            ax.set_yticks(range(len(words)), [w for w, _ in words], fontsize=8)
            share = table.loc[(table["label"] == c) & (table["topic"] == t), "share"].iloc[0]
            ax.set_title(f"class {c}, topic {t} ({share:.0%} of items)", fontsize=8)
            ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return table, fig


# -- 2-D projection ----------------------------------------------------------------------------------------

def projection(items: pd.DataFrame, vectors: Any, seed: int = 0, min_umap: int = UMAP_MIN_ITEMS,
               n_neighbors: int = 15, metric: str = "cosine", method: str = "auto") -> tuple[pd.DataFrame, Figure]:
    """A 2-D projection of rubric embeddings coloured by judge label (seed 004 Fig. 6; markers by ``dataset``
    when that column is present).

    ``vectors``: one embedding per row of ``items`` in the same order (array-like, shape ``(len(items), d)``,
    failed-label rows included; they are dropped with their items). ``method`` (``probe.projection``): ``auto`` is
    UMAP (umap-learn; ``n_neighbors`` capped at n - 1, ``metric``, ``random_state=seed``) when at least
    ``min_umap`` labelled items, otherwise PCA (scikit-learn); ``umap`` is UMAP from 4 labelled items; ``pca`` is
    PCA at any size — the method used is in the table's ``method`` column, its attrs and the figure title.
    Table: ``item_id, record_id, label, [dataset,] x, y, method``.
    """
    if method not in PROBE_PROJECTIONS:
        raise ArgumentError(f"projection method {method!r}; allowed: {', '.join(PROBE_PROJECTIONS)}")
    df, n_failed, keep = _prepare(items)
    V = np.asarray(vectors, dtype=float)
    if V.ndim != 2 or V.shape[0] != len(items):
        raise ArgumentError(f"vectors must have shape (len(items)={len(items)}, d); got {V.shape}")
    V = V[keep]
    n = len(df)
    notes: list[str] = []
    asked, method = method, "PCA"
    least = 4 if asked == "umap" else min_umap  # labelled items for UMAP (its neighbour graph needs 4)
    xy = np.zeros((n, 2))
    if asked == "pca":
        notes.append("PCA, as asked (probe.projection: pca)")
    elif n >= max(least, 4):
        try:
            import umap

            k = max(2, min(n_neighbors, n - 1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # n_jobs overridden by random_state, etc.
                xy = umap.UMAP(n_components=2, n_neighbors=k, metric=metric, random_state=seed,
                               init="spectral").fit_transform(V)
            method = f"UMAP (n_neighbors={k}, metric={metric})"
        except ImportError:
            notes.append("umap-learn not importable: PCA instead")
    else:
        notes.append(f"{n} labelled items < {least}: PCA instead of UMAP")
    if method == "PCA" and n:
        from sklearn.decomposition import PCA

        k = min(2, n, V.shape[1])
        if k >= 1 and n >= 2:
            xy[:, :k] = PCA(n_components=k, random_state=seed).fit_transform(V)
        if k < 2:
            notes.append(f"only {k} principal component(s) possible; missing coordinates are 0")
    cols = [c for c in ("item_id", "record_id") if c in df.columns]
    table = df[cols + ["label"] + (["dataset"] if "dataset" in df.columns else [])].copy()
    table["x"], table["y"], table["method"] = xy[:, 0], xy[:, 1], method
    table = _finish(table.reset_index(drop=True), df, n_failed, notes, method=method)

    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    datasets = sorted(df["dataset"].astype(str).unique()) if "dataset" in df.columns else [None]
    markers = ["o", "^", "s", "D", "v", "P", "X", "*"]
    for di, ds in enumerate(datasets):
        for c in (0, 1):
            m = (table["label"] == c).to_numpy()
            if ds is not None:
                m = m & (table["dataset"].astype(str) == ds).to_numpy()
            if m.any():
                ax.scatter(table.loc[m, "x"], table.loc[m, "y"], s=14, alpha=0.7, color=CLASS_COLORS[c],
                           marker=markers[di % len(markers)],
                           label=CLASS_NAMES[c] + ("" if ds is None else f" · {ds}"))
    ax.set_xlabel(f"{method.split(' ')[0]} 1")
    ax.set_ylabel(f"{method.split(' ')[0]} 2")
    if n:
        ax.legend(fontsize=7, markerscale=1.5)
    ax.set_title(f"2-D projection of rubric embeddings: {method}\n{_n_line(df, n_failed)}", fontsize=9)
    fig.tight_layout()
    return table, fig


# -- all of them -------------------------------------------------------------------------------------------

def semantic_report(items: pd.DataFrame, *, fitted_lr: Any | None = None, vectors: Any | None = None,
                    seed: int = 0, cues: list[str] | None = None, top: int = 15, n_topics: int = 3,
                    lr_items: pd.DataFrame | None = None, name: str | None = None,
                    projection_method: str = "auto") -> dict[str, dict[str, Any]]:
    """Run every analysis: ``{name: {"table": DataFrame, "figure": Figure, "notes": [str, ...]}}`` for
    ``lexical_cues``, ``lr_weights``, ``word_counts``, ``topics`` and, when ``vectors`` is given,
    ``projection`` (left out otherwise). Notes start with the n per class and failed-label count.

    Pass one dataset (one cohort) at a time: pooled datasets mix label bases. ``lr_items`` are the items
    ``fitted_lr`` was trained on (its n goes into the LR figure's title; default ``items``); ``name`` (the
    dataset) heads every figure's title and the notes."""
    runs = {
        "lexical_cues": lambda: lexical_cues(items, cues=cues, top=top),
        "lr_weights": lambda: lr_weights(fitted_lr, items if lr_items is None else lr_items, top=top, seed=seed),
        "word_counts": lambda: word_counts(items),
        "topics": lambda: topics(items, n_topics=n_topics, seed=seed),
    }
    if vectors is not None:
        runs["projection"] = lambda: projection(items, vectors, seed=seed, method=projection_method)
    out: dict[str, dict[str, Any]] = {}
    for key, run in runs.items():
        table, fig = run()
        a = table.attrs
        head = (f"n = {a['n_0']} not satisfied (0) / {a['n_1']} satisfied (1); "
                f"{a['n_failed']} failed labels excluded")
        if name:
            _prefix_title(fig, name)
            head = f"{name}: {head}"
        out[key] = {"table": table, "figure": fig, "notes": [head, *a.get("notes", [])]}
    return out


def _prefix_title(fig: Figure, name: str) -> None:
    """Put the dataset's name in front of the figure's (super)title, so a figure never hides what it counts."""
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        sup.set_text(f"{name}: {sup.get_text()}")
    elif fig.axes:
        ax = fig.axes[0]
        ax.set_title(f"{name}: {ax.get_title()}", fontsize=ax.title.get_fontsize())


def write_semantic_report(report: dict[str, dict[str, Any]], out_dir: str | Path, close: bool = True) -> list[Path]:
    """Write ``<name>.csv``, ``<name>.png`` per analysis and ``semantics_notes.md`` under ``out_dir``; close the
    figures unless ``close=False``. Returns the written paths (to log as MLflow artifacts)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    md = ["# Semantic analyses of rubric items", ""]
    for name, r in report.items():
        csv, png = out / f"{name}.csv", out / f"{name}.png"
        atomic.write_csv(r["table"], csv, index=False)
        atomic.save_figure(r["figure"], png, dpi=130, bbox_inches="tight")
        if close:
            plt.close(r["figure"])
        paths += [csv, png]
        md += [f"## {name}", "", *["- " + re.sub(r"\s+", " ", s) for s in r["notes"]], ""]
    notes = out / "semantics_notes.md"
    atomic.write_text(notes, "\n".join(md), encoding="utf-8")
    return [*paths, notes]
