"""Secrets by allow-list (issue 26): a role's ``extra`` fields are stored, keyed and logged only when they are
documented decoding parameters; every other value is sent to the provider and to nothing else.

Twenty credential-ish fields — the six the name filter missed (``extra_body.passphrase``, ``extra_body.sessionid``,
``extra_headers.X-Jwt-Assertion``, ``X-Signature``, ``hmac``, ``access_code``) and fourteen more under random names,
all with high-entropy values no pattern recognises — go through the gateway, the call store, MLflow tracking, a
stage's outputs, ``dvc repro`` (dvc.lock) and the CLI. The fake server records what it received, so each value is
shown to have been sent; then every byte of every file of the project, and every captured log, is searched for it.
A literal credential in params.yaml is refused with one line that says how to reference an environment variable.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml
from aiohttp import web

from rubriclab.errors import ConfigError
from rubriclab.testing import FakeOpenAIServer


def _value(i: int) -> str:
    """A high-entropy value (URL-safe base64 of a hash): no sk-/hf_/Bearer shape for a pattern to catch."""
    return base64.urlsafe_b64encode(hashlib.sha256(f"issue-26 credential {i}".encode()).digest()).decode()[:32]


# (where in `extra`, name): body = extra_body, header = extra_headers, kwarg = a litellm keyword argument
FIELDS = [
    ("body", "passphrase"), ("body", "sessionid"), ("header", "X-Jwt-Assertion"), ("header", "X-Signature"),
    ("body", "hmac"), ("kwarg", "access_code"),
    ("body", "otp"), ("body", "nonce_seed"), ("body", "kx3pz_opaque"), ("body", "license_blob"),
    ("header", "X-Client-Cert-Fp"), ("header", "Proxy-Assertion"), ("header", "X-Tenant-Pass"), ("header", "X-Qv7r-Z"),
    ("kwarg", "tenant_pin"), ("kwarg", "zk_proof"), ("kwarg", "wq8rmt_field"), ("kwarg", "pairing_phrase"),
    ("kwarg", "dsn_fragment"), ("kwarg", "vendor_ticket"),
]
TABLE = [(where, name, _value(i)) for i, (where, name) in enumerate(FIELDS)]
VALUES = [v for *_, v in TABLE]
ENV = {f"RL_SECRET_{i:02d}": v for i, v in enumerate(VALUES)}  # the variables params.yaml references
assert len(TABLE) == 20 and len(set(VALUES)) == 20


def _path(where: str, name: str) -> str:
    return {"body": f"extra_body.{name}", "header": f"extra_headers.{name}", "kwarg": name}[where]


def extra_of(values: list[str], public: bool = True) -> dict:
    """A role's ``extra`` holding the table's fields with ``values`` (literal values or env references), plus
    allow-listed decoding parameters (stored and logged in clear) when ``public``."""
    extra: dict = {"extra_body": {}, "extra_headers": {}}
    for (where, name, _), value in zip(TABLE, values):
        if where == "body":
            extra["extra_body"][name] = value
        elif where == "header":
            extra["extra_headers"][name] = value
        else:
            extra[name] = value
    if public:
        extra["extra_body"]["top_k"] = 7
        extra["presence_penalty"] = 0.25
    return extra


LITERAL_EXTRA = extra_of(VALUES)
REF_EXTRA = extra_of([f"os.environ/{name}" for name in ENV])


def _forms(value: str) -> set[bytes]:
    """The encodings a copy of ``value`` could take, and its two ends (a cut or partly masked copy)."""
    out = {value, value.lower(), quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1], value[:12],
           value[-12:], value.encode().hex()}
    forms = {f.encode() for f in out}
    forms.add(value.encode("utf-16-le"))
    for k in range(3):  # base64 at each alignment inside a longer blob, cut to the characters `value` alone decides
        enc = base64.b64encode(b"\0" * k + value.encode())
        start, end = -(-8 * k // 6), 8 * (k + len(value)) // 6
        forms |= {enc[start:end], enc[start:end].translate(bytes.maketrans(b"+/", b"-_"))}
    return forms


NEEDLES = {form: name for _, name, value in TABLE for form in _forms(value)}


def leaks_in(data: bytes) -> list[str]:
    return sorted({name for needle, name in NEEDLES.items() if needle in data})


def leaks_in_files(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and (hits := leaks_in(path.read_bytes())):
            found[str(path.relative_to(root))] = hits
    return found


class RecordingServer(FakeOpenAIServer):
    """The fake OpenAI server, keeping every request's raw body and headers; a model named ``*echo*`` is answered
    400 with the whole request quoted back (as some gateways do)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict] = []
        self._seen_lock = threading.Lock()

    def _make_app(self) -> web.Application:
        app = super()._make_app()

        @web.middleware
        async def record(request: web.Request, handler):
            raw = (await request.read()).decode("utf-8", "replace")
            with self._seen_lock:
                self.seen.append({"body": raw, "headers": dict(request.headers)})
            if request.method == "POST" and "echo" in raw:
                return web.json_response({"error": {"message": f"bad request: {raw} headers {dict(request.headers)}",
                                                    "type": "invalid_request_error"}}, status=400)
            return await handler(request)

        app.middlewares.append(record)
        return app

    def received(self) -> tuple[str, list[dict]]:
        with self._seen_lock:
            return "\n".join(e["body"] for e in self.seen), [e["headers"] for e in self.seen]


