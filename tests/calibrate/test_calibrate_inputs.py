"""rubriclab.calibrate: the verdict table from recorded verdicts, the label draw, bad inputs, the CLI."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rubriclab.calibrate import calibrate, draw_labelled, verdict_table, verdict_table_from_frame
from rubriclab.cli import main
from rubriclab.errors import ConfigError, InputError
from rubriclab.recorded import Judgment, RecordedPair, RecordedSet


def _frame(n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"pair_id": [f"p{i}" for i in range(n)], "verdict": rng.integers(0, 2, n).astype(float),
                         "human": rng.integers(0, 2, n).astype(float)})


def _recorded() -> RecordedSet:
    pairs = {f"p{i}": RecordedPair(id=f"p{i}", labels=(("a", "1" if i % 2 else "2"),)) for i in range(6)}
    pairs["p6"] = RecordedPair(id="p6", labels=(("a", "1"), ("b", "2")))  # no majority: no label
    js = []
    for i in range(7):
        js.append(Judgment(f"p{i}", "J", "C", "original", "first"))  # → choice 1
        js.append(Judgment(f"p{i}", "J", "C", "swapped", "none" if i < 2 else "first"))  # → none / choice 2
    js[1] = Judgment("p0", "J", "C", "swapped", "none")
    js[0] = Judgment("p0", "J", "C", "original", "none")  # p0: none in both orders
    return RecordedSet("toy", "table", "toy.csv", pairs, js)


def test_verdict_table_maps_orders_and_counts_none():
    half = verdict_table(_recorded(), "J", "C")
    f = half.frame.set_index("pair_id")
    assert f.loc["p0", "verdict"] == 0.5 and f.loc["p1", "verdict"] == 0.75 and f.loc["p2", "verdict"] == 0.5
    assert f.loc["p1", "human"] == 1.0 and f.loc["p2", "human"] == 0.0 and np.isnan(f.loc["p6", "human"])
    assert half.counts["none_verdicts"] == 3 and half.counts["pairs_without_label"] == 1
    excl = verdict_table(_recorded(), "J", "C", none="exclude")
    g = excl.frame.set_index("pair_id")
    assert "p0" not in g.index and g.loc["p1", "verdict"] == 1.0 and excl.counts["pairs_without_verdict"] == 1
    assert any("excluded" in n for n in excl.notes) and any("0.5" in n for n in half.notes)
    assert verdict_table(_recorded(), "J", "C", order="swapped").frame.set_index("pair_id").loc["p3", "verdict"] == 0


def test_draw_depends_on_ids_and_seed_only():
    ids = [f"p{i}" for i in range(50)]
    a = draw_labelled(ids, 0.2, 4)
    assert len(a) == 10 and a == draw_labelled(list(reversed(ids)), 0.2, 4) and a != draw_labelled(ids, 0.2, 5)
    f = _frame(50)
    flipped = f.assign(verdict=1 - f["verdict"])
    assert calibrate(f, label_fraction=0.2, seed=4).labelled == calibrate(flipped, label_fraction=0.2, seed=4).labelled
    unl = f.assign(human=np.where(f.index < 10, f["human"], np.nan))  # the user labelled p0..p9 only
    res = calibrate(unl)
    assert res.n == 10 and res.draw == "every pair with a human value" and res.get("isotonic") is not None


@pytest.mark.parametrize("change, err, text", [
    (lambda f: f.drop(columns="human"), InputError, "missing column(s) human"),
    (lambda f: f.assign(verdict=f["verdict"] + 1), InputError, "field 'verdict'"),
    (lambda f: f.assign(verdict=np.nan), InputError, "a number in [0, 1]"),
    (lambda f: f.assign(human="yes"), InputError, "field 'human'"),
    (lambda f: pd.concat([f, f.iloc[:1]]), InputError, "one row per pair"),
])
def test_bad_tables(change, err, text):
    with pytest.raises(err, match=None) as exc:
        calibrate(change(_frame()), label_fraction=0.2)
    assert text in str(exc.value) and "expected" in str(exc.value)


@pytest.mark.parametrize("kwargs, err, text", [
    ({"label_fraction": 0}, ConfigError, "expected a number in (0, 1)"),
    ({"label_fraction": 1.5}, ConfigError, "expected a number in (0, 1)"),
    ({"label_fraction": 0.99}, ConfigError, "leaves no unlabelled pair"),
    ({"label_fraction": 0.2, "labelled": ["p1"]}, ConfigError, "expected one"),
    ({"labelled": ["p1", "zz"]}, InputError, "'zz' is not in the table"),
    ({"labelled": ["p1"]}, InputError, "at least 2 labelled pairs"),
    ({"labelled": "p1"}, ConfigError, "a list of pair ids"),
    ({}, InputError, "all 40 pairs are labelled"),
    ({"label_fraction": 0.2, "confidence": 95}, ConfigError, "e.g. 0.95"),
])
def test_bad_settings(kwargs, err, text):
    with pytest.raises(err) as exc:
        calibrate(_frame(), **kwargs)
    assert text in str(exc.value)


def test_labelled_pair_without_human_value():
    f = _frame().assign(human=lambda d: np.where(d.index == 3, np.nan, d["human"]))
    with pytest.raises(InputError, match="'p3' has no human value"):
        calibrate(f, labelled=["p1", "p3"])


def test_bad_recorded_side():
    with pytest.raises(ConfigError, match="no judge 'K'; judges: J"):
        verdict_table(_recorded(), "K", "C")
    with pytest.raises(ConfigError, match="no condition 'D'; its conditions: C"):
        verdict_table(_recorded(), "J", "D")
    with pytest.raises(ConfigError, match="expected one of half, exclude"):
        verdict_table(_recorded(), "J", "C", none="guess")
    with pytest.raises(ConfigError, match="expected one of both, original, swapped"):
        verdict_table(_recorded(), "J", "C", order="first")
    with pytest.raises(InputError, match="a pandas DataFrame"):
        verdict_table_from_frame([1, 2])


def test_cli_prints_every_estimate(capsys, tmp_path):
    out = tmp_path / "res.json"
    rc = main(["calibrate", "verdicts", "--source", "shipped:llmbar_natural", "--judge", "GPT-4", "--condition",
               "Vanilla", "--label-fraction", "0.1", "--seed", "0", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and out.is_file()
    for word in ("labels_only", "judge_only", "ppi_py.ppi_mean_ci", "isotonic", "100 pairs, 10 labelled",
                 "effective sample size", "0 of 200 verdicts were none"):
        assert word in text
    rc = main(["calibrate", "verdicts", "--source", "shipped:llmbar_natural", "--judge", "Nobody", "--condition",
               "Vanilla"])
    assert rc == 2 and "judges: ChatGPT" in capsys.readouterr().err


def test_cli_options_left_out_take_recorded_calibrate_from_params_yaml_else_the_schema(capsys, tmp_path):
    from rubriclab.settings import RecordedCalibrate

    base = ["calibrate", "verdicts", "--judge", "GPT-4", "--condition", "Vanilla"]
    assert main([*base, "--source", "shipped:llmbar_natural"]) == 0  # no project: the schema's defaults
    assert f"100 pairs, {round(100 * RecordedCalibrate().label_fraction)} labelled" in capsys.readouterr().out
    (tmp_path / "params.yaml").write_text("recorded:\n  calibrate: {label_fraction: 0.2}\n  sources:\n"
                                          "    ll: {path: 'shipped:llmbar_natural', format: llmbar}\n")
    assert main([*base, "--source", "ll", "--params", str(tmp_path / "params.yaml")]) == 0
    assert "100 pairs, 20 labelled" in capsys.readouterr().out
    assert main([*base, "--source", "ll", "--params", str(tmp_path / "params.yaml"), "--label-fraction", "0.3"]) == 0
    assert "100 pairs, 30 labelled" in capsys.readouterr().out
