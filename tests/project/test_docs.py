"""The documentation site (issue 62): it builds offline with ``mkdocs build --strict``; its generated reference lists
every key of params.yaml and every CLI verb; every metric key of the committed metrics files is defined on the
outputs page; the report's "docs" links land on pages and anchors that exist; the README stays short and undated."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = ROOT / ".venv" / "bin" / "mkdocs"


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference_for_test_docs", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as `make docs` builds it (into a temporary folder, not site/)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs / mkdocs-material not installed (pip install -e '.[docs]')")
    exe = str(MKDOCS) if MKDOCS.exists() else shutil.which("mkdocs")
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([exe, "build", "--strict", "--site-dir", str(out)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, f"mkdocs build --strict failed\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    return out


def test_the_site_builds_offline_with_strict(site):
    for page in ("index.html", "tutorials/default-run.html", "tutorials/your-judge.html",
                 "tutorials/recorded-verdicts.html", "how-to/sweep.html", "how-to/compare-runs.html",
                 "several-machines.html", "how-to/drift-gate.html", "how-to/calibrate.html", "reference/params.html",
                 "reference/cli.html", "reference/outputs.html", "explanation/methods.html",
                 "explanation/statistics.html", "explanation/call-store.html", "benchmarks.html"):
        assert (site / page).is_file(), page
    # nothing the pages load comes from elsewhere (no web font, no CDN): links are navigation only
    for html in site.rglob("*.html"):
        text = html.read_text()
        loads = re.findall(r'<(?:script|link|img)\b[^>]*(?:src|href)="(https?:)?//', text)
        assert not loads, f"{html.relative_to(site)} loads a remote resource"


def test_the_generated_params_reference_lists_every_key_of_params_yaml(site):
    ref = _reference()
    used = ref.params_yaml_keys()
    documented = ref.documented_keys()
    assert len(used) > 150
    assert not used - documented, f"params.yaml keys missing from the schema's reference: {sorted(used - documented)}"
    page = (site / "reference" / "params.html").read_text()
    import html as _html

    text = _html.unescape(re.sub(r"<[^>]+>", "", page))
    missing = [k for k in sorted(documented) if k not in text]
    assert not missing, f"keys not on the built page: {missing[:10]}"
    # and the page is the schema's: a default and a paper value taken from it
    from rubriclab.settings import Audit

    assert f"`audit.runs` | an integer >= 1 | `{Audit.model_fields['runs'].default}`" in ref.params_page()


def test_the_params_reference_is_generated_not_kept():
    for rel in ("reference/params.md", "reference/cli.md", "benchmarks.md"):
        assert not (ROOT / "docs" / rel).exists(), f"docs/{rel} is generated at build time; do not keep a copy"


def test_a_key_params_yaml_gains_is_flagged():
    ref = _reference()
    assert "audit.no_such_knob" in ref.params_yaml_keys({"audit": {"no_such_knob": 1}}) - ref.documented_keys()
    assert ref.params_yaml_keys({"data": {"sources": {"mine": {"loader": "local"}}}}) >= {
        "data.sources", "data.sources.<name>.loader"}


def test_the_cli_reference_lists_every_verb(site):
    ref = _reference()
    verbs = [command for command, _, _ in ref.cli_verbs()[1:]]
    assert {"rubriclab audit", "rubriclab drift check", "rubriclab recorded", "rubriclab calibrate verdicts"} <= set(verbs)
    page = (site / "reference" / "cli.html").read_text()
    for command in verbs:
        assert f'id="{command.replace(" ", "-")}"' in page, command


def _metric_patterns() -> dict[str, list[str]]:
    """``{file pattern: [key patterns]}`` from reference/outputs.md's metrics tables."""
    text = (ROOT / "docs" / "reference" / "outputs.md").read_text()
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^### (metrics/\S+\.json)\s*$", line)
        if m:
            current = m.group(1).replace("&lt;", "<").replace("&gt;", ">")
            out[current] = []
        elif line.startswith("## ") or line.startswith("### "):
            current = None
        elif current and line.startswith("| `"):
            first = line.split(" | ")[0]
            out[current] += re.findall(r"`([^`]+)`", first)
    return out


def _regex(pattern: str) -> re.Pattern:
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "<":
            j = pattern.index(">", i)
            out += ".+?"
            i = j + 1
        elif c in "[{":
            j = pattern.index("]" if c == "[" else "}", i)
            options = "|".join(re.escape(o) for o in pattern[i + 1:j].split(","))
            out += f"(?:{options})" + ("?" if c == "[" else "")
            i = j + 1
        else:
            out += re.escape(c)
            i += 1
    return re.compile(out)


def _keys(node, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _keys(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix


def test_every_metric_key_of_the_committed_metrics_files_is_defined():
    patterns = _metric_patterns()
    assert len(patterns) >= 8
    files = sorted((ROOT / "metrics").rglob("*.json"))
    assert files
    undefined = []
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        section = [p for p in patterns if _regex(p).fullmatch(rel)]
        assert section, f"{rel}: no `### metrics/...` table on docs/reference/outputs.md"
        regexes = [_regex(p) for s in section for p in patterns[s]]
        undefined += [f"{rel}: {k}" for k in _keys(json.loads(f.read_text())) if not any(r.fullmatch(k) for r in regexes)]
    assert not undefined, "metric keys without a definition on docs/reference/outputs.md:\n" + "\n".join(undefined[:30])


def test_the_reports_docs_links_land_on_pages_and_anchors_that_exist(site):
    from rubriclab.report._build import DOCS_PAGES

    for kind, target in DOCS_PAGES.items():
        page, _, anchor = target.partition("#")
        path = site / page
        assert path.is_file(), f"report section {kind}: {page} is not a page of the site"
        if anchor:
            assert f'id="{anchor}"' in path.read_text(), f"report section {kind}: {page} has no anchor #{anchor}"


def test_the_readme_is_short_and_undated():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\b\d{1,2}:\d\d\b", text), "a date or a clock time in the README"
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", w) and re.search(r"[a-f]", w)]
    assert not hashes, f"commit hashes in the README: {hashes}"
    for line in ("make repro   # creates .venv, installs everything, runs `dvc repro` on the embedded model (offline)",
                 "make test    # creates .venv, installs everything, runs the test suite"):
        assert line in text, "the README's two commands are what CI and users run: keep them as they are"
    flat = " ".join(text.replace("> ", " ").split())
    assert "at chance as a pairwise judge" in flat and "plumbing" in flat
