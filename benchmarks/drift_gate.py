"""The drift gate's false-alarm rate on neutral paraphrases and its detection rate for planted drift, in one run.

On the scripted drift world (rubriclab.testing.drift_world: the judge is wrong on a fixed ``--base-error`` share
of pairs, a neutral rewording flips a ``--noise`` share of verdicts chosen by a hash of (rubric text, pair), and
a rubric holding BIAS_SENTENCE flips a ``bias_strength`` share of target pairs), each check compares a seed
rubric with an edit on ``--n`` benchmark and ``--n`` target pairs, benchmark domain ``bench``, α = 0.05:

  (a) false alarms: ``--paraphrases`` neutral paraphrases of the seed (other openings, neutral sentences
      added; none holds the bias sentence), each on its own fresh pairs. A flag of any kind is a false alarm;
      goal ≤ α (the nominal level), met when the one-sided 95% Clopper–Pearson upper bound is ≤ α (0 alarms
      in 59 or more paraphrases can show it; the default is 60).
  (b) detection: for each planted bias strength in ``--sizes``, ``--reps`` biased edits (a neutral paraphrase
      plus BIAS_SENTENCE), each on its own fresh pairs. Detected = the gate fails with a flag on ``target``
      (``directional_drift``, or ``regression`` when the benchmark's own noise took its point estimate below
      −ε); the share flagged as ``directional_drift`` is shown beside it. The table also gives the realised
      drop on target (mean Δ agreement) and the mean MDE the gate reported for the target domain. Every rate has
      its n and its two-sided 95% Clopper–Pearson interval.

Fresh call store; every verdict is a scripted judge call through the gateway (the same path as a real run).

    python benchmarks/drift_gate.py [--n 60] [--paraphrases 60] [--reps 20] [--sizes 0.1,0.2,0.3,0.5]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from rubriclab.drift import drift_check  # noqa: E402
from rubriclab.judging import PairwiseRubric  # noqa: E402
from rubriclab.llm import Gateway, SQLiteCallStore  # noqa: E402
from rubriclab.rubrics import JudgeTemplate  # noqa: E402
from rubriclab.settings import Gate  # noqa: E402
from rubriclab.testing import BIAS_SENTENCE, NEUTRAL_SENTENCES, drift_pairs, drift_world  # noqa: E402

ALPHA = 0.05
# short markers between the answers: the scripted judge identifies a pair by the first 200 characters from
# the first response on, so a long text between the answers would cut off the pair's own words
BODY = ("[User Question]\n{question}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
        "Output your final verdict: [[A]] if assistant A is better, [[B]] if assistant B is better.")
OPENINGS = (
    "Please act as an impartial judge and decide which assistant answered the user better.",
    "You are an impartial evaluator. Decide which of the two assistants gave the better answer.",
    "Act as a fair judge and compare the two assistants' answers to the user question below.",
    "Evaluate the two responses below impartially and pick the better one.",
    "As an unbiased judge, determine which assistant responded to the user more appropriately.",
    "Compare the two answers below as a neutral referee and choose the better response.",
    "Your task: judge impartially which assistant's reply to the user is better.",
)


def template(name: str, opening: str, sentences: tuple[str, ...] = ()) -> PairwiseRubric:
    # the rubric's own words come before the responses (the scripted judge keys its noise on them)
    return PairwiseRubric.of(JudgeTemplate(name=name, text=" ".join((opening, *sentences)) + "\n\n" + BODY))


def paraphrases(k: int) -> list[tuple[str, tuple[str, ...]]]:
    """``k`` neutral variants of the seed (opening × subset of neutral sentences), the seed itself excluded."""
    subsets = [s for r in range(len(NEUTRAL_SENTENCES) + 1) for s in itertools.combinations(NEUTRAL_SENTENCES, r)]
    variants = [(o, s) for s in subsets for o in OPENINGS][1:]  # [0] is the seed (first opening, no sentence)
    if k > len(variants):
        sys.exit(f"at most {len(variants)} paraphrases available")
    return variants[:k]


class Chunks:
    """Fresh, disjoint pairs for every check (pair contents depend on their index in drift_pairs)."""

    def __init__(self, n: int, total: int):
        self.n, self.next = n, 0
        self.bench, self.target = drift_pairs(n * total, "bench"), drift_pairs(n * total, "target")

    def take(self) -> list:
        i, self.next = self.next, self.next + 1
        return self.bench[i * self.n:(i + 1) * self.n] + self.target[i * self.n:(i + 1) * self.n]


def check(seed, edit, pairs, gw, judge, n_boot):
    res = drift_check(seed, edit, pairs, gateway=gw, judge=judge, bench_domain="bench", gate=Gate(seed=0, alpha=ALPHA,
                      n_boot=n_boot))
    target = res.domains.set_index("domain").loc["target"]
    return res, float(target["diff"]), float(target["mde"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=60, help="pairs per domain (bench and target) in each check")
    ap.add_argument("--paraphrases", type=int, default=60)
    ap.add_argument("--reps", type=int, default=20, help="biased edits per drift size")
    ap.add_argument("--sizes", default="0.1,0.2,0.3,0.5", help="planted bias strengths (share of target pairs)")
    ap.add_argument("--noise", type=float, default=0.05, help="share of verdicts a rewording flips")
    ap.add_argument("--base-error", type=float, default=0.1)
    ap.add_argument("--n-boot", type=int, default=500)
    args = ap.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    t0 = time.monotonic()
    chunks = Chunks(args.n, args.paraphrases + args.reps * len(sizes))
    variants = paraphrases(max(args.paraphrases, args.reps))
    seed = template("seed", OPENINGS[0])
    with tempfile.TemporaryDirectory() as tmp:
        gw = Gateway(SQLiteCallStore(Path(tmp) / "calls.sqlite"), stage="bench", progress=False)

        judge = drift_world("gatebench-null", base_error=args.base_error, noise=args.noise, bias_strength=0.0)["judge"]
        alarms, kinds = 0, {}
        for i, (opening, sents) in enumerate(variants[:args.paraphrases]):
            res, _, _ = check(seed, template(f"para{i}", opening, sents), chunks.take(), gw, judge, args.n_boot)
            alarms += res.flagged
            for f in res.flags:
                kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        fa = alarms / args.paraphrases

        rows = []
        for s in sizes:
            judge = drift_world(f"gatebench-{s:g}", base_error=args.base_error, noise=args.noise,
                                bias_strength=s)["judge"]
            hits, directional, drops, mdes = 0, 0, [], []
            for r in range(args.reps):
                opening, sents = variants[r]
                edit = template(f"biased{r}", opening, (*sents, BIAS_SENTENCE))
                res, diff, mde = check(seed, edit, chunks.take(), gw, judge, args.n_boot)
                on_target = {f["kind"] for f in res.flags if f["domain"] == "target"}
                hits += bool(on_target)
                directional += "directional_drift" in on_target
                drops.append(-diff)
                mdes.append(mde)
            rows.append((s, float(np.mean(drops)), float(np.mean(mdes)), hits, directional))
    wall = time.monotonic() - t0

    print(f"drift gate on the scripted drift world: {args.n} bench + {args.n} target pairs per check (fresh pairs "
          f"each), base error {args.base_error:g}, rewording noise {args.noise:g}, alpha {ALPHA:g}")
    upper = stats.binomtest(alarms, args.paraphrases).proportion_ci(0.95, method="exact")  # two-sided, for the line
    one_sided = stats.binomtest(alarms, args.paraphrases, alternative="less").proportion_ci(0.95, method="exact").high
    verdict = ("PASS" if one_sided <= ALPHA else
               "not shown" if fa <= ALPHA else "FAIL")
    print(f"\n(a) false alarms on {args.paraphrases} neutral paraphrases: {alarms}/{args.paraphrases} = {fa:.1%} "
          f"[{upper.low:.1%}, {upper.high:.1%}] (95% Clopper-Pearson, n = {args.paraphrases}); goal <= {ALPHA:.0%}: "
          f"{verdict} (one-sided 95% upper bound {one_sided:.1%})"
          + (f"; flags: {', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}" if kinds else ""))
    print(f"\n(b) detection of planted drift ({args.reps} biased edits per size; rates with their 95% Clopper-Pearson "
          f"intervals, n = {args.reps})\n")
    print("| bias strength | realised drop on target | mean MDE (target) | detection rate | as directional drift |")
    print("|---|---|---|---|---|")

    def rate(k: int) -> str:
        ci = stats.binomtest(k, args.reps).proportion_ci(0.95, method="exact")
        return f"{k}/{args.reps} = {k / args.reps:.0%} [{ci.low:.0%}, {ci.high:.0%}]"

    for s, drop, mde, hits, direc in rows:
        print(f"| {s:g} | {drop:.3f} | {mde:.3f} | {rate(hits)} | {rate(direc)} |")
    print(f"\n{wall:.0f}s")
    return 0 if fa <= ALPHA else 1


if __name__ == "__main__":
    sys.exit(main())
