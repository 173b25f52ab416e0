"""A run where nothing worked must not look like a run (issue 26).

Configuration errors (credentials both in the URL and as a key, a missing key, an unusable URL) are final, not
retried: litellm reports them as a 500 InternalServerError although no server answered, so they are told apart
by the real exception chain, checked here against litellm itself and the fake OpenAI-compatible server. A stage
whose role got no usable reply at all, or errors in more than ``max_failure_share`` of its calls, exits non-zero
with one line naming the role, the model and the first error, after writing its outputs.
"""

from __future__ import annotations

import ast
import asyncio
import json
from pathlib import Path

import litellm
import pytest
import yaml

from rubriclab.errors import CallFailureError, RubricLabError
from rubriclab.llm import (
    CallRequest,
    CallResult,
    CallTally,
    RoleSpec,
    RoleTally,
    TalliedGateway,
    check_calls,
    gateway_from_params,
    open_store,
)
from rubriclab.llm._retry import is_config_error, is_retryable
from rubriclab.testing import FakeOpenAIServer, FaultPlan, scripted_model

KEY = "sk-abcdefghijklmnop1234"
MESSAGES = [{"role": "user", "content": "hi"}]


def _raised(model: str, api_base: str, api_key: str | None, timeout: float = 3.0) -> BaseException | None:
    """The exception litellm itself raises for one call (None when it answered)."""

    async def call() -> None:
        await litellm.acompletion(model=model, messages=MESSAGES, api_base=api_base, api_key=api_key,
                                  num_retries=0, max_retries=0, timeout=timeout)

    try:
        asyncio.run(call())
    except Exception as exc:  # noqa: BLE001 - the shape under test
        return exc
    return None


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.mark.parametrize("model", ["openai/fake", "hosted_vllm/fake", "anthropic/fake"])
def test_credentials_in_the_url_and_as_a_key_are_final(server, model):
    host = server.url.split("://", 1)[1]
    exc = _raised(model, f"http://user:pw@{host}", KEY)
    # what litellm really raises: an InternalServerError with a made-up status 500, no server involved
    assert isinstance(exc, litellm.InternalServerError) and exc.status_code == 500
    assert "Cannot combine AUTHORIZATION header" in str(exc)
    assert is_config_error(exc) and not is_retryable(exc)


@pytest.mark.parametrize("api_base", ["{host}", "ftp://{host}"])  # no scheme; not http
def test_an_unusable_url_is_final(server, api_base):
    exc = _raised("openai/fake", api_base.format(host=server.url.split("://", 1)[1]), KEY)
    assert isinstance(exc, litellm.InternalServerError)
    assert is_config_error(exc) and not is_retryable(exc)


