"""The committed dvc.lock and metrics are what any machine of this kind computes: a fresh clone of HEAD, its own
empty call store, `dvc repro` of one model-calling stage on the embedded model, and `git status` stays clean
(same output hashes, same metrics, byte for byte). It broke when llama.cpp was built for each machine's own CPU
(another instruction set computes other logits: `acc_direct` 0.167 -> 0.333 on a machine with the portable build).

The stage is `drift@demo` (with `data` before it): 37 judge calls on the embedded SmolLM2 through llama.cpp and no
torch model, so a difference here is the engine's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rubriclab.testing import repro_env

ROOT = Path(__file__).resolve().parents[1]
STAGE = "drift@demo"


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_fresh_clone_reproduces_the_committed_lock_and_metrics_of_a_model_stage(tmp_path):
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs the project's git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    assert not (clone / ".rubriclab").exists()  # an empty call store: every call reaches the model
    env = repro_env({"RUBRICLAB_PYTHON": sys.executable, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                     f"{os.environ.get('PATH', '')}"})
    proc = subprocess.run([sys.executable, "-m", "dvc", "repro", STAGE], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=840)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"Running stage '{STAGE}'" in proc.stdout  # it ran, it was not taken from a cache
    changed = _git("status", "--porcelain", "--untracked-files=no", cwd=clone)
    assert changed == "", f"a fresh {STAGE} differs from the commit:\n{changed}\n" + _git("diff", cwd=clone)[-4000:]
