"""Semantic analyses of rubric items by judge label (seed 004 §5.3, Appendix F) on planted data."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from rubriclab.probe import (
    DEFAULT_CUES,
    lexical_cues,
    lr_weights,
    projection,
    semantic_report,
    topics,
    word_counts,
    write_semantic_report,
)

POS_TOPICS = ["the correct dosage of ibuprofen", "vaccination timing for infants", "antibiotic course length"]
NEG_TOPICS = ["emergency services for chest pain symptoms and urgent escalation",
              "interactions between warfarin and common medication in elderly patients",
              "verbose repetitive answers that restate the question at length without adding information"]


def planted_items(n_per_class: int = 30, n_failed: int = 4, seed: int = 0) -> pd.DataFrame:
    """Class 1: short items with "must mention"; class 0: longer items with "should avoid"; plus failed labels."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_per_class):
        rows.append({"criterion": f"Response must mention {POS_TOPICS[i % 3]}.", "label": 1})
        filler = " ".join(rng.choice(["clearly", "carefully", "in", "detail", "overall"], size=6))
        rows.append({"criterion": f"Response should avoid discussing {NEG_TOPICS[i % 3]} {filler}.", "label": 0})
    for i in range(n_failed):
        rows.append({"criterion": f"Response must mention failedonlyword {i}.", "label": np.nan})
    df = pd.DataFrame(rows)
    df.insert(0, "record_id", [f"r{i // 4}" for i in range(len(df))])
    df.insert(0, "item_id", [f"i{i}" for i in range(len(df))])
    return df


def assert_saves(fig: Figure, tmp_path, name: str) -> None:
    assert isinstance(fig, Figure)
    path = tmp_path / f"{name}.png"
    fig.savefig(path)
    assert path.stat().st_size > 0


def test_lexical_cues_rank_planted_words_toward_class_1(tmp_path):
    items = planted_items()
    table, fig = lexical_cues(items, top=5)
    ranked = table[table["source"] == "log-odds"]
    to1 = ranked[ranked["toward"] == 1].sort_values("log_odds", ascending=False)
    assert {"must", "mention"} <= set(to1["token"].head(5))
    to0 = ranked[ranked["toward"] == 0]
    assert {"should", "avoid"} <= set(to0["token"])
    fixed = table[table["source"] == "fixed"].set_index("token")
    assert list(fixed.index) == list(DEFAULT_CUES)
    assert fixed.loc["must", "rate_1"] == 1.0 and fixed.loc["must", "rate_0"] == 0.0
    assert fixed.loc["must", "count_1"] == 30 and fixed.loc["must", "toward"] == 1
    assert fixed.loc["fails", "count_0"] == fixed.loc["fails", "count_1"] == 0  # absent cue: zero, neither class
    assert fixed.loc["fails", "toward"] == -1
    assert "failedonlyword" not in set(table["token"])  # failed items never counted
    assert table.attrs["n_failed"] == 4 and table.attrs["n_0"] == table.attrs["n_1"] == 30
    assert "4 failed labels excluded" in fig._suptitle.get_text()
    assert_saves(fig, tmp_path, "cues")


def test_lr_weights_fit_here_put_planted_words_on_the_positive_side(tmp_path):
    table, fig = lr_weights(None, planted_items(), top=6)
    pos = set(table.loc[table["toward"] == 1, "token"])
    assert {"must", "mention"} & pos
    assert (table.loc[table["toward"] == 1, "weight"] > 0).all()
    assert (table.loc[table["toward"] == 0, "weight"] < 0).all()
    assert {"should", "avoid"} & set(table.loc[table["toward"] == 0, "token"])
    assert "fit here" in table.attrs["source"] and any("in-sample" in n for n in table.attrs["notes"])
    assert_saves(fig, tmp_path, "lr")


