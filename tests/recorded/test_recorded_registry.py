"""The importer registry: every module of ``rubriclab/recorded/formats/`` registers the reader it is named after, and
the schema, the CLI and the errors all take the formats from it."""

from __future__ import annotations

import pytest

from rubriclab.errors import ConfigError
from rubriclab.recorded import FORMATS, format_names, get_format, read_source, register_format, registered_formats
from rubriclab.recorded._registry import _FORMATS, check_keys
from rubriclab.settings import RECORDED_FORMATS


def test_every_module_of_the_formats_folder_registers_its_reader() -> None:
    assert RECORDED_FORMATS == FORMATS == tuple(format_names())
    assert {"llmbar", "pandalm", "table", "mlflow", "store"} <= set(RECORDED_FORMATS)
    for name, fmt in registered_formats().items():
        assert fmt.name == name and fmt.read.__module__ == f"rubriclab.recorded.formats.{name}" and fmt.what


def test_an_unknown_format_names_every_registered_one(tmp_path) -> None:
    with pytest.raises(ConfigError) as err:
        get_format("csv", "params.yaml: recorded.sources.x.format")
    msg = str(err.value)
    assert msg.startswith("params.yaml: recorded.sources.x.format: unknown format 'csv'; expected one of: ")
    assert all(f"{name} (" in msg for name in RECORDED_FORMATS)
    with pytest.raises(ConfigError, match=r"recorded\.sources\.x\.format: got 'csv'; expected one of "):
        read_source({"path": "x.csv", "format": "csv"}, tmp_path, "x")


def test_the_cli_offers_the_registered_formats(capsys) -> None:
    from rubriclab.cli import main

    with pytest.raises(SystemExit):
        main(["recorded", "--help"])
    text = capsys.readouterr().out
    assert "{" + ",".join(f for f in RECORDED_FORMATS if f != "store") + "}" in text


def test_a_registered_reader_is_what_a_source_reads(tmp_path) -> None:
    calls = []

    @register_format("zz_probe", what="a probe format for this test", keys=("experiment",),
                     required={"experiment": "a name"})
    def _read(s, ctx):
        calls.append((s.path, ctx.name, ctx.path))
        return "read"

    try:
        fmt = get_format("zz_probe")
        assert fmt.read is _read and fmt.keys == ("experiment",)
        check_keys(fmt, {"path": "p", "format": "zz_probe", "experiment": "e"}, "here")
        with pytest.raises(ConfigError, match=r"here: format zz_probe needs 'experiment' \(a name\)"):
            check_keys(fmt, {"path": "p", "format": "zz_probe"}, "here")
        with pytest.raises(ConfigError, match=r"here: pairs do not apply to format zz_probe \(pairs: format store\)"):
            check_keys(fmt, {"path": "p", "format": "zz_probe", "experiment": "e", "pairs": "x"}, "here")
        with pytest.raises(ConfigError, match="registered twice"):
            register_format("zz_probe", what="another")(lambda s, c: None)
    finally:
        _FORMATS.pop("zz_probe", None)


def test_the_readers_subpackage_is_reachable_by_its_dotted_name() -> None:
    """``rubriclab.recorded.formats`` is the folder of readers. An exported function of that name hid it:
    ``import rubriclab.recorded.formats.table`` raised ImportError, and the inspect_ai page's
    ``rubriclab.recorded.formats.inspect_ai.read_inspect`` an AttributeError."""
    import rubriclab.recorded
    import rubriclab.recorded.formats.table as table

    assert table.read_table is rubriclab.recorded.read_table
    assert rubriclab.recorded.formats.inspect_ai.read_inspect is rubriclab.recorded.read_inspect
    assert sorted(registered_formats()) == list(FORMATS)
