"""JudgeBench's outputs (ScalerLab/JudgeBench: outputs/<dataset>,judge_name=<name>,judge_model=<model>.jsonl, one
judged pair a line, both orders): decisions mapped to verdicts as presented, the accuracy under JudgeBench's own
two-order rule (utils/metrics.py) per source category against a hand count, the single-game rule, and a changed
rule (both orders required, no flip back, one order only) caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rubriclab.errors import InputError
from rubriclab.recorded import Settings, analyze, publisher_check, read_source
from rubriclab.recorded.formats import judgebench
from rubriclab.recorded.formats.judgebench import judgebench_accuracy, read_judgebench

DATASET = "dataset=judgebench,response_model=gpt-4o-2024-05-13"
ARENA = f"{DATASET},judge_name=arena_hard,judge_model=o1-mini-2024-09-12.jsonl"
RM = f"{DATASET},judge_name=reward_model,judge_model=Skywork_Skywork-Reward-Gemma-2-27B.jsonl"
# (source, label, first decision, second decision as recorded on the swapped pair)
HAND = [
    ("mmlu-pro-law", "A>B", "A>B", "B>A"),                     # right twice: +2 correct
    ("mmlu-pro-law", "A>B", "A>B", "A>B"),                     # right, then wrong: 0 undecided
    ("mmlu-pro-computer science", "B>A", "B>A", "A=B"),        # right and a tie: +1 correct
    ("livebench-math", "B>A", None, "A>B"),                    # a failed judgment and a right one: +1 correct
    ("livebench-math", "A>B", "B>A", "A>B"),                   # wrong twice: -2 incorrect
    ("livecodebench", "B>A", "A<B", "B>A"),                    # an odd string (0) and a wrong one: -1 incorrect
    ("livecodebench", "A>B", "A=B", "A=B"),                    # two ties: 0 undecided
    ("livebench-reasoning", "B>A", "B>A", "A>B"),              # right twice: +2 correct
]
# hand count per category (run_judge.py's prefixes), then overall: accuracy = correct pairs / pairs × 100
EXPECTED = {"mmlu-pro": 100 * 2 / 3, "livebench-reasoning": 100.0, "livebench-math": 50.0, "livecodebench": 0.0,
            "Overall": 50.0}
OVERALL_COUNTS = {"n_pairs": 8, "n_correct": 4, "n_incorrect": 2, "n_tie": 2, "n_all_correct": 2,
                  "n_all_incorrect": 3, "n_some_correct": 3, "n_inconsistent": 4, "n_nulls": 1}


def _judgment(decision, model="o1-mini-2024-09-12", response=None):
    if decision is None:
        return None
    return {"judgment": {"judge_model": model, "prompt": "…", "response": response or f"\n[[{decision}]]"},
            "decision": decision}


def _row(i: int, source: str, label: str, judgments: list, judge_name: str = "arena_hard") -> dict:
    return {"pair_id": f"id-{i}", "original_id": 1000 + i, "source": source, "question": f"question {i}",
            "response_model": "gpt-4o-2024-05-13", "response_A": "a " * (i + 1), "response_B": "b " * (8 - i),
            "label": label, "judge_name": judge_name, "judgments": judgments}


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "JudgeBench"
    # run_judge.py appends pairs as they finish: not in the dataset's order
    rows = [_row(i, s, lab, [_judgment(d1), _judgment(d2)]) for i, (s, lab, d1, d2) in enumerate(HAND)]
    _write(root / "outputs" / ARENA, rows[::-1])
    rm = "Skywork/Skywork-Reward-Gemma-2-27B"
    scores = [(2.0, 1.0), (1.5, 1.5), (0.5, 3.0)]  # p1: equal scores, the publisher's decision breaks them to B
    rm_rows = [_row(i, s, lab, [{"judgment": {"judge_model": rm, "prompt": "", "response": "", "scores": list(sc)},
                                 "decision": "A>B" if sc[0] > sc[1] else "B>A"}], "reward_model")
               for i, ((s, lab, *_), sc) in enumerate(zip(HAND, scores))]
    _write(root / "outputs" / RM, rm_rows)
    return root


def _by_category(rows, condition="arena_hard") -> dict[str, float]:
    return {r["category"]: r["accuracy"] for r in rows if r["condition"] == condition}


def test_outputs_read_as_verdicts_as_presented(repo):
    rs = read_judgebench(repo)
    assert rs.format == "judgebench" and len(rs.pairs) == 8
    assert rs.judges == ["Skywork/Skywork-Reward-Gemma-2-27B", "o1-mini-2024-09-12"]
    assert rs.conditions == ["arena_hard", "reward_model"]
    assert rs.pairs["id-0"].label == "1" and rs.pairs["id-2"].label == "2"
    assert rs.pairs["id-0"].domain == "knowledge" and rs.pairs["id-5"].domain == "coding"
    assert rs.pairs["id-0"].prompt == "question 0" and rs.pairs["id-0"].output_2 == "b " * 8
    j = {(x.condition, x.pair_id, x.order): x for x in rs.judgments}
    assert (j["arena_hard", "id-0", "original"].verdict, j["arena_hard", "id-0", "swapped"].verdict) == (
        "first", "second")
    assert j["arena_hard", "id-0", "swapped"].choice == "1"  # B>A on the swapped pair: response A
    assert j["arena_hard", "id-0", "original"].raw == "\n[[A>B]]"
    assert j["arena_hard", "id-2", "swapped"].verdict == "tie"
    assert j["arena_hard", "id-3", "original"].verdict == "none" and j["arena_hard", "id-3", "original"].raw == ""
    assert j["arena_hard", "id-5", "original"].verdict == "none"  # "A<B" is no decision JudgeBench knows
    assert j["arena_hard", "id-5", "original"].meta_value("decision") == "A<B"
    assert {x.order for x in rs.judgments if x.condition == "reward_model"} == {"original"}
    rm0, rm1 = j["reward_model", "id-0", "original"], j["reward_model", "id-1", "original"]
    assert (rm0.verdict, rm0.score) == ("first", 1.0) and (rm1.verdict, rm1.score) == ("tie", 0.0)
    assert rm1.meta_value("decision") == "B>A" and any("scored both responses equally" in n for n in rs.notes)


def test_two_order_accuracy_matches_the_hand_count(repo):
    rows = judgebench_accuracy(read_judgebench(repo))
    got = _by_category(rows)
    assert got.keys() == EXPECTED.keys() and all(got[k] == pytest.approx(v) for k, v in EXPECTED.items())
    overall = next(r for r in rows if r["condition"] == "arena_hard" and r["category"] == "Overall")
    assert {k: overall[k] for k in OVERALL_COUNTS} == OVERALL_COUNTS
    assert overall["rule"] == "two orders (reverse_order)" and overall["file"] == ARENA
    # the single-game rule: the decision as recorded equals the label (equal scores' B>A is wrong on A>B)
    assert _by_category(rows, "reward_model") == {"mmlu-pro": pytest.approx(100 * 2 / 3),
                                                  "Overall": pytest.approx(100 * 2 / 3)}


def test_the_cards_own_metrics_beside_the_publishers(repo):
    rs = read_judgebench(repo)
    analysis = analyze(rs, Settings(n_boot=50, seed=0))
    cell = next(c for c in analysis.cells if c["condition"] == "arena_hard")
    # the card averages each pair's two orders, a tie earning half credit: 4.25 / 8, not JudgeBench's 4 / 8
    credits = [1, 0.5, 0.75, 0.5, 0, 0, 0.5, 1]
    assert cell["metrics"]["accuracy"]["value"] == pytest.approx(sum(credits) / 8)
    assert cell["metrics"]["both_correct"]["value"] == pytest.approx(2 / 8)
    rm = next(c for c in analysis.cells if c["condition"] == "reward_model")
    assert rm["metrics"]["first_position_rate"]["value"] is None  # scores of each response alone: no position
    check = publisher_check(rs, analysis)
    assert check["kind"].startswith("judgebench accuracy") and "o1-mini-2024-09-12 · arena_hard" in check["summary"]
    assert "50.00% of 8 (2 undecided, 4 inconsistent)" in check["summary"]
    assert check["metrics"] == {f"o1-mini-2024-09-12 · arena_hard · {DATASET}": 50.0,
                                f"Skywork/Skywork-Reward-Gemma-2-27B · reward_model · {DATASET}": pytest.approx(200 / 3)}


@pytest.mark.parametrize("change", ["both orders must be right", "second decision not flipped back",
                                    "first order only", "a tie counts against"])
def test_a_changed_rule_fails_the_hand_count(repo, monkeypatch, change):
    rs = read_judgebench(repo)
    real = judgebench.pair_counter
    if change == "both orders must be right":
        monkeypatch.setattr(judgebench, "pair_counter", lambda lab, d1, d2: 1 if d1 == lab and d2 == lab else -1)
    elif change == "second decision not flipped back":
        monkeypatch.setattr(judgebench, "pair_counter", lambda lab, d1, d2: real(lab, d1, judgebench.flip_judgment(d2)))
    elif change == "first order only":
        monkeypatch.setattr(judgebench, "pair_counter", lambda lab, d1, d2: real(lab, d1, d1))
    else:
        monkeypatch.setattr(judgebench, "pair_counter",
                            lambda lab, d1, d2: real(lab, d1, d2) - sum(d in ("A=B", None) for d in (d1, d2)))
    got = _by_category(judgebench_accuracy(rs))
    assert any(got.get(k) != pytest.approx(v) for k, v in EXPECTED.items())


def test_filters_layouts_and_shared_pairs(repo, tmp_path):
    one = read_judgebench(repo / "outputs" / RM)
    assert one.conditions == ["reward_model"] and len(one.pairs) == 3
    rs = read_source({"path": str(repo), "format": "judgebench", "conditions": ["arena_hard"]}, tmp_path, "jb")
    assert rs.conditions == ["arena_hard"] and len(rs.pairs) == 8
    with pytest.raises(InputError, match="one of \\(judge · condition\\)"):
        read_judgebench(repo, judges=["nobody"])
    # the same pair_id with another label in a second file is refused
    rows = [json.loads(x) for x in (repo / "outputs" / RM).read_text().splitlines()]
    rows[0]["label"] = "B>A"
    other = _write(repo / "outputs" / f"{DATASET},judge_name=vanilla,judge_model=x.jsonl", rows)
    with pytest.raises(InputError) as err:
        read_judgebench(repo)
    assert str(err.value).startswith(f"{other}:1: field 'pair_id': pair_id id-0 differs")


@pytest.mark.parametrize("edit,where", [
    (lambda r: r.update(label="A>>B"), "field 'label': label 'A>>B'; expected A>B or B>A"),
    (lambda r: r.pop("source"), "field 'source': no 'source'"),
    (lambda r: r.update(judgments=[None, None, None]), "field 'judgments': judgments holds 3"),
    (lambda r: r.update(judgments=[{"decision": 2}, None]), "field 'decision': judgments[0].decision is 2"),
    (lambda r: r.update(judgments=[{"judgment": {}}, None]), "field 'judgments': judgments[0] is"),
])
def test_bad_input_is_one_line_naming_file_line_and_field(repo, edit, where):
    path = repo / "outputs" / ARENA
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    edit(rows[2])
    _write(path, rows)
    with pytest.raises(InputError) as err:
        read_judgebench(repo)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}:3: {where}")


def test_bad_lines_duplicates_and_mixed_runs(repo):
    path = repo / "outputs" / ARENA
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{oops", *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=":2: invalid JSON"):
        read_judgebench(repo)
    path.write_text("\n".join([lines[0], lines[0], *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r":2: field 'pair_id': pair_id id-7 appears twice"):
        read_judgebench(repo)
    row = json.loads(lines[1])
    row["judgments"] = row["judgments"][:1]
    path.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(InputError, match=r":2: field 'judgments': 1 judgments where the file's first line has 2"):
        read_judgebench(repo)


def test_cli_writes_a_card(repo, tmp_path, monkeypatch):
    from rubriclab.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"recorded": {"n_boot": 50}}))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "card"
    assert main(["recorded", "--path", str(repo), "--format", "judgebench", "--no-track", "--out", str(out)]) == 0
    md = (out / "card.md").read_text()
    assert "JudgeBench" in md and "Publisher check (judgebench accuracy" in md
