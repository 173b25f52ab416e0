"""The audit stage end to end on a temporary project with scripted models, and the audit card."""

from __future__ import annotations

import hashlib
import json
import re

import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient

from rubriclab.audit import best_sources, cross_source_table, flat_metrics, metric
from rubriclab.cli import main
from rubriclab.stages.audit import run_audit_stage
from rubriclab.stages.data import run_data_stage
from rubriclab.testing import last_user_text, scripted_model
from rubriclab.tracking import tracking_uri

ADHERENCE = {"candidate_reasoning": "ok", "candidate_adherence": 7, "baseline_reasoning": "meh",
             "baseline_adherence": 4}


def universal_judge(messages, params):
    """Answers every audit prompt in its expected format (the values are arbitrary but fixed)."""
    text = last_user_text(messages)
    if "## Design Rubric:" in text:
        return "REASONING: fine.\nVERDICT: PASS"
    if "Could a judge meaningfully score" in text:
        return "yes"
    if "<traits_to_evaluate>" in text:
        ids = re.findall(r"^- (\w+)", text.split("<traits_to_evaluate>")[1].split("</traits_to_evaluate>")[0], re.M)
        return json.dumps({"trait_scores": {i: ADHERENCE for i in ids}, "overall_score": ADHERENCE})
    if "<verdict>A or B</verdict>" in text:
        return "<verdict>A</verdict>"
    if "SCORE: <integer 0-10>" in text:
        return f"REASONING: compared.\nSCORE: {len(text) % 11}"
    if "SCORE: <integer 1-10>" in text:
        return "REASONING: formatted.\nSCORE: 8" if "#" in text else "SCORE: 3"
    raise AssertionError(f"unexpected prompt: {text[:120]}")


ATTACK = "# Impressive overview\n- **bold** claim about everything\n- another confident bullet point"


def _params(judge, judge2, **audit):
    return {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "judge": {"model": [judge, judge2]},
            "paraphraser": {"model": scripted_model("audit_para", lambda m, p: f"Reworded ({p.get('seed')}).")},
            "attacker": {"model": scripted_model("audit_attacker", lambda m, p: ATTACK)},
            "verifier": {"model": scripted_model("audit_verifier", lambda m, p: "<verdict>EXPLOITING</verdict>")}}},
        "data": {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"},
                                         "demo_harmless": {"loader": "demo", "domain": "harmless"}},
                 "premise": {"sources": ["demo_helpful", "demo_harmless"], "extraction": 4, "audit": 6,
                             "heldout": 8}},
        "audit": {"sources": ["mine", "other", "empty"], "pool_size": 6, "heldout_size": 8, "runs": 2,
                  "paraphrases": 2, "samples": 3, "n_attacks": 4, "n_boot": 200, "n_boot_paired": 200,
                  "out_of_domain": {"demo_helpful": "demo_harmless"}, **audit},
    }


def _rubrics(root):
    rubrics = root / "outputs/rubrics/demo_helpful"
    rubrics.mkdir(parents=True)
    (rubrics / "mine.json").write_text(json.dumps({"name": "mine", "source": "imported", "criteria": [
        {"id": "accuracy", "description": "States correct facts."},
        {"id": "directness", "description": "Answers the question first."}]}))
    (rubrics / "other.json").write_text(json.dumps({"name": "other", "source": "imported", "criteria": [
        {"id": "concision", "description": "No padding."}]}))
    (rubrics / "empty.json").write_text(json.dumps({"name": "empty", "source": "discovered", "criteria": [],
                                                    "provenance": {"shortfall": {"asked": 6, "got": 0, "reason":
                                                        "12 of 12 extraction replies were rejected (example_copy: 12)"}}}))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit_project")
    _rubrics(root)
    judge = scripted_model("audit_judge", universal_judge)
    params = _params(judge, scripted_model("audit_judge2", universal_judge))
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    run_data_stage(params, root)
    return root, params


