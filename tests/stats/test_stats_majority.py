"""Early-stopping majority vote gives the full-sampling verdict: exhaustive for small n, random for larger."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from rubriclab.errors import InputError
from rubriclab.stats import early_stop_majority, majority_decided, majority_vote, samples_still_needed


def _check(seq: list, n: int) -> int:
    full = majority_vote(seq)
    verdict, used = early_stop_majority(lambda i: seq[i], n)
    assert verdict == full, (seq, verdict, full)
    # Stops at the first decided prefix and never earlier.
    assert all(majority_decided(seq[:j], n) is None for j in range(used))
    # Waves of samples_still_needed reach the same verdict with exactly the sequential sample count.
    taken = 0
    while (need := samples_still_needed({"x": seq[:taken]}, n)["x"]) > 0:
        taken += need
    assert taken == used and majority_decided(seq[:taken], n) == full
    return used


def test_majority_vote_rules():
    assert majority_vote(["A", "B", "A"]) == "A"
    assert majority_vote(["A", "B", None, None]) == "tie"
    assert majority_vote([None, np.nan]) is None
    assert majority_vote(["A", "B", "C", "C"]) == "C"


@pytest.mark.parametrize("alphabet, max_n", [(("A", "B", None), 7), (("A", "B", "C", None), 5)])
def test_early_stop_equals_full_sampling_exhaustive(alphabet, max_n):
    for n in range(1, max_n + 1):
        for seq in itertools.product(alphabet, repeat=n):
            _check(list(seq), n)


def test_early_stop_equals_full_sampling_random():
    rng = np.random.default_rng(0)
    saved = 0
    for _ in range(2000):
        n = int(rng.integers(1, 16))
        p = rng.dirichlet([1, 1, 0.2])  # A, B, parse failure
        seq = [[("A"), ("B"), None][j] for j in rng.choice(3, size=n, p=p)]
        saved += n - _check(seq, n)
    assert saved > 0  # it does stop early


def test_majority_decided_examples_and_errors():
    assert majority_decided(["A", "A", "A"], 5) == "A"       # 3 > 0 + 2
    assert majority_decided(["A", "A", "B"], 5) is None      # 2 > 1 + 2 fails
    assert majority_decided(["A", "B", "A", "B"], 4) == "tie"
    assert early_stop_majority(lambda i: "B", 5) == ("B", 3)
    assert early_stop_majority(lambda i: None, 3) == (None, 3)
    assert samples_still_needed({"p1": [], "p2": ["A", "A", "A"], "p3": ["A", "B"]}, 5) == \
        {"p1": 3, "p2": 0, "p3": 2}
    with pytest.raises(InputError, match="n_total"):
        majority_decided(["A"] * 6, 5)
