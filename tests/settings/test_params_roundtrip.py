"""params.yaml survives DVC's own workflow: `dvc exp run -S key=value` rewrites only the lines it sets (issue 61).

``dvc exp run -S`` (``--set-param``) goes through ``dvc.utils.hydra.apply_overrides``: the file is loaded with
ruamel.yaml round-trip (``dvc.utils.serialize.modify_yaml``), the overrides are applied on an OmegaConf copy, and the
result is merged back (``merge_dicts``: mappings are merged key by key, so their comments and flow style stay; every
scalar and every list is replaced by a plain value) and dumped with ruamel (``default_flow_style=False``, width 80).
So a list comes back in block style, ``null`` comes back blank, a quote a string does not need is dropped, the
padding after a key goes, and a flow mapping or a string past 80 columns is wrapped (a ``>-`` folded one stays
folded, re-folded at 80). params.yaml is written in that layout, the fixed point of the rewrite; these tests run the
rewrite on it and diff.
"""

from __future__ import annotations

import copy
import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

# one leaf (or more) in every top-level section, set to a new value; each must change its own line and nothing else.
# Chosen to cover the shapes DVC rewrites: a key with a continued comment, a member of a flow mapping, a null set
# (written blank), a float in exponent notation, a URL, a key inside a user-named entry.
NEW_VALUES = {
    "llm.provider_processes": ("2", 2),
    "llm.roles.extractor.max_tokens": ("300", 300),
    "data.max_chars.prompt": ("16000", 16000),
    "data.ripd.demo.train": ("50", 50),
    "tracking.experiment": ("sweep", "sweep"),
    "discover.k": ("8", 8),
    "audit.runs": ("3", 3),
    "repair.max_criteria": ("null", None),
    "drift.gate.epsilon": ("0.1", 0.1),
    "align.dpo.learning_rate": ("1e-4", 1e-4),
    "probe.cv_folds": ("3", 3),
    "recorded.confidence": ("0.9", 0.9),            # the issue's own example
    "report.mlflow_ui": ("http://127.0.0.1:5001", "http://127.0.0.1:5001"),
}
# set to the value they already have: no line may change at all
SAME_VALUES = {"audit.confidence": "0.95", "drift.gate.seed": "null", "probe.projection": "auto"}


def _params_text() -> str:
    return (ROOT / "params.yaml").read_text(encoding="utf-8")


def _key_lines(text: str) -> dict[str, int]:
    """``{dotted key: 0-based line of the key}`` for every mapping key of ``text`` (ruamel's own line numbers)."""
    from ruamel.yaml import YAML

    out: dict[str, int] = {}

    def walk(node, prefix: str) -> None:
        if not hasattr(node, "lc") or not isinstance(node, dict):
            return
        for key, value in node.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            out[dotted] = node.lc.key(key)[0]
            walk(value, dotted)

    walk(YAML(typ="rt").load(text), "")
    return out


def _with(tree: dict, values: dict) -> dict:
    tree = copy.deepcopy(tree)
    for dotted, value in values.items():
        *parents, leaf = dotted.split(".")
        node = tree
        for part in parents:
            node = node[part]
        assert leaf in node, f"{dotted} is not in params.yaml: pick another leaf of its section"
        node[leaf] = value
    return tree


def _changed_lines(before: str, after: str) -> list[int]:
    """0-based lines of ``before`` that ``after`` replaced; a line added or removed fails the caller's check."""
    a, b = before.splitlines(), after.splitlines()
    assert len(a) == len(b), "DVC's rewrite added or removed lines:\n" + "".join(
        list(difflib.unified_diff(a, b, "params.yaml", "after dvc exp run -S", lineterm="\n", n=0))[:60])
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


def _comment(line: str) -> str:
    cut = line.find(" #")
    return line[cut:].strip() if cut >= 0 else ""