def assert_every_value_was_sent(server: RecordingServer) -> None:
    """Each body and kwarg value in a request body, each header value in a request's headers: nothing passes the
    "nowhere" checks because it was dropped before the provider."""
    raw, headers = server.received()
    bodies = [json.loads(line) for line in raw.splitlines() if line.strip()]
    headers = [{k.lower(): v for k, v in h.items()} for h in headers]
    missing = []
    for where, name, value in TABLE:
        if where == "header":
            if not any(h.get(name.lower()) == value for h in headers):
                missing.append(name)
        elif not any(b.get(name) == value for b in bodies):
            missing.append(name)
    assert not missing, f"not sent to the provider: {missing}"
    assert any(b.get("top_k") == 7 and b.get("presence_penalty") == 0.25 for b in bodies)


# -- the gateway and tracking, in process, with literal values (a library caller building RoleSpecs) --------------


def test_gateway_and_tracking_send_every_extra_but_store_and_log_none(tmp_path, monkeypatch, caplog, capfd):
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
    from rubriclab.tracking import stage_run, write_metrics_json

    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    caplog.set_level(logging.DEBUG, logger="rubriclab")
    caplog.set_level(logging.INFO)
    params = {"llm": {"roles": {"judge": {"model": "openai/fake-judge", "extra": LITERAL_EXTRA},
                                "verifier": {"model": "openai/fake-echo", "extra": LITERAL_EXTRA}}}}
    with RecordingServer() as server:
        judge = RoleSpec(name="judge", model="openai/fake-judge", api_base=server.url, max_retries=0,
                         extra=LITERAL_EXTRA)
        echo = RoleSpec(name="verifier", model="openai/fake-echo", api_base=server.url, max_retries=0,
                        extra=LITERAL_EXTRA)
        requests = [CallRequest(role=judge, messages=[{"role": "user", "content": f"question {i}"}]) for i in range(3)]
        requests.append(CallRequest(role=echo, messages=[{"role": "user", "content": "echo this"}]))
        store = open_store(tmp_path / ".rubriclab/calls.sqlite")
        with stage_run("allowlist", "allowlist@demo", params, tmp_path) as run:
            results = Gateway(store, stage="allowlist", progress=False).run(requests)
            rows = [{"text": r.text, "error": r.error, "ok": r.ok} for r in results]
            run.log_table(rows, "replies.json")
            run.log_dict({"roles": {"judge": judge.decoding_params()}}, "roles.json")
            (tmp_path / "outputs").mkdir()
            (tmp_path / "outputs/replies.json").write_text(json.dumps(rows))
            write_metrics_json(tmp_path / "metrics.json", {"ok": sum(r.ok for r in results)})
        calls_before = len(server.seen)
        again = Gateway(store, stage="allowlist", progress=False).run(requests[:3])  # the sealed key is stable
        store.close()
        assert len(server.seen) == calls_before and all(r.cached for r in again)
        assert_every_value_was_sent(server)
    assert [r.ok for r in results] == [True, True, True, False] and "BadRequestError" in results[3].error

    found = leaks_in_files(tmp_path)
    assert not found, f"credentials in files: {found}"
    names = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    assert {"mlflow.db", ".rubriclab/calls.sqlite", "outputs/replies.json", "metrics.json"} <= names
    assert any(n.startswith("mlartifacts/") and n.endswith("replies.json") for n in names)
    out, err = capfd.readouterr()
    logged = "\n".join(r.getMessage() for r in caplog.records) + out + err
    assert not leaks_in(logged.encode()), leaks_in(logged.encode())
    assert not [r.error for r in results if leaks_in((r.error or "").encode())]
    # what is kept: the allow-listed params in clear, the other fields by name only
    db = sqlite3.connect(tmp_path / ".rubriclab/calls.sqlite")
    stored = json.loads(db.execute("SELECT request FROM calls WHERE role='judge' LIMIT 1").fetchone()[0])
    db.close()
    assert stored["params"]["extra_body"] == {"top_k": 7} and stored["params"]["presence_penalty"] == 0.25
    assert set(stored["sent_not_stored"]) == {_path(w, n) for w, n, _ in TABLE}
    mlflow = sqlite3.connect(tmp_path / "mlflow.db")
    logged_params = dict(mlflow.execute("SELECT key, value FROM params"))
    mlflow.close()
    assert logged_params["llm.roles.judge.extra.extra_body.top_k"] == "7"
    assert logged_params["llm.roles.judge.extra.extra_body.passphrase"] == "(sent, not logged)"


