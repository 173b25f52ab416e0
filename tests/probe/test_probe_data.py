"""Rubric-item data: HealthBench / ResearchRubrics loaders, demo files, rubric sets over pairs."""

from __future__ import annotations

import json

import pytest

from rubriclab.data import Pair
from rubriclab.errors import ConfigError, InputError
from rubriclab.probe import RUBRIC_ITEM_COLUMNS, demo_items_path, items_from_rubric_set, load_rubric_items
from rubriclab.rubrics import Criterion, RubricSet


def _hb(pid: str, n: int = 3, **extra) -> dict:
    """A record in the shape of openai/simple-evals HealthBench JSON lines."""
    rec = {
        "prompt": [{"role": "user", "content": f"Question {pid}: is a mild fever dangerous?"}],
        "completion": None,
        "rubrics": [
            {
                "criterion": f"Item {k} of {pid}.",
                "points": (-4 if k == 0 else k + 1),
                "tags": ["level:example", "axis:accuracy"],
            }
            for k in range(n)
        ],
        "example_tags": ["theme:hedging"],
        "prompt_id": pid,
        "ideal_completions_data": {
            "ideal_completion": f"Ideal answer for {pid}.",
            "ideal_completions_group": "Group 1",
            "ideal_completions_ref_completions": ["ref a", "ref b"],
        },
    }
    del rec["completion"]
    rec.update(extra)
    return rec


def _rr(sid: str, n: int = 3, **extra) -> dict:
    """A record in the shape of ScaleAI/researchrubrics processed_data.jsonl."""
    rec = {
        "prompt": f"Research task {sid}: compare two policies.",
        "sample_id": sid,
        "domain": "Current Events",
        "conceptual_breadth": "moderate",
        "logical_nesting": "shallow",
        "exploration": "low",
        "rubrics": [
            {"criterion": f"Criterion {k} of {sid}.", "weight": float(5 - 2 * k), "axis": "Explicit Requirements"}
            for k in range(n)
        ],
    }
    rec.update(extra)
    return rec


