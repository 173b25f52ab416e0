"""The report's probe section (report/_collect.py): the cross-validation table of every cohort is shown, and the
semantic figures are captioned with the dataset they count."""

from __future__ import annotations

import pandas as pd

from rubriclab.report._collect import probe_sections


def _cv(unit: str = "record-text clusters") -> pd.DataFrame:
    rows = []
    for model, mean in (("majority", 0.5), ("lr", 0.734)):
        for metric in ("balanced_accuracy", "f1"):
            rows.append({"model": model, "metric": metric, "mean": mean, "sd": 0.05, "n_folds": 5, "n_groups": 40,
                         "unit": unit, "reason": None})
    rows.append({"model": "lr", "metric": "roc_auc", "mean": float("nan"), "sd": float("nan"), "n_folds": 0,
                 "n_groups": 40, "unit": unit, "reason": "undefined in 5 fold(s)"})
    return pd.DataFrame(rows)


def test_probe_section_shows_each_cohorts_cv_table_and_per_dataset_figures(tmp_path):
    d = tmp_path / "outputs/probe"
    (d / "semantics/hb").mkdir(parents=True)
    (d / "semantics/rr").mkdir(parents=True)
    (d / "summary.md").write_text("# Rubric artifacts: probe\n\n## hb\n\ntext\n")
    _cv().to_csv(d / "hb.cv.csv", index=False)
    _cv().assign(mean=0.61).to_csv(d / "rr.cv.csv", index=False)
    for name in ("hb", "rr"):
        (d / f"semantics/{name}/lr_weights.png").write_bytes(b"\x89PNG fake")
    [section] = probe_sections(tmp_path)
    blocks = section["blocks"]
    md = "\n".join(b[1] for b in blocks if b[0] == "md")
    html = "\n".join(b[1] for b in blocks if b[0] == "html")
    assert "#### Cross-validation: hb" in md and "#### Cross-validation: rr" in md
    assert "folds by record-text clusters, 40 record-text clusters" in md
    assert "0.734 ± 0.050 (5 folds)" in html and "0.610 ± 0.050 (5 folds)" in html
    assert "— (undefined in 5 fold(s))" in html and "balanced_accuracy" in html
    captions = [b[1] for b in blocks if b[0] == "img"]
    assert captions == ["Semantic analysis of hb: lr weights (`semantics/hb/lr_weights.csv`)",
                        "Semantic analysis of rr: lr weights (`semantics/rr/lr_weights.csv`)"]
