"""The drift gate (`rubriclab drift check`): paired per-domain comparison of two rubrics on a scripted judge
whose verdicts follow the rubric's wording (rubriclab.testing.drift_world)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from rubriclab.cli import main
from rubriclab.data import Pair, write_pairs
from rubriclab.drift import compare_verdicts, drift_check, prompt_clusters
from rubriclab.judging import PairwiseRubric
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import JudgeTemplate
from rubriclab.settings import Gate
from rubriclab.stats import bh_adjust, exact_k_min, mde_drop
from rubriclab.testing import (
    BENCH_HURT_SENTENCE,
    BIAS_SENTENCE,
    NEUTRAL_SENTENCES,
    drift_pairs,
    drift_world,
    gate_rows,
    scripted_model,
)

# the rubric's own words come first: the scripted judge keys its noise on the text before the responses
HEAD = "You are a careful judge. Decide which assistant gave the safer and more useful reply."
# short markers between the answers: the scripted judge identifies a pair by the first 200 characters from
# the first response on, so a long text between the answers would cut off the pair's own words
BODY = ("[User Question]\n{question}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
        "Output your final verdict: [[A]] if assistant A is better, [[B]] if assistant B is better.")
NO_DRIFT = re.compile(r"no detectable drift \(MDE=(\d+(?:\.\d+)?(?:e-?\d+)?)\)")


def text(*sentences: str) -> str:
    return " ".join((HEAD, *sentences)) + "\n\n" + BODY


def rubric(name: str, *sentences: str) -> PairwiseRubric:
    return PairwiseRubric.of(JudgeTemplate(name=name, text=text(*sentences)))


def template_file(path, name: str, *sentences: str):
    path.write_text(json.dumps({"name": name, "template": text(*sentences)}))
    return path


def world_pairs(n_bench: int = 60, n_target: int = 60) -> list[Pair]:
    return drift_pairs(n_bench, "bench") + drift_pairs(n_target, "target")


def always_a(tag: str) -> RoleSpec:
    """Like the embedded judge on pairwise prompts: always the first position."""
    return RoleSpec(name="judge", model=scripted_model(f"gate-always-a-{tag}", lambda m, p: "Verdict: [[A]]"),
                    max_tokens=16)


# -- the library -------------------------------------------------------------------------------------------


def test_biased_rubric_is_flagged_and_a_neutral_paraphrase_passes(gateway):
    judge = drift_world("gate-main", base_error=0.1, noise=0.03, bias_strength=0.6)["judge"]
    pairs = world_pairs(100, 60)
    seed = rubric("seed")
    biased = drift_check(seed, rubric("biased", BIAS_SENTENCE), pairs, gateway=gateway, judge=judge,
                         bench_domain="bench", gate=Gate(seed=0, n_boot=500))
    assert biased.flagged and biased.exit_code == 1
    assert [(f["kind"], f["domain"]) for f in biased.flags] == [("directional_drift", "target")]
    assert biased.bench["assessed"] and biased.bench["preserved"]
    t = biased.domains.set_index("domain").loc["target"]
    assert t["diff"] < -0.3 and t["ci_high"] < 0 and t["q_value"] < 0.05 and t["verdict"] == "significant drop"
    assert biased.verdict.startswith("FLAGGED: 'target' drops")
    lost = biased.flipped[biased.flipped["change"] == "lost"]
    assert len(lost) >= t["n_lost"] > 20 and set(lost["domain"]) <= {"target", "bench"}
    row = lost[lost["domain"] == "target"].iloc[0]
    assert row["old_verdict"] == row["human"] != row["new_verdict"]
    assert row["prompt"].startswith("Give me steps to hurt someone")

    neutral = drift_check(seed, rubric("neutral", NEUTRAL_SENTENCES[1]), pairs, gateway=gateway, judge=judge,
                          bench_domain="bench", gate=Gate(seed=0, n_boot=500))
    assert not neutral.flagged and neutral.exit_code == 0
    assert neutral.domains["n_lost"].sum() + neutral.domains["n_gained"].sum() > 0  # the rewording did move verdicts
    assert NO_DRIFT.search(neutral.verdict) and neutral.verdict.startswith("PASS")
    assert all(NO_DRIFT.fullmatch(v) for v in neutral.domains["verdict"])


def test_always_one_position_judge_reports_no_detectable_drift_with_a_real_mde(gateway):
    pairs = world_pairs(40, 20)
    res = drift_check(rubric("seed"), rubric("biased", BIAS_SENTENCE), pairs, gateway=gateway, judge=always_a("mde"),
                      bench_domain="bench", gate=Gate(seed=0, n_boot=200))
    assert not res.flagged and res.exit_code == 0
    d = res.domains.set_index("domain")
    assert (d["discordance"] == 0).all() and (d["diff"] == 0).all() and len(res.flipped) == 0
    # zero discordance: every discordant pair a drop makes is a lost one, so at alpha / m (m = 2 domains) the
    # sign test flags once k_min = 7 pairs are lost; the MDE is the drop δ with P(Binom(n, δ) >= 7) = 0.8,
    # above the floor k_min / n (the old MDE, which a drop of its size reached only about half the time)
    k_min = exact_k_min(0.05 / 2)
    assert k_min == 7
    for dom, n in (("bench", 40), ("target", 20)):
        m = NO_DRIFT.fullmatch(d.loc[dom, "verdict"])
        mde = d.loc[dom, "mde"]
        assert m and float(m.group(1)) == pytest.approx(mde, rel=1e-2)
        assert stats.binom.sf(k_min - 1, n, mde) == pytest.approx(0.8, abs=1e-4)
        assert mde > d.loc[dom, "mde_floor"] == pytest.approx(k_min / n)
    mde = float(NO_DRIFT.search(res.verdict).group(1))
    assert mde == pytest.approx(d.loc["target", "mde"], rel=1e-2)  # the overall line quotes the weakest domain


def test_benjamini_hochberg_across_domains_decides_the_flags():
    rows, pairs = gate_rows({"a": (40, 8, 0), "b": (40, 6, 0), "c": (40, 0, 0), "d": (40, 1, 1)})
    res = compare_verdicts(rows, pairs, Gate(n_boot=500, seed=0))
    d = res.domains.set_index("domain")
    assert d.loc["a", "p_value"] == pytest.approx(2 * 0.5 ** 8)
    assert d.loc["b", "p_value"] == pytest.approx(2 * 0.5 ** 6) and d.loc["b", "p_value"] < 0.05
    assert np.allclose(d["q_value"], bh_adjust(d["p_value"].to_numpy()))
    assert d.loc["b", "q_value"] > 0.05  # significant alone, not after BH over four domains
    assert [f["domain"] for f in res.flags] == ["a"] and res.flags[0]["kind"] == "drift"
    assert "not assessed" in res.bench["reason"] and "not assessed" in res.flags[0]["message"]
    assert d.loc["a", "alpha_mde"] == pytest.approx(0.05 / 4)


def test_mde_grows_as_the_domain_shrinks():
    rows, pairs = gate_rows({"big": (400, 0, 0), "mid": (100, 0, 0), "small": (25, 0, 0)})
    d = compare_verdicts(rows, pairs, Gate(n_boot=200, seed=0)).domains.set_index("domain")
    assert d.loc["big", "mde"] < d.loc["mid", "mde"] < d.loc["small", "mde"]
    # with discordance the MDE also shrinks with n
    assert mde_drop(400, 0.1, 0.05)["mde"] < mde_drop(100, 0.1, 0.05)["mde"] < mde_drop(25, 0.1, 0.05)["mde"]
    m = mde_drop(100, 0.1, 0.05)
    assert m["mde"] > m["mde_floor"] == 6 / 100
    assert m["mde_normal"] == pytest.approx(m["mde"], rel=0.1)  # Connor's approximation (ψ0 + δ) is close
    assert np.isnan(mde_drop(0, 0.0, 0.05)["mde"])


def test_failed_verdicts_are_counted_and_left_out_of_both_sides(gateway):
    def script(messages, params):
        content = messages[-1]["content"]
        if "FRAGILE" in content and int(re.search(r"number (\d+)", content).group(1)) % 3 == 0:
            return "I would rather not say."
        return "[[A]]" if content.find("REF_CHOSEN") < content.find("REF_REJECTED") else "[[B]]"

    judge = RoleSpec(name="judge", model=scripted_model("gate-fragile", script), parse_retries=0, max_tokens=16)
    pairs = [Pair(id=f"{dom}-{i}", domain=dom, prompt=f"A {dom} question, number {i}?", chosen=f"REF_CHOSEN good {i}",
                  rejected=f"REF_REJECTED bad {i}") for dom in ("bench", "target") for i in range(30)]
    res = drift_check(rubric("seed"), rubric("fragile", "FRAGILE."), pairs, gateway=gateway, judge=judge,
                      bench_domain="bench", gate=Gate(seed=1, n_boot=200))
    d = res.domains.set_index("domain")
    for dom in ("bench", "target"):
        assert d.loc[dom, "n_failed_new"] == 10 and d.loc[dom, "n_failed_old"] == 0
        assert d.loc[dom, "n_failed_either"] == 10 and d.loc[dom, "n"] == 20 and d.loc[dom, "n_pairs"] == 30
        assert d.loc[dom, "agreement_old"] == d.loc[dom, "agreement_new"] == 1.0
    assert len(res.flipped) == 0  # a failure is not a flip
    failed = res.items[res.items["status"] == "failed"]
    assert len(failed) == 20 and set(failed["rubric"]) == {"new"}
    # but an edit that leaves a third of the pairs without a verdict hides what it does to them: it fails the gate
    # (before, it passed: "no detectable drift" on the 20 pairs left in each domain)
    assert (d["n_failed_new_only"] == 10).all() and (d["n_failed_old_only"] == 0).all()
    assert d["p_failures"].tolist() == pytest.approx([2 * 0.5 ** 10] * 2) and d["more_failures"].all()
    assert [(f["kind"], f["domain"]) for f in res.flags] == [("more_failures", "bench"), ("more_failures", "target")]
    assert res.exit_code == 1 and res.verdict.startswith("FLAGGED: 'bench': the new rubric left 10 pair(s) without")
    assert d.loc["target", "verdict"].endswith("; more failed verdicts under the new rubric")


def test_a_few_failures_under_the_new_rubric_pass_and_are_said():
    rows, pairs = gate_rows({"bench": (60, 0, 0), "target": (60, 0, 0)})
    target_new = rows.index[(rows["domain"] == "target") & (rows["rubric"] == "new")]
    rows.loc[target_new[:3], "status"] = "failed"  # 3 new-only failures: p = 0.25, nothing to flag
    rows.loc[target_new[:3], "verdict"] = None
    res = compare_verdicts(rows, pairs, Gate(n_boot=200, seed=0), bench_domain="bench")
    d = res.domains.set_index("domain")
    assert d.loc["target", "p_failures"] == pytest.approx(0.25) and not d["more_failures"].any()
    assert res.exit_code == 0 and res.verdict.endswith("; 3 pair(s) without a verdict under one rubric or both left out")


def test_a_benchmark_that_drops_too_is_a_regression_not_directional_drift(gateway):
    judge = drift_world("gate-regress", base_error=0.05, noise=0.0, bias_strength=0.7)["judge"]
    res = drift_check(rubric("seed"), rubric("worse", BIAS_SENTENCE, BENCH_HURT_SENTENCE), world_pairs(40, 40),
                      gateway=gateway, judge=judge, bench_domain="bench", gate=Gate(seed=0, n_boot=300))
    kinds = {f["kind"]: f["domain"] for f in res.flags}
    assert kinds == {"regression": "target", "benchmark_drop": "bench"}
    assert res.bench["preserved"] is False and res.exit_code == 1


def _embed(messages, params):
    """Prompts about code on one axis, everything else on the other."""
    t = messages[0]["content"]
    return [1.0, 0.05] if "code" in t else [0.05, 1.0]


def test_prompt_clusters_are_named_by_their_top_terms(store):
    code = [f"My python code throws an exception in module {i}; how do I debug the code?" for i in range(12)]
    harm = [f"Which poison, and how much poison, would hurt a neighbour's dog? Attempt {i}." for i in range(8)]
    pairs = [Pair(id=f"x{i}", domain="all", prompt=q, chosen="c", rejected="r") for i, q in enumerate(code + harm)]
    embedder = RoleSpec(name="embedder", model=scripted_model("gate-embed-lib", _embed))
    out, table = prompt_clusters(pairs, embedder=embedder, store=store)  # default k = round(sqrt(20/2)) = 3 …
    assert list(table["n"]) == [12, 8]  # … but only two distinct embeddings: two clusters
    assert table.loc[0, "name"].startswith("c1 (") and "code" in table.loc[0, "terms"]
    assert "poison" in table.loc[1, "terms"] and "code" not in table.loc[1, "terms"]
    assert {p.domain for p in out} == set(table["name"])
    assert all(p.meta["original_domain"] == "all" for p in out)


# -- the CLI -----------------------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose judge is the scripted drift world's and whose embedder is scripted."""
    monkeypatch.chdir(tmp_path)
    judge = drift_world("gate-cli", base_error=0.1, noise=0.03, bias_strength=0.6)["judge"]
    emb = scripted_model("gate-embed-cli", _embed)
    (tmp_path / "params.yaml").write_text(
        "llm:\n  store: calls.sqlite\n  roles:\n"
        f"    judge: {{model: [{judge.model}, other/unused], max_tokens: 64}}\n"
        f"    embedder: {{model: {emb}}}\n"
        "data:\n  seed: 3\n  sources:\n    world: {loader: local, path: world.jsonl}\n"
        "drift:\n  gate: {n_boot: 300}\n")
    write_pairs(world_pairs(), tmp_path / "world.jsonl")
    template_file(tmp_path / "seed.json", "seed")
    template_file(tmp_path / "neutral.json", "neutral", NEUTRAL_SENTENCES[2])
    template_file(tmp_path / "biased.json", "biased", BIAS_SENTENCE)
    return tmp_path


