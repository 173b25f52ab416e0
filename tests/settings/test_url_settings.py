"""URL-valued settings and endpoints keep no credential (issue 59): a password or key in the query of any URL
setting (``llm.store``, ``repair.study.storage``, ``drift.study.storage``, ``report.mlflow_ui``, a role's
``api_base``) is refused like one in ``user:password@``, in one line that shows neither and says where the password
goes instead; an endpoint whose URL (from the environment) has a query string is refused before any call — litellm
would append the route after it (``/v1/?key=…chat/completions``: every call a 404 quoting the query)."""

from __future__ import annotations

import pytest
import yaml

from rubriclab.errors import ConfigError
from rubriclab.llm import CallRequest, Gateway, RoleSpec
from rubriclab.testing import FakeOpenAIServer

SECRET = "hunter2QuerySecret77"

URL_SETTINGS = [
    ({"llm": {"store": f"postgresql://rubric@db:5432/calls?password={SECRET}"}}, "llm.store"),
    ({"llm": {"store": f"postgresql://rubric@db:5432/calls?sslmode=require&sslpassword={SECRET}"}}, "llm.store"),
    ({"repair": {"study": {"storage": f"postgresql://rubric@db/optuna?password={SECRET}"}}}, "repair.study.storage"),
    ({"drift": {"study": {"storage": f"postgresql+psycopg://rubric@db/optuna?pwd={SECRET}"}}}, "drift.study.storage"),
    ({"report": {"mlflow_ui": f"http://mlflow.internal:5000/?token={SECRET}"}}, "report.mlflow_ui"),
]


@pytest.mark.parametrize(("params", "field"), URL_SETTINGS, ids=[f for _, f in URL_SETTINGS])
def test_a_credential_in_a_url_settings_query_is_refused_in_one_line(tmp_path, params, field):
    from rubriclab.config import load_params
    from rubriclab.settings import Params

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError) as err:  # params.yaml, before any stage runs (so never into dvc.lock)
        load_params(path)
    msg = str(err.value)
    assert field in msg and SECRET not in msg and "\n" not in msg
    assert "PGPASSWORD" in msg and "os.environ/NAME" in msg
    with pytest.raises(ConfigError) as err:  # the schema itself: a settings mapping built in code
        Params.of(params)
    assert field in str(err.value) and SECRET not in str(err.value)


def test_a_url_setting_without_a_credential_loads(tmp_path):
    from rubriclab.config import load_params

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"llm": {"store": "postgresql://rubric@db:5432/calls?sslmode=require"},
                                    "report": {"mlflow_ui": "http://mlflow.internal:5000/"}}))
    assert load_params(path).llm.store.endswith("sslmode=require")


def test_an_endpoint_with_a_query_from_the_environment_is_refused_before_any_call(store, monkeypatch):
    with FakeOpenAIServer(record=True) as server:
        monkeypatch.setenv("ZZQ_ENDPOINT", f"{server.url}?key={SECRET}&sig=abc123def")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-endpoint-0000")
        role = RoleSpec(name="judge", model="openai/fake-judge", api_base="os.environ/ZZQ_ENDPOINT", max_retries=0)
        with pytest.raises(ConfigError) as err:
            Gateway(store, stage="s", progress=False).run([CallRequest(role=role, messages=[
                {"role": "user", "content": "hi"}])])
        assert not server.received_requests  # nothing was sent
    msg = str(err.value)
    assert "llm.roles.judge.api_base (from os.environ/ZZQ_ENDPOINT)" in msg and "query" in msg
    assert SECRET not in msg and "abc123def" not in msg and "api_key_env" in msg
    assert not list(store._db.execute("SELECT key FROM calls"))  # and nothing stored
