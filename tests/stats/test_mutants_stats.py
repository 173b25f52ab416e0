"""Tests that kill mutants which survived `make mutate` on stats/ (docs/mutation.md names each one).

Known answers: Benjamini–Hochberg by hand, q_(i) = min_{j ≥ i} min(1, m · p_(j) / j), and the one-line
errors' exact text (``InputError``: ``<input>: field '<f>': <problem>; expected <e>``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats import bh_adjust, majority_decided


def test_bh_accepts_the_ends_of_the_unit_interval():
    # kills _inference.x_bh_adjust__mutmut_28 (p <= 0 rejected) and _30 (p >= 1 rejected): 0 and 1 are
    # p-values (the gate's sign test returns exactly 1.0 for a domain where no pair changed)
    q = bh_adjust(np.array([0.0, 1.0, 0.02]))
    # sorted 0, 0.02, 1 with m = 3: 3·0/1 = 0, 3·0.02/2 = 0.03, 3·1/3 = 1
    assert q.tolist() == pytest.approx([0.0, 1.0, 0.03])


def test_bh_returns_an_array_for_an_array_and_a_named_series_for_a_series():
    # kills x_bh_adjust__mutmut_58 (`or True`: an ndarray came back as a Series) and the Series-name mutants
    # (_61 None, _64 dropped, _65/_66 renamed)
    q = bh_adjust([0.01, 0.04, np.nan])
    assert type(q) is np.ndarray and q[:2].tolist() == pytest.approx([0.02, 0.04]) and np.isnan(q[2])
    s = bh_adjust(pd.Series([0.04, 0.01], index=["b", "a"]))
    assert isinstance(s, pd.Series) and s.name == "p_adjusted" and list(s.index) == ["b", "a"]
    assert s.tolist() == pytest.approx([0.04, 0.02])


def test_bh_out_of_range_error_names_the_field_and_the_range():
    # kills the out-of-range InputError's field/expected mutants of x_bh_adjust (_33, _34, _36, _37, _40 … _44)
    with pytest.raises(InputError) as err:
        bh_adjust([0.5, 1.5])
    e = err.value
    assert (e.field, e.expected) == ("pvalues", "p-values in [0, 1] (NaN allowed)")
    assert str(e).startswith("<input>: field 'pvalues': contains 1 value(s) outside [0, 1], e.g. 1.5;")
    assert str(e).endswith("; expected p-values in [0, 1] (NaN allowed)")


def test_bh_input_check_names_the_field():
    # kills the as_float(..., "pvalues", expected=...) argument mutants of x_bh_adjust (_6, _8, _15, _16, _18 … _20)
    with pytest.raises(InputError) as err:
        bh_adjust([[0.1, 0.2]])
    assert err.value.field == "pvalues" and err.value.expected == "p-values in [0, 1] (NaN allowed)"


def test_majority_decided_errors_say_what_is_wrong():
    # kills _majority.x_majority_decided__mutmut_11/_12/_13 (the votes error) and _5/_8/_9 (n_total's name)
    with pytest.raises(InputError) as err:
        majority_decided(["A", "B", "A"], 2)
    assert str(err.value) == "<input>: field 'votes': has 3 votes for n_total=2; expected at most n_total=2 samples"
    with pytest.raises(ConfigError, match=r"^n_total=0 is invalid; expected an integer >= 1$"):
        majority_decided([], 0)