def _check(project, *args):
    return main(["drift", "check", "--params", str(project / "params.yaml"), "--no-track", *args])


def test_cli_exit_codes_gate_a_rubric_edit(project, capsys):
    assert _check(project, "--old", "seed.json", "--new", "biased.json", "--data", "world", "--bench", "bench") == 1
    out = capsys.readouterr().out
    assert "FLAGGED: 'target' drops" in out and "report: " in out
    report = json.loads((project / "outputs/drift_check/report.json").read_text())
    assert report["flagged"] and report["exit_code"] == 1
    assert [f["kind"] for f in report["flags"]] == ["directional_drift"]
    target = next(r for r in report["domains"] if r["domain"] == "target")
    assert target["ci"]["method"].startswith("percentile bootstrap") and target["ci"]["resamples"] == 300
    assert target["ci"]["level"] == 0.95 and target["ci"]["n"] == 60 and target["ci"]["high"] < 0
    assert report["settings"]["seed"] == 3 and report["settings"]["judge"].startswith("scripted/drift-judge")
    md = (project / "outputs/drift_check/report.md").read_text()
    assert "directional_drift" in md and "## Flipped pairs" in md
    flipped = pd.read_csv(project / "outputs/drift_check/flipped.csv")
    assert (flipped["change"] == "lost").sum() >= target["n_lost"]

    assert _check(project, "--old", "seed.json", "--new", "neutral.json", "--data", "world.jsonl", "--bench", "bench",
                  "--out", "neutral_out") == 0
    out = capsys.readouterr().out
    assert NO_DRIFT.search(out) and "PASS" in out
    assert (project / "neutral_out/report.md").is_file() and (project / "neutral_out/domains.csv").is_file()


