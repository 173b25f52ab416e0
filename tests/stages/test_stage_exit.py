"""A stage process ends without the interpreter's module teardown (`rubriclab.stages.exit_stage`), and loses nothing:
its exit status, buffered output, every atexit handler, the call store closed (its WAL checkpointed into
calls.sqlite). The teardown of the ~6,000 modules a stage imports was ~2 s of every stage process on 2 cores."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import atexit, sys
    from pathlib import Path
    import rubriclab.stages
    from rubriclab.llm import open_store

    out = Path(sys.argv[1])

    class Marker:  # a module global: freed only when the interpreter tears the modules down
        def __del__(self):
            (out / "teardown").write_text("x")

    keep = Marker()
    store = open_store(out / "calls.sqlite")
    store.key_salt()  # a write: the WAL file now exists
    atexit.register(lambda: (out / "atexit").write_text("x"))  # a library's handler, registered after the package's
    sys.stdout.write("buffered, no newline")
    {exit}
""")


def _run(tmp_path: Path, exit_line: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(exit=exit_line), str(tmp_path)], capture_output=True,
                          text=True, timeout=120)


def test_exit_stage_keeps_status_output_handlers_and_store_and_skips_the_teardown(tmp_path):
    proc = _run(tmp_path, "rubriclab.stages.exit_stage(3)")
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "buffered, no newline"
    assert (tmp_path / "atexit").exists()  # every handler registered after the package's ran
    assert not (tmp_path / "teardown").exists()  # the module teardown was skipped
    assert (tmp_path / "calls.sqlite").exists() and not (tmp_path / "calls.sqlite-wal").exists()


@pytest.mark.parametrize("exit_line", ["sys.exit(3)", "raise SystemExit(3)"])
def test_a_plain_exit_after_importing_the_package_is_untouched(tmp_path, exit_line):
    # the control: the same process without exit_stage tears its modules down (so the check above can fail), and
    # importing rubriclab.stages (tests and tools do) changes nothing about how it exits
    proc = _run(tmp_path, exit_line)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "buffered, no newline"
    assert (tmp_path / "atexit").exists() and (tmp_path / "teardown").exists()


def test_every_stage_module_ends_through_exit_stage():
    stages = Path(__file__).resolve().parents[2] / "src" / "rubriclab" / "stages"
    guard = 'if __name__ == "__main__":'
    # the stage modules; `__main__.py` (the stage command) is not a stage; a stage served by rubriclab.stage_server
    # still ends through its own __main__'s exit_stage
    mains = {p.name: p.read_text(encoding="utf-8") for p in stages.glob("*.py")
             if guard in p.read_text() and not p.name.startswith("_")}
    assert len(mains) >= 9
    for name, text in mains.items():
        tail = text.split(guard, 1)[1]
        assert "exit_stage(run_stage(main" in tail, f"{name}: its __main__ should end with exit_stage(run_stage(...))"
