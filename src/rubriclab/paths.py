"""Paths as outputs should show them: relative to the project (or working folder) when they lie inside it, so
the same run in another clone, or on another machine, writes the same bytes."""

from __future__ import annotations

from pathlib import Path


def display_path(path: str | Path, root: str | Path | None = None) -> str:
    """``path`` relative to ``root`` (default: the working folder) when it lies inside it, else as given.

    A URL (``scheme://…``) is returned unchanged."""
    text = str(path)
    if "://" in text:
        return text
    base = Path(root) if root is not None else Path.cwd()
    try:
        return Path(text).resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return text
