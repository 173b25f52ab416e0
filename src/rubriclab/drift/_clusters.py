"""Prompt clusters for the drift gate, when the data carries no domain labels (or ``--by cluster``).

Prompts are embedded with the embedder role (``llm.embed_texts``, cached in the call store), L2-normalised
and grouped by k-means (scikit-learn, ``n_init=10``, seeded). ``k`` defaults to
``min(max_k, max(2, round(sqrt(n / 2))))`` (and at most n, and at most the number of distinct embeddings). Each cluster is named by its top TF-IDF terms
relative to all prompts (the cluster's mean TF-IDF vector minus the overall mean), so boilerplate shared by
every prompt ("Human:", "Assistant:") does not name a cluster and the name says what sets it apart. Clusters are numbered by size (c1 largest).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rubriclab.data import Pair
from rubriclab.errors import InputError
from rubriclab.llm import CallStore, RoleSpec, embed_texts

ORIGINAL_DOMAIN = "original_domain"


def default_k(n: int, max_k: int = 12) -> int:
    """``min(max_k, max(2, round(sqrt(n / 2))))``, and never more than n (1 when n < 2)."""
    if n < 2:
        return 1
    return int(min(n, max_k, max(2, round(math.sqrt(n / 2)))))


def cluster_names(texts: Sequence[str], labels: np.ndarray, n_terms: int = 3) -> dict[int, list[str]]:
    """Top ``n_terms`` terms per cluster label: TF-IDF over the prompts, a cluster's mean vector minus the mean
    over all prompts, highest first (an empty list when no term is usable)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    labels = np.asarray(labels)
    ids = sorted(set(int(x) for x in labels))
    vec = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_]{3,}\b", sublinear_tf=True)
    try:
        matrix = vec.fit_transform(texts)
    except ValueError:  # no usable term in any prompt (e.g. only numbers or stop words)
        return {c: [] for c in ids}
    vocab = np.array(vec.get_feature_names_out())
    overall = np.asarray(matrix.mean(axis=0)).ravel()
    out = {}
    for c in ids:
        score = np.asarray(matrix[labels == c].mean(axis=0)).ravel() - overall
        order = np.argsort(-score, kind="stable")
        out[c] = [str(vocab[j]) for j in order[:n_terms] if score[j] > 0]
    return out


def prompt_clusters(pairs: Sequence[Pair], *, embedder: RoleSpec, store: CallStore, k: int | None = None,
                    seed: int = 0, max_k: int = 12, n_terms: int = 3,
                    progress: bool = False) -> tuple[list[Pair], pd.DataFrame]:
    """Pairs relabelled by prompt cluster (``domain`` = the cluster's name, the old domain kept in
    ``meta["original_domain"]``) and a table ``cluster, name, n, terms, example``."""
    pairs = list(pairs)
    if not pairs:
        raise InputError("no pairs to cluster", field="pairs", expected="at least one preference pair")
    k = default_k(len(pairs), max_k) if k is None else int(k)
    if not 1 <= k <= len(pairs):
        raise InputError(f"{k} clusters asked for {len(pairs)} pairs", field="clusters",
                         expected=f"between 1 and {len(pairs)}")
    texts = [p.prompt for p in pairs]
    if k == 1:
        labels = np.zeros(len(pairs), dtype=int)
    else:
        from sklearn.cluster import KMeans

        vectors = embed_texts(texts, embedder, store, progress=progress)
        distinct = len(np.unique(vectors.round(9), axis=0))  # k-means cannot make more clusters than points
        k = min(k, distinct)
        labels = (np.zeros(len(pairs), dtype=int) if k == 1 else
                  KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(vectors))
    sizes = pd.Series(labels).value_counts()
    rank = {int(c): i + 1 for i, c in enumerate(sorted(sizes.index, key=lambda c: (-sizes[c], int(c))))}
    terms = cluster_names(texts, labels, n_terms)
    names = {c: f"c{rank[c]}" + (f" ({', '.join(terms[c])})" if terms.get(c) else "") for c in rank}
    out = [dataclasses.replace(p, domain=names[int(lab)], meta={**p.meta, ORIGINAL_DOMAIN: p.domain})
           for p, lab in zip(pairs, labels)]
    table = pd.DataFrame([
        {"cluster": rank[c], "name": names[c], "n": int(sizes[c]), "terms": ", ".join(terms.get(c, [])),
         "example": next(" ".join(p.prompt.split())[:100] for p, lab in zip(pairs, labels) if lab == c)}
        for c in sorted(rank, key=rank.get)])
    return out, table
