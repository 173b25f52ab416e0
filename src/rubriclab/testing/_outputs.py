"""Checks of a stage's output folder that tests and users share."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def unexplained_empty(folder: Path, text: str) -> list[str]:
    """The CSV files in ``folder`` with no data row whose name ``text`` (the stage's summary) does not list as empty
    with a reason (`` `name.csv` — empty: why ``): an output left empty must say why, never sit there bare."""
    out = []
    for path in sorted(Path(folder).glob("*.csv")):
        try:
            empty = pd.read_csv(path).empty
        except pd.errors.EmptyDataError:
            empty = True
        if empty and f"`{path.name}` — empty: " not in text:
            out.append(path.name)
    return out
