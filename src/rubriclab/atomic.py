"""Atomic file writes: an output path holds either its previous complete file or the new complete one.

A DVC stage killed mid-write (SIGKILL, OOM, Ctrl-C) must never leave half a file at an output path.
Every writer here writes a hidden temporary file in the destination's folder, fsyncs it and
``os.replace``-s it onto the destination (atomic on POSIX within one file system). On any exception
the temporary file is removed and the destination is untouched. A SIGKILL can still leave a hidden
``.<name>.<pid>.<token>.tmp<suffix>`` behind, never a partial destination.

The temporary name keeps the destination's suffix so writers that infer a format from it
(``Figure.savefig``, pandas compression, ``to_parquet``) behave as with the real path.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "save_figure", "temp_name", "write_csv", "write_json", "write_parquet", "write_text"]


def temp_name(path: Path) -> Path:
    """A hidden sibling of ``path`` that keeps its suffix: ``.<name>.<pid>.<token>.tmp<suffix>``."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp{path.suffix}")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on error it is removed.

    Parent folders are created. The caller must create the file at the yielded path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """``Path.write_text``, atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)
    return path


def write_json(path: str | Path, obj: Any, **json_kwargs: Any) -> Path:
    """``json.dumps(obj, **json_kwargs)`` plus a final newline, written atomically as UTF-8."""
    return write_text(path, json.dumps(obj, **json_kwargs) + "\n")


def write_csv(frame: Any, path: str | Path, **kwargs: Any) -> Path:
    """``frame.to_csv(path, **kwargs)``, atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, **kwargs)
    return path


def write_parquet(frame: Any, path: str | Path, **kwargs: Any) -> Path:
    """``frame.to_parquet(path, **kwargs)``, atomically."""
    path = Path(path)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, **kwargs)
    return path


def save_figure(fig: Any, path: str | Path, **kwargs: Any) -> Path:
    """``fig.savefig(path, **kwargs)``, atomically; the format is inferred from ``path``'s suffix."""
    path = Path(path)
    if "format" not in kwargs:  # name it, so matplotlib never appends an extension to the temporary name
        import matplotlib

        kwargs["format"] = path.suffix[1:].lower() or matplotlib.rcParams["savefig.format"]
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **kwargs)
    return path