def _write(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_healthbench_real_shape(tmp_path):
    multi = _hb(
        "p3",
        prompt=[
            {"role": "user", "content": "I have a rash."},
            {"role": "assistant", "content": "Where is it?"},
            {"role": "user", "content": "On my arm."},
        ],
        ideal_completions_data=None,
    )
    path = _write(tmp_path / "hb.jsonl", [_hb("p1"), _hb("p2", 4, completion="Graded answer."), multi])
    df = load_rubric_items(path, fmt="healthbench")
    assert list(df.columns) == RUBRIC_ITEM_COLUMNS
    assert len(df) == 10 and df["item_id"].is_unique
    assert df.attrs["format"] == "healthbench" and df.attrs["n_records"] == 3 and df.attrs["drops"] == {}
    p1 = df[df.record_id == "p1"]
    assert list(p1.item_id) == ["p1#0", "p1#1", "p1#2"]
    assert list(p1.points) == [-4.0, 2.0, 3.0] and p1.points.dtype == float
    assert p1.iloc[0].tags == ["level:example", "axis:accuracy"]
    assert p1.iloc[0].prompt == "Question p1: is a mild fever dangerous?"
    assert set(p1.response) == {"Ideal answer for p1."} and set(p1.response_source) == {"data:ideal_completion"}
    p2 = df[df.record_id == "p2"]
    assert set(p2.response) == {"Graded answer."} and set(p2.response_source) == {"data:completion"}
    p3 = df[df.record_id == "p3"].iloc[0]
    assert p3.prompt == "Human: I have a rash.\n\nAssistant: Where is it?\n\nHuman: On my arm."
    assert p3.response is None and p3.response_source is None
    assert set(df.dataset) == {"healthbench"}


def test_healthbench_mirror_shape(tmp_path):
    """Mirrors keep ``id``, the prompt as text and the conversation under ``messages``."""
    rec = {
        "id": "m1",
        "prompt": "Can I take ibuprofen?",
        "messages": [{"role": "user", "content": "Can I take ibuprofen?"}],
        "rubrics": [{"criterion": "Asks about kidney disease.", "points": 5, "tags": ["axis:context_awareness"]}],
        "example_tags": [],
    }
    df = load_rubric_items(_write(tmp_path / "m.jsonl", [rec]), dataset="hb_mirror")
    assert df.attrs["format"] == "healthbench"
    assert df.iloc[0].to_dict() | {"tags": None} == {
        "item_id": "m1#0",
        "dataset": "hb_mirror",
        "record_id": "m1",
        "prompt": "Can I take ibuprofen?",
        "criterion": "Asks about kidney disease.",
        "points": 5.0,
        "tags": None,
        "response": None,
        "response_source": None,
    }


def test_researchrubrics_real_shape(tmp_path):
    path = _write(tmp_path / "rr.jsonl", [_rr("s1"), _rr("s2", 5, response="A report.")])
    df = load_rubric_items(path, fmt="researchrubrics")
    assert list(df.columns) == RUBRIC_ITEM_COLUMNS and len(df) == 8
    s1 = df[df.record_id == "s1"]
    assert list(s1.points) == [5.0, 3.0, 1.0]
    assert s1.iloc[0].tags == ["axis:Explicit Requirements"]
    assert s1.iloc[0].prompt == "Research task s1: compare two policies."
    assert s1.response.isna().all()
    s2 = df[df.record_id == "s2"]
    assert (s2.points < 0).any()  # signed weights kept as is
    assert set(s2.response) == {"A report."} and set(s2.response_source) == {"data:response"}


def test_researchrubrics_legacy_compiled_shape(tmp_path):
    rec = {
        "task_name": "683a58c9",
        "prompt": "Analyse X.",
        "rubrics": json.dumps([{"title": "Data Sources", "weight": 1.0, "category": "Accuracy", "row_index": 1}]),
    }
    df = load_rubric_items(_write(tmp_path / "c.jsonl", [rec]))
    assert df.attrs["format"] == "researchrubrics"
    assert df.iloc[0].criterion == "Data Sources" and df.iloc[0].tags == ["axis:Accuracy"]


def test_auto_detection_and_mixed_file(tmp_path):
    assert load_rubric_items(_write(tmp_path / "a.jsonl", [_hb("p1")])).attrs["format"] == "healthbench"
    assert load_rubric_items(_write(tmp_path / "b.jsonl", [_rr("s1")])).attrs["format"] == "researchrubrics"
    with pytest.raises(InputError, match=r"mixed\.jsonl:2: field 'rubrics'.*one format per file"):
        load_rubric_items(_write(tmp_path / "mixed.jsonl", [_hb("p1"), _rr("s1")]))
    with pytest.raises(InputError, match=r"odd\.jsonl:1: .*cannot tell the format"):
        load_rubric_items(_write(tmp_path / "odd.jsonl", [{"question": "q", "rubrics": [{"text": "t"}]}]))


def test_json_array_file(tmp_path):
    path = tmp_path / "arr.json"
    path.write_text(json.dumps([_rr("s1"), _rr("s2")]), encoding="utf-8")
    assert len(load_rubric_items(path)) == 6


def test_demo_files_load():
    hb = load_rubric_items(demo_items_path())
    rr = load_rubric_items(demo_items_path("researchrubrics"))
    for df, fmt, n_min in ((hb, "healthbench", 20), (rr, "researchrubrics", 10)):
        assert df.attrs["format"] == fmt and df.attrs["drops"] == {}
        assert df.attrs["n_records"] >= n_min
        sizes = df.groupby("record_id").size()
        assert sizes.min() >= 3 and sizes.max() <= 5
        assert df.response.notna().all() and df.item_id.is_unique
        assert (df.points < 0).any() and (df.points > 0).any()
    assert set(hb.response_source) == {"data:completion"}
    assert set(rr.response_source) == {"data:response"}
    assert demo_items_path().stat().st_size < 30_000
    with pytest.raises(ConfigError, match="unknown demo"):
        demo_items_path("nope")


def test_limit_is_seeded_sample_of_records(tmp_path):
    path = _write(tmp_path / "many.jsonl", [_hb(f"p{i:02d}", 2 + i % 3) for i in range(30)])
    a = load_rubric_items(path, limit=7, seed=1)
    b = load_rubric_items(path, limit=7, seed=1)
    c = load_rubric_items(path, limit=7, seed=2)
    assert a.equals(b)
    assert a.record_id.nunique() == 7 and a.attrs["n_records"] == 7
    assert set(a.record_id) != set(c.record_id)
    full = load_rubric_items(path)
    for rid, group in a.groupby("record_id"):  # a kept record keeps all its items
        assert len(group) == (full.record_id == rid).sum()
    order = list(dict.fromkeys(a.record_id))
    assert order == sorted(order)  # file order kept
    assert len(load_rubric_items(path, limit=100)) == len(full)
    with pytest.raises(ConfigError):
        load_rubric_items(path, limit=0)


def _bad(tmp_path, records_or_bytes, name="bad.jsonl"):
    path = tmp_path / name
    if isinstance(records_or_bytes, bytes):
        path.write_bytes(records_or_bytes)
    else:
        _write(path, records_or_bytes)
    return path


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda r: r.update(rubrics=[]), r"bad\.jsonl:2: field 'rubrics': record has no rubric items; expected"),
        (lambda r: r.pop("rubrics"), r"bad\.jsonl:2: field 'rubrics': record has no rubric items"),
        (
            lambda r: r["rubrics"][1].update(criterion="  "),
            r"bad\.jsonl:2: field 'rubrics\[1\]\.criterion': value is empty",
        ),
        (
            lambda r: r["rubrics"][0].update(points="ten"),
            r"bad\.jsonl:2: field 'rubrics\[0\]\.points': .*expected a finite number",
        ),
        (lambda r: r["rubrics"][0].update(points=True), r"field 'rubrics\[0\]\.points'"),
        (lambda r: r["rubrics"][0].update(tags="axis:accuracy"), r"field 'rubrics\[0\]\.tags'.*list of strings"),
        (lambda r: r.update(prompt=[]), r"bad\.jsonl:2: field 'prompt'"),
        (lambda r: r.pop("prompt_id"), r"bad\.jsonl:2: field 'prompt_id': record has no id"),
    ],
)
def test_healthbench_errors_name_file_line_field(tmp_path, mutate, pattern):
    rec = _hb("p2")
    mutate(rec)
    with pytest.raises(InputError, match=pattern):
        load_rubric_items(_bad(tmp_path, [_hb("p1"), rec]), fmt="healthbench")


