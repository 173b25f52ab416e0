"""The project's own pipeline files stay consistent: dvc.yaml resolves against params.yaml, every stage
command runs an importable module through scripts/stage (whatever the caller's PATH), the default roles
parse, and the declared dependency floors cover the APIs the code uses."""

from __future__ import annotations

import ast
import importlib
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from rubriclab.config import load_params
from rubriclab.llm import panel, roles_from_params

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = "scripts/stage"


def test_dvc_pipeline_resolves_and_lists_every_stage():
    # .dvc/ is committed: without it `dvc repro` cannot run, so its absence is a failure, not a skip.
    assert (ROOT / ".dvc" / "config").is_file(), f"{ROOT / '.dvc'} is missing: restore it from git"
    out = subprocess.run([sys.executable, "-m", "dvc", "stage", "list"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    params = load_params(ROOT / "params.yaml").given()
    names = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert "data" in names
    for ds in params["discover"]["datasets"]:
        assert {f"discover@{ds}", f"audit@{ds}"} <= names


def test_stage_commands_are_modules_and_params_sections_exist():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    params = load_params(ROOT / "params.yaml").given()
    for name, stage in dvc["stages"].items():
        body = stage.get("do", stage)
        argv = shlex.split(body["cmd"])
        # A bare `python -m ...` would run whichever python the caller's PATH finds first.
        assert argv[0] == LAUNCHER and len(argv) >= 2, f"{name}: cmd should be `{LAUNCHER} <stage> ...`"
        assert LAUNCHER in body.get("deps", []), f"{name}: {LAUNCHER} runs the stage, so it must be a dep"
        module = f"rubriclab.stages.{argv[1]}"
        assert hasattr(importlib.import_module(module), "main"), name
        for section in body.get("params", []):
            top = section.split(".")[0]
            assert top in params, f"{name}: params section {section!r} missing from params.yaml"
    roles = roles_from_params(params)
    assert {"judge", "extractor", "consolidator", "embedder", "paraphraser", "attacker", "verifier"} <= set(roles)
    assert len(panel(roles["judge"])) >= 2  # α needs a panel
    for ds in params["discover"]["datasets"]:
        assert ds in params["data"]["premise"]["sources"]
        assert ds in params["audit"]["out_of_domain"]


def test_the_recorded_stage_reruns_when_what_a_store_source_reads_changes():
    # a `format: store` source reads its verdicts back from the call store with llm.roles.judge, llm.store and
    # data.seed (rubriclab.recorded.read_source): a change there must make `dvc repro` run the stage again
    params = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["recorded"]["do"]["params"]
    assert {"recorded", "llm", "data.seed"} <= set(params)


# -- scripts/stage: the interpreter it picks ---------------------------------------------------------

# Stands in for an interpreter: prints its label and each argument in brackets.
ECHO_PY = '#!/bin/sh\nprintf %s "{label}"\nfor a in "$@"; do printf " [%s]" "$a"; done\necho\n'


def _fake_python(path: Path, label: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ECHO_PY.format(label=label))
    path.chmod(0o755)
    return path


def _launch(project: Path, env: dict[str, str], *args: str) -> str:
    # cwd "/": the launcher finds the project from its own path, not from where it is called.
    out = subprocess.run([str(project / LAUNCHER), *args], cwd="/", env={"LANG": "C.UTF-8", **env},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def launcher_project(tmp_path):
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / LAUNCHER, project / LAUNCHER)
    return project


def test_launcher_is_executable():
    assert os.access(ROOT / LAUNCHER, os.X_OK), f"{LAUNCHER} lost its executable bit (git update-index --chmod=+x)"


def test_launcher_prefers_rubriclab_python_then_project_venv_then_python3(launcher_project, tmp_path):
    project = launcher_project
    bin_dir = tmp_path / "bin"
    _fake_python(bin_dir / "python3", "path-python3")
    path = f"{bin_dir}:/usr/bin:/bin"
    assert _launch(project, {"PATH": path}, "data") == "path-python3 [-m] [rubriclab.stages] [data]"
    _fake_python(project / ".venv/bin/python", "venv")
    # Arguments pass through untouched (one with a space stays one), the module is named by the first.
    assert _launch(project, {"PATH": path}, "audit", "--dataset", "a b") == \
        "venv [-m] [rubriclab.stages] [audit] [--dataset] [a b]"
    explicit = _fake_python(tmp_path / "elsewhere/python", "explicit")
    assert _launch(project, {"PATH": path, "RUBRICLAB_PYTHON": str(explicit)}, "discover") == \
        "explicit [-m] [rubriclab.stages] [discover]"


def test_launcher_without_a_stage_name_is_a_usage_error(launcher_project):
    out = subprocess.run([str(launcher_project / LAUNCHER)], env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "usage" in out.stderr


# -- declared dependency floors cover what the code calls ----------------------------------------------

# keyword -> first scipy release whose scipy.stats functions accept it (SPEC 7 `rng`: SciPy 1.15.0).
SCIPY_STATS_KEYWORD_SINCE = {"rng": "1.15"}


def scipy_stats_keywords(source: str) -> set[str]:
    """Keywords from SCIPY_STATS_KEYWORD_SINCE passed to scipy.stats functions in ``source``, however the
    module or function was imported (``from scipy import stats``, ``import scipy.stats as sps``, ...)."""
    tree = ast.parse(source)
    alias: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        parts, func = [], node.func
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id not in alias:
            continue
        dotted = ".".join([alias[func.id], *reversed(parts)])
        if dotted.startswith("scipy.stats."):
            found |= {k.arg for k in node.keywords if k.arg in SCIPY_STATS_KEYWORD_SINCE}
    return found


def test_keyword_finder_sees_every_import_style():
    assert scipy_stats_keywords("from scipy import stats\nstats.bootstrap((x,), f, rng=g)") == {"rng"}
    assert scipy_stats_keywords("import scipy.stats as sps\nsps.permutation_test(d, f, rng=1)") == {"rng"}
    assert scipy_stats_keywords("import scipy\nscipy.stats.bootstrap((x,), f, rng=1)") == {"rng"}
    assert scipy_stats_keywords("from scipy.stats import bootstrap as b\nb((x,), f, rng=1)") == {"rng"}
    assert scipy_stats_keywords("import numpy as np\nnp.random.default_rng(1).choice(3, rng=1)") == set()
    assert scipy_stats_keywords("from scipy import stats\nstats.bootstrap((x,), f, random_state=1)") == set()


def test_declared_scipy_floor_covers_the_keywords_the_code_passes():
    used = set()
    for path in sorted((ROOT / "src").rglob("*.py")):
        used |= scipy_stats_keywords(path.read_text(encoding="utf-8"))
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (scipy,) = [r for r in map(Requirement, deps) if r.name == "scipy"]
    floors = [Version(s.version) for s in scipy.specifier if s.operator in (">=", "==", "~=")]
    assert floors, f"pyproject.toml: {scipy} has no lower bound"
    for keyword in sorted(used):
        since = Version(SCIPY_STATS_KEYWORD_SINCE[keyword])
        assert max(floors) >= since, f"src passes {keyword}= to scipy.stats (scipy >= {since}), but pyproject allows {scipy}"


PINS = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR", "NUMBA_CPU_NAME": "haswell",
        "NUMBA_CPU_FEATURES": ""}


def test_launcher_pins_the_numeric_kernels_to_avx2_unless_the_caller_chose(launcher_project, tmp_path):
    """MKL, OpenBLAS, torch and numpy pick kernels by the CPU's flags; an AVX-512 machine would write other low
    bits than an AVX2 one, so a stage's outputs (and dvc.lock) would differ between two machines of one kind."""
    script = tmp_path / "envpy"
    script.write_text("#!/bin/sh\n" + "".join(f'printf "%s=%s;" {k} "${k}"\n' for k in PINS))
    script.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "RUBRICLAB_PYTHON": str(script)}
    assert _launch(launcher_project, env, "data") == "".join(f"{k}={v};" for k, v in PINS.items())
    mine = _launch(launcher_project, {**env, "MKL_CBWR": "COMPATIBLE", "NPY_DISABLE_CPU_FEATURES": "",
                                      "NUMBA_CPU_FEATURES": "+avx2"}, "data")
    assert "MKL_CBWR=COMPATIBLE;" in mine and "NPY_DISABLE_CPU_FEATURES=;" in mine and "OPENBLAS_CORETYPE=Haswell;" in mine
    assert "NUMBA_CPU_FEATURES=+avx2;" in mine and "NUMBA_CPU_NAME=haswell;" in mine


def test_launcher_runs_stages_offline_unless_the_caller_chose(launcher_project, tmp_path):
    """The align stage's saved tokenizer_config.json records `local_files_only` from HF_HUB_OFFLINE: a `dvc repro`
    from a shell without it wrote another output hash than `make repro` (the Makefile exports it)."""
    script = tmp_path / "envpy"
    script.write_text('#!/bin/sh\nprintf "%s" "${HF_HUB_OFFLINE-unset}"\n')
    script.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "RUBRICLAB_PYTHON": str(script)}
    assert _launch(launcher_project, env, "align") == "1"
    assert _launch(launcher_project, {**env, "HF_HUB_OFFLINE": "0"}, "align") == "0"


