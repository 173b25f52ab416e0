"""`rubriclab drift check --data` goes through the data stage's size limits (issue 59): a pair whose prompt or
response is past ``data.max_chars`` is dropped and counted, whatever the file's layout (canonical pairs, plain
columns, a dataset layout) and for a ``data.sources`` entry too, before any judge call."""

from __future__ import annotations

import json

import pandas as pd

from rubriclab.data import Pair, write_pairs
from rubriclab.drift import load_gate_data

HUGE = "x" * 2_000_000  # the probe sent 2 MB requests


def _pairs(n: int, domain: str) -> list[Pair]:
    return [Pair(id=f"{domain}-{i}", domain=domain, prompt=f"question {i}?", chosen=f"good answer {i}",
                 rejected=f"bad answer {i}") for i in range(n)]


def test_a_canonical_pair_file_past_the_default_limit_loses_the_oversized_pair(tmp_path):
    pairs = _pairs(3, "bench") + _pairs(3, "target")
    pairs.append(Pair(id="huge", domain="target", prompt="q?", chosen=HUGE, rejected="short"))
    write_pairs(pairs, tmp_path / "pairs.jsonl")
    got, notes = load_gate_data(["pairs.jsonl"], {}, tmp_path)
    assert [p.id for p in got] == [p.id for p in pairs[:-1]]
    assert "1 rows dropped: response_too_long 1" in notes[0]


def test_data_max_chars_holds_for_every_layout_and_for_sources(tmp_path):
    data = {"max_chars": {"prompt": 100, "response": 50}, "sources": {"mine": {"loader": "local",
                                                                                "path": "plain.csv"}}}
    long_answer = "a fairly long answer " * 5  # 105 characters: past 50
    write_pairs(_pairs(2, "bench") + [Pair(id="long", domain="bench", prompt="q?", chosen=long_answer,
                                           rejected="no")], tmp_path / "canonical.parquet")
    pd.DataFrame([{"id": "p1", "domain": "d", "prompt": "q?", "chosen": "yes", "rejected": "no"},
                  {"id": "p2", "domain": "d", "prompt": "Q" * 150, "chosen": "yes", "rejected": "no"}]
                 ).to_csv(tmp_path / "plain.csv", index=False)
    (tmp_path / "hh.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"chosen": "\n\nHuman: hi?\n\nAssistant: hello", "rejected": "\n\nHuman: hi?\n\nAssistant: go away"},
        {"chosen": "\n\nHuman: hi?\n\nAssistant: " + long_answer, "rejected": "\n\nHuman: hi?\n\nAssistant: no"}]))
    got, notes = load_gate_data(["canonical.parquet"], data, tmp_path)
    assert {p.id for p in got} == {"bench-0", "bench-1"} and "response_too_long 1" in notes[0]
    got, notes = load_gate_data(["plain.csv"], data, tmp_path)
    assert [p.prompt for p in got] == ["q?"] and "prompt_too_long 1" in notes[0]
    got, notes = load_gate_data(["hh.jsonl"], data, tmp_path)
    assert len(got) == 1 and "response_too_long 1" in notes[0]
    got, notes = load_gate_data(["mine"], data, tmp_path)  # a data.sources entry
    assert len(got) == 1 and "prompt_too_long 1" in notes[0]
