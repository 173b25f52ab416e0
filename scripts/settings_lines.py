"""Lines of settings code at a git revision (issue 27): the schema, the packages' settings classes and their
module tables (by the AST), ``get(params, ...)``-style reads, and module-level ``*DEFAULTS`` dicts.

    .venv/bin/python scripts/settings_lines.py [REV ...]     # default: HEAD; WORK for the working tree
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "src/rubriclab/settings.py"
# settings classes (and the module-level tables that feed them), wherever they lived in the project's history
CLASSES = {
    "src/rubriclab/drift/_engine.py": {"DriftSettings", "_D", "_PLACES"},
    "src/rubriclab/align/_train.py": {"DPOSettings", "_D", "_PLACES"},
    "src/rubriclab/repair/_refinement.py": {"RepairSettings", "_PLACES", "_FLOATS", "_A", "_R"},
    "src/rubriclab/recorded/_analysis.py": {"Settings", "_R", "_CHECKED", "_OWN"},
    "src/rubriclab/stages/recorded.py": {"settings_from_params", "SETTINGS_KEYS", "SOURCE_SETTINGS"},
    "src/rubriclab/recorded/_sources.py": {"KEYS"},
    "src/rubriclab/audit/_context.py": {"AuditContext"},
    "src/rubriclab/rubrics/_budget.py": {"BudgetLimits", "_B"},
}
# the recorded-verdicts settings, added after the issue was filed: reported apart for a like-for-like comparison
RECORDED = {"ConditionPair", "RECORDED_FORMATS", "NONE_POLICIES", "ORDER_CHOICES"}
GET = re.compile(r"get\(params|get\(p, |config\.get|\bget\(cfg")  # the forms the issue counted (39 at filing)


def _text(rev: str, path: str) -> str:
    if rev == "WORK":
        p = ROOT / path
        return p.read_text() if p.exists() else ""
    out = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else ""


def _files(rev: str) -> list[str]:
    if rev == "WORK":
        return [str(p.relative_to(ROOT)) for p in (ROOT / "src/rubriclab").rglob("*.py")]
    out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "src/rubriclab"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.split() if f.endswith(".py")]


def _name(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        return [e.id for e in elts if isinstance(e, ast.Name)]
    return []


def _span(node: ast.stmt) -> int:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - start + 1


def count(rev: str) -> dict[str, int]:
    out = {"schema": len(_text(rev, SCHEMA).splitlines()), "classes": 0, "get_lines": 0, "defaults_dicts": 0}
    recorded = sum(_span(n) for n in ast.parse(_text(rev, SCHEMA)).body
                   if any("Recorded" in x or x in RECORDED for x in _name(n)))
    for path, names in CLASSES.items():
        text = _text(rev, path)
        if text:
            spans = [_span(n) for n in ast.parse(text).body if set(_name(n)) & names]
            out["classes"] += sum(spans)
            recorded += sum(spans) if "recorded" in path else 0
    for path in _files(rev):
        text = _text(rev, path)
        out["get_lines"] += sum(bool(GET.search(line)) for line in text.splitlines())
        out["defaults_dicts"] += sum(_span(n) for n in ast.parse(text).body
                                     if any(x == "DEFAULTS" or x.endswith("_DEFAULTS") for x in _name(n)))
    out["total"] = sum(out.values())
    out["of_which_recorded"] = recorded
    return out


if __name__ == "__main__":
    for rev in sys.argv[1:] or ["HEAD"]:
        print(rev, count(rev))
