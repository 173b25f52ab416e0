"""LLMBar's published layout: the importer reads it as downloaded, every figure of every ``statistics.json``
(correct_False, correct_True, correct_average, correct_both, equal, and the kappas) is reproduced exactly — on a
synthetic folder written here and on the copy shipped with the package (``shipped_path``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubriclab.errors import InputError
from rubriclab.recorded import (
    Settings,
    analyze,
    llmbar_check,
    llmbar_statistics,
    publisher_check,
    read_llmbar,
    shipped_path,
)

SHIPPED = shipped_path("llmbar_natural")


def _independent_statistics(items):
    """LLMBar's definitions, written out again from its evaluate.py: the last round's winners against the label."""
    n = len(items)
    cf = ct = both = equal = 0
    for it in items:
        label = str(it["label"])
        wf = it["results"][-1]["swap = False"]["winner"]
        wt = it["results"][-1]["swap = True"]["winner"]
        cf += wf == label
        ct += wt == label
        both += wf == label and wt == label
        equal += wf == wt
    return {"correct_False": f"{cf} / {n} = {cf / n * 100}%", "correct_True": f"{ct} / {n} = {ct / n * 100}%",
            "correct_average": f"{(cf + ct) / 2 / n * 100}%", "correct_both": f"{both} / {n} = {both / n * 100}%",
            "equal": f"{equal} / {n} = {equal / n * 100}%"}


def _round(wf, wt, cf="Output (a)", ct="Output (b)"):
    return {"swap = False": {"completion": [cf, "stop"], "winner": wf},
            "swap = True": {"completion": [ct, "stop"], "winner": wt}}


def _rating(s1, s2):
    try:
        a, b = int(s1), int(s2)
        wf, wt = ("1" if a > b else "2"), ("2" if b > a else "1")
    except ValueError:
        wf, wt = "1", "2"
    return {"score_1": [s1, "stop"], "score_2": [s2, "stop"], "swap = False": {"winner": wf},
            "swap = True": {"winner": wt}}


DATASET = [{"input": f"question {i}", "output_1": f"answer one {i}" + " long" * (i % 3),
            "output_2": f"answer two {i}", "label": 1 if i % 3 else 2} for i in range(6)]
RESULTS = {
    # Vanilla: pair 0 right in both orders, pair 1 a position-biased judge, pair 2 an unparsed reply, ...
    ("J1", "Vanilla"): [[_round("1", "1")], [_round("1", "2")], [_round(None, "1", cf="I cannot tell")],
                        [_round("2", "2")], [_round("2", "1")], [_round(None, None, cf="", ct="")]],
    # Metrics: the judge's own questions come first
    ("J1", "Metrics"): [[["1. Is it right?", "stop"], _round("1", "1")] for _ in range(6)],
    # Swap: round 2 (synthesis) only where round 1's orders disagreed
    ("J1", "Swap"): [[_round("1", "2"), _round("1", "1")], [_round("1", "1")], [_round("2", "1"), _round("2", "2")],
                     [_round("2", "2")], [_round("1", "1")], [_round("2", "1"), _round(None, "1")]],
    # Rating: equal scores and an unparsable score follow the publisher's tie-breaks
    ("J1", "Rating"): [[_rating("8", "3")], [_rating("5", "5")], [_rating("n/a", "4")], [_rating("2", "7")],
                       [_rating("6", "6")], [_rating("9", "1")]],
    ("J2", "Vanilla"): [[_round("1", "1")], [_round("2", "2")], [_round("1", "1")], [_round("1", "2")],
                        [_round("2", "2")], [_round("1", "1")]],
}


def _write_folder(root: Path, results=RESULTS, statistics=True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "dataset.json").write_text(json.dumps(DATASET, indent=2))
    for (judge, strategy), per_item in results.items():
        folder = root / "evaluators" / judge / strategy
        folder.mkdir(parents=True)
        items = [{**DATASET[i], "results": r} for i, r in enumerate(per_item)]
        (folder / "result.json").write_text(json.dumps(items, indent=2))
        if statistics:
            (folder / "statistics.json").write_text(json.dumps(_independent_statistics(items), indent=2))
    return root


def test_synthetic_folder_reproduces_every_statistic(tmp_path):
    rs = read_llmbar(_write_folder(tmp_path / "bar"))
    rows = llmbar_check(rs)
    assert len(rows) == 5 * len(RESULTS)
    assert all(r["match"] for r in rows), [r for r in rows if not r["match"]]


def test_records_keep_the_presented_order_and_never_guess(tmp_path):
    rs = read_llmbar(_write_folder(tmp_path / "bar"))
    by = {(j.judge, j.condition, j.pair_id, j.order): j for j in rs.judgments}
    # swap = True showed output 2 first; "Output (b)" with winner "1" is the second-presented output
    j = by[("J1", "Vanilla", "0", "swapped")]
    assert (j.verdict, j.choice, j.raw) == ("second", "1", "Output (b)")
    j = by[("J1", "Vanilla", "1", "swapped")]
    assert (j.verdict, j.choice) == ("first", "2")
    j = by[("J1", "Vanilla", "2", "original")]
    assert (j.verdict, j.raw) == ("none", "I cannot tell")
    m = by[("J1", "Metrics", "3", "original")]
    assert m.generated == ("1. Is it right?",) and m.generated_kinds == ("metrics",)
    s = by[("J1", "Swap", "0", "original")]
    assert s.choice == "1" and s.meta_value("synthesized") == "yes" and len(s.generated) == 2
    assert s.meta_value("first_round_swapped") == "2"
    assert by[("J1", "Swap", "1", "original")].meta_value("synthesized") is None
    r = {o: by[("J1", "Rating", "1", o)] for o in ("original", "swapped")}
    assert r["original"].verdict == r["swapped"].verdict == "tie"       # equal scores: a tie, not a position
    assert by[("J1", "Rating", "2", "original")].verdict == "none"       # "n/a" is not a score
    assert by[("J1", "Rating", "0", "swapped")].verdict == "second" and by[("J1", "Rating", "0", "swapped")].score == -5


def test_card_metrics_of_the_synthetic_folder(tmp_path):
    rs = read_llmbar(_write_folder(tmp_path / "bar"))
    res = analyze(rs, Settings(n_boot=50))
    m = res.cell("J1", "Vanilla")["metrics"]
    # labels 2,1,1,2,1,1; original winners 1,1,None,2,2,None; swapped 1,2,1,2,1,None
    assert m["accuracy_original"]["value"] == pytest.approx(2 / 6)
    assert m["accuracy_swapped"]["value"] == pytest.approx(3 / 6)
    assert m["both_correct"]["value"] == pytest.approx(1 / 6)
    assert m["positional_agreement"]["value"] == pytest.approx(2 / 6)   # pairs 0 and 3; None == None is no agreement
    # first/second verdicts as presented: original 1,1,2,2 -> first, first, second, second;
    # swapped winners 1,2,1,2,1 -> second, first, second, first, second
    assert m["first_position_rate"]["value"] == pytest.approx(4 / 9)
    stats = llmbar_statistics([j for j in rs.judgments if (j.judge, j.condition) == ("J1", "Vanilla")], rs.pairs)
    assert stats["equal"] == "3 / 6 = 50.0%"  # the publisher counts the pair with two missing winners as equal
    rating = res.cell("J1", "Rating")["metrics"]
    # scores 8>3 (label 2: wrong), 5=5 tie (credit 0.5, the project's rule), n/a none, 2<7 (label 2: right), 6=6 tie,
    # 9>1 right: (2 + 2 × 0.5) / 6; ties are 2 of 6 judgments (> 5%): the card gives the accuracy with ties at 0
    assert rating["accuracy"]["value"] == pytest.approx(3 / 6)
    assert rating["accuracy"]["tie_credit"] == 0.5 and rating["accuracy"]["n_tie_credited"] == 4  # 2 pairs × 2 orders
    assert rating["accuracy"]["at_other_tie_credit"] == {"tie_credit": 0.0, "value": pytest.approx(2 / 6)}
    assert "at_other_tie_credit" not in m["accuracy"]  # Vanilla: no tie
    assert rating["positional_agreement"]["value"] is None and "pointwise rating" in rating["positional_agreement"][
        "reason"]
    assert rating["first_position_rate"]["value"] is None


def test_publisher_check_summary_and_kappa_encoding(tmp_path):
    folder = _write_folder(tmp_path / "bar")
    rs = read_llmbar(folder)
    stats = llmbar_statistics([j for j in rs.judgments if (j.judge, j.condition) == ("J2", "Vanilla")], rs.pairs)
    # the publisher's κ: winner "1" -> 1, "2" -> 0, against labels 1/2 (not a κ between verdict and label)
    from sklearn.metrics import cohen_kappa_score
    y = [d["label"] for d in DATASET]
    yf = [1 if r[-1]["swap = False"]["winner"] == "1" else 0 for r in RESULTS[("J2", "Vanilla")]]
    assert stats["kappa_False"] == pytest.approx(cohen_kappa_score(yf, y), abs=1e-12)
    check = publisher_check(rs, analyze(rs, Settings(n_boot=20)))
    assert check["summary"].startswith("25 of 25 accuracy figures")


def test_bad_layout_names_file_and_line(tmp_path):
    folder = _write_folder(tmp_path / "bar", statistics=False)
    path = folder / "evaluators/J2/Vanilla/result.json"
    items = json.loads(path.read_text())
    items[3]["results"][0]["swap = True"]["winner"] = "B"
    path.write_text(json.dumps(items, indent=2))
    with pytest.raises(InputError) as err:
        read_llmbar(folder)
    text = str(err.value)
    line = [i for i, ln in enumerate(path.read_text().splitlines(), start=1) if ln.startswith("  {")][3]
    assert text.startswith(f"{path}:{line}:") and "winner 'B'" in text and "\n" not in text
    (folder / "dataset.json").write_text(json.dumps(DATASET[:5]))
    with pytest.raises(InputError, match="6 items but dataset.json has 5"):
        read_llmbar(folder)


def test_shipped_llmbar_statistics_reproduced_exactly():
    rs = read_llmbar(SHIPPED)
    rows = llmbar_check(rs)
    files = sorted(SHIPPED.glob("evaluators/*/*/statistics.json"))
    main = [r for r in rows if not r["key"].startswith("kappa")]
    assert len({(r["judge"], r["condition"]) for r in main}) == len(files) == 65
    assert len(main) == 5 * len(files)
    bad = [r for r in rows if not r["match"]]
    assert not bad, bad[:5]


def test_shipped_accuracy_is_the_publishers_correct_average():
    """Accuracy (mean over both orders, none wrong) is LLMBar's correct_average; for rating strategies once a
    tie earns half credit, which is what the publisher's position tie-break amounts to over the two orders."""
    rs = read_llmbar(SHIPPED, judges=["GPT-4", "ChatGPT"])
    strict, half = analyze(rs, Settings(n_boot=10, tie_credit=0.0)), analyze(rs, Settings(n_boot=10))
    for c_strict, c_half in zip(strict.cells, half.cells, strict=True):
        pub = json.loads((SHIPPED / "evaluators" / c_half["judge"] / c_half["condition"] / "statistics.json").read_text())
        want = float(pub["correct_average"].rstrip("%")) / 100
        assert c_half["metrics"]["accuracy"]["value"] == pytest.approx(want, abs=1e-12)
        if c_strict["n_tie"] == 0:
            assert c_strict["metrics"]["accuracy"]["value"] == pytest.approx(want, abs=1e-12)
        else:  # rating strategies: ties are ties here, not a position
            assert c_strict["condition"].startswith("Rating")
            assert c_strict["metrics"]["accuracy"]["value"] < want
            # the default card (ties at 0.5) shows the strict value beside it where ties are common
            alt = c_half["metrics"]["accuracy"].get("at_other_tie_credit")
            if alt is not None:
                assert alt["value"] == pytest.approx(c_strict["metrics"]["accuracy"]["value"], abs=1e-12)


