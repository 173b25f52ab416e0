"""Seeded disjoint splits, proportional shrinking, and the build_splits driver."""

from __future__ import annotations

import json
import random

import pytest

from rubriclab.data import Pair, allocate, bench_target_splits, build_splits, premise_splits, read_pairs
from rubriclab.errors import ConfigError
from rubriclab.settings import Data, MaxChars, Params, Premise


def _pairs(n, prefix="p", prompts=None):
    return [
        Pair(f"{prefix}{i}", "d", prompts[i] if prompts else f"{prefix} question {i}", f"good {i}", f"bad {i}", {})
        for i in range(n)
    ]


def _ids(splits):
    return {k: [p.id for p in v] for k, v in splits.items()}


SIZES = {"extraction": 30, "audit": 20, "heldout": 40}


def test_premise_splits_disjoint_sized_and_seeded():
    pairs = _pairs(120)
    a = premise_splits(pairs, SIZES, seed=42)
    assert {k: len(v) for k, v in a.items()} == SIZES
    all_ids = [i for ids in _ids(a).values() for i in ids]
    assert len(all_ids) == len(set(all_ids))
    shuffled = pairs[:]
    random.Random(0).shuffle(shuffled)
    assert _ids(premise_splits(shuffled, SIZES, seed=42)) == _ids(a)  # input order does not matter
    assert _ids(premise_splits(pairs, SIZES, seed=7)) != _ids(a)


def test_shrink_is_proportional_and_reported():
    assert allocate(100, {"a": 10, "b": 20}) == {"a": 10, "b": 20}
    assert allocate(50, {"extraction": 40, "audit": 20, "heldout": 40}) == {
        "extraction": 20,
        "audit": 10,
        "heldout": 20,
    }
    assert allocate(7, {"a": 1, "b": 1, "c": 1}) == {"a": 1, "b": 1, "c": 1}
    got = allocate(10, {"a": 10, "b": 10, "c": 10})
    assert sum(got.values()) == 10 and got == {"a": 4, "b": 3, "c": 3}
    out = premise_splits(_pairs(50), {"extraction": 40, "audit": 20, "heldout": 40}, seed=1)
    assert {k: len(v) for k, v in out.items()} == {"extraction": 20, "audit": 10, "heldout": 20}


def test_pairs_sharing_a_prompt_stay_in_one_split():
    prompts = [f"q{i // 3}" for i in range(90)]  # 30 prompts, 3 pairs each
    out = premise_splits(_pairs(90, prompts=prompts), {"extraction": 30, "audit": 30, "heldout": 30}, seed=3)
    where = {}
    for name, split in out.items():
        for p in split:
            assert where.setdefault(p.prompt, name) == name
    assert sum(len(v) for v in out.values()) == 90


def test_split_sizes_and_duplicates_are_checked():
    with pytest.raises(ConfigError, match="extraction, audit, heldout"):
        premise_splits(_pairs(10), {"extraction": 5, "audit": 5}, seed=1)
    with pytest.raises(ConfigError, match="non-negative integer"):
        premise_splits(_pairs(10), {"extraction": -1, "audit": 5, "heldout": 1}, seed=1)
    with pytest.raises(ValueError, match="more than once"):
        premise_splits(_pairs(5) + _pairs(1), {"extraction": 1, "audit": 1, "heldout": 1}, seed=1)


def test_bench_target_splits_all_disjoint_and_overlap_removed():
    bench = _pairs(60, "b")
    target = _pairs(60, "t") + bench[:5]  # the same pair on both sides must not happen
    sizes = {"train": 20, "val": 15, "test": 15}
    out = bench_target_splits(bench, target, sizes, seed=42)
    seen = []
    for side in ("bench", "target"):
        assert {k: len(v) for k, v in out[side].items()} == sizes
        seen += [p.id for v in out[side].values() for p in v]
    assert len(seen) == len(set(seen))
    assert all(p.id.startswith("t") for v in out["target"].values() for p in v)
    again = bench_target_splits(bench, target, sizes, seed=42)
    assert {s: _ids(out[s]) for s in out} == {s: _ids(again[s]) for s in again}


def _params(tmp_path):
    (tmp_path / "extra.jsonl").write_text(
        "".join(json.dumps({"prompt": f"q{i}", "chosen": f"c{i}", "rejected": f"r{i}"}) + "\n" for i in range(30))
        + json.dumps({"prompt": "q", "chosen": "same", "rejected": "same"})
        + "\n",
        encoding="utf-8",
    )
    return {
        "seed": 42,
        "sources": {
            "demo_helpful": {"loader": "demo", "domain": "helpful"},
            "demo_harmless": {"loader": "demo", "domain": "harmless"},
            "extra": {"loader": "local", "path": "extra.jsonl", "domain": "misc"},
            "unused": {"loader": "local", "path": "does-not-exist.jsonl"},
        },
        "premise": {"sources": ["demo_helpful", "extra"], "extraction": 60, "audit": 40, "heldout": 50},
        "ripd": {"demo": {"bench": "demo_helpful", "target": "demo_harmless", "train": 40, "val": 30, "test": 30}},
    }