def test_lr_weights_use_a_passed_pipeline_found_by_type_and_orient_by_classes():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    items = planted_items()
    lab = items.dropna(subset=["label"])
    pipe = Pipeline([("vec", TfidfVectorizer()), ("logreg", LogisticRegression())])
    pipe.fit(lab["criterion"], lab["label"].astype(int))
    table, _ = lr_weights(pipe, items, top=5)
    assert "passed by the caller" in table.attrs["source"] and "vec, logreg" in table.attrs["source"]
    assert {"must", "mention"} & set(table.loc[table["toward"] == 1, "token"])
    # labels as "not satisfied"/"satisfied" strings: classes_ sorts to [not satisfied, satisfied]; still positive = 1
    pipe2 = Pipeline([("v", TfidfVectorizer()), ("c", LogisticRegression())])
    pipe2.fit(lab["criterion"], lab["label"].map({0: "a_no", 1: "b_yes"}))
    t2, _ = lr_weights(pipe2, items, top=5)
    assert {"must", "mention"} & set(t2.loc[t2["toward"] == 1, "token"])
    with pytest.raises(TypeError):
        lr_weights(LogisticRegression(), items)


def test_word_counts_reflect_planted_length_difference(tmp_path):
    table, fig = word_counts(planted_items())
    t = table.set_index("label")
    assert t.loc[0, "n"] == 30 and t.loc[1, "n"] == 30
    assert t.loc[0, "median"] > t.loc[1, "median"] + 5
    assert t.loc[0, "mannwhitney_p"] < 1e-6 and table.attrs["mannwhitney_p"] == t.loc[0, "mannwhitney_p"]
    assert "Mann–Whitney" in fig._suptitle.get_text() and "4 failed labels excluded" in fig._suptitle.get_text()
    assert_saves(fig, tmp_path, "wc")


def test_topics_per_class_come_from_that_class_vocabulary(tmp_path):
    items = planted_items()
    lab = items.dropna(subset=["label"])
    vocab = {c: set(" ".join(lab.loc[lab["label"] == c, "criterion"]).lower().replace(".", "").split()) for c in (0, 1)}
    table, fig = topics(items, n_topics=3, top_words=5, seed=0)
    assert set(table["label"]) == {0, 1} and (table.groupby("label").size() == 3).all()
    for r in table.itertuples():
        words = r.top_words.split(", ")
        assert words and set(words) <= vocab[r.label]
    only1 = vocab[1] - vocab[0]
    assert any(set(w.split(", ")) & only1 for w in table.loc[table["label"] == 1, "top_words"])
    assert np.allclose(table.groupby("label")["share"].sum(), 1.0)
    assert "NMF" in table.attrs["method"]
    assert_saves(fig, tmp_path, "topics")


def test_topics_degrade_gracefully_on_small_inputs(tmp_path):
    items = pd.DataFrame({"item_id": ["a", "b", "c"], "record_id": ["r", "r", "r"],
                          "criterion": ["Must mention dosage.", "Should avoid jargon here.", "x"],
                          "label": [1, 0, np.nan]})
    table, fig = topics(items, n_topics=3)
    assert (table.groupby("label").size() == 1).all()
    assert any("1 topic(s) instead of 3" in n for n in table.attrs["notes"])
    assert_saves(fig, tmp_path, "topics_small")
    only0 = items.assign(label=[0, 0, np.nan])
    t2, f2 = topics(only0, n_topics=3)
    assert set(t2["label"]) == {0} and any("class 1: no labelled items" in n for n in t2.attrs["notes"])
    assert_saves(f2, tmp_path, "topics_one_class")


