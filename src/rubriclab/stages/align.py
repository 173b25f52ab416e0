"""DVC stage `align` (one instance per ``align.settings`` entry, a ``data.ripd`` setting): does a drifted rubric's
labelling change the policy trained on it? (seed 003 §4.2, §5.3, App. A.3–A.4)

label    judge ``align.label.pairs`` train pairs per domain under the seed and the second rubric (call store);
         label sets (prompt, chosen, rejected as the judge decided) and label agreement
train    DPO (TRL) per rubric × regime (bench, target, bench_target); step metrics in nested MLflow runs
evaluate best-of-n on held-out prompts (the test splits), reward scores, third-party judge win rates (Table 4)
"""

from __future__ import annotations

import argparse
import hashlib
import math
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab import atomic
from rubriclab.align import (
    REGIME_LABELS,
    REGIMES,
    DPOSettings,
    best_of_n,
    comparisons_for,
    generate_candidates,
    judge_outcomes,
    judge_scores,
    label_agreement,
    label_pairs,
    load_policy,
    load_tokenizer,
    pick_device,
    policy_source,
    preference_margins,
    preference_rows,
    require_align,
    reward_model_scores,
    reward_outcomes,
    train_dpo,
    win_rate_table,
    win_rates,
)
from rubriclab.align._plots import curves_figure, win_rate_figure
from rubriclab.audit import to_markdown
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.judging import load_pairwise_rubric
from rubriclab.llm import check_calls, embedded_note, gateway_from_params, panel, roles_from_params
from rubriclab.paths import display_path
from rubriclab.settings import AlignRubrics, Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

RUBRICS = ("seed", "biased")
STEPS = ("label", "train", "evaluate")
DOMAINS = ("bench", "target")


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
                  biased_file: Path | None = None, out_dir: Path | None = None) -> dict[str, Any]:
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
    return {
        "params": p, "llm": p.llm, "project": project, "setting": setting, "align": p.align,
        "seed": p.data.seed, "out": out_dir or project / "outputs/align" / setting,
        "adhoc": out_dir is not None, "judge": judge, "policy": policy, "reward": reward, "third": third,
        "third_rubric": third_tpl, "models": used, "embedded": embedded,
        "templates_dir": p.llm.templates_dir,
        "rubrics": load_rubrics(project, p.align.rubrics, setting, seed_file, biased_file),
        "regimes": tuple(p.align.regimes or REGIMES),
        "cache_dir": project / ".rubriclab/models",
    }


def _split(project: Path, setting: str, domain: str, split: str, limit: int | None) -> list:
    path = project / "outputs/data/ripd" / setting / f"{domain}_{split}.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: missing; run `dvc repro data` (data.ripd.{setting})")
    pairs = read_pairs(path)
    return pairs[: int(limit)] if limit is not None else pairs


def _gateway(ctx: dict[str, Any]) -> Any:
    if "gateway" not in ctx:
        ctx["gateway"] = gateway_from_params(ctx["llm"], stage=f"align@{ctx['setting']}", project_dir=ctx["project"])
    return ctx["gateway"]


def tie_credit(ctx: dict[str, Any]) -> float:
    """The stage's one tie rule (``align.evaluate.tie_credit``, the paper's 0.5): label agreement and win rates."""
    return float(ctx["align"].evaluate.tie_credit)


