"""Bad inputs that used to pass silently or with the wrong message (issue 26): every params error is listed,
an empty rubric is refused, a data source no split uses is reported, and a `.jsonl` that is not JSON says so."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
import yaml

from rubriclab.data import build_splits
from rubriclab.errors import ConfigError, InputError
from rubriclab.judging import load_pairwise_rubric
from rubriclab.rubrics import load_rubric_file, load_template
from rubriclab.settings import validate_params

REPO_PARAMS = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())


# -- params: all the errors --------------------------------------------------------------------------------------
def _message(params: dict, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as err:
        validate_params(params, overrides=overrides)
    return str(err.value)


def test_two_errors_are_both_listed_on_one_line():
    params = copy.deepcopy(REPO_PARAMS)
    params["audit"]["runs"] = "abc"
    params["data"]["seed"] = "x"
    assert _message(params) == ("params.yaml: data.seed: got 'x'; expected an integer; "
                                "params.yaml: audit.runs: got 'abc'; expected an integer >= 1")


def test_one_error_keeps_its_one_line():
    params = copy.deepcopy(REPO_PARAMS)
    params["audit"]["runs"] = "abc"
    assert _message(params) == "params.yaml: audit.runs: got 'abc'; expected an integer >= 1"


def test_each_listed_error_names_its_override():
    params = copy.deepcopy(REPO_PARAMS)
    params["audit"]["runs"], params["audit"]["samples"] = 0, 0
    msg = _message(params, ["audit.runs=0", "audit.samples=0"])
    assert msg == ("params.yaml: audit.runs: got 0; expected an integer >= 1 (from --set audit.runs=0); "
                   "params.yaml: audit.samples: got 0; expected an integer >= 1 (from --set audit.samples=0)")


# -- rubric with no criteria ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, text", [
    ("empty.yaml", "name: empty\ncriteria: []\n"),
    ("empty.json", json.dumps({"name": "empty", "criteria": []})),
    ("list.json", "[]"),
    ("list.yaml", "[]\n"),
])
def test_a_rubric_with_no_criteria_is_refused(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_rubric_file(path)
    assert str(err.value) == (f"{path}: field 'criteria': rubric set {path.stem!r} has no criteria and no "
                              "template; expected at least one criterion, or a judge template")


def test_the_audit_stage_refuses_an_empty_rubric_file(tmp_path):
    from rubriclab.audit import load_sources

    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ncriteria: []\n")
    with pytest.raises(InputError, match="has no criteria and no template; expected at least one criterion"):
        load_sources(tmp_path, "demo_helpful", [], [path])


def test_a_stage_written_empty_source_still_loads_and_says_why(tmp_path):
    # discovery that found nothing writes K=0 with provenance.shortfall: the audit reports it "not audited"
    from rubriclab.audit import not_audited_reason

    path = tmp_path / "discovered.json"
    path.write_text(json.dumps({"name": "d", "source": "discovered", "criteria": [],
                                "provenance": {"shortfall": {"asked": 6, "got": 0, "reason": "no candidates"}}}))
    rs = load_rubric_file(path)
    assert rs.K == 0 and not_audited_reason(rs).endswith("no candidates")


# -- a data source no split uses ------------------------------------------------------------------------------------
def test_a_source_no_split_uses_is_reported_not_skipped_silently(tmp_path, caplog):
    from rubriclab.stages.data import split_counts

    data = {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"},
                                    "extra": {"loader": "demo", "domain": "harmless"}},
            "premise": {"sources": ["demo_helpful"], "extraction": 5, "audit": 5, "heldout": 5}}
    with caplog.at_level(logging.WARNING):
        report = build_splits(data, tmp_path / "out")
    assert list(report["unused_sources"]) == ["extra"]
    why = report["unused_sources"]["extra"]
    assert why.startswith("data.sources.extra: not used by any split") and "data.premise.sources: demo_helpful" in why
    assert any(why in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert split_counts(report)["sources.unused"] == 1
    assert "extra" not in report["sources"]  # not loaded (drift check --data extra reads it directly)


def test_sources_used_by_ripd_are_used(tmp_path):
    data = {"seed": 42, "sources": {"a": {"loader": "demo", "domain": "helpful"},
                                    "b": {"loader": "demo", "domain": "harmless"}},
            "premise": {"sources": []},
            "ripd": {"s": {"bench": "a", "target": "b", "train": 3, "val": 3, "test": 3}}}
    assert build_splits(data, tmp_path / "out")["unused_sources"] == {}


# -- a .jsonl that is not JSON ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("loader", [load_rubric_file, load_pairwise_rubric])
def test_a_jsonl_that_is_not_json_names_the_line(tmp_path, loader):
    path = tmp_path / "rubric.jsonl"
    path.write_text('{"description": "Is accurate"}\nnot json at all\n')
    with pytest.raises(InputError) as err:
        loader(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:2: invalid JSON") and msg.endswith("expected one JSON object per line")
    assert "markdown" not in msg


@pytest.mark.parametrize("loader", [load_rubric_file, load_pairwise_rubric])
def test_a_jsonl_of_prose_gets_no_message_about_markdown_lists(tmp_path, loader):
    path = tmp_path / "rubric.jsonl"
    path.write_text("Prefer the accurate answer.\nPenalise padding.\n")
    with pytest.raises(InputError) as err:
        loader(path)
    assert str(err.value) == f"{path}:1: invalid JSON (Expecting value); expected one JSON object per line"


def test_a_jsonl_of_plain_text_is_not_read_as_markdown(tmp_path):
    path = tmp_path / "rubric.jsonl"
    path.write_text("- **Accuracy**: correct facts\n")
    with pytest.raises(InputError, match=r"rubric.jsonl:1: invalid JSON .*expected one JSON object per line"):
        load_rubric_file(path)


def test_a_jsonl_line_that_is_not_an_object(tmp_path):
    path = tmp_path / "rubric.jsonl"
    path.write_text('["a", "b"]\n')
    with pytest.raises(InputError, match=r":1: line holds a JSON list, not an object; expected one JSON object"):
        load_rubric_file(path)


def test_valid_jsonl_rubrics_load(tmp_path):
    crit = tmp_path / "criteria.jsonl"
    crit.write_text('{"description": "States correct facts"}\n{"title": "Brevity", "description": "No padding"}\n')
    assert load_rubric_file(crit).K == 2
    ripd = tmp_path / "ripd.jsonl"
    ripd.write_text(json.dumps({"prompt_id": "seed", "prompt": "Q: <q>{question}</q>\nA: <a>{answer_a}</a>\n"
                                "B: <b>{answer_b}</b>\nAnswer [[A]] or [[B]]."}) + "\n")
    assert load_rubric_file(ripd).template.name == "seed"
    assert load_template(ripd).name == "seed"
