"""The recorded-judgment record, the order mapping, and the generic long-table importer (CSV / JSON lines /
parquet): what a verdict becomes, what is never guessed, and one-line errors with file and line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rubriclab.errors import InputError
from rubriclab.recorded import (
    Judgment,
    RecordedPair,
    RecordedSet,
    Settings,
    analyze,
    plurality,
    read_table,
    to_choice,
    to_verdict,
)


def test_order_mapping_both_ways():
    assert to_choice("original", "first") == "1" and to_choice("original", "second") == "2"
    assert to_choice("swapped", "first") == "2" and to_choice("swapped", "second") == "1"
    assert to_choice("swapped", "tie") == "tie" and to_choice("swapped", "none") == "none"
    for order in ("original", "swapped"):
        for v in ("first", "second", "tie", "none"):
            assert to_verdict(order, to_choice(order, v)) == v
    j = Judgment(pair_id="p", judge="j", condition="c", order="swapped", verdict="first")
    assert j.choice == "2"


def test_record_rejects_what_is_not_a_verdict_or_order():
    with pytest.raises(InputError, match="verdict 'A'"):
        Judgment(pair_id="p", judge="j", condition="c", order="original", verdict="A")
    with pytest.raises(InputError, match="order"):
        Judgment(pair_id="p", judge="j", condition="c", order="reversed", verdict="first")
    with pytest.raises(InputError, match="annotator 'x' gave '3'"):
        RecordedPair(id="p", labels=(("x", "3"),))


def test_plurality_label_and_no_majority():
    assert plurality(["1", "1", "2"]) == "1"
    assert plurality(["tie", "tie", "1"]) == "tie"
    assert plurality(["1", "2", "tie"]) is None
    assert plurality(["2"]) == "2"
    assert plurality([]) is None
    assert RecordedPair(id="p", labels=(("a", "1"), ("b", "2"))).label is None


def test_set_rejects_unknown_pair_and_duplicate_judgment():
    pairs = {"p": RecordedPair(id="p", labels=(("a", "1"),))}
    j = Judgment(pair_id="p", judge="j", condition="c", order="original", verdict="first")
    with pytest.raises(InputError, match="unknown pair 'q'"):
        RecordedSet("s", "table", "f", pairs, [Judgment(pair_id="q", judge="j", condition="c", order="original",
                                                         verdict="first")])
    with pytest.raises(InputError, match="judged twice"):
        RecordedSet("s", "table", "f", pairs, [j, j])


ROWS = [
    # pair p1: label 1; the judge is right in both orders
    {"pair_id": "p1", "judge": "J", "condition": "c", "order": "original", "verdict": "first", "label": "1",
     "output_1": "short", "output_2": "a longer answer"},
    {"pair_id": "p1", "judge": "J", "condition": "c", "order": "swapped", "verdict": "second", "label": "1"},
    # pair p2: label 2; always picks the first-presented output
    {"pair_id": "p2", "judge": "J", "condition": "c", "order": "original", "verdict": "first", "label": "2"},
    {"pair_id": "p2", "judge": "J", "condition": "c", "order": "swapped", "verdict": "first", "label": "2"},
    # pair p3: label tie; a tie and a reply that is not a verdict
    {"pair_id": "p3", "judge": "J", "condition": "c", "order": "original", "verdict": "tie", "label": "tie"},
    {"pair_id": "p3", "judge": "J", "condition": "c", "order": "swapped", "verdict": "Output (a) maybe?",
     "label": "tie"},
]


def _write(rows, path):
    df = pd.DataFrame(rows)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".jsonl":
        path.write_text("\n".join(json.dumps({k: v for k, v in r.items() if not pd.isna(v)}) for r in rows) + "\n")
    else:
        df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_table_reads_the_same_in_every_file_type(tmp_path, suffix):
    rs = read_table(_write(ROWS, tmp_path / f"j{suffix}"))
    df = rs.frame().set_index(["pair_id", "order"])
    assert df.loc[("p1", "swapped"), "choice"] == "1"       # second presented in the swapped order = output 1
    assert df.loc[("p2", "swapped"), "choice"] == "2"
    assert df.loc[("p3", "swapped"), "verdict"] == "none"     # never guessed from "Output (a) ..."
    assert df.loc[("p3", "swapped"), "raw"] == "Output (a) maybe?"
    assert rs.pairs["p1"].output_2 == "a longer answer" and rs.pairs["p3"].label == "tie"
    assert any("not a verdict" in n for n in rs.notes)
    assert rs.counts()["verdict_none"] == 1


def test_table_metrics_by_hand(tmp_path):
    rs = read_table(_write(ROWS, tmp_path / "j.csv"))
    cell = analyze(rs, Settings(n_boot=50)).cell("J", "c")["metrics"]
    # credits: original p1 1, p2 0, p3 1 (tie = tie); swapped p1 1, p2 1 (first = output 2), p3 0 (none is wrong)
    assert cell["accuracy_original"]["value"] == pytest.approx(2 / 3)
    assert cell["accuracy_swapped"]["value"] == pytest.approx(2 / 3)
    assert cell["accuracy"]["value"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert cell["accuracy_swapped"]["n_none"] == 1
    assert cell["both_correct"]["value"] == pytest.approx(1 / 3)
    assert cell["positional_agreement"]["value"] == pytest.approx(1 / 3)  # only p1 keeps its choice
    assert cell["first_position_rate"]["value"] == pytest.approx(3 / 4)   # first, first, first, second
    for key in ("accuracy", "kappa", "macro_f1"):
        e = cell[key]
        assert e["method"] == "percentile bootstrap" and e["level"] == 0.95 and e["unit"] == "pairs" and e["n"] > 0


def test_table_choice_column_and_annotator_columns(tmp_path):
    rows = [{"pair_id": 1, "judge": "J", "order": "swapped", "choice": "1", "label.ann1": "1", "label.ann2": "2",
             "label.ann3": "1"},
            {"pair_id": 2, "judge": "J", "choice": "", "label.ann1": "tie", "label.ann2": "tie", "label.ann3": "2"}]
    rs = read_table(_write(rows, tmp_path / "t.jsonl"))
    j = {x.pair_id: x for x in rs.judgments}
    assert j["1"].verdict == "second" and j["1"].choice == "1" and j["1"].condition == "default"
    assert j["2"].verdict == "none"
    assert rs.pairs["1"].label == "1" and rs.pairs["2"].label == "tie"
    assert dict(rs.pairs["1"].labels) == {"ann1": "1", "ann2": "2", "ann3": "1"}


@pytest.mark.parametrize("rows,match", [
    ([{"pair_id": "a", "judge": "J", "verdict": "first", "label": "3"}], r"t\.csv:2: field 'label': label '3'"),
    ([{"pair_id": "a", "judge": "J", "verdict": "first", "label": "1"},
      {"pair_id": "a", "judge": "J", "verdict": "first", "label": "1"}], r"t\.csv:3: field 'pair_id'.*first on line 2"),
    ([{"pair_id": "a", "judge": "J", "verdict": "first", "label": "1"},
      {"pair_id": "a", "judge": "K", "verdict": "first", "label": "2"}], r"t\.csv:3: field 'label'.*line 2"),
    ([{"pair_id": "a", "judge": "J", "verdict": "first", "order": "backwards"}], r"t\.csv:2: field 'order'"),
    ([{"pair_id": "a", "judge": "", "verdict": "first"}], r"t\.csv:2: field 'judge': is empty"),
    ([{"pair_id": "a", "judge": "J", "verdict": "first", "score": "high"}], r"t\.csv:2: field 'score'"),
    ([{"pair_id": "a", "judge": "J"}], r"t\.csv: field 'verdict'"),
    ([{"pair_id": "a", "verdict": "first"}], r"t\.csv: field 'judge': required column is missing"),
])
def test_table_bad_input_is_one_line_with_file_and_line(tmp_path, rows, match):
    with pytest.raises(InputError, match=match) as err:
        read_table(_write(rows, tmp_path / "t.csv"))
    assert "\n" not in str(err.value)


def test_a_csv_with_a_byte_that_is_not_utf8_past_the_first_page_reads_each_row_once(tmp_path, monkeypatch):
    """pandas meets the byte in a later page; the table used to be read again from the start by a fallback after the
    first pages were already in, so they counted twice ("pair 'p1' judged again")."""
    import rubriclab.recorded.formats.table as table

    monkeypatch.setattr(table, "PAGE_ROWS", 2)
    path = _write(ROWS, tmp_path / "t.csv")
    path.write_bytes(path.read_bytes().rstrip(b"\n") + b"\xe9\n")  # a latin-1 byte at the end of the last row
    rs = read_table(path)
    assert len(rs.frame()) == len(ROWS)
    assert rs.pairs["p3"].output_2 == "\ufffd"  # the byte, read as U+FFFD (as read_rows reads it)


def test_json_lines_are_read_a_page_at_a_time_and_a_late_column_is_an_error(tmp_path, monkeypatch):
    import rubriclab.recorded.formats.table as table

    whole = read_table(_write(ROWS, tmp_path / "t.jsonl")).frame()
    monkeypatch.setattr(table, "PAGE_ROWS", 2)

    def whole_file(*_a, **_k):
        raise AssertionError("a JSON-lines table was read whole")

    monkeypatch.setattr(table, "read_rows", whole_file)
    paged = read_table(tmp_path / "t.jsonl").frame()
    pd.testing.assert_frame_equal(paged.reset_index(drop=True), whole.reset_index(drop=True), check_categorical=False)
    late = [dict(r) for r in ROWS]
    late[4]["label.ann2"] = "tie"  # an annotator column first given on line 5, in the third page
    with pytest.raises(InputError, match=r"t2\.jsonl:5: field 'label\.ann2': column 'label\.ann2' first appears "
                                         r"after the first 2 rows"):
        read_table(_write(late, tmp_path / "t2.jsonl"))


def test_a_csv_error_names_the_physical_line_when_a_reply_spans_lines(tmp_path):
    """A judge's reply in a quoted field holds line breaks; the line an error names is the row's own first line in
    the file, not its record number (it said 4 for a row that starts on line 6)."""
    rows = [dict(r) for r in ROWS[:4]]
    rows[0]["raw"] = "I compared both.\nThe first is better.\nVerdict: first"
    rows[2]["label"] = "3"
    path = _write(rows, tmp_path / "t.csv")
    lines = path.read_text().splitlines()
    start = next(i for i, t in enumerate(lines, start=1) if t.startswith("p2,") and ",original," in t)
    assert start == 6  # header, p1 (three lines), p1 swapped, then this row
    with pytest.raises(InputError, match=rf"t\.csv:{start}: field 'label': label '3'"):
        read_table(path)
