"""The align stage's preference margins: each distinct sequence once, batched by length (now) vs per call as given.

``run_train`` measures log π(chosen|x) − log π(rejected|x) on each label set's training pairs, for the base policy
(before) and the trained one (after). It used to evaluate chosen and rejected in two passes of batches in row order
(padded to the longest of 8), and the base policy again for every label set, though the sets share their pairs
(bench + target = bench_target). ``sequence_logprobs`` now evaluates each distinct (prompt, response) once, in
batches of similar length, with a memo of the base policy's values across label sets. This replays the stage's
margin computations on a finished align stage's labels and adapters, both arms alternating in one process, and
prints what they wrote (mean before, mean after, pairs moved toward the label) per label set.

    python benchmarks/align_margins.py [--align outputs/align/demo] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def old_logprobs(model, tokenizer, prompts, responses, batch_size=8):
    """``sequence_logprobs`` as it was: batches in the order given, every sequence evaluated."""
    import torch

    from rubriclab.align import chat_prompt

    out = []
    for i in range(0, len(prompts), batch_size):
        ids, masks = [], []
        for p, r in zip(prompts[i:i + batch_size], responses[i:i + batch_size]):
            prefix = tokenizer(chat_prompt(tokenizer, p), add_special_tokens=False)["input_ids"]
            body = tokenizer(str(r) + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
            ids.append(prefix + body)
            masks.append([0] * len(prefix) + [1] * len(body))
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids])
        attn = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
        target = torch.tensor([m + [0] * (width - len(m)) for m in masks])
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attn).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        out.append((logp * target[:, 1:]).sum(-1).numpy())
    return np.concatenate(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--align", type=Path, default=Path("outputs/align/demo"), help="a finished align stage's folder")
    ap.add_argument("--policy", default=".rubriclab/models/smollm2-135m", help="the policy the stage trained")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    from rubriclab.align import load_policy, load_tokenizer, sequence_logprobs

    training = pd.read_csv(args.align / "training.csv")
    jobs = []
    for row in training.itertuples():
        if not isinstance(row.note, str) and row.n_pairs > 0:  # trained here (not a copy of another label set)
            parts = ["bench", "target"] if row.regime == "bench_target" else [row.regime]
            data = pd.concat([pd.read_json(args.align / "labels" / f"{row.rubric}.{p}.jsonl", lines=True)
                              for p in parts], ignore_index=True)
            jobs.append((row.policy, data, args.align / "adapters" / f"{row.rubric}_{row.regime}"))
    if not jobs:
        raise SystemExit(f"{args.align}: no trained label set; run `make repro` first")
    tokenizer, base = load_tokenizer(args.policy), load_policy(args.policy)
    adapters = {name: load_policy(args.policy, adapter=a) for name, _, a in jobs}

    def run(arm: str) -> list[tuple[float, float, int]]:
        memo: dict = {}
        out = []
        for name, d, _ in jobs:
            p, c, r = (d[k].astype(str).tolist() for k in ("prompt", "chosen", "rejected"))
            if arm == "before":
                b = old_logprobs(base, tokenizer, p, c) - old_logprobs(base, tokenizer, p, r)
                a = old_logprobs(adapters[name], tokenizer, p, c) - old_logprobs(adapters[name], tokenizer, p, r)
            else:
                lb = sequence_logprobs(base, tokenizer, p + p, c + r, memo=memo)
                la = sequence_logprobs(adapters[name], tokenizer, p + p, c + r)
                b, a = lb[:len(p)] - lb[len(p):], la[:len(p)] - la[len(p):]
            out.append((float(np.mean(b)), float(np.mean(a)), int(np.sum(a > b))))
        return out

    seconds: dict[str, list[float]] = {"before": [], "now": []}
    results = {}
    for i in range(args.repeats):
        for arm in (["before", "now"] if i % 2 == 0 else ["now", "before"]):
            t = time.perf_counter()
            results[arm] = run(arm)
            seconds[arm].append(time.perf_counter() - t)
    n_seq = sum(2 * len(d) for _, d, _ in jobs)
    print(f"{args.align}: {len(jobs)} trained label sets, {n_seq} sequences each for the base and the trained policy; "
          f"median of {args.repeats} alternating runs")
    med = {a: float(np.median(s)) for a, s in seconds.items()}
    print(f"  before (row-order batches, every sequence) {med['before']:6.1f} s")
    print(f"  now (distinct sequences by length, memo)   {med['now']:6.1f} s   {med['before'] / med['now']:.2f}x")
    print(f"  {'label set':20} {'before: mean before':>19} {'after':>10} {'moved':>5}   {'now: mean before':>16} "
          f"{'after':>10} {'moved':>5}")
    for (name, _, _), old, new in zip(jobs, results["before"], results["now"]):
        print(f"  {name:20} {old[0]:19.5f} {old[1]:10.5f} {old[2]:5d}   {new[0]:16.5f} {new[1]:10.5f} {new[2]:5d}")
    same = all(o[2] == n[2] and np.allclose(o[:2], n[:2], rtol=1e-5) for o, n in zip(results["before"], results["now"]))
    print(f"  the same pairs moved and means within 1e-5 (relative) for every set: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
