"""summary.md's pieces say what a number alone would hide: a missing or degenerate interval, what was dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rubriclab.probe import label_line, probe_markdown


def _row(model, metric, est, low, high, reason):
    return {"model": model, "metric": metric, "estimate": est, "low": low, "high": high, "n": 12, "n_groups": 2,
            "reason": reason}


def test_a_cell_shows_its_reason_whenever_it_has_one():
    table = pd.DataFrame([
        _row("lr", "accuracy", 0.8, np.nan, np.nan, "no interval: 2 record-text clusters, fewer than the 30 …"),
        _row("lr", "recall", 0.5, 0.2, 0.9, "2442 of 10000 resamples undefined (a class absent)"),
        _row("lr", "f1", 0.6, 0.3, 0.8, None),
        _row("lr", "precision", np.nan, np.nan, np.nan, "undefined: no predicted positives"),
    ])
    md = probe_markdown(table)
    lines = md.splitlines()
    assert "| n items (clusters) |" in lines[0]
    # one row; each reason a numbered note under the table (before: "0.800 [nan, nan]", the interval alone)
    assert lines[2] == ("| lr | — | 0.800 (note 1) | — (note 2) | 0.500 [0.20, 0.90] (note 3) | 0.600 [0.30, 0.80] | — "
                        "| 12 (2) |")
    assert lines[4:] == ["- note 1: no interval: 2 record-text clusters, fewer than the 30 …",
                         "- note 2: undefined: no predicted positives",
                         "- note 3: 2442 of 10000 resamples undefined (a class absent)"]


def test_the_label_line_counts_what_was_dropped_before_labelling():
    items = pd.DataFrame({"record_id": ["a", "a", "b"], "label": [1.0, np.nan, 0.0]})
    assert label_line(items) == "3 items in 2 records; labels: 1 met, 1 not met, 1 failed (left out)."
    items.attrs["generation_failures"] = 1
    line = label_line(items, drops={"duplicate_record": 2})
    assert "Read from the file without: 2 duplicate record(s) (counted, not labelled)." in line
    assert line.endswith("1 response(s) the generator failed to write (their items are among the failed labels).")