# -- a DVC stage on params.yaml with os.environ/NAME references: dvc.lock, MLflow, outputs, CLI ---------------------

STAGE = textwrap.dedent("""
    import json
    from pathlib import Path
    from rubriclab.config import load_params
    from rubriclab.llm import CallRequest, gateway_from_params, panel, roles_from_params
    from rubriclab.tracking import stage_run, write_metrics_json

    project = Path.cwd()
    params = load_params(project / "params.yaml")
    roles = roles_from_params(params)
    gateway = gateway_from_params(params, "call", project)
    requests = [CallRequest(role=m, messages=[{"role": "user", "content": f"question {i}"}], tag=i)
                for name in ("judge", "verifier") for m in panel(roles[name]) for i in range(2)]
    with stage_run("call", "call@demo", params, project) as run:
        results = gateway.run(requests, desc="calls")
        rows = [{"tag": r.tag, "ok": r.ok, "text": r.text, "error": r.error, "cached": r.cached} for r in results]
        run.log_table(rows, "replies.json")
        Path("outputs/call").mkdir(parents=True, exist_ok=True)
        Path("outputs/call/replies.json").write_text(json.dumps(rows, indent=1))
        metrics = {"ok": sum(r.ok for r in results), "cached": sum(r.cached for r in results)}
        run.log_metrics(metrics)
        write_metrics_json("metrics/call.json", metrics)
    print(json.dumps(metrics))
""")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_", "LITELLM_LOG"))}
    env.update(OPENAI_API_KEY="sk-fake", LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
               PYTHONUNBUFFERED="1", DVC_NO_ANALYTICS="1", **ENV)
    return env


