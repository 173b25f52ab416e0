"""Where the align stage gives a percentile-bootstrap interval: only over enough items for its level to hold."""

from __future__ import annotations

from rubriclab.stats import no_interval_reason

MIN_INTERVAL_N = 10  # fewer prompts (or pairs): no interval, see too_few


def too_few(n: int, what: str, confidence: float) -> str | None:
    """Why a percentile bootstrap over ``n`` items is not given: its level does not hold there (simulated on
    outcomes of 0, ½ and 1 drawn 0.4/0.2/0.4, mean ½: 67% of a nominal 95% at 2 items, 88% at 5, 94% at 10, within
    two simulation SEs of 95% from there; tests/align/test_align_interval_level.py)."""
    return no_interval_reason(n, what, confidence, minimum=MIN_INTERVAL_N, coverage="simulated coverage 67% at 2, 88% at 5")