# -- label -----------------------------------------------------------------------------------------------------
def run_label(ctx: dict[str, Any], run: Any = None) -> dict[str, Any]:
    cfg = ctx["align"].label
    n = cfg.pairs
    by_domain = {d: _split(ctx["project"], ctx["setting"], d, "train", n) for d in DOMAINS}
    pairs = [p for d in DOMAINS for p in by_domain[d]]
    domain_of = {p.id: d for d in DOMAINS for p in by_domain[d]}
    rubrics = {name: r["rubric"] for name, r in ctx["rubrics"].items()}
    judged = label_pairs(rubrics, pairs, gateway=_gateway(ctx), judge=ctx["judge"], seed=ctx["seed"],
                         samples=int(cfg.samples), templates_dir=ctx["templates_dir"])
    judged["domain"] = judged["pair_id"].map(domain_of)  # bench / target, whatever the source calls its domain
    out = ctx["out"] / "labels"
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_csv(judged, out / "judged.csv", index=False)
    counts = {}
    for name in RUBRICS:
        rows, dropped = preference_rows(judged, pairs, name)
        rows["domain"] = rows["pair_id"].map(domain_of)
        for d in DOMAINS:
            part = rows[rows["domain"] == d]
            with atomic.atomic_path(out / f"{name}.{d}.jsonl") as tmp:
                part.to_json(tmp, orient="records", lines=True, force_ascii=False)
            counts[(name, d)] = {"kept": len(part), "flipped": int((~part["agrees_with_human"]).sum()),
                                 **{k: int(((judged["rubric"] == name) & (judged["domain"] == d)
                                            & (judged["status"] == k)).sum()) for k in dropped}}
    agreement = label_agreement(judged, "seed", "biased", tie_credit=tie_credit(ctx),
                                n_boot=int(ctx["align"].n_boot), confidence=float(ctx["align"].confidence),
                                seed=ctx["seed"])
    atomic.write_csv(agreement, ctx["out"] / "label_agreement.csv", index=False)
    count_frame = pd.DataFrame([{"rubric": r, "domain": d, **c} for (r, d), c in counts.items()])
    atomic.write_csv(count_frame, ctx["out"] / "label_counts.csv", index=False)
    if run is not None:
        run.log_table(agreement, "label_agreement.json")
    return {"judged": judged, "agreement": agreement, "counts": count_frame}


def read_labels(ctx: dict[str, Any], rubric: str, regime: str) -> pd.DataFrame:
    domains = {"bench": ["bench"], "target": ["target"], "bench_target": ["bench", "target"]}.get(regime)
    if domains is None:
        raise ConfigError(f"params.yaml: align.regimes: unknown regime {regime!r}; allowed: {', '.join(REGIMES)}")
    frames = []
    for d in domains:
        f = ctx["out"] / "labels" / f"{rubric}.{d}.jsonl"
        if not f.exists():
            raise ConfigError(f"{f}: missing; run `rubriclab align label` (or the whole `align` stage) first")
        frames.append(pd.read_json(f, lines=True) if f.stat().st_size else pd.DataFrame())
    return pd.concat(frames, ignore_index=True)


# -- train -----------------------------------------------------------------------------------------------------
def policy_name(rubric: str, regime: str) -> str:
    return f"{rubric}@{regime}"


