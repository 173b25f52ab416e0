"""data.max_chars: a pair whose prompt or response is past the limit is dropped in the data stage, counted by
reason, before any model sees it (issue 26: a 5 MB response went whole to the judge)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rubriclab.data import DEFAULT_MAX_CHARS, build_splits, load_source
from rubriclab.errors import ConfigError


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _rows(n=12, **big):
    rows = [{"id": f"p{i}", "domain": "d", "prompt": f"question {i}", "chosen": f"yes {i}", "rejected": f"no {i}"}
            for i in range(n)]
    for i, (field, size) in enumerate(big.items()):
        rows[i][field.split("_")[0]] = "x" * size
    return rows


def test_a_five_megabyte_response_is_dropped_and_counted_not_split(tmp_path):
    _write(tmp_path / "a.jsonl", _rows(chosen_big=5_000_000, prompt_big=DEFAULT_MAX_CHARS["prompt"] + 1))
    data = {"seed": 1, "sources": {"a": {"loader": "local", "path": "a.jsonl"}},
            "premise": {"sources": ["a"], "extraction": 4, "audit": 3, "heldout": 3, "dev": 0}}
    report = build_splits(data, tmp_path / "out", base_dir=tmp_path)
    src = report["sources"]["a"]
    assert src["drops"] == {"prompt_too_long": 1, "response_too_long": 1}
    assert src["loaded"] == src["available"] == 10 and report["max_chars"] == DEFAULT_MAX_CHARS
    written = pd.concat(pd.read_parquet(p) for p in (tmp_path / "out").rglob("*.parquet"))
    assert len(written) == 10 and set(written["id"]).isdisjoint({"p0", "p1"})
    assert written[["prompt", "chosen", "rejected"]].map(len).max().max() < 100


def test_the_limit_is_a_setting_and_bad_values_name_the_key(tmp_path):
    _write(tmp_path / "a.jsonl", _rows(rejected_big=500))
    pairs, drops = load_source({"loader": "local", "path": "a.jsonl"}, tmp_path)
    assert len(pairs) == 12 and not drops
    data = {"seed": 1, "sources": {"a": {"loader": "local", "path": "a.jsonl"}}, "max_chars": {"response": 100},
            "premise": {"sources": ["a"], "extraction": 4, "audit": 3, "heldout": 3, "dev": 0}}
    report = build_splits(data, tmp_path / "out", base_dir=tmp_path)
    assert report["sources"]["a"]["drops"] == {"response_too_long": 1}
    # a mapping is checked by the schema, with the data stage's one-line errors
    with pytest.raises(ConfigError, match=r"^params\.yaml: data\.max_chars\.response: got 0; expected an integer >= 1$"):
        build_splits({**data, "max_chars": {"response": 0}}, tmp_path / "out2", base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"^params\.yaml: data\.max_chars\.answer: unknown key; expected one of prompt, "
                                          r"response$"):
        build_splits({**data, "max_chars": {"answer": 5}}, tmp_path / "out3", base_dir=tmp_path)


def test_a_limit_applies_before_the_sample_so_limit_pairs_are_still_kept(tmp_path):
    _write(tmp_path / "a.jsonl", _rows(chosen_big=40_000))
    pairs, drops = load_source({"loader": "local", "path": "a.jsonl", "limit": 11}, tmp_path)
    assert len(pairs) == 11 and drops == {"response_too_long": 1}
