"""The one rule for withholding a percentile-bootstrap interval over too few resampling units."""

from __future__ import annotations


def no_interval_reason(n: int, unit: str, level: float, *, minimum: int, coverage: str) -> str | None:
    """Why there is no interval over ``n`` resampling units (``unit``: "pairs", "prompts", "records"), or None when
    there are at least ``minimum``. Below it a percentile bootstrap's ``level`` does not hold; ``coverage`` says what
    the caller's simulation measured there (e.g. "simulated coverage 86% at 5, 92% at 10")."""
    if n >= minimum:
        return None
    unit = unit[:-1] if n == 1 and unit.endswith("s") else unit
    return f"no interval: {n} {unit}, fewer than the {minimum} a percentile bootstrap needs for its {level:.0%} to hold ({coverage})"
