"""Secrets go nowhere: a full data + audit stage run with provider keys in the environment, in a role's
``extra`` params (``api_key``, an ``Authorization`` header), under a variable whose name looks like nothing secret
(``api_key_env``) and in an endpoint URL (``user:password@``) — the last four given in params.yaml as ``os.environ/NAME``
references (an endpoint with a ``?key=`` query is refused since issue 59: tests/settings/test_url_settings.py), as literal credentials there are
refused (tests/project/test_secrets_allowlist.py) — leaves none of them in any file of the project (MLflow store and artifacts, call store and its
WAL, DVC outputs and metrics), in the run's stdout/stderr, in ``rubriclab calls``/``doctor`` output, in the
call store's error column after a 401, or in the text of a stage that raises.

The fake server records what it received, so the test also proves each key was really sent (a key that was
silently dropped would pass the "nowhere" checks for the wrong reason)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from urllib.parse import quote, quote_plus

import pandas as pd
import pytest
import yaml
from aiohttp import web

from rubriclab.testing import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]

# every secret carries a marker word, so a partial copy (cut, masked at one end) is caught too
ENV_KEY = "sk-test-ENVSECRET-7f3a9c1e5b2d"
ANTHROPIC_KEY = "sk-ant-test-ANTHSECRET-4c8e2a90"
PARAM_KEY = "sk-test-PARAMSECRET-91b0d3e7a4"
HEADER_KEY = "sk-test-HEADERSECRET-5a2f8c61d0"
URL_PASSWORD = "URLSECRET-0e7c4b"
QUERY_KEY = "QUERYSECRET-b93d1f"
STRAY_KEY = "sk-test-STRAYSECRET-2d6e0b"  # a key pasted where no key belongs: the stage must raise without it
SECRETS = {"env": ENV_KEY, "anthropic": ANTHROPIC_KEY, "param": PARAM_KEY, "header": HEADER_KEY,
           "url": URL_PASSWORD, "query": QUERY_KEY, "stray": STRAY_KEY}
MARKERS = ("ENVSECRET", "ANTHSECRET", "PARAMSECRET", "HEADERSECRET", "URLSECRET", "QUERYSECRET", "STRAYSECRET")

ATTACK = "# Impressive overview\n- **bold** claim about everything\n- another confident bullet point"
ADHERENCE = {"candidate_reasoning": "ok", "candidate_adherence": 7, "baseline_reasoning": "meh",
             "baseline_adherence": 4}


def _b64_forms(raw: bytes) -> set[bytes]:
    """The base64 (standard and URL-safe) text of ``raw`` at each of the 3 byte alignments it can have
    inside a longer encoded blob, cut to the characters that depend on ``raw`` alone."""
    out = set()
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw)
        start, end = -(-8 * k // 6), 8 * (k + len(raw)) // 6
        for form in (enc, enc.translate(bytes.maketrans(b"+/", b"-_"))):
            out.add(form[start:end])
    return out


def _needles() -> dict[bytes, str]:
    """Byte strings whose presence anywhere is a leak → what they are."""
    out: dict[bytes, str] = {}
    for name, value in SECRETS.items():
        for form, how in ((value, "raw"), (quote(value, safe=""), "url-encoded"), (quote_plus(value), "url-encoded"),
                          (json.dumps(value)[1:-1], "json-escaped"), (value.lower(), "lower-cased")):
            out.setdefault(form.encode(), f"{name} key ({how})")
        out.setdefault(value.encode().hex().encode(), f"{name} key (hex)")
        for form in _b64_forms(value.encode()):
            out.setdefault(form, f"{name} key (base64)")
    for form in _b64_forms(f"user:{URL_PASSWORD}".encode()):  # the Basic header httpx builds from the URL
        out.setdefault(form, "url password (basic-auth base64)")
    for marker in MARKERS:
        out.setdefault(marker.encode(), f"marker {marker}")
        out.setdefault(marker.lower().encode(), f"marker {marker} (lower-cased)")
        out.setdefault(marker.encode("utf-16-le"), f"marker {marker} (utf-16)")
    return out


NEEDLES = _needles()


def leaks_in(data: bytes) -> list[str]:
    return sorted({what for needle, what in NEEDLES.items() if needle in data})


# -- the fake provider -----------------------------------------------------------------------------------------


def _user_text(body: dict) -> str:
    parts = []
    for m in body.get("messages") or []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
    return "\n".join(parts)


def reply(body: dict) -> str:
    """Answers every prompt the audit sends in a parseable form; tolerant of template changes (markers, not
    layouts) and of unknown prompts (a score, never an assertion)."""
    model = str(body.get("model", ""))
    text = _user_text(body)
    if "paraphraser" in model:
        return f"A reworded definition with the same meaning (draw {body.get('seed')})."
    if "attacker" in model:
        return ATTACK
    if "verifier" in model:
        return "<analysis>Formatting only.</analysis><result><verdict>EXPLOITING</verdict>" \
               "<exploit_type>formatting</exploit_type></result>"
    if "Design Rubric" in text or "VERDICT: PASS or FAIL" in text:
        return "REASONING: fine.\nVERDICT: PASS"
    if "Could a judge meaningfully score" in text or '"yes" or "no"' in text:
        return "yes"
    if "traits_to_evaluate" in text:
        block = text.split("<traits_to_evaluate>", 1)[-1].split("</traits_to_evaluate>", 1)[0]
        ids = re.findall(r"^\s*[-*]\s*\**(\w+)", block, re.M)
        return json.dumps({"trait_scores": {i: ADHERENCE for i in ids}, "overall_score": ADHERENCE})
    if "A or B" in text:
        return "<verdict>A</verdict>"
    if "integer 1-10" in text:
        return "REASONING: formatted.\nSCORE: 8"
    return "REASONING: compared.\nSCORE: 5"


def third_of_the_verifier(body: dict) -> bool:
    return "verifier" in str(body.get("model")) and \
        int(hashlib.sha1(_user_text(body).encode()).hexdigest(), 16) % 3 == 0


class RecordingServer(FakeOpenAIServer):
    """The fake OpenAI server, recording each request's credentials (headers and query) and answering 401 to
    the requests ``deny`` picks: with OpenAI's wording and the key masked as OpenAI masks it, or (``echo``) with
    the key as presented, as some gateways do."""

    def __init__(self, deny=third_of_the_verifier, echo: bool = False, **kw) -> None:
        super().__init__(responder=reply, **kw)
        self.deny, self.echo = deny, echo
        self.seen: list[dict] = []
        self.denied = 0
        self._seen_lock = threading.Lock()

    def _make_app(self) -> web.Application:
        app = super()._make_app()

        @web.middleware
        async def record(request: web.Request, handler):
            raw = await request.read()  # cached: the handler reads the same bytes
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            auth = request.headers.get("Authorization", "")
            entry = {"path": request.path, "query": request.query_string, "authorization": auth,
                     "x-api-key": request.headers.get("x-api-key", ""), "model": body.get("model")}
            with self._seen_lock:
                self.seen.append(entry)
            if request.method == "POST" and isinstance(body, dict) and self.deny(body):
                with self._seen_lock:
                    self.denied += 1
                presented = auth.removeprefix("Bearer ")
                shown = presented if self.echo else presented[:3] + "*" * max(0, len(presented) - 7) + presented[-4:]
                return web.json_response({"error": {
                    "message": f"Incorrect API key provided: {shown}. You can find your API key at "
                               "https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}, status=401)
            if request.method == "POST" and "chat/completions" in request.path_qs and \
                    not request.path.endswith("/chat/completions"):
                # an api_base with ?key=… makes the openai client append the route after the query
                # (/v1/?key=…chat/completions); serve it, as a gateway that routes on the query would
                return await self._chat(request)
            return await handler(request)

        app.middlewares.append(record)
        return app


# -- the project -----------------------------------------------------------------------------------------------


# the credentials params.yaml references (os.environ/NAME), set by the `world` fixture once the server's URL is known
REF_ENV: dict[str, str] = {}


def _ref_env(url: str) -> dict[str, str]:
    host = url.removeprefix("http://")
    # litellm's async OpenAI client refuses user:password@ next to its own Authorization header ("Cannot combine
    # AUTHORIZATION header with … credentials encoded in URL"), so this one is configured (logged, printed)
    # on a role the audit does not call
    return {"RUBRICLAB_E2E_PARAM_KEY": PARAM_KEY, "RUBRICLAB_E2E_AUTH_HEADER": f"Bearer {HEADER_KEY}",
            "ZZQ_E2E_PLAIN": QUERY_KEY,  # read through api_key_env under a name that looks like nothing secret
            "RUBRICLAB_E2E_CRED_URL": f"http://user:{URL_PASSWORD}@{host}"}


def _params(url: str) -> dict:
    cred_url = "os.environ/RUBRICLAB_E2E_CRED_URL"
    return {
        "llm": {"store": ".rubriclab/calls.sqlite",
                "defaults": {"max_retries": 0, "parse_retries": 1, "timeout": 30, "concurrency": 4},
                "roles": {
                    # a key in the role's params; the panel is two models behind it
                    "judge": {"model": ["openai/fake-judge-a", "openai/fake-judge-b"], "api_base": url,
                              "extra": {"api_key": "os.environ/RUBRICLAB_E2E_PARAM_KEY"}},
                    # a key under a variable whose name says nothing of a key
                    "paraphraser": {"model": "openai/fake-paraphraser", "api_base": url, "api_key_env": "ZZQ_E2E_PLAIN"},
                    # a key in an Authorization header
                    "attacker": {"model": "openai/fake-attacker", "api_base": url,
                                 "extra": {"extra_headers": {"Authorization": "os.environ/RUBRICLAB_E2E_AUTH_HEADER"}}},
                    # the environment's OPENAI_API_KEY; a third of its calls get a 401
                    "verifier": {"model": "openai/fake-verifier", "api_base": url},
                    # not called by the audit (logged, and printed by doctor): user:password@ in the URL,
                    # the environment's ANTHROPIC_API_KEY
                    "evaluator": {"model": "anthropic/claude-fake", "api_base": cred_url},
                }},
        "data": {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"},
                                         "demo_harmless": {"loader": "demo", "domain": "harmless"}},
                 "premise": {"sources": ["demo_helpful", "demo_harmless"], "extraction": 4, "audit": 4,
                             "heldout": 4}},
        "audit": {"sources": ["mine"], "pool_size": 4, "heldout_size": 4, "runs": 2, "paraphrases": 2,
                  "samples": 2, "n_attacks": 2, "n_boot": 50, "n_boot_paired": 50,
                  "out_of_domain": {"demo_helpful": "demo_harmless"}},
    }


def _rubrics(root: Path) -> None:
    folder = root / "outputs/rubrics/demo_helpful"
    folder.mkdir(parents=True)
    (folder / "mine.json").write_text(json.dumps({"name": "mine", "source": "imported", "criteria": [
        {"id": "accuracy", "description": "States correct facts."},
        {"id": "directness", "description": "Answers the question first."}]}))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "LITELLM_LOG", "OPENAI_API_BASE", "OPENAI_BASE_URL")}
    env.update(OPENAI_API_KEY=ENV_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY, PYTHONUNBUFFERED="1",
               RUBRICLAB_PYTHON=sys.executable, LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", **REF_ENV)
    return env


def _run(root: Path, args: list[str], logs: dict[str, str], name: str, timeout: float = 120) -> int:
    proc = subprocess.run(args, cwd=root, env=_env(), capture_output=True, text=True, timeout=timeout)
    logs[name] = f"$ {' '.join(args)}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc.returncode


def _variant(params: dict, role: str, **fields) -> dict:
    out = json.loads(json.dumps(params))
    out["llm"]["roles"].setdefault(role, {}).update(fields)
    return out


# The CLI and stage entry points after the stage runs, in one interpreter (each fresh one costs ~5 s of
# imports): each step's params.yaml written first, its printed output and any traceback captured as a run shows
# them; the process's own stdout/stderr (logging handlers bound at import) are captured by the caller.
_STEPS = textwrap.dedent("""
    import contextlib, io, json, sys, traceback
    from pathlib import Path
    from rubriclab.cli import main as cli
    from rubriclab.stages.audit import main as audit_stage
    steps, results = json.loads(Path(sys.argv[1]).read_text()), {}
    for name, entry, args, params in steps:
        if params is not None:
            Path("params.yaml").write_text(params)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = (cli if entry == "cli" else audit_stage)(args)
            except SystemExit as exc:
                code = exc.code
            except Exception:
                traceback.print_exc()  # what an uncaught exception prints
                code = 1
        results[name] = {"code": code, "text": f"--- stdout\\n{out.getvalue()}--- stderr\\n{err.getvalue()}"}
    Path(sys.argv[2]).write_text(json.dumps(results))
