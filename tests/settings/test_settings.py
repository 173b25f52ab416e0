"""One source of truth for settings: each params.yaml field has its one default in rubriclab.settings, the
stages and packages read it from there, MLflow and `rubriclab params` show every effective value."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from mlflow import MlflowClient

from rubriclab.errors import ConfigError
from rubriclab.settings import Audit, Discover, Gate, Params, Premise

SRC = Path(__file__).resolve().parents[2] / "src/rubriclab"


def test_an_empty_params_file_gets_every_default_and_the_defaults_satisfy_their_ranges(tmp_path):
    from rubriclab.config import load_params

    (tmp_path / "params.yaml").write_text("{}\n")
    p = load_params(tmp_path / "params.yaml")
    assert p.given() == {}
    assert p.model_dump() == Params().model_dump()
    assert (p.data.seed, p.audit.runs, p.audit.n_boot_paired, p.drift.val_budget, p.drift.gate.epsilon,
            p.align.dpo.lr, p.probe.n_boot, p.recorded.n_boot, p.tracking.experiment) == (
        42, 5, 5000, 30, 0.05, 1e-4, 10000, 2000, "rubriclab")
    assert p.align.dpo.learning_rate is None  # null: the paper's rate for the mode
    Params.model_validate(Params().model_dump(exclude_none=True))  # every default passes its own range


def test_the_packages_take_their_defaults_from_the_models():
    from rubriclab.audit._validity import ATTACK_BOUNDS, PARAPHRASE_BOUNDS
    from rubriclab.data._splits import PREMISE_DEFAULTS
    from rubriclab.llm import DEFAULT_STORE
    from rubriclab.settings import AttackCheck, Llm, ParaphraseCheck, as_section
    from rubriclab.stages.drift_check import gate_settings

    # discover() and run_audit() read their section through the schema: a mapping gets every other default there
    assert as_section("discover", {"k": 3}) == Discover(k=3) and as_section("audit", None) == Audit()
    with pytest.raises(ConfigError, match=r"^params.yaml: discover.k: got 0; expected an integer >= 1$"):
        as_section("discover", {"k": 0})
    assert PARAPHRASE_BOUNDS == ParaphraseCheck().model_dump() and ATTACK_BOUNDS == AttackCheck().model_dump()
    assert DEFAULT_STORE == Llm().store
    assert PREMISE_DEFAULTS == Premise().model_dump(exclude={"sources"})
    # the gate's settings are the schema's Gate; its seed follows data.seed, whose one default is 42 (it was 0 here,
    # 42 everywhere else); the command's options are checked as params.yaml's values are
    assert gate_settings({}) == Gate(seed=42) and gate_settings({"data": {"seed": 0}}).seed == 0
    assert gate_settings({"drift": {"gate": {"epsilon": 0.1}}}, alpha=0.01) == Gate(epsilon=0.1, alpha=0.01, seed=42)
    with pytest.raises(ConfigError, match=r"drift\.gate\.alpha: got 2\.0; expected a number in \(0, 1\)"):
        gate_settings({}, alpha=2.0)


def test_no_stage_or_package_reads_params_with_its_own_default():
    offenders = [f"{path.relative_to(SRC)}:{i}" for path in SRC.rglob("*.py")
                 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"\bget\(params,", line)]
    assert offenders == []
    import rubriclab.config

    assert not hasattr(rubriclab.config, "get")


def test_a_bad_value_is_still_one_line():
    with pytest.raises(ConfigError) as err:
        Params.of({"audit": {"runs": "abc", "tau": 11}, "data": {"seed": "x"}})
    assert str(err.value) == ("params.yaml: data.seed: got 'x'; expected an integer; params.yaml: audit.runs: got "
                              "'abc'; expected an integer >= 1; params.yaml: audit.tau: got 11; expected a number in "
                              "[0, 10]")


def test_numbers_stay_as_written():
    # YAML `1` is written into outputs (settings.json epochs, calibration.json lam) and call-store keys as it is
    p = Params.of({"align": {"dpo": {"epochs": 1}}, "recorded": {"calibrate": {"lam": 1}},
                   "llm": {"defaults": {"temperature": 0}}})
    assert type(p.align.dpo.epochs) is int and type(p.recorded.calibrate.lam) is int
    assert type(p.llm.defaults.temperature) is int
    assert type(Params.of({"align": {"dpo": {"epochs": 1.0}}}).align.dpo.epochs) is float


def test_the_audit_card_shows_the_paired_bootstrap_it_used():
    from rubriclab.audit import card_settings

    ctx = SimpleNamespace(confidence=0.95, n_boot=2000, seed=42, tie_credit=0.5, alpha_orientation="as_presented")
    assert card_settings(ctx, Audit())["n_boot_paired"] == 5000  # was null in card.json while 5000 was used
    assert card_settings(ctx, Audit(n_boot_paired=2000))["n_boot_paired"] == 2000


def test_mlflow_logs_every_effective_value_defaults_included(tmp_path):
    from rubriclab.stages.data import run_data_stage
    from rubriclab.tracking import tracking_uri

    params = {"data": {"seed": 7, "sources": {"demo_helpful": {"loader": "demo", "domain": "helpful"}},
                       "premise": {"sources": ["demo_helpful"], "extraction": 4, "audit": 2, "heldout": 2}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    run_data_stage(params, tmp_path)
    client = MlflowClient(tracking_uri(tmp_path))
    run = client.search_runs([client.get_experiment_by_name("rubriclab").experiment_id])[0]
    logged = run.data.params
    assert logged["data.seed"] == "7" and logged["data.premise.extraction"] == "4"  # from the file
    assert logged["data.premise.dev"] == "0" and logged["data.max_chars.prompt"] == "32000"  # defaults
    assert logged["audit.n_boot_paired"] == "5000" and logged["drift.search.population"] == "12"


def test_rubriclab_params_prints_a_stages_effective_settings(tmp_path, monkeypatch, capsys):
    from rubriclab.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("drift:\n  val_budget: 3\n")
    assert main(["params", "drift"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["drift"]["val_budget"] == 3 and shown["drift"]["search"]["population"] == 12  # a default
    assert shown["data"]["seed"] == 42 and "audit" not in shown
    assert main(["params", "nope"]) == 2
    assert main(["params", "--set", "audit.runs=abc"]) == 2
    assert "audit.runs: got 'abc'; expected an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("build,message", [
    (lambda: __import__("rubriclab.drift", fromlist=["x"]).DriftSettings.of({"search": {"population": 0}}),
     "params.yaml: drift.search.population: got 0; expected an integer >= 1"),
    (lambda: __import__("rubriclab.drift", fromlist=["x"]).DriftSettings.of({"methods": ["ours", "bogus"]}),
     "params.yaml: drift.methods[1]: got 'bogus'; expected one of seed, random, icl, textgrad, ours"),
    (lambda: __import__("rubriclab.align._train", fromlist=["x"]).DPOSettings.of({"mode": "qlora"}),
     "params.yaml: align.dpo.mode: got 'qlora'; expected one of lora, full"),
    (lambda: __import__("rubriclab.repair", fromlist=["x"]).RepairSettings.of({"packet": {"margin": -1.0}}),  # had no check at all
     "params.yaml: repair.packet.margin: got -1.0; expected a number >= 0"),
    (lambda: __import__("rubriclab.recorded", fromlist=["x"]).Settings(n_boot=0),
     "params.yaml: recorded.n_boot: got 0; expected an integer >= 1"),
    (lambda: __import__("rubriclab.audit", fromlist=["x"]).AuditContext(gateway=None, judges=[], tie_credit=2),
     "params.yaml: audit.tie_credit: got 2; expected a number in [0, 1]"),
])
def test_the_flat_settings_classes_take_their_ranges_from_the_schema(build, message):
    """No settings class holds a copied range: DriftSettings, DPOSettings and RepairSettings hold their typed
    sections, recorded Settings and AuditContext check their flat fields at their places in params.yaml, so the
    message is the schema's, naming that place."""
    with pytest.raises(ConfigError) as err:
        build()
    assert str(err.value) == message
