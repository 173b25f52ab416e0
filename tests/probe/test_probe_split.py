"""The probe's held-out split: near-duplicate wordings (a trailing period, case, quotes) stay on one side, and the
held-out share of items — not of groups — is what was asked, or the split is refused."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from rubriclab.errors import InputError
from rubriclab.probe import run_probe


def _key(text: str) -> str:
    """An independent near-duplicate key: letters and digits only, lower case."""
    return re.sub(r"[^0-9a-z]+", " ", text.lower()).strip()


def _items(n_records: int = 80, seed: int = 0) -> pd.DataFrame:
    """Each record: its own two criteria, and one criterion shared with one other record, written there with a
    trailing period or another case (the same wording to a reader)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n_records):
        shared = f"the response cites source number {r // 2}"
        variant = shared + "." if r % 2 else shared.capitalize()
        for k, text in enumerate([f"record {r} criterion alpha {k}" for k in range(2)] + [variant]):
            rows.append({"item_id": f"{r}-{k}", "record_id": f"r{r}", "criterion": text,
                         "label": int(rng.random() < (0.8 if "cites" in text else 0.4))})
    return pd.DataFrame(rows)


def test_near_duplicate_wordings_never_cross_the_split() -> None:
    items = _items()
    res = run_probe(items, models=["majority", "nb"], n_boot=50, cv_folds=0)
    test_ids = set(res["predictions"]["item_id"])
    train = items[~items["item_id"].isin(test_ids)]
    test = items[items["item_id"].isin(test_ids)]
    crossing = set(train["criterion"].map(_key)) & set(test["criterion"].map(_key))
    assert not crossing, sorted(crossing)[:3]
    assert res["split"]["overlap_texts"] == 0 and res["split"]["overlap_records"] == 0


def test_the_held_out_item_share_is_reported_and_near_the_asked_one() -> None:
    items = _items()
    res = run_probe(items, models=["majority", "nb"], n_boot=50, cv_folds=0, test_size=0.2)
    sp = res["split"]
    assert sp["test_item_share"] == pytest.approx(sp["n_test_items"] / len(items))
    assert abs(sp["test_item_share"] - 0.2) <= sp["split_tolerance"] == 0.1


def test_a_component_holding_most_items_is_refused_with_the_share_it_would_hold_out() -> None:
    """60% of the items chain into one cluster (a wording every one of those records uses): any group split holds
    out either ~60% or ≤ 40% of the items in a handful of small groups — GroupShuffleSplit counts groups, not items."""
    rows = []
    for r in range(30):
        for k in range(4):
            text = "one wording every big record uses" if (r < 18 and k == 0) else f"record {r} own {k}"
            rows.append({"item_id": f"{r}-{k}", "record_id": f"r{r}", "criterion": text, "label": (r + k) % 2})
    items = pd.DataFrame(rows)
    with pytest.raises(InputError, match=r"no group split holds out 50% of the items within ±5%.*largest of"):
        run_probe(items, models=["majority"], n_boot=20, cv_folds=0, test_size=0.5, split_tolerance=0.05)
    # 20% asked: three small clusters (10% of the items) are within the default ±10%, and the big one stays in
    ok = run_probe(items, models=["majority"], n_boot=20, cv_folds=0, test_size=0.2)
    assert ok["split"]["test_item_share"] == pytest.approx(0.1) and ok["split"]["n_test_groups"] == 3
