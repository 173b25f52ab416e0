"""The audit stage end to end on a temporary project with scripted models, and the audit card."""

from __future__ import annotations

import json
import re

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


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit_project")
    rubrics = root / "outputs/rubrics/demo_helpful"
    rubrics.mkdir(parents=True)
    (rubrics / "mine.json").write_text(json.dumps({"name": "mine", "source": "imported", "criteria": [
        {"id": "accuracy", "description": "States correct facts."},
        {"id": "directness", "description": "Answers the question first."}]}))
    (rubrics / "other.json").write_text(json.dumps({"name": "other", "source": "imported", "criteria": [
        {"id": "concision", "description": "No padding."}]}))
    judge = scripted_model("audit_judge", universal_judge)
    params = {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "judge": {"model": [judge, scripted_model("audit_judge2", universal_judge)]},
            "paraphraser": {"model": scripted_model("audit_para", lambda m, p: f"Reworded ({p.get('seed')}).")},
            "attacker": {"model": scripted_model("audit_attacker", lambda m, p: "# Impressive\n- **bold** claim")},
            "verifier": {"model": scripted_model("audit_verifier", lambda m, p: "<verdict>EXPLOITING</verdict>")}}},
        "data": {"seed": 42, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"},
                                         "demo_harmless": {"loader": "demo", "domain": "harmless"}},
                 "premise": {"sources": ["demo_helpful", "demo_harmless"], "extraction": 4, "audit": 6,
                             "heldout": 8}},
        "audit": {"sources": ["mine", "other"], "pool_size": 6, "heldout_size": 8, "runs": 2, "paraphrases": 2,
                  "samples": 3, "n_attacks": 4, "n_boot": 200, "n_boot_paired": 200,
                  "out_of_domain": {"demo_helpful": "demo_harmless"}},
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    run_data_stage(params, root)
    return root, params


def test_audit_stage_writes_the_card_and_logs_nested_runs(project):
    root, params = project
    out = run_audit_stage(params, root, "demo_helpful")
    card = out["card"]
    for src in ("mine", "other"):
        for key in ("struct", "alpha", "flip_rate", "paraphrase_rho", "app_in", "app_out", "delta_app", "effdim",
                    "acc_direct", "acc_per_rubric", "vfr", "fool_rate"):
            assert key in card[src], (src, key)
            assert card[src][key]["n"] is not None
    assert card["mine"]["struct"]["value"] == 5.0
    assert card["mine"]["vfr"]["value"] == 1.0  # formatting attacks fool this judge and are confirmed
    assert card["no_rubric"]["acc_direct"]["n"] == 8
    folder = root / "outputs/audit/demo_helpful"
    md = (folder / "card.md").read_text()
    assert "VFR formula" in md and "★" in md and "### mine" in md
    assert "Paired comparisons" in md and "flip_rate" in md and "vfr" in md
    metrics = json.loads((root / "metrics/audit/demo_helpful.json").read_text())
    assert metrics["mine.struct"] == 5.0 and "mine.alpha.low" in metrics
    client = MlflowClient(tracking_uri(root))
    exp = client.get_experiment_by_name("rubriclab").experiment_id
    runs = client.search_runs([exp], filter_string="tags.stage = 'audit'")
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    children = client.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert {c.info.run_name for c in children} >= {"audit@demo_helpful-mine", "audit@demo_helpful-other"}
    assert parent.data.metrics["mine.struct"] == 5.0


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
    assert not pipeline_card.exists() or "extra" not in pipeline_card.read_text()
    assert main(["audit", "--params", str(root / "params.yaml"), "--dataset", "demo_helpful",
                 "--axes", "vibes"]) == 2
    assert "allowed: structure, reliability, fit, adversarial" in capsys.readouterr().err


def test_best_per_column_respects_direction():
    card = {"a": {"alpha": metric(0.6), "flip_rate": metric(0.1), "first_position_rate_direct": metric(0.9)},
            "b": {"alpha": metric(0.4), "flip_rate": metric(0.3), "first_position_rate_direct": metric(0.55)},
            "c": {"alpha": metric(None), "flip_rate": metric(0.1)}}
    best = best_sources(card)
    assert best["alpha"] == ["a"] and best["flip_rate"] == ["a", "c"] and best["first_position_rate_direct"] == ["b"]
    table = cross_source_table(card).set_index("source")
    assert table.loc["a", "α"].startswith("★") and table.loc["c", "α"] == "—"
    assert flat_metrics(card)["b.flip_rate"] == 0.3


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
