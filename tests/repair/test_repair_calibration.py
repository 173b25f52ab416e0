"""Human calibration of the adversarial verifier (paper 000, App. B.5): sampling, sheet export, label
reading and the agreement / precision-recall report, on constructed data whose answers are known by hand."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest

from rubriclab.errors import InputError
from rubriclab.repair import (
    calibration_report,
    calibration_sample,
    export_sheet,
    read_labels,
    report_markdown,
    sampling_notes,
)
from rubriclab.repair._calibration import SHEET_COLUMNS

E, G = "EXPLOITING", "GENUINE"


# -- constructed audit outputs -------------------------------------------------------------------------------------


def _attack(criterion, attempt, *, high=True, verdict=E, score=None):
    score = score if score is not None else (8.0 if high else 4.0)
    return {"criterion": criterion, "attempt": attempt, "pair_id": f"p{attempt % 4}", "item_id": f"i{attempt % 4}",
            "strategy": "False Authority", "response": f"attack {criterion} #{attempt}", "score": score,
            "verdict": verdict, "exploiting": None if verdict is None else verdict == E,
            "high": high, "status": "ok", "error": None}


def _genuine(criterion, k, *, high=True, verdict=G):
    return {"criterion": criterion, "pair_id": f"p{k}", "item_id": f"i{k}", "response": f"chosen answer {k}",
            "score": 9.0 if high else 5.0, "verdict": verdict,
            "exploiting": None if verdict is None else verdict == E, "high": high, "status": "ok", "error": None}


PROMPTS = {f"p{k}": f"user prompt {k}" for k in range(4)}


def _pools(caps=None, n_base=(4, 4, 4)):
    caps = caps or {"a": 10, "b": 2, "c": 10}
    attacks = pd.DataFrame([_attack(c, i, verdict=E if i % 2 else G) for c, n in caps.items() for i in range(n)])
    base = pd.DataFrame([_genuine(c, k) for c, n in zip(caps, n_base, strict=True) for k in range(n)])
    return attacks, base


# -- sampling --------------------------------------------------------------------------------------------------------


def test_only_high_scorers_with_a_verdict_are_eligible_and_shortfall_is_reported():
    attacks = pd.DataFrame([
        _attack("a", 0), _attack("a", 1, verdict=G),            # eligible
        _attack("a", 2, high=False, verdict=None),             # low score
        _attack("b", 7, high=False, verdict=E),                # low score (a verdict does not make it eligible)
        _attack("a", 3, high=None, verdict=None, score=np.nan),  # judge failed
        _attack("a", 4, verdict=None), _attack("b", 5, verdict=None),  # high, verdict missing
        _attack("b", 6, verdict=E),                            # eligible
    ])
    base = pd.DataFrame([_genuine("a", 0), _genuine("a", 1, high=False, verdict=None), _genuine("b", 2, verdict=None)])
    sheet, key = calibration_sample(attacks, base, PROMPTS, n_adversarial=10, n_baseline=5, seed=3, source="premise")

    adv = key[key["pool"] == "adversarial"]
    assert sorted(adv["attempt"].tolist()) == [0, 1, 6]
    assert key[key["pool"] == "baseline"]["pair_id"].tolist() == ["p0"]
    info = key.attrs["sampling"]
    assert (info["adversarial"]["asked"], info["adversarial"]["got"], info["adversarial"]["shortfall"]) == (10, 3, 7)
    assert info["adversarial"]["n_high"] == 5 and info["adversarial"]["n_high_no_verdict"] == 2
    assert info["adversarial"]["n_eligible"] == 3
    assert (info["baseline"]["got"], info["baseline"]["n_high_no_verdict"]) == (1, 1)
    assert "asked 10, got 3, because only 3 high scorer(s)" in info["adversarial"]["note"]
    assert "2 high scorer(s) left out because the verifier verdict is missing" in info["adversarial"]["note"]
    notes = sampling_notes(key)
    assert len(notes) == 2 and notes[0].startswith("premise / adversarial: asked 10, got 3")
    assert set(key["verdict"]) <= {E, G} and len(sheet) == len(key) == 4


def test_stratification_is_as_equal_as_possible_per_criterion():
    attacks, base = _pools({"a": 10, "b": 2, "c": 10})
    _, key = calibration_sample(attacks, base, PROMPTS, n_adversarial=12, n_baseline=6, seed=0)
    adv = key[key["pool"] == "adversarial"]["criterion"].value_counts().to_dict()
    assert adv == {"a": 5, "b": 2, "c": 5}  # b is capped at its 2 rows; the rest is split evenly
    assert key[key["pool"] == "baseline"]["criterion"].value_counts().to_dict() == {"a": 2, "b": 2, "c": 2}

    for seed in range(5):  # an odd remainder goes to one criterion: counts differ by at most 1
        _, key = calibration_sample(attacks, base, PROMPTS, n_adversarial=11, n_baseline=7, seed=seed)
        adv = key[key["pool"] == "adversarial"]["criterion"].value_counts().to_dict()
        assert adv["b"] == 2 and sorted([adv["a"], adv["c"]]) == [4, 5]
        taken = key.attrs["sampling"]["adversarial"]["per_criterion"]
        assert {c: v["taken"] for c, v in taken.items()} == adv
        base_counts = sorted(key[key["pool"] == "baseline"]["criterion"].value_counts().tolist())
        assert base_counts == [2, 2, 3]


def test_sample_is_deterministic_under_row_shuffling_and_depends_on_seed():
    attacks, base = _pools({"a": 10, "b": 8, "c": 10})
    sheet1, key1 = calibration_sample(attacks, base, PROMPTS, n_adversarial=9, n_baseline=5, seed=7, source="s")
    shuffled_a = attacks.sample(frac=1.0, random_state=1).reset_index(drop=True)
    shuffled_b = base.sample(frac=1.0, random_state=2).reset_index(drop=True)
    sheet2, key2 = calibration_sample(shuffled_a, shuffled_b, PROMPTS, n_adversarial=9, n_baseline=5, seed=7,
                                      source="s")
    pd.testing.assert_frame_equal(sheet1, sheet2)
    pd.testing.assert_frame_equal(key1, key2)
    _, key3 = calibration_sample(attacks, base, PROMPTS, n_adversarial=9, n_baseline=5, seed=8, source="s")
    picked = set(zip(key1["criterion"], key1["attempt"].astype(object), key1["pair_id"], strict=True))
    picked3 = set(zip(key3["criterion"], key3["attempt"].astype(object), key3["pair_id"], strict=True))
    assert picked != picked3


def test_sheet_hides_pool_score_and_verdict_and_ids_do_not_encode_the_pool():
    attacks, base = _pools({"a": 6, "b": 6, "c": 6}, n_base=(4, 4, 4))
    # An attack and a genuine response with identical text, criterion and pair: only the pool differs.
    twin = _attack("a", 0)
    twin.update(response="chosen answer 0", pair_id="p0")
    attacks = pd.concat([attacks.iloc[1:], pd.DataFrame([twin])], ignore_index=True)
    sheet, key = calibration_sample(attacks, base, PROMPTS, n_adversarial=18, n_baseline=12, seed=1,
                                    criteria={"a": "cite real evidence"})
    assert list(sheet.columns) == list(SHEET_COLUMNS)
    for hidden in ("pool", "verdict", "score", "exploiting", "high", "strategy", "attempt", "source"):
        assert hidden not in sheet.columns
    assert (sheet["label"] == "").all() and (sheet["annotator"] == "").all()
    assert all(re.fullmatch(r"cal-[0-9a-f]{16}", s) for s in sheet["sample_id"])
    assert not sheet["sample_id"].str.contains("adv|base|attack|genuine", case=False).any()
    assert sheet["sample_id"].is_unique and list(sheet["sample_id"]) == list(key["sample_id"])
    twins = key[(key["pair_id"] == "p0") & (key["criterion"] == "a")
                & sheet["response"].eq("chosen answer 0").to_numpy()]
    assert set(twins["pool"]) == {"adversarial", "baseline"} and twins["sample_id"].is_unique
    # prompts and criterion text are filled from the mappings
    merged = sheet.merge(key, on="sample_id")
    assert (merged["prompt"] == merged["pair_id"].map(PROMPTS)).all()
    assert set(merged.loc[merged["criterion_x"] == "a", "criterion_text"]) == {"cite real evidence"}
    assert set(merged.loc[merged["criterion_x"] != "a", "criterion_text"]) == {""}
    # pools interleave: the sheet is not the adversarial block followed by the baseline block
    pools = key["pool"].tolist()
    assert pools != sorted(pools) and pools != sorted(pools, reverse=True)
    # the key carries what the operator needs
    adv = key[key["pool"] == "adversarial"]
    assert adv["attempt"].notna().all() and (adv["strategy"] == "False Authority").all()
    assert key[key["pool"] == "baseline"]["attempt"].isna().all()
    assert key["score"].ge(7).all() and set(key["verdict"]) == {E, G}


def test_sample_rejects_missing_prompt_and_missing_column():
    attacks, base = _pools()
    with pytest.raises(InputError, match="pair_id.*no prompt"):
        calibration_sample(attacks, base, {"p0": "x"}, n_adversarial=10, n_baseline=10, seed=0)
    with pytest.raises(InputError, match="field 'high'"):
        calibration_sample(attacks.drop(columns="high"), base, PROMPTS, n_adversarial=1, n_baseline=1, seed=0)


# -- export ------------------------------------------------------------------------------------------------------


def test_export_writes_sheet_key_readme(tmp_path):
    attacks, base = _pools()
    sheet, key = calibration_sample(attacks, base, PROMPTS, n_adversarial=6, n_baseline=3, seed=0)
    paths = export_sheet(sheet, key, tmp_path / "cal")
    assert {"sheet", "key", "readme"} <= set(paths)
    back = pd.read_csv(paths["sheet"], keep_default_na=False)
    assert list(back.columns) == list(SHEET_COLUMNS) and len(back) == 9
    assert "pool" in pd.read_csv(paths["key"]).columns
    readme = paths["readme"].read_text(encoding="utf-8")
    for phrase in ("EXPLOITING", "GENUINE", "one file per annotator", "`annotator`", "Do not change any other column"):
        assert phrase in readme
    with pytest.raises(InputError, match="field 'pool'"):
        export_sheet(sheet.assign(pool=key["pool"]), key, tmp_path / "leak")


# -- reading labels --------------------------------------------------------------------------------------------


def _write(path: Path, rows, header=("sample_id", "criterion", "prompt", "response", "label", "annotator")):
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_read_labels_long_form_aliases_and_empty(tmp_path):
    ids = {"s1", "s2", "s3"}
    a = _write(tmp_path / "a.csv", [("s1", "c", "p", "r", " e ", "ann_A"), ("s2", "c", "p", "r", "Exploit", "ann_A"),
                                    ("s3", "c", "p", "r", "", "")])
    b = _write(tmp_path / "bob.csv", [("s1", "c", "p", "r", "g", ""), ("s2", "c", "p", "r", "GENUINE", ""),
                                      ("s3", "c", "p", "r", "exploiting", "")])
    out = read_labels([a, b], sheet_ids=ids)
    got = {(r.sample_id, r.annotator): r.label for r in out.itertuples()}
    assert got == {("s1", "ann_A"): E, ("s2", "ann_A"): E, ("s1", "bob"): G, ("s2", "bob"): G, ("s3", "bob"): E}
    assert out.attrs["reading"]["n_empty"] == 1 and out.attrs["reading"]["n_labelled"] == 5


def test_bad_label_raises_with_file_physical_line_and_field(tmp_path):
    # The first row's response spans two physical lines, so row 3 of the sheet starts on line 4.
    p = _write(tmp_path / "ann.csv", [("s1", "c", "p", "line one\nline two", "E", "x"),
                                      ("s2", "c", "p", "r", "maybe", "x")])
    with pytest.raises(InputError) as exc:
        read_labels([p])
    err = exc.value
    assert (err.file, err.line, err.field) == (str(p), 4, "label")
    assert "EXPLOITING or GENUINE" in str(err) and "'maybe'" in str(err) and f"{p}:4: field 'label'" in str(err)


def test_unknown_sample_id_raises(tmp_path):
    p = _write(tmp_path / "ann.csv", [("s1", "c", "p", "r", "E", "x"), ("s9", "c", "p", "r", "G", "x")])
    with pytest.raises(InputError) as exc:
        read_labels([p], sheet_ids={"s1", "s2"})
    assert (exc.value.file, exc.value.line, exc.value.field) == (str(p), 3, "sample_id")
    assert "'s9'" in str(exc.value) and f"{p}:3: field 'sample_id'" in str(exc.value)
    assert len(read_labels([p], sheet_ids=None)) == 2  # without sheet_ids, ids are not checked


def test_duplicate_label_by_one_annotator_raises(tmp_path):
    p = _write(tmp_path / "ann.csv", [("s1", "c", "p", "r", "E", "x"), ("s1", "c", "p", "r", "E", "x")])
    with pytest.raises(InputError) as exc:
        read_labels([p])
    assert (exc.value.line, exc.value.field) == (3, "sample_id") and "labelled twice" in str(exc.value)
    # across files: two files that both say annotator "x"
    q = _write(tmp_path / "ann2.csv", [("s1", "c", "p", "r", "G", "x")])
    r = _write(tmp_path / "ann3.csv", [("s1", "c", "p", "r", "G", "x")])
    with pytest.raises(InputError, match=r"ann3\.csv:2: field 'sample_id'.*labelled twice.*ann2\.csv:2"):
        read_labels([q, r])


def test_missing_column_and_mixed_annotators_raise(tmp_path):
    p = _write(tmp_path / "ann.csv", [("s1", "E")], header=("sample_id", "verdict"))
    with pytest.raises(InputError) as exc:
        read_labels([p])
    assert exc.value.file == str(p) and exc.value.field == "label" and "missing column 'label'" in str(exc.value)
    m = _write(tmp_path / "mixed.csv", [("s1", "c", "p", "r", "E", "ann"), ("s2", "c", "p", "r", "G", "other")])
    with pytest.raises(InputError) as exc:
        read_labels([m])
    assert (exc.value.line, exc.value.field) == (3, "annotator")


# -- report on a hand-computed case ---------------------------------------------------------------------------

# sid: (pool, verdict, labels by A, B, C); "-" = not labelled. Majority by hand in the comment.
CASE = {
    "s0": ("adversarial", E, "EEE"),  # E -> TP
    "s1": ("adversarial", E, "EEG"),  # E -> TP
    "s2": ("adversarial", E, "GGE"),  # G -> FP
    "s3": ("adversarial", G, "EEG"),  # E -> FN
    "s4": ("adversarial", E, "EGE"),  # E -> TP
    "s5": ("adversarial", E, "EG-"),  # tie -> no ground truth
    "s6": ("baseline", G, "GGG"),     # G -> TN
    "s7": ("baseline", E, "GGG"),     # G -> FP
    "s8": ("baseline", G, "G--"),     # one label -> too few
    "s9": ("baseline", G, "---"),     # unlabelled
}


def _case():
    key = pd.DataFrame([{"sample_id": s, "pool": p, "verdict": v} for s, (p, v, _) in CASE.items()])
    rows = [{"sample_id": s, "annotator": ann, "label": E if x == "E" else G}
            for s, (_, _, labs) in CASE.items() for ann, x in zip("ABC", labs, strict=True) if x != "-"]
    matrix = np.array([[{"E": 1.0, "G": 0.0, "-": np.nan}[labs[i]] for _, _, labs in CASE.values()]
                       for i in range(3)])
    return pd.DataFrame(rows), key, matrix


def _wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_report_majority_confusion_and_metrics_by_hand():
    labels, key, _ = _case()
    rep = calibration_report(labels, key, n_boot=300, seed=1)
    c = rep["counts"]
    assert (c["n_samples"], c["n_labelled"], c["n_unlabelled"], c["n_too_few_labels"], c["n_ties"],
            c["n_majority"], c["n_majority_exploiting"], c["n_majority_genuine"]) == (10, 9, 1, 1, 1, 7, 4, 3)
    status = {r["sample_id"]: (r["status"], r["majority"]) for r in rep["samples"]}
    assert status["s5"] == ("tie", None) and status["s8"] == ("too_few_labels", None)
    assert status["s9"] == ("unlabelled", None) and status["s2"] == ("majority", G)

    v = rep["verifier"]["all"]
    assert v["confusion"] == {"TP": 3, "FP": 2, "FN": 1, "TN": 1} and v["n"] == 7
    assert v["precision"]["value"] == pytest.approx(3 / 5) and v["precision"]["n"] == 5
    assert v["recall"]["value"] == pytest.approx(3 / 4) and v["recall"]["n"] == 4
    assert v["f1"]["value"] == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))
    assert v["accuracy"]["value"] == pytest.approx(4 / 7)
    lo, hi = _wilson(3, 5)
    assert v["precision"]["ci"]["method"] == "Wilson score interval" and v["precision"]["ci"]["level"] == 0.95
    assert (v["precision"]["ci"]["low"], v["precision"]["ci"]["high"]) == (pytest.approx(lo), pytest.approx(hi))
    lo, hi = _wilson(3, 4)
    assert (v["recall"]["ci"]["low"], v["recall"]["ci"]["high"]) == (pytest.approx(lo), pytest.approx(hi))
    f1ci = v["f1"]["ci"]
    assert f1ci["method"] == "percentile bootstrap" and f1ci["n_boot"] == 300 and f1ci["n"] == 7
    assert 0 <= f1ci["low"] <= f1ci["high"] <= 1

    adv, base = rep["verifier"]["adversarial"], rep["verifier"]["baseline"]
    assert adv["confusion"] == {"TP": 3, "FP": 1, "FN": 1, "TN": 0}
    assert (adv["precision"]["value"], adv["recall"]["value"], adv["f1"]["value"]) == (0.75, 0.75, 0.75)
    assert base["confusion"] == {"TP": 0, "FP": 1, "FN": 0, "TN": 1}
    assert base["precision"]["value"] == 0.0 and base["f1"]["value"] == 0.0
    assert base["recall"]["value"] is None and base["recall"]["n"] == 0 and "TP + FN = 0" in base["recall"]["reason"]
    assert any("tied" in n for n in rep["notes"]) and any("fewer than 2" in n for n in rep["notes"])


def test_min_labels_one_turns_a_single_label_into_ground_truth():
    labels, key, _ = _case()
    rep = calibration_report(labels, key, n_boot=50, min_labels=1)
    assert rep["counts"]["n_too_few_labels"] == 0 and rep["counts"]["n_majority"] == 8
    assert rep["verifier"]["baseline"]["confusion"]["TN"] == 2  # s8: majority G (1 of 1), verdict G


def test_alpha_matches_krippendorff_package_and_hand_value():
    labels, key, matrix = _case()
    rep = calibration_report(labels, key, n_boot=300, seed=2)
    a = rep["alpha"]
    ref = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    # By hand (coincidence matrix over the 8 pairable samples): o_EE=6, o_GG=7, o_EG=o_GE=5, n=23,
    # n_E=11, n_G=12: α = 1 − (n−1)·(o_EG+o_GE) / (2·n_E·n_G) = 1 − 22·10/264 = 1/6.
    assert a["value"] == pytest.approx(ref) and a["value"] == pytest.approx(1 / 6)
    assert (a["level"], a["n_annotators"], a["n_samples"], a["n_pairable"]) == ("nominal", 3, 9, 8)
    ci = a["ci"]
    assert ci["method"] == "percentile bootstrap" and ci["level"] == 0.95 and ci["n_boot"] == 300
    assert ci["n"] == 8 and "sample" in ci["unit"] and ci["low"] <= ci["high"]

    pairs = {(p["a"], p["b"]): (p["n_agree"], p["n_overlap"]) for p in rep["pairwise_agreement"]}
    assert pairs == {("A", "B"): (6, 8), ("A", "C"): (4, 7), ("B", "C"): (3, 7)}


def test_alpha_is_one_under_perfect_agreement():
    key = pd.DataFrame({"sample_id": [f"s{i}" for i in range(6)], "pool": ["adversarial"] * 6,
                        "verdict": [E, G] * 3})
    labels = pd.DataFrame([{"sample_id": f"s{i}", "annotator": a, "label": E if i % 2 else G}
                           for i in range(6) for a in "ABC"])
    rep = calibration_report(labels, key, n_boot=100)
    assert rep["alpha"]["value"] == pytest.approx(1.0)
    assert all(p["agreement"] == 1.0 for p in rep["pairwise_agreement"])
    # every annotator says the same single label everywhere: α is undefined, and said so
    same = labels.assign(label=E)
    rep = calibration_report(same, key, n_boot=100)
    assert rep["alpha"]["value"] is None and "expected disagreement is 0" in rep["alpha"]["reason"]


def test_report_rejects_labels_for_unknown_samples():
    labels, key, _ = _case()
    bad = pd.concat([labels, pd.DataFrame([{"sample_id": "zz", "annotator": "A", "label": E}])])
    with pytest.raises(InputError, match="field 'sample_id'.*'zz'"):
        calibration_report(bad, key, n_boot=10)


def test_report_markdown_labels_every_interval():
    labels, key, _ = _case()
    md = report_markdown(calibration_report(labels, key, n_boot=200))
    assert "TP = 3" in md and "FP = 2" in md and "FN = 1" in md and "TN = 1" in md
    assert "95% Wilson score interval" in md and "n = 5" in md  # precision's interval and its n
    assert "95% percentile bootstrap" in md and "B = 200 resamples over samples" in md
    assert "Krippendorff's α (nominal) = **0.167**" in md and "3 annotators" in md
    assert "ties (no ground truth) | 1 |" in md and "undefined: TP + FN = 0" in md


def test_end_to_end_sample_export_fill_read_report(tmp_path):
    attacks, base = _pools({"a": 6, "b": 6, "c": 6})
    sheet, key = calibration_sample(attacks, base, PROMPTS, n_adversarial=6, n_baseline=3, seed=4)
    paths = export_sheet(sheet, key, tmp_path)
    truth = dict(zip(key["sample_id"], key["verdict"], strict=True))
    files = []
    for name in ("ann1", "ann2", "ann3"):
        filled = pd.read_csv(paths["sheet"], keep_default_na=False)
        filled["label"] = [truth[s][0].lower() for s in filled["sample_id"]]  # "e"/"g", everyone agrees
        filled["annotator"] = name
        files.append(tmp_path / f"sheet_{name}.csv")
        filled.to_csv(files[-1], index=False)
    labels = read_labels(files, sheet_ids=set(sheet["sample_id"]))
    rep = calibration_report(labels, key, n_boot=100)
    assert rep["counts"]["n_majority"] == 9 and rep["counts"]["n_ties"] == 0
    v = rep["verifier"]["all"]
    assert v["confusion"]["FP"] == v["confusion"]["FN"] == 0
    assert v["precision"]["value"] == v["recall"]["value"] == v["f1"]["value"] == 1.0
