from __future__ import annotations

import dataclasses
import json

import pytest

from rubriclab.errors import InputError
from rubriclab.rubrics import Criterion, RubricSet, is_snake_case, slugify, unique_id


def _set() -> RubricSet:
    return RubricSet(
        name="demo",
        criteria=(
            Criterion(
                "factual_accuracy",
                "Claims are correct.",
                title="Accuracy",
                support=12,
                provenance={"candidates": ["c1", "c2"], "pairs": ["p9"]},
            ),
            Criterion("clarity", "The response is easy to follow.\n1. short sentences"),
        ),
        source="discovered",
        provenance={"level": 3},
    )


def test_criterion_requires_snake_case_id_and_description():
    with pytest.raises(InputError, match="not snake_case"):
        Criterion("Bad Id", "text")
    with pytest.raises(InputError, match="empty description"):
        Criterion("ok_id", "   ")
    with pytest.raises(InputError, match="support"):
        Criterion("ok_id", "x", support=-1)


def test_criterion_is_frozen_and_detached_from_caller_dicts():
    prov = {"pairs": ["p1"]}
    c = Criterion("a", "x", provenance=prov)
    prov["pairs"] = ["changed"]
    assert c.provenance == {"pairs": ["p1"]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.id = "b"  # type: ignore[misc]


def test_duplicate_ids_rejected_with_field():
    c = Criterion("dup", "x")
    with pytest.raises(InputError) as err:
        RubricSet("r", (c, Criterion("dup", "y")))
    assert "duplicate criterion id 'dup'" in str(err.value)
    assert err.value.field == "criteria[1].id"


def test_helpers():
    rs = _set()
    assert rs.K == len(rs) == 2
    assert rs.criterion_ids == ("factual_accuracy", "clarity")
    assert rs.get("clarity").description.startswith("The response")
    with pytest.raises(KeyError):
        rs.get("nope")
    text = rs.render_list()
    assert text.splitlines()[0] == "1. Accuracy: Claims are correct."
    assert text.splitlines()[1] == "2. clarity: The response is easy to follow."
    assert text.splitlines()[2] == "   1. short sentences"  # continuation indented under its item
    smaller = rs.with_criteria(rs.criteria[:1], source="pref_repaired")
    assert smaller.criterion_ids == ("factual_accuracy",) and smaller.source == "pref_repaired"
    assert rs.K == 2  # original unchanged
    with pytest.raises(InputError, match="duplicate"):
        rs.with_criteria(rs.criteria + rs.criteria[:1])


def test_dict_round_trip_through_json_text():
    rs = _set()
    again = RubricSet.from_dict(json.loads(json.dumps(rs.to_dict())))
    assert again == rs
    assert list(rs.to_dict()) == ["format_version", "name", "source", "provenance", "template", "criteria"]


def test_from_dict_errors_name_file_and_field():
    data = _set().to_dict()
    data["criteria"][1]["id"] = "Not Snake"
    with pytest.raises(InputError) as err:
        RubricSet.from_dict(data, file="r.json")
    msg = str(err.value)
    assert msg.startswith("r.json: field 'criteria[1].id'") and "snake_case" in msg
    data = _set().to_dict()
    data["criteria"][0]["desc"] = "typo"
    with pytest.raises(InputError, match=r"criteria\[0\]\.desc"):
        RubricSet.from_dict(data, file="r.json")


def test_slug_helpers():
    assert slugify("Factual Accuracy — of claims!") == "factual_accuracy_of_claims"
    assert slugify("3 examples given") == "c_3_examples_given"
    assert slugify("!!!") == "criterion"
    assert is_snake_case(slugify("The user's intent is honoured and kept in focus throughout"))
    assert unique_id("a", {"a", "a_2"}) == "a_3"
    assert unique_id("b", {"a"}) == "b"
