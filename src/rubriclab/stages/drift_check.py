"""`rubriclab drift check`: the drift gate for a rubric edit, with the project's params, call store and
MLflow. Loads the two rubrics and the data, groups pairs by domain or by prompt cluster, runs
``rubriclab.drift.drift_check``, writes the report (``outputs/drift_check/`` by default) and logs one
MLflow run (``drift_check@<old>-><new>``) with the report as artifacts.

Settings: ``drift.gate`` in params.yaml (``rubriclab.settings.Gate``: every key, its default and its range), the
command's options over it; ``seed`` null follows ``data.seed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubriclab.drift import (
    DriftCheck,
    drift_check,
    limit_per_domain,
    load_gate_data,
    prompt_clusters,
    write_gate_report,
)
from rubriclab.errors import ConfigError, InputError
from rubriclab.judging import PairwiseRubric, load_pairwise_rubric
from rubriclab.llm import EMBEDDED_NOTE, check_calls, gateway_from_params, panel, prepare_roles, roles_from_params
from rubriclab.settings import Gate, Params
from rubriclab.tracking import stage_run

GROUPINGS = ("auto", "domain", "cluster")


def gate_settings(params: Params | dict[str, Any], **overrides: Any) -> Gate:
    """``drift.gate`` (``Gate``: the schema's defaults where params.yaml is silent) with the non-None ``overrides``
    (the command's options), checked as params.yaml's values are; a null seed becomes ``data.seed``."""
    p = Params.of(params)  # unknown keys and bad values are refused here, one line each
    gate = p.drift.gate or Gate()
    asked = {k: v for k, v in overrides.items() if v is not None}
    if asked:
        gate = Params.of({"drift": {"gate": {**gate.model_dump(), **asked}}}, source="rubriclab drift check").drift.gate
    return gate if gate.seed is not None else gate.model_copy(update={"seed": p.data.seed})


def load_rubric(path: str | Path, prompt_id: str | None, label: str) -> PairwiseRubric:
    """A rubric file (RIPD JSON lines with ``prompt_id`` — default the last line —, judge template, rubric set,
    criteria list, markdown) as a PairwiseRubric; errors name the file and say which side it is."""
    p = Path(path)
    if not p.is_file():
        raise InputError("not found" if not p.exists() else "is not a file", file=str(p), field=label,
                         expected="a rubric file (RIPD .jsonl, judge template, rubric set, criteria list, .md)")
    return load_pairwise_rubric(p, prompt_id)


def run_drift_check(params: Params | dict[str, Any], project: Path, *, old: str | Path, new: str | Path,
                    data: list[str], old_id: str | None = None, new_id: str | None = None, fmt: str | None = None,
                    domain_field: str | None = None, by: str = "auto", bench: str | None = None,
                    clusters: int | None = None, limit: int | None = None, out_dir: Path | None = None,
                    judge_model: str | None = None, track: bool = True, **overrides: Any) -> dict[str, Any]:
    """Run the gate; returns ``{"result": DriftCheck, "out": folder, "paths", "run_id", "note"}``.
    ``overrides``: ``alpha``, ``samples``, ``epsilon``, … over ``drift.gate`` (None = keep; ``gate_settings``)."""
    if by not in GROUPINGS:
        raise ConfigError(f"--by {by!r}; expected one of: {', '.join(GROUPINGS)}")
    params = Params.of(params)  # validated once: unknown keys and bad values are refused here
    gate = gate_settings(params, **overrides)
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
                                               seed=gate.seed, max_k=int(gate.max_clusters), progress=True)
        notes.append(f"no domain labels used: {len(cluster_table)} prompt clusters (k-means on "
                     f"{embedder.model} embeddings)")
    if limit:
        pairs = limit_per_domain(pairs, limit, gate.seed)
        notes.append(f"--limit {limit}: at most {limit} pairs per {grouping} (seeded choice), {len(pairs)} in all")
    embedded = judge.model.startswith("local/")
    note = (EMBEDDED_NOTE + " This gate's pass on it is not evidence that the edit is safe.") if embedded else None
    result = drift_check(old_r, new_r, pairs, gateway=gateway, judge=judge, gate=gate, bench_domain=bench,
                         templates_dir=llm.templates_dir, grouping=grouping)
    result.old["source"], result.new["source"] = str(old), str(new)
    result.notes = notes + result.notes
    out = Path(out_dir) if out_dir else project / "outputs/drift_check"
    paths = write_gate_report(result, out, clusters=cluster_table, note=note)
    run_id = _track(result, params, project, paths, embedded, gateway, out) if track else None
    check_calls(gateway)  # the report is written; a role whose calls failed fails the gate (and its run, in _track)
    return {"result": result, "out": out, "paths": paths, "run_id": run_id, "note": note}


def _track(result: DriftCheck, params: Params, project: Path, paths: dict[str, Path], embedded: bool,
           gateway: Any, out: Path) -> str:
    name = f"drift_check@{result.old['name']}->{result.new['name']}"
    tags = {"old_rubric": result.old["name"], "new_rubric": result.new["name"], "old_digest": result.old["digest"],
            "new_digest": result.new["digest"], "judge": result.settings["judge"], "flagged": str(result.flagged),
            "flags": ", ".join(f["kind"] for f in result.flags) or "none", "embedded_model": str(embedded),
            "verdict": result.verdict}
    with stage_run("drift_check", name, params.effective(), project, experiment=params.tracking.experiment,
                   tags=tags, record_dir=out) as run:
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