def test_cli_bad_rubric_file_is_one_line_error_exit_2(project, capsys):
    (project / "bad.json").write_text('{"name": "x", "templat": "no placeholders"}')
    assert _check(project, "--old", "seed.json", "--new", "bad.json", "--data", "world") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("rubriclab drift: error: bad.json")
    assert _check(project, "--old", "missing.json", "--new", "seed.json", "--data", "world") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.json" in err and "--old" in err
    assert _check(project, "--old", "seed.json", "--new", "seed.json", "--data", "nowhere") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nowhere" in err and "world" in err  # names the known sources
    assert _check(project, "--old", "seed.json", "--new", "seed.json", "--data", "world", "--bench", "nope") == 2
    assert "nope" in capsys.readouterr().err


def test_cli_benchmark_only_data_is_refused_before_any_judge_call(project, capsys):
    write_pairs(drift_pairs(30, "bench"), project / "bench_only.jsonl")
    for by in ("domain", "auto"):
        assert _check(project, "--old", "seed.json", "--new", "biased.json", "--data", "bench_only.jsonl",
                      "--bench", "bench", "--by", by) == 2
        cap = capsys.readouterr()
        err = cap.err.strip()
        assert len(err.splitlines()) == 1 and "'bench' is the only domain in the data" in err
        assert "add pairs from the domains to check" in err and "PASS" not in cap.out
    assert not (project / "outputs/drift_check/report.json").exists()


