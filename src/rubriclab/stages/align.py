"""DVC stage `align` (one instance per ``align.settings`` entry, a ``data.ripd`` setting): does a drifted rubric's
labelling change the policy trained on it? (seed 003 §4.2, §5.3, App. A.3–A.4)

label    judge ``align.label.pairs`` train pairs per domain under the seed and the second rubric (call store);
         label sets (prompt, chosen, rejected as the judge decided) and label agreement
train    DPO (TRL) per rubric × regime (bench, target, bench_target); step metrics in nested MLflow runs
evaluate best-of-n on held-out prompts (the test splits), reward scores, third-party judge win rates (Table 4)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rubriclab import atomic
from rubriclab.align import (
    REGIMES,
    STEPS,
    AlignContext,
    run_evaluate,
    run_label,
    run_train,
    summarize,
)
from rubriclab.config import find_project_dir, load_params
from rubriclab.errors import ConfigError
from rubriclab.judging import load_pairwise_rubric
from rubriclab.llm import check_calls, gateway_from_params, panel, roles_from_params
from rubriclab.settings import AlignRubrics, Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json


def _path(project: Path, spec: str | Path) -> Path:
    p = Path(str(spec).format(project=project))
    return p if p.is_absolute() else project / p


def load_rubrics(project: Path, rubrics: dict[str, AlignRubrics], setting: str, seed_file: Path | None = None,
                 biased_file: Path | None = None) -> dict[str, Any]:
    spec = rubrics.get(setting) or AlignRubrics()
    files = {"seed": seed_file or spec.seed, "biased": biased_file or spec.biased}
    out = {}
    for name, f in files.items():
        if not f:
            raise ConfigError(f"params.yaml: align.rubrics.{setting}.{name} is not set; give a rubric file (judge "
                              "template, RIPD .jsonl, rubric set or criteria list)")
        path = _path(project, str(f).format(setting=setting))
        if not path.exists():
            hint = " (run `dvc repro drift` first)" if "outputs/drift" in str(path) else ""
            raise ConfigError(f"{path}: missing; align.rubrics.{setting}.{name} names it{hint}")
        prompt_id = getattr(spec, f"{name}_prompt_id") if (name == "seed" and not seed_file) or (
            name == "biased" and not biased_file) else None
        out[name] = {"rubric": load_pairwise_rubric(path, prompt_id), "path": path}
    return out


def align_context(params: dict[str, Any], project: Path, setting: str, *, seed_file: Path | None = None,
                  biased_file: Path | None = None, out_dir: Path | None = None) -> AlignContext:
    """The setting's roles, rubrics and folders from params.yaml (the rubric files may be given instead); the
    call gateway opens when a step first calls a model."""
    p = Params.of(params)
    roles = roles_from_params(p.llm)
    for needed in ("judge", "policy", "reward", "pairwise_judge"):
        if needed not in roles:
            raise ConfigError(f"params.yaml: llm.roles.{needed} is not configured; align needs it")
    judge = panel(roles["judge"])[0]
    policy, reward, third = panel(roles["policy"])[0], panel(roles["reward"])[0], panel(roles["pairwise_judge"])[0]
    used = {"judge (labels)": judge.model, "policy": policy.model, "reward": reward.model,
            "pairwise_judge (third party)": third.model}
    embedded = sorted(k for k, m in used.items() if m.startswith("local/"))
    third_tpl = load_pairwise_rubric(_path(project, p.align.third_party_template))
    return AlignContext(
        project=project, setting=setting, align=p.align, seed=p.data.seed,
        out=out_dir or project / "outputs/align" / setting, adhoc=out_dir is not None,
        judge=judge, policy=policy, reward=reward, third=third, third_rubric=third_tpl, models=used,
        embedded=embedded, templates_dir=p.llm.templates_dir,
        rubrics=load_rubrics(project, p.align.rubrics, setting, seed_file, biased_file),
        regimes=tuple(p.align.regimes or REGIMES), cache_dir=project / ".rubriclab/models",
        open_gateway=lambda: gateway_from_params(p.llm, stage=f"align@{setting}", project_dir=project))


def run_align_stage(params: dict[str, Any], project: Path, setting: str, *, steps: tuple[str, ...] = STEPS,
                    seed_file: Path | None = None, biased_file: Path | None = None,
                    out_dir: Path | None = None) -> dict[str, Any]:
    """Run the chosen steps for one setting; write ``outputs/align/<setting>`` (or ``out_dir``) and, for the full
    stage, ``metrics/align/<setting>.json``."""
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ConfigError(f"align steps {sorted(unknown)}; allowed: {', '.join(STEPS)}")
    ctx = align_context(params, project, setting, seed_file=seed_file, biased_file=biased_file, out_dir=out_dir)
    ctx.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    name = f"align@{setting}" + ("" if tuple(steps) == STEPS else ":" + "+".join(steps))
    p = Params.of(params)
    with stage_run("align", name, p.effective(), project, experiment=p.tracking.experiment,
                   tags={"models": "; ".join(f"{k}={v}" for k, v in ctx.models.items()),
                         "embedded_model": str(bool(ctx.embedded)), "setting": setting,
                         "adhoc": str(ctx.adhoc)}, record_dir=ctx.out) as run:
        timing: dict[str, float] = {}
        labels = train = evaluation = None

        def timed(step: str, fn: Any, **kw: Any) -> dict[str, Any]:
            started = time.perf_counter()
            result = fn(ctx, **kw)
            timing[step] = time.perf_counter() - started
            return result

        if "label" in steps:
            labels = timed("label", run_label)
            run.log_table(labels["agreement"], "label_agreement.json")
        if "train" in steps:  # one nested run per training: its step metrics and wall time
            train = timed("train", run_train, trial=run.trial)
        if "evaluate" in steps:
            evaluation = timed("evaluate", run_evaluate)
            run.log_table(evaluation["rates"], "win_rates.json")
            run.log_artifact(ctx.out / "examples.md")
            run.log_artifact(ctx.out / "win_rates.png")
        summary, metrics = summarize(ctx, labels, train, evaluation)
        # wall times go to MLflow only: in summary.md they made every re-run write other bytes (a stale dvc.lock)
        run.log_metrics({f"wall_s.{k}": v for k, v in timing.items()})
        atomic.write_text(ctx.out / "summary.md", summary, encoding="utf-8")
        run.log_artifact(ctx.out / "summary.md")
        if train is not None and (ctx.out / "training/curves.png").exists():
            run.log_artifact(ctx.out / "training/curves.png", "training")
        run.log_metrics(metrics)
        results.update(labels=labels, train=train, evaluation=evaluation, run_id=run.run_id)
        if ctx.gateway_opened:  # outputs are written; a role whose calls failed fails the run and the stage
            check_calls(ctx.gateway)
    if not ctx.adhoc and tuple(steps) == STEPS:
        write_metrics_json(project / "metrics/align" / f"{setting}.json", metrics)
    return {"out": ctx.out, "summary": summary, "metrics": metrics, **results}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.align")
    ap.add_argument("--setting", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_align_stage(load_params(project / "params.yaml"), project, args.setting)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "align"))
