"""Row validation, drop counting and file-level errors."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from rubriclab.data import clean_pairs, load_source, read_pairs, read_rows, write_pairs
from rubriclab.errors import InputError


def _row(i, **kw):
    row = {"id": f"r{i}", "domain": "d", "prompt": f"q{i}", "chosen": "yes", "rejected": "no", "meta": {}}
    row.update(kw)
    return row


def test_clean_pairs_counts_every_drop_reason():
    rows = [
        _row(1),
        _row(2, chosen=None),
        {k: v for k, v in _row(3).items() if k != "prompt"},
        _row(4, rejected="   "),
        _row(5, chosen="same", rejected=" same "),
        _row(1, prompt="another"),  # duplicate id
        _row(6, chosen="bad \ufffd text"),
        _row(7, prompt="lone \ud800 surrogate"),
        _row(8, chosen=123),
        _row(9, prompt="  "),
        _row(10),
    ]
    pairs, drops = clean_pairs(enumerate(rows, 1), "test-source")
    assert [p.id for p in pairs] == ["r1", "r10"]
    assert drops == {
        "missing_field": 2,
        "empty_response": 1,
        "identical_responses": 1,
        "duplicate_id": 1,
        "undecodable_text": 3,
        "empty_prompt": 1,
    }
    assert sum(drops.values()) + len(pairs) == len(rows)  # nothing vanishes unaccounted
    assert pairs[0].meta == {"source": "test-source", "line": 1}


def test_clean_pairs_default_domain_and_meta_json_string():
    rows = [(1, {**_row(1, meta='{"x": 1}'), "domain": None})]
    pairs, drops = clean_pairs(rows, "s", default_domain="fallback")
    assert not drops and pairs[0].domain == "fallback" and pairs[0].meta["x"] == 1


def test_corrupt_jsonl_line_names_file_and_line(tmp_path):
    f = tmp_path / "pairs.jsonl"
    good = json.dumps(_row(1))
    f.write_text(good + "\n" + '{"id": "r2", "prompt": "oops"' + "\n" + good + "\n", encoding="utf-8")
    with pytest.raises(InputError) as exc:
        read_rows(f)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{f}:2: invalid JSON")
    assert "expected one JSON object per line" in msg
    assert exc.value.line == 2 and exc.value.file == str(f)


def test_non_object_jsonl_line_is_an_error(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text(json.dumps(_row(1)) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r":2: line holds a JSON list"):
        read_rows(f)


def test_missing_column_names_field_and_lists_columns(tmp_path):
    f = tmp_path / "pairs.csv"
    pd.DataFrame({"question": ["q"], "good": ["a"], "worse": ["b"]}).to_csv(f, index=False)
    spec = {"loader": "local", "path": str(f), "columns": {"prompt": "question", "chosen": "good", "rejected": "bad"}}
    with pytest.raises(InputError) as exc:
        load_source(spec, tmp_path, name="mine")
    assert exc.value.field == "bad"
    assert "field 'bad'" in str(exc.value)
    assert "available: question, good, worse" in str(exc.value)


def test_undecodable_bytes_in_file_are_dropped_and_counted(tmp_path):
    f = tmp_path / "pairs.jsonl"
    bad = json.dumps(_row(2)).encode().replace(b'"yes"', b'"y\xffs"')
    f.write_bytes(json.dumps(_row(1)).encode() + b"\n" + bad + b"\n")
    pairs, drops = load_source({"loader": "local", "path": str(f)}, tmp_path, name="x")
    assert [p.id for p in pairs] == ["r1"] and drops == {"undecodable_text": 1}


def test_read_rows_formats(tmp_path):
    rows = [_row(1), _row(2)]
    (tmp_path / "a.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress("\n".join(map(json.dumps, rows)).encode()))
    pd.DataFrame(rows).drop(columns="meta").to_csv(tmp_path / "c.csv", index=False)
    pd.DataFrame(rows).drop(columns="meta").to_parquet(tmp_path / "d.parquet")
    for name in ("a.json", "b.jsonl.gz", "c.csv", "d.parquet"):
        got = read_rows(tmp_path / name)
        assert [r["id"] for _, r in got] == ["r1", "r2"], name
    assert [n for n, _ in read_rows(tmp_path / "c.csv")] == [2, 3]  # header is line 1
    with pytest.raises(InputError, match="unknown file type"):
        read_rows(tmp_path / "x.txt")
    with pytest.raises(InputError, match="file not found"):
        read_rows(tmp_path / "missing.jsonl")
    (tmp_path / "broken.json").write_text('[{"id": 1},\n {"id": }]', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken.json:2: invalid JSON"):
        read_rows(tmp_path / "broken.json")


def test_write_and_read_pairs_round_trip(tmp_path):
    pairs, _ = clean_pairs(enumerate([_row(1, meta={"planted": ["a", "b"]}), _row(2)], 1), "s")
    for name in ("p.parquet", "p.jsonl"):
        path = write_pairs(pairs, tmp_path / name)
        assert read_pairs(path) == pairs
    df = pd.read_parquet(tmp_path / "p.parquet")
    assert list(df.columns) == ["id", "domain", "prompt", "chosen", "rejected", "meta"]
    assert json.loads(df["meta"][0])["planted"] == ["a", "b"]  # meta stored as a JSON string
