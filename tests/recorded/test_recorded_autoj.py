"""Auto-J's pairwise layout (GAIR-NLP/auto-j: data/test/testdata_pairwise.jsonl, data/outputs/pairwise_[exchange_]
<judge>_output.jsonl): labels and outputs mapped to verdicts as presented, the leaderboard's agreement and
consistency (codes/leaderboard/pairwise_eval.py) against a hand count and against the figures its README prints,
and a changed definition (tie handling, the two-order rule, order handling, a none agreeing) caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rubriclab.errors import InputError
from rubriclab.recorded import Settings, analyze, publisher_check, read_source
from rubriclab.recorded.formats import autoj
from rubriclab.recorded.formats.autoj import README_FIGURES, SCENARIO_GROUPS, autoj_leaderboard, read_autoj

# (scenario, label, original output, exchange output as the judge saw the swapped pair)
HAND = [
    ("post_summarization", 0, 0, 1),      # right in both orders
    ("post_summarization", 1, 1, 1),      # always "the second": right, then wrong (inconsistent)
    ("text_summarization", 2, 2, 2),      # tie on a tie label, both orders: right and consistent
    ("note_summarization", 0, 2, 2),      # tie on a 1/2 label, both orders: wrong, consistent
    ("code_generation", 0, "1. ... So, the final decision is Response 1", 1),  # text, read by the publisher's parse
    ("code_generation", 1, -1, "Failed!"),  # no verdict in either order: wrong, not consistent
    ("explaining_code", 1, 0, 0),         # wrong, then right: inconsistent
    ("explaining_code", 2, 0, 1),         # the same wrong choice twice: consistent
    ("code_simplification", 1, 1, 0),     # right in both orders
]
# hand count (Summarization p0-p3, Code p4-p8): both-orders right, consistent, original order right
EXPECTED = {
    ("pairwise", "agreement"): {"Summarization": 50.0, "Code": 40.0, "Overall": 44.44},     # 2/4, 2/5, 4/9
    ("pairwise", "consistency"): {"Summarization": 75.0, "Code": 60.0, "Overall": 66.67},   # 3/4, 3/5, 6/9
    ("single", "agreement"): {"Summarization": 75.0, "Code": 40.0, "Overall": 55.56},       # 3/4, 2/5, 5/9
}
RM = [0, 1, 2, 0, 0, 0, 0, 0, 0]  # a reward model's outputs (no exchange file): right on p0-p4
RM_EXPECTED = {"Summarization": 100.0, "Code": 20.0, "Overall": 55.56}


def _jsonl(path: Path, rows: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _repo(root: Path, rows: list[tuple], judges: dict[str, tuple[list, list | None]]) -> Path:
    _jsonl(root / "data/test/testdata_pairwise.jsonl",
           [{"scenario": s, "label": lab, "prompt": f"query {i}", "response 1": "one " * (i % 9 + 1),
             "response 2": "two " * (9 - i % 9)} for i, (s, lab, *_rest) in enumerate(rows)])
    for judge, (orig, exch) in judges.items():
        _jsonl(root / f"data/outputs/pairwise_{judge}_output.jsonl", [{"output": o} for o in orig])
        if exch is not None:
            _jsonl(root / f"data/outputs/pairwise_exchange_{judge}_output.jsonl", [{"output": o} for o in exch])
    return root


@pytest.fixture
def hand(tmp_path) -> Path:
    return _repo(tmp_path / "auto-j", HAND, {"j": ([r[2] for r in HAND], [r[3] for r in HAND]), "rm": (RM, None)})


def _table(rows: list[dict], judge: str) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        if r["judge"] == judge:
            out.setdefault((r["type"], r["metric"]), {})[r["group"]] = r["reproduced"]
    return out


def _hand_holds(rs) -> bool:
    rows = autoj_leaderboard(rs)
    return _table(rows, "j") == EXPECTED and _table(rows, "rm") == {("single", "agreement"): RM_EXPECTED}


def test_layout_read_as_verdicts_as_presented(hand):
    rs = read_autoj(hand)
    assert rs.format == "autoj" and len(rs.pairs) == 9 and rs.judges == ["j", "rm"]
    assert rs.conditions == ["pairwise", "single"]
    assert [p.label for p in rs.pairs.values()] == ["1", "2", "tie", "1", "1", "2", "2", "tie", "2"]
    assert rs.pairs["0"].domain == "Summarization" and rs.pairs["8"].domain == "Code"
    assert rs.pairs["0"].output_1 == "one " and rs.extras["scenarios"]["4"] == "code_generation"
    j = {(x.judge, x.pair_id, x.order): x for x in rs.judgments}
    assert (j["j", "0", "original"].verdict, j["j", "0", "swapped"].verdict) == ("first", "second")
    assert j["j", "0", "swapped"].choice == "1"  # exchange 1 = the second shown = response 1
    assert j["j", "4", "original"].verdict == "first" and j["j", "4", "original"].meta_value("parse")
    assert j["j", "5", "original"].verdict == "none" and j["j", "5", "original"].raw == "-1"
    assert j["j", "5", "swapped"].verdict == "none" and j["j", "5", "swapped"].raw == "Failed!"
    assert j["j", "3", "original"].verdict == "tie" and j["j", "3", "original"].meta_value("line") == "4"
    assert {x.order for x in rs.judgments if x.judge == "rm"} == {"original"}
    assert rs.counts()["verdict_none"] == 2


def test_leaderboard_matches_the_hand_count(hand):
    rs = read_autoj(hand)
    assert _hand_holds(rs)
    rows = autoj_leaderboard(rs)
    ov = {(r["judge"], r["type"], r["metric"]): r for r in rows if r["group"] == "Overall"}
    assert ov["j", "pairwise", "agreement"]["n"] == 9 and ov["j", "pairwise", "agreement"]["n_with_none"] == 1
    assert all(r["published"] is None and r["match"] is None for r in rows)  # no published figure for these judges
    # the fixture tells the definitions apart: the mean of the groups is not the pooled overall figure, the
    # original-order agreement is not the both-orders one
    assert (50.0 + 40.0) / 2 != 44.44 and (75.0 + 60.0) / 2 != 66.67 and 55.56 != 44.44


def test_the_cards_own_metrics_beside_the_publishers(hand):
    rs = read_autoj(hand)
    analysis = analyze(rs, Settings(n_boot=50, seed=0))
    cell = next(c for c in analysis.cells if c["judge"] == "j")
    # Auto-J's agreement is the card's both-correct and its consistency the card's positional agreement
    assert cell["metrics"]["both_correct"]["value"] == pytest.approx(4 / 9)
    assert cell["metrics"]["positional_agreement"]["value"] == pytest.approx(6 / 9)
    # the card gives the tie verdicts on 1/2 labels half credit (p3 twice), the leaderboard none
    assert cell["metrics"]["accuracy_original"]["value"] == pytest.approx((5 + 0.5) / 9)
    check = publisher_check(rs, analysis)
    assert check["kind"].startswith("autoj leaderboard") and "j (pairwise) agreement 44.44" in check["summary"]
    assert "j (pairwise): 1" in check["summary"]  # the pair with a none, counted
    assert check["metrics"] == {"j · pairwise · agreement": 44.44, "j · pairwise · consistency": 66.67,
                                "j · single · agreement": 55.56, "rm · single · agreement": 55.56}


@pytest.mark.parametrize("change", ["tie right on any label", "a none agrees with a none",
                                    "exchange outputs not mapped back", "agreement of one order"])
def test_a_changed_definition_fails_the_hand_count(hand, monkeypatch, change):
    rs = read_autoj(hand)
    if change == "tie right on any label":
        monkeypatch.setattr(autoj, "right", lambda pred, gt: pred is not None and (pred == gt or pred == 2))
    elif change == "a none agrees with a none":
        monkeypatch.setattr(autoj, "agree", lambda pred, ex: pred == ex)
    elif change == "exchange outputs not mapped back":
        monkeypatch.setattr(autoj, "_publisher_code",
                            lambda j: None if j is None else {"first": 0, "second": 1, "tie": 2}.get(j.verdict))
    else:
        real = autoj._figures
        monkeypatch.setattr(autoj, "_figures", lambda c, kind: {**real(c, kind), **real(c, "single")})
    assert not _hand_holds(rs)


def _readme_repo(root: Path) -> Path:
    """A full-size test set (24 pairs × 58 scenarios) whose outputs give, per group, the counts behind the figures
    codes/leaderboard/README.md prints for the example files: pairs right in both orders (B), consistent (C),
    right in the original order (S)."""
    rows, orig, exch = [], [], []
    k = 0
    for group, scenarios in SCENARIO_GROUPS.items():
        n = 24 * len(scenarios)
        b = round(README_FIGURES["example"]["pairwise", "agreement"][group] * n / 100)
        c = round(README_FIGURES["example"]["pairwise", "consistency"][group] * n / 100)
        s = round(README_FIGURES["example"]["single", "agreement"][group] * n / 100)
        kinds = ["both"] * b + ["first only"] * (s - b) + ["same wrong"] * (c - b)
        kinds += ["different wrong"] * (n - len(kinds))
        for i, kind in enumerate(kinds):
            gt = k % 3
            w1, w2 = (gt + 1) % 3, (gt + 2) % 3
            o, e = {"both": (gt, gt), "first only": (gt, w1), "same wrong": (w1, w1),
                    "different wrong": (w1, w2)}[kind]
            rows.append((scenarios[i // 24], gt, o, {0: 1, 1: 0, 2: 2}[e]))
            k += 1
    for r in rows:
        orig.append(r[2])
        exch.append(r[3])
    return _repo(root, rows, {"example": (orig, exch)})


def test_the_readme_figures_reproduce_on_a_full_size_set(tmp_path, monkeypatch):
    rs = read_autoj(_readme_repo(tmp_path / "auto-j"))
    assert len(rs.pairs) == 1392
    rows = autoj_leaderboard(rs)
    checked = [r for r in rows if r["match"] is not None]
    assert len(checked) == 27 and all(r["match"] for r in checked)
    ov = {(r["type"], r["metric"]): r["reproduced"] for r in rows if r["group"] == "Overall"}
    assert ov == {("pairwise", "agreement"): 54.96, ("pairwise", "consistency"): 83.41, ("single", "agreement"): 59.99}
    check = publisher_check(rs, None)
    assert "27 of 27 figures the publisher printed" in check["summary"]
    assert check["metrics"]["figures"] == check["metrics"]["reproduced"] == 27
    # averaging the groups instead of pooling them would not give the README's overall figure
    groups = README_FIGURES["example"]["pairwise", "agreement"]
    assert round(sum(v for g, v in groups.items() if g != "Overall") / 8, 2) != 54.96
    real = autoj._figures
    monkeypatch.setattr(autoj, "_figures", lambda c, kind: {**real(c, kind), **real(c, "single")})
    assert not all(r["match"] for r in autoj_leaderboard(rs) if r["match"] is not None)


def test_layouts_and_the_testdata_key(hand, tmp_path):
    outputs = hand / "data/outputs"
    assert read_autoj(outputs).judges == ["j", "rm"]  # data/outputs with data/test beside it
    one = read_autoj(outputs / "pairwise_j_output.jsonl")  # one file: its judge, with its exchange file
    assert one.judges == ["j"] and one.conditions == ["pairwise"]
    moved = tmp_path / "elsewhere.jsonl"
    moved.write_text((hand / "data/test/testdata_pairwise.jsonl").read_text())
    (hand / "data/test/testdata_pairwise.jsonl").unlink()
    with pytest.raises(InputError, match="no testdata_pairwise.jsonl found"):
        read_autoj(hand)
    rs = read_source({"path": str(hand), "format": "autoj", "testdata": str(moved), "judges": ["rm"]}, tmp_path,
                     "aj")
    assert rs.judges == ["rm"] and rs.pairs["0"].label == "1"


def _first_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_bad_input_is_one_line_naming_file_line_and_field(hand):
    test = hand / "data/test/testdata_pairwise.jsonl"
    lines = test.read_text().splitlines()
    bad = json.loads(lines[2])
    bad["label"] = "B"
    test.write_text("\n".join([*lines[:2], json.dumps(bad), *lines[3:]]) + "\n")
    with pytest.raises(InputError) as err:
        read_autoj(hand)
    assert _first_line(err).startswith(f"{test}:3: field 'label': label 'B'; expected 0")
    test.write_text("\n".join(lines) + "\n")

    out = hand / "data/outputs/pairwise_j_output.jsonl"
    rows = out.read_text().splitlines()
    out.write_text("\n".join([*rows[:4], '{"score": 1}', *rows[5:]]) + "\n")
    with pytest.raises(InputError) as err:
        read_autoj(hand)
    assert _first_line(err).startswith(f"{out}:5: field 'output': row 4 has no 'output'")
    out.write_text("\n".join(rows[:-1]) + "\n")
    with pytest.raises(InputError, match="8 outputs but testdata_pairwise.jsonl has 9 pairs"):
        read_autoj(hand)
    out.write_text("\n".join([*rows[:1], "{not json", *rows[2:]]) + "\n")
    with pytest.raises(InputError) as err:
        read_autoj(hand)
    assert _first_line(err).startswith(f"{out}:2: invalid JSON")
    out.unlink()
    with pytest.raises(InputError, match="an exchange file without the original-order outputs of judge 'j'"):
        read_autoj(hand)


def test_cli_writes_a_card(hand, tmp_path, monkeypatch, capsys):
    from rubriclab.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"recorded": {"n_boot": 50}}))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "card"
    assert main(["recorded", "--path", str(hand), "--format", "autoj", "--no-track", "--out", str(out)]) == 0
    md = (out / "card.md").read_text()
    assert "Auto-J" in md and "Publisher check (autoj leaderboard" in md and "ledger: 0 calls" in md
    assert (out / "publisher_check.csv").is_file() and "card:" in capsys.readouterr().out
