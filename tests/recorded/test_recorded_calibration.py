"""The recorded stage's calibration step: every judge × condition of a shipped set calibrated with one seeded
draw of labels, its PPI numbers equal to ppi_py's on the same inputs, nothing when the step is off, and the
report's paragraph and table."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rubriclab.stages.recorded import run_recorded_stage

ROOT = Path(__file__).resolve().parents[2]


def _params(**calibrate):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params = copy.deepcopy(params)
    params["recorded"]["n_boot"] = 50
    if calibrate:
        params["recorded"]["calibrate"] = {**params["recorded"]["calibrate"], **calibrate}
    return params


@pytest.fixture(scope="module")
def pandalm(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "llmbar_natural"
    res = run_recorded_stage(_params(), ROOT, "llmbar_natural", out_dir=out, track=False)
    return res, out


def test_every_cell_is_calibrated_with_one_draw_and_ppi_equals_ppi_py(pandalm):
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    res, out = pandalm
    table = pd.read_csv(out / "calibration.csv", keep_default_na=False, na_values=[""])
    cells = {(c["judge"], c["condition"]) for c in res["analysis"].cells}
    assert set(zip(table["judge"], table["condition"])) == cells and (table["skipped"].fillna("") == "").all()
    assert table["labels_only"].nunique() == 1  # one draw: the same labelled pairs in every cell
    meta = json.loads((out / "calibration.json").read_text())
    cell = meta["cells"][0]
    rs = res["set"]
    # output 1 preferred: "first" in the original order, "second" in the swapped one; tie / none count 0.5
    value = {("original", "first"): 1.0, ("original", "second"): 0.0, ("swapped", "first"): 0.0,
             ("swapped", "second"): 1.0}
    verdicts: dict[str, list[float]] = {}
    for j in rs.judgments:  # the judge's verdict per pair: the mean over the two presentation orders
        if j.judge == cell["judge"] and j.condition == cell["condition"]:
            verdicts.setdefault(j.pair_id, []).append(value.get((j.order, j.verdict), 0.5))
    assert {len(v) for v in verdicts.values()} == {2}
    human = {"1": 1.0, "2": 0.0, "tie": 0.5}
    labelled = set(cell["labelled"])
    ids = sorted(verdicts)
    Y = np.array([human[rs.pairs[p].label] for p in ids if p in labelled])
    Yhat = np.array([np.mean(verdicts[p]) for p in ids if p in labelled])
    Yhat_u = np.array([np.mean(verdicts[p]) for p in ids if p not in labelled])
    ppi = next(e for e in cell["estimates"] if e["method"] == "ppi")
    assert ppi["value"] == pytest.approx(float(np.ravel(ppi_mean_pointestimate(Y, Yhat, Yhat_u, lam=1))[0]), abs=1e-12)
    low, high = ppi_mean_ci(Y, Yhat, Yhat_u, alpha=0.05, lam=1)  # recorded.calibrate.lam: 1, plain PPI
    assert (ppi["low"], ppi["high"]) == pytest.approx((float(np.ravel(low)[0]), float(np.ravel(high)[0])), abs=1e-12)
    assert len(labelled) == 10 and len(ids) == 100  # 10% of LLMBar Natural's 100 pairs


def test_the_step_is_off_when_params_say_so(tmp_path):
    params = _params()
    params["recorded"]["calibrate"] = None
    run_recorded_stage(params, ROOT, "pandalm", out_dir=tmp_path / "p", track=False)
    assert not (tmp_path / "p/calibration.csv").exists()


def test_an_empty_calibrate_section_runs_the_step_with_the_schemas_defaults(tmp_path):
    """``recorded.calibrate: {}`` is the section with every default (only null turns the step off)."""
    from rubriclab.settings import RecordedCalibrate

    params = _params()
    params["recorded"]["calibrate"] = {}
    run_recorded_stage(params, ROOT, "pandalm", out_dir=tmp_path / "p", track=False)
    settings = json.loads((tmp_path / "p/calibration.json").read_text())["settings"]
    assert {k: settings[k] for k in RecordedCalibrate.model_fields} == RecordedCalibrate().model_dump()


def test_the_report_shows_the_calibration(pandalm, tmp_path):
    import shutil

    from rubriclab.report._recorded import recorded_sections

    _, out = pandalm
    shutil.copytree(out, tmp_path / "outputs/recorded/llmbar_natural")
    section = recorded_sections(tmp_path)[0]
    text = "\n".join(str(b[1]) + (str(b[2]) if len(b) > 2 else "") for b in section["blocks"])
    assert "### Calibration with a few human labels" in text and "held the all-labels value in" in text
    assert "Calibration per judge × condition" in text and "PPI [CI]" in text


def test_the_report_says_when_the_judge_does_not_help(tmp_path):
    """PandaLM's judges on 100 labels: PPI (λ = 1) is wider than labels-only (ESS < n), and the page says so."""
    from rubriclab.report._recorded import recorded_sections

    out = tmp_path / "outputs/recorded/pandalm"
    run_recorded_stage(_params(), ROOT, "pandalm", out_dir=out, track=False)
    table = pd.read_csv(out / "calibration.csv", keep_default_na=False, na_values=[""])
    worse = int((table["ess"] < table["n_labelled"]).sum())
    assert worse >= 1
    text = "\n".join(str(b[1]) for b in recorded_sections(tmp_path)[0]["blocks"] if b[0] == "md")
    assert f"In {worse} of {len(table)} cells the effective sample size is below n" in text


def test_lam_null_in_params_runs_power_tuned_ppi(tmp_path):
    """``recorded.calibrate.lam: null`` is PPI++ (ppi_py's power-tuned λ), not silently the default λ = 1."""
    params = _params(lam=None, coverage_draws=0)
    run_recorded_stage(params, ROOT, "pandalm", out_dir=tmp_path / "p", track=False)
    meta = json.loads((tmp_path / "p/calibration.json").read_text())
    assert meta["settings"]["lam"] is None
    ppi = [e for c in meta["cells"] for e in c.get("estimates", []) if e["method"] == "ppi"]
    assert ppi and all(e["interval"].startswith("PPI++ (power-tuned") for e in ppi), ppi[:1]