def test_build_splits_writes_files_and_report(tmp_path):
    out = tmp_path / "out"
    report = build_splits(_params(tmp_path), out, tmp_path)
    json.dumps(report)  # JSON-able
    assert set(report["sources"]) == {"demo_helpful", "demo_harmless", "extra"}  # unused source not loaded
    assert report["sources"]["extra"]["drops"] == {"identical_responses": 1}
    assert report["sources"]["demo_helpful"]["loaded"] == 160
    assert report["premise"]["demo_helpful"]["heldout"] == {"requested": 50, "written": 50}
    # 30 pairs cannot fill 60/40/50: shrunk proportionally, and the report says so
    assert report["premise"]["extra"] == {
        "extraction": {"requested": 60, "written": 12},
        "audit": {"requested": 40, "written": 8},
        "heldout": {"requested": 50, "written": 10},
        "dev": {"requested": 0, "written": 0},  # not asked for: an empty file, so `repair` can say so
    }
    assert report["ripd"]["demo"]["splits"]["target"]["test"] == {"requested": 30, "written": 30}

    ids = set()
    for name in ("extraction", "audit", "heldout"):
        pairs = read_pairs(out / "premise" / "demo_helpful" / f"{name}.parquet")
        assert len(pairs) == report["premise"]["demo_helpful"][name]["written"]
        assert not ids & {p.id for p in pairs}
        ids |= {p.id for p in pairs}
        assert all(p.meta["planted"] for p in pairs)
    ripd_ids = []
    for side in ("bench", "target"):
        for name in ("train", "val", "test"):
            ripd_ids += [p.id for p in read_pairs(out / "ripd" / "demo" / f"{side}_{name}.parquet")]
    assert len(ripd_ids) == len(set(ripd_ids)) == 200

    out2 = tmp_path / "out2"
    assert build_splits(_params(tmp_path), out2, tmp_path) == report
    assert (out / "ripd/demo/bench_val.parquet").read_bytes() == (out2 / "ripd/demo/bench_val.parquet").read_bytes()


def test_build_splits_config_errors(tmp_path):
    params = _params(tmp_path)
    params["premise"]["sources"] = ["nope"]
    with pytest.raises(ConfigError, match="source 'nope' is not defined"):
        build_splits(params, tmp_path / "o", tmp_path)
    params = _params(tmp_path)
    params["ripd"]["demo"].pop("target")
    with pytest.raises(ConfigError, match=r"^params\.yaml: data\.ripd\.demo\.target: missing; expected a non-empty "
                                          r"string$"):
        build_splits(params, tmp_path / "o", tmp_path)


def test_build_splits_takes_the_typed_data_section_with_the_schemas_defaults(tmp_path):
    typed = Params.of({"data": _params(tmp_path)}).data
    assert build_splits(typed, tmp_path / "typed", tmp_path) == build_splits(_params(tmp_path), tmp_path / "raw", tmp_path)
    # an omitted setting is the schema's one default: seed, split sizes, max_chars
    data = {"sources": {"h": {"loader": "demo", "domain": "helpful"}}, "premise": {"sources": ["h"]}}
    report = build_splits(Data.model_validate(data), tmp_path / "defaults", tmp_path)
    assert report["seed"] == Data().seed and report["max_chars"] == MaxChars().model_dump()
    assert {k: v["requested"] for k, v in report["premise"]["h"].items()} == Premise().model_dump(exclude={"sources"})
    assert build_splits({**data, "seed": Data().seed}, tmp_path / "seeded", tmp_path) == report


def test_dev_split_is_disjoint_seeded_and_leaves_the_other_splits_as_they_were():
    pairs = _pairs(120)
    without = premise_splits(pairs, {"extraction": 30, "audit": 20, "heldout": 40}, seed=42)
    with_dev = premise_splits(pairs, {"extraction": 30, "audit": 20, "heldout": 40, "dev": 20}, seed=42)
    assert len(with_dev["dev"]) == 20 and "dev" not in without  # dev is optional
    for name in ("extraction", "audit", "heldout"):
        assert _ids(with_dev)[name] == _ids(without)[name]
    all_ids = [p.id for split in with_dev.values() for p in split]
    assert len(all_ids) == len(set(all_ids)) == 110
    assert _ids(premise_splits(pairs, {"extraction": 30, "audit": 20, "heldout": 40, "dev": 20}, seed=7))["dev"] \
        != _ids(with_dev)["dev"]