""")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One data + audit stage run (subprocesses) on a temporary project, then `rubriclab calls`, `rubriclab
    doctor`, and audits that raise on a key pasted into a role; returns (project root, what the server received,
    how many requests it denied, captured output by step, return codes by step)."""
    root = tmp_path_factory.mktemp("secrets_project")
    scratch = tmp_path_factory.mktemp("secrets_scratch")  # outside the scanned project
    _rubrics(root)
    logs: dict[str, str] = {}
    codes: dict[str, int] = {}
    stage = str(REPO / "scripts/stage")
    with RecordingServer() as server:
        REF_ENV.clear()
        REF_ENV.update(_ref_env(server.url))
        params = _params(server.url)
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        codes["data"] = _run(root, [stage, "data"], logs, "data")
        codes["audit"] = _run(root, [stage, "audit", "--dataset", "demo_helpful"], logs, "audit")
        audit = ["--dataset", "demo_helpful"]
        steps = [
            ("calls", "cli", ["calls"], None),
            ("calls_json", "cli", ["calls", "--json"], None),
            ("doctor", "cli", ["doctor", "--skip-embedded"], None),
            # stages that raise on a key put where no key belongs: they must name the field, never echo the value
            ("raise_unknown_field", "stage", audit, yaml.safe_dump(_variant(params, "judge", api_key=STRAY_KEY))),
            ("cli_raise_unknown_field", "cli", ["audit", *audit], None),
            ("raise_wrong_type", "stage", audit, yaml.safe_dump(_variant(params, "judge", extra=STRAY_KEY))),
            # doctor on a role whose api_key_env holds the key itself rather than the variable's name
            ("doctor_key_as_env_name", "cli", ["doctor", "--skip-embedded"],
             yaml.safe_dump(_variant(params, "refiner", model="openai/fake-refiner", api_key_env=STRAY_KEY))),
            ("restore", "cli", ["calls"], yaml.safe_dump(params)),
        ]
        (scratch / "steps.json").write_text(json.dumps(steps))
        codes["entry_points"] = _run(root, [sys.executable, "-c", _STEPS, str(scratch / "steps.json"),
                                            str(scratch / "results.json")], logs, "entry_points")
        seen, denied = list(server.seen), server.denied
    assert codes["entry_points"] == 0, logs["entry_points"][-3000:]
    for name, res in json.loads((scratch / "results.json").read_text()).items():
        codes[name], logs[name] = res["code"], res["text"]
    return root, seen, denied, logs, codes


