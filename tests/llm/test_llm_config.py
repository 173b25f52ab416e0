"""Roles from params, prompt templates, store location and ledger."""

from __future__ import annotations

import pytest

from rubriclab.config import load_params, set_dotted
from rubriclab.errors import ConfigError, InputError, TemplateError
from rubriclab.llm import (
    CallRecord,
    load_prompt,
    open_store,
    panel,
    parse_prompt,
    register_prompt,
    roles_from_params,
)


def test_roles_panels_and_defaults():
    params = {"llm": {"defaults": {"temperature": 0.0, "concurrency": 4},
                      "roles": {"judge": {"model": ["openai/gpt-4o-mini", "deepseek/deepseek-chat"]},
                                "extractor": "openai/gpt-4o-mini",
                                "paraphraser": {"model": "local/smollm2-135m", "temperature": 0.8}}}}
    roles = roles_from_params(params)
    judges = panel(roles["judge"])
    assert [j.model for j in judges] == ["openai/gpt-4o-mini", "deepseek/deepseek-chat"]
    assert [j.name for j in judges] == ["judge[0]", "judge[1]"]
    assert roles["extractor"].concurrency == 4
    assert roles["paraphraser"].temperature == 0.8 and roles["paraphraser"].decoding_params()["temperature"] == 0.8


@pytest.mark.parametrize("roles,match", [
    ({"judje": "openai/x"}, "llm.roles.judje: unknown role; expected one of judge, extractor"),
    ({"judge": {"model": "openai/x", "temprature": 1}}, "llm.roles.judge.temprature: unknown key"),
    ({"judge": {"temperature": 1}}, "llm.roles.judge.model is missing"),
])
def test_role_errors_name_the_key(roles, match):
    with pytest.raises(ConfigError, match=match):
        roles_from_params({"llm": {"roles": roles}})


def test_packaged_prompts_load_and_render():
    msgs = load_prompt("judge_direct").render(rubric="1. accuracy", prompt="Q?", response_a="a", response_b="b")
    assert len(msgs) == 1 and "Q?" in msgs[0]["content"] and "<verdict>A or B</verdict>" in msgs[0]["content"]
    sys_user = parse_prompt("judge_no_rubric", "[system]\nBe fair.\n[user]\n{prompt} {response_a} {response_b}", "x")
    assert [m["role"] for m in sys_user.render(prompt="q", response_a="a", response_b="b")] == ["system", "user"]


def test_template_missing_placeholder_fails_at_load(tmp_path):
    path = tmp_path / "judge_direct.txt"
    path.write_text("Rubric {rubric}\nQ {prompt}\nA {response_a}\n")
    with pytest.raises(TemplateError) as err:
        load_prompt("judge_direct", tmp_path)
    msg = str(err.value)
    assert str(path) in msg and "{response_b}" in msg and "expected placeholders" in msg
    assert "\n" not in msg


def test_template_unknown_placeholder_and_literal_braces():
    register_prompt("t_json", {"criterion"})
    tpl = parse_prompt("t_json", 'Score {criterion}. Reply {{"score": 1}}', "inline")
    assert tpl.render(criterion="x")[0]["content"] == 'Score x. Reply {"score": 1}'
    with pytest.raises(TemplateError, match="unknown placeholder"):
        parse_prompt("t_json", "Score {criterion} {extra}", "inline")


def test_params_overrides_and_bad_yaml(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("data:\n  seed: 42\n")
    assert load_params(p, ["data.seed=7", "llm.roles.judge.model=openai/x"]).data.seed == 7
    p.write_text("data: [unclosed\n")
    with pytest.raises(InputError, match=r"params.yaml:\d+: invalid YAML"):
        load_params(p)
    with pytest.raises(ConfigError, match="KEY.PATH=VALUE"):
        set_dotted({}, "novalue")


def test_store_ledger_and_error_rows_never_overwrite_ok(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/c.sqlite")
    ok = CallRecord(key="k1", model="m", role="judge", stage="audit", sample_index=0, attempt=0, status="ok",
                    text="[[A]]", prompt_tokens=10, completion_tokens=2, cost=0.5)
    store.put(ok)
    store.put(CallRecord(key="k1", model="m", role="judge", stage="audit", sample_index=0, attempt=0,
                         status="error", error="late failure"))
    assert store.get_ok(["k1"])["k1"].text == "[[A]]"
    store.record_batch({"stage": "audit", "role": "judge", "items": 5, "cache_hits": 4, "completed": 1})
    (row,) = store.ledger()
    assert (row["calls"], row["cost"], row["cache_hits"], row["items"]) == (1, 0.5, 4, 5)
    with pytest.raises(ConfigError, match="unsupported call store"):
        open_store("mysql://host/db")
