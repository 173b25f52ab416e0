"""Structure, reliability and structural-fit axes with scripted judges whose behaviour is known:
the audit's numbers must move the way they must."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pandas as pd
import pytest

from rubriclab.audit import AuditContext, audit_applicability, audit_reliability, audit_score_structure, audit_structure
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import Criterion, RubricSet
from rubriclab.testing import DISCOVER_ATTRS as ATTRS
from rubriclab.testing import last_user_text, planted_pairs, scripted_model


def _h(*parts) -> int:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest(), 16)


RUBRIC = RubricSet(name="planted", source="test", criteria=tuple(
    Criterion(id=a, description=f"Judges the {a} of the response.") for a in ("accuracy", "safety", "examples")))


def keyword_judge(messages, params):
    """Pairwise 0-10: follows the criterion's keyword in both responses; 5 when it is absent."""
    text = last_user_text(messages)
    crit = re.search(r"## Rubric: (\S+)", text).group(1)
    a = re.search(r"## Response A \(Candidate\):\n(.*?)\n\n## Response B", text, re.S).group(1)
    m = re.search(rf"(GOOD|BAD)_{crit}", a)
    score = 5 if not m else (9 if m.group(1) == "GOOD" else 1)
    return f"REASONING: checked {crit}.\nSCORE: {score}"


def random_judge(tag):
    def script(messages, params):
        return f"SCORE: {_h(tag, last_user_text(messages), params.get('seed')) % 11}"
    return script


def _ctx(gateway, judges, **kw):
    return AuditContext(gateway=gateway, judges=judges, n_boot=300, progress=False, **kw)


def _panel(script_for, name):
    return [RoleSpec(name=f"judge[{i}]", model=scripted_model(f"{name}{i}", script_for(i))) for i in range(3)]


def test_alpha_flip_and_paraphrase_move_the_right_way(gateway):
    pairs = planted_pairs(30, seed=3)
    para = RoleSpec(name="paraphraser", model=scripted_model(
        "para", lambda m, p: "Rates " + re.search(r"the (\w+) of", last_user_text(m)).group(1) + f" v{p.get('seed')}"))
    good = audit_reliability(RUBRIC, pairs, _ctx(gateway, _panel(lambda i: keyword_judge, "kw"), paraphraser=para),
                             runs=4, paraphrases=3)
    noisy = audit_reliability(RUBRIC, pairs, _ctx(gateway, _panel(lambda i: random_judge(i), "rnd"),
                                                 paraphraser=para), runs=4, paraphrases=3)
    g, n = good["metrics"], noisy["metrics"]
    assert g["alpha"]["value"] == pytest.approx(1.0)
    assert abs(n["alpha"]["value"]) < 0.3
    assert g["alpha"]["n"] == 30  # the CI resamples pairs, not judgments
    assert g["alpha"]["low"] <= g["alpha"]["value"] <= g["alpha"]["high"]
    assert g["flip_rate"]["value"] == 0.0 and n["flip_rate"]["value"] > 0.5
    assert g["paraphrase_rho"]["value"] > 0.9 and abs(n["paraphrase_rho"]["value"]) < 0.4
    assert good["counts"]["reliability_failed_scores"] == 0


def test_structure_majority_and_struct_score(gateway):
    def strict(messages, params):
        text = last_user_text(messages)
        fails = "## Design Rubric: Atomic" in text and " and " in text.split("## Rubric Definition:")[1].split("##")[0]
        return f"REASONING: ...\nVERDICT: {'FAIL' if fails else 'PASS'}"

    rubric = RubricSet(name="s", source="test", criteria=(
        Criterion(id="clear_and_concise", description="The response is clear and concise."),
        Criterion(id="accuracy", description="The response states correct facts.")))

    def dissent(messages, params):  # one panel seat always says FAIL: the majority still passes
        return "VERDICT: FAIL"

    judges = [RoleSpec(name="j0", model=scripted_model("st0", strict)),
              RoleSpec(name="j1", model=scripted_model("st1", strict)),
              RoleSpec(name="j2", model=scripted_model("st2", dissent))]
    res = audit_structure(rubric, _ctx(gateway, judges))
    per = {r["criterion"]: r for r in res["per_criterion"]}
    assert per["clear_and_concise"]["struct"] == 4 and not per["clear_and_concise"]["atomic"]
    assert per["accuracy"]["struct"] == 5
    assert res["metrics"]["struct"]["value"] == pytest.approx(4.5)
    assert res["metrics"]["struct"]["n"] == 2


