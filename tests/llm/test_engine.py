"""The embedded engine's build and what happens when native code dies by a signal.

- the installed llama.cpp carries the portable instruction set (no AMX, no AVX-512) and answers one token;
- the smoke check turns a death by a signal into one line naming the signal and the build;
- an xdist worker killed by a signal ends `make test`'s pytest with a non-zero exit naming the test, never a hang;
- a stage process killed by SIGILL in the middle of a batch: the wrapper names the signal, the finished calls are
  kept and the re-run resumes from them, and the dead MLflow run is marked KILLED.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rubriclab.llm import PORTABLE_ISA, engine_build, smoke_check
from rubriclab.llm._engine import parse_system_info

ROOT = Path(__file__).resolve().parents[2]

NATIVE_AMX_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
                   "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
                   "REPACK = 1 | ")
PORTABLE_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | "
                 "OPENMP = 1 | REPACK = 1 | ")


def test_system_info_is_parsed_into_instruction_sets_and_other_features():
    native = parse_system_info(NATIVE_AMX_INFO)
    assert native.isa == ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VBMI",
                          "AVX512_VNNI", "AVX512_BF16", "AMX_INT8")
    assert native.other == ("LLAMAFILE", "OPENMP", "REPACK")
    assert native.outside_portable == ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8")
    portable = parse_system_info(PORTABLE_INFO)
    assert portable.outside_portable == () and set(portable.isa) == PORTABLE_ISA
    assert parse_system_info("CPU : AVX2 = 0 | AVX = 1 |").isa == ("AVX",)  # a feature reported as 0 is not built in


def test_the_installed_engine_carries_the_portable_instruction_set():
    """What scripts/engine_wheel.sh compiled is what is installed (pip's cache can hand back a native wheel)."""
    build = engine_build()
    assert build.outside_portable == (), f"llama.cpp built with {build.outside_portable}: {build.raw}"
    assert {"AVX2", "FMA", "F16C"} <= set(build.isa), build.raw
    marker = Path(sys.prefix) / ".rubriclab-engine"
    if marker.exists():  # installed by scripts/install.sh (not, e.g., by a bare `pip install -e .`)
        assert re.fullmatch(r"[0-9a-f]{16}", marker.read_text().strip())


_FAKE_PIP = textwrap.dedent("""
    import os, sys, time
    args = sys.argv[1:]
    if args[:1] == ["wheel"]:  # what `pip wheel -w DIR` leaves: one wheel file, after a while of compiling
        time.sleep(float(os.environ["FAKE_COMPILE_S"]))
        out = args[args.index("-w") + 1]
        open(os.path.join(out, "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"), "w").write(os.environ["WHO"])
""")


@pytest.mark.timeout(60)
def test_two_installs_compiling_the_engine_at_once_both_succeed_and_publish_one_wheel(tmp_path):
    """Two clones installing at the same time (CI beside a developer) shared one build folder: the first to finish
    moved it away under the other, whose install failed ("CMAKE_ARGS: Not a directory")."""
    (tmp_path / "pip.py").write_text(_FAKE_PIP)
    houses, venv = tmp_path / "wheels", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)  # a venv without the engine's mark: the build runs
    env = {**os.environ, "RUBRICLAB_WHEELHOUSE": str(houses), "VENV": str(venv),
           "PIP_CMD": f"{sys.executable} {tmp_path / 'pip.py'}"}
    procs = [subprocess.Popen(["bash", str(ROOT / "scripts" / "engine_wheel.sh"), "--build-only"],
                              env={**env, "WHO": who, "FAKE_COMPILE_S": delay}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for who, delay in [("first", "0.5"), ("second", "1.5")]]
    outs = [p.communicate(timeout=50)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    (house,) = houses.iterdir()  # one published folder, no build folder left behind
    (wheel,) = house.glob("*.whl")
    assert wheel.read_text() == "first"  # the first to finish published; the second used it
    assert all(f"engine: wheel ready: {wheel}" in out for out in outs), outs


@pytest.mark.timeout(300)
def test_the_smoke_check_generates_one_token_from_the_embedded_model():
    result = smoke_check()
    assert result.ok, result.line
    assert result.returncode == 0 and result.reply and result.reply.startswith("'")


_DIE = "import os, signal, sys\nprint('loading', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.{})\n"


@pytest.mark.parametrize("sig", ["SIGILL", "SIGSEGV"])
def test_a_smoke_check_that_dies_by_a_signal_is_one_line_naming_it(tmp_path, sig):
    result = smoke_check(model_path=tmp_path / "unused.gguf", child_code=_DIE.format(sig))
    assert not result.ok
    assert result.returncode == -getattr(signal, sig) and result.signal_name == sig
    assert "\n" not in result.line
    assert f"died by {sig} (" in result.line
    assert "llama.cpp was built for " + engine_build().describe() in result.line
    assert "scripts/install.sh" in result.line  # how to rebuild


def test_a_smoke_check_names_the_instruction_sets_of_the_library_that_died(tmp_path):
    """The child reports its own library's build before generating: a native AMX build that faults is named as
    such, even when the checking process imports another build."""
    code = (f"import os, signal\nprint('SYSTEM_INFO {NATIVE_AMX_INFO}', flush=True)\n"
            "os.kill(os.getpid(), signal.SIGILL)\n")
    result = smoke_check(model_path=tmp_path / "x.gguf", child_code=code)
    assert not result.ok and result.signal_name == "SIGILL"
    assert "built for SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_INT8;" \
        in result.line


def test_a_smoke_check_that_exits_non_zero_names_the_exit_and_its_last_line(tmp_path):
    code = "import sys\nprint('ValueError: bad gguf', file=sys.stderr)\nsys.exit(3)\n"
    result = smoke_check(model_path=tmp_path / "x.gguf", child_code=code)
    assert not result.ok and result.returncode == 3
    assert "exit 3" in result.line and "ValueError: bad gguf" in result.line


def test_the_engine_module_fails_on_a_non_portable_build(monkeypatch, capsys):
    from rubriclab.llm import _engine

    monkeypatch.setattr(_engine, "engine_build", lambda: parse_system_info(NATIVE_AMX_INFO))
    assert _engine.main([]) == 1
    err = capsys.readouterr().err
    assert "AMX_INT8" in err and "scripts/install.sh" in err
    assert _engine.main(["--allow-nonportable"]) == 0


def test_doctor_prints_the_engine_instruction_set_and_the_smoke_result(tmp_path, capsys, monkeypatch):
    from rubriclab import doctor

    monkeypatch.setattr(doctor, "try_embedded_models", lambda models: [(m, True, "stubbed") for m in sorted(models)])
    params = {"llm": {"roles": {"judge": {"model": "local/smollm2-135m"}}}}
    rc = doctor.run_doctor(params, tmp_path, check_embedded=True)
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"engine: llama.cpp built for {engine_build().describe()}" in out
    assert "engine smoke check: ok (one token:" in out


# -- a crashed test worker fails the run, naming the test --------------------------------------------------------

def _make_test_args() -> list[str]:
    """The pytest options `make test` passes (Makefile's PYTEST_ARGS), so this test follows the real command."""
    m = re.search(r"^PYTEST_ARGS \?= (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile: PYTEST_ARGS not found"
    return shlex.split(m.group(1))


@pytest.mark.timeout(200)
def test_a_test_worker_killed_by_a_signal_fails_the_run_naming_the_test(tmp_path):
    """pytest-xdist#784: with worker restarts and --dist loadfile the controller waits forever on a crashed
    worker's replacement (three SIGILLed workers hung `make test` for 20 minutes)."""
    crash = "import os, signal\n\ndef test_crash():\n    os.kill(os.getpid(), signal.SIGILL)\n"
    for name in ("test_1_kill.py", "test_3_kill.py", "test_4_kill.py"):
        (tmp_path / name).write_text(crash)
    (tmp_path / "test_2_ok.py").write_text("def test_ok():\n    assert True\n")
    cmd = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
           "-p", "no:cacheprovider", *_make_test_args(), str(tmp_path)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the controller and its replacement workers
        out, _ = proc.communicate()
        pytest.fail(f"pytest hung after a worker crash (no exit in 150 s): {out[-2000:]}")
    assert proc.returncode != 0, out
    assert time.monotonic() - t0 < 150
    assert re.search(r"worker 'gw\d' crashed while running 'test_\d_kill\.py::test_crash'", out), out[-3000:]


# -- a stage that dies by SIGILL in the middle of its batch --------------------------------------------------------

_STAGE = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    import litellm
    from rubriclab.llm import CallRequest, Gateway, RoleSpec, open_store, register_provider
    from rubriclab.llm._providers import chat_response
    from rubriclab.tracking import stage_run

    project, die_at, log = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])

    class Engine(litellm.CustomLLM):  # stands in for llama.cpp: the die_at-th call faults inside the process
        def completion(self, model, messages, *a, **k):
            with log.open("a") as f:
                f.write(messages[-1]["content"] + "\\n")
            n = len(log.read_text().splitlines())
            if n == die_at:
                os.kill(os.getpid(), signal.SIGILL)
            return chat_response(model, "reply to " + messages[-1]["content"])

        async def acompletion(self, model, messages, *a, **k):
            return self.completion(model, messages, *a, **k)

    register_provider("faulty", Engine())
    role = RoleSpec(name="judge", model="faulty/engine", concurrency=1, timeout=60, max_retries=0)
    with stage_run("engine", "engine@x", {"die_at": die_at}, project) as run:
        print(run.run_id, flush=True)
        store = open_store(project / ".rubriclab" / "calls.sqlite")
        reqs = [CallRequest(role=role, messages=[{"role": "user", "content": f"item {i}"}]) for i in range(8)]
        results = Gateway(store, stage="engine@x", progress=False).run(reqs)
        (project / "out.txt").write_text("\\n".join(r.text for r in results))
""")


@pytest.mark.timeout(240)
def test_a_stage_killed_by_sigill_names_the_signal_and_resumes_without_repeating_calls(tmp_path, monkeypatch):
    from mlflow import MlflowClient

    from rubriclab.tracking import tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # scripts/stage runs `$RUBRICLAB_PYTHON -m rubriclab.stages NAME ARGS`: this interpreter runs the stage above
    (tmp_path / "crashy.py").write_text(_STAGE)
    interpreter = tmp_path / "python"
    interpreter.write_text(f'#!/bin/sh\nshift 3\nexec {shlex.quote(sys.executable)} {tmp_path / "crashy.py"} "$@"\n')
    interpreter.chmod(0o755)
    env = dict(os.environ, RUBRICLAB_PYTHON=str(interpreter))
    env.pop("MLFLOW_TRACKING_URI", None)
    project, log = tmp_path / "project", tmp_path / "provider.log"
    project.mkdir()

    def stage(die_at: int) -> subprocess.CompletedProcess:
        return subprocess.run(["sh", str(ROOT / "scripts" / "stage"), "crashy", str(project), str(die_at), str(log)],
                              capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)

    dead = stage(die_at=5)
    assert dead.returncode == 128 + signal.SIGILL, dead.stderr[-2000:]
    assert "stage crashy: the process died by signal SIGILL (4)" in dead.stderr
    assert "rubriclab doctor" in dead.stderr and "re-run to resume" in dead.stderr
    dead_run = dead.stdout.split()[0]
    assert len(log.read_text().splitlines()) == 5 and not (project / "out.txt").exists()

    done = stage(die_at=0)
    assert done.returncode == 0, done.stderr[-2000:]
    asked = log.read_text().splitlines()
    # the 4 calls finished before the fault are not asked again; the faulting one and the 3 never reached are
    assert asked[:5] == [f"item {i}" for i in range(5)]
    assert sorted(asked[5:]) == [f"item {i}" for i in range(4, 8)]
    assert (project / "out.txt").read_text().splitlines() == [f"reply to item {i}" for i in range(8)]
    info = MlflowClient(tracking_uri(project)).get_run(dead_run).info
    assert info.status == "KILLED"
