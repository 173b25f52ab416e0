"""The architecture's import rules (pyproject.toml ``[tool.importlinter]``) hold on the tree, and a broken one fails
``lint-imports`` naming the offending import: one run on the real source, one on a copy of it with a planted import
of another package's private module (only src/rubriclab is copied; ~1 s each)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# a method module taking a name from another package's private module instead of that package's __init__
PLANTED_IN = "repair/_paired.py"
PLANTED = "from rubriclab.audit._reliability import alpha_on as _planted  # noqa: E402, F401\n"


def lint_imports(tree: Path, config: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package ``rubriclab`` under ``tree`` (the first on the path), with ``config``."""
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: import-linter comes with the test extra (make install)")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_every_contract():
    res = lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken", res.stdout), res.stdout


def test_a_planted_private_import_fails_naming_it(tmp_path):
    shutil.copytree(ROOT / "src" / "rubriclab", tmp_path / "rubriclab",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    module = tmp_path / "rubriclab" / PLANTED_IN
    module.write_text(module.read_text() + PLANTED)
    res = lint_imports(tmp_path, ROOT / "pyproject.toml")
    assert res.returncode != 0, res.stdout
    assert "audit: reached only through rubriclab.audit (its __init__) BROKEN" in res.stdout, res.stdout
    line = len(module.read_text().splitlines())
    assert f"- rubriclab.repair._paired -> rubriclab.audit._reliability (l.{line})" in res.stdout, res.stdout