def test_applicability_and_score_structure(gateway):
    pairs = planted_pairs(24, seed=5)
    yes_in = RoleSpec(name="judge", model=scripted_model("app", lambda m, p: "yes" if "Question" in
                                                            last_user_text(m) else "no"))
    ctx = _ctx(gateway, [yes_in])
    res = audit_applicability(RUBRIC, {p.id: p.prompt for p in pairs}, {f"o{i}": f"Other topic {i}" for i in range(10)},
                              ctx)
    m = res["metrics"]
    assert m["app_in"]["value"] == 1.0 and m["app_out"]["value"] == 0.0
    assert m["delta_app"]["value"] == 1.0 and m["t_per_p"]["value"] == 3.0

    judges = _panel(lambda i: keyword_judge, "kw")
    rel = audit_reliability(RUBRIC, pairs, _ctx(gateway, judges), axes=("alpha",))
    st = audit_score_structure(RUBRIC, rel["scores"], _ctx(gateway, judges))["metrics"]
    # keyword scores predict the human label whenever the criterion is present: BT fits well above chance
    assert st["bt_cv_accuracy"]["value"] > 0.7


def _scores(columns: dict[str, list[float]], chosen_as: list[str]) -> pd.DataFrame:
    """A rater0 score frame from chosen-oriented scores per criterion (as shown = 10 - s when chosen is B)."""
    rows = []
    for cid, col in columns.items():
        for i, (s, side) in enumerate(zip(col, chosen_as)):
            rows.append({"who": "rater0", "criterion": cid, "pair_id": f"p{i:02d}", "score": float(s),
                         "score_as_shown": float(s if side == "A" else 10 - s), "chosen_shown_as": side})
    return pd.DataFrame(rows)


def _rubric(ids):
    return RubricSet(name="x", source="test", criteria=tuple(Criterion(id=c, description=f"{c}.") for c in ids))


def test_effdim_known_answers(gateway):
    sides = ["A", "B"] * 8
    # three criteria that move together: one dimension, |ρ| = 1
    same = [3, 7, 4, 8, 2, 6, 5, 9, 1, 7, 3, 8, 2, 6, 4, 9]
    st = audit_score_structure(_rubric("abc"), _scores({"a": same, "b": same, "c": same}, sides), _ctx(gateway, []))
    m = st["metrics"]
    assert m["effdim"]["value"] == pytest.approx(1.0) and m["effdim_ratio"]["value"] == pytest.approx(1 / 3)
    assert m["mean_abs_rho"]["value"] == pytest.approx(1.0)
    # three orthogonal ±2 patterns with equal variance: the spectrum is flat, EffDim = K, no correlation
    h = [[1, 1, 1, 1, -1, -1, -1, -1], [1, 1, -1, -1, 1, 1, -1, -1], [1, -1, 1, -1, 1, -1, 1, -1]]
    cols = {c: [5 + 2 * v for v in row * 2] for c, row in zip("abc", h)}
    m = audit_score_structure(_rubric("abc"), _scores(cols, sides), _ctx(gateway, []))["metrics"]
    assert m["effdim"]["value"] == pytest.approx(3.0) and m["effdim_ratio"]["value"] == pytest.approx(1.0)
    assert m["mean_abs_rho"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert m["effdim"]["ci"]["unit"] == "pairs" and m["effdim"]["n"] == 16


def test_bt_known_answers(gateway):
    sides = ["A", "B", "B", "A"] * 6
    signal = [8] * 24  # chosen always scores 8 oriented: as shown 8 (A) or 2 (B) predicts the label exactly
    flat = [5] * 24  # no information: as shown always 5
    one = audit_score_structure(_rubric("abc"), _scores({"a": signal, "b": flat, "c": flat}, sides),
                                _ctx(gateway, []))
    m = one["metrics"]
    assert m["bt_cv_accuracy"]["value"] == 1.0
    assert m["bt_weight_entropy"]["value"] == pytest.approx(0.0, abs=1e-6)  # all weight on one criterion
    assert abs(one["bt_coef"]["a"]) > 0 and one["bt_coef"]["b"] == pytest.approx(0.0, abs=1e-9)
    assert "CV folds" in m["bt_cv_accuracy"]["ci"]["method"] and m["bt_cv_accuracy"]["ci"]["level"] is None
    two = audit_score_structure(_rubric("abc"), _scores({"a": signal, "b": signal, "c": flat}, sides),
                                _ctx(gateway, []))["metrics"]
    # two equally informative criteria share the weight: H = log 2 / log 3
    assert two["bt_weight_entropy"]["value"] == pytest.approx(np.log(2) / np.log(3), abs=1e-3)


def test_unparseable_scores_are_counted_not_coerced(gateway):
    pairs = planted_pairs(10, seed=9)
    broken = RoleSpec(name="judge", parse_retries=0, model=scripted_model(
        "broken", lambda m, p: "SCORE: 7" if _h(last_user_text(m)) % 2 else "I'd say about seven"))
    res = audit_reliability(RUBRIC, pairs, _ctx(gateway, [broken]), runs=2, axes=("flip",))
    assert res["counts"]["reliability_failed_scores"] > 0
    parsed = res["scores"]["score"].dropna()
    assert set(parsed.unique()) <= {7.0, 3.0}  # 7 as shown, 10 - 7 when chosen was shown as B
    assert ATTRS  # planted attributes are shared with the discovery tests
