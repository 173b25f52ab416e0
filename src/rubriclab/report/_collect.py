"""What the report shows: each stage's own outputs (its summary or card, which carry every interval's method,
level and n), its figures, the figures drawn here from the audit card, the recorded judges' cards (``_recorded``),
and the call ledger."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab.report._figures import card_scatter
from rubriclab.report._recorded import recorded_sections

SECTION_ORDER = ("recorded", "audit", "repair", "drift", "drift_check", "probe", "align", "ledger")


def _md(path: Path, demote: int = 1) -> str:
    """A stage's markdown with its headings pushed ``demote`` levels down (the report owns the top levels)."""
    out, fence = [], False
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# "):  # the stage's title: the report's section heading says it already
        lines = lines[1:]
    for line in lines:
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,5} ", line):
            line = "#" * demote + line
        out.append(line)
    return "\n".join(out)


def _img(path: Path, caption: str) -> tuple[str, str, bytes]:
    return ("img", caption, path.read_bytes())


# a markdown image alone on its line: ![caption](target) or ![caption](<target> "title")
_IMAGE_LINE = re.compile(r'^\s*!\[(?P<cap>[^\]]*)\]\(\s*<?(?P<target>[^()<>\s]+)>?(?:\s+"[^"]*")?\s*\)\s*$')
_PNG = b"\x89PNG\r\n\x1a\n"


