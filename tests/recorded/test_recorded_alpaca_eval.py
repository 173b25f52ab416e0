"""AlpacaEval's annotations: read in the publishers' layouts, the leaderboard computed by their own definitions
(checked against the pip package ``alpaca-eval``'s code), the shipped rows reproduced, two judges compared."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

alpaca_metrics = pytest.importorskip("alpaca_eval.metrics")

from rubriclab.errors import InputError  # noqa: E402
from rubriclab.recorded import Settings, analyze, leaderboard_gate, publisher_check, read_source  # noqa: E402
from rubriclab.recorded._leaderboard import head2head, leaderboard, length_controlled  # noqa: E402
from rubriclab.recorded.formats.alpaca_eval import choice_of, read_alpaca_eval, switched  # noqa: E402

S = Settings(n_boot=200)


def _rows(model: str, annotator: str, baseline: str, prefs: list, seed: int = 0, tokens: bool = False,
          n: int | None = None) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i, p in enumerate(prefs[:n] if n else prefs):
        instruction = f"Instruction number {i}: explain topic {i}."
        row = {"instruction": instruction, "output_1": "base " * int(rng.integers(1, 60)), "generator_1": baseline,
               "dataset": "helpful_base", "output_2": "- item\n- item\n" * int(rng.integers(0, 3)) + "m " * int(
                   rng.integers(1, 90)), "generator_2": model, "annotator": annotator, "preference": p,
               "price_per_example": 0.01, "time_per_example": 0.5}
        if tokens and p is not None and p not in (0, 1.5):
            shown_first_wins = (3 - p if switched(instruction) else p) < 1.5  # as the judge saw them
            row["raw_completion"] = {"text": "m" if shown_first_wins else "M"}
        out.append(row)
    return out


def _prefs(seed: int, n: int = 60, weighted: bool = False) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        u = rng.random()
        if u < 0.05:
            out.append(None)
        elif u < 0.1:
            out.append(1.5)
        elif u < 0.13:
            out.append(0)
        else:
            out.append(float(1 + rng.random()) if weighted else float(rng.choice([1.0, 2.0])))
    return out


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return path


@pytest.mark.parametrize("weighted", [False, True])
def test_the_leaderboard_figures_are_the_publishers(weighted: bool) -> None:
    for seed in range(5):
        prefs = _prefs(seed, weighted=weighted)
        want = alpaca_metrics.get_winrate(pd.DataFrame({"preference": prefs}))
        got = head2head(prefs)
        for key in ("win_rate", "standard_error", "n_wins", "n_wins_base", "n_draws", "n_total", "discrete_win_rate"):
            assert got[key] == pytest.approx(float(want[key]), abs=1e-12, nan_ok=True), key


def test_draws_count_half_and_no_verdict_is_left_out() -> None:
    got = head2head([2.0, 1.0, 1.5, 0, None])
    assert (got["n_total"], got["n_draws"], got["n_wins"], got["n_wins_base"]) == (4, 2, 1, 1)
    assert got["win_rate"] == pytest.approx(50.0)  # (1 + 0 + ½ + ½) / 4
    assert [choice_of(p) for p in (1.2, 1.8, 1.5, 0, None, 2.0)] == ["1", "2", "tie", "tie", "none", "2"]


def test_three_layouts_read_the_same(tmp_path) -> None:
    a = _rows("m1", "judge_x", "base", _prefs(1))
    b = _rows("m2", "judge_x", "base", _prefs(2))
    _write(tmp_path / "results/m1/judge_x/annotations.json", a)
    _write(tmp_path / "results/m2/judge_x/annotations.json", b)
    _write(tmp_path / "flat/judge_x/m1.json", a)
    _write(tmp_path / "flat/judge_x/m2.json", b)
    one = read_alpaca_eval(_write(tmp_path / "one/annotations.json", a + b))
    tree, flat = read_alpaca_eval(tmp_path / "results"), read_alpaca_eval(tmp_path / "flat")
    for rs in (tree, flat, one):
        assert rs.judges == ["judge_x"] and rs.conditions == ["m1", "m2"] and len(rs.judgments) == 120
        assert not rs.extras["mislabelled"]
    rows = [{(r["model"], k): r[k] for k in ("win_rate", "n_total")} for r in leaderboard(tree, S)]
    assert rows == [{(r["model"], k): r[k] for k in ("win_rate", "n_total")} for r in leaderboard(one, S)]
    j = next(j for j in tree.judgments if j.condition == "m1" and j.score is not None)
    assert dict(j.meta)["baseline"] == "base" and 1 <= j.score <= 2 and dict(j.meta)["price_usd"] == "0.01"


def test_a_file_filed_under_another_model_is_flagged_and_keyed_as_the_publishers_do(tmp_path) -> None:
    _write(tmp_path / "judge_x/small.json", _rows("big", "judge_x", "base", _prefs(3)))
    rs = read_alpaca_eval(tmp_path)
    assert rs.conditions == ["big"]
    assert rs.extras["mislabelled"][0] | {"file": None} == {"annotator": "judge_x", "listed_as": "small",
                                                            "model": "big", "rows": 60, "file": None}
    assert any("filed under small but its 60 rows are of big" in n for n in rs.notes)
    assert [r["model"] for r in leaderboard(rs, S, by="listed_as")] == ["small"]


def test_bad_input_names_file_line_and_field(tmp_path) -> None:
    rows = _rows("m1", "j", "base", _prefs(1, n=3))
    rows[1]["preference"] = "A"
    path = _write(tmp_path / "j/m1.json", rows)
    line = [i for i, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith("  {")][1]
    with pytest.raises(InputError, match=rf"m1\.json:{line}: field 'preference': preference 'A'; expected a number"):
        read_alpaca_eval(tmp_path)
    del rows[1]["preference"]
    _write(path, rows)
    with pytest.raises(InputError, match=r"field 'preference': annotation has no 'preference'"):
        read_alpaca_eval(tmp_path)


def test_the_presentation_order_is_known_only_where_the_raw_tokens_confirm_the_seeded_switch(tmp_path) -> None:
    rows = _rows("m1", "weighted_j", "base", _prefs(4, n=200, weighted=True), tokens=True)
    _write(tmp_path / "a/weighted_j/m1.json", rows)
    rs = read_alpaca_eval(tmp_path / "a")
    assert rs.extras["order_check"]["weighted_j"]["known"]
    orders = {j.order for j in rs.judgments}
    assert orders == {"original", "swapped"}
    assert all((j.order == "swapped") == switched(rs.pairs[j.pair_id].prompt) for j in rs.judgments)
    fp = analyze(rs, S).cell("weighted_j", "m1")["metrics"]["first_position_rate"]
    assert fp["value"] is not None and fp["low"] <= fp["value"] <= fp["high"]
    for r in rows:  # tokens that ignore the switch: the reconstruction is not confirmed
        if "raw_completion" in r:
            r["raw_completion"]["text"] = random.Random(r["instruction"]).choice(["m", "M"])
    _write(tmp_path / "b/weighted_j/m1.json", rows)
    rs = read_alpaca_eval(tmp_path / "b")
    assert not rs.extras["order_check"]["weighted_j"]["known"]
    cell = analyze(rs, S).cell("weighted_j", "m1")["metrics"]
    assert cell["first_position_rate"]["value"] is None and "presentation order not recorded" in cell[
        "first_position_rate"]["reason"]


def test_the_length_controlled_rate_is_the_publishers_predict_winrate(tmp_path, monkeypatch) -> None:
    from alpaca_eval.metrics import glm_winrate

    rng = np.random.default_rng(0)
    difficulty = pd.Series(rng.normal(0, 1, 50), name="instruction_difficulty")
    weights = pd.DataFrame({"np.tanh(std_delta_len)": [0.0, 0.7], "instruction_difficulty": [0.0, 0.4],
                            "not_gamed_baseline.astype(float)": [0.0, -1.3]}, index=["base", "m1"])
    monkeypatch.setattr(glm_winrate, "_get_instructions_difficulty", lambda: difficulty)
    want = glm_winrate.predict_winrate(model="m1", baseline="base", weights=weights) * 100
    got, why = length_controlled("m1", "base", weights, difficulty)
    assert why is None and got == pytest.approx(want, abs=1e-9)
    assert length_controlled("m1", "base", weights, None)[1].startswith("not computable here")
    assert length_controlled("m1", "base", None, difficulty)[1].startswith("not computable: no length-controlled")


def test_the_shipped_leaderboard_rows_are_reproduced() -> None:
    rs = read_source({"path": "shipped:alpaca_eval", "format": "alpaca_eval"}, Path("."), "alpaca_eval")
    res = analyze(rs, S)
    check = publisher_check(rs, res)
    rows = check["rows"]
    exact = [r for r in rows if r["figure"] != "length_controlled_winrate"]
    assert len(exact) == 64 and all(r["match"] for r in exact), [r for r in exact if not r["match"]]
    assert {(r["annotator"], r["model"]) for r in exact} == {
        (a, m) for a in ("alpaca_eval_gpt4", "weighted_alpaca_eval_gpt4_turbo")
        for m in ("alpaca-7b", "falcon-7b-instruct", "gpt-3.5-turbo-1106", "phi-2")}
    lc = [r for r in rows if r["figure"] == "length_controlled_winrate"]
    assert len(lc) == 8 and all(r["reproduced"] is None and r["note"].startswith("not computable") for r in lc)
    # AlpacaEval 1's "falcon-7b-instruct" annotations are falcon-40b-instruct's (as in the publishers' own files)
    assert rs.extras["mislabelled"][0]["model"] == "falcon-40b-instruct"
    assert "falcon-40b-instruct's win rate with falcon-7b-instruct's avg_length" in check["summary"]
    # every rate with its interval
    for r in res.leaderboard:
        ci = r["win_rate_ci"]
        assert ci["low"] <= r["win_rate"] <= ci["high"] and ci["n"] == r["n_total"] and ci["resamples"] == 200


def _judge(name: str, baseline: str, rates: dict[str, float], n: int = 300) -> list[dict]:
    rows = []
    for k, (model, rate) in enumerate(rates.items()):
        rng = np.random.default_rng(k + 10 * len(name))
        rows += _rows(model, name, baseline, [2.0 if rng.random() < rate else 1.0 for _ in range(n)])
    return rows


@pytest.mark.parametrize(("rates_b", "exit_code", "verdict"), [
    ({"m1": 0.8, "m2": 0.5, "m3": 0.2}, 0, "order preserved"),
    ({"m1": 0.2, "m2": 0.5, "m3": 0.8}, 1, "REORDERED"),
])
def test_the_leaderboard_gate_asks_whether_the_judge_reorders_the_models(tmp_path, rates_b, exit_code, verdict):
    rows = _judge("judge_a", "base", {"m1": 0.8, "m2": 0.5, "m3": 0.2}) + _judge("judge_b", "base", rates_b)
    _write(tmp_path / "all.json", rows)
    rs = read_alpaca_eval(tmp_path / "all.json")
    res = leaderboard_gate(rs, "judge_a", "judge_b", S)
    assert res["exit_code"] == exit_code and res["verdict"].startswith(verdict)
    c = res["comparison"]
    assert c["spearman"]["value"] == pytest.approx(1.0 if exit_code == 0 else -1.0)
    assert math.isfinite(c["kendall"]["low"]) and c["spearman"]["n"] == 3

    from rubriclab.cli import main

    (tmp_path / "params.yaml").write_text(
        f"recorded:\n  n_boot: 100\n  sources:\n    ae: {{path: {tmp_path / 'all.json'}, format: alpaca_eval}}\n")
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["recorded", "gate", "ae", "--judge", "judge_a", "--to-judge", "judge_b"]) == exit_code
    finally:
        os.chdir(cwd)
    assert (tmp_path / "outputs/recorded_cli/ae/gate/report.md").read_text().count(verdict) >= 1


def test_the_card_and_the_report_show_the_leaderboard_and_the_judges_compared(tmp_path) -> None:
    from rubriclab.recorded import write_card
    from rubriclab.report._recorded import recorded_sections

    rows = _judge("judge_a", "base", {"m1": 0.8, "m2": 0.5, "m3": 0.2}) + _judge("judge_b", "base2", {
        "m1": 0.7, "m2": 0.2, "m3": 0.5})
    _write(tmp_path / "src/all.json", rows)
    rs = read_alpaca_eval(tmp_path / "src/all.json")
    res = analyze(rs, S)
    out = tmp_path / "proj/outputs/recorded/ae"
    write_card(res, out, publisher_check(rs, res))
    card = (out / "card.md").read_text(encoding="utf-8")
    assert "## Leaderboard" in card and "### Judge against judge: judge_a vs judge_b" in card
    assert "different baselines" in card and "m2 − m3" in card  # the pair the judges order differently
    assert "`disagreements.csv` — empty: no labelled judgment" in card
    (section,) = recorded_sections(tmp_path / "proj")
    kinds = [b[0] for b in section["blocks"]]
    assert "img" in kinds and any("### Leaderboard" in b[1] for b in section["blocks"] if b[0] == "md")