def blobs(items: pd.DataFrame, d: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centre = np.where(items["label"].fillna(0).to_numpy()[:, None] == 1, 4.0, -4.0) * np.eye(d)[0]
    return centre + rng.normal(size=(len(items), d)) + np.eye(d)[1] * 2


def test_projection_uses_umap_above_threshold_and_separates_blobs(tmp_path):
    items = planted_items(n_per_class=20, n_failed=3)
    table, fig = projection(items, blobs(items), seed=0)
    assert len(table) == 40 and table[["x", "y"]].notna().all().all()
    assert table.attrs["method"].startswith("UMAP") and table["method"].str.startswith("UMAP").all()
    assert table.attrs["n_failed"] == 3 and not table["item_id"].isin(items.loc[items["label"].isna(), "item_id"]).any()
    c0 = table.loc[table["label"] == 0, ["x", "y"]].mean().to_numpy()
    c1 = table.loc[table["label"] == 1, ["x", "y"]].mean().to_numpy()
    spread = table[["x", "y"]].std().mean()
    assert np.linalg.norm(c0 - c1) > spread  # two separated clusters stay separated
    assert "UMAP" in fig.axes[0].get_title() and "3 failed labels excluded" in fig.axes[0].get_title()
    assert_saves(fig, tmp_path, "umap")


def test_projection_method_asked_for_wins_over_the_item_count(tmp_path):
    """probe.projection: pca at any size, umap below the auto threshold (after the UMAP test above: its numba
    functions are compiled once per process), and an unknown method names the allowed ones."""
    many = planted_items(n_per_class=20, n_failed=3)
    table, fig = projection(many, blobs(many), method="pca")
    assert table.attrs["method"] == "PCA" and "PCA" in fig.axes[0].get_title()
    assert "PCA, as asked (probe.projection: pca)" in table.attrs["notes"]
    few = planted_items(n_per_class=4, n_failed=1)
    t2, _ = projection(few, blobs(few), method="umap")
    assert t2.attrs["method"].startswith("UMAP (n_neighbors=7") and len(t2) == 8
    assert projection(few, blobs(few))[0].attrs["method"] == "PCA"  # auto: 8 labelled items < 20
    with pytest.raises(ValueError, match="allowed: auto, umap, pca"):
        projection(few, blobs(few), method="tsne")


def test_projection_falls_back_to_pca_below_threshold(tmp_path):
    items = planted_items(n_per_class=4, n_failed=1).assign(dataset=lambda d: ["eval", "hard"] * (len(d) // 2) + ["eval"] * (len(d) % 2))
    table, fig = projection(items, blobs(items))
    assert len(table) == 8 and table.attrs["method"] == "PCA" and "dataset" in table.columns
    assert np.sign(table.loc[table["label"] == 0, "x"]).nunique() == 1  # PC1 splits the blobs
    assert "PCA" in fig.axes[0].get_title() and "1 failed label excluded" in fig.axes[0].get_title()
    assert any("PCA instead of UMAP" in n for n in table.attrs["notes"])
    assert_saves(fig, tmp_path, "pca")
    with pytest.raises(ValueError):
        projection(items, blobs(items)[:-1])
    tiny = items.iloc[:1]
    t1, f1 = projection(tiny, blobs(tiny))
    assert t1[["x", "y"]].to_numpy().shape == (1, 2)
    assert_saves(f1, tmp_path, "pca_tiny")


def test_semantic_report_runs_everything_and_writes(tmp_path):
    items = planted_items(n_per_class=8, n_failed=2)
    rep = semantic_report(items, seed=0)
    assert set(rep) == {"lexical_cues", "lr_weights", "word_counts", "topics"}  # no vectors: no projection
    rep = semantic_report(items, vectors=blobs(items), seed=0)
    assert "projection" in rep
    for name, r in rep.items():
        assert isinstance(r["table"], pd.DataFrame) and isinstance(r["figure"], Figure)
        assert r["notes"][0] == "n = 8 not satisfied (0) / 8 satisfied (1); 2 failed labels excluded", name
    paths = write_semantic_report(rep, tmp_path / "sem")
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert (tmp_path / "sem" / "topics.png").exists() and (tmp_path / "sem" / "semantics_notes.md").exists()


def test_labels_must_be_binary_or_nan():
    with pytest.raises(ValueError):
        word_counts(pd.DataFrame({"criterion": ["a"], "label": [2]}))


def test_package_exports():
    import rubriclab.probe as probe

    for name in ("lexical_cues", "lr_weights", "word_counts", "topics", "projection", "semantic_report"):
        assert name in probe.__all__ and callable(getattr(probe, name))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")
