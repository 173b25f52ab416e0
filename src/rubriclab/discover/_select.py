"""Step 3 of discovery: support filter, genericity filter, and maximal marginal relevance to K."""

from __future__ import annotations

from typing import Any

import numpy as np

from rubriclab.discover._consolidate import Node


def filter_pool(nodes: list[Node], *, n_min: int, min_pairs: int) -> tuple[list[Node], list[dict[str, Any]]]:
    """Keep nodes backed by ≥ ``n_min`` raw candidates (support) drawn from ≥ ``min_pairs`` distinct
    pairs (genericity: a criterion seen in only one or two pairs describes those pairs, not the
    policy). Returns (kept, dropped rows with the reason)."""
    kept, dropped = [], []
    for n in nodes:
        if n.support < n_min:
            dropped.append({"id": n.id, "support": n.support, "pairs": len(n.pairs), "reason": "support"})
        elif len(n.pairs) < min_pairs:
            dropped.append({"id": n.id, "support": n.support, "pairs": len(n.pairs), "reason": "genericity"})
        else:
            kept.append(n)
    return kept, dropped


def mmr_select(nodes: list[Node], X: np.ndarray, k: int, lam: float) -> list[int]:
    """Greedy MMR: argmax_i λ·support_i/max(support) − (1−λ)·max_{j∈S} cos(x_i, x_j).

    ``X`` rows are L2-normalised embeddings of the nodes. Ties go to higher support, then id order,
    so the selection is deterministic."""
    if not nodes:
        return []
    support = np.array([n.support for n in nodes], dtype=float)
    relevance = support / support.max()
    sims = X @ X.T
    chosen: list[int] = []
    remaining = sorted(range(len(nodes)), key=lambda i: nodes[i].id)  # max() keeps the first of ties

    def mmr(i: int) -> tuple[float, float]:
        redundancy = max((sims[i, j] for j in chosen), default=0.0)
        return (lam * relevance[i] - (1 - lam) * redundancy, support[i])

    while remaining and len(chosen) < k:
        best = max(remaining, key=mmr)
        chosen.append(best)
        remaining.remove(best)
    return chosen