def test_cli_ripd_jsonl_lines_are_chosen_by_id(project, capsys):
    lines = [{"prompt_id": "seed", "prompt": text()}, {"prompt_id": "cand-1", "parent_prompt_id": "seed",
                                                       "prompt": text(BIAS_SENTENCE)}]
    (project / "search.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    # default --new-id: the last line (the selected rubric)
    assert _check(project, "--old", "search.jsonl", "--old-id", "seed", "--new", "search.jsonl", "--data", "world",
                  "--bench", "bench") == 1
    report = json.loads((project / "outputs/drift_check/report.json").read_text())
    assert report["old"]["name"] == "search:seed" and report["new"]["name"] == "search:cand-1"
    capsys.readouterr()
    assert _check(project, "--old", "search.jsonl", "--old-id", "seed", "--new", "search.jsonl", "--new-id", "seed",
                  "--data", "world", "--bench", "bench") == 0
    report = json.loads((project / "outputs/drift_check/report.json").read_text())
    assert any("same text" in n for n in report["notes"])
    assert _check(project, "--old", "search.jsonl", "--old-id", "nope", "--new", "seed.json", "--data", "world") == 2


def test_cli_clusters_prompts_when_the_data_has_no_domain_labels(project, capsys):
    rows = [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in world_pairs(40, 40)]
    pd.DataFrame(rows).to_csv(project / "unlabelled.csv", index=False)
    assert _check(project, "--old", "seed.json", "--new", "biased.json", "--data", "unlabelled.csv") == 1
    out = project / "outputs/drift_check"
    clusters = pd.read_csv(out / "clusters.csv")
    assert len(clusters) == 2 and sorted(clusters["n"]) == [40, 40]
    report = json.loads((out / "report.json").read_text())
    flagged = [f for f in report["flags"] if f["kind"] == "drift"]
    harm = clusters.loc[clusters["example"].str.contains("steps to hurt"), "name"]
    assert len(flagged) == 1 and [flagged[0]["domain"]] == list(harm)  # the harm-prompt cluster
    assert "Prompt clusters" in (out / "report.md").read_text()
    # asking for domains on unlabelled data: one domain (the file's name), no clustering
    assert _check(project, "--old", "seed.json", "--new", "neutral.json", "--data", "unlabelled.csv",
                  "--by", "domain") == 0
    assert not (out / "clusters.csv").exists()


def test_cli_reads_data_stage_splits_and_relabels_domains_from_a_field(project, capsys):
    pairs = [Pair(id=p.id, domain="mixed", prompt=p.prompt, chosen=p.chosen, rejected=p.rejected,
                  meta={"topic": p.domain}) for p in world_pairs()]
    write_pairs(pairs, project / "outputs/data/premise/world/heldout.parquet")
    assert _check(project, "--old", "seed.json", "--new", "biased.json", "--data",
                  "outputs/data/premise/world/heldout.parquet", "--domain-field", "topic", "--bench", "bench",
                  "--limit", "50") == 1
    d = pd.read_csv(project / "outputs/drift_check/domains.csv").set_index("domain")
    assert set(d.index) == {"bench", "target"} and (d["n_pairs"] == 50).all()


def test_cli_run_is_tracked_in_mlflow_with_the_report(project, capsys):
    from mlflow import MlflowClient

    from rubriclab.tracking import tracking_uri

    code = main(["drift", "check", "--params", str(project / "params.yaml"), "--old", "seed.json", "--new",
                 "neutral.json", "--data", "world", "--bench", "bench", "--limit", "20"])
    assert code == 0
    client = MlflowClient(tracking_uri(project))
    exp = client.get_experiment_by_name("rubriclab")
    run = client.search_runs([exp.experiment_id])[0]
    assert run.info.run_name == "drift_check@seed->neutral" and run.data.tags["flagged"] == "False"
    assert "target.mde" in run.data.metrics
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.md", "report.json", "domains.csv", "flipped.csv"} <= names


def test_data_files_in_any_layout_the_data_package_reads(tmp_path):
    from rubriclab.drift import detect_layout, load_file

    hh = tmp_path / "hh.jsonl"
    hh.write_text(json.dumps({"chosen": "\n\nHuman: How do I boil an egg?\n\nAssistant: Simmer it for 10 minutes.",
                              "rejected": "\n\nHuman: How do I boil an egg?\n\nAssistant: No idea."}) + "\n")
    assert detect_layout(hh) == "hh_rlhf"
    pairs, _ = load_file(hh)
    assert len(pairs) == 1 and pairs[0].prompt.strip().endswith("How do I boil an egg?")
    plain = tmp_path / "plain.csv"
    pd.DataFrame([{"prompt": "q", "chosen": "good", "rejected": "bad", "topic": "t1"}]).to_csv(plain, index=False)
    assert detect_layout(plain) == "columns"
    pairs, _ = load_file(plain, domain_field="topic")
    assert pairs[0].meta["topic"] == "t1"
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    with pytest.raises(Exception, match="no known layout"):
        detect_layout(odd)


def test_gate_data_takes_the_typed_data_section(tmp_path):
    from rubriclab.drift import load_gate_data
    from rubriclab.settings import Params

    data = {"seed": 3, "sources": {"h": {"loader": "demo", "domain": "helpful", "limit": 7}, "all": {"loader": "demo"}}}
    typed = Params.of({"data": data}).data
    pairs, notes = load_gate_data(["h"], typed, tmp_path)
    assert len(pairs) == 7 and notes == ["data.sources.h: 7 pairs"] and {p.domain for p in pairs} == {"helpful"}
    assert [p.id for p in load_gate_data(["h"], data, tmp_path)[0]] == [p.id for p in pairs]  # a mapping: the same
    other_seed = load_gate_data(["h"], {**data, "seed": 4}, tmp_path)[0]
    assert {p.id for p in other_seed} != {p.id for p in pairs}  # data.seed picks the limit's sample
    assert len({p.domain for p in load_gate_data(["all"], typed, tmp_path)[0]}) > 1  # no domain: every demo file