def test_the_pinned_kernels_are_accepted_and_in_force():
    """numpy refuses some names in NPY_DISABLE_CPU_FEATURES at import; torch must report AVX2 kernels and numpy
    no AVX-512 loop under the pins, whatever this machine's CPU reports."""
    code = ("import numpy, torch; from numpy._core._multiarray_umath import __cpu_features__ as f;"
            "print(torch.backends.cpu.get_cpu_capability(), f['X86_V4'], f['AVX512_SPR'])")
    run = subprocess.run([sys.executable, "-c", code], env={**os.environ, **PINS}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["AVX2", "False", "False"]


NUMBA_SUM = """
import numba, numpy
@numba.njit(fastmath=True)
def f(x):
    s = 0.0
    for v in x:
        s += v * v
    return s
f(numpy.ones(64))
asm = f.inspect_asm(f.signatures[0])
print("zmm" in asm, "ymm" in asm)
"""


def test_numba_compiles_for_haswell_under_the_pins():
    """umap-learn's kernels are compiled by numba for the host CPU: AVX-512 code (zmm registers) on an AVX-512
    machine, other low bits in the probe's projection and a SIGILL where the CPU reports AVX-512 and faults on it.
    Under the pins: 256-bit AVX2 code only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    run = subprocess.run([sys.executable, "-c", NUMBA_SUM], env={**env, **PINS}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "True"]


def test_install_and_the_tests_compile_numba_for_the_launchers_target():
    """scripts/install.sh compiles umap-learn's cached numba kernels once; a process under another CPU target (name or
    features) misses that cache and compiles them again (~10 s of a core): the first probe stage, or the suite's UMAP
    test on a fresh clone. The install step, the tests and the launcher name one target."""
    from tests.conftest import NUMBA_PINS

    script = (ROOT / "scripts" / "install.sh").read_text().replace("\\\n", " ")  # continued lines as one
    (warm,) = [line for line in script.splitlines() if '-c "import umap"' in line]
    assert f'NUMBA_CPU_NAME="${{NUMBA_CPU_NAME:-{PINS["NUMBA_CPU_NAME"]}}}"' in warm, warm
    assert f'NUMBA_CPU_FEATURES="${{NUMBA_CPU_FEATURES-{PINS["NUMBA_CPU_FEATURES"]}}}"' in warm, warm
    assert NUMBA_PINS == {k: v for k, v in PINS.items() if k.startswith("NUMBA_")}


def test_the_files_the_suite_starts_first_exist_once():
    """tests/conftest.py's FIRST orders the slow files ahead of the rest; a renamed file would quietly lose its place
    (and run last, alone on a worker)."""
    from tests.conftest import FIRST

    assert [name for name in FIRST if len(list((ROOT / "tests").rglob(name))) != 1] == []
    assert len(set(FIRST)) == len(FIRST)


def test_only_an_xdist_worker_ends_without_the_teardown():
    """tests/conftest.py ends an xdist worker with os._exit(0); any other process that imports it, e.g. a pytest
    a test starts (it inherits PYTEST_XDIST_WORKER), keeps its own exit status."""
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw0"}
    child = subprocess.run([sys.executable, "-c", "import tests.conftest, sys; sys.exit(3)"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 3, child.stderr[-2000:]
