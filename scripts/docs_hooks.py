"""mkdocs hook (mkdocs.yml ``hooks:``): the site's generated pages, rebuilt at every build, never in docs/.

- ``reference/params.md`` and ``reference/cli.md`` from the code (``scripts/docs_reference.py``);
- ``benchmarks.md``: ``benchmarks/README.md`` as it is (the timing history included), its one link into docs/
  pointed at the site's page.

A hand-written file at one of these paths stops the build: the page would no longer be the code's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _reference():
    spec = importlib.util.spec_from_file_location("rubriclab_docs_reference", HERE / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def benchmarks_page() -> str:
    text = (ROOT / "benchmarks" / "README.md").read_text()
    return ("<!-- generated from benchmarks/README.md at every build (scripts/docs_hooks.py); edit that file -->\n\n"
            + text.replace("](../docs/", "]("))


def on_files(files, config):
    pages = {rel: make for rel, make in _reference().PAGES.items()}
    pages["benchmarks.md"] = benchmarks_page
    for rel, make in pages.items():
        if files.get_file_from_path(rel) is not None:
            raise PluginError(f"docs/{rel}: this page is generated at build time (scripts/docs_hooks.py); "
                              "remove the file and edit its source instead")
        files.append(File.generated(config, rel, content=make()))
    return files