def _md_blocks(path: Path, demote: int = 1, head: str = "") -> list[tuple]:
    """A stage's markdown (``_md``, after ``head``) as blocks, its own figures embedded: an image line whose
    target is a PNG file beside the markdown becomes an ``img`` block (the page loads nothing from beside
    it, and the renderer draws no markdown image); any other image line is left as text, noted if it names a
    local file that is not there."""
    blocks: list[tuple] = []
    text, fence = [head] if head else [], False
    for line in _md(path, demote).split("\n"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else _IMAGE_LINE.match(line)
        if m is None:
            text.append(line)
            continue
        cap, target = m.group("cap").strip(), m.group("target")
        figure = _local_png(path.parent, target)
        if figure is None:
            text.append(line if ":" in target else f"*Figure not embedded: `{target}` ({cap}) is not a PNG "
                                                   f"file beside `{path.name}`.*")
            continue
        if "".join(text).strip():
            blocks.append(("md", "\n".join(text)))
        blocks.append(("img", cap or target, figure))
        text = []
    if "".join(text).strip():
        blocks.append(("md", "\n".join(text)))
    return blocks


def _local_png(folder: Path, target: str) -> bytes | None:
    """The bytes of ``target``, a relative path to a PNG file inside ``folder``; None for anything else (a URL,
    an absolute path, a path leaving the folder, a missing file, a file that is not a PNG)."""
    if ":" in target or target.startswith(("/", "\\")):
        return None
    path = (folder / target).resolve()
    try:
        if not path.is_relative_to(folder.resolve()) or not path.is_file():
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return data if data.startswith(_PNG) else None


def _csv_details(path: Path, title: str) -> tuple[str, str, str]:
    table = pd.read_csv(path)
    return ("details", title, table.to_html(index=False, na_rep="—", border=0, classes="data"))


def audit_sections(project: Path) -> list[dict[str, Any]]:
    out = []
    for folder in sorted((project / "outputs/audit").glob("*/card.md")):
        d = folder.parent
        blocks: list[tuple] = _md_blocks(folder)
        card = json.loads((d / "card.json").read_text()) if (d / "card.json").exists() else {}
        sources = card.get("card") or {}
        level = (card.get("settings") or {}).get("confidence", 0.95)
        for x, y, xl, yl, title, diag in (
                ("app_in", "app_out", "App_in (in-domain applicability)", "App_out (out-of-domain)",
                 "Applicability in vs out of domain", True),
                ("alpha", "vfr", "Krippendorff's α (reliability)", "VFR (verified fool rate, adversarial)",
                 "Reliability vs adversarial robustness", False)):
            png, missing = card_scatter(sources, x, y, xl, yl,
                                        f"{title}; error bars: {level:.0%} percentile bootstrap intervals from the card",
                                        diagonal=diag)
            if png is not None:
                note = f" Not plotted (no value on this axis): {', '.join(missing)}." if missing else ""
                blocks.append(("img", f"{title} per rubric source (n per point in the card).{note}", png))
            else:
                blocks.append(("md", f"*{title}: no rubric source has both values in this card.*"))
        for csv in sorted(d.glob("*.per_criterion.csv")):
            blocks.append(_csv_details(csv, f"Per criterion: {csv.name.removesuffix('.per_criterion.csv')}"))
        out.append({"id": f"audit-{d.name}", "kind": "audit", "title": f"Audit card: {d.name}",
                    "run_name": f"audit@{d.name}", "blocks": blocks})
    return out


def repair_sections(project: Path) -> list[dict[str, Any]]:
    out = []
    for summary in sorted((project / "outputs/repair").glob("*/summary.md")):
        d = summary.parent
        blocks: list[tuple] = _md_blocks(summary)
        for src in sorted(p for p in d.iterdir() if p.is_dir()):
            if (src / "curve.png").exists():
                blocks.append(_img(src / "curve.png", f"{src.name}: the α–VFR operating curve on held-out pairs, "
                                                      "one point per δ (labels), from `curve.csv`"))
            if (src / "diff.md").exists():
                blocks += _md_blocks(src / "diff.md", demote=3,
                                     head=f"#### {src.name}: before/after text of the repaired criteria\n")
        out.append({"id": f"repair-{d.name}", "kind": "repair", "title": f"Repair: {d.name}",
                    "run_name": f"repair@{d.name}", "blocks": blocks})
    return out


def drift_sections(project: Path) -> list[dict[str, Any]]:
    out = []
    for summary in sorted((project / "outputs/drift").glob("*/summary.md")):
        d = summary.parent
        blocks: list[tuple] = _md_blocks(summary)
        if (d / "comparison.png").exists():
            blocks.append(_img(d / "comparison.png", "Bench and target agreement per method on test (intervals in "
                                                     "the table above)"))
        out.append({"id": f"drift-{d.name}", "kind": "drift", "title": f"Drift: {d.name}",
                    "run_name": f"drift@{d.name}", "blocks": blocks})
    gate = project / "outputs/drift_check"
    if (gate / "report.md").exists():
        blocks = _md_blocks(gate / "report.md")
        if (gate / "flipped.csv").exists():
            blocks.append(_csv_details(gate / "flipped.csv", "Flipped pairs (the verdict changed between rubrics)"))
        out.append({"id": "drift-gate", "kind": "drift_check", "title": "Drift gate (`rubriclab drift check`)",
                    "run_name": None, "blocks": blocks})
    return out


def probe_sections(project: Path) -> list[dict[str, Any]]:
    d = project / "outputs/probe"
    if not (d / "summary.md").exists():
        return []
    blocks: list[tuple] = _md_blocks(d / "summary.md")
    for csv in sorted(d.glob("*.cv.csv")):
        blocks += probe_cv_blocks(csv)
    sem = d / "semantics"
    for png in sorted(p for p in sem.rglob("*.png") if not p.name.startswith(".")):  # not temp files
        rel = png.relative_to(sem)
        cohort = rel.parent.as_posix() if rel.parent != Path(".") else "all datasets pooled"
        blocks.append(_img(png, f"Semantic analysis of {cohort}: {png.stem.replace('_', ' ')} "
                                f"(`semantics/{rel.with_suffix('.csv').as_posix()}`)"))
    return [{"id": "probe", "kind": "probe", "title": "Probe: rubric artifacts", "run_name": "probe",
             "blocks": blocks}]


def probe_cv_blocks(csv: Path) -> list[tuple]:
    """A cohort's cross-validation table (model × metric, mean ± sd over the folds, with n folds and the group
    unit), which the stage computes on the 80% of clusters not held out."""
    cv = pd.read_csv(csv)
    if cv.empty:
        return []
    cohort = csv.name.removesuffix(".cv.csv")

    def cell(r: pd.Series) -> str:
        if pd.isna(r["mean"]):
            return f"— ({r.get('reason') or 'undefined'})"
        sd = "—" if pd.isna(r["sd"]) else f"{r['sd']:.3f}"
        return f"{r['mean']:.3f} ± {sd} ({int(r['n_folds'])} folds)"

    table = cv.assign(cell=cv.apply(cell, axis=1)).pivot(index="model", columns="metric", values="cell")
    table = table.reindex(index=list(dict.fromkeys(cv["model"])), columns=list(dict.fromkeys(cv["metric"])))
    unit = cv["unit"].iloc[0] if "unit" in cv.columns else "records"
    groups = f", {int(cv['n_groups'].iloc[0])} {unit}" if "n_groups" in cv.columns else ""
    head = (f"#### Cross-validation: {cohort}\n\nMean ± sd (ddof=1) over group folds of the training share "
            f"(folds by {unit}{groups}); a fold where a metric is undefined is left out of its mean.")
    return [("md", head), ("html", table.reset_index().to_html(index=False, na_rep="—", border=0, classes="data"))]


def align_sections(project: Path) -> list[dict[str, Any]]:
    out = []
    for summary in sorted((project / "outputs/align").glob("*/summary.md")):
        d = summary.parent
        blocks: list[tuple] = _md_blocks(summary)
        if (d / "training/curves.png").exists():
            blocks.append(_img(d / "training/curves.png", "DPO training curves per policy (one point per batch)"))
        if (d / "win_rates.png").exists():
            blocks.append(_img(d / "win_rates.png", "Win rates of the left policy with their intervals"))
        out.append({"id": f"align-{d.name}", "kind": "align", "title": f"Align (DPO): {d.name}",
                    "run_name": f"align@{d.name}", "blocks": blocks})
    return out


LEDGER_COLUMNS = {"stage": "stage", "role": "role", "items": "items", "cache_hits": "cache hits",
                  "calls": "provider calls", "retries": "retries", "parse_failures": "parse failures",
                  "transport_failures": "transport failures", "failed": "failed calls",
                  "prompt_tokens": "prompt tokens", "completion_tokens": "completion tokens", "cost": "cost (USD)"}


def ledger_section(rows: list[dict[str, Any]], store: str) -> dict[str, Any]:
    if not rows:
        blocks: list[tuple] = [("md", f"No model call is recorded in the call store (`{store}`).")]
    else:
        table = pd.DataFrame(rows).reindex(columns=list(LEDGER_COLUMNS)).rename(columns=LEDGER_COLUMNS)
        total = {c: (table[c].sum() if c not in ("stage", "role") else "") for c in table.columns}
        total["stage"] = "TOTAL"
        table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
        blocks = [("md", f"Every model call of every stage, from the call store (`{store}`) at report time: items "
                         "asked, served from the store (cache hits), calls made to a provider, retries, parse and "
                         "transport failures, tokens and cost per stage and role."),
                  ("html", table.to_html(index=False, na_rep="—", border=0, classes="data",
                                         float_format=lambda v: f"{v:.4f}"))]
    return {"id": "ledger", "kind": "ledger", "title": "Call ledger", "run_name": None, "blocks": blocks}


def collect_sections(project: Path, ledger_rows: list[dict[str, Any]], store: str) -> list[dict[str, Any]]:
    """Every section whose stage produced outputs: the recorded judges first (real judges' findings), then the
    pipeline's stages in order, then the ledger."""
    return [*recorded_sections(project), *audit_sections(project), *repair_sections(project), *drift_sections(project),
            *probe_sections(project), *align_sections(project), ledger_section(ledger_rows, store)]
