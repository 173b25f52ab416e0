"""Atomic writes (rubriclab.atomic): a killed or failing write never leaves half a file at an output path,
and no module under src/rubriclab writes an output file in place."""

from __future__ import annotations

import ast
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from rubriclab import atomic
from rubriclab.atomic import atomic_path, save_figure, write_csv, write_json, write_parquet, write_text

SRC = Path(atomic.__file__).resolve().parent
OLD = "old,complete\n1,2\n"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


# --- (a) a write that raises midway leaves the old file byte-identical and no temporary file ---------------


class _Boom(RuntimeError):
    pass


class _FailingFrame:
    """Writes part of a CSV, then raises: what a crash in the middle of ``DataFrame.to_csv`` looks like."""

    def to_csv(self, path, **kwargs):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("new,partial\n" + "3,4\n" * 1000)
            fh.flush()
        raise _Boom("disk on fire")


def test_atomic_path_failure_keeps_old_file(tmp_path: Path) -> None:
    dest = tmp_path / "out.csv"
    dest.write_bytes(OLD.encode())
    seen = []
    with pytest.raises(_Boom), atomic_path(dest) as tmp:
        seen.append(tmp)
        tmp.write_text("half a fi")
        raise _Boom
    assert dest.read_bytes() == OLD.encode()
    assert seen[0].exists() is False and _leftovers(tmp_path) == []


@pytest.mark.parametrize("exc", [_Boom, KeyboardInterrupt])
def test_write_csv_failing_midway_keeps_old_file(tmp_path: Path, exc: type[BaseException]) -> None:
    dest = tmp_path / "out.csv"
    dest.write_bytes(OLD.encode())
    frame = _FailingFrame()
    if exc is KeyboardInterrupt:  # Ctrl-C is a BaseException: the temporary file still goes
        def interrupted(path, **kwargs):
            Path(path).write_text("new,partial\n")
            raise KeyboardInterrupt
        frame.to_csv = interrupted
    with pytest.raises(exc):
        write_csv(frame, dest, index=False)
    assert dest.read_bytes() == OLD.encode()
    assert _leftovers(tmp_path) == []


def test_write_text_unencodable_keeps_old_file(tmp_path: Path) -> None:
    # Path.write_text in place truncates the file before the encoder fails on the lone surrogate
    dest = tmp_path / "summary.md"
    dest.write_bytes(OLD.encode())
    with pytest.raises(UnicodeEncodeError):
        write_text(dest, "x" * 100_000 + "\udcff")
    assert dest.read_bytes() == OLD.encode()
    assert _leftovers(tmp_path) == []


def test_write_json_not_serialisable_keeps_old_file(tmp_path: Path) -> None:
    dest = tmp_path / "report.json"
    write_json(dest, {"a": 1}, indent=2)
    before = dest.read_bytes()
    with pytest.raises(TypeError):
        write_json(dest, {"a": object()})
    assert dest.read_bytes() == before and _leftovers(tmp_path) == []


def test_helpers_create_parents_and_replace(tmp_path: Path) -> None:
    dest = tmp_path / "a" / "b" / "report.json"
    assert write_json(dest, {"b": 1, "a": float("nan")}, indent=2, sort_keys=True) == dest
    assert dest.read_text(encoding="utf-8") == '{\n  "a": NaN,\n  "b": 1\n}\n'
    write_json(dest, {"c": "é"}, ensure_ascii=False)
    assert json.loads(dest.read_text(encoding="utf-8")) == {"c": "é"}
    text = tmp_path / "x" / "notes.md"
    write_text(text, "héllo\n", encoding="utf-8")
    assert text.read_bytes() == "héllo\n".encode()
    sheet = tmp_path / "s" / "sheet.csv"
    write_csv(pd.DataFrame({"a": ["é"]}), sheet, index=False, encoding="utf-8-sig")
    assert sheet.read_bytes().startswith(b"\xef\xbb\xbf")  # keyword args reach to_csv
    assert [_leftovers(p) for p in (dest.parent, text.parent, sheet.parent)] == [[], [], []]


# --- (c) the temporary name is hidden, in the same folder, and keeps the suffix --------------------------------


def test_temp_name_hidden_same_folder_keeps_suffix(tmp_path: Path) -> None:
    dest = tmp_path / "curve.png"
    with atomic_path(dest) as tmp:
        assert tmp.parent == dest.parent and tmp.name.startswith(".curve.png.") and tmp.suffix == ".png"
        assert str(os.getpid()) in tmp.name and ".tmp" in tmp.name
        tmp.write_bytes(b"x")
    assert dest.read_bytes() == b"x" and _leftovers(tmp_path) == []


