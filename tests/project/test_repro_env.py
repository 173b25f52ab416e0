"""The environment ``rubriclab.testing.repro_env`` gives the dvc commands and stage processes of a test project."""

from __future__ import annotations

import subprocess
import sys

from rubriclab.testing import repro_env


def test_dvc_in_a_test_project_sends_no_usage_report(tmp_path):
    """`dvc init` runs before the project's config can turn analytics off, and with analytics on every dvc command
    starts a detached daemon that posts a usage report (no network in tests)."""
    env = repro_env()
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, env=env, check=True,
                   capture_output=True)
    probe = subprocess.run([sys.executable, "-c", "from dvc import analytics; print(analytics.is_enabled())"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "False", probe.stdout + probe.stderr
