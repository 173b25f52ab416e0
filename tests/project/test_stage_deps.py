"""Every stage's dvc.yaml deps cover the code it runs: a change to any module a stage imports (directly or through
other modules, function-level imports included: grimp's graph) reruns that stage, so `dvc repro` never keeps
outputs that the current code would not produce. Infrastructure that cannot change an output is exempt, by name."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
# modules whose code cannot change a stage's outputs (why)
EXEMPT = {
    "rubriclab.atomic": "writes a file whole or not at all; the bytes are the caller's",
    "rubriclab.errors": "exception classes and their messages",
    "rubriclab.owner": "which process owns a store or a lock",
    "rubriclab.paths": "where the project's folders are",
    "rubriclab.secrets": "redacts keys from logs and URLs before they are printed or logged",
    "rubriclab.stage_server": "how a stage process is started (warm fork or fresh interpreter)",
}


def _stages() -> dict[str, tuple[str, list[str]]]:
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    out = {}
    for name, stage in spec.items():
        body = stage.get("do", stage)
        cmd = body["cmd"].split()
        if cmd[0] == "scripts/stage":
            out[name] = (cmd[1], [str(d) for d in body.get("deps", [])])
    return out


def _file(graph_module: str) -> Path:
    path = SRC / Path(*graph_module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def missing_deps(stage_module: str, deps: list[str], graph: grimp.ImportGraph) -> list[str]:
    """The files a stage's module runs (transitively) that none of ``deps`` covers, exempt modules left out."""
    roots = [ROOT / d for d in deps]
    wanted = graph.find_upstream_modules(stage_module) | {stage_module}
    return sorted(str(_file(m).relative_to(ROOT)) for m in wanted
                  if m not in EXEMPT and not any(_file(m) == r or r in _file(m).parents for r in roots))


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("rubriclab")


def test_every_stage_lists_the_code_it_runs(graph):
    gaps = {name: missing for name, (module, deps) in _stages().items()
            if (missing := missing_deps(f"rubriclab.stages.{module}", deps, graph))}
    assert not gaps, "dvc.yaml: a stage runs code its deps do not list, so a change there would not rerun it:\n" + \
        "\n".join(f"  {name}: {', '.join(files)}" for name, files in gaps.items())


def test_a_stage_that_leaves_out_a_package_it_imports_is_caught(graph):
    module, deps = _stages()["repair"]
    assert missing_deps(f"rubriclab.stages.{module}", deps, graph) == []
    without = [d for d in deps if d != "src/rubriclab/studies"]
    assert "src/rubriclab/studies/__init__.py" in missing_deps(f"rubriclab.stages.{module}", without, graph)