def test_save_figure_infers_png_and_parquet_reads_back(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png = save_figure(fig, tmp_path / "fig" / "curve.png", dpi=50, bbox_inches="tight")
    plt.close(fig)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]})
    path = write_parquet(frame, tmp_path / "t" / "items.parquet", index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(path), frame)
    assert os.listdir(tmp_path / "fig") == ["curve.png"] and os.listdir(tmp_path / "t") == ["items.parquet"]


# --- (b) SIGKILL at random moments: the destination is absent or a complete version --------------------------

ROWS = 400_000  # about 10 MB of CSV, ~0.6 s a write here: the child writes back to back, so a kill lands inside one
FRAME = f"""
import numpy as np, pandas as pd
def frame(version):
    i = np.arange({ROWS})
    return pd.DataFrame({{"i": i, "j": (i * 7919) % 1_000_003, "x": i / 8, "v": version}})
"""
CHILD = FRAME + """
import sys
from rubriclab.atomic import write_csv
versions = [frame(0), frame(1)]
print("ready", flush=True)
k = 0
while True:
    write_csv(versions[k % 2], sys.argv[1], index=False)
    k += 1
"""


def _frame(version: int) -> pd.DataFrame:
    scope: dict = {}
    exec(FRAME, scope)  # the same code the child runs
    return scope["frame"](version)


def _start_child(dest: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(dest)], stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    assert ready and proc.stdout.readline().strip() == "ready", "child did not start"
    return proc


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_mid_write_leaves_absent_or_complete_file(tmp_path: Path) -> None:
    rng = random.Random(20240611)
    expected = {}
    started = time.perf_counter()
    for version in (0, 1):
        frame = _frame(version)
        ref = tmp_path / f"ref{version}.csv"
        frame.to_csv(ref, index=False)
        expected[ref.read_bytes()] = version
    seconds = (time.perf_counter() - started) / 2  # about one write
    folder = tmp_path / "out"
    folder.mkdir()
    dest = folder / "big.csv"
    states = []
    for kill in range(6):
        proc = _start_child(dest)
        try:
            if kill == 0:  # before the first write can have finished: the destination must be absent
                time.sleep(rng.uniform(0.1, 0.7) * seconds)
            else:  # a complete version exists; kill at a random moment of the next writes
                deadline = time.monotonic() + 120
                while not dest.exists() and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(rng.uniform(0.05, 2.0) * seconds)
        finally:
            _kill(proc)
        if not dest.exists():
            states.append("absent")
            continue
        data = dest.read_bytes()
        assert data in expected, f"kill {kill}: {dest.name} is not a complete version ({len(data)} bytes)"
        read = pd.read_csv(dest)
        assert len(read) == ROWS and read["v"].nunique() == 1
        states.append(f"v{expected[data]}")
    leftovers = [p for p in os.listdir(folder) if p != dest.name]
    assert leftovers, "no kill landed mid-write: the test did not test anything"
    assert all(p.startswith(".big.csv.") and p.endswith(".tmp.csv") for p in leftovers), leftovers
    assert any(s.startswith("v") for s in states), states


# --- (d) no in-place write of an output file under src/rubriclab ---------------------------------------------

FRAME_WRITERS = {"to_csv", "to_parquet", "to_json", "to_excel", "to_pickle", "to_feather", "to_hdf", "savefig"}
PATH_KEYWORDS = {"path_or_buf", "path", "fname", "excel_writer"}
# Writes left in place on purpose: (file under src/rubriclab, start of the stripped source line) → why.
ALLOWED = {
    ("report/_figures.py", 'fig.savefig(buf, format="png"'): "writes into an in-memory BytesIO",
    ("align/_policy.py", '(tmp / "rubriclab_source.json").write_text('): "inside a folder renamed into place",
    ("stage_server.py", 'with open(path.with_suffix(".log"), "ab") as log:'): "the stage server's own log, appended",
    ("stage_server.py", 'with open(path.with_suffix(".lock"), "w") as lock:'): "an empty file to flock, no content",
}
ALLOWED_FILES = {
    "atomic.py": "the atomic writers themselves",
    "data/demo/_make_demo.py": "the demo-data generator (a developer tool, its files are committed)",
}
ALLOWED_FOLDERS = {  # test support: the browser harness's log, fixture projects built for a test; no stage output
    "testing/": "rubriclab.testing writes logs and throwaway test projects, never a stage's output",
}


