"""Verifier calibration against human labels (PReMISE App. B.5) on a project's audit outputs: the sheet is
sampled from ``outputs/audit/<dataset>/<source>.adversarial.{items,baseline_items}.parquet``; the report is
written beside the sheet. Not a DVC stage: it waits for people to label."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.audit import load_sources
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.repair import (
    calibration_report,
    calibration_sample,
    export_sheet,
    read_labels,
    report_markdown,
    sampling_notes,
)


def export_calibration(project: Path, dataset: str, source: str, *, n_adversarial: int, n_baseline: int,
                       seed: int = 0, audit_dir: Path | None = None, out: Path | None = None) -> dict[str, Any]:
    """Write the labelling sheet, key and instructions; returns ``{"paths", "notes"}`` (notes: shortfalls)."""
    audit_dir = audit_dir or project / "outputs/audit" / dataset
    attacks = audit_dir / f"{source}.adversarial.items.parquet"
    genuine = audit_dir / f"{source}.adversarial.baseline_items.parquet"
    for path in (attacks, genuine):
        if not path.exists():
            raise ConfigError(f"{path}: no adversarial items for source {source!r}; run the audit with the "
                              "adversarial axis first (`dvc repro audit`)")
    pairs = read_pairs(project / "outputs/data/premise" / dataset / "audit.parquet")
    try:
        criteria = {c.id: c.description for rs in load_sources(project, dataset, [source]).values()
                    for c in rs.criteria}
    except ConfigError:
        criteria = None  # a source the audit named by path: the sheet shows criterion ids only
    sheet, key = calibration_sample(pd.read_parquet(attacks), pd.read_parquet(genuine),
                                    {p.id: p.prompt for p in pairs}, n_adversarial=n_adversarial,
                                    n_baseline=n_baseline, seed=seed, source=source, criteria=criteria)
    paths = export_sheet(sheet, key, out or project / "outputs/calibration" / dataset / source)
    return {"paths": paths, "notes": sampling_notes(key)}


def import_calibration(sheet_dir: Path, label_files: list[str], *, confidence: float = 0.95, n_boot: int = 2000,
                       seed: int = 0) -> dict[str, Any]:
    """Read the annotators' sheets, write ``report.md`` and ``report.json`` into ``sheet_dir``; returns the
    report and its markdown."""
    key = pd.read_csv(sheet_dir / "key.csv", dtype={"sample_id": str})
    labels = read_labels(label_files, sheet_ids=set(key["sample_id"]))
    report = calibration_report(labels, key, confidence=confidence, n_boot=n_boot, seed=seed)
    md = report_markdown(report)
    atomic.write_text(sheet_dir / "report.md", md)
    atomic.write_json(sheet_dir / "report.json", report, indent=2, default=str)
    return {"report": report, "markdown": md, "path": sheet_dir / "report.md"}