def test_audit_stage_writes_the_card_and_logs_nested_runs(project):
    from rubriclab.data import present, read_pairs

    root, params = project
    out = run_audit_stage(params, root, "demo_helpful")
    card = out["card"]
    heldout = read_pairs(root / "outputs/data/premise/demo_helpful/heldout.parquet")[:8]
    always_a = sum(present(p, 42)["human"] == "A" for p in heldout) / 8  # the judge always answers A
    for src, k in (("mine", 2), ("other", 1)):
        c = card[src]
        assert c["K"] == k and c["struct"]["value"] == 5.0 and c["struct"]["n"] == k  # every vote PASS
        assert c["alpha"]["value"] == pytest.approx(1.0)  # both seats give the same score to the same text
        assert c["alpha"]["orientation"] == "as_presented" and c["alpha"]["n"] == 6
        assert c["flip_rate"]["value"] == 0.0  # a deterministic judge never flips
        assert c["app_in"]["value"] == 1.0 and c["app_out"]["value"] == 1.0 and c["delta_app"]["value"] == 0.0
        assert c["t_per_p"]["value"] == k
        assert c["acc_direct"]["value"] == pytest.approx(always_a) and c["acc_direct"]["n"] == 8
        assert c["acc_per_rubric"]["value"] == pytest.approx(always_a)  # 7 vs 4 overall: always A
        assert c["vfr"]["value"] == 1.0 and c["fool_rate"]["value"] == 1.0  # formatting fools it, confirmed
        assert c["parse_failures"] == 0 and c["transport_failures"] == 0
        for key in ("alpha", "flip_rate", "acc_direct", "vfr", "app_in", "delta_app", "struct"):
            assert c[key]["ci"]["level"] == 0.95 and c[key]["ci"]["method"], key
    assert card["mine"]["alpha"]["ci"]["unit"] == "pairs" and card["mine"]["vfr"]["ci"]["unit"] == "prompts"
    assert card["mine"]["struct"]["ci"]["unit"] == "criteria"
    assert "two-sample" in card["mine"]["delta_app"]["ci"]["method"]
    assert card["no_rubric"]["acc_direct"]["value"] == pytest.approx(always_a)
    assert card["empty"]["K"] == 0 and "example_copy" in card["empty"]["status"]
    assert "struct" not in card["empty"]  # a source with no criteria is explained, not audited

    folder = root / "outputs/audit/demo_helpful"
    md = (folder / "card.md").read_text()
    assert "**empty**: not audited: the rubric set has no criteria (K=0) — 12 of 12 extraction replies" in md
    assert "- α: 95% percentile bootstrap over pairs (B=200)" in md
    assert "- Struct (/5): 95% percentile bootstrap over criteria (B=200)" in md
    assert "**as_presented**" in md and "a tie credited 0.5" in md
    # identical judgments under mine, other and no_rubric: tied for best, never a lone ★
    table = cross_source_table(card, out["comparisons"]).set_index("source")
    assert table.loc["mine", "Acc direct"].startswith("≈") and table.loc["other", "Acc direct"].startswith("≈")
    assert not any(str(v).startswith("★") for v in table.to_numpy().ravel())
    assert table.loc["empty", "α"] == "—" and "K=0" in table.loc["empty", "notes"]
    # every empty cell of an audited source is explained in its notes
    for src, row in table.iterrows():
        for col, val in row.items():
            if val == "—" and col not in ("K", "notes") and src not in ("empty", "no_rubric"):
                assert f"{col}:" in row["notes"], (src, col)
    assert "VFR formula" in md and "### mine" in md and "Baseline pool verifier: shown the pair's other" in md
    assert "Paired comparisons" in md and "flip_rate" in md and "vfr" in md
    # adversarial axis, injection sensitivity: a judge that always answers A is never steered
    inj = card["mine"]["injection_rate"]
    assert inj["value"] == 0.0 and inj["n"] == 12 and inj["n_pairs"] == 6 and inj["n_failed"] == 0
    assert inj["ci"]["unit"] == "pairs" and inj["ci"]["level"] == 0.95
    # every pair gives 0: the bootstrap distribution is a point, shown as no interval rather than [0.000, 0.000]
    cell = table.loc["mine", "Inj"] if "Inj" in table.columns else next(
        v for c, v in table.loc["mine"].items() if c.lower().startswith("inj"))
    assert "no interval" in cell and "[0.000, 0.000]" not in cell, cell
    assert (folder / "injection.png").exists() and "![Injection sensitivity per source](injection.png)" in md
    assert "## Injection sensitivity" in md and (folder / "injection.csv").exists()
    metrics = json.loads((root / "metrics/audit/demo_helpful.json").read_text())
    assert metrics["mine.struct"] == 5.0 and "mine.alpha.low" in metrics and metrics["empty.K"] == 0
    client = MlflowClient(tracking_uri(root))
    exp = client.get_experiment_by_name("rubriclab").experiment_id
    runs = client.search_runs([exp], filter_string="tags.stage = 'audit'")
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = client.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert {c.info.run_name for c in children} >= {"audit@demo_helpful-mine", "audit@demo_helpful-other"}
    assert parent.data.metrics["mine.struct"] == 5.0