def _writes_mode(call: ast.Call, index: int) -> bool:
    mode = call.args[index] if len(call.args) > index else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return False  # default "r"
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return True  # a mode computed at run time: assume it writes


def _write_target(call: ast.Call) -> ast.expr | None:
    """The path a call writes to, or None when the call writes no file."""
    f = call.func
    if isinstance(f, ast.Attribute) and not (isinstance(f.value, ast.Name) and f.value.id == "atomic"):
        if f.attr in ("write_text", "write_bytes"):
            return f.value
        if f.attr in FRAME_WRITERS:
            if call.args:
                return call.args[0]
            return next((k.value for k in call.keywords if k.arg in PATH_KEYWORDS), None)  # None: returns a string
        if f.attr == "open" and _writes_mode(call, 0) and not (isinstance(f.value, ast.Name) and f.value.id == "os"):
            return f.value
        if f.attr == "fdopen" and _writes_mode(call, 1):
            return call.args[0]
    if isinstance(f, ast.Name) and f.id == "open" and call.args and _writes_mode(call, 1):
        return call.args[0]
    return None


def _is_atomic_path(expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    f = expr.func
    return (isinstance(f, ast.Name) and f.id == "atomic_path") or (isinstance(f, ast.Attribute)
                                                                    and f.attr == "atomic_path")


class _InPlaceWrites(ast.NodeVisitor):
    """Calls that write a file other than a temporary path bound by ``with atomic_path(...) as tmp``."""

    def __init__(self) -> None:
        self.safe: list[str] = []
        self.lines: list[int] = []

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        bound = 0
        for item in node.items:
            self.visit(item.context_expr)
            if _is_atomic_path(item.context_expr) and isinstance(item.optional_vars, ast.Name):
                self.safe.append(item.optional_vars.id)
                bound += 1
        for stmt in node.body:
            self.visit(stmt)
        del self.safe[len(self.safe) - bound:]

    visit_AsyncWith = visit_With

    def visit_Call(self, node: ast.Call) -> None:
        target = _write_target(node)
        if target is not None and not (isinstance(target, ast.Name) and target.id in self.safe):
            self.lines.append(node.lineno)
        self.generic_visit(node)


def in_place_writes(source: str) -> list[int]:
    finder = _InPlaceWrites()
    finder.visit(ast.parse(source))
    return finder.lines


def test_guard_finds_in_place_writes() -> None:
    src = """
import json
df.to_csv(out / "a.csv", index=False)
pd.DataFrame(rows).to_parquet(path_or_buf=p)
(out / "s.md").write_text(md)
fig.savefig(png, dpi=120)
with path.open("w", encoding="utf-8") as fh: pass
fh = open(p, "wb")
text = df.to_csv(index=False)
payload = df.to_json(orient="records")
with path.open() as fh: pass
with open(p) as fh: pass
with atomic_path(p) as tmp, tmp.open("w") as fh:
    df.to_csv(tmp, index=False)
    fig.savefig(tmp)
with atomic.atomic_path(p) as tmp2:
    tmp2.write_text("x")
tmp2.write_text("y")
atomic.write_text(p, "z")
"""
    assert in_place_writes(src) == [3, 4, 5, 6, 7, 8, 18]


def test_no_in_place_writes_under_src() -> None:
    offending = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in ALLOWED_FILES or rel.startswith(tuple(ALLOWED_FOLDERS)):
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for lineno in in_place_writes(source):
            line = lines[lineno - 1].strip()
            if not any(rel == f and line.startswith(start) for f, start in ALLOWED):
                offending.append(f"src/rubriclab/{rel}:{lineno}: {line}")
    assert not offending, ("output files written in place; use rubriclab.atomic (write_csv, write_parquet, "
                           "write_text, write_json, save_figure, atomic_path):\n" + "\n".join(offending))


def test_allowed_exceptions_still_exist() -> None:
    for rel, start in ALLOWED:
        lines = [ln.strip() for ln in (SRC / rel).read_text(encoding="utf-8").splitlines()]
        assert any(ln.startswith(start) for ln in lines), f"stale allow-list entry: {rel}: {start}"
    assert all((SRC / rel).exists() for rel in [*ALLOWED_FILES, *ALLOWED_FOLDERS])
