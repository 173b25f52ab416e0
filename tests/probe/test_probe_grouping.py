"""Leakage through repeated rubric text (issue 24, seed 004): the probe's split, CV and intervals group items by
record AND by normalised criterion text; transfer drops test items already seen in training; a probe cohort is
one response source."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rubriclab.errors import InputError
from rubriclab.probe import probe_transfer, run_probe
from rubriclab.probe._classify import normalise_text

N_TEXTS, PER_BLOCK, RECORDS_PER_BLOCK = 150, 3, 8


def memorisable_items(seed: int = 0) -> pd.DataFrame:
    """Planted truth with NO generalising signal: 150 texts of random words, each with a random label, each
    reused in 8 records (records of one block share its 3 texts). Only memorising a text's identity helps, so
    a probe tested on unseen wording must be at chance."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(400)]
    texts = [" ".join(rng.choice(vocab, 6)) for _ in range(N_TEXTS)]
    label = rng.integers(0, 2, N_TEXTS)
    rows = []
    for block in range(N_TEXTS // PER_BLOCK):
        for r in range(RECORDS_PER_BLOCK):
            rid = f"b{block}r{r}"
            for k in range(PER_BLOCK):
                t = block * PER_BLOCK + k
                shown = texts[t].upper() if r % 2 else f"  {texts[t]} "  # case and spacing vary between records
                rows.append({"item_id": f"{rid}#{k}", "record_id": rid, "criterion": shown, "label": int(label[t])})
    return pd.DataFrame(rows)


def _cv_ba(res: dict, model: str = "lr") -> float:
    cv = res["cv"]
    return float(cv[(cv["model"] == model) & (cv["metric"] == "balanced_accuracy")]["mean"].iloc[0])


def _held_out_ba(res: dict, model: str = "lr") -> float:
    t = res["table"]
    return float(t[(t["model"] == model) & (t["metric"] == "balanced_accuracy")]["estimate"].iloc[0])


def test_planted_text_identity_gives_chance_when_grouped_by_text():
    items = memorisable_items()
    kw = {"models": ("majority", "lr"), "n_boot": 200, "seed": 0, "cv_folds": 5}
    by_text = run_probe(items, **kw)  # the default: clusters of records and wording
    by_record = run_probe(items, group_by="record", **kw)
    # record grouping leaks: every test wording was seen in training, so memorising it looks like a finding
    assert by_record["split"]["overlap_texts"] > 0
    assert _cv_ba(by_record) > 0.8 and _held_out_ba(by_record) > 0.8
    # grouped by text, the same probe is at chance (no generalising signal was planted)
    assert abs(_cv_ba(by_text) - 0.5) < 0.1 and abs(_held_out_ba(by_text) - 0.5) < 0.15
    s = by_text["split"]
    assert s["group_by"] == "record+text" and s["overlap_texts"] == 0 and s["overlap_records"] == 0
    assert s["n_texts"] == N_TEXTS and s["n_texts_in_several_records"] == N_TEXTS
    assert s["n_items_with_shared_text"] == len(items) and s["n_groups"] == N_TEXTS // PER_BLOCK
    cv = by_text["cv"]
    assert (cv["unit"] == "record-text clusters").all() and (cv.loc[cv["model"] == "lr", "n_folds"] == 5).all()


def test_normalised_text_is_casefolded_and_whitespace_collapsed():
    assert normalise_text("  Mentions  the\tDose\n") == normalise_text("mentions the dose") == "mentions the dose"


def test_wording_shared_by_every_record_is_refused_with_the_reason():
    items = pd.DataFrame({"item_id": [f"i{i}" for i in range(20)], "record_id": [f"r{i // 2}" for i in range(20)],
                          "criterion": ["Is polite."] * 20, "label": [0, 1] * 10})
    with pytest.raises(InputError, match=r"10 records and 1 distinct criterion texts form one cluster") as exc:
        run_probe(items, models=("majority", "lr"), n_boot=50)
    assert exc.value.field == "criterion"


def test_a_cohort_mixing_response_sources_is_refused():
    items = memorisable_items().assign(response_source="data:completion")
    items.loc[items.index[:30], "response_source"] = "data:ideal_completion"
    with pytest.raises(InputError, match="mixes 2 response sources: data:completion .1170 items.") as exc:
        run_probe(items, models=("majority", "lr"), n_boot=50)
    assert exc.value.field == "items.response_source"
    with pytest.raises(InputError, match="response sources"):
        probe_transfer(items, items.iloc[:40].assign(response_source="x"), models=("lr",), n_boot=50)


def _dataset(n_records: int, prefix: str, seed: int, dataset: str) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n_records):
        for k in range(3):
            pos = rng.random() < 0.5
            text = f"{'Must mention' if pos else 'May skip'} point {prefix}{r}-{k} carefully"
            rows.append({"item_id": f"{prefix}{r}#{k}", "record_id": f"{prefix}{r}", "criterion": text,
                         "label": int(pos), "dataset": dataset})
    return pd.DataFrame(rows)


def test_transfer_drops_and_counts_test_items_seen_in_training():
    full = _dataset(60, "p", 0, "healthbench")
    # "hard": 10 records of the full set (a subset, as HealthBench-Hard is) plus 20 new ones; one new record
    # reuses a training wording with a new id
    hard = pd.concat([full[full["record_id"].isin([f"p{i}" for i in range(10)])],
                      _dataset(20, "h", 1, "hard")], ignore_index=True).assign(dataset="hard")
    hard.loc[hard["record_id"] == "h0", "criterion"] = full["criterion"].iloc[-3:].str.upper().to_numpy()
    t = probe_transfer(full, hard, models=("majority", "lr"), n_boot=200)
    row = t[(t["model"] == "lr") & (t["metric"] == "balanced_accuracy")].iloc[0]
    assert row["n_test_dropped_record"] == 30 and row["n_test_dropped_text"] == 33
    assert row["n_test_dropped_overlap"] == 33 and row["n"] == row["n_test"] == 90 - 33
    with pytest.raises(InputError, match="all 30 test items share a record or a criterion text") as exc:
        probe_transfer(full, full.iloc[:30], models=("lr",), n_boot=50)
    assert exc.value.field == "test_items"


def test_the_stage_keeps_one_cohort_per_response_source():
    from rubriclab.probe import split_cohorts

    items = memorisable_items().assign(response_source="data:completion")
    items.loc[items.index[:30], "response_source"] = "data:ideal_completion"
    items.loc[items.index[30:32], "response_source"] = None  # no response: no label, left out and counted
    parts, note = split_cohorts("hb", items)
    assert {k: len(v) for k, v in parts.items()} == {"hb[data:completion]": len(items) - 32,
                                                     "hb[data:ideal_completion]": 30}
    assert "one probe cohort per source, never pooled; 2 items without a response left out" in note
    one, none = split_cohorts("rr", items.assign(response_source="data:response"))
    assert list(one) == ["rr"] and none is None and len(one["rr"]) == len(items)
