"""A fresh clone reproduces the committed dvc.lock and metrics of a model-calling stage.

A fresh clone of HEAD, its own empty call store, `dvc repro` of one model-calling stage on the embedded model, and
`git status` stays clean (same output hashes, same metrics). It broke when llama.cpp was built for each machine's
own CPU (another instruction set computes other logits: `acc_direct` 0.167 -> 0.333 on a machine with the
portable build). `drift@demo` (with `data` before it): 37 judge calls through llama.cpp and no torch model, so a
difference here is the engine's. Optuna's bookkeeping (study.journal, study.csv) is out of the hash (.dvcignore).

Its own file, so `make test` can run it on one worker while the README block (tests/project/test_readme.py) runs on the
other: each worker's models use its share of the cores (tests/conftest.py), so the two no longer slow each other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rubriclab.testing import repro_env as _repro_env
from rubriclab.testing import unexplained_empty

ROOT = Path(__file__).resolve().parents[2]
STAGE = "drift@demo"


def _git_out(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_fresh_clone_reproduces_the_committed_lock_and_metrics_of_a_model_stage(tmp_path):
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs the project's git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    assert not (clone / ".rubriclab").exists()  # an empty call store: every call reaches the model
    env = _repro_env({"RUBRICLAB_PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                     f"{os.environ.get('PATH', '')}"})
    proc = subprocess.run([sys.executable, "-m", "dvc", "repro", STAGE], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"Running stage '{STAGE}'" in proc.stdout  # it ran, it was not taken from a cache
    changed = _git_out("status", "--porcelain", "--untracked-files=no", cwd=clone)
    assert changed == "", f"a fresh {STAGE} differs from the commit:\n{changed}\n" + _git_out("diff", cwd=clone)[-4000:]
    # the default run leaves transfer.csv empty (no transfer judge): its summary says why, as for every empty table

    out = clone / "outputs/drift/demo"
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "`transfer.csv` — empty: no transfer judge" in summary
    assert unexplained_empty(out, summary) == []