def test_shipped_contrasts_rules_and_own_rubric_for_gpt4_and_chatgpt():
    """The importer's own contrasts (rules = Vanilla − Vanilla_NoRules, own rubric first = Metrics − Vanilla), one
    BH family per metric over GPT-4 and ChatGPT; Δ is the difference of the two cells' accuracies on the same 100
    pairs."""
    rs = read_llmbar(SHIPPED, judges=["GPT-4", "ChatGPT"], conditions=["Vanilla", "Vanilla_NoRules", "Metrics"])
    res = analyze(rs, Settings(n_boot=200, contrast_judges=("GPT-4", "ChatGPT")))
    acc = [r for r in res.contrasts if r["metric"] == "accuracy"]
    assert [(r["judge"], r["contrast"]) for r in acc] == [("GPT-4", "rules"), ("GPT-4", "own rubric first"),
                                                         ("ChatGPT", "rules"), ("ChatGPT", "own rubric first")]
    for r in acc:
        a = res.cell(r["judge"], r["a"])["metrics"]["accuracy"]["value"]
        b = res.cell(r["judge"], r["b"])["metrics"]["accuracy"]["value"]
        assert r["diff"] == pytest.approx(a - b, abs=1e-12) and r["n_pairs"] == 100 and r["family_size"] == 4
        assert r["low"] <= r["diff"] <= r["high"] and r["p_adjusted"] >= r["p_value"] and r["mde"] > 0
    # the publisher's correct_average for these six cells (none of them has a tie)
    want = {("GPT-4", "Vanilla"): 0.955, ("GPT-4", "Vanilla_NoRules"): 0.935, ("GPT-4", "Metrics"): 0.93,
            ("ChatGPT", "Vanilla"): 0.815, ("ChatGPT", "Vanilla_NoRules"): 0.79, ("ChatGPT", "Metrics"): 0.815}
    for (judge, cond), value in want.items():
        assert res.cell(judge, cond)["metrics"]["accuracy"]["value"] == pytest.approx(value, abs=1e-12)
    assert len([r for r in res.contrasts if r["metric"] == "positional_agreement"]) == 4