def check_rewrite(before: str, after: str, values: dict[str, tuple[str, object]]) -> None:
    """``after`` is ``before`` with exactly the lines of ``values``' keys changed: to the new value, comment kept."""
    lines = _key_lines(before)
    expected = sorted(lines[k] for k in values)
    changed = _changed_lines(before, after)
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), "params.yaml",
                                        "after dvc exp run -S", n=0))
    assert changed == expected, (f"DVC's rewrite changed {len(changed)} lines, not the {len(expected)} set ones "
                                 f"(lines {[i + 1 for i in expected]}):\n{diff[:6000]}")
    want = _with(yaml.safe_load(before), {k: v for k, (_, v) in values.items()})
    assert yaml.safe_load(after) == want
    a, b = before.splitlines(), after.splitlines()
    for i in changed:
        assert _comment(a[i]) == _comment(b[i]), f"line {i + 1} lost its comment: {a[i]!r} -> {b[i]!r}"


def _apply(text: str, overrides: list[str], tmp_path: Path) -> str:
    from dvc.utils.hydra import apply_overrides

    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    apply_overrides(path, overrides)
    return path.read_text(encoding="utf-8")


def test_every_section_covered():
    sections = set(yaml.safe_load(_params_text()))
    touched = {k.split(".")[0] for k in NEW_VALUES}
    assert sections <= touched, f"add a leaf of {sorted(sections - touched)} to NEW_VALUES"


def test_dvc_set_param_of_the_same_values_leaves_the_file_byte_identical(tmp_path):
    """DVC's own rewrite (apply_overrides, what `exp run -S` calls) with the values as they are: a fixed point."""
    text = _params_text()
    tree = yaml.safe_load(text)
    assert _with(tree, {k: yaml.safe_load(v) for k, v in SAME_VALUES.items()}) == tree, "SAME_VALUES are not the file's"
    after = _apply(text, [f"{k}={v}" for k, v in SAME_VALUES.items()], tmp_path)
    assert after == text, "".join(difflib.unified_diff(text.splitlines(True), after.splitlines(True),
                                                      "params.yaml", "after apply_overrides", n=0))[:6000]


def test_dvc_set_param_rewrites_only_the_set_lines(tmp_path):
    text = _params_text()
    after = _apply(text, [f"{k}={v}" for k, (v, _) in NEW_VALUES.items()], tmp_path)
    check_rewrite(text, after, NEW_VALUES)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_dvc_exp_run_set_param_diff_is_the_set_lines_only(tmp_path):
    """The user's workflow end to end: a git repo holding params.yaml and a one-stage dvc.yaml that reads the set
    keys, `dvc exp run -S key=value ...`, then `git diff`: only the set values' lines differ."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "DVC_SITE_CACHE_DIR": str(tmp_path / "site_cache"),
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    text = _params_text()
    (repo / "params.yaml").write_text(text, encoding="utf-8")
    keys = list(NEW_VALUES) + list(SAME_VALUES)
    (repo / "dvc.yaml").write_text("stages:\n  noop:\n    cmd: echo ok\n    params:\n"
                                   + "".join(f"      - {k}\n" for k in keys), encoding="utf-8")
    dvc = [sys.executable, "-m", "dvc"]
    for cmd in (["git", "init", "-q"], ["git", "config", "user.name", "t"], ["git", "config", "user.email", "t@t"],
                ["git", "config", "commit.gpgsign", "false"], dvc + ["init", "-q"],
                ["git", "add", "-A"], ["git", "commit", "-q", "-m", "params"]):
        _run(cmd, repo, env)
    sets = [a for k, (v, _) in NEW_VALUES.items() for a in ("-S", f"{k}={v}")]
    sets += [a for k, v in SAME_VALUES.items() for a in ("-S", f"{k}={v}")]
    _run(dvc + ["exp", "run", "-q", *sets, "noop"], repo, env)
    numstat = _run(["git", "diff", "--numstat", "HEAD", "--", "params.yaml"], repo, env).split()
    assert numstat[:2] == [str(len(NEW_VALUES))] * 2, f"git diff --numstat: {numstat}"
    check_rewrite(text, (repo / "params.yaml").read_text(encoding="utf-8"), NEW_VALUES)