def test_researchrubrics_errors(tmp_path):
    rec = _rr("s2")
    rec["rubrics"][2]["weight"] = None
    with pytest.raises(InputError, match=r"bad\.jsonl:2: field 'rubrics\[2\]\.weight'"):
        load_rubric_items(_bad(tmp_path, [_rr("s1"), rec]))


def test_invalid_json_and_non_utf8(tmp_path):
    good = json.dumps(_hb("p1")).encode()
    with pytest.raises(InputError, match=r"bad\.jsonl:2: invalid JSON"):
        load_rubric_items(_bad(tmp_path, good + b"\n{not json\n"))
    with pytest.raises(InputError, match=r"bad\.jsonl:3: bytes are not valid UTF-8"):
        load_rubric_items(_bad(tmp_path, good + b"\n" + good + b"\n" + b'{"prompt": "caf\xe9"}\n'))
    with pytest.raises(InputError, match="holds no records"):
        load_rubric_items(_bad(tmp_path, b"\n"))
    with pytest.raises(InputError, match="file not found"):
        load_rubric_items(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="unknown rubric-item format"):
        load_rubric_items(tmp_path / "x.jsonl", fmt="csv")


def test_duplicates_counted_or_rejected(tmp_path):
    df = load_rubric_items(_bad(tmp_path, [_hb("p1"), _hb("p2"), _hb("p1")]))
    assert df.attrs["drops"] == {"duplicate_record": 1} and df.record_id.nunique() == 2
    clash = _hb("p1", 2)
    with pytest.raises(InputError, match=r"bad\.jsonl:2: field 'id': id 'p1' already used on line 1"):
        load_rubric_items(_bad(tmp_path, [_hb("p1"), clash]))


def test_items_from_rubric_set():
    rs = RubricSet(
        name="demo",
        criteria=(
            Criterion(id="accuracy", title="Accuracy", description="Facts are correct."),
            Criterion(id="concise", description="No padding."),
        ),
    )
    pairs = [
        Pair(id=f"x{i}", domain="helpful", prompt=f"Q{i}", chosen=f"good {i}", rejected=f"bad {i}") for i in range(3)
    ]
    df = items_from_rubric_set(rs, pairs, dataset="helpful")
    assert list(df.columns) == RUBRIC_ITEM_COLUMNS and len(df) == 3 * 2 * 2 and df.item_id.is_unique
    row = df.iloc[0].to_dict()
    assert row == {
        "item_id": "x0:chosen#0",
        "dataset": "helpful",
        "record_id": "x0",  # both sides answer one prompt: one record (one cluster for splits and intervals)
        "prompt": "Q0",
        "criterion": "Accuracy: Facts are correct.",
        "points": 1.0,
        "tags": ["accuracy"],
        "response": "good 0",
        "response_source": "pair:chosen",
    }
    assert df.groupby("record_id")["response_source"].nunique().eq(2).all()
    rej = df[(df.record_id == "x2") & (df.response_source == "pair:rejected")]
    assert list(rej.criterion) == ["Accuracy: Facts are correct.", "concise: No padding."]
    assert set(rej.response) == {"bad 2"} and set(rej.response_source) == {"pair:rejected"}
    only = items_from_rubric_set(rs, pairs, dataset="helpful", responses=("rejected",))
    assert len(only) == 6 and set(only.response_source) == {"pair:rejected"}
    with pytest.raises(ConfigError):
        items_from_rubric_set(rs, pairs, dataset="helpful", responses=("winner",))
