"""Which pairs get a human label: a seeded random draw, made from the pair ids alone (never the verdicts), so
the labelled pairs are a simple random sample of the population — what every interval here assumes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from rubriclab.errors import ConfigError


def draw_labelled(pair_ids: Sequence[str], label_fraction: float, seed: int) -> list[str]:
    """``round(label_fraction × len(pair_ids))`` ids (at least 2), drawn without replacement; the ids are sorted
    first so the draw depends on the set of ids and the seed only, not on row order."""
    if not isinstance(label_fraction, int | float) or not 0 < label_fraction < 1:
        raise ConfigError(f"calibrate: label_fraction {label_fraction!r}; expected a number in (0, 1), the share of "
                          "pairs given a human label")
    ids = sorted(pair_ids)
    k = max(2, int(round(label_fraction * len(ids))))
    if k >= len(ids):
        raise ConfigError(f"calibrate: label_fraction {label_fraction} of {len(ids)} labellable pairs leaves no "
                          "unlabelled pair; expected a smaller fraction (or more pairs)")
    rng = np.random.default_rng(seed)
    return sorted(ids[i] for i in rng.choice(len(ids), size=k, replace=False))


def as_ids(labelled: Iterable[str]) -> list[str]:
    if isinstance(labelled, str):
        raise ConfigError(f"calibrate: labelled {labelled!r}; expected a list of pair ids, not one string")
    return sorted({str(x) for x in labelled})
