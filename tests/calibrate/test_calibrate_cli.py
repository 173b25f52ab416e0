"""`rubriclab calibrate export|import` on a project holding an audit's adversarial items."""

from __future__ import annotations

import json

import pandas as pd

from rubriclab.cli import main
from rubriclab.data import Pair, write_splits


def _project(tmp_path):
    pairs = [Pair(id=f"p{i}", domain="t", prompt=f"Question {i}?", chosen=f"Good {i}.", rejected=f"Bad {i}.")
             for i in range(4)]
    write_splits({"audit": pairs}, tmp_path / "outputs/data/premise/d")
    audit = tmp_path / "outputs/audit/d"
    audit.mkdir(parents=True)
    attacks = [{"criterion": c, "attempt": i, "pair_id": f"p{i}", "item_id": f"p{i}", "strategy": "Open-ended",
                "response": f"ATTACK {c} {i}", "score": 9.0, "verdict": "EXPLOITING" if i % 2 else "GENUINE",
                "exploiting": bool(i % 2), "high": True, "status": "ok", "error": None}
               for c in ("a", "b") for i in range(4)]
    attacks.append({**attacks[0], "attempt": 9, "score": 3.0, "high": False, "verdict": None, "exploiting": None})
    genuine = [{"criterion": c, "pair_id": f"p{i}", "item_id": f"p{i}", "response": f"Good {i}.", "score": 8.0,
                "verdict": "GENUINE", "exploiting": False, "high": True, "status": "ok", "error": None}
               for c in ("a", "b") for i in range(4)]
    pd.DataFrame(attacks).to_parquet(audit / "src.adversarial.items.parquet")
    pd.DataFrame(genuine).to_parquet(audit / "src.adversarial.baseline_items.parquet")
    (tmp_path / "params.yaml").write_text("{}\n")
    return tmp_path


def test_export_then_import_reports_agreement_and_verifier_precision(tmp_path, capsys):
    root = _project(tmp_path)
    assert main(["calibrate", "export", "--params", str(root / "params.yaml"), "--dataset", "d", "--source", "src",
                 "--n-adversarial", "4", "--n-baseline", "2"]) == 0
    out = root / "outputs/calibration/d/src"
    sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    key = pd.read_csv(out / "key.csv", dtype={"sample_id": str})
    assert len(sheet) == 6 and not {"pool", "verdict", "score"} & set(sheet.columns)
    assert (key["pool"] == "adversarial").sum() == 4 and (key["pool"] == "baseline").sum() == 2
    truth = dict(zip(key["sample_id"], key["verdict"]))  # annotators who agree with the verifier everywhere
    files = []
    for name in ("ann1", "ann2", "ann3"):
        filled = sheet.assign(label=[truth[s] for s in sheet["sample_id"]], annotator=name)
        path = root / f"{name}.csv"
        filled.to_csv(path, index=False)
        files.append(str(path))
    assert main(["calibrate", "import", "--sheet-dir", str(out), *files, "--n-boot", "200"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["n_majority"] == 6
    verifier = report["verifier"]["all"]
    assert verifier["precision"]["value"] == 1.0 and verifier["recall"]["value"] == 1.0
    assert "Wilson" in (out / "report.md").read_text()
    bad = root / "bad.csv"
    sheet.assign(label="maybe", annotator="x").to_csv(bad, index=False)
    assert main(["calibrate", "import", "--sheet-dir", str(out), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "label" in err and "EXPLOITING or GENUINE" in err
