"""Planted truths the repair method can fail: an operator that lowers VFR only on dev prompts (acceptance must
follow dev, the report must show held-out, the search must not touch held-out), the audit's attack checks
reaching every VFR the repair measures, and paired intervals for Δα and ΔVFR."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from rubriclab.audit import AuditContext, audit_adversarial, run_audit
from rubriclab.errors import ConfigError
from rubriclab.llm import Gateway, SQLiteCallStore
from rubriclab.repair import RepairSettings, paired_delta_alpha, paired_delta_vfr, report_heldout, search
from rubriclab.rubrics import Criterion, RubricSet, load_rubric_file
from rubriclab.stages import repair as repair_stage
from rubriclab.stats import two_sample_bootstrap
from rubriclab.testing import MARK, attacker, repair_world, scripted_model, world_pairs
from tests.repair.test_repair_stage import ORIGINAL, _params, _write_project

GATE = "applicability_gate"


@pytest.fixture(scope="module")
def overfit(tmp_path_factory):
    """The stage on a world where ``applicability_gate`` closes every attack on dev prompts only; every call
    is logged, and the calls made inside ``search`` are kept apart."""
    root = tmp_path_factory.mktemp("repair_overfit")
    (root / "params.yaml").write_text("{}\n")
    _write_project(root)
    log: list[tuple[str, str]] = []
    roles = repair_world(tag="overfit", dev_only=GATE, log=log)
    params = _params(roles)
    params["repair"].update(sources=["mine"], operators=["do_not_reward", GATE],
                            sweep={"deltas": [0.0, ".inf"], "candidates": [2]})
    during: list[tuple[str, str]] = []
    from rubriclab.repair import search as real  # the sweep (rubriclab.repair.sweep_source) calls it

    def watched(*args, **kwargs):
        start = len(log)
        try:
            return real(*args, **kwargs)
        finally:
            during.extend(log[start:])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("rubriclab.repair._sweep.search", watched)
        out = repair_stage.run_repair_stage(params, root, "demo_helpful")
    return {"root": root, "out": out, "log": log, "during": during}


def test_acceptance_follows_dev_when_an_operator_helps_only_on_dev(overfit):
    out = overfit["root"] / "outputs/repair/demo_helpful"
    cands = pd.read_csv(out / "mine/candidates.csv").dropna(subset=["vfr_dev"]).set_index("operators")
    # on dev the gate closes every attack, do_not_reward half of them
    assert cands.loc[GATE, "vfr_dev"] == 0.0 and cands.loc["do_not_reward", "vfr_dev"] == 0.5
    for label in ("constrained", "unconstrained"):
        text = load_rubric_file(out / f"mine.robust_{label}.json").get("helpful").description
        assert MARK[GATE] in text and MARK["do_not_reward"] not in text, label


def test_curve_reports_the_heldout_value_not_the_dev_one(overfit):
    curve = pd.read_csv(overfit["root"] / "outputs/repair/demo_helpful/mine/curve.csv")
    named = curve.dropna(subset=["point"]).set_index("point")
    for label in ("constrained", "unconstrained"):
        # the gate does nothing on held-out prompts: VFR stays at the original's 1.0, not dev's 0.0
        assert named.loc[label, "vfr_heldout"] == 1.0 and named.loc[label, "delta_vfr"] == 0.0
    assert overfit["out"]["metrics"]["mine.original.vfr_heldout"] == 1.0


def test_search_makes_no_call_on_a_heldout_pair(overfit):
    during, log = overfit["during"], overfit["log"]
    judged = [text for who, text in during if who.startswith("judge")]
    assert any("Question dev" in t for t in judged)  # the search did judge dev pairs
    assert not [who for who, text in during if "Question held" in text]
    # held-out pairs were judged, but only for the report, after the search
    assert any("Question held" in text for who, text in log if who.startswith("judge"))


def _half_short_attacker(messages, params):
    """Even attempts: the world's attack. Odd ones: a 6-word genuine reply (J = 8, verifier GENUINE), which the
    default attack check keeps (≥ 5 words) and ``min_words: 8`` rejects."""
    text = attacker(messages, params)
    i = int(re.search(r"variant-(\d+)", text).group(1))
    return text if i % 2 == 0 else f"a short plain honest answer (variant-{i})."


@pytest.fixture
def checked(tmp_path):
    roles = repair_world(tag=f"ac{tmp_path.name[-6:]}")
    scripted_model(roles["attacker"].model.split("/", 1)[1], _half_short_attacker)
    gw = Gateway(SQLiteCallStore(tmp_path / "calls.sqlite"), stage="test", progress=False)
    ctx = AuditContext(gateway=gw, judges=roles["judges"], attacker=roles["attacker"], verifier=roles["verifier"],
                       n_boot=200, progress=False)
    rs = RubricSet(name="w", source="imported", criteria=(Criterion(id="helpful", description=ORIGINAL),))
    audit_cfg = {"runs": 2, "n_attacks": 4, "attack_check": {"min_words": 8}}
    settings = RepairSettings.of({"n_attacks": 4, "operators": ["do_not_reward"], "max_operators": 1},
                                          audit_cfg)
    return {"roles": roles, "ctx": ctx, "rs": rs, "audit_cfg": audit_cfg, "settings": settings,
            "pool": world_pairs(4, "pool"), "dev": world_pairs(6, "dev"), "held": world_pairs(6, "held")}


def test_repair_measures_vfr_under_the_audits_attack_check(checked):
    w = checked
    card = run_audit({"w": w["rs"]}, pool=w["pool"], heldout=w["held"], ood=[], ctx=w["ctx"],
                     cfg={**w["audit_cfg"], "injection": False}, axes=("adversarial",))["card"]["w"]
    # the check rejects the short genuine replies, so every attack left is a verified false accept
    assert card["vfr"]["value"] == 1.0
    assert audit_adversarial(w["rs"], w["pool"], w["ctx"], n_attacks=4)["metrics"]["vfr"]["value"] == 0.5
    found = search(w["rs"], pool=w["pool"], dev=w["dev"], ctx=w["ctx"], refiner=w["roles"]["refiner"],
                   n_candidates=1, settings=w["settings"], source="w")
    assert found["pool"]["adversarial"]["vfr"] == card["vfr"]  # the original VFR the card shows, interval and n
    assert found["criteria"]["helpful"]["original"]["vfr"] == 1.0  # dev, under the same check
    held = report_heldout(w["rs"], w["held"], w["ctx"], w["settings"], source="w")
    assert held["vfr"]["value"] == 1.0 and held["counts"]["attacks_rejected"] == 2


def test_attack_check_typo_is_refused_before_any_call():
    with pytest.raises(ConfigError, match=r"audit\.attack_check.*min_word"):
        RepairSettings.of({}, {"attack_check": {"min_word": 8}})
    with pytest.raises(ConfigError, match="expected a number"):
        RepairSettings.of({}, {"attack_check": {"min_words": "eight"}})
    assert RepairSettings.of({}, {}).attack_bounds is None


def _attacks(confirmed_per_prompt: list[int], per_prompt: int = 4, prefix: str = "q") -> list[dict]:
    """Attack rows (one criterion): on prompt i, the first ``confirmed_per_prompt[i]`` attacks score 9 and are
    verified EXPLOITING, the rest score 3."""
    return [{"criterion": "c", "item_id": f"{prefix}{i}", "score": 9.0 if a < n else 3.0, "high": a < n,
             "exploiting": True if a < n else None}
            for i, n in enumerate(confirmed_per_prompt) for a in range(per_prompt)]


def test_paired_delta_vfr_is_narrow_where_separate_resampling_is_not():
    # 20 prompts the judge always falls for, 20 it never does; the repair closes one attack in four on the first
    before = _attacks([4] * 20 + [0] * 20)
    after = _attacks([3] * 20 + [0] * 20)
    kw = {"n_boot": 2000, "confidence": 0.95, "seed": 7}
    paired = paired_delta_vfr(before, after, ["c"], **kw)
    # the same statistic with the prompts resampled separately for each side (what two bootstraps give)
    unpaired = paired_delta_vfr(before, _attacks([3] * 20 + [0] * 20, prefix="other"), ["c"], **kw)
    assert paired["value"] == pytest.approx(-0.125) and unpaired["value"] == pytest.approx(-0.125)
    assert paired["high"] < 0 and unpaired["low"] < 0 < unpaired["high"]
    assert paired["high"] - paired["low"] < (unpaired["high"] - unpaired["low"]) / 3
    assert paired["n"] == 40
    assert paired["ci"] == {"method": "paired percentile bootstrap", "level": 0.95, "unit": "prompts",
                            "resamples": 2000}
    two = two_sample_bootstrap(np.r_[[1.0] * 20, [0.0] * 20], np.r_[[0.75] * 20, [0.0] * 20], n_resamples=2000,
                               seed=7)
    assert two["low"] < 0 < two["high"]  # the project's unpaired helper agrees: 0 not excluded


def _ratings(flip_every: int) -> pd.DataFrame:
    rows = []
    for i in range(30):
        s = [2, 8, 3, 7, 1, 9][i % 6]
        t = 10 - s if i % flip_every == 0 else s  # rater1 reads some pairs the other way round
        rows += [{"who": who, "criterion": "c", "pair_id": f"p{i}", "score": float(v), "score_as_shown": float(v)}
                 for who, v in (("rater0", s), ("rater1", t))]
    return pd.DataFrame(rows)


def test_paired_delta_alpha_cancels_what_both_sides_share():
    before, after = _ratings(4), _ratings(4)  # equal ratings, distinct objects: the bootstrap runs
    kw = {"n_boot": 500, "confidence": 0.9, "seed": 3}
    paired = paired_delta_alpha(before, after, "score", **kw)
    unpaired = paired_delta_alpha(before, after.assign(pair_id="x" + after["pair_id"]), "score", **kw)
    assert paired["value"] == 0.0 and paired["low"] == paired["high"] == 0.0 and paired["n"] == 30
    assert unpaired["low"] < -0.1 and unpaired["high"] > 0.1
    assert paired["ci"]["method"] == "paired percentile bootstrap" and paired["ci"]["level"] == 0.9
    assert paired["ci"]["unit"] == "pairs"
    # a real change: α(after) − α(before) is the difference of the two sets' α, its interval around it
    changed = paired_delta_alpha(before, _ratings(10), "score", **kw)
    assert changed["low"] <= changed["value"] <= changed["high"] and changed["value"] > 0


def test_stage_states_method_level_and_n_of_every_delta_interval(overfit):
    out = overfit["root"] / "outputs/repair/demo_helpful"
    curve = pd.read_csv(out / "mine/curve.csv")
    for name, unit in (("delta_alpha", "pairs"), ("delta_vfr", "prompts")):
        assert set(curve[f"{name}_ci"]) == {f"95% paired percentile bootstrap over {unit} (B=200)"}
        assert (curve[f"{name}_low"] <= curve[name]).all() and (curve[name] <= curve[f"{name}_high"]).all()
    assert (curve["delta_vfr_n"] == curve["vfr_n"]).all() and (curve["delta_alpha_n"] == curve["alpha_n"]).all()
    assert set(curve["vfr_ci"]) == {"95% percentile bootstrap over prompts (B=200)"}
    summary = (out / "summary.md").read_text()
    assert "ΔVFR: 95% paired percentile bootstrap over prompts (B=200), n=4" in summary
    assert overfit["out"]["metrics"]["mine.constrained.delta_vfr_low"] == 0.0
