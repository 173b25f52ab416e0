"""The drift gate between two sides of recorded verdicts (two conditions of a judge, or two judges) per domain:
the rows it is given (presented letters, labels, failures), its decision on a synthetic drop, on the shipped
LLMBar set (the same accuracies as the card), and `rubriclab recorded gate`."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from rubriclab.errors import InputError
from rubriclab.recorded import (
    Judgment,
    RecordedPair,
    RecordedSet,
    Settings,
    analyze,
    gate_inputs,
    read_llmbar,
    recorded_gate,
    shipped_path,
)
from rubriclab.settings import Gate


def _set() -> RecordedSet:
    """40 pairs in two domains; judge J is right on every pair under `plain`; under `rules` it turns wrong on 16 of
    the 20 `math` pairs (original order) and stays right on `chat`. Pair m0 has a tie label, c0 no label."""
    pairs = {}
    for d in ("math", "chat"):
        for i in range(20):
            pid = f"{d[0]}{i}"
            labels = (("x", "1" if i % 2 else "2"),)
            if pid == "m0":
                labels = (("x", "tie"),)
            if pid == "c0":
                labels = (("x", "1"), ("y", "2"))
            pairs[pid] = RecordedPair(id=pid, labels=labels, prompt=f"{d} {i}", output_1=f"one {i}",
                                      output_2=f"two {i}", domain=d)
    js = []
    for pid, p in pairs.items():
        right = p.label if p.label in ("1", "2") else "1"
        wrong = "2" if right == "1" else "1"
        for cond in ("plain", "rules"):
            for order in ("original", "swapped"):
                choice = wrong if (cond, order, pid[0]) == ("rules", "original", "m") and int(pid[1:]) <= 16 else right
                if (cond, pid, order) == ("rules", "c5", "original"):
                    verdict = "none"
                else:
                    verdict = "first" if (choice == "1") == (order == "original") else "second"
                js.append(Judgment(pair_id=pid, judge="J", condition=cond, order=order, verdict=verdict))
    return RecordedSet(name="syn", format="table", path="syn.csv", pairs=pairs, judgments=js)


def test_gate_rows_present_labels_as_letters_and_leave_out_what_is_not_comparable():
    rows, pairs, notes = gate_inputs(_set(), judge="J", from_condition="plain", to_condition="rules", order="swapped")
    assert {p.id for p in pairs} == {f"{d}{i}" for d in "mc" for i in range(1, 20)}  # m0 (tie), c0 (no label) out
    r = rows[(rows["pair_id"] == "m1") & (rows["rubric"] == "old")].iloc[0]
    # label 1 in the swapped order: output 1 is shown second, so the human letter is B
    assert (r["human"], r["verdict"], r["status"], bool(r["swapped"])) == ("B", "B", "agree", True)
    by = {p.id: p for p in pairs}
    assert by["m1"].chosen == "one 1" and by["m2"].chosen == "two 2"
    assert "1 pair(s) with no label; 1 pair(s) with a tie label" in " ".join(notes)
    rows, _, _ = gate_inputs(_set(), judge="J", from_condition="plain", to_condition="rules")
    failed = rows[(rows["pair_id"] == "c5") & (rows["rubric"] == "new")].iloc[0]
    assert pd.isna(failed["verdict"]) and failed["status"] == "failed"


def test_gate_flags_the_domain_that_drops_and_matches_the_card():
    rs = _set()
    res = recorded_gate(rs, judge="J", from_condition="plain", to_condition="rules", gate=Gate(n_boot=500, seed=0))
    d = res.domains.set_index("domain")
    assert res.flagged and res.exit_code == 1 and [f["domain"] for f in res.flags] == ["math"]
    assert d.loc["math", "n"] == 19 and d.loc["math", "n_lost"] == 16 and bool(d.loc["math", "significant_drop"])
    assert d.loc["chat", "n"] == 18 and d.loc["chat", "n_failed_new"] == 1 and d.loc["chat", "diff"] == 0
    # the gate's agreement is the card's per-order accuracy on the same pairs (here: failures left out)
    card = analyze(RecordedSet(name="m", format="table", path="x", judgments=[
        j for j in rs.judgments if j.pair_id.startswith("m") and j.pair_id != "m0"],
        pairs={k: v for k, v in rs.pairs.items() if k.startswith("m") and k != "m0"}), Settings(n_boot=20))
    assert d.loc["math", "agreement_new"] == pytest.approx(card.cell("J", "rules")["metrics"]["accuracy_original"]
                                                           ["value"])
    assert res.old["name"] == "J · plain" and res.settings["order"] == "original"
    swapped = recorded_gate(rs, judge="J", from_condition="plain", to_condition="rules", order="swapped",
                            gate=Gate(n_boot=200, seed=0))
    assert not swapped.flagged  # the drop is in the original order only
    with pytest.raises(InputError, match="no condition 'nope'"):
        recorded_gate(rs, judge="J", from_condition="plain", to_condition="nope")
    with pytest.raises(InputError, match="both sides are J · plain"):
        recorded_gate(rs, judge="J", from_condition="plain", to_condition="plain")


def test_shipped_llmbar_gate_rules_for_chatgpt_is_one_domain_with_the_cards_accuracies():
    rs = read_llmbar(shipped_path("llmbar_natural"), judges=["ChatGPT"], conditions=["Vanilla", "Vanilla_NoRules"])
    card = analyze(rs, Settings(n_boot=20))
    for order in ("original", "swapped"):
        res = recorded_gate(rs, judge="ChatGPT", from_condition="Vanilla_NoRules", to_condition="Vanilla", order=order,
                            gate=Gate(n_boot=200, seed=0))
        (row,) = res.domains.to_dict(orient="records")
        assert row["domain"] == "all" and row["n"] == 100
        for side, cond in (("agreement_old", "Vanilla_NoRules"), ("agreement_new", "Vanilla")):
            assert row[side] == pytest.approx(card.cell("ChatGPT", cond)["metrics"][f"accuracy_{order}"]["value"])
        assert not res.flagged


def test_cli_recorded_gate(tmp_path, monkeypatch, capsys):
    from rubriclab.cli import main

    rs = _set()
    rows = [{"pair_id": j.pair_id, "judge": j.judge, "condition": j.condition, "order": j.order,
             "verdict": j.verdict, "domain": rs.pairs[j.pair_id].domain,
             **{f"label.{a}": lab for a, lab in rs.pairs[j.pair_id].labels}} for j in rs.judgments]
    pd.DataFrame(rows).to_csv(tmp_path / "j.csv", index=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"recorded": {"n_boot": 200, "sources": {
        "syn": {"path": "j.csv", "format": "table"}}}}))
    monkeypatch.chdir(tmp_path)
    assert main(["recorded", "gate", "syn", "--judge", "J", "--from", "plain", "--to", "rules"]) == 1
    out = capsys.readouterr().out
    assert "J · plain -> J · rules (original order)" in out and "FLAGGED: 'math' drops" in out
    report = tmp_path / "outputs/recorded_cli/syn/gate/report.md"
    assert report.is_file() and "recorded verdicts" in report.read_text()
    assert main(["recorded", "gate", "syn", "--judge", "J", "--from", "plain", "--to", "rules", "--order", "both",
                 "--out", str(tmp_path / "g")]) == 1
    assert (tmp_path / "g/original/report.md").is_file() and (tmp_path / "g/swapped/report.md").is_file()
    assert main(["recorded", "gate", "syn", "--from", "plain"]) == 2
    assert "--judge, --to required" in capsys.readouterr().err


def test_the_gates_take_their_settings_as_one_gate_object_whose_defaults_are_the_schemas():
    import inspect

    from rubriclab.drift import compare_verdicts, drift_check

    for fn in (drift_check, compare_verdicts, recorded_gate):
        params = inspect.signature(fn).parameters
        assert "gate" in params and not set(params) & set(Gate.model_fields), fn.__name__
    with pytest.raises(InputError, match="gate.seed is null"):  # null means data.seed: the caller resolves it
        compare_verdicts(*gate_inputs(_set(), judge="J", from_condition="plain", to_condition="rules")[:2], Gate())


def test_the_recorded_gate_counts_as_the_card_does_and_takes_epsilon_from_drift_gate(tmp_path):
    from rubriclab.errors import ConfigError
    from rubriclab.recorded import recorded_gate_settings
    from rubriclab.settings import Recorded
    from rubriclab.stages.recorded import run_recorded_gate

    card = Settings(alpha=0.01, power=0.9, n_boot=300, confidence=0.9, tie_credit=0.0, seed=5)
    gate = recorded_gate_settings(card, Gate(epsilon=0.1, n_boot=9, samples=3))
    assert gate == Gate(alpha=0.01, power=0.9, n_boot=300, confidence=0.9, tie_credit=0.0, seed=5, epsilon=0.1,
                        samples=3)
    r = Recorded()  # no settings given: the schema's recorded.* and drift.gate.epsilon
    assert recorded_gate_settings() == Gate(alpha=r.alpha, power=r.power, n_boot=r.n_boot, confidence=r.confidence,
                                            tie_credit=r.tie_credit, seed=r.seed)
    rs = _set()
    rows = [{"pair_id": j.pair_id, "judge": j.judge, "condition": j.condition, "order": j.order,
             "verdict": j.verdict, "domain": rs.pairs[j.pair_id].domain,
             **{f"label.{a}": lab for a, lab in rs.pairs[j.pair_id].labels}} for j in rs.judgments]
    pd.DataFrame(rows).to_csv(tmp_path / "j.csv", index=False)
    params = {"recorded": {"n_boot": 200, "tie_credit": 0.0, "sources": {"syn": {"path": "j.csv", "format": "table"}}},
              "drift": {"gate": {"epsilon": 0.2, "n_boot": 50}}}
    run = dict(judge="J", from_condition="plain", to_condition="rules", bench="chat", out_dir=tmp_path / "g")
    (res,) = [r["result"] for r in run_recorded_gate(params, tmp_path, "syn", **run)]
    assert (res.settings["n_boot"], res.settings["tie_credit"], res.settings["epsilon"]) == (200, 0.0, 0.2)
    (res,) = [r["result"] for r in run_recorded_gate(params, tmp_path, "syn", epsilon=0.01, **run)]
    assert res.settings["epsilon"] == 0.01 and res.bench["epsilon"] == 0.01
    with pytest.raises(ConfigError, match=r"drift\.gate\.epsilon: got 2\.0; expected a number in \[0, 1\]"):
        run_recorded_gate(params, tmp_path, "syn", epsilon=2.0, **run)
