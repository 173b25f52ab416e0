"""What the repair says about criteria it did not repair and about points that changed nothing (a review of the
default run: a tie at triage read as "not among the highest pool VFR", a VFR_dev of 0 over one scored attack of
two read as "no verified false accept", Δ intervals printed for identical sets, blank point cells)."""

from __future__ import annotations

import math

import pandas as pd

from rubriclab.repair import sweep_summary
from rubriclab.repair._refinement import _not_triaged


def test_a_tie_at_triage_is_said_as_a_tie_and_an_undefined_vfr_as_undefined():
    taken = [0.0, 0.0]
    tie = _not_triaged(0.0, taken, 2)
    assert tie == ("repair.max_criteria=2 took 2 criteria by pool VFR; tied with them at pool VFR "
                   "0.000: the order in the rubric file decided, not the VFR")
    assert "undefined (no attack on the pool was scored)" in _not_triaged(None, taken, 2)
    assert _not_triaged(0.1, [0.5, 0.3], 2).endswith("this one's pool VFR 0.100 is below theirs (the lowest taken: 0.300)")


def _res(n_changed: int) -> dict:
    row = {"point": "", "delta": 0.01, "candidates": 2, "alpha_heldout": -0.25, "alpha_low": -0.3, "alpha_high": -0.2,
           "alpha_n": 3, "vfr_heldout": 0.0, "vfr_low": 0.0, "vfr_high": 0.0, "vfr_n": 2, "delta_alpha": 0.0,
           "delta_alpha_low": 0.0, "delta_alpha_high": 0.0, "delta_vfr": 0.0, "delta_vfr_low": 0.0,
           "delta_vfr_high": 0.0, "n_changed": n_changed,
           "delta_alpha_ci": "95% paired percentile bootstrap over pairs (B=1000)", "delta_alpha_n": 3,
           "delta_vfr_ci": "95% paired percentile bootstrap over prompts (B=1000)", "delta_vfr_n": 2}
    curve = pd.DataFrame([{**row, "point": "constrained", "delta": 0.0}, row,
                          {**row, "point": "unconstrained", "delta": math.inf}])
    ci = {"method": "percentile bootstrap", "level": 0.95, "unit": "pairs", "resamples": 1000}
    before = {"alpha": {"value": -0.25, "low": -0.3, "high": -0.2, "n": 3, "ci": ci},
              "vfr": {"value": 0.0, "low": 0.0, "high": 0.0, "n": 2, "ci": ci,
                      "degenerate": "constant bootstrap distribution"}}
    found = {"criteria": {"c1": {"skipped": "VFR_dev = 0 (1 of 2 attacks on dev scored, the rest left out "
                                             "(attacker failures, no score)): no verified false accept on dev"}}}
    return {"curve": curve, "before": before, "rejected": {}, "found": found}


def test_points_that_changed_nothing_give_no_interval_and_every_point_is_named():
    md = "\n".join(sweep_summary("mine", _res(0)))
    assert "VFR 0.000 [0.000, 0.000] n=2 (constant bootstrap distribution)" in md  # the degeneracy, said
    assert "(intervals: 95% percentile bootstrap (B=1000) over pairs for α" in md
    assert "Δ = 0 by construction and no interval is given (—)" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "delta" not in line]
    assert [r.split(" | ")[0] for r in rows] == ["| constrained", "| grid", "| unconstrained"]
    assert all(r.count(" — ") == 4 for r in rows)  # the four Δ ends of an unchanged point
    assert "1 of 2 attacks on dev scored" in md
    changed = "\n".join(sweep_summary("mine", _res(1)))
    assert "by construction" not in changed and " — " not in changed.split("| point")[1]
