"""One tie rule for the whole project (a tie verdict against a strict preference earns ``TIE_CREDIT`` = 0.5), and
every card shows the other rule's value beside a rate where ties are common (> 5% of its verdicts)."""

from __future__ import annotations

import inspect

import pandas as pd
import pytest

from rubriclab.settings import TIE_CREDIT, Params
from rubriclab.stats import at_tie_credit, other_tie_credit, ties_common


def test_every_settings_section_and_function_default_is_the_one_rule() -> None:
    p = Params.of({})
    assert TIE_CREDIT == 0.5
    sections = {"audit": p.audit.tie_credit, "drift": p.drift.tie_credit, "drift.gate": p.drift.gate.tie_credit,
                "align.evaluate": p.align.evaluate.tie_credit, "recorded": p.recorded.tie_credit}
    assert sections == dict.fromkeys(sections, TIE_CREDIT)

    from rubriclab import judging, recorded, stats
    from rubriclab.align import label_agreement, win_rates
    from rubriclab.drift import transfer

    # the gates take a whole Gate section (drift.gate above), so they carry no tie default of their own
    functions = [stats.accuracy, judging.credit, judging.agreement, transfer, recorded.judgments_frame,
                 label_agreement, win_rates]
    for fn in functions:
        default = inspect.signature(fn).parameters["tie_credit"].default
        assert default == TIE_CREDIT, fn.__qualname__
    assert recorded.Settings().tie_credit == TIE_CREDIT


def test_the_other_rule_and_when_it_is_shown() -> None:
    assert other_tie_credit(0.5) == 0.0 and other_tie_credit(0.0) == 0.5 and other_tie_credit(0.3) == 0.0
    assert not ties_common(5, 100) and ties_common(6, 100) and not ties_common(0, 0)
    # 10 items: 6 right, 2 ties at 0.5 -> 0.7; with ties at 0 -> 0.6
    assert at_tie_credit(0.7, 2, 10, 0.5, 0.0) == pytest.approx(0.6)


def test_agreement_states_both_rules_where_ties_are_common() -> None:
    from rubriclab.judging import agreement, describe_agreement

    rows = pd.DataFrame({"verdict": ["A", "A", "B", "tie", "tie", "A", "B", "A", "A", "A"],
                         "human": ["A", "A", "A", "A", "B", "A", "B", "B", "A", "A"]})
    m = agreement(rows, n_boot=50)
    assert m["tie_credit"] == 0.5 and m["n_tie"] == 2
    assert m["agreement"] == pytest.approx(0.7) and m["agreement_at_other_tie_credit"] == pytest.approx(0.6)
    text = describe_agreement(m)
    assert "2 ties at 0.5" in text and "0.600 with ties at 0" in text
    few = agreement(rows.assign(verdict=["A"] * 10), n_boot=50)
    assert "with ties at" not in describe_agreement(few)
