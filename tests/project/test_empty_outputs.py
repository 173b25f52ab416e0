"""An output a run leaves empty is listed with the reason it is empty, never bare (the demo's drift stage wrote
`transfer.csv` with a header and no rows, and its summary listed it among the files as if it held something)."""

from __future__ import annotations

import pandas as pd

from rubriclab.reporting import files_line
from rubriclab.testing import unexplained_empty


def test_files_line_gives_each_empty_file_its_reason() -> None:
    line = files_line([("a.csv", "the rows"), ("b.csv", None)], {"b.csv": "nothing was asked"})
    assert line == "Files: `a.csv` (the rows); `b.csv` — empty: nothing was asked."


def test_the_drift_summary_says_why_transfer_csv_is_empty() -> None:
    from rubriclab.drift import empty_reasons
    from rubriclab.settings import Params

    cfg = Params.of({}).drift
    assert cfg.transfer.judges == []
    empty = pd.DataFrame()
    reasons = empty_reasons(cfg, {"seed": {}, "ours": {}}, empty, pd.DataFrame([{"round": 1}]), empty)
    assert "`drift.transfer.judges` is []" in reasons["transfer.csv"]
    assert reasons["textgrad_steps.csv"] == "`textgrad` is not in `drift.methods`"
    assert "rounds.csv" not in reasons and "study.csv" not in reasons
    full = pd.DataFrame([{"model": "m"}])
    assert empty_reasons(cfg, {"ours": {}, "textgrad": {}}, full, full, full) == {}


def test_the_recorded_card_lists_each_empty_table_with_its_reason(tmp_path) -> None:
    from rubriclab.recorded import Settings, analyze, publisher_check, read_pandalm, shipped_path, write_card

    rs = read_pandalm(shipped_path("pandalm"))  # two judges, no contrasts: no majority, no contrast table
    res = analyze(rs, Settings(n_boot=50))
    write_card(res, tmp_path, publisher_check(rs, res))
    card = (tmp_path / "card.md").read_text(encoding="utf-8")
    assert "`majority.csv` — empty: a majority of judges needs ≥ 3 judges" in card
    assert "`contrasts.csv` — empty: no named contrast" in card
    assert unexplained_empty(tmp_path, card) == []


def test_discovery_says_why_its_evidence_tables_are_empty() -> None:
    from types import SimpleNamespace

    from rubriclab.stages.discover import empty_outputs

    nothing = SimpleNamespace(pref_rows=[], rejected=[], candidates=[{"name": "x"}])
    reasons = empty_outputs(nothing, {"pref_repaired": {"reason": "no discovered criterion was left to rank"}})
    assert reasons["pref_fit.csv"].endswith(": no discovered criterion was left to rank")
    assert reasons["rejected_candidates.csv"] == "no extracted criterion was rejected"
    assert "candidates.parquet" not in reasons
    full = SimpleNamespace(pref_rows=[{"a": 1}], rejected=[{"a": 1}], candidates=[{"a": 1}])
    assert empty_outputs(full, {}) == {}
