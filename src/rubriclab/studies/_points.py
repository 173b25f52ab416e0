"""Grid points: ``grid_of`` (the points of a grid given as axes), their stable key (``grid_key``), the checks
``run_grid`` makes and the Optuna params a point is stored as."""

from __future__ import annotations

import itertools
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from optuna.distributions import FloatDistribution

from rubriclab.errors import ConfigError

RESULT_COLUMNS = frozenset({"values", "state", "worker", "trial_number", "error", "attempts", "n_complete",
                            "grid_key"})


def grid_of(axes: Mapping[str, Iterable[Any]], *, first: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The points of a grid given as axes (``{name: values}``): every combination of the axes' values, the first
    axis varying slowest, each point once (a repeated combination keeps its first place); ``first`` (e.g. the
    configured point) leads; no axes: ``first`` alone. The values are used as given: each package casts and checks
    its own axes."""
    names = list(axes)
    points = [dict(first)] if first is not None else []
    for values in itertools.product(*(list(axes[n]) for n in names)) if names else ():
        point = dict(zip(names, values, strict=True))
        if point not in points:
            points.append(point)
    return points


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": repr(value)}  # 'inf' / '-inf'
    return value


def _decode(obj: dict[str, Any]) -> Any:
    if set(obj) == {"$float"}:
        return float(obj["$float"])
    return obj


def grid_key(point: Mapping[str, Any]) -> str:
    """The stable string of a grid point: canonical JSON (sorted keys), ``±inf`` as ``{"$float": "inf"}``.
    ``1`` and ``1.0`` are different points; floats keep their exact (shortest round-trip) repr."""
    return json.dumps({k: _encode(v) for k, v in point.items()}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, allow_nan=False)


def point_from_key(key: str) -> dict[str, Any]:
    return json.loads(key, object_hook=_decode)


def validate_grid(grid: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(grid, Mapping) or not isinstance(grid, Sequence) or not grid:
        raise ConfigError(f"grid must be a non-empty list of dicts (one per grid point), got {type(grid).__name__}"
                          f"{' (empty)' if isinstance(grid, Sequence) and not grid else ''}")
    out: list[tuple[str, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for i, point in enumerate(grid):
        if not isinstance(point, Mapping):
            raise ConfigError(f"grid[{i}] must be a dict of parameter values, got {type(point).__name__}")
        for name, value in point.items():
            if not isinstance(name, str) or not name or name.startswith("$") or name in RESULT_COLUMNS \
                    or name.startswith("value_"):
                raise ConfigError(f"grid[{i}]: parameter name {name!r} is not allowed (a non-empty string, not "
                                  f"starting with '$' or 'value_', not one of {sorted(RESULT_COLUMNS)})")
            if value is not None and not isinstance(value, (bool, int, float, str)):
                raise ConfigError(f"grid[{i}][{name!r}] = {value!r}: expected a number, string, bool or None")
            if isinstance(value, float) and math.isnan(value):
                raise ConfigError(f"grid[{i}][{name!r}] is NaN; a grid point needs a comparable value")
        key = grid_key(point)
        if key in seen:
            raise ConfigError(f"grid[{i}] repeats grid[{seen[key]}] ({key}); each grid point runs exactly once")
        seen[key] = i
        out.append((key, dict(point)))
    return out


def optuna_params(point: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, FloatDistribution]]:
    """Numeric grid values as Optuna params (a one-point FloatDistribution each, so points never conflict);
    ±inf stored as ±float max. Strings, bools and None live only in the grid key."""
    params: dict[str, float] = {}
    dists: dict[str, FloatDistribution] = {}
    for name, value in point.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        v = float(value) if math.isfinite(value) else math.copysign(sys.float_info.max, value)
        params[name], dists[name] = v, FloatDistribution(v, v)
    return params, dists