def test_a_missing_key_is_final(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    exc = _raised("openai/fake", server.url, None)
    assert isinstance(exc, litellm.InternalServerError) and "Missing credentials" in str(exc)
    assert is_config_error(exc) and not is_retryable(exc)


@pytest.mark.parametrize("kind", ["500", "429", "drop", "garbage", "truncated"])
def test_server_and_transport_faults_stay_retryable(kind):
    # the same InternalServerError class (and status 500) as a configuration error, but a server or the network
    # is at fault: retried
    with FakeOpenAIServer(faults=FaultPlan(rate=1.0, kinds=(kind,))) as srv:
        exc = _raised("openai/fake", srv.url, KEY)
    assert exc is not None and not is_config_error(exc) and is_retryable(exc), repr(exc)


def test_a_refused_connection_stays_retryable():
    exc = _raised("openai/fake", "http://127.0.0.1:9/v1", KEY)
    assert isinstance(exc, litellm.InternalServerError) and is_retryable(exc)


def test_the_gateway_does_not_retry_a_configuration_error(server, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", KEY)
    host = server.url.split("://", 1)[1]
    role = RoleSpec(name="extractor", model="openai/fake", api_base=f"http://user:pw@{host}/v1",
                    api_key_env="FAKE_KEY", max_retries=6)
    store = open_store(tmp_path / "calls.sqlite")
    gw = TalliedGateway(store, stage="t", progress=False)
    results = gw.run([CallRequest(role=role, messages=[{"role": "user", "content": f"item {i}"}]) for i in range(3)])
    assert not any(r.ok for r in results)
    assert [r.retries for r in results] == [0, 0, 0]  # was 6 each: 18 retries, minutes of backoff
    row = next(r for r in store.ledger() if r["role"] == "extractor")
    assert row["retries"] == 0 and row["transport_failures"] == 3
    with pytest.raises(CallFailureError) as err:
        check_calls(gw)
    assert err.value.role == "extractor" and err.value.model == "openai/fake"
    assert "Cannot combine AUTHORIZATION header" in err.value.first_error
    assert "user:pw" not in str(err.value) and "\n" not in str(err.value)


# -- the failure-share rule -------------------------------------------------------------------------------------
def _result(role: RoleSpec, ok: bool = True, error: str | None = None, parse_error: str | None = None) -> CallResult:
    return CallResult(request=CallRequest(role=role, messages=MESSAGES), ok=ok, error=error, parse_error=parse_error)


def _tally(role: RoleSpec, ok: int, errors: int, unparseable: int = 0, error: str = "InternalServerError: boom"):
    tally = CallTally()
    tally.add([_result(role)] * ok + [_result(role, False, error=error)] * errors
              + [_result(role, False, parse_error="no verdict")] * unparseable)
    return tally


JUDGE = RoleSpec(name="judge[1]", model="openai/gpt-x")


def test_errors_in_more_than_the_share_fail_the_stage():
    with pytest.raises(CallFailureError) as err:
        check_calls(_tally(JUDGE, ok=4, errors=6), stage="audit@d")
    msg = str(err.value)
    assert msg.startswith("audit@d: role 'judge[1]' (model openai/gpt-x): no usable reply to 6 of 10 calls")
    assert "first error: InternalServerError: boom" in msg and "max_failure_share 0.5" in msg
    assert err.value.role == "judge[1]" and err.value.model == "openai/gpt-x"


def test_errors_at_or_under_the_share_pass():
    assert check_calls(_tally(JUDGE, ok=5, errors=5)).roles[("judge[1]", "openai/gpt-x")].errors == 5


def test_no_usable_reply_at_all_fails_whatever_the_share():
    tally = _tally(JUDGE, ok=0, errors=1, unparseable=9)
    tally.roles[("judge[1]", "openai/gpt-x")].max_share = 1.0
    with pytest.raises(CallFailureError, match="no usable reply at all"):
        check_calls(tally)


def test_unparseable_replies_alone_do_not_fail_the_stage():
    # the model answered; what it answered is the stage's measurement (parse failures, shortfall), as on the
    # embedded model, whose extractor replies rarely parse
    check_calls(_tally(JUDGE, ok=0, errors=0, unparseable=10))


def test_the_share_comes_from_the_role():
    tally = CallTally()
    strict = RoleSpec(name="judge", model="m")
    object.__setattr__(strict, "max_failure_share", 0.1)  # as llm.defaults.max_failure_share sets it
    tally.add([_result(strict)] * 8 + [_result(strict, False, error="E: x")] * 2)
    assert tally.roles[("judge", "m")].max_share == 0.1
    with pytest.raises(CallFailureError):
        check_calls(tally)


def _roles_take_the_share() -> bool:
    import dataclasses

    return "max_failure_share" in {f.name for f in dataclasses.fields(RoleSpec)}


NEEDS_ROLES = pytest.mark.skipif(not _roles_take_the_share(),
                                 reason="llm/_roles.py does not take max_failure_share yet (see issue 26 patch)")


@NEEDS_ROLES
def test_llm_defaults_max_failure_share_reaches_the_check():
    from rubriclab.llm import roles_from_params

    roles = roles_from_params({"llm": {"defaults": {"max_failure_share": 0.2},
                                       "roles": {"verifier": "m", "judge": {"model": "m", "max_failure_share": 0.9}}}})
    tally = CallTally()
    for name in ("verifier", "judge"):
        tally.add([_result(roles[name])] * 7 + [_result(roles[name], False, error="E: x")] * 3)
    assert [t.max_share for t in tally.roles.values()] == [0.2, 0.9]
    with pytest.raises(CallFailureError) as err:
        check_calls(tally)
    assert err.value.role == "verifier" and not any(t.role == "judge" for t in err.value.failing)


@NEEDS_ROLES
def test_max_failure_share_is_a_share():
    import copy

    from rubriclab.settings import validate_params
    from tests.project.test_input_errors_2 import REPO_PARAMS

    assert REPO_PARAMS["llm"]["defaults"]["max_failure_share"] == 0.5
    params = copy.deepcopy(REPO_PARAMS)
    params["llm"]["defaults"]["max_failure_share"] = 1.5
    with pytest.raises(RubricLabError, match=r"llm.defaults.max_failure_share: got 1.5; expected a number in \[0, 1\]"):
        validate_params(params)


def test_the_first_error_is_redacted():
    tally = _tally(JUDGE, ok=0, errors=2, error=f"AuthenticationError: bad key {KEY} for http://u:secret@h/v1")
    with pytest.raises(CallFailureError) as err:
        check_calls(tally)
    assert KEY not in str(err.value) and "secret@" not in str(err.value)


def test_several_failing_roles_are_one_line_worst_first():
    tally = CallTally()
    for role, ok, errors in ((RoleSpec(name="verifier", model="a"), 3, 7), (RoleSpec(name="judge", model="b"), 0, 4)):
        tally.add([_result(role)] * ok + [_result(role, False, error="E: x")] * errors)
    with pytest.raises(CallFailureError) as err:
        check_calls(tally)
    assert err.value.role == "judge" and "also failing: 'verifier' (a) 7 of 10" in str(err.value)
    assert len(err.value.failing) == 2 and "\n" not in str(err.value)


def test_a_gateway_without_a_tally_is_refused(gateway):
    with pytest.raises(TypeError):
        check_calls(gateway)


def test_role_tally_counts(tmp_path):
    t = RoleTally("r", "m")
    assert not t.failing and t.error_share == 0.0


# -- a gateway against a server failing most calls ---------------------------------------------------------------
def test_a_mostly_failing_server_fails_the_check_and_keeps_what_worked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    plan = FaultPlan(rate=0.8, kinds=("500",), seed=3, max_faults_per_key=100)
    with FakeOpenAIServer(faults=plan) as srv:
        role = RoleSpec(name="judge", model="openai/fake", api_base=srv.url, max_retries=1, concurrency=4)
        params = {"llm": {"store": str(tmp_path / "calls.sqlite")}}
        gw = gateway_from_params(params, stage="audit@x", project_dir=tmp_path, progress=False)
        monkeypatch.setattr("rubriclab.llm._gateway.backoff_seconds", lambda retry: 0.01)
        results = gw.run([CallRequest(role=role, messages=[{"role": "user", "content": f"q{i}"}]) for i in range(20)])
    ok = sum(r.ok for r in results)
    assert 0 < ok < 10
    with pytest.raises(CallFailureError, match="errors in more than max_failure_share 0.5"):
        check_calls(gw)
    stored = gw.store.get_ok([r.request.key(0) for r in results if r.ok])
    assert len(stored) == ok  # every reply that worked is in the store: a re-run repeats only the failed calls


# -- a stage ----------------------------------------------------------------------------------------------------
@pytest.fixture
def broken_project(tmp_path, server, monkeypatch):
    from rubriclab.testing import discover_consolidator_script as consolidator_script
    from rubriclab.testing import discover_embed_script as embed_script
    from rubriclab.testing import discover_judge_script as judge_script

    host = server.url.split("://", 1)[1]
    monkeypatch.setenv("FAKE_KEY", KEY)
    monkeypatch.setenv("FAKE_BASE", f"http://user:pw@{host}/v1")  # credentials in the URL, and a key
    params = {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "extractor": {"model": "openai/fake", "api_base": "os.environ/FAKE_BASE", "api_key_env": "FAKE_KEY"},
            "consolidator": {"model": scripted_model("ff_consolidator", consolidator_script())},
            "embedder": {"model": scripted_model("ff_embedder", embed_script)},
            "judge": {"model": scripted_model("ff_judge", judge_script)}}},
        "data": {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"}},
                 "premise": {"sources": ["demo_helpful"], "extraction": 10, "audit": 5, "heldout": 5}},
        "discover": {"max_pairs": 10, "task_derived": {"k": 3, "tasks": {}}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    from rubriclab.stages.data import run_data_stage

    run_data_stage(params, tmp_path)
    return tmp_path


def test_a_stage_where_every_call_failed_exits_non_zero_with_one_line(broken_project, capsys):
    from mlflow import MlflowClient

    from rubriclab.stages import run_stage
    from rubriclab.stages.discover import main
    from rubriclab.tracking import tracking_uri

    capsys.readouterr()
    assert run_stage(lambda: main(["--dataset", "demo_helpful"]), "discover") == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("rubriclab.stages.discover: error: discover@demo_helpful: role 'extractor' "
                           "(model openai/fake): no usable reply to 10 of 10 calls")
    assert "Cannot combine AUTHORIZATION header" in line and "user:pw" not in line and KEY not in line
    # the outputs are written (nothing finished is lost), the run is marked failed, nothing was retried
    assert json.loads((broken_project / "outputs/rubrics/demo_helpful/discovered.json").read_text())["criteria"] == []
    client = MlflowClient(tracking_uri(broken_project))
    exp = client.get_experiment_by_name("rubriclab").experiment_id
    run = client.search_runs([exp], filter_string="tags.stage = 'discover'")[0]
    assert run.info.status == "FAILED"
    row = next(r for r in open_store(broken_project / ".rubriclab/calls.sqlite").ledger() if r["role"] == "extractor")
    assert row["retries"] == 0 and row["failed"] == 10


def test_the_cli_turns_it_into_one_line_and_exit_2(broken_project, capsys):
    from rubriclab.cli import main

    capsys.readouterr()
    assert main(["discover", "--dataset", "demo_helpful"]) == 2
    err = capsys.readouterr().err
    assert "rubriclab discover: error: discover@demo_helpful: role 'extractor' (model openai/fake)" in err
    assert isinstance(CallFailureError("x", role="r", model="m", first_error=None), RubricLabError)


# -- every LLM stage goes through the one check -----------------------------------------------------------------
STAGES = Path(__file__).resolve().parents[2] / "src/rubriclab/stages"


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


@pytest.mark.parametrize("name", sorted(p.stem for p in STAGES.glob("*.py")
                                        if "gateway_from_params" in _calls(p)))
def test_every_stage_that_calls_models_checks_its_calls(name):
    assert "check_calls" in _calls(STAGES / f"{name}.py")
