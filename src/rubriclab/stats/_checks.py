"""Shared input checks for rubriclab.stats: turn arrays into the shapes the metrics need, or say why not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import ConfigError, InputError


def missing_mask(values: Any) -> np.ndarray:
    """Boolean mask of missing entries (None, NaN, pd.NA) in a 1-D or 2-D sequence of any dtype."""
    # pd.isna is the one test that handles None, float NaN and pd.NA in object arrays alike.
    return np.asarray(pd.isna(np.asarray(values, dtype=object)), dtype=bool)


def is_missing(value: Any) -> bool:
    """Whether one scalar is missing (None, float NaN, pd.NA, NaT): a failed parse or an absent rating."""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # pd.isna of a list-like is an array: not a missing scalar
        return False


def as_object_1d(values: Any, name: str) -> np.ndarray:
    """A 1-D object array (labels, verdicts, votes); raises InputError for any other shape."""
    arr = _to_numpy(values, dtype=object)
    if arr.ndim != 1:
        raise InputError(f"has shape {arr.shape}", field=name, expected="a 1-D sequence (one entry per item)")
    return arr


def as_object_2d(values: Any, name: str, expected: str) -> np.ndarray:
    """A 2-D object array; raises InputError naming the expected layout otherwise."""
    arr = _to_numpy(values, dtype=object)
    if arr.ndim != 2:
        raise InputError(f"has shape {arr.shape}", field=name, expected=expected)
    return arr


def as_float(values: Any, name: str, *, ndim: int, expected: str, allow_nan: bool = False) -> np.ndarray:
    """A float array with ``ndim`` dimensions; bools become 0/1. NaN is rejected unless ``allow_nan``."""
    raw = _to_numpy(values, dtype=None)
    if raw.dtype == object:
        # None in an object array means "missing"; map it to NaN before the float cast.
        raw = np.where(missing_mask(raw), np.nan, raw)
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"is not numeric ({exc})", field=name, expected=expected) from None
    if arr.ndim != ndim:
        raise InputError(f"has shape {arr.shape}", field=name, expected=expected)
    if np.isinf(arr).any():
        raise InputError(f"contains {int(np.isinf(arr).sum())} infinite value(s)", field=name, expected=expected)
    if not allow_nan and np.isnan(arr).any():
        raise InputError(
            f"contains {int(np.isnan(arr).sum())} missing/NaN value(s)",
            field=name,
            expected=f"{expected} with no missing values (drop parse failures first and report them)",
        )
    return arr


def same_length(name_a: str, a: np.ndarray, name_b: str, b: np.ndarray) -> None:
    """Raise InputError unless ``a`` and ``b`` have the same first dimension."""
    if len(a) != len(b):
        raise InputError(
            f"has {len(b)} entries but '{name_a}' has {len(a)}",
            field=name_b,
            expected=f"one entry per entry of '{name_a}'",
        )


def probability(value: float, name: str) -> float:
    """A config probability strictly inside (0, 1), else ConfigError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} is not a number; expected a value strictly between 0 and 1") from None
    if not 0.0 < v < 1.0:
        raise ConfigError(f"{name}={value!r} is out of range; expected a value strictly between 0 and 1")
    return v


def positive_int(value: int, name: str, minimum: int = 1) -> int:
    """A config integer >= ``minimum``, else ConfigError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name}={value!r} is invalid; expected an integer >= {minimum}")
    return int(value)


def item_codes(item_ids: Any, n_obs: int, name: str = "item_ids") -> tuple[np.ndarray, int]:
    """Integer codes 0..G-1 for ``item_ids`` (one per observation) and the number of items G.

    ``None`` means every observation is its own item (a judgment-level resample).
    """
    if item_ids is None:
        return np.arange(n_obs), n_obs
    ids = _to_numpy(item_ids, dtype=object)
    if ids.ndim != 1:
        raise InputError(f"has shape {ids.shape}", field=name, expected="a 1-D sequence, one item id per observation")
    if len(ids) != n_obs:
        raise InputError(f"has {len(ids)} entries for {n_obs} observations", field=name,
                         expected="one item id per observation (row)")
    if missing_mask(ids).any():
        raise InputError(f"contains {int(missing_mask(ids).sum())} missing id(s)", field=name,
                         expected="an id for every observation")
    codes, uniques = pd.factorize(ids, sort=False)
    return np.asarray(codes, dtype=np.intp), len(uniques)


def _to_numpy(values: Any, dtype: Any) -> np.ndarray:
    if isinstance(values, (pd.DataFrame, pd.Series)):
        values = values.to_numpy(dtype=dtype) if dtype is not None else values.to_numpy()
        return values
    if dtype is object:
        # np.asarray(list_of_str_lists, dtype=object) keeps the 2-D shape; ragged input raises below.
        try:
            return np.asarray(values, dtype=object)
        except ValueError as exc:
            raise InputError(f"is ragged ({exc})", expected="a rectangular array") from None
    try:
        return np.asarray(values)
    except ValueError as exc:
        raise InputError(f"is ragged ({exc})", expected="a rectangular array") from None
