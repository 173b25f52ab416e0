"""The align stage's torch work: DPO training with TRL's reference pass in every step (before) vs each distinct
sequence's reference log-probabilities once for all the stage's trainings (now, ``rubriclab.align._reference``);
best-of-n generation from a trained LoRA policy as a PEFT model (before) vs merged into its weights (now,
``load_policy``).

Replays the trainings of a finished align stage (its label files, the settings in params.yaml, the label sets the
stage trained: a label set equal to an earlier one is not retrained, as in the stage) both ways, the arms
alternating per repeat in one process, and prints the wall time of each arm's trainings, the reference passes, and
how far the two arms' step losses lie apart. Then generates from each of the stage's adapters with its
``align.evaluate`` settings (n, temperature, top_p, max_new_tokens) on its training prompts, both ways, alternating
per adapter, and prints the time and how many replies the two ways share.

    python benchmarks/align_reference.py [--project .] [--setting demo] [--repeats 1] [--prompts 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def train_all(ctx, settings, source, memo, out: Path):
    from rubriclab.align import RUBRICS, label_digest, read_labels, train_dpo

    seen, results = set(), {}
    for rubric in RUBRICS:
        for regime in ctx.regimes:
            data = read_labels(ctx, rubric, regime)
            if data.empty or label_digest(data) in seen:
                continue
            seen.add(label_digest(data))
            results[f"{rubric}@{regime}"] = train_dpo(source, data, settings, out / f"{rubric}_{regime}",
                                                      reference_memo=memo)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, default=Path("."), help="a project whose align stage has run")
    ap.add_argument("--setting", default="demo")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=4, help="training prompts to generate from, per adapter")
    args = ap.parse_args()

    from rubriclab.align import DPOSettings, policy_source
    from rubriclab.config import load_params
    from rubriclab.stages.align import align_context

    project = args.project.resolve()
    ctx = align_context(load_params(project / "params.yaml"), project, args.setting)
    source = policy_source(ctx.policy.model, ctx.cache_dir)
    now = DPOSettings.of(ctx.align.dpo, ctx.seed)
    before = DPOSettings(now.dpo, now.seed, {"precompute_ref_log_probs": False})  # TRL's pass in every step
    arms = {"before": before, "now": now}
    walls = {a: [] for a in arms}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for arm in (arms if rep % 2 == 0 else reversed(list(arms))):
                t0 = time.perf_counter()
                runs[arm] = train_all(ctx, arms[arm], source, {}, Path(tmp) / f"{arm}{rep}")
                walls[arm].append(time.perf_counter() - t0)
    steps = sum(r["steps"] for r in runs["now"].values())
    print(f"{len(runs['now'])} trainings, {steps} steps, {args.repeats} repeat(s), arms alternating")
    for arm in arms:
        passes = sum(r["reference_passes"] for r in runs[arm].values())
        print(f"{arm:7s} wall {min(walls[arm]):7.1f} s best ({', '.join(f'{w:.1f}' for w in walls[arm])}); "
              f"reference passes before the steps: {passes} pairs")
    print(f"before/now: {min(walls['before']) / min(walls['now']):.2f}x")
    loss = max(float(np.max(np.abs(runs["now"][k]["history"]["loss"].to_numpy()
                                   - runs["before"][k]["history"]["loss"].to_numpy()))) for k in runs["now"])
    print(f"largest step-loss difference between the arms: {loss:.2e}")
    generation(ctx, source, args.prompts)
    return 0


def generation(ctx, source, n_prompts: int) -> None:
    from rubriclab.align import RUBRICS, generate_candidates, load_policy, load_tokenizer, read_labels

    ev = ctx.align.evaluate
    adapters = sorted(p for p in (ctx.out / "adapters").iterdir() if (p / "adapter_config.json").exists())
    prompts = list(dict.fromkeys(read_labels(ctx, RUBRICS[0], "bench_target")["prompt"].astype(str)))[:n_prompts]
    tokenizer = load_tokenizer(source)
    walls, same, total = {"peft": 0.0, "merged": 0.0}, 0, 0
    for i, adapter in enumerate(adapters):
        replies = {}
        for arm in (("peft", "merged") if i % 2 == 0 else ("merged", "peft")):
            model = load_policy(source, adapter=adapter, training=arm == "peft").eval()  # training: the PEFT wrapper
            t0 = time.perf_counter()
            out = generate_candidates(model, tokenizer, prompts, n=ev.n, temperature=ev.temperature, top_p=ev.top_p,
                                      max_new_tokens=ev.max_new_tokens, seed=ctx.seed)
            walls[arm] += time.perf_counter() - t0
            replies[arm] = out["response"].tolist()
        same += sum(a == b for a, b in zip(replies["peft"], replies["merged"]))
        total += len(replies["peft"])
    print(f"generation: {len(adapters)} adapters x {len(prompts)} prompts x n={ev.n}, {ev.max_new_tokens} new tokens: "
          f"PEFT {walls['peft']:.1f} s, merged {walls['merged']:.1f} s, {walls['peft'] / walls['merged']:.2f}x; "
          f"{same} of {total} replies the same")


if __name__ == "__main__":
    raise SystemExit(main())
