"""params.yaml is validated when it is loaded: types, ranges, allowed values, unknown keys, one-line errors."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from rubriclab.config import load_params
from rubriclab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
REPO_PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the repo's params.yaml in the working folder (so messages name it ``params.yaml``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    return tmp_path


def _write(project: Path, params: dict) -> None:
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _error(overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as err:
        load_params("params.yaml", overrides)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


def test_repo_params_validate_and_what_the_file_says_is_not_changed():
    params = load_params(ROOT / "params.yaml")
    assert params.given() == REPO_PARAMS  # nothing coerced: YAML ints stay ints
    assert params.given()["repair"]["sweep"]["deltas"][-1] == float("inf")  # `.inf` stays valid
    assert params.align.dpo.epochs == 1 and isinstance(params.align.dpo.epochs, int)


def test_partial_params_fill_in_the_defaults(tmp_path):
    p = tmp_path / "params.yaml"
    p.write_text("data:\n  seed: 42\n")
    params = load_params(p, ["data.seed=7", "llm.roles.judge.model=openai/x"])
    assert params.given() == {"data": {"seed": 7}, "llm": {"roles": {"judge": {"model": "openai/x"}}}}
    assert params.data.seed == 7 and params.audit.runs == 5  # the model's default
    p.write_text("{}\n")
    assert load_params(p).given() == {}


# the two examples of the issue, as --set overrides
@pytest.mark.parametrize("override,message", [
    ("audit.runs=abc", "params.yaml: audit.runs: got 'abc'; expected an integer >= 1 (from --set audit.runs=abc)"),
    ("audit.pool_size=-3",
     "params.yaml: audit.pool_size: got -3; expected an integer >= 1 (from --set audit.pool_size=-3)"),
    ("llm.roles.judgee.model=openai/x",
     "params.yaml: llm.roles.judgee: unknown role; expected one of judge, extractor, consolidator, paraphraser, "
     "attacker, verifier, refiner, generator, embedder, evaluator, policy, reward, pairwise_judge "
     "(from --set llm.roles.judgee.model=openai/x)"),
    ("audit.templates=[direct,perrubric]",
     "params.yaml: audit.templates[1]: got 'perrubric'; expected one of direct, per_rubric "
     "(from --set audit.templates=[direct,perrubric])"),
])
def test_override_errors_name_the_override(project, override, message):
    assert _error([override]) == message


def _set(dotted: str, value):
    def edit(params):
        node = params
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return edit


@pytest.mark.parametrize("edit,message", [
    # unknown keys: a section, a top-level section, a role, a role's key
    (_set("audit.pool", 5), "audit.pool: unknown key; expected one of sources, axes, pool_size, heldout_size, "
     "out_of_domain, runs, run_temperature, paraphrases, paraphrase_temperature, samples, sample_temperature, "
     "templates, both_orders, early_stop, n_attacks, tau, n_boot, n_boot_paired, confidence, tie_credit, "
     "alpha_orientation, baseline_reference, paraphrase_check, attack_check, injection"),
    (_set("report.mlflow", "x"), "report.mlflow: unknown key; expected one of mlflow_ui"),
    (_set("audti", {"runs": 2}),
     "audti: unknown key; expected one of llm, data, tracking, discover, audit, repair, drift, align, probe, report, "
     "recorded"),
    (_set("llm.roles.judje", {"model": "openai/x"}), "llm.roles.judje: unknown role; expected one of judge, extractor, "
     "consolidator, paraphraser, attacker, verifier, refiner, generator, embedder, evaluator, policy, reward, "
     "pairwise_judge"),
    (_set("llm.roles.judge.temprature", 0.7), "llm.roles.judge.temprature: unknown key; expected one of model, "
     "temperature, max_tokens, top_p, timeout, concurrency, rpm, tpm, max_retries, parse_retries, api_base, "
     "api_key_env, seed, structured, extra, max_failure_share"),
    # wrong types
    (_set("data.seed", "abc"), "data.seed: got 'abc'; expected an integer"),
    (_set("audit.both_orders", "yes"), "audit.both_orders: got 'yes'; expected true or false"),
    (_set("audit.axes", "structure"), "audit.axes: got 'structure'; expected a list of values from structure, "
     "reliability, fit, adversarial"),
    (_set("llm.roles.judge", 3), "llm.roles.judge: got 3; expected a model string or a mapping with keys model, "
     "temperature, max_tokens, top_p, timeout, concurrency, rpm, tpm, max_retries, parse_retries, api_base, "
     "api_key_env, seed, structured, extra, max_failure_share"),
    (_set("llm.roles.judge.model", []),
     "llm.roles.judge.model: got []; expected a model string or a non-empty list of model strings"),
    # ranges
    (_set("discover.k", -1), "discover.k: got -1; expected an integer >= 1"),
    (_set("audit.confidence", 1), "audit.confidence: got 1; expected a number in (0, 1)"),
    (_set("llm.defaults.temperature", -0.5), "llm.defaults.temperature: got -0.5; expected a number >= 0"),
    (_set("align.dpo.warmup_ratio", 1.0), "align.dpo.warmup_ratio: got 1.0; expected a number in [0, 1)"),
    (_set("repair.sweep.deltas", [0.0, -0.1]), "repair.sweep.deltas[1]: got -0.1; expected a number >= 0 or inf"),
    # allowed values
    (_set("audit.alpha_orientation", "chosen"),
     "audit.alpha_orientation: got 'chosen'; expected one of as_presented, chosen_oriented"),
    (_set("audit.baseline_reference", "others"), "audit.baseline_reference: got 'others'; expected one of other, none"),
    (_set("discover.pref_rank.mode", "yesno"), "discover.pref_rank.mode: got 'yesno'; expected one of score, yes_no"),
    (_set("align.dpo.mode", "qlora"), "align.dpo.mode: got 'qlora'; expected one of lora, full"),
    (_set("probe.balance", "over"), "probe.balance: got 'over'; expected one of none, subsample"),
    # a list item, a free-form map's value
    (_set("audit.templates", ["direct", "perrubric"]),
     "audit.templates[1]: got 'perrubric'; expected one of direct, per_rubric"),
    (_set("drift.methods", ["seed", "gcg"]),
     "drift.methods[1]: got 'gcg'; expected one of seed, random, icl, textgrad, ours"),
    (_set("data.sources.mine", {"loader": "csv"}),
     "data.sources.mine.loader: got 'csv'; expected one of demo, hf, rmb, local"),
    (_set("probe.datasets.mine", {"format": "healthbench"}), "probe.datasets.mine.path: missing; expected a "
     "non-empty string"),
    # null where it is not allowed; a bool where an int is expected
    (_set("audit.runs", None), "audit.runs: got None; expected an integer >= 1"),
    (_set("drift.seed_rubrics.demo", None), "drift.seed_rubrics.demo: got None; expected a non-empty string"),
    (_set("audit.n_attacks", True), "audit.n_attacks: got True; expected an integer >= 1"),
    (_set("llm.defaults.max_tokens", False), "llm.defaults.max_tokens: got False; expected an integer >= 1"),
])
def test_bad_values_give_one_exact_line(project, edit, message):
    params = copy.deepcopy(REPO_PARAMS)
    edit(params)
    _write(project, params)
    assert _error() == f"params.yaml: {message}"


@pytest.mark.parametrize("overrides", [
    ["repair.max_criteria=null", "drift.limits.train=null", "align.dpo.max_steps=null", "probe.encoder=null",
     "repair.study.storage=null", "drift.gate.seed=null", "probe.class_weight=null", "repair.operators=null"],
    ["repair.sweep.deltas=[0, 0.5, inf, .inf]", "audit.confidence=0.9", "llm.defaults.temperature=0",
     "audit.tau=7.5", "audit.paraphrases=1", "align.dpo.epochs=2"],
    ["llm.roles.judge=openai/gpt-4o-mini", "llm.roles.extractor.extra={reasoning_effort: low}",
     "data.sources.mine={loader: local, path: x.jsonl, format: columns}", "align.rubrics.demo.seed_prompt_id=3"],
    # README's `dvc exp run --set-param` example
    ["llm.roles.judge.model=[deepseek/deepseek-chat,openai/gpt-4o-mini,mistral/mistral-large-latest]",
     "llm.roles.judge.temperature=0", "llm.roles.extractor.model=deepseek/deepseek-chat",
     "llm.roles.extractor.parse_retries=2"],
])
def test_valid_overrides_pass(project, overrides):
    load_params("params.yaml", overrides)


def test_readme_small_sizes_validate(project):
    from tests.project.test_readme import SMALL

    load_params("params.yaml", [f"{k}={v}" for k, v in SMALL.items()])


def test_several_errors_are_all_listed(project):
    msg = _error(["audit.runs=0", "audit.samples=0", "audit.tau=11"])
    assert msg == ("params.yaml: audit.runs: got 0; expected an integer >= 1 (from --set audit.runs=0); "
                   "params.yaml: audit.samples: got 0; expected an integer >= 1 (from --set audit.samples=0); "
                   "params.yaml: audit.tau: got 11; expected a number in [0, 10] (from --set audit.tau=11)")


def test_file_error_has_no_override_suffix_even_with_other_overrides(project):
    params = copy.deepcopy(REPO_PARAMS)
    params["audit"]["runs"] = "abc"
    _write(project, params)
    assert _error(["data.seed=7"]) == "params.yaml: audit.runs: got 'abc'; expected an integer >= 1"


def test_cli_prints_one_line_and_exits_2(project, capsys):
    from rubriclab.cli import main

    assert main(["audit", "--dataset", "demo_helpful", "--set", "audit.runs=abc"]) == 2
    captured = capsys.readouterr()
    assert captured.err == ("rubriclab audit: error: params.yaml: audit.runs: got 'abc'; expected an integer >= 1 "
                            "(from --set audit.runs=abc)\n")
    assert "Traceback" not in captured.err + captured.out


def test_bad_size_stops_the_stage_before_it_runs(project, monkeypatch, capsys):
    import rubriclab.stages.audit as audit_stage
    from rubriclab.cli import main

    calls = []
    monkeypatch.setattr(audit_stage, "run_audit_stage", lambda *a, **k: calls.append(a))
    assert main(["audit", "--dataset", "demo_helpful", "--set", "audit.pool_size=-3"]) == 2
    assert "audit.pool_size: got -3; expected an integer >= 1" in capsys.readouterr().err
    # the DVC entry point reads params.yaml itself: the error is raised at load, the stage never starts
    params = copy.deepcopy(REPO_PARAMS)
    params["audit"]["pool_size"] = -3
    _write(project, params)
    with pytest.raises(ConfigError, match=r"^params.yaml: audit.pool_size: got -3; expected an integer >= 1$"):
        audit_stage.main(["--dataset", "demo_helpful"])
    assert calls == []


def test_a_dvc_stage_script_shows_a_bad_value_as_one_line_and_exit_2(tmp_path):
    # what `dvc repro` prints: the stage script's stderr
    import subprocess
    import sys

    params = tmp_path / "params.yaml"
    params.write_text("audit:\n  runs: abc\n")
    proc = subprocess.run([sys.executable, "-m", "rubriclab.stages.audit", "--dataset", "x"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("rubriclab.stages.audit: error: params.yaml: audit.runs: got 'abc'; "
                                   "expected an integer >= 1")
    assert "Traceback" not in proc.stderr
