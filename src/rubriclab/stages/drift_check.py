"""`rubriclab drift check`: the drift gate for a rubric edit, with the project's params, call store and
MLflow. Loads the two rubrics and the data, groups pairs by domain or by prompt cluster, runs
``rubriclab.drift.drift_check``, writes the report (``outputs/drift_check/`` by default) and logs one
MLflow run (``drift_check@<old>-><new>``) with the report as artifacts.

Optional settings under ``drift.gate`` in params.yaml (defaults in ``GATE_DEFAULTS``): ``alpha``, ``power``,
``confidence``, ``n_boot``, ``tie_credit``, ``epsilon``, ``samples``, ``seed`` (default ``data.seed``),
``max_clusters``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rubriclab.data import (
    FORMATS,
    Pair,
    drop_oversized,
    load_source_detailed,
    max_chars_of,
    read_pairs,
    read_rows,
    stable_hash,
)
from rubriclab.drift import DriftCheck, drift_check, prompt_clusters, write_gate_report
from rubriclab.errors import ConfigError, InputError
from rubriclab.judging import PairwiseRubric, load_pairwise_rubric
from rubriclab.llm import EMBEDDED_NOTE, check_calls, gateway_from_params, panel, prepare_roles, roles_from_params
from rubriclab.settings import Data, Gate, Params, as_section
from rubriclab.tracking import stage_run

GATE_DEFAULTS: dict[str, Any] = Gate().model_dump()  # rubriclab.settings.Gate: their one definition
PAIR_COLUMNS = {"id", "domain", "prompt", "chosen", "rejected"}
GROUPINGS = ("auto", "domain", "cluster")


def gate_settings(params: Params | dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """``drift.gate`` merged over ``GATE_DEFAULTS``, then the non-None ``overrides`` (CLI options)."""
    p = Params.of(params)  # unknown keys and bad values are refused here, one line each
    out = {**(p.drift.gate or Gate()).model_dump(), **{k: v for k, v in overrides.items() if v is not None}}
    if out["seed"] is None:
        out["seed"] = p.data.seed
    return out


def load_rubric(path: str | Path, prompt_id: str | None, label: str) -> PairwiseRubric:
    """A rubric file (RIPD JSON lines with ``prompt_id`` — default the last line —, judge template, rubric set,
    criteria list, markdown) as a PairwiseRubric; errors name the file and say which side it is."""
    p = Path(path)
    if not p.is_file():
        raise InputError("not found" if not p.exists() else "is not a file", file=str(p), field=label,
                         expected="a rubric file (RIPD .jsonl, judge template, rubric set, criteria list, .md)")
    return load_pairwise_rubric(p, prompt_id)


def detect_layout(path: Path) -> str:
    """``pairs`` (canonical pair records), ``columns`` (plain prompt/chosen/rejected columns) or the name of
    the dataset parser whose columns the file has (``hh_rlhf``, ``ultrafeedback``, ``helpsteer3``, …)."""
    rows = read_rows(path)
    if not rows:
        raise InputError("file has no rows", file=str(path), expected="at least one preference pair")
    cols = {key for _, row in rows for key in row}
    if PAIR_COLUMNS <= cols:
        return "pairs"
    if {"prompt", "chosen", "rejected"} <= cols:
        return "columns" if isinstance(rows[0][1].get("chosen"), str) else "ultrafeedback"
    if {"chosen", "rejected"} <= cols:
        return "hh_rlhf"
    for name, f in FORMATS.items():
        if name not in ("hh_rlhf", "ultrafeedback", "arena_expert") and set(f.required) <= cols:
            return name
    raise InputError(f"no known layout for columns {', '.join(sorted(cols))}", file=str(path),
                     expected="canonical pairs (id, domain, prompt, chosen, rejected), prompt/chosen/rejected "
                              f"columns, or a dataset layout named with --format ({', '.join(sorted(FORMATS))})")


def load_file(path: Path, *, fmt: str | None = None, domain_field: str | None = None,
              seed: int = 0, max_chars: dict[str, int] | None = None) -> tuple[list[Pair], Counter]:
    """Pairs from one local file, in any layout the data package reads. ``fmt``: ``pairs`` (canonical
    records, e.g. a data-stage split parquet), ``columns`` (prompt/chosen/rejected, optional id/domain) or a
    dataset parser name (``hh_rlhf``, ``ultrafeedback``, ``helpsteer3``, ``arena``, ``pku_saferlhf``, ``rmb``);
    default: detected from the file's columns. Pairs past ``max_chars`` (``data.max_chars``) are dropped and
    counted, whatever the layout, as the data stage drops them."""
    known = ("pairs", "columns", *FORMATS)
    if fmt is not None and fmt not in known:
        raise ConfigError(f"--format {fmt!r}: unknown; expected one of: {', '.join(known)}")
    fmt = fmt or detect_layout(path)
    if fmt == "pairs":
        drops: Counter = Counter()
        return drop_oversized(read_pairs(path), drops, max_chars_of(max_chars)), drops
    spec: dict[str, Any] = {"loader": "local", "path": str(path.resolve())}
    if fmt != "columns":
        spec["dataset"] = fmt
    elif domain_field and domain_field != "domain":
        spec["meta_columns"] = [domain_field]  # relabelled from meta by load_gate_data
    result = load_source_detailed(spec, path.parent, name=path.stem, seed=seed, max_chars=max_chars)
    return result.pairs, result.drops


def load_gate_data(specs: list[str], data: Data | dict, project: Path, *, fmt: str | None = None,
                   domain_field: str | None = None) -> tuple[list[Pair], list[str]]:
    """Pairs from each ``--data`` value: a file (cwd, then project relative) or a ``data.sources.<name>``
    entry of ``data`` (params.yaml's ``data`` section; its ``seed`` seeds a source's ``limit``); ``domain_field``
    relabels domains from that field. Returns the pairs and notes (drops, sources)."""
    if not specs:
        raise ConfigError("drift check: --data is required (a pair file or a data.sources name)")
    data = as_section("data", data)
    sources, seed = data.sources, data.seed
    max_chars = data.max_chars.model_dump()  # the data stage's size limits hold here too
    pairs: list[Pair] = []
    notes = []
    for spec in specs:
        path = next((p for p in (Path(spec), project / spec) if p.is_file()), None)
        if path is not None:
            got, drops = load_file(path, fmt=fmt, domain_field=domain_field, seed=seed, max_chars=max_chars)
            where = str(path)
        elif spec in sources:
            # the loader gets the source's keys as given: unset common keys (domain, limit) stay absent
            got, drops = _load_source(sources[spec].model_dump(exclude_unset=True), spec, project, seed, max_chars)
            where = f"data.sources.{spec}"
        else:
            raise InputError("is neither a file nor a data.sources entry", file=spec, field="--data",
                             expected="a pair file (jsonl/json/parquet/csv) or one of: "
                                      f"{', '.join(sorted(sources)) or '(no data.sources in params.yaml)'}")
        if domain_field and domain_field != "domain":
            got = [_relabel(p, domain_field, where) for p in got]
        dropped = sum(drops.values())
        notes.append(f"{where}: {len(got)} pairs" + (f" ({dropped} rows dropped: "
                                                    f"{', '.join(f'{k} {v}' for k, v in sorted(drops.items()))})"
                                                    if dropped else ""))
        pairs += got
    seen: set[str] = set()
    for p in pairs:
        if p.id in seen:
            raise InputError(f"pair id {p.id!r} appears more than once across --data", field="--data",
                             expected="each pair once (no file or source given twice)")
        seen.add(p.id)
    if not pairs:
        raise InputError("no pairs loaded", field="--data", expected="at least one preference pair")
    return pairs, notes


def _load_source(spec: Any, name: str, project: Path, seed: int,
                 max_chars: dict[str, int] | None = None) -> tuple[list[Pair], Counter]:
    res = load_source_detailed(spec, project, name=name, seed=seed, max_chars=max_chars)
    return res.pairs, res.drops


def _relabel(p: Pair, field: str, where: str) -> Pair:
    value = p.meta.get(field)
    if value in (None, ""):
        raise InputError(f"pair {p.id!r} has no value", file=where, field=field,
                         expected=f"a '{field}' field on every pair (--domain-field)")
    return Pair(id=p.id, domain=str(value), prompt=p.prompt, chosen=p.chosen, rejected=p.rejected,
                meta={**p.meta, "original_domain": p.domain})


def limit_per_domain(pairs: list[Pair], limit: int | None, seed: int) -> list[Pair]:
    """At most ``limit`` pairs per domain, a seeded choice by id hash (order kept)."""
    if not limit:
        return pairs
    by: dict[str, list[Pair]] = {}
    for p in pairs:
        by.setdefault(p.domain, []).append(p)
    keep = {p.id for group in by.values()
            for p in sorted(group, key=lambda q: stable_hash("drift-gate-limit", seed, q.id))[:limit]}
    return [p for p in pairs if p.id in keep]


def run_drift_check(params: Params | dict[str, Any], project: Path, *, old: str | Path, new: str | Path,
                    data: list[str], old_id: str | None = None, new_id: str | None = None, fmt: str | None = None,
                    domain_field: str | None = None, by: str = "auto", bench: str | None = None,
                    clusters: int | None = None, limit: int | None = None, out_dir: Path | None = None,
                    judge_model: str | None = None, track: bool = True, **overrides: Any) -> dict[str, Any]:
    """Run the gate; returns ``{"result": DriftCheck, "out": folder, "paths", "run_id", "note"}``.
    ``overrides``: ``alpha``, ``samples``, ``epsilon``, … over ``drift.gate`` (None = keep)."""
    if by not in GROUPINGS:
        raise ConfigError(f"--by {by!r}; expected one of: {', '.join(GROUPINGS)}")
    params = Params.of(params)  # validated once: unknown keys and bad values are refused here
    cfg = gate_settings(params, **overrides)
    old_r = load_rubric(old, old_id, "--old")
    new_r = load_rubric(new, new_id, "--new")
    if old_r.name == new_r.name:  # e.g. two lines of one RIPD file keep their ids; two files named alike don't
        old_r, new_r = (PairwiseRubric(name=f"old:{old_r.name}", template=old_r.template, rubric_set=old_r.rubric_set),
                        PairwiseRubric(name=f"new:{new_r.name}", template=new_r.template, rubric_set=new_r.rubric_set))
    pairs, notes = load_gate_data(list(data), params.data, project, fmt=fmt, domain_field=domain_field)
    llm = params.llm
    roles = roles_from_params(llm)
    if "judge" not in roles:
        raise ConfigError("params.yaml: llm.roles.judge is not configured; the drift gate needs a judge model")
    judge = panel(roles["judge"])[0]
    if judge_model:
        judge = judge.with_(model=judge_model, name="judge")
    prepare_roles({"judge": judge})
    gateway = gateway_from_params(llm, stage="drift_check", project_dir=project)
    domains = sorted({p.domain for p in pairs})
    if bench and domains == [bench]:  # checked before any judge call: a benchmark-only run can only pass
        raise ConfigError(f"drift check: --bench {bench!r} is the only domain in the data, so nothing besides the "
                          "benchmark would be tested; add pairs from the domains to check (another --data file or "
                          "data.sources entry, or --domain-field FIELD to label domains), or leave out --bench")
    grouping = by if by != "auto" else ("domain" if len(domains) >= 2 else "cluster")
    cluster_table = None
    if grouping == "cluster":
        if bench:
            raise ConfigError("--bench names a domain, but the pairs are grouped by prompt cluster "
                              f"(domains in the data: {', '.join(domains)}); use --by domain with data that "
                              "holds the benchmark and at least one other domain")
        if "embedder" not in roles:
            raise ConfigError("params.yaml: llm.roles.embedder is not configured; clustering prompts needs it "
                              "(or give data with domain labels / --domain-field)")
        embedder = panel(roles["embedder"])[0]
        prepare_roles({"embedder": embedder})
        pairs, cluster_table = prompt_clusters(pairs, embedder=embedder, store=gateway.store, k=clusters,
                                               seed=cfg["seed"], max_k=int(cfg["max_clusters"]), progress=True)
        notes.append(f"no domain labels used: {len(cluster_table)} prompt clusters (k-means on "
                     f"{embedder.model} embeddings)")
    if limit:
        pairs = limit_per_domain(pairs, limit, cfg["seed"])
        notes.append(f"--limit {limit}: at most {limit} pairs per {grouping} (seeded choice), {len(pairs)} in all")
    embedded = judge.model.startswith("local/")
    note = (EMBEDDED_NOTE + " This gate's pass on it is not evidence that the edit is safe.") if embedded else None
    result = drift_check(old_r, new_r, pairs, gateway=gateway, judge=judge, seed=int(cfg["seed"]), bench_domain=bench,
                         alpha=float(cfg["alpha"]), power=float(cfg["power"]), n_boot=int(cfg["n_boot"]),
                         confidence=float(cfg["confidence"]), tie_credit=float(cfg["tie_credit"]),
                         epsilon=float(cfg["epsilon"]), samples=int(cfg["samples"]),
                         templates_dir=llm.templates_dir, grouping=grouping)
    result.old["source"], result.new["source"] = str(old), str(new)
    result.notes = notes + result.notes
    out = Path(out_dir) if out_dir else project / "outputs/drift_check"
    paths = write_gate_report(result, out, clusters=cluster_table, note=note)
    run_id = _track(result, params, project, paths, embedded, gateway) if track else None
    check_calls(gateway)  # the report is written; a role whose calls failed fails the gate (and its run, in _track)
    return {"result": result, "out": out, "paths": paths, "run_id": run_id, "note": note}


def _track(result: DriftCheck, params: Params, project: Path, paths: dict[str, Path], embedded: bool,
           gateway: Any = None) -> str:
    name = f"drift_check@{result.old['name']}->{result.new['name']}"
    tags = {"old_rubric": result.old["name"], "new_rubric": result.new["name"], "old_digest": result.old["digest"],
            "new_digest": result.new["digest"], "judge": result.settings["judge"], "flagged": str(result.flagged),
            "flags": ", ".join(f["kind"] for f in result.flags) or "none", "embedded_model": str(embedded),
            "verdict": result.verdict}
    with stage_run("drift_check", name, params.effective(), project, experiment=params.tracking.experiment,
                   tags=tags) as run:
        metrics: dict[str, Any] = {"flagged": int(result.flagged), "n_flipped": len(result.flipped)}
        for r in result.domains.to_dict(orient="records"):
            for k in ("n", "n_failed_either", "agreement_old", "agreement_new", "diff", "ci_low", "ci_high",
                      "p_value", "q_value", "mde"):
                metrics[f"{r['domain']}.{k}"] = r[k]
        run.log_metrics(metrics)
        run.log_table(result.domains, "domains.json")
        for path in paths.values():
            run.log_artifact(path)
        if gateway is not None:
            check_calls(gateway)
        return run.run_id
