"""`rubriclab ui`'s server command: MLflow's job runner off unless the caller's environment turns it on."""

from __future__ import annotations

import pytest

from rubriclab.ui import ui_command

VAR = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def test_the_job_runner_is_off_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    cmd = ui_command(tmp_path, "rubriclab", port=5999)
    assert cmd["env"][VAR] == "false"
    assert cmd["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # the offline settings are still there


@pytest.mark.parametrize("value", ["true", "false", "1"])
def test_a_job_runner_setting_of_the_callers_is_kept(tmp_path, monkeypatch, value):
    monkeypatch.setenv(VAR, value)
    assert ui_command(tmp_path, "rubriclab", port=5999)["env"][VAR] == value
