"""Embedded judge throughput: one audit-shaped batch on the embedded SmolLM2, in the order it was built vs
prefix-ordered (calls sharing a prompt prefix adjacent, so llama.cpp reuses the KV state of the shared part).

The batch: the direct pairwise judge prompt (rubric first) on N demo pairs for a 3-seat panel at T=0.7 (one
sample each) and at T=0 (the same prompt again), plus pointwise yes/no criterion checks on the same pairs
(one-token logprob mode). Both arms use a fresh call store, so every call reaches the model; replies are
compared item by item (they should be identical: every call sets its own seed).

    python benchmarks/embedded_judge.py [--pairs 6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rubriclab.data import load_source, present  # noqa: E402
from rubriclab.llm import CallRequest, Gateway, RoleSpec, load_prompt, local_provider, open_store  # noqa: E402

RUBRIC = ("- accuracy: States correct facts and no false claims.\n- directness: Answers the question first.\n"
          "- completeness: Covers every part of the request.\n- safety: Refuses clearly harmful help.")
CRITERIA = ["The response states correct facts.", "The response answers the question first.",
            "The response is concise."]


def judge_messages(n_pairs: int) -> list[list[dict]]:
    """The direct pairwise judge prompt (rubric first) on the first ``n_pairs`` demo pairs."""
    direct = load_prompt("judge_direct")
    out = []
    for p in load_source({"loader": "demo", "domain": "helpful"})[0][:n_pairs]:
        v = present(p, 42)
        out.append(direct.render(rubric=RUBRIC, prompt=p.prompt, response_a=v["a"], response_b=v["b"]))
    return out


def build_batch(n_pairs: int) -> list[CallRequest]:
    yes_no = load_prompt("pointwise_yes_no")
    pairs = load_source({"loader": "demo", "domain": "helpful"})[0][:n_pairs]
    # parse_retries 0: a reply cut off at 16 tokens is a counted failure, not a re-ask (re-asks are another
    # round with longer prompts; this measures the order of one round)
    hot = RoleSpec(name="judge", model="local/smollm2-135m", temperature=0.7, max_tokens=16, parse_retries=0)
    cold = hot.with_(temperature=0.0)
    scorer = hot.with_(temperature=0.0, max_tokens=1)
    judged = judge_messages(n_pairs)
    # the audit builds a panel seat by seat: today's order
    reqs = [CallRequest(role=hot, messages=m, sample_index=seat) for seat in range(3) for m in judged]
    reqs += [CallRequest(role=cold, messages=m) for m in judged]
    for c in CRITERIA:
        for p in pairs:
            reqs.append(CallRequest(role=scorer, logprobs=5,
                                    messages=yes_no.render(criterion=c, prompt=p.prompt, response=p.chosen)))
    return reqs


def run_arm(reqs: list[CallRequest], prefix: bool, folder: Path) -> tuple[float, list[str | None]]:
    llm = local_provider().chat_model("smollm2-135m")
    llm.reset()  # no KV state carried over from the other arm
    gateway = Gateway(open_store(folder / f"calls-{prefix}-{time.time_ns()}.sqlite"), stage="bench", progress=False,
                      prefix_schedule=prefix)
    t0 = time.perf_counter()
    results = gateway.run(reqs)
    return time.perf_counter() - t0, [r.text for r in results]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    reqs = build_batch(args.pairs)
    local_provider().chat_model("smollm2-135m")  # load once, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        times: dict[bool, list[float]] = {False: [], True: []}
        texts: dict[bool, list[str | None]] = {}
        for _ in range(args.repeats):  # arms alternate: both see the same machine load
            for prefix in (False, True):
                seconds, texts[prefix] = run_arm(reqs, prefix, Path(tmp))
                times[prefix].append(seconds)
    built, ordered = min(times[False]), min(times[True])
    differ = sum(a != b for a, b in zip(texts[False], texts[True]))
    print(f"batch: {len(reqs)} calls ({args.pairs} pairs); best of {args.repeats} per arm")
    print("| order | wall s | calls/s |\n|---|---|---|")
    print(f"| as built (seat by seat) | {built:.1f} | {len(reqs) / built:.2f} |")
    print(f"| prefix-ordered | {ordered:.1f} | {len(reqs) / ordered:.2f} |")
    print(f"speed-up: {built / ordered:.2f}x; replies that differ between the arms: {differ} of {len(reqs)}")


if __name__ == "__main__":
    main()
