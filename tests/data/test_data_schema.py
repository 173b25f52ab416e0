"""Pair record and the seeded, recorded A/B presentation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rubriclab.data import Pair, present, present_both_orders, stable_hash, swap_for

SRC = Path(__file__).resolve().parents[2] / "src"


def _pair(i: int = 0) -> Pair:
    return Pair(f"p{i}", "helpful", f"question {i}", f"good answer {i}", f"bad answer {i}", {"k": i})


def test_pair_round_trip_and_extra_keys_move_to_meta():
    p = _pair(3)
    assert Pair.from_dict(p.to_dict()) == p
    d = {**p.to_dict(), "source": "somewhere"}
    q = Pair.from_dict(d)
    assert q.meta == {"k": 3, "source": "somewhere"}
    assert json.loads(json.dumps(q.to_dict()))["meta"]["source"] == "somewhere"


def test_pair_is_frozen_hashable_and_meta_copied():
    meta = {"a": 1}
    p = Pair("x", "d", "q", "c", "r", meta)
    meta["a"] = 2
    assert p.meta == {"a": 1}
    assert hash(p) == hash(Pair("x", "d", "q", "c", "r", {"other": True}))  # hashable: meta not hashed
    assert len({p, Pair("x", "d", "q", "c", "r", {"a": 1})}) == 1
    try:
        p.id = "y"  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("Pair must be frozen")


def test_present_records_swap_and_human_letter():
    seen = set()
    for i in range(200):
        p = _pair(i)
        shown = present(p, seed=42)
        assert set(shown) == {"id", "prompt", "a", "b", "swapped", "human"}
        assert isinstance(shown["swapped"], bool)
        seen.add(shown["swapped"])
        # the human letter always points at the chosen response
        assert shown[shown["human"].lower()] == p.chosen
        assert shown["b" if shown["human"] == "A" else "a"] == p.rejected
        assert shown["swapped"] == (shown["human"] == "B")
        assert present(p, seed=42) == shown  # deterministic
    assert seen == {True, False}


def test_swap_is_balanced_and_depends_on_seed():
    ids = [f"id-{i}" for i in range(1000)]
    frac = sum(swap_for(i, 1) for i in ids) / len(ids)
    assert 0.42 < frac < 0.58
    assert [swap_for(i, 1) for i in ids] != [swap_for(i, 2) for i in ids]


def test_swap_is_stable_across_processes():
    # Python's hash() is salted per process; the swap must not be
    code = (
        "from rubriclab.data import swap_for; print(''.join('1' if swap_for(f'id{i}', 7) else '0' for i in range(64)))"
    )
    outs = set()
    for salt in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": salt, "PYTHONPATH": str(SRC)}
        outs.add(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
    here = "".join("1" if swap_for(f"id{i}", 7) else "0" for i in range(64))
    assert outs == {here + "\n"}
    assert stable_hash("a", 1) == stable_hash("a", 1) != stable_hash("a", 2)


def test_present_both_orders():
    p = _pair(1)
    first, second = present_both_orders(p)
    assert (first["a"], first["b"], first["swapped"], first["human"]) == (p.chosen, p.rejected, False, "A")
    assert (second["a"], second["b"], second["swapped"], second["human"]) == (p.rejected, p.chosen, True, "B")