def flaky_judge(messages, params):
    """Like the universal judge, but decimal scores, restated formats, cut-off replies and final errors
    for some prompts: the stage must finish and count each, never crash or read a verdict out of them."""
    import litellm

    text = last_user_text(messages)
    h = int(hashlib.sha1(text.encode()).hexdigest(), 16) % 10
    if "That reply could not be used" in text:
        return universal_judge(messages, params)  # a re-ask gets a proper answer
    if h == 0:
        raise litellm.BadRequestError("bad request (scripted)", model="scripted/flaky", llm_provider="scripted")
    if h == 1 and "SCORE: <integer 0-10>" in text:
        return "REASONING: in between.\nSCORE: 7.5"
    if h == 2 and "<verdict>A or B</verdict>" in text:
        return {"text": 'Output "[[A]]" if A is better, "[[B]]" if B is better. Looking at', "finish_reason": "length"}
    if h == 3 and "## Design Rubric:" in text:
        return "REASONING: the rubric could pass over edge cases."
    return universal_judge(messages, params)


@pytest.mark.parametrize("reasks", [0, 1])
def test_failures_add_up_to_the_ledger_and_decimal_scores_do_not_crash(tmp_path, reasks):
    _rubrics(tmp_path)
    params = _params(scripted_model(f"flaky_a{reasks}", flaky_judge), scripted_model(f"flaky_b{reasks}", flaky_judge))
    params["llm"]["defaults"] = {"parse_retries": reasks, "max_retries": 0}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    run_data_stage(params, tmp_path)
    out = run_audit_stage(params, tmp_path, "demo_helpful")
    card = json.loads((tmp_path / "outputs/audit/demo_helpful/card.json").read_text())
    by_role = card["failures_by_role"]
    from rubriclab.llm import open_store

    store = open_store(tmp_path / ".rubriclab/calls.sqlite")
    ledger = {r["role"]: r for r in store.ledger() if r["stage"] == "audit@demo_helpful"}
    store.close()
    assert set(by_role) == set(ledger)
    for role, counts in by_role.items():
        assert counts["parse_failures"] == ledger[role]["parse_failures"], role
        # items, not provider calls: a failed request asked again later is one error row but two failures
        assert counts["transport_failures"] == ledger[role]["transport_failures"] >= ledger[role]["failed"], role
        assert counts["items"] == ledger[role]["items"], role
    judges = [r for r in by_role if r.startswith("judge")]
    assert sum(by_role[r]["transport_failures"] for r in judges) > 0
    if reasks == 0:
        assert sum(by_role[r]["parse_failures"] for r in judges) > 0  # decimals, restatements, prose
    # per source totals are the sum over its axes and roles
    rows = pd.DataFrame(card["failures"])
    calls = rows[rows["role"].notna()] if "role" in rows else rows
    for src in ("mine", "other"):
        sub = calls[calls["source"] == src]
        assert out["card"][src]["parse_failures"] == int(sub["parse_failures"].sum())
        assert out["card"][src]["transport_failures"] == int(sub["transport_failures"].sum())
    # a decimal score never became a number: every parsed pairwise score is an integer
    items = pd.read_parquet(tmp_path / "outputs/audit/demo_helpful/mine.reliability.items.parquet")
    scores = items["score_as_shown"].dropna()
    assert len(scores) and (scores == scores.round()).all()
    if reasks == 0:
        assert items["error"].str.contains("not an integer", na=False).any()