def _run(root: Path, args: list[str], logs: dict[str, str], name: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=root, env=_env(), capture_output=True, text=True, timeout=300)
    logs[name] = f"$ {' '.join(args)}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    """`dvc repro` (twice) of a one-stage project whose stage lists the `llm` params, every credential referenced
    as os.environ/NAME; then `rubriclab calls` and `rubriclab doctor`. Returns (root, server, logs, procs)."""
    root = tmp_path_factory.mktemp("allowlist_project")
    logs: dict[str, str] = {}
    procs: dict[str, subprocess.CompletedProcess] = {}
    py = sys.executable
    with RecordingServer() as server:
        params = {"llm": {"store": ".rubriclab/calls.sqlite",
                          "defaults": {"max_retries": 0, "parse_retries": 0, "timeout": 30},
                          "roles": {"judge": {"model": "openai/fake-judge", "api_base": server.url,
                                              "extra": REF_EXTRA},
                                    "verifier": {"model": "openai/fake-echo", "api_base": server.url,
                                                 "extra": REF_EXTRA}}},
                  "tracking": {"experiment": "rubriclab"}}
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        (root / "stage.py").write_text(STAGE)
        (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"call": {
            "cmd": f"{py} stage.py", "deps": ["stage.py"], "params": ["llm"], "outs": ["outputs/call"],
            "metrics": [{"metrics/call.json": {"cache": False}}]}}}))
        for name, args in (("init", [py, "-m", "dvc", "init", "--no-scm", "-q"]),
                           ("repro", [py, "-m", "dvc", "repro"]),
                           ("repro_again", [py, "-m", "dvc", "repro", "--force"]),
                           ("calls", [py, "-m", "rubriclab.cli", "calls"]),
                           ("doctor", [py, "-m", "rubriclab.cli", "doctor", "--skip-embedded"])):
            procs[name] = _run(root, args, logs, name)
            if name in ("init", "repro"):
                assert procs[name].returncode == 0, logs[name][-3000:]
        seen = len(server.seen)
        yield root, server, logs, procs, seen


def test_repro_sent_every_referenced_value(repro):
    root, server, logs, procs, seen = repro
    assert_every_value_was_sent(server)
    assert (root / "dvc.lock").exists() and (root / "outputs/call/replies.json").exists()
    rows = json.loads((root / "outputs/call/replies.json").read_text())
    assert [r["ok"] for r in rows] == [True, True, False, False]  # the echo model's 400s are recorded failures
    # the forced re-run served the judge's calls from the store (the sealed key, salted by the store, is stable);
    # only the echo model's failures were asked again (errors are never served from the cache)
    assert procs["repro_again"].returncode == 0, logs["repro_again"][-2000:]
    assert json.loads((root / "metrics/call.json").read_text())["cached"] == 2
    assert seen == 6


def test_dvc_lock_holds_references_not_values(repro):
    root, *_ = repro
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    extra = lock["stages"]["call"]["params"]["params.yaml"]["llm"]["roles"]["judge"]["extra"]
    assert extra["extra_body"]["passphrase"] == "os.environ/RL_SECRET_00"  # the llm params were copied, as refs
    assert extra["extra_body"]["top_k"] == 7


def test_no_value_in_any_file_or_log_of_the_project(repro):
    root, _, logs, procs, _ = repro
    found = leaks_in_files(root)
    assert not found, f"credentials in project files: {found}"
    names = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert {"dvc.lock", "mlflow.db", ".rubriclab/calls.sqlite", "outputs/call/replies.json"} <= names
    assert any(n.startswith("mlartifacts/") for n in names) and any(n.startswith(".dvc/cache/") for n in names)
    assert procs["calls"].returncode == 0 and "judge" in logs["calls"], logs["calls"][-2000:]
    assert "judge" in logs["doctor"], logs["doctor"][-2000:]
    found = {name: leaks_in(text.encode()) for name, text in logs.items() if leaks_in(text.encode())}
    assert not found, f"credentials in captured output: {found}"


# -- params.yaml: a literal credential is refused, in one line that says what to write instead --------------------


def _write(tmp_path: Path, extra: dict | None = None, **role) -> Path:
    spec = {"model": "openai/gpt-4o-mini", **role}
    if extra is not None:
        spec["extra"] = extra
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"llm": {"roles": {"judge": spec}}}))
    return path


@pytest.mark.parametrize(("where", "name", "value"), TABLE, ids=[n for _, n, _ in TABLE])
def test_a_literal_credential_in_params_is_refused(tmp_path, where, name, value):
    from rubriclab.config import load_params

    single = extra_of([f"os.environ/{n}" for n in ENV])
    path = _path(where, name)
    node = single
    for part in path.split(".")[:-1]:
        node = node[part]
    node[path.split(".")[-1]] = value
    with pytest.raises(ConfigError) as err:
        load_params(_write(tmp_path, single))
    msg = str(err.value)
    assert "\n" not in msg and f"llm.roles.judge.extra.{path}" in msg and "os.environ/NAME" in msg, msg
    assert not leaks_in(msg.encode())
    # the same literal given as an override (`--set`, `dvc exp run --set-param`): refused, not echoed
    with pytest.raises(ConfigError) as err:
        load_params(_write(tmp_path, REF_EXTRA), [f"llm.roles.judge.extra.{path}={json.dumps(value)}"])
    assert "\n" not in str(err.value) and not leaks_in(str(err.value).encode())
    assert f"llm.roles.judge.extra.{path}" in str(err.value)


def test_references_decoding_params_and_flags_load(tmp_path):
    from rubriclab.config import load_params

    extra = {**REF_EXTRA, "reasoning_effort": "low", "stop": ["\n\n"], "drop_params": True,
             "extra_body": {**REF_EXTRA["extra_body"], "chat_template_kwargs": {"enable_thinking": False},
                            "guided_choice": ["A", "B"]}}
    params = load_params(_write(tmp_path, extra, api_base="os.environ/RL_ENDPOINT"))
    assert params.given()["llm"]["roles"]["judge"]["extra"]["extra_body"]["passphrase"] == "os.environ/RL_SECRET_00"


@pytest.mark.parametrize(("role", "field"), [
    ({"api_base": "http://user:hunter2-pw@10.0.0.1:8000/v1"}, "llm.roles.judge.api_base"),
    ({"api_base": "http://10.0.0.1:8000/v1?key=abcdef123456"}, "llm.roles.judge.api_base"),
    ({"api_key_env": "sk-live-abcdef1234567890abcd"}, "llm.roles.judge.api_key_env"),
    ({"extra": {"extra_body": {"top_k": "os.environ/TOPK"}}}, "llm.roles.judge.extra.extra_body.top_k"),
    ({"extra": {"access_code": 48213377}}, "llm.roles.judge.extra.access_code"),  # numbers too
    ({"extra": {"extra_headers": {"X-Jwt-Assertion": "os.environ/not a name"}}},
     "llm.roles.judge.extra.extra_headers.X-Jwt-Assertion"),
])
def test_other_literal_credentials_are_refused(tmp_path, role, field):
    from rubriclab.config import load_params

    with pytest.raises(ConfigError) as err:
        load_params(_write(tmp_path, **role))
    msg = str(err.value)
    assert "\n" not in msg and field in msg, msg
    for shown in ("hunter2-pw", "abcdef123456", "sk-live", "48213377"):
        assert shown not in msg


def test_a_password_in_the_store_url_is_refused(tmp_path):
    from rubriclab.config import load_params

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"llm": {"store": "postgresql://rubric:pg-pass-9931@db:5432/calls"}}))
    with pytest.raises(ConfigError) as err:
        load_params(path)
    assert "llm.store" in str(err.value) and "PGPASSWORD" in str(err.value) and "pg-pass" not in str(err.value)


# -- the cache key --------------------------------------------------------------------------------------------------

MSGS = [{"role": "user", "content": "Which response is better? A or B"}]


def _golden_requests():
    from rubriclab.llm import CallRequest, RoleSpec

    schema = {"type": "json_object", "schema": {"type": "object", "properties": {
        "verdict": {"enum": ["A", "B"]}, "key_points": {"type": "string"}}}}
    return {
        "demo_judge": CallRequest(role=RoleSpec(name="judge", model="local/smollm2-135m", temperature=0.7,
                                                max_tokens=64), messages=MSGS, sample_index=2, response_format=schema),
        "scored": CallRequest(role=RoleSpec(name="judge", model="local/smollm2-135m", max_tokens=1), messages=MSGS,
                              logprobs=5),
        "endpoint": CallRequest(role=RoleSpec(name="judge", model="hosted_vllm/Qwen/Qwen3-14B", top_p=0.9,
                                              api_base="http://10.0.0.1:8000/v1", api_key_env="X"), messages=MSGS),
        "public_extra": CallRequest(role=RoleSpec(name="judge", model="openai/gpt-4o-mini", extra={
            "top_k": 40, "reasoning_effort": "low",
            "extra_body": {"min_p": 0.1, "chat_template_kwargs": {"enable_thinking": False}}}), messages=MSGS),
    }


# computed by the code before the allow-list: a request without private fields keeps its key (cached calls hit)
GOLDEN = {
    "demo_judge": ("1c3ea34ef174c0b301db7d63704c0845c52fc28ccaf207c90e2ebf301e9493a0",
                   "2b2f4d7c4f3b3615c48579b53b2b010e1c8f04a6902ad0dd7c3968eb7cde9390"),
    "scored": ("aa47a3ef75f22bfc45505a47d3b19cffaaaddb06a6834101815c73379ae4c0ae",
               "a42b5f03152507cca3ac35d3513af65c4e381f28913de7cf26c68dbe96b2f277"),
    "endpoint": ("e917daf501733b8b7b96bf79cf87fa94dcfc098d1943aa50ac4b0bc14110af01",
                 "b253314284a6bd3d2efdf710ffb8191e92456d6dade9c155dfb3c6f0ca67c0da"),
    "public_extra": ("fc8e2bcff80971672b7fa91c6b675080fef7763ac9a2c088d3197549e7779528",
                     "1ce07cc78635910a1b59b668338cdfd461d49bddeee1736186f9179f856676de"),
}


def test_keys_without_private_fields_are_unchanged():
    reask = [*MSGS, {"role": "user", "content": "again"}]
    for name, req in _golden_requests().items():
        assert (req.key(0), req.key(1, reask)) == GOLDEN[name], name


def test_a_store_salt_changes_no_key_without_private_fields():
    for name, req in _golden_requests().items():
        assert req.key(0, salt=b"any salt") == GOLDEN[name][0], name


def test_private_body_fields_key_by_salted_hash_headers_not_at_all(tmp_path, monkeypatch):
    from rubriclab.llm import CallRequest, RoleSpec, open_store, store_salt

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    one, two = open_store(tmp_path / "one.sqlite"), open_store(tmp_path / "two.sqlite")
    salt_one, salt_two = store_salt(one), store_salt(two)
    one.close()
    assert store_salt(reopened := open_store(tmp_path / "one.sqlite")) == salt_one != salt_two
    reopened.close()
    two.close()

    def key(extra: dict, salt: bytes = salt_one) -> str:
        return CallRequest(role=RoleSpec(name="judge", model="openai/m", extra=extra), messages=MSGS).key(0, salt=salt)

    base = key(REF_EXTRA)
    assert key(LITERAL_EXTRA) == base  # a reference keys by the value it resolves to
    assert key(REF_EXTRA, salt_two) != base  # salted per store
    monkeypatch.setenv("RL_SECRET_00", "another passphrase value")  # extra_body.passphrase
    assert key(REF_EXTRA) != base  # a body field may change the reply: the key changes with it
    monkeypatch.setenv("RL_SECRET_00", ENV["RL_SECRET_00"])
    monkeypatch.setenv("RL_SECRET_02", "another-jwt-assertion")  # extra_headers.X-Jwt-Assertion
    assert key(REF_EXTRA) == base  # a header (who is asking) does not: a rotated token keeps the cache
    monkeypatch.delenv("RL_SECRET_05")
    with pytest.raises(ConfigError, match=r"llm\.roles\.judge\.extra\.access_code: environment variable RL_SECRET_05"):
        key(REF_EXTRA)


def test_workers_sharing_a_store_share_its_salt(store_url):  # noqa: F811 - the imported fixture
    """Every backend keeps one salt per store, made once: two workers on one store (two processes, two machines on
    PostgreSQL) compute the same sealed keys, so each unique call is still made once."""
    from rubriclab.llm import CallRequest, RoleSpec, open_store, store_salt

    a, b = open_store(store_url), open_store(store_url)
    try:
        assert store_salt(a) == store_salt(b) and len(store_salt(a)) == 16
        req = CallRequest(role=RoleSpec(name="judge", model="openai/m", extra=LITERAL_EXTRA), messages=MSGS)
        assert req.key(0, salt=store_salt(a)) == req.key(0, salt=store_salt(b))
    finally:
        a.close()
        b.close()


def test_an_unset_reference_stops_the_batch_before_any_call(tmp_path, monkeypatch):
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store

    monkeypatch.delenv("RL_UNSET_VARIABLE", raising=False)
    role = RoleSpec(name="judge", model="openai/m", api_base="http://127.0.0.1:9/v1",
                    extra={"extra_headers": {"X-Signature": "os.environ/RL_UNSET_VARIABLE"}})
    store = open_store(tmp_path / "calls.sqlite")
    with pytest.raises(ConfigError, match=r"extra_headers\.X-Signature: environment variable RL_UNSET_VARIABLE"):
        Gateway(store, progress=False).run([CallRequest(role=role, messages=MSGS)])
    assert store.ledger() == [] or all(r["calls"] == 0 for r in store.ledger())
    store.close()


def test_the_allow_list_is_litellms_documented_params_without_transport():
    import litellm

    from rubriclab.secrets import OPENAI_REPLY_PARAMS, PUBLIC_PARAMS, TRANSPORT_PARAMS, is_secret_key

    assert OPENAI_REPLY_PARAMS <= set(litellm.OPENAI_CHAT_COMPLETION_PARAMS)
    assert not PUBLIC_PARAMS & TRANSPORT_PARAMS
    assert not {"api_key", "user", "extra_headers", "extra_body", "metadata"} & PUBLIC_PARAMS
    # why names cannot decide: the name filter passes these
    assert not any(is_secret_key(n) for n in ("sessionid", "passphrase", "jwt", "X-Signature", "hmac", "access_code"))