def _label_digest(data: pd.DataFrame) -> str:
    text = data[["prompt", "chosen", "rejected"]].to_json(orient="values", force_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def adapter_dir(ctx: dict[str, Any], rubric: str, regime: str) -> Path:
    return ctx["out"] / "adapters" / f"{rubric}_{regime}"


def run_train(ctx: dict[str, Any], run: Any = None) -> dict[str, Any]:
    require_align()
    settings = DPOSettings.of(ctx["align"].dpo, ctx["seed"])
    source = policy_source(ctx["policy"].model, ctx["cache_dir"])
    out = ctx["out"] / "training"
    out.mkdir(parents=True, exist_ok=True)
    rows, histories = [], []
    trained: dict[str, tuple[str, dict[str, Any]]] = {}  # label-set digest -> (policy, its row)
    before_of: dict[str, np.ndarray] = {}
    base_logprobs: dict[tuple[str, str], float] = {}
    reference: dict = {}  # the reference's log-probabilities, shared by this stage's trainings (align._reference)
    for rubric in RUBRICS:
        for regime in ctx["regimes"]:
            data = read_labels(ctx, rubric, regime)
            name = policy_name(rubric, regime)
            if data.empty:
                rows.append({"policy": name, "rubric": rubric, "regime": regime, "n_pairs": 0, "steps": 0,
                             "note": "no labelled pair (every verdict a tie or failed)"})
                continue
            digest = _label_digest(data)
            if digest in trained:  # the same label set (e.g. both rubrics agree on every bench pair): same policy
                first, row = trained[digest]
                dest = adapter_dir(ctx, rubric, regime)
                tmp = dest.with_name(dest.name + ".tmp")  # copied aside, renamed into place: never half an adapter
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.copytree(adapter_dir(ctx, *first.split("@")), tmp)
                shutil.rmtree(dest, ignore_errors=True)
                tmp.rename(dest)
                rows.append({**row, "policy": name, "rubric": rubric, "regime": regime,
                             "note": f"same label set as {first}: its policy, not retrained"})
                continue
            with run.trial(f"dpo {name}", settings.to_dict()) if run is not None else nullcontext() as handle:
                res = train_dpo(source, data, settings, adapter_dir(ctx, rubric, regime), run=handle, progress=True,
                                reference_memo=reference)
                if digest not in before_of:  # the base policy: a sequence shared by two label sets evaluated once
                    before_of[digest] = preference_margins(source, data, device=res["device"], memo=base_logprobs)
                before = before_of[digest]
                after = preference_margins(source, data, adapter=res["out_dir"], device=res["device"])
                hist = res["history"].assign(policy=name)
                histories.append(hist)
                row = {"policy": name, "rubric": rubric, "regime": regime, "n_pairs": res["n_pairs"],
                       "steps": res["steps"], "device": res["device"],
                       "loss_first": float(hist["loss"].iloc[0]), "loss_last": float(hist["loss"].iloc[-1]),
                       "margin_last": float(hist["rewards/margins"].iloc[-1]) if "rewards/margins" in hist else np.nan,
                       "logratio_before": float(np.mean(before)), "logratio_after": float(np.mean(after)),
                       "pairs_moved_toward_label": int(np.sum(after > before))}
                rows.append(row)
                trained[digest] = (name, row)
                if handle is not None:  # wall time goes to MLflow only: in the outputs it would differ on every run
                    handle.log_metrics({"logratio_before": row["logratio_before"],
                                        "logratio_after": row["logratio_after"], "seconds": res["seconds"],
                                        "seconds_per_step": res["seconds_per_step"]})
    summary = pd.DataFrame(rows)
    atomic.write_csv(summary, ctx["out"] / "training.csv", index=False)
    history = pd.concat(histories, ignore_index=True) if histories else pd.DataFrame()
    atomic.write_csv(history, out / "history.csv", index=False)
    if len(history):
        curves_figure(history, out / "curves.png")
    atomic.write_json(out / "settings.json", {**settings.to_dict(), "policy_source": ctx["policy"].model}, indent=1)
    return {"summary": summary, "history": history, "settings": settings}


# -- evaluate --------------------------------------------------------------------------------------------------
def run_evaluate(ctx: dict[str, Any], run: Any = None) -> dict[str, Any]:
    require_align()
    cfg = ctx["align"].evaluate
    n_prompts, n = cfg.prompts, int(cfg.n)
    device = pick_device(str(ctx["align"].dpo.device))
    prompts = []
    for d in DOMAINS:
        seen: dict[str, None] = {}
        for p in _split(ctx["project"], ctx["setting"], d, "test", None):
            seen.setdefault(p.prompt, None)
        for i, text in enumerate(list(seen)[: int(n_prompts) if n_prompts is not None else None]):
            prompts.append({"domain": d, "prompt_id": f"{d}{i}", "prompt": text})
    if not prompts:
        raise ConfigError(f"outputs/data/ripd/{ctx['setting']}: no test prompt to evaluate on")
    source = policy_source(ctx["policy"].model, ctx["cache_dir"])
    tokenizer = load_tokenizer(source)
    policies: dict[str, Path | None] = {"original": None}
    untrained = _untrained(ctx)
    for rubric in RUBRICS:
        for regime in ctx["regimes"]:
            a, name = adapter_dir(ctx, rubric, regime), policy_name(rubric, regime)
            if name in untrained:
                continue
            if not (a / "adapter_config.json").exists() and not (a / "config.json").exists():
                raise ConfigError(f"{a}: no trained policy; run `rubriclab align train` (or the `align` stage) first")
            policies[name] = a
    frames = []
    texts = [p["prompt"] for p in prompts]
    for name, adapter in policies.items():
        model = load_policy(source, adapter=adapter, device=device)  # a LoRA adapter or a full checkpoint
        cand = generate_candidates(model, tokenizer, texts, n=n, temperature=float(cfg.temperature),
                                   top_p=float(cfg.top_p), max_new_tokens=int(cfg.max_new_tokens),
                                   seed=ctx["seed"])
        meta = pd.DataFrame(prompts).iloc[cand["prompt_index"]].reset_index(drop=True)
        frames.append(pd.concat([meta, cand], axis=1).assign(policy=name))
        del model
    cands = pd.concat(frames, ignore_index=True)
    reward = ctx["reward"]
    if reward.model.startswith("hf/"):
        scores = reward_model_scores(reward.model[3:], cands["prompt"].tolist(), cands["response"].tolist(),
                                     device=device)
        cands["score"], cands["score_error"] = scores, None
    else:
        scores, errors = judge_scores(cands["prompt"].tolist(), cands["response"].tolist(), gateway=_gateway(ctx),
                                      scorer=reward, templates_dir=ctx["templates_dir"])
        cands["score"], cands["score_error"] = scores, errors
    out = ctx["out"]
    atomic.write_csv(cands, out / "generations.csv", index=False)
    best = best_of_n(cands)
    if untrained:  # no policy to sample from: its comparisons are counted as missing, with the reason
        best = pd.concat([best, pd.DataFrame([
            {**p, "policy": name, "response": None, "score": np.nan, "sample": None, "cut_off": None,
             "n_candidates": 0, "n_scored": 0, "note": why} for name, why in untrained.items() for p in prompts])],
            ignore_index=True)
    atomic.write_csv(best, out / "best_of_n.csv", index=False)
    comps = comparisons_for(ctx["regimes"], RUBRICS)
    n_boot, conf, tie = int(ctx["align"].n_boot), float(ctx["align"].confidence), tie_credit(ctx)
    judged = judge_outcomes(best, comps, gateway=_gateway(ctx), judge=ctx["third"], rubric=ctx["third_rubric"],
                            seed=ctx["seed"], samples=int(cfg.judge_samples), tie_credit=tie,
                            templates_dir=ctx["templates_dir"])
    rewarded = reward_outcomes(best, comps, tie_credit=tie)
    atomic.write_csv(judged, out / "judge_outcomes.csv", index=False)
    atomic.write_csv(rewarded, out / "reward_outcomes.csv", index=False)
    rates = pd.concat([win_rates(judged, n_boot=n_boot, confidence=conf, seed=ctx["seed"], source="third-party judge",
                                 tie_credit=tie),
                       win_rates(rewarded, n_boot=n_boot, confidence=conf, seed=ctx["seed"], source="reward",
                                 tie_credit=tie)],
                      ignore_index=True)
    atomic.write_csv(rates, out / "win_rates.csv", index=False)
    win_rate_figure(rates, out / "win_rates.png")
    _examples(best, out / "examples.md", [*policies, *untrained])
    if run is not None:
        run.log_table(rates, "win_rates.json")
        run.log_artifact(out / "examples.md")
        run.log_artifact(out / "win_rates.png")
    return {"candidates": cands, "best": best, "judged": judged, "rewarded": rewarded, "rates": rates,
            "policies": list(policies), "untrained": untrained}


def _untrained(ctx: dict[str, Any]) -> dict[str, str]:
    """Policies the train step recorded as not trained (no labelled pair), with the reason."""
    f = ctx["out"] / "training.csv"
    if not f.exists():
        return {}
    t = pd.read_csv(f)
    if "note" not in t:
        return {}
    rows = t[(t["steps"] == 0) & t["note"].notna()]
    return {r.policy: f"not trained: {r.note}" for r in rows.itertuples()}


def _examples(best: pd.DataFrame, path: Path, policies: list[str]) -> None:
    lines = ["# Example generations (best-of-n per policy, side by side)", ""]
    for (domain, pid), g in best.groupby(["domain", "prompt_id"], sort=False):
        g = g.set_index("policy")
        lines += [f"## {domain} · {pid}", "", "**Prompt:** " + " ".join(str(g["prompt"].iloc[0]).split()), "",
                  "| policy | score | cut off | best response |", "|---|---|---|---|"]
        for name in policies:
            if name in g.index:
                r = g.loc[name]
                note = r.get("note") if isinstance(r.get("note"), str) else "no scored candidate"
                response = r["response"] if isinstance(r["response"], str) else f"— ({note})"
                text = " ".join(response.split()).replace("|", "\\|")
                score = "—" if pd.isna(r["score"]) else f"{r['score']:g}"
                lines.append(f"| {name} | {score} | {'yes' if r['cut_off'] is True else 'no'} | {text} |")
        lines.append("")
    atomic.write_text(path, "\n".join(lines) + "\n", encoding="utf-8")


# -- summary ---------------------------------------------------------------------------------------------------
def _fmt(row: Any) -> str:
    if row is None or not math.isfinite(float(row["estimate"])):
        return "— (no pair decided)"
    if row["low"] == row["high"]:  # a point bootstrap distribution is not an interval
        return f"{row['estimate']:.3f} (n={int(row['n'])}; the same on every pair: no interval)"
    return f"{row['estimate']:.3f} [{row['low']:.2f}, {row['high']:.2f}] (n={int(row['n'])})"


def _top_ties(best: pd.DataFrame) -> str:
    picked = best[best["n_scored"] > 0]
    tied = int((picked["n_top"] > 1).sum()) if "n_top" in picked else 0
    return (f"Equal top reward scores: the lowest sample index is kept (the samples are i.i.d. draws, so that is a "
            f"random pick among the tied ones; the same rule for every policy); {tied} of {len(picked)} best-of-n picks "
            "had a tied top score (`n_top` in `best_of_n.csv`).")


def summarize(ctx: dict[str, Any], labels: dict[str, Any] | None, train: dict[str, Any] | None,
              evaluation: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    conf, n_boot = float(ctx["align"].confidence), int(ctx["align"].n_boot)
    md = [f"# Propagation through DPO: {ctx['setting']}", ""]
    md += ["Models: " + "; ".join(f"{k} = {v}" for k, v in ctx["models"].items()), ""]
    note = embedded_note(ctx["embedded"])
    if note:
        md += [f"> {note} The policy trained here is the embedded SmolLM2-135M (LoRA, a few steps on a handful of "
               "pairs): the win rates below are plumbing, not evidence about drift propagation.", ""]
    md += ["Rubrics: " + ", ".join(f"{n} = `{display_path(r['path'], ctx['project'])}` ({r['rubric'].digest})"
                                   for n, r in ctx["rubrics"].items()) + "; third-party judge template = "
           f"`{ctx['third_rubric'].name}`.", ""]
    if ctx["rubrics"]["seed"]["rubric"].digest == ctx["rubrics"]["biased"]["rubric"].digest:
        md += ["> The two rubrics have the same text: the label sets are identical and π_bias is π_seed (e.g. the "
               "drift stage kept the seed because no candidate passed its constraints).", ""]
    metrics: dict[str, Any] = {}
    if labels is not None:
        md += ["## Labels", "", f"Intervals: percentile bootstrap over pairs, {conf:.0%}, B={n_boot}. A tie or a "
               "failed verdict is not a preference: the pair is left out of that rubric's label set (counted). In "
               f"the agreement a tie counts {tie_credit(ctx):g} (the paper's rule: 0.5 throughout), also between the "
               "two rubrics (a tie on either side); a failed verdict is left out of n.", "",
               to_markdown(labels["counts"].rename(columns={"kept": "labelled pairs",
                                                            "flipped": "flipped vs human"})), "", "Agreement:", ""]
        t = labels["agreement"].copy()
        t["value"] = [_fmt(r) for r in t.to_dict("records")]
        md += [to_markdown(t[["domain", "comparison", "value", "n_tie", "n_failed"]]), ""]
        for r in t.to_dict("records"):
            if math.isfinite(float(r["estimate"])):
                metrics[f"labels.{r['domain']}.{r['comparison'].replace(' ', '_')}"] = r["estimate"]
    if train is not None and len(train["summary"]):
        s, lora = train["settings"].dpo, train["settings"].dpo.lora
        md += ["## DPO training", "", f"TRL DPOTrainer, {s.loss_type} loss, β={s.beta}, {s.mode}"
               + (f" (r={lora.r}, α={lora.alpha}, dropout={lora.dropout}, {', '.join(lora.target_modules)})"
                  if s.mode == "lora" else "") + f", lr={s.lr:g}" + ("" if s.learning_rate is not None else " (the paper's for this mode)")
               + f", {s.scheduler}, warmup ratio "
               f"{s.warmup_ratio:g}, batch {s.batch_size}×{s.grad_accum}, max length {s.max_length}, epochs "
               f"{s.epochs:g}; float32 weights (with bf16 autocast on cuda: the optimizer updates float32 master weights), "
               "and evaluated in float32 weights too (bf16 autocast on cuda): a bf16 copy of the weights would round "
               "most of a small update away. "
               "Step curves: `training/curves.png` and the nested MLflow runs `dpo <policy>` (which also hold each "
               "policy's wall time, kept out of these outputs so that a re-run writes the same bytes). "
               "logratio = mean log π(chosen|x) − log π(rejected|x) on the policy's own training pairs, before and "
               "after training (the direction the labels pull).", "",
               to_markdown(train["summary"].drop(columns=[c for c in ("rubric", "regime") if c in train["summary"]])),
               ""]
        for r in train["summary"].to_dict("records"):
            if r.get("steps"):
                metrics[f"train.{r['policy']}.loss_last"] = r["loss_last"]
    if evaluation is not None:
        cfg = ctx["align"].evaluate
        c = evaluation["candidates"]
        md += ["## Policy evaluation", "", f"Best-of-{int(cfg.n)} (T={cfg.temperature}, "
               f"top-p={cfg.top_p}, ≤{cfg.max_new_tokens} new tokens) on "
               f"{c['prompt_id'].nunique()} held-out prompts (the test splits), every policy with the same sampling "
               f"seed; the best candidate by the reward ({ctx['reward'].model}). Candidates cut off at the token limit: "
               f"{int(c['cut_off'].sum())} of {len(c)} (kept: that is what the policy says); reward scores failed: "
               f"{int(c['score'].isna().sum())} (left out). Side-by-side examples: `examples.md`; bars with intervals: `win_rates.png`.", "",
               *(["Not trained, so not evaluated (their comparisons are counted as failed): "
                  + "; ".join(f"{k} ({v})" for k, v in evaluation["untrained"].items()), ""]
                 if evaluation["untrained"] else []),
               _top_ties(evaluation["best"]), "",
               f"Identical best responses (a tie without a judge call: the two policies said the same thing): "
               f"{int((evaluation['judged']['status'] == 'identical').sum())} of {len(evaluation['judged'])} "
               "comparisons.", "",
               f"Win rate of the left policy (ties {tie_credit(ctx):g}); cells: win% [CI] (n prompts); "
               f"percentile bootstrap over prompts, {conf:.0%}, B={n_boot}; columns: <evaluation set>@<training "
               "regime> (B bench-only, T target-only, BT bench+target), the shape of seed 003 Table 4.", ""]
        for source, g in evaluation["rates"].groupby("source", sort=False):
            md += [f"### {source} ({ctx['third'].model if source.startswith('third') else ctx['reward'].model})", "",
                   to_markdown(win_rate_table(g)), ""]
            for r in g.to_dict("records"):
                if math.isfinite(float(r["estimate"])):
                    key = f"win.{'judge' if source.startswith('third') else 'reward'}.{r['comparison'].replace(' ', '_')}"
                    metrics[f"{key}.{r['domain']}@{REGIME_LABELS.get(r['regime'], r['regime'])}"] = r["estimate"]
    return "\n".join(md) + "\n", metrics


def run_align_stage(params: dict[str, Any], project: Path, setting: str, *, steps: tuple[str, ...] = STEPS,
                    seed_file: Path | None = None, biased_file: Path | None = None,
                    out_dir: Path | None = None) -> dict[str, Any]:
    """Run the chosen steps for one setting; write ``outputs/align/<setting>`` (or ``out_dir``) and, for the full
    stage, ``metrics/align/<setting>.json``."""
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise ConfigError(f"align steps {sorted(unknown)}; allowed: {', '.join(STEPS)}")
    ctx = align_context(params, project, setting, seed_file=seed_file, biased_file=biased_file, out_dir=out_dir)
    ctx["out"].mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    name = f"align@{setting}" + ("" if tuple(steps) == STEPS else ":" + "+".join(steps))
    p = Params.of(params)
    with stage_run("align", name, p.effective(), project, experiment=p.tracking.experiment,
                   tags={"models": "; ".join(f"{k}={v}" for k, v in ctx["models"].items()),
                         "embedded_model": str(bool(ctx["embedded"])), "setting": setting,
                         "adhoc": str(ctx["adhoc"])}) as run:
        timing: dict[str, float] = {}
        done: dict[str, Any] = {}
        for step, fn in (("label", run_label), ("train", run_train), ("evaluate", run_evaluate)):
            if step in steps:
                started = time.perf_counter()
                done[step] = fn(ctx, run)
                timing[step] = time.perf_counter() - started
        labels, train, evaluation = done.get("label"), done.get("train"), done.get("evaluate")
        summary, metrics = summarize(ctx, labels, train, evaluation)
        # wall times go to MLflow only: in summary.md they made every re-run write other bytes (a stale dvc.lock)
        run.log_metrics({f"wall_s.{k}": v for k, v in timing.items()})
        atomic.write_text(ctx["out"] / "summary.md", summary, encoding="utf-8")
        run.log_artifact(ctx["out"] / "summary.md")
        if train is not None and (ctx["out"] / "training/curves.png").exists():
            run.log_artifact(ctx["out"] / "training/curves.png", "training")
        run.log_metrics(metrics)
        results.update(labels=labels, train=train, evaluation=evaluation, run_id=run.run_id)
        if "gateway" in ctx:  # outputs are written; a role whose calls failed fails the run and the stage
            check_calls(ctx["gateway"])
    if not ctx["adhoc"] and tuple(steps) == STEPS:
        write_metrics_json(project / "metrics/align" / f"{setting}.json", metrics)
    return {"out": ctx["out"], "summary": summary, "metrics": metrics, **results}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.align")
    ap.add_argument("--setting", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_align_stage(load_params(project / "params.yaml"), project, args.setting)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "align"))