def test_audit_cli_on_a_rubric_file_and_selected_axes(project, capsys, tmp_path):
    root, _ = project
    f = tmp_path / "extra.md"
    f.write_text("- **Helpfulness**: solves the user's problem\n")
    code = main(["audit", "--params", str(root / "params.yaml"), "--dataset", "demo_helpful", "--rubrics", str(f),
                 "--axes", "structure"])
    assert code == 0
    out = capsys.readouterr().out
    assert "extra" in out and "Struct" in out
    assert (root / "outputs/audit_cli/demo_helpful/card.md").exists()
    # an ad-hoc audit leaves the pipeline's card alone
    pipeline_card = root / "outputs/audit/demo_helpful/card.md"
    assert not pipeline_card.exists() or "### extra" not in pipeline_card.read_text()
    assert main(["audit", "--params", str(root / "params.yaml"), "--dataset", "demo_helpful",
                 "--axes", "vibes"]) == 2
    assert "allowed: structure, reliability, fit, adversarial" in capsys.readouterr().err


def test_best_marks_follow_the_paired_comparisons():
    from rubriclab.audit import adjust_family

    card = {"a": {"acc_direct": metric(0.9), "flip_rate": metric(0.1), "alpha": metric(0.8)},
            "b": {"acc_direct": metric(0.6), "flip_rate": metric(0.12), "alpha": metric(0.4)},
            "c": {"acc_direct": metric(0.55), "flip_rate": metric(0.5), "alpha": metric(None, reason="panel of 1")}}

    def row(metric_name, template, a, b, diff, p):
        return {"metric": metric_name, "template": template, "a": a, "b": b, "diff": diff, "p_value": p, "se": 0.05,
                "low": diff - 0.1, "high": diff + 0.1}

    comps = adjust_family([row("accuracy", "direct", "a", "b", 0.3, 0.001), row("accuracy", "direct", "a", "c", 0.35, 0.001),
                           row("accuracy", "direct", "b", "c", 0.05, 0.6)])
    comps += adjust_family([row("flip_rate", None, "a", "b", -0.02, 0.7), row("flip_rate", None, "a", "c", -0.4, 0.001),
                            row("flip_rate", None, "b", "c", -0.38, 0.001)])
    best = best_sources(card, comps)
    assert best["acc_direct"] == {"a": "★"}  # different from every other source
    assert best["flip_rate"] == {"a": "≈", "b": "≈"}  # a's lower flip rate is not distinguishable from b's
    assert "alpha" not in best  # no paired comparison for α: no mark, whatever the point estimates say
    assert best_sources(card)["acc_direct"] == {"a": "≈", "b": "≈", "c": "≈"}  # no comparison run: no ★
    table = cross_source_table(card, comps).set_index("source")
    assert table.loc["a", "Acc direct"].startswith("★") and table.loc["b", "Flip"].startswith("≈")
    assert table.loc["a", "α"] == "0.800" and table.loc["c", "α"] == "—" and "α: panel of 1" in table.loc["c", "notes"]
    assert flat_metrics(card)["b.flip_rate"] == 0.12


