"""The project's own pipeline files stay consistent: dvc.yaml resolves against params.yaml, every stage
command is an importable module, and the default roles parse."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rubriclab.config import load_params
from rubriclab.llm import panel, roles_from_params

ROOT = Path(__file__).resolve().parents[1]


def test_dvc_pipeline_resolves_and_lists_every_stage():
    if not (ROOT / ".dvc").is_dir():
        pytest.skip("not a DVC checkout")
    out = subprocess.run([sys.executable, "-m", "dvc", "stage", "list"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    params = load_params(ROOT / "params.yaml")
    names = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert "data" in names
    for ds in params["discover"]["datasets"]:
        assert {f"discover@{ds}", f"audit@{ds}"} <= names


def test_stage_commands_are_modules_and_params_sections_exist():
    dvc = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    params = load_params(ROOT / "params.yaml")
    for name, stage in dvc["stages"].items():
        body = stage.get("do", stage)
        module = body["cmd"].split("-m", 1)[1].split()[0]
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
