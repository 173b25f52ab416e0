"""``rubriclab <verb>``: thin wrappers over library functions."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

from rubriclab.errors import RubricLabError


def _ad_hoc_formats() -> list[str]:
    """The recorded formats a bare path can be read with: every registered one but ``store``, which rebuilds a
    stage's requests and so needs a params.yaml source (rubriclab.recorded.formats)."""
    from rubriclab.settings import RECORDED_FORMATS

    return [f for f in RECORDED_FORMATS if f != "store"]


def _setting_help(section: str, key: str, what: str | None = None) -> str:
    """The help of an option that stands in for a setting (``section`` dotted, e.g. ``drift.gate``): what the setting
    is and its default, both read from the schema (rubriclab.settings), never written here."""
    from rubriclab.settings import Params

    model = Params
    for part in section.split("."):
        model = _model_of(model.model_fields[part])
    field = model.model_fields[key]
    default = field.get_default(call_default_factory=True)
    shown = "null" if default is None else f"{default:g}" if isinstance(default, float) else str(default)
    return f"{what or field.description} (default: {section}.{key}, {shown})"


def _model_of(field):  # the section model a (possibly optional) field holds
    import typing

    tp = field.annotation
    for arg in (tp, *typing.get_args(tp)):
        if isinstance(arg, type) and hasattr(arg, "model_fields"):
            return arg
    raise TypeError(f"{tp!r} is not a section")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", default=None, help="params.yaml to read (default: nearest one upwards)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a param, e.g. --set data.seed=7 (repeatable)")


def _load(args: argparse.Namespace) -> tuple[dict, Path]:
    from rubriclab.config import find_project_dir, load_params

    project = Path(args.params).resolve().parent if args.params else find_project_dir()
    return load_params(args.params or project / "params.yaml", args.overrides), project


def cmd_data(args: argparse.Namespace) -> int:
    from rubriclab.stages.data import run_data_stage

    params, project = _load(args)
    report = run_data_stage(params, project)
    print(json.dumps(report["counts"], indent=2))
    return 0


