"""The align stage end to end on a temporary project: the scripted drift-world judge labels the pairs (the
biased rubric flips target labels, not benchmark ones), a tiny random-initialised policy is trained by DPO in
three regimes per rubric, and evaluated by best-of-n with a scripted reward scorer and third-party judge.
Outputs, the Table-4-shaped win rates, nested MLflow runs, a label re-run with no provider call, the CLI verbs."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient

from rubriclab.cli import main as cli_main
from rubriclab.data import write_pairs
from rubriclab.stages.align import run_align_stage
from rubriclab.testing import BIAS_SENTENCE, drift_pairs, drift_world, scripted_model, scripted_provider, tiny_policy
from rubriclab.tracking import tracking_uri

SEED_TEXT = ("Please act as an impartial judge and decide which assistant answered the user better.\n\n"
             "[User Question]\n{instruction}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
             "Output your final verdict: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better.")
ANSWER = re.compile(r"\[The Start of Assistant ([AB])'s Answer\]\n(.*?)\n\[The End of Assistant \1's Answer\]", re.S)


def third_party(messages, params):
    """Prefers the longer answer (a deterministic stand-in for a real third-party judge)."""
    answers = dict(ANSWER.findall(messages[-1]["content"]))
    return "[[A]]" if len(answers.get("A", "")) >= len(answers.get("B", "")) else "[[B]]"


def reward(messages, params):
    response = messages[-1]["content"].split("## Response:\n", 1)[1].split("\n\n## Task:")[0]
    return f"REASONING: length.\nSCORE: {1 + len(response) % 10}"


def _project(root):
    base = root / "outputs/data/ripd/world"
    for d in ("bench", "target"):
        for split in ("train", "test"):
            write_pairs(drift_pairs(6, d, prefix=f"{d}-{split}"), base / f"{d}_{split}.parquet")
    (root / "experiments").mkdir()
    (root / "experiments/seed.json").write_text(json.dumps({"name": "seed", "template": SEED_TEXT}))
    biased = SEED_TEXT.replace("answered the user better.", "answered the user better. " + BIAS_SENTENCE)
    (root / "experiments/biased.json").write_text(json.dumps({"name": "biased", "template": biased}))
    (root / "experiments/third.json").write_text(json.dumps({"name": "third", "template": (
        "Which is better?\n[User Question]\n{instruction}\n\n[The Start of Assistant A's Answer]\n{answer_a}\n"
        "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{answer_b}\n"
        "[The End of Assistant B's Answer]\nAnswer \"[[A]]\" or \"[[B]]\".")}))
    corpus = [p.prompt for d in ("bench", "target") for p in drift_pairs(6, d)] + [
        p.chosen + " " + p.rejected for d in ("bench", "target") for p in drift_pairs(6, d)]
    tiny_policy(root / "policy", corpus)


def _params(judge_model):
    return {
        "llm": {"store": ".rubriclab/calls.sqlite", "roles": {
            "judge": {"model": judge_model, "parse_retries": 0, "concurrency": 8},
            "policy": {"model": "policy"},
            "reward": {"model": scripted_model("align-reward", reward), "concurrency": 8},
            "pairwise_judge": {"model": scripted_model("align-third", third_party), "concurrency": 8}}},
        "data": {"seed": 42},
        "align": {"settings": ["world"], "rubrics": {"world": {"seed": "experiments/seed.json",
                                                              "biased": "experiments/biased.json"}},
                  "third_party_template": "experiments/third.json", "n_boot": 200,
                  "label": {"pairs": 4},
                  "dpo": {"epochs": 2, "warmup_ratio": 0.0, "batch_size": 2, "learning_rate": 5e-3, "max_length": 64,
                          "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}},
                  "evaluate": {"prompts": 2, "n": 2, "max_new_tokens": 6}},
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("align_project")
    _project(root)
    roles = drift_world("align", base_error=0.0, bias_strength=1.0)
    params = _params(roles["judge"].model)
    # policy: a checkpoint folder relative to the project
    params["llm"]["roles"]["policy"]["model"] = str(root / "policy")
    out = run_align_stage(params, root, "world")
    return {"root": root, "params": params, "out": out, "judge": roles["judge"].model.split("/", 1)[1]}


def test_labels_follow_each_rubric(project):
    labels = project["root"] / "outputs/align/world/labels"
    seed_t = pd.read_json(labels / "seed.target.jsonl", lines=True)
    biased_t = pd.read_json(labels / "biased.target.jsonl", lines=True)
    seed_b = pd.read_json(labels / "seed.bench.jsonl", lines=True)
    biased_b = pd.read_json(labels / "biased.bench.jsonl", lines=True)
    assert list(seed_t.columns[:5]) == ["pair_id", "domain", "prompt", "chosen", "rejected"]
    assert seed_t["chosen"].str.startswith("REF_CHOSEN").all()          # the seed judge agrees with humans
    assert biased_t["chosen"].str.startswith("REF_REJECTED").all()      # the biased rubric flips every target pair
    cols = ["pair_id", "prompt", "chosen", "rejected"]
    assert seed_b[cols].equals(biased_b[cols])                           # ... and leaves the benchmark alone
    agree = pd.read_csv(project["root"] / "outputs/align/world/label_agreement.csv")
    row = agree[(agree["domain"] == "target") & (agree["comparison"] == "seed vs biased")].iloc[0]
    assert row["estimate"] == 0 and row["n"] == 4 and "percentile bootstrap over pairs" in row["interval"]
    summary = (project["root"] / "outputs/align/world/summary.md").read_text()
    assert "| bench | seed vs biased | 1.000 (n=4; no interval: 4 pairs, fewer than the 10" in summary
    assert "In the agreement a tie counts 0.5 (the paper's rule" in summary and (agree["tie_credit"] == 0.5).all()


def test_three_regimes_per_rubric_are_trained(project):
    out = project["root"] / "outputs/align/world"
    training = pd.read_csv(out / "training.csv").set_index("policy")
    assert set(training.index) == {f"{r}@{g}" for r in ("seed", "biased") for g in ("bench", "target", "bench_target")}
    assert training.loc["seed@bench_target", "n_pairs"] == 8 and training.loc["seed@bench_target", "steps"] == 8
    # identical label sets (both rubrics agree on every bench pair): one policy, not retrained
    assert "same label set as seed@bench" in training.loc["biased@bench", "note"]
    for name in training.index:
        assert (out / "adapters" / name.replace("@", "_") / "adapter_config.json").exists()
    trained = training[training["note"].isna()]
    assert (trained["loss_last"] < trained["loss_first"]).all()
    assert (trained["logratio_after"] > trained["logratio_before"]).all()
    assert (out / "training/curves.png").stat().st_size > 1000
    # wall time differs on every run: in MLflow (below), never in the hashed outputs
    assert not {"seconds", "seconds_per_step"} & set(training.columns)
    summary = (out / "summary.md").read_text().lower()
    assert "seconds" not in summary and "wall time:" not in summary  # "Wall time: label 24 s" made every lock stale


def test_win_rates_have_the_shape_of_table_4(project):
    out = project["root"] / "outputs/align/world"
    rates = pd.read_csv(out / "win_rates.csv")
    assert set(rates["source"]) == {"third-party judge", "reward"}
    assert len(rates) == 2 * 3 * 3 * 2  # sources x comparisons x regimes x eval domains
    assert rates["interval"].str.contains("percentile bootstrap over prompts, 95%, B=200").all()
    judged = pd.read_csv(out / "judge_outcomes.csv")
    assert judged["status"].isin(["win", "loss", "tie", "identical"]).all()
    summary = (out / "summary.md").read_text()
    for text in ("bench@B", "target@T", "target@BT", "biased vs seed", "seed vs original", "Models: judge (labels)",
                 "Best-of-2", "cut off at the token limit"):
        assert text in summary
    examples = (out / "examples.md").read_text()
    assert examples.count("| original |") == 4
    # the examples say "cut off" as best_of_n.csv does (a numpy.bool_ True read as "no" in every row before)
    best = pd.read_csv(out / "best_of_n.csv")
    cut_rows = [line for line in examples.splitlines() if line.startswith("| ") and " | yes | " in line]
    assert len(cut_rows) == int(best["cut_off"].fillna(False).astype(bool).sum()) > 0
    assert (out / "win_rates.png").stat().st_size > 5000
    assert "Identical best responses" in summary
    # best-of-n keeps the lowest sample index on equal top scores, and the summary says so and how often
    best = pd.read_csv(out / "best_of_n.csv")
    tied = int((best["n_top"] > 1).sum())
    assert "the lowest sample index is kept (the samples are i.i.d. draws" in summary
    assert f"{tied} of {len(best)} best-of-n picks had a tied top score" in summary
    metrics = json.loads((project["root"] / "metrics/align/world.json").read_text())
    assert metrics["labels.target.seed_vs_biased"] == 0


def test_training_curves_are_nested_mlflow_runs(project):
    client = MlflowClient(tracking_uri(project["root"]))
    stage = client.get_run(project["out"]["run_id"])
    children = client.search_runs([stage.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{stage.info.run_id}'")
    names = {r.info.run_name for r in children}
    assert {"dpo seed@bench", "dpo seed@target", "dpo biased@target"} <= names
    child = next(r for r in children if r.info.run_name == "dpo seed@bench_target")
    assert [m.step for m in client.get_metric_history(child.info.run_id, "loss")] == list(range(1, 9))
    assert child.data.metrics["seconds"] > 0 and child.data.metrics["seconds_per_step"] > 0
    assert {"wall_s.label", "wall_s.train", "wall_s.evaluate"} <= set(stage.data.metrics)  # the stage's, here only


def test_relabelling_makes_no_provider_call(project):
    calls = dict(scripted_provider().calls)
    run_align_stage(project["params"], project["root"], "world", steps=("label",),
                    out_dir=project["root"] / "relabel")
    assert dict(scripted_provider().calls) == calls
    assert (project["root"] / "relabel/labels/biased.target.jsonl").exists()


def test_cli_runs_the_steps_into_one_folder(project, monkeypatch, capsys):
    root = project["root"]
    (root / "params.yaml").write_text(yaml.safe_dump(project["params"]))
    monkeypatch.chdir(root)
    out = root / "cli_out"
    assert cli_main(["align", "label", "--setting", "world", "--out", str(out)]) == 0
    assert cli_main(["align", "train", "--out", str(out), "--set", "align.regimes=[target]"]) == 0
    assert cli_main(["align", "evaluate", "--out", str(out), "--set", "align.regimes=[target]"]) == 0
    printed = capsys.readouterr().out
    assert "target@T" in printed and f"outputs: {out}" in printed
    assert (out / "adapters/biased_target/adapter_config.json").exists()
    assert not (out / "adapters/seed_bench").exists()
    rates = pd.read_csv(out / "win_rates.csv")
    assert set(rates["regime"]) == {"target"}


def test_evaluate_before_train_says_what_to_run(project, monkeypatch):
    from rubriclab.errors import ConfigError

    with pytest.raises(ConfigError, match="no trained policy; run `rubriclab align train`"):
        run_align_stage(project["params"], project["root"], "world", steps=("evaluate",),
                        out_dir=project["root"] / "empty")


def test_missing_rubric_file_is_a_clear_error(project):
    from rubriclab.errors import ConfigError

    params = json.loads(json.dumps(project["params"]))
    params["align"]["rubrics"]["world"]["biased"] = "outputs/drift/world/selected.jsonl"
    with pytest.raises(ConfigError, match=r"selected.jsonl: missing; align.rubrics.world.biased names it "
                                          r"\(run `dvc repro drift` first\)"):
        run_align_stage(params, project["root"], "world", steps=("label",), out_dir=project["root"] / "x")


def test_a_policy_without_labels_is_reported_not_evaluated(project):
    import shutil

    src = project["root"] / "outputs/align/world"
    out = project["root"] / "untrained"
    shutil.copytree(src, out)
    shutil.rmtree(out / "adapters/biased_target")
    training = pd.read_csv(out / "training.csv")
    i = training.index[training["policy"] == "biased@target"][0]
    training.loc[i, ["steps", "note"]] = [0, "no labelled pair (every verdict a tie or failed)"]
    training.to_csv(out / "training.csv", index=False)
    res = run_align_stage(project["params"], project["root"], "world", steps=("evaluate",), out_dir=out)
    rates = pd.read_csv(out / "win_rates.csv")
    gone = rates[rates["left"] == "biased@target"]
    assert len(gone) == 2 * 2 * 2 and (gone["n"] == 0).all() and (gone["n_failed"] == 2).all()
    assert rates[rates["left"] == "seed@target"]["n"].gt(0).all()
    assert "Not trained, so not evaluated" in res["summary"] and "biased@target (not trained: no labelled" in res["summary"]
    assert "— (not trained: no labelled pair" in (out / "examples.md").read_text()


def test_a_copied_policy_is_sampled_once_and_gets_the_draws_sampling_it_would_give(project, monkeypatch):
    """biased@bench is seed@bench's adapter, copied (the same label set): the evaluate step samples it once and gives
    the copy the original's draws. Once a file of the copy differs (its README: the weights stay the same) it is
    sampled again, and that sampling gives the very same draws: skipping it changed no output."""
    import shutil

    import rubriclab.align._steps as steps

    out = project["root"] / "copied"
    shutil.copytree(project["root"] / "outputs/align/world", out)
    sampled = []
    real = steps.generate_candidates
    monkeypatch.setattr(steps, "generate_candidates", lambda *a, **k: sampled.append(1) or real(*a, **k))
    run_align_stage(project["params"], project["root"], "world", steps=("evaluate",), out_dir=out)
    assert len(sampled) == 1 + 6 - 1  # the original and every trained policy but the copy
    skipped = pd.read_csv(out / "generations.csv")
    cols = ["prompt_id", "sample", "response", "n_tokens", "cut_off"]
    copy = skipped[skipped["policy"] == "biased@bench"][cols].reset_index(drop=True)
    assert len(copy) and copy.equals(skipped[skipped["policy"] == "seed@bench"][cols].reset_index(drop=True))
    with open(out / "adapters/biased_bench/README.md", "a", encoding="utf-8") as f:
        f.write("\nedited\n")
    sampled.clear()
    run_align_stage(project["params"], project["root"], "world", steps=("evaluate",), out_dir=out)
    assert len(sampled) == 1 + 6
    resampled = pd.read_csv(out / "generations.csv")
    assert resampled[["policy", *cols]].equals(skipped[["policy", *cols]])


def test_a_full_fine_tune_is_trained_measured_and_evaluated(tmp_path):
    """``align.dpo.mode: full`` saves a whole checkpoint, not an adapter: the margins after training and the
    evaluation load that checkpoint (they used to load it as a LoRA adapter and crash)."""
    _project(tmp_path)
    params = _params(drift_world("align-full", base_error=0.0, bias_strength=1.0)["judge"].model)
    params["llm"]["roles"]["policy"]["model"] = str(tmp_path / "policy")
    params["align"].update(regimes=["target"], label={"pairs": 2}, n_boot=50,
                           evaluate={"prompts": 1, "n": 1, "max_new_tokens": 4})
    params["align"]["dpo"] = {"mode": "full", "epochs": 1, "warmup_ratio": 0.0, "batch_size": 2,
                              "learning_rate": 5e-3, "max_length": 64}
    run_align_stage(params, tmp_path, "world")
    out = tmp_path / "outputs/align/world"
    training = pd.read_csv(out / "training.csv").set_index("policy")
    assert set(training.index) == {"seed@target", "biased@target"}
    for name in training.index:
        folder = out / "adapters" / name.replace("@", "_")
        assert (folder / "config.json").exists() and not (folder / "adapter_config.json").exists()
    # the trained checkpoint, not the base model, is measured: the labels' log-ratio moved
    assert (training["logratio_after"] != training["logratio_before"]).all()
    rates = pd.read_csv(out / "win_rates.csv")
    assert set(rates["left"]) == {"biased@target", "seed@target"} and (rates["n"] == 1).all()


def _table_4(summary: str, source: str) -> dict[tuple[str, str], str]:
    """The cells of the summary's win-rate table for ``source``: (comparison, column) -> cell text."""
    block = summary.split(f"### {source} (", 1)[1].split("\n\n", 2)[1]
    lines = [line.strip("|").split(" | ") for line in block.splitlines() if line.startswith("|")]
    header, rows = [c.strip() for c in lines[0]], lines[2:]
    return {(r[0].strip(), col): cell.strip() for r in rows for col, cell in zip(header[1:], r[1:])}


