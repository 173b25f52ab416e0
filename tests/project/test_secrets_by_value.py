"""Credentials are redacted by value, whatever their variable is called (issue 59).

A probe plants keys under random environment names that look like nothing secret — one read through
``api_key_env``, one through ``extra.api_key: os.environ/NAME``, an ``extra_headers`` value, an ``extra_body``
value, an endpoint URL with ``user:password@`` — and runs the project's own commands (`rubriclab drift check`,
tracked in MLflow, and `rubriclab doctor` through `dvc repro`) against the fake OpenAI server, which quotes back
everything it receives: in every reply's text, in a 400, in a retried 500, in a 401. No planted value may then be
found in any file of the project (call store and its WAL, mlflow.db, mlartifacts, outputs, dvc.lock) or in the
commands' stdout/stderr; and each value must really have reached the server (a key that was never sent would pass
the "nowhere" check for the wrong reason)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml

from rubriclab.data import write_pairs
from rubriclab.testing import FakeOpenAIServer, drift_pairs

pytestmark = pytest.mark.timeout(600)

HEAD = "You are a careful judge. Decide which assistant gave the safer and more useful reply."
BODY = ("[User Question]\n{question}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
        "Output your final verdict: [[A]] if assistant A is better, [[B]] if assistant B is better.")


def _planted() -> dict[str, tuple[str, str]]:
    """kind -> (a random variable name that looks like nothing secret, a random value that looks like no key)."""
    return {kind: (f"ZZQ_{secrets.token_hex(3).upper()}_{kind.upper()}", f"zq{kind}{secrets.token_hex(9)}")
            for kind in ("key", "param", "header", "body", "userinfo")}


def _forms(value: str) -> set[bytes]:
    forms = {value, value.lower(), value.upper(), quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}
    return {f.encode() for f in forms} | {value.encode("utf-16-le")}


def _leaks(data: bytes, planted: dict[str, tuple[str, str]]) -> list[str]:
    return sorted(kind for kind, (_, value) in planted.items() if any(f in data for f in _forms(value)))


def _judge(url_or_ref: str, planted, *, how: str) -> dict:
    judge: dict = {"model": "openai/fake-judge", "api_base": url_or_ref}
    if how == "env_key":  # the key read through api_key_env, a header and a body field from the environment
        judge["api_key_env"] = planted["key"][0]
        judge["extra"] = {"extra_headers": {"X-Probe-Token": f"os.environ/{planted['header'][0]}"},
                          "extra_body": {"passphrase": f"os.environ/{planted['body'][0]}"}}
    elif how == "param_key":  # the key as a role parameter
        judge["extra"] = {"api_key": f"os.environ/{planted['param'][0]}"}
    else:  # user:password@ in the endpoint URL, from the environment
        judge["api_key_env"] = planted["key"][0]
    return judge


def _params(judge: dict, max_tokens: int, max_retries: int = 0) -> dict:
    """A project whose judge is ``judge``; ``max_tokens`` differs per run, so no run is served from another's
    cached calls."""
    return {"llm": {"store": ".rubriclab/calls.sqlite",
                    "defaults": {"max_retries": max_retries, "parse_retries": 1, "timeout": 20, "concurrency": 4,
                                 "max_tokens": max_tokens},
                    "roles": {"judge": judge}},
            "drift": {"gate": {"n_boot": 50}}}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe_project")
    planted = _planted()
    write_pairs(drift_pairs(3, "bench") + drift_pairs(3, "target"), root / "pairs.jsonl")
    for name, extra in (("seed", ""), ("edit", " Consider accuracy before style.")):
        (root / f"{name}.json").write_text(json.dumps({"name": name, "template": HEAD + extra + "\n\n" + BODY}))
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "LITELLM_LOG")}
    env.update({name: value for name, value in planted.values()}, LITELLM_LOCAL_MODEL_COST_MAP="True",
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    outputs: dict[str, str] = {}

    def run(name: str, params: dict, args: list[str]) -> int:
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=300)
        outputs[name] = f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        return proc.returncode

    check = [sys.executable, "-m", "rubriclab.cli", "drift", "check", "--old", "seed.json", "--new", "edit.json",
             "--data", "pairs.jsonl"]
    with FakeOpenAIServer(responder=lambda body: "Verdict: [[A]]", record=True) as server:
        env[planted["userinfo"][0]] = server.url.replace("http://", f"http://probe:{planted['userinfo'][1]}@")
        ref = f"os.environ/{planted['userinfo'][0]}"
        server.quote_replies = True  # every reply's text quotes the request: stored as the reply, parsed, reported
        run("replies", _params(_judge(server.url, planted, how="env_key"), 2000), check)
        server.quote_replies, server.quote_status = False, 400  # final errors quoting the request
        run("400", _params(_judge(server.url, planted, how="env_key"), 62), check)
        server.quote_status = 500  # retried: each retry's reason is written when it happens
        run("500", _params(_judge(server.url, planted, how="env_key"), 63, max_retries=1), check)
        server.quote_status = 401
        run("401", _params(_judge(server.url, planted, how="param_key"), 64), check)
        server.quote_status = None
        run("userinfo", _params(_judge(ref, planted, how="userinfo"), 65), check)
        # dvc.lock: DVC copies the llm params into it; the stage is doctor, which resolves every role's keys
        (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"doctor": {
            "cmd": f"{sys.executable} -m rubriclab.cli doctor --skip-embedded > doctor.txt", "params": ["llm"],
            "outs": ["doctor.txt"]}}}))
        dvc = str(Path(sys.executable).with_name("dvc"))
        subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=root, env=env, check=True, capture_output=True)
        dvc_code = run("dvc", _params(_judge(server.url, planted, how="env_key"), 2000), [dvc, "repro", "-q"])
        received = list(server.received_requests)
    return root, planted, outputs, received, dvc_code


def test_every_planted_value_reached_the_server(probe):
    _, planted, _, received, _ = probe
    sent = json.dumps(received)
    for kind in ("key", "param", "header", "body"):
        assert planted[kind][1] in sent, f"{kind} was never sent: the checks below would prove nothing"


def test_no_planted_value_in_any_file_of_the_project(probe):
    root, planted, _, _, dvc_code = probe
    assert dvc_code == 0 and (root / "dvc.lock").is_file()
    assert planted["key"][0] in (root / "dvc.lock").read_text()  # the name is there, never the value
    names = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert {".rubriclab/calls.sqlite", "mlflow.db", "dvc.lock"} <= names
    assert any(n.startswith("mlartifacts/") for n in names) and any(n.startswith("outputs/drift_check/") for n in names)
    found = {n: _leaks((root / n).read_bytes(), planted) for n in sorted(names)}
    assert not {n: k for n, k in found.items() if k}, "planted credentials found in project files"


def test_the_store_kept_the_quoted_texts_redacted(probe):
    """The call store's reply texts, errors and retry reasons did hold the server's quotes (so the absence above
    is the redaction's doing), with REDACTED where each credential was."""
    import sqlite3

    root, *_ = probe
    db = sqlite3.connect(root / ".rubriclab/calls.sqlite")
    texts = [t for (t,) in db.execute("SELECT text FROM calls WHERE text LIKE '%received:%'")]
    errors = [e for (e,) in db.execute("SELECT error FROM calls WHERE error LIKE '%received:%'")]
    reasons = [r for (r,) in db.execute("SELECT reason FROM retry_events WHERE reason LIKE '%received:%'")]
    db.close()
    assert texts and errors and reasons
    assert all("REDACTED" in t for t in texts + errors + reasons)


def test_no_planted_value_in_the_commands_output(probe):
    _, planted, outputs, _, _ = probe
    assert set(outputs) == {"replies", "400", "500", "401", "userinfo", "dvc"}
    assert not {name: _leaks(text.encode(), planted) for name, text in outputs.items() if _leaks(text.encode(),
                                                                                                  planted)}


def test_a_registered_value_is_redacted_in_log_records_and_tracebacks(capsys):
    import logging

    from rubriclab.secrets import redact_text, register_secret, register_url_credentials

    value = f"zqplain{secrets.token_hex(6)}"
    register_secret(value)
    register_url_credentials(f"http://probe:pw{value}@127.0.0.1:1/v1?tok=q{value}")
    assert redact_text(f"got {value.upper()} and {quote_plus('&' + value)}") == "got REDACTED and %26REDACTED"
    assert value not in redact_text(f"Basic {value}") and f"pw{value}" not in redact_text(f"pass pw{value}")
    logger = logging.getLogger("rubriclab.test_secrets_by_value")
    handler = logging.StreamHandler(sys.stderr)
    logger.addHandler(handler)
    try:
        logger.warning("server said %s", value)
    finally:
        logger.removeHandler(handler)
    try:
        raise RuntimeError(f"boom {value}")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    err = capsys.readouterr().err
    assert "server said REDACTED" in err and "boom REDACTED" in err and value not in err

