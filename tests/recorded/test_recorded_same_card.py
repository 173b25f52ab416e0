"""The batched, memory-bounded analysis (issue 60) gives the shipped sets' cards to 1e-12 — every number of
``card.json`` — against each estimate computed on its own."""

from __future__ import annotations

import math

import pytest

from rubriclab.recorded import Settings, analyze, jsonable, read_source


def _numbers(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{path}[{i}]")
    else:
        yield path, obj


@pytest.mark.parametrize("name", ["llmbar_natural", "pandalm", "alpaca_eval"])
def test_the_batched_card_equals_the_per_estimate_card(name: str, tmp_path) -> None:
    from rubriclab.recorded import SHIPPED_FORMATS

    rs = read_source({"path": f"shipped:{name}", "format": SHIPPED_FORMATS[name]}, tmp_path, name)
    s = Settings(n_boot=300)
    a, b = (jsonable(analyze(rs, s, batched=flag).to_dict()) for flag in (True, False))
    got, want = dict(_numbers(a)), dict(_numbers(b))
    assert got.keys() == want.keys()
    n = 0
    for key, w in want.items():
        g = got[key]
        if isinstance(w, float) and isinstance(g, float):
            assert math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-12), (key, g, w)
            n += 1
        else:
            assert g == w, key
    assert n > 100  # the card's numbers, not an empty comparison
