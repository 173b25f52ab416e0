"""The published sets shipped inside the package: where ``shipped_path`` finds them, that a wheel carries every
file (pyproject's package-data), their licences and provenance, and ``shipped:<name>`` as a source path."""

from __future__ import annotations

import fnmatch
import shutil
import tomllib
from pathlib import Path

import pytest

from rubriclab.errors import ConfigError
from rubriclab.recorded import SHIPPED_FORMATS, read_source, shipped_path
from rubriclab.settings import RecordedSource

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_path_is_the_package_folder():
    for name in SHIPPED_FORMATS:
        path = shipped_path(name)
        assert path.is_dir() and path.parent.name == "published" and path.parent.parent.name == "recorded"
        assert (path / "LICENSE").is_file()
    with pytest.raises(ConfigError, match="no shipped set 'nope'; shipped: llmbar_natural, pandalm"):
        shipped_path("nope")


def test_every_shipped_file_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["rubriclab"]
    base = shipped_path("pandalm").parents[2]  # src/rubriclab
    files = [p.relative_to(base).as_posix() for p in shipped_path("pandalm").parent.rglob("*") if p.is_file()]
    assert len(files) > 100
    left_out = [f for f in files if not any(fnmatch.fnmatchcase(f, g) for g in globs)]
    assert not left_out, left_out


def test_licences_and_provenance():
    readme = (shipped_path("pandalm").parent / "README.md").read_text()
    assert "princeton-nlp/LLMBar" in readme and "WeOpenML/PandaLM" in readme
    assert (shipped_path("llmbar_natural") / "LICENSE").read_text().startswith("MIT License")
    assert "Apache License" in (shipped_path("pandalm") / "LICENSE").read_text()


def test_a_source_can_name_a_shipped_set(tmp_path):
    rs = read_source({"path": "shipped:pandalm", "format": "pandalm"}, tmp_path, "pandalm")
    assert rs.license == "Apache-2.0" and len(rs.pairs) == 999 and rs.judges == ["gpt-3.5-turbo", "pandalm-7b"]
    rs = read_source({"path": "shipped:llmbar_natural", "format": "llmbar", "judges": ["GPT-4"],
                      "conditions": ["Vanilla"]}, tmp_path, "bar")
    assert rs.license == "MIT" and len(rs.judgments) == 200
    assert rs.path == "shipped:llmbar_natural"  # as params.yaml names it: the card is the same in any clone
    local = tmp_path / "sets" / "pandalm"
    shutil.copytree(shipped_path("pandalm"), local)
    assert read_source({"path": str(local), "format": "pandalm"}, tmp_path, "p").path == "sets/pandalm"
    with pytest.raises(ConfigError, match="no shipped set 'llmbar'"):
        read_source({"path": "shipped:llmbar", "format": "llmbar"}, tmp_path, "x")
    with pytest.raises(ConfigError, match=r"recorded\.sources\.x: samples do not apply to format pandalm \(samples: "
                                          r"format store\)"):
        read_source({"path": "shipped:pandalm", "format": "pandalm", "samples": 3}, tmp_path, "x")


def test_a_source_is_the_typed_entry_or_a_mapping_the_schema_checks(tmp_path):
    """``read_source`` takes the typed ``recorded.sources.<name>``; a mapping gets the schema's one-line errors,
    and only the rules between keys are checked by the importer."""
    rs = read_source(RecordedSource(path="shipped:pandalm", format="pandalm", title="T"), tmp_path, "p")
    assert rs.provenance.startswith("T — ") and rs.path == "shipped:pandalm"
    for spec, message in [
        ({"path": "shipped:pandalm", "format": "pandalm", "bogus": 1},
         "params.yaml: recorded.sources.x.bogus: unknown key; expected one of path, format, "),
        ({"path": "shipped:llmbar_natural", "format": "llmbar", "judges": "GPT-4"},
         "params.yaml: recorded.sources.x.judges: got 'GPT-4'; expected a list of non-empty strings"),
        ({"path": "runs.db", "format": "mlflow"},
         "params.yaml: recorded.sources.x: format mlflow needs 'experiment' (a name or id)"),
        ({"path": "llm.store", "format": "store", "pairs": "pairs.parquet"},
         "params.yaml: recorded.sources.x: format store needs 'rubrics' (condition name: rubric file"),
        ({"path": "llm.store", "format": "store", "pairs": "pairs.parquet", "rubrics": {"a": "a.json"}},
         "params.yaml: recorded.sources.x: format store needs llm.roles.judge"),
    ]:
        with pytest.raises(ConfigError) as err:
            read_source(spec, tmp_path, "x")
        assert str(err.value).startswith(message) and "\n" not in str(err.value)
