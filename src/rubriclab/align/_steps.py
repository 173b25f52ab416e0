"""The align stage's three steps for one setting (seed 003 §4.2, §5.3, App. A.3–A.4), each writing its outputs under
the setting's folder for the next: label (both rubrics' label sets and their agreement), train (DPO per rubric ×
regime), evaluate (best-of-n on held-out prompts, reward scores, third-party judge win rates: Table 4)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab import atomic
from rubriclab.align._context import (
    DOMAINS,
    RUBRICS,
    AlignContext,
    adapter_dir,
    label_digest,
    policy_digest,
    policy_name,
    read_labels,
    ripd_split,
)
from rubriclab.align._evaluate import (
    best_of_n,
    comparisons_for,
    generate_candidates,
    judge_outcomes,
    judge_scores,
    reward_model_scores,
    reward_outcomes,
    win_rates,
)
from rubriclab.align._labels import label_agreement, label_pairs, preference_rows
from rubriclab.align._plots import curves_figure, win_rate_figure
from rubriclab.align._policy import load_policy, load_tokenizer, pick_device, policy_source, require_align
from rubriclab.align._train import DPOSettings, preference_margins, train_dpo
from rubriclab.errors import ConfigError

Trial = Callable[[str, dict[str, Any]], AbstractContextManager[Any]]  # a nested run: (name, its params) -> handle


# -- label -----------------------------------------------------------------------------------------------------
def run_label(ctx: AlignContext) -> dict[str, Any]:
    """Judge ``align.label.pairs`` train pairs per domain under both rubrics; write the label sets (``labels/``),
    the verdicts, the label agreement and the counts."""
    cfg = ctx.align.label
    n = cfg.pairs
    by_domain = {d: ripd_split(ctx, d, "train", n) for d in DOMAINS}
    pairs = [p for d in DOMAINS for p in by_domain[d]]
    domain_of = {p.id: d for d in DOMAINS for p in by_domain[d]}
    rubrics = {name: r["rubric"] for name, r in ctx.rubrics.items()}
    judged = label_pairs(rubrics, pairs, gateway=ctx.gateway, judge=ctx.judge, seed=ctx.seed,
                         samples=int(cfg.samples), templates_dir=ctx.templates_dir)
    judged["domain"] = judged["pair_id"].map(domain_of)  # bench / target, whatever the source calls its domain
    out = ctx.out / "labels"
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
    agreement = label_agreement(judged, "seed", "biased", tie_credit=ctx.tie_credit,
                                n_boot=int(ctx.align.n_boot), confidence=float(ctx.align.confidence),
                                seed=ctx.seed)
    atomic.write_csv(agreement, ctx.out / "label_agreement.csv", index=False)
    count_frame = pd.DataFrame([{"rubric": r, "domain": d, **c} for (r, d), c in counts.items()])
    atomic.write_csv(count_frame, ctx.out / "label_counts.csv", index=False)
    return {"judged": judged, "agreement": agreement, "counts": count_frame}


def run_train(ctx: AlignContext, trial: Trial | None = None) -> dict[str, Any]:
    """DPO per rubric × regime on the label sets (a label set equal to an earlier one is that policy, copied, not
    retrained); write the adapters, ``training.csv`` and ``training/`` (step history, curves, settings). ``trial``
    (a tracking run's ``trial``) opens a nested run per training, given the step metrics and the wall time."""
    require_align()
    settings = DPOSettings.of(ctx.align.dpo, ctx.seed)
    source = policy_source(ctx.policy.model, ctx.cache_dir)
    out = ctx.out / "training"
    out.mkdir(parents=True, exist_ok=True)
    rows, histories = [], []
    trained: dict[str, tuple[str, dict[str, Any]]] = {}  # label-set digest -> (policy, its row)
    before_of: dict[str, np.ndarray] = {}
    base_logprobs: dict[tuple[str, str], float] = {}
    reference: dict = {}  # the reference's log-probabilities, shared by this stage's trainings (align._reference)
    for rubric in RUBRICS:
        for regime in ctx.regimes:
            data = read_labels(ctx, rubric, regime)
            name = policy_name(rubric, regime)
            if data.empty:
                rows.append({"policy": name, "rubric": rubric, "regime": regime, "n_pairs": 0, "steps": 0,
                             "note": "no labelled pair (every verdict a tie or failed)"})
                continue
            digest = label_digest(data)
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
            with trial(f"dpo {name}", settings.to_dict()) if trial is not None else nullcontext() as handle:
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
    atomic.write_csv(summary, ctx.out / "training.csv", index=False)
    history = pd.concat(histories, ignore_index=True) if histories else pd.DataFrame()
    atomic.write_csv(history, out / "history.csv", index=False)
    if len(history):
        curves_figure(history, out / "curves.png")
    atomic.write_json(out / "settings.json", {**settings.to_dict(), "policy_source": ctx.policy.model}, indent=1)
    return {"summary": summary, "history": history, "settings": settings}


# -- evaluate --------------------------------------------------------------------------------------------------
def run_evaluate(ctx: AlignContext) -> dict[str, Any]:
    """Best-of-n from every trained policy (and the original) on the held-out prompts, scored by the reward; the
    policies compared by the third-party judge and by the reward; write the generations, outcomes, win rates (table
    and figure) and ``examples.md``."""
    require_align()
    cfg = ctx.align.evaluate
    n_prompts, n = cfg.prompts, int(cfg.n)
    device = pick_device(str(ctx.align.dpo.device))
    prompts = []
    for d in DOMAINS:
        seen: dict[str, None] = {}
        for p in ripd_split(ctx, d, "test", None):
            seen.setdefault(p.prompt, None)
        for i, text in enumerate(list(seen)[: int(n_prompts) if n_prompts is not None else None]):
            prompts.append({"domain": d, "prompt_id": f"{d}{i}", "prompt": text})
    if not prompts:
        raise ConfigError(f"outputs/data/ripd/{ctx.setting}: no test prompt to evaluate on")
    source = policy_source(ctx.policy.model, ctx.cache_dir)
    tokenizer = load_tokenizer(source)
    policies: dict[str, Path | None] = {"original": None}
    untrained = _untrained(ctx)
    for rubric in RUBRICS:
        for regime in ctx.regimes:
            a, name = adapter_dir(ctx, rubric, regime), policy_name(rubric, regime)
            if name in untrained:
                continue
            if not (a / "adapter_config.json").exists() and not (a / "config.json").exists():
                raise ConfigError(f"{a}: no trained policy; run `rubriclab align train` (or the `align` stage) first")
            policies[name] = a
    frames = []
    texts = [p["prompt"] for p in prompts]
    sampled: dict[str, pd.DataFrame] = {}  # a saved policy's digest -> its candidates
    for name, adapter in policies.items():
        digest = policy_digest(adapter) if adapter is not None else None
        if digest in sampled:  # the same weights (copied for an equal label set), the same seed: the same draws
            frames.append(sampled[digest].assign(policy=name))
            continue
        model = load_policy(source, adapter=adapter, device=device)  # a LoRA adapter or a full checkpoint
        cand = generate_candidates(model, tokenizer, texts, n=n, temperature=float(cfg.temperature),
                                   top_p=float(cfg.top_p), max_new_tokens=int(cfg.max_new_tokens),
                                   seed=ctx.seed)
        meta = pd.DataFrame(prompts).iloc[cand["prompt_index"]].reset_index(drop=True)
        frames.append(pd.concat([meta, cand], axis=1).assign(policy=name))
        if digest is not None:
            sampled[digest] = frames[-1]
        del model
    cands = pd.concat(frames, ignore_index=True)
    reward = ctx.reward
    if reward.model.startswith("hf/"):
        scores = reward_model_scores(reward.model[3:], cands["prompt"].tolist(), cands["response"].tolist(),
                                     device=device)
        cands["score"], cands["score_error"] = scores, None
    else:
        scores, errors = judge_scores(cands["prompt"].tolist(), cands["response"].tolist(), gateway=ctx.gateway,
                                      scorer=reward, templates_dir=ctx.templates_dir)
        cands["score"], cands["score_error"] = scores, errors
    out = ctx.out
    atomic.write_csv(cands, out / "generations.csv", index=False)
    best = best_of_n(cands)
    if untrained:  # no policy to sample from: its comparisons are counted as missing, with the reason
        best = pd.concat([best, pd.DataFrame([
            {**p, "policy": name, "response": None, "score": np.nan, "sample": None, "cut_off": None,
             "n_candidates": 0, "n_scored": 0, "note": why} for name, why in untrained.items() for p in prompts])],
            ignore_index=True)
    atomic.write_csv(best, out / "best_of_n.csv", index=False)
    comps = comparisons_for(ctx.regimes, RUBRICS)
    n_boot, conf, tie = int(ctx.align.n_boot), float(ctx.align.confidence), ctx.tie_credit
    judged = judge_outcomes(best, comps, gateway=ctx.gateway, judge=ctx.third, rubric=ctx.third_rubric,
                            seed=ctx.seed, samples=int(cfg.judge_samples), tie_credit=tie,
                            templates_dir=ctx.templates_dir)
    rewarded = reward_outcomes(best, comps, tie_credit=tie)
    atomic.write_csv(judged, out / "judge_outcomes.csv", index=False)
    atomic.write_csv(rewarded, out / "reward_outcomes.csv", index=False)
    rates = pd.concat([win_rates(judged, n_boot=n_boot, confidence=conf, seed=ctx.seed, source="third-party judge",
                                 tie_credit=tie),
                       win_rates(rewarded, n_boot=n_boot, confidence=conf, seed=ctx.seed, source="reward",
                                 tie_credit=tie)],
                      ignore_index=True)
    atomic.write_csv(rates, out / "win_rates.csv", index=False)
    win_rate_figure(rates, out / "win_rates.png")
    _examples(best, out / "examples.md", [*policies, *untrained])
    return {"candidates": cands, "best": best, "judged": judged, "rewarded": rewarded, "rates": rates,
            "policies": list(policies), "untrained": untrained}


def _untrained(ctx: AlignContext) -> dict[str, str]:
    """Policies the train step recorded as not trained (no labelled pair), with the reason."""
    f = ctx.out / "training.csv"
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
                cut = "—" if pd.isna(r["cut_off"]) else "yes" if bool(r["cut_off"]) else "no"  # numpy.bool_ is not True
                lines.append(f"| {name} | {score} | {cut} | {text} |")
        lines.append("")
    atomic.write_text(path, "\n".join(lines) + "\n", encoding="utf-8")