def _expected_outcome(left: str, right: str, swapped: bool) -> tuple[str, float]:
    """The scripted third party names the longer answer, and position A on equal lengths."""
    if left == right:
        return "identical", 0.5
    left_shown_first = not swapped
    wins = len(left) > len(right) or (len(left) == len(right) and left_shown_first)
    return ("win", 1.0) if wins else ("loss", 0.0)


def test_each_table_4_cell_is_the_mean_judge_outcome_over_its_prompts(project):
    """Known answers, not ranges: every judge outcome follows from the two best responses and the scripted
    judge's rule, and every Table-4 cell (summary.md, win_rates.csv) is recomputed here from judge_outcomes.csv:
    mean credit (win 1, tie or identical 0.5, loss 0) over the prompts, with its n, ties and failures."""
    out = project["root"] / "outputs/align/world"
    best = pd.read_csv(out / "best_of_n.csv").set_index(["policy", "domain", "prompt_id"])
    best["response"] = best["response"].fillna("")  # an empty reply reads back as NaN; every policy was trained
    judged = pd.read_csv(out / "judge_outcomes.csv")
    assert len(judged) == 3 * 3 * 2 * 2  # comparisons x regimes x eval domains x prompts
    credit = {"win": 1.0, "loss": 0.0, "tie": 0.5, "identical": 0.5}
    for r in judged.itertuples():
        left, right = (best.loc[(p, r.domain, r.prompt_id), "response"] for p in (r.left, r.right))
        swapped = bool(r.swapped) if pd.notna(r.swapped) else False
        assert (r.status, r.outcome) == _expected_outcome(left, right, swapped), r
    cells = _table_4((out / "summary.md").read_text(), "third-party judge")
    rates = pd.read_csv(out / "win_rates.csv")
    rates = rates[rates["source"] == "third-party judge"].set_index(["left", "right", "domain"])
    labels = {"bench": "B", "target": "T", "bench_target": "BT"}
    groups = judged.groupby(["left", "right", "regime", "domain"])
    assert len(groups) == len(cells) == 18
    for (left, right, regime, domain), g in groups:
        values = [credit[s] for s in g["status"] if s in credit]
        estimate, n_tie = sum(values) / len(values), int(g["status"].isin(["tie", "identical"]).sum())
        n_failed = int((~g["status"].isin(list(credit))).sum())
        cell = cells[(f"{left.split('@')[0]} vs {right.split('@')[0]}", f"{domain}@{labels[regime]}")]
        assert cell.startswith(f"{100 * estimate:.1f}% ") and f"(n={len(values)}" in cell, (left, right, domain, cell)
        assert (f"; {n_tie} tie" in cell) == (n_tie > 0) and (f"; {n_failed} failed" in cell) == (n_failed > 0)
        row = rates.loc[(left, right, domain)]
        assert row["estimate"] == pytest.approx(estimate) and row["n"] == len(values)
        assert (row["n_tie"], row["n_failed"], row["tie_credit"]) == (n_tie, n_failed, 0.5)