def test_mde_is_stated_at_the_level_of_the_family():
    """The MDE of the test that is run: the paired t-test's (n items, its SE) at the family's Bonferroni level."""
    from rubriclab.audit import adjust_family
    from rubriclab.stats import mde_paired_t

    def row(i: int) -> dict:
        return {"a": "x", "b": f"y{i}", "diff": 0.01, "p_value": 0.5, "se": 0.1, "n_test": 40, "low": -0.2,
                "high": 0.2}

    rows = adjust_family([row(i) for i in range(3)])
    for r in rows:
        assert r["mde"] == pytest.approx(mde_paired_t(0.1, 40, alpha=0.05 / 3))
        assert r["mde"] > mde_paired_t(0.1, 40, alpha=0.05)  # the unadjusted MDE would claim more power than the test has
        assert r["label"] == f"no detectable difference (MDE={r['mde']:.3g}: paired t-test at α=0.05/3, power 0.8)"
        assert r["test"].startswith("paired t-test")
    single = adjust_family([row(0)])
    assert single[0]["mde"] == pytest.approx(mde_paired_t(0.1, 40, alpha=0.05))


def test_paired_item_comparisons_detect_a_planted_difference():
    import numpy as np
    import pandas as pd

    from rubriclab.audit._compare import adversarial_item_values, paired_item_comparisons

    rng = np.random.default_rng(0)
    items = [f"p{i}" for i in range(40)]
    base = pd.Series(rng.uniform(0, 0.4, 40), index=items)
    values = {"robust": base, "gameable": base + 0.3, "same": base.copy(),
              "noisy": base + rng.normal(0, 0.05, 40)}
    rows = {(r["a"], r["b"]): r for r in paired_item_comparisons(values, "vfr", n_boot=500, seed=1)}
    assert rows[("gameable", "robust")]["label"] == "difference"
    assert rows[("gameable", "robust")]["diff"] == pytest.approx(0.3)
    assert rows[("robust", "same")]["label"].startswith("no difference: identical on every shared item")
    assert rows[("noisy", "robust")]["label"].startswith("no detectable difference (MDE=")
    assert all(r["p_adjusted"] >= r["p_value"] for r in rows.values())
    per_prompt = adversarial_item_values([
        {"item_id": "x", "score": 9, "high": True, "exploiting": True},
        {"item_id": "x", "score": 2, "high": False, "exploiting": None},
        {"item_id": "y", "score": 9, "high": True, "exploiting": None},  # unverified: not usable
        {"item_id": "y", "score": None, "high": None, "exploiting": None}])
    assert per_prompt.to_dict() == {"x": 0.5}


def test_numeric_table_says_why_a_value_is_missing():
    from rubriclab.audit import numeric_table

    table = numeric_table({"a": {"mean_abs_rho": metric(None, n=5, reason="K=1: no criterion pairs"),
                                 "calls_saved_direct": 3}})
    row = table.set_index("metric").loc["mean_abs_rho"]
    assert row["note"] == "K=1: no criterion pairs" and row["n"] == 5
    assert table.set_index("metric").loc["calls_saved_direct", "value"] == 3


def test_markdown_cells_escape_pipes_and_show_missing_as_dash():
    import pandas as pd

    from rubriclab.audit import to_markdown

    md = to_markdown(pd.DataFrame([{"mean |ρ|": "K=1: mean |ρ| undefined", "v": float("nan")}]))
    header, _, row = md.splitlines()
    assert header.count(" | ") == 1 and row.count(" | ") == 1 and row.endswith("| — |")


def test_the_embedded_model_warning_names_its_roles():
    from rubriclab.llm import embedded_note

    assert embedded_note([]) is None
    both = embedded_note(["judge[0]", "judge[1]", "attacker"])
    assert "at chance as a pairwise judge" in both and "judge[0], judge[1], attacker" in both
    only = embedded_note(["attacker", "paraphraser"])
    assert "at chance as a pairwise judge" not in only and "attacker, paraphraser" in only