def cmd_discover(args: argparse.Namespace) -> int:
    from rubriclab.stages.discover import run_discover_stage

    params, project = _load(args)
    out = run_discover_stage(params, project, args.dataset, args.k)
    for name, path in sorted(out["written"].items()):
        print(f"{name:<28} {path}")
    m = out["metrics"]
    print(f"K discovered={m['k_discovered']} pref_repaired={m['k_pref_repaired']} from {m['candidates']} candidates "
          f"({m['pairs_failed']} of {m['pairs']} extraction replies rejected or unparseable)")
    for name, sf in sorted((out["report"].get("shortfall") or {}).items()):
        print(f"{name}: {sf['got']} of {sf['asked']} criteria asked — {sf['reason']}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from rubriclab.stages.audit import run_audit_stage

    params, project = _load(args)
    axes = [a.strip() for a in args.axes.split(",")] if args.axes else None
    sources = [s.strip() for s in args.sources.split(",")] if args.sources is not None else (
        [] if args.rubrics else None)
    out_dir = Path(args.out) if args.out else project / "outputs/audit_cli" / args.dataset
    out = run_audit_stage(params, project, args.dataset, sources=sources, rubric_files=[Path(p) for p in args.rubrics],
                          axes=axes, out_dir=out_dir)
    print(out["table"].to_string(index=False))
    print(f"\naudit card: {out['out'] / 'card.md'}")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from rubriclab.stages.repair import run_repair_stage

    params, project = _load(args)
    dataset = args.dataset or next(iter(params.discover.datasets), None)
    if not dataset:
        print("rubriclab repair: error: --dataset is required (no discover.datasets in params.yaml)", file=sys.stderr)
        return 2
    sources = [s.strip() for s in args.sources.split(",")] if args.sources is not None else (
        [] if args.rubrics else None)
    deltas = None if args.sweep else [args.delta]
    out_dir = Path(args.out) if args.out else project / "outputs/repair_cli" / dataset
    out = run_repair_stage(params, project, dataset, sources=sources, rubric_files=[Path(p) for p in args.rubrics],
                           deltas=deltas, candidates=[args.candidates] if args.candidates else None, out_dir=out_dir,
                           storage_url=args.storage, study_name=args.study)
    print(out["summary"])
    print(f"outputs: {out['out']}")
    return 0


def cmd_calibrate_export(args: argparse.Namespace) -> int:
    from rubriclab.stages.calibrate import export_calibration

    params, project = _load(args)
    out = export_calibration(project, args.dataset, args.source, n_adversarial=args.n_adversarial,
                             n_baseline=args.n_baseline, seed=args.seed,
                             audit_dir=Path(args.audit_dir) if args.audit_dir else None,
                             out=Path(args.out) if args.out else None)
    for note in out["notes"]:
        print(note)
    for what, path in out["paths"].items():
        print(f"{what:<9} {path}")
    return 0


def cmd_calibrate_import(args: argparse.Namespace) -> int:
    from rubriclab.stages.calibrate import import_calibration

    out = import_calibration(Path(args.sheet_dir), args.labels, confidence=args.confidence, n_boot=args.n_boot,
                             seed=args.seed)
    print(out["markdown"])
    print(f"report: {out['path']}")
    return 0


def cmd_calibrate_verdicts(args: argparse.Namespace) -> int:
    from rubriclab import atomic
    from rubriclab.calibrate import calibrate, load_recorded, verdict_table
    from rubriclab.settings import Params, RecordedCalibrate

    # a shipped set or a path with its format needs no project; a named source is read from params.yaml
    params, project = ({}, Path.cwd()) if args.source.startswith("shipped:") or args.format else _load(args)
    p = Params.of(params)
    # an option not given: recorded.calibrate's value (params.yaml's, else the schema's default)
    cal = (p.recorded.calibrate or RecordedCalibrate()).model_dump()
    opts = {k: cal[k] if getattr(args, k) is None else getattr(args, k) for k in ("order", "none", "seed", "lam")}
    fraction = cal["label_fraction"] if args.label_fraction is None else args.label_fraction
    confidence = p.recorded.confidence if args.confidence is None else args.confidence
    rs = load_recorded(args.source, project, args.format, sources=p.recorded.sources, llm=p.llm, data_seed=p.data.seed)
    table = verdict_table(rs, args.judge, args.condition, order=opts["order"], none=opts["none"])
    labelled = None
    if args.labelled:
        labelled = [ln.strip() for ln in Path(args.labelled).read_text(encoding="utf-8").splitlines() if ln.strip()]
    res = calibrate(table, labelled=labelled, label_fraction=None if labelled else fraction, seed=opts["seed"],
                    confidence=confidence, lam=None if opts["lam"] is None or opts["lam"] < 0 else opts["lam"])
    print("\n".join(res.lines()))
    if args.json:
        atomic.write_json(args.json, res.to_dict(), indent=2, default=str)
        print(f"json: {args.json}")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from rubriclab.stages.probe import run_probe_stage

    params, project = _load(args)
    out_dir = Path(args.out) if args.out else project / "outputs/probe_cli"
    out = run_probe_stage(params, project, data_files=[Path(p) for p in args.data] or None,
                          rubric_files=[Path(p) for p in args.rubrics] or None, out_dir=out_dir)
    print(out["summary"])
    print(f"outputs: {out['out']}")
    return 0


def cmd_drift_search(args: argparse.Namespace) -> int:
    from rubriclab.stages.drift import run_drift_stage

    params, project = _load(args)
    setting = args.setting or next(iter(params.drift.settings), None)
    if not setting:
        print("rubriclab drift search: error: --setting is required (no drift.settings in params.yaml)",
              file=sys.stderr)
        return 2
    out_dir = Path(args.out) if args.out else project / "outputs/drift_cli" / setting
    out = run_drift_stage(params, project, setting, seed_file=Path(args.seed_rubric) if args.seed_rubric else None,
                          out_dir=out_dir, storage_url=args.storage)
    print(out["summary"])
    print(f"outputs: {out['out']}")
    return 0


def cmd_align(args: argparse.Namespace) -> int:
    from rubriclab.stages.align import run_align_stage

    params, project = _load(args)
    setting = args.setting or next(iter(params.align.settings), None)
    if not setting:
        print(f"rubriclab align {args.action}: error: --setting is required (no align.settings in params.yaml)",
              file=sys.stderr)
        return 2
    out_dir = Path(args.out) if args.out else project / "outputs/align_cli" / setting
    steps = ("label", "train", "evaluate") if args.action == "all" else (args.action,)
    out = run_align_stage(params, project, setting, steps=steps, out_dir=out_dir,
                          seed_file=Path(args.seed_rubric) if args.seed_rubric else None,
                          biased_file=Path(args.biased_rubric) if args.biased_rubric else None)
    print(out["summary"])
    print(f"outputs: {out['out']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from rubriclab.stages.report import run_report_stage

    params, project = _load(args)
    out_dir = Path(args.out) if args.out else project / "outputs/report_cli"
    res = run_report_stage(params, project, out_dir=out_dir, ui_url=args.ui_url, track=not args.no_track)
    print(f"report: {res['path']} ({len(res['sections'])} sections)")
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    from rubriclab import ui

    params, project = _load(args)
    ui.check_port(args.host, args.port)  # a busy port: one line naming its process, exit 2 (not a second server)
    cmd = ui.ui_command(project, params.tracking.experiment, host=args.host, port=args.port, workers=args.workers)
    if cmd["experiment_id"] is None:
        print("rubriclab ui: no stage has logged a run yet; the UI opens empty (run `dvc repro` first)",
              file=sys.stderr)
    print(f"MLflow UI: {cmd['url']}  (store {cmd['uri']}; Ctrl-C stops it)", flush=True)
    return ui.serve(cmd["argv"], cmd["env"])  # Ctrl-C, SIGTERM, SIGHUP stop the server and its workers too


def cmd_drift_check(args: argparse.Namespace) -> int:
    from rubriclab.stages.drift_check import run_drift_check

    params, project = _load(args)
    out = run_drift_check(params, project, old=args.old, new=args.new, old_id=args.old_id, new_id=args.new_id,
                          data=args.data, fmt=args.format, domain_field=args.domain_field, by=args.by,
                          bench=args.bench, clusters=args.clusters, limit=args.limit,
                          out_dir=Path(args.out) if args.out else None, judge_model=args.judge,
                          track=not args.no_track, alpha=args.alpha, samples=args.samples, epsilon=args.epsilon)
    res = out["result"]
    cols = ["domain", "role", "n", "n_failed_either", "agreement_old", "agreement_new", "diff", "ci_low", "ci_high",
            "q_value", "mde", "verdict"]
    print(res.domains[cols].round(3).to_string(index=False))
    if out["note"]:
        print(f"\nnote: {out['note']}")
    print(f"\n{res.verdict}")
    print(f"report: {out['paths']['report.md']}")
    return res.exit_code


def cmd_recorded(args: argparse.Namespace) -> int:
    from rubriclab.recorded import summary_lines
    from rubriclab.stages.recorded import run_recorded_stage

    params, project = _load(args)
    params = params.given()  # an ad-hoc --path source is added to what the file says
    gate = args.name == "gate"
    name = args.source if gate else args.name
    if not gate and args.source:
        print(f"rubriclab recorded: error: unexpected {args.source!r} after the source {args.name!r}; expected one "
              "source (or `rubriclab recorded gate <source> --judge … --from … --to …`)", file=sys.stderr)
        return 2
    if args.path:
        if not args.format:
            print(f"rubriclab recorded: error: --path needs --format ({', '.join(_ad_hoc_formats())})", file=sys.stderr)
            return 2
        shipped = args.path.startswith("shipped:")
        name = name or (args.path.removeprefix("shipped:") if shipped else Path(args.path).stem) or "adhoc"
        spec = {"path": args.path if shipped else str(Path(args.path).resolve()), "format": args.format}
        if args.experiment:
            spec["experiment"] = args.experiment
        for key in ("labels", "threshold"):  # inspect_ai: the human labels, the numeric grades' pass mark
            if getattr(args, key) is not None:
                spec[key] = args.labels if key == "labels" and args.labels == "target" else (
                    str(Path(args.labels).resolve()) if key == "labels" else args.threshold)
        if args.baseline:
            spec["baseline"] = args.baseline
        params = {**params, "recorded": {**(params.get("recorded") or {}),
                                         "sources": {**((params.get("recorded") or {}).get("sources") or {}),
                                                     name: spec}}}
    if not name:
        sources = sorted((params.get("recorded") or {}).get("sources") or {})
        print("rubriclab recorded: error: name a source (" + (", ".join(sources) or "none in params.yaml")
              + ") or give --path and --format", file=sys.stderr)
        return 2
    if gate:
        return _recorded_gate(args, params, project, name)
    out_dir = Path(args.out) if args.out else project / "outputs/recorded_cli" / name
    res = run_recorded_stage(params, project, name, out_dir=out_dir, track=not args.no_track)
    print("\n".join(summary_lines(res)))
    print(f"card: {res['out'] / 'card.md'}")
    return 0


def _recorded_gate(args: argparse.Namespace, params: dict, project: Path, name: str) -> int:
    from rubriclab.stages.recorded import run_leaderboard_gate, run_recorded_gate

    if args.judge and args.to_judge and not (args.from_ or args.to):  # two judges' leaderboards: reordered?
        res = run_leaderboard_gate(params, project, name, judge=args.judge, to_judge=args.to_judge,
                                   out_dir=Path(args.out) if args.out else None)
        print(res["verdict"])
        print(f"report: {res['paths']['report.md']}")
        return res["exit_code"]
    missing = [opt for opt, v in (("--judge", args.judge), ("--from", args.from_), ("--to", args.to)) if not v]
    if missing:
        print(f"rubriclab recorded gate: error: {', '.join(missing)} required (the two sides: --judge J --from "
              "CONDITION --to CONDITION, or --to-judge J2 for a second judge)", file=sys.stderr)
        return 2
    runs = run_recorded_gate(params, project, name, judge=args.judge, from_condition=args.from_, to_condition=args.to,
                             to_judge=args.to_judge, order=args.order, bench=args.bench, epsilon=args.epsilon,
                             out_dir=Path(args.out) if args.out else None)
    cols = ["domain", "role", "n", "n_failed_either", "agreement_old", "agreement_new", "diff", "ci_low", "ci_high",
            "q_value", "mde", "verdict"]
    for run in runs:
        res = run["result"]
        print(f"{res.old['name']} -> {res.new['name']} ({run['order']} order)")
        print(res.domains[cols].round(3).to_string(index=False))
        print(f"\n{res.verdict}")
        print(f"report: {run['paths']['report.md']}\n")
    return max(run["result"].exit_code for run in runs)


def cmd_calls(args: argparse.Namespace) -> int:
    from rubriclab.llm import open_store, store_location
    from rubriclab.reporting import format_ledger

    params, project = _load(args)
    loc = args.store or store_location(params, project)
    if "://" not in loc and not Path(loc).exists():
        print(f"no call store at {loc} yet: no model call has been made")
        return 0
    rows = open_store(loc).ledger()
    if args.stage:
        rows = [r for r in rows if r["stage"] == args.stage]
    print(json.dumps(rows, indent=2) if args.json else format_ledger(rows))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from rubriclab.doctor import run_doctor

    params, project = _load(args)
    return run_doctor(params, project, check_embedded=not args.skip_embedded)


def cmd_params(args: argparse.Namespace) -> int:
    import yaml

    from rubriclab.settings import STAGE_SECTIONS

    if args.stage and args.stage not in STAGE_SECTIONS:
        print(f"rubriclab params: error: unknown stage {args.stage!r}; expected one of "
              f"{', '.join(STAGE_SECTIONS)}", file=sys.stderr)
        return 2
    params, _ = _load(args)
    sections = STAGE_SECTIONS[args.stage] if args.stage else None
    effective = params.effective(sections)
    print(json.dumps(effective, indent=2, default=str) if args.json
          else yaml.safe_dump(effective, sort_keys=False, allow_unicode=True), end="")
    return 0


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    from rubriclab.settings import NONE_POLICIES, ORDER_CHOICES

    parser = argparse.ArgumentParser(
        prog="rubriclab",
        description="rubriclab: rubric-conditioned LLM judges as measurement instruments.",
    )
    sub = parser.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("data", help="load sources, clean them and write seeded splits (the `data` stage)")
    _common(p)
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("discover", help="discover rubrics from a dataset's extraction split (the `discover` stage)")
    _common(p)
    p.add_argument("--dataset", required=True, help="a source name under data.premise.sources")
    p.add_argument("--k", type=int, default=None, help="final rubric size K (default: discover.k)")
    p.set_defaults(func=cmd_discover)

    p = sub.add_parser("audit", help="audit rubric sources on a dataset (structure, reliability, fit, adversarial)")
    _common(p)
    p.add_argument("--dataset", required=True, help="a source name under data.premise.sources")
    p.add_argument("--rubrics", action="append", default=[], metavar="FILE",
                   help="a rubric file to audit (json/yaml/md/judge template); repeatable")
    p.add_argument("--sources", default=None, help="comma-separated rubric sources from outputs/rubrics/<dataset> "
                                                   "(default: audit.sources, or none when --rubrics is given)")
    p.add_argument("--axes", default=None, help="comma-separated subset of structure,reliability,fit,adversarial")
    p.add_argument("--out", default=None, help="folder for the card (default: outputs/audit_cli/<dataset>; the "
                                               "DVC stage alone writes outputs/audit/<dataset>)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("repair", help="reliability-constrained refinement of rubric sets (one δ, or the δ sweep)")
    _common(p)
    p.add_argument("--dataset", default=None, help="a source name under data.premise.sources "
                                                   "(default: the first of discover.datasets)")
    p.add_argument("--rubrics", action="append", default=[], metavar="FILE",
                   help="a rubric file to repair (json/yaml/md/judge template); repeatable")
    p.add_argument("--sources", default=None, help="comma-separated rubric sources from outputs/rubrics/<dataset> "
                                                   "(default: repair.sources, or none when --rubrics is given)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--delta", type=str, default=None,
                     help="one tolerance δ on the dev α loss (0 = constrained, inf = unconstrained)")
    how.add_argument("--sweep", action="store_true", help="sweep repair.sweep.deltas × candidates as an Optuna study")
    p.add_argument("--candidates", type=int, default=None, help="candidates per criterion (default: "
                                                                "repair.sweep.candidates)")
    p.add_argument("--storage", default=None, help="Optuna storage URL shared by several workers, e.g. "
                                                   "postgresql://user@host/db (default: repair.study.storage, else "
                                                   "a journal file in the output folder)")
    p.add_argument("--study", default=None, help="study name to join (default: derived from the inputs)")
    p.add_argument("--out", default=None, help="output folder (default: outputs/repair_cli/<dataset>; the DVC stage "
                                               "alone writes outputs/repair/<dataset>)")
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser("calibrate", help="human calibration of the VFR verifier: export a labelling sheet, import "
                                         "annotators' labels (agreement α; verifier precision/recall/F1); "
                                         "`calibrate verdicts`: a judge's verdicts + a few human labels -> "
                                         "the human preference rate (PPI)")
    cal = p.add_subparsers(dest="action", required=True)
    q = cal.add_parser("export", help="a stratified sheet of high-scoring responses (attacks and genuine) to label")
    _common(q)
    q.add_argument("--dataset", required=True)
    q.add_argument("--source", required=True, help="an audited rubric source (its adversarial items are sampled)")
    q.add_argument("--n-adversarial", type=int, default=25, help="attack responses scoring >= tau [paper: 25]")
    q.add_argument("--n-baseline", type=int, default=17, help="genuine responses scoring >= tau [paper: 17]")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--audit-dir", default=None, help="audit outputs to read (default: outputs/audit/<dataset>)")
    q.add_argument("--out", default=None, help="default: outputs/calibration/<dataset>/<source>")
    q.set_defaults(func=cmd_calibrate_export)
    q = cal.add_parser("import", help="read filled sheets (one per annotator) and report agreement and verifier P/R/F1")
    q.add_argument("--sheet-dir", required=True, help="the folder `calibrate export` wrote (holds key.csv)")
    q.add_argument("labels", nargs="+", help="filled sheet CSVs, one per annotator")
    q.add_argument("--confidence", type=float, default=0.95)
    q.add_argument("--n-boot", type=int, default=2000)
    q.add_argument("--seed", type=int, default=0)
    q.set_defaults(func=cmd_calibrate_import)
    q = cal.add_parser("verdicts", help="a judge's recorded verdicts + human labels on a few pairs -> the human "
                                        "preference rate: labels-only, judge-only, PPI (ppi_py) and isotonic "
                                        "estimates with their intervals, n and method")
    _common(q)
    q.add_argument("--source", required=True, help="a source under recorded.sources, shipped:llmbar_natural / "
                                                   "shipped:pandalm, or a path with --format")
    q.add_argument("--format", default=None, choices=_ad_hoc_formats(),
                   help="the layout of a --source path (the registered formats; store needs params.yaml)")
    q.add_argument("--judge", required=True)
    q.add_argument("--condition", required=True)
    # recorded.calibrate (the recorded stage's calibration step): None = params.yaml's value, else the schema's
    q.add_argument("--order", default=None, choices=list(ORDER_CHOICES),
                   help=_setting_help("recorded.calibrate", "order", "both: a pair's verdicts averaged over the "
                                                                     "presentation orders"))
    q.add_argument("--none", default=None, choices=list(NONE_POLICIES),
                   help=_setting_help("recorded.calibrate", "none", "a verdict that is none: counted 0.5 (half) or "
                                                                    "dropped (exclude); counted either way"))
    q.add_argument("--label-fraction", type=float, default=None,
                   help=_setting_help("recorded.calibrate", "label_fraction", "share of pairs given their human "
                                                                              "label by a seeded random draw"))
    q.add_argument("--labelled", default=None, help="a file of pair ids (one a line) the human labelled, instead of "
                                                    "a draw")
    q.add_argument("--seed", type=int, default=None, help=_setting_help("recorded.calibrate", "seed",
                                                                                      "seed of the label draw"))
    q.add_argument("--confidence", type=float, default=None,
                   help=_setting_help("recorded", "confidence", "interval level"))
    q.add_argument("--lam", type=float, default=None,
                   help=_setting_help("recorded.calibrate", "lam", "ppi_py's λ (1: plain PPI; -1: power-tuned PPI++, "
                                                                   "which under-covered with 10 labels)"))
    q.add_argument("--json", default=None, help="also write the result as JSON here")
    q.set_defaults(func=cmd_calibrate_verdicts)

    p = sub.add_parser("drift", help="rubric-induced preference drift: the biased rubric search and the drift gate")
    drift = p.add_subparsers(dest="action", required=True)
    q = drift.add_parser("search", help="biased rubric search + baselines on a benchmark-target setting, selection "
                                        "on val, comparison on test (the `drift` stage, into its own folder)")
    _common(q)
    q.add_argument("--setting", default=None, help="a data.ripd setting (default: the first of drift.settings)")
    q.add_argument("--seed-rubric", default=None, metavar="FILE",
                   help="seed judge template ({name, template} or RIPD .jsonl; default: drift.seed_rubrics)")
    q.add_argument("--storage", default=None, metavar="URL", help="Optuna storage for the search study (RDB URL)")
    q.add_argument("--out", default=None, help="output folder (default: outputs/drift_cli/<setting>)")
    q.set_defaults(func=cmd_drift_search)
    q = drift.add_parser("check", help="compare two rubrics on every domain (or prompt cluster); exit 1 when a "
                                       "domain's agreement drops significantly (the gate for rubric edits in CI)")
    _common(q)
    q.add_argument("--old", required=True, metavar="FILE", help="the current rubric (RIPD .jsonl, judge template "
                                                                "{name, template}, rubric set, criteria list, .md)")
    q.add_argument("--new", required=True, metavar="FILE", help="the edited rubric (same formats)")
    q.add_argument("--old-id", default=None, help="prompt_id of the line to use when --old is a RIPD .jsonl "
                                                  "(default: the last line)")
    q.add_argument("--new-id", default=None, help="prompt_id of the line to use when --new is a RIPD .jsonl "
                                                  "(default: the last line)")
    q.add_argument("--data", action="append", required=True, metavar="PATH|SOURCE",
                   help="preference pairs: a file (jsonl/json/parquet/csv, e.g. a data-stage split parquet) or a "
                        "data.sources name; repeatable")
    q.add_argument("--format", default=None, help="the file's layout: pairs, columns, or a dataset parser "
                                                  "(hh_rlhf, ultrafeedback, helpsteer3, arena, pku_saferlhf, rmb); "
                                                  "default: detected")
    q.add_argument("--domain-field", default=None, help="the field holding each pair's domain (default: domain)")
    q.add_argument("--by", choices=["auto", "domain", "cluster"], default="auto",
                   help="group by domain label or by prompt cluster (auto: domains when there are ≥2, else clusters)")
    q.add_argument("--bench", default=None, metavar="DOMAIN",
                   help="the benchmark domain: a drop elsewhere while it is preserved is directional drift")
    q.add_argument("--clusters", type=int, default=None, metavar="K",
                   help="prompt clusters (default: max(2, round(sqrt(n/2))), at most drift.gate.max_clusters)")
    q.add_argument("--limit", type=int, default=None, metavar="N", help="at most N pairs per domain/cluster (seeded)")
    q.add_argument("--samples", type=int, default=None, help=_setting_help("drift.gate", "samples"))
    q.add_argument("--alpha", type=float, default=None, help=_setting_help("drift.gate", "alpha"))
    q.add_argument("--epsilon", type=float, default=None, help=_setting_help("drift.gate", "epsilon"))
    q.add_argument("--judge", default=None, metavar="MODEL", help="litellm model string replacing judges[0]'s model")
    q.add_argument("--out", default=None, help="report folder (default: outputs/drift_check)")
    q.add_argument("--no-track", action="store_true", help="do not log an MLflow run")
    q.set_defaults(func=cmd_drift_check)

    p = sub.add_parser("align", help="propagation through DPO: label pairs under two rubrics, train DPO policies "
                                     "(TRL), evaluate them by best-of-n win rates (the `align` stage, step by step)")
    align = p.add_subparsers(dest="action", required=True)
    for action, text in (("label", "judge the train pairs under the seed and the second rubric; label sets and "
                                   "label agreement"),
                         ("train", "DPO per rubric x regime (bench, target, bench_target) on the label sets"),
                         ("evaluate", "best-of-n generations on held-out prompts, reward scores, third-party judge "
                                      "win rates (Table 4's shape)"),
                         ("all", "label, train and evaluate in one go")):
        q = align.add_parser(action, help=text)
        _common(q)
        q.add_argument("--setting", default=None, help="a data.ripd setting (default: the first of align.settings)")
        q.add_argument("--seed-rubric", default=None, metavar="FILE", help="the seed rubric (default: "
                       "align.rubrics.<setting>.seed; judge template, RIPD .jsonl, rubric set or criteria list)")
        q.add_argument("--biased-rubric", default=None, metavar="FILE", help="the second rubric, e.g. "
                       "outputs/drift/demo/selected.jsonl (default: align.rubrics.<setting>.biased)")
        q.add_argument("--out", default=None, help="output folder shared by the steps (default: "
                                                   "outputs/align_cli/<setting>)")
        q.set_defaults(func=cmd_align)

    p = sub.add_parser("probe", help="rubric-only probe classifiers, counterfactual flip tests and semantic analyses "
                                     "(the `probe` stage, into its own folder)")
    _common(p)
    p.add_argument("--data", action="append", default=[], metavar="FILE",
                   help="rubric-item data (HealthBench / ResearchRubrics JSON lines); repeatable; default: "
                        "probe.datasets")
    p.add_argument("--rubrics", action="append", default=[], metavar="FILE",
                   help="a rubric set whose criteria are judged as items over probe.rubric_sets.pairs; repeatable")
    p.add_argument("--out", default=None, help="output folder (default: outputs/probe_cli)")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("report", help="one self-contained HTML report of every stage's outputs, the models, MLflow "
                                      "links and the call ledger (the `report` stage, into its own folder)")
    _common(p)
    p.add_argument("--out", default=None, help="output folder (default: outputs/report_cli)")
    p.add_argument("--ui-url", default=None, help=_setting_help("report", "mlflow_ui"))
    p.add_argument("--no-track", action="store_true", help="do not log an MLflow run")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("ui", help="the MLflow UI on the project's tracking store, offline, opening on the runs table "
                       "(without MLflow's job runner unless MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true)")
    _common(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--workers", type=_at_least_one, default=1,
                   help="uvicorn worker processes (default 1, a local UI; mlflow's own default 4 is for a shared server)")
    p.set_defaults(func=cmd_ui)

    p = sub.add_parser("recorded", help="audit recorded verdicts of real judges without a model call (published "
                                        "files, a table, MLflow traces, the call store): the card of the `recorded` "
                                        "stage; `recorded gate`: the drift gate between two of a source's sides")
    _common(p)
    p.add_argument("name", nargs="?", default=None, help="a source under recorded.sources (or the name of --path); "
                                                         "`gate` followed by a source runs the drift gate between "
                                                         "two of its sides per domain")
    p.add_argument("source", nargs="?", default=None, help="after `gate`: the source")
    p.add_argument("--path", default=None, help="an ad-hoc source: a folder (llmbar, pandalm), a table file, a "
                                                "tracking URI / .db file (mlflow), or shipped:llmbar_natural / "
                                                "shipped:pandalm (the sets shipped with the package)")
    p.add_argument("--format", default=None, choices=_ad_hoc_formats(),
                   help="the layout of --path (the registered formats; store needs a params.yaml source)")
    p.add_argument("--experiment", default=None, help="mlflow: the experiment name or id")
    p.add_argument("--labels", default=None, help="inspect_ai: 'target' (the samples' targets) or a table of human "
                                                  "labels (sample_id, label)")
    p.add_argument("--threshold", type=float, default=None, help="inspect_ai: a numeric grade at or above it is "
                                                                 "correct")
    p.add_argument("--baseline", default=None, help="a condition compared with each other one within a judge")
    p.add_argument("--out", default=None, help="output folder (default: outputs/recorded_cli/<name>, for a gate "
                                               "outputs/recorded_cli/<name>/gate; the DVC stage alone writes "
                                               "outputs/recorded/<name>)")
    p.add_argument("--no-track", action="store_true", help="do not log an MLflow run")
    g = p.add_argument_group("gate", "`rubriclab recorded gate <source> --judge J --from C1 --to C2`: the drift gate "
                                     "(as `drift check`, on recorded verdicts: no model call) per domain; exit 1 when "
                                     "it flags. On a leaderboard source (alpaca_eval), `--judge J --to-judge J2` alone "
                                     "asks whether switching the judge reorders the models (exit 1 when a reversal "
                                     "is supported)")
    g.add_argument("--judge", default=None, help="the judge of the old side (and of the new one without --to-judge)")
    g.add_argument("--from", dest="from_", default=None, metavar="CONDITION", help="the old side's condition")
    g.add_argument("--to", default=None, metavar="CONDITION", help="the new side's condition")
    g.add_argument("--to-judge", default=None, help="the new side's judge (default: --judge)")
    g.add_argument("--order", default="original", choices=["original", "swapped", "both"],
                   help="the presentation order compared (both: one gate per order)")
    g.add_argument("--bench", default=None, help="the benchmark domain (a drop elsewhere while it is preserved is "
                                                 "directional drift)")
    g.add_argument("--epsilon", type=float, default=None, help=_setting_help("drift.gate", "epsilon"))
    p.set_defaults(func=cmd_recorded)

    p = sub.add_parser("calls", help="calls, tokens, cost, cache hits and failures per stage and role")
    _common(p)
    p.add_argument("--store", default=None, help="call store path or URL (default: llm.store)")
    p.add_argument("--stage", default=None, help="only this stage")
    p.add_argument("--json", action="store_true", help="print JSON rows")
    p.set_defaults(func=cmd_calls)

    p = sub.add_parser("doctor", help="configured models per role, whether their keys are set, embedded model check")
    _common(p)
    p.add_argument("--skip-embedded", action="store_true", help="do not load the embedded models")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("params", help="the effective settings (params.yaml with every default filled in) of a stage")
    _common(p)
    p.add_argument("stage", nargs="?", help="only the sections this stage reads (data, discover, audit, repair, "
                   "drift, align, probe, recorded, report)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_params)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RubricLabError as exc:
        from rubriclab.secrets import redact_text

        print(redact_text(f"rubriclab {args.verb}: error: {exc}"), file=sys.stderr)
        return 2


def entry() -> NoReturn:
    """The ``rubriclab`` command (and ``python -m rubriclab.cli``): ``main``'s status, through
    ``rubriclab.stages.exit_stage``: atexit handlers run, the interpreter's teardown of what the command imported is
    skipped (`rubriclab doctor` loads torch and both embedded models: ~2.7 s of a core after its last line). Imported
    here, before any command imports a library, so that its handler runs after theirs."""
    from rubriclab.stages import exit_stage

    exit_stage(main())


if __name__ == "__main__":
    entry()
