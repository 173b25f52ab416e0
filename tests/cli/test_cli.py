"""The CLI: doctor (keys named, never their values), calls (ledger table)."""

from __future__ import annotations

from rubriclab.cli import main
from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store
from rubriclab.testing import scripted_model

PARAMS = """
llm:
  store: .rubriclab/calls.sqlite
  roles:
    judge: {model: [deepseek/deepseek-chat, openai/gpt-4o-mini]}
    extractor: {model: local/smollm2-135m}
    embedder: {model: local/minilm}
"""


def test_doctor_reports_missing_keys_without_values(tmp_path, monkeypatch, capsys):
    (tmp_path / "params.yaml").write_text(PARAMS)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-never-be-printed")
    code = main(["doctor", "--params", str(tmp_path / "params.yaml"), "--skip-embedded"])
    out = capsys.readouterr().out
    assert code == 1
    assert "DEEPSEEK_API_KEY" in out and "MISSING" in out
    assert "sk-should-never-be-printed" not in out
    assert "openai/gpt-4o-mini" in out and "keys: ok" in out
    assert "embedded (no key needed)" in out and "some checks FAILED" in out


def test_doctor_passes_on_the_embedded_default(tmp_path, capsys):
    (tmp_path / "params.yaml").write_text(
        "llm:\n  roles:\n    judge: {model: local/smollm2-135m}\n    embedder: {model: local/minilm}\n")
    assert main(["doctor", "--params", str(tmp_path / "params.yaml")]) == 0
    out = capsys.readouterr().out
    assert "local/smollm2-135m" in out and "ok: replied" in out and "all checks passed" in out


def test_calls_prints_ledger_per_stage_and_role(tmp_path, capsys):
    (tmp_path / "params.yaml").write_text("llm:\n  store: calls.sqlite\n")
    model = scripted_model("cli", lambda m, p: "fine")
    store = open_store(tmp_path / "calls.sqlite")
    reqs = [CallRequest(role=RoleSpec(name="verifier", model=model), messages=[{"role": "user", "content": str(i)}])
            for i in range(3)]
    Gateway(store, stage="audit", progress=False).run(reqs)
    Gateway(store, stage="audit", progress=False).run(reqs)
    assert main(["calls", "--params", str(tmp_path / "params.yaml")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("audit"))
    cols = line.split()
    # stage role items hits calls failed retries parse_fail tok_in tok_out cost
    assert cols[:6] == ["audit", "verifier", "6", "3", "3", "0"]
    assert "TOTAL" in out


_ENTRY_CHILD = """
import sys
from rubriclab.cli import entry

class Sentinel:  # its __del__ runs only in the interpreter's teardown of this module
    def __del__(self):
        sys.stderr.write("module torn down\\n")

sentinel = Sentinel()
sys.argv = ["rubriclab", *sys.argv[1:]]
entry()
"""


def test_the_command_exits_with_mains_status_and_skips_the_interpreters_teardown(tmp_path):
    """`rubriclab` (pyproject's console script) and `python -m rubriclab.cli` run ``entry``: main's status, then
    no teardown of the imported modules (rubriclab doctor spent ~2.7 s of a core in it)."""
    import subprocess
    import sys
    import tomllib
    from pathlib import Path

    scripts = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rubriclab"] == "rubriclab.cli:entry"
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _ENTRY_CHILD, "calls"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "rubriclab calls: error:" in proc.stderr and "no params.yaml" in proc.stderr
    assert "module torn down" not in proc.stderr
    module = subprocess.run([sys.executable, "-m", "rubriclab.cli", "calls"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert module.returncode == 2 and "rubriclab calls: error:" in module.stderr