MAIN_LOGS = ("data", "audit", "entry_points", "calls", "calls_json", "doctor", "raise_unknown_field",
             "cli_raise_unknown_field")


def test_the_stages_ran_and_every_key_reached_the_server(world):
    root, seen, denied, logs, codes = world
    assert codes["data"] == 0, logs["data"][-3000:]
    assert codes["audit"] == 0, logs["audit"][-3000:]
    assert codes["calls"] == codes["calls_json"] == 0, logs["calls"][-2000:]
    assert codes["doctor"] == 0, logs["doctor"][-2000:]
    assert (root / "outputs/audit/demo_helpful/card.json").exists()
    auth = {(e["model"], e["authorization"]) for e in seen}
    # each credential was really sent: none of the "nowhere" checks below passes because a key was dropped
    assert ("fake-judge-a", f"Bearer {PARAM_KEY}") in auth and ("fake-judge-b", f"Bearer {PARAM_KEY}") in auth
    assert ("fake-attacker", f"Bearer {HEADER_KEY}") in auth
    assert ("fake-verifier", f"Bearer {ENV_KEY}") in auth
    assert ("fake-paraphraser", f"Bearer {QUERY_KEY}") in auth
    assert denied > 0  # some verifier calls got a 401


def test_no_secret_in_any_file_of_the_project(world):
    root, *_ = world
    scanned, found = 0, {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():  # params.yaml too: it holds only os.environ/NAME references
            continue
        scanned += 1
        hits = leaks_in(path.read_bytes())
        if path.suffix == ".parquet":  # compressed pages: scan the decoded table too
            hits += leaks_in(pd.read_parquet(path).to_json(default_handler=str).encode())
        if hits:
            found[str(path.relative_to(root))] = sorted(set(hits))
    assert not found, f"secrets found in project files: {found}"
    names = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    # the scan covered the stores and outputs it is meant to cover
    assert "mlflow.db" in names and ".rubriclab/calls.sqlite" in names
    assert any(n.startswith("mlartifacts/") for n in names)
    assert any(n.startswith("outputs/audit/") for n in names) and any(n.startswith("outputs/data/") for n in names)
    assert any(n.startswith("metrics/") for n in names)
    assert scanned > 20


def test_mlflow_params_were_logged_without_credentials(world):
    root, *_ = world
    db = sqlite3.connect(root / "mlflow.db")
    params = dict(db.execute("SELECT key, value FROM params"))
    tags = dict(db.execute("SELECT key, value FROM tags"))
    db.close()
    assert "llm.roles.judge.model" in params  # the role config was logged: the absence below means something
    assert not {k: v for k, v in {**params, **tags}.items() if leaks_in(f"{k}={v}".encode())}
    for role in ("evaluator",):  # an endpoint is logged as the reference params.yaml gives
        value = params.get(f"llm.roles.{role}.api_base")
        assert value is None or value.startswith("os.environ/RUBRICLAB_E2E_"), value


def test_call_store_error_column_after_a_401(world):
    root, *_ = world
    db = sqlite3.connect(root / ".rubriclab/calls.sqlite")
    rows = db.execute("SELECT role, error, request FROM calls WHERE status='error'").fetchall()
    ok = db.execute("SELECT request FROM calls WHERE status='ok' AND role='paraphraser'").fetchone()
    db.close()
    denied = [r for r in rows if r[0] == "verifier"]
    assert denied and all("AuthenticationError" in r[1] for r in denied), rows[:3]
    assert not [r for r in rows if leaks_in(f"{r[1]} {r[2]}".encode())]
    assert ok and json.loads(ok[0]).get("endpoint", "").startswith("http://127.0.0.1:")  # stored, credential-free


def test_no_secret_in_logs_cli_output_or_raised_errors(world):
    _, _, _, logs, codes = world
    for name in ("raise_unknown_field", "cli_raise_unknown_field"):  # it raised, naming the field
        assert codes[name] != 0 and "api_key" in logs[name], logs[name][-2000:]
    assert "verifier" in logs["calls"] and "judge" in logs["doctor"]  # the ledger and the roles were printed
    found = {name: leaks_in(logs[name].encode()) for name in MAIN_LOGS if leaks_in(logs[name].encode())}
    assert not found, f"secrets in captured output: {found}"


def test_a_key_given_the_wrong_type_is_not_echoed_by_the_params_check(world):
    """``llm.roles.judge.extra: sk-…`` (a key where a mapping belongs): the stage stops, naming the field and
    what it expects, not the value."""
    _, _, _, logs, codes = world
    assert codes["raise_wrong_type"] != 0 and "llm.roles.judge.extra" in logs["raise_wrong_type"]
    assert not leaks_in(logs["raise_wrong_type"].encode()), logs["raise_wrong_type"][-600:]


def test_doctor_does_not_print_a_key_given_as_api_key_env(world):
    """``api_key_env: sk-…`` (the key itself instead of the variable's name): doctor says the variable is
    missing without printing the value it was given."""
    _, _, _, logs, codes = world
    assert "refiner" in logs["doctor_key_as_env_name"]
    assert not leaks_in(logs["doctor_key_as_env_name"].encode()), logs["doctor_key_as_env_name"][-600:]


def test_a_401_that_echoes_the_key_is_stored_without_it(tmp_path, monkeypatch):
    """Some gateways repeat the presented key in their 401 message: the error kept in the call store (and
    returned to the stage) must not carry it."""
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    with RecordingServer(deny=lambda body: True, echo=True) as server:
        roles = [RoleSpec(name="verifier", model="openai/fake-verifier", api_base=server.url, max_retries=0),
                 RoleSpec(name="judge", model="openai/fake-judge", api_base=server.url, max_retries=0,
                          extra={"api_key": PARAM_KEY})]
        store = open_store(tmp_path / "calls.sqlite")
        results = Gateway(store, stage="echo", progress=False).run(
            [CallRequest(role=r, messages=[{"role": "user", "content": "hi"}]) for r in roles])
        store.close()
        seen = {e["authorization"] for e in server.seen}
    assert seen == {f"Bearer {ENV_KEY}", f"Bearer {PARAM_KEY}"}  # both keys were sent, and echoed back
    assert all(not r.ok and "AuthenticationError" in (r.error or "") for r in results)
    assert not [r.error for r in results if leaks_in((r.error or "").encode())]
    db = sqlite3.connect(tmp_path / "calls.sqlite")
    errors = [e for (e,) in db.execute("SELECT error FROM calls")]
    db.close()
    assert len(errors) == 2 and not [e for e in errors if leaks_in(e.encode())], errors
