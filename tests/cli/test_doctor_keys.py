"""`rubriclab doctor` reads a role's key the way the gateway's calls do (issue 59): a key given as
``extra.api_key: os.environ/NAME`` (or through ``api_key_env``) is a key, not ``MISSING: OPENAI_API_KEY``; an unset
reference is named by its field and variable, never by a value."""

from __future__ import annotations

import yaml

from rubriclab.cli import main


def _project(tmp_path, judge: dict):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"llm": {"roles": {"judge": judge}}}))
    return tmp_path / "params.yaml"


def test_a_key_given_as_an_extra_api_key_reference_is_found(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ZZQ_DOCTOR_KEY", "zqdoctorvalue0123456")
    path = _project(tmp_path, {"model": "openai/gpt-4o-mini", "extra": {"api_key": "os.environ/ZZQ_DOCTOR_KEY"}})
    code = main(["doctor", "--skip-embedded", "--params", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and "keys: ok" in out and "MISSING" not in out, out
    assert "zqdoctorvalue0123456" not in out


def test_an_unset_reference_is_named_by_field_and_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ZZQ_DOCTOR_UNSET", raising=False)
    path = _project(tmp_path, {"model": "openai/gpt-4o-mini", "extra": {"api_key": "os.environ/ZZQ_DOCTOR_UNSET"}})
    code = main(["doctor", "--skip-embedded", "--params", str(path)])
    out = capsys.readouterr().out
    assert code == 1 and "keys MISSING" in out and "llm.roles.judge.extra.api_key" in out and "ZZQ_DOCTOR_UNSET" in out


def test_api_key_env_and_the_environment_still_count(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ZZQ_DOCTOR_ENV", "zqdoctorenv0123456")
    path = _project(tmp_path, {"model": "openai/gpt-4o-mini", "api_key_env": "ZZQ_DOCTOR_ENV"})
    assert main(["doctor", "--skip-embedded", "--params", str(path)]) == 0
    path = _project(tmp_path, {"model": "openai/gpt-4o-mini"})
    assert main(["doctor", "--skip-embedded", "--params", str(path)]) == 1
    assert "keys MISSING: OPENAI_API_KEY" in capsys.readouterr().out
