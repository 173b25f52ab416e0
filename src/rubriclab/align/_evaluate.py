"""Policy evaluation (seed 003 App. A.4): best-of-n sampling on held-out prompts, reward scoring, and
win rates from a third-party pairwise judge (randomised A/B order, ties 0.5) and from the reward scores.

Every policy samples with the same seed (common random numbers), so two policies differ by their weights,
not by their draws. A reply that hits ``max_new_tokens`` is kept (it is what the policy says) and counted
as cut off. Two identical best responses are a tie without a judge call. A failed score or verdict is
left out of the denominator and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.align._intervals import too_few
from rubriclab.align._policy import chat_prompt, inference_precision
from rubriclab.data import Pair
from rubriclab.errors import ArgumentError
from rubriclab.judging import judge_pairs
from rubriclab.llm import CallRequest, answer_format, load_prompt
from rubriclab.stats import TIE_CREDIT, at_tie_credit, item_bootstrap, other_tie_credit, ties_common


def generate_candidates(model: Any, tokenizer: Any, prompts: Sequence[str], *, n: int, temperature: float,
                        top_p: float, max_new_tokens: int, seed: int, batch_size: int = 8) -> pd.DataFrame:
    """``n`` sampled replies per prompt: rows ``prompt_index, sample, response, n_tokens, cut_off``."""
    import torch

    if n < 1:
        raise ArgumentError(f"n={n}: best-of-n needs n ≥ 1")
    if temperature <= 0 and n > 1:
        raise ArgumentError(f"n={n} at temperature {temperature}: greedy decoding draws {n} identical replies; set "
                            "align.evaluate.n: 1, or a temperature > 0 for best-of-n")
    device = next(model.parameters()).device
    tokenizer.padding_side = "left"
    torch.manual_seed(seed)
    rows = []
    for start in range(0, len(prompts), batch_size):
        chunk = list(prompts[start:start + batch_size])
        enc = tokenizer([chat_prompt(tokenizer, p) for p in chunk], return_tensors="pt", padding=True,
                        add_special_tokens=False).to(device)
        with torch.no_grad(), inference_precision(device):
            out = model.generate(**enc, do_sample=temperature > 0, temperature=temperature or None,
                                 top_p=top_p if temperature > 0 else None, max_new_tokens=max_new_tokens,
                                 num_return_sequences=n, pad_token_id=tokenizer.pad_token_id)
        new = out[:, enc["input_ids"].shape[1]:]
        for j, seq in enumerate(new):
            ids = seq.tolist()
            eos = tokenizer.eos_token_id
            ended = eos in ids
            ids = ids[: ids.index(eos)] if ended else ids
            ids = [t for t in ids if t != tokenizer.pad_token_id]
            rows.append({"prompt_index": start + j // n, "sample": j % n,
                         "response": tokenizer.decode(ids, skip_special_tokens=True).strip(),
                         "n_tokens": len(ids), "cut_off": not ended})
    return pd.DataFrame(rows, columns=["prompt_index", "sample", "response", "n_tokens", "cut_off"])


def judge_scores(prompts: Sequence[str], responses: Sequence[str], *, gateway: Any, scorer: Any,
                 templates_dir: str | None = None) -> tuple[list[float | None], list[str | None]]:
    """Pointwise 1–10 quality scores from a chat judge through the gateway (when no reward model is given)."""
    tpl = load_prompt("align_reward", templates_dir)
    requests = [CallRequest(messages=tpl.render(prompt=p, response=r), tag=i, **answer_format(scorer, "score_1_10"))
                for i, (p, r) in enumerate(zip(prompts, responses))]
    scores: list[float | None] = [None] * len(requests)
    errors: list[str | None] = [None] * len(requests)
    for res in gateway.run(requests, desc="align: reward scores") if requests else []:
        if res.ok:
            scores[res.tag] = float(res.value)
        else:
            errors[res.tag] = res.parse_error or res.error
    return scores, errors


def reward_model_scores(model_id: str, prompts: Sequence[str], responses: Sequence[str], *, device: str = "cpu",
                        batch_size: int = 8) -> list[float]:
    """Scalar rewards from a Hugging Face sequence-classification reward model (logit 0 per input)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_id)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(model_id).to(device).eval()
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    texts = []
    for p, r in zip(prompts, responses):
        if getattr(tok, "chat_template", None):
            texts.append(tok.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": r}],
                                                 tokenize=False))
        else:
            texts.append(f"{p}\n{r}")
    out: list[float] = []
    for i in range(0, len(texts), batch_size):
        enc = tok(texts[i:i + batch_size], return_tensors="pt", padding=True, truncation=True).to(device)
        with torch.no_grad():
            out.extend(model(**enc).logits[:, 0].float().cpu().tolist())
    return out


def best_of_n(scored: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, prompt): the highest-scored candidate; a prompt whose candidates all failed scoring has no best
    response (``response`` None, counted in ``n_scored`` = 0).

    Equal top scores (common with a 1–10 judge score) go to the lowest sample index, on purpose: the samples are
    i.i.d. draws, so the first of the tied ones is already a uniformly random pick among them, and it keeps the
    common random numbers shared by every policy. ``n_top`` counts the candidates that shared the top score."""
    keys = ["policy", "domain", "prompt_id"]
    rows = []
    for key, g in scored.groupby(keys, sort=False):
        ok = g[g["score"].notna()].sort_values(["score", "sample"], ascending=[False, True])
        first = g.iloc[0]
        best = ok.iloc[0] if len(ok) else None
        rows.append({**dict(zip(keys, key)), "prompt": first["prompt"],
                     "response": None if best is None else best["response"],
                     "score": np.nan if best is None else float(best["score"]),
                     "sample": None if best is None else int(best["sample"]),
                     "cut_off": None if best is None else bool(best["cut_off"]),
                     "n_candidates": len(g), "n_scored": len(ok),
                     "n_top": 0 if best is None else int((ok["score"] == best["score"]).sum())})
    return pd.DataFrame(rows)


def comparisons_for(regimes: Sequence[str], rubrics: tuple[str, str], original: str = "original") -> list[tuple]:
    """(left, right, regime) per regime: biased vs seed, seed vs original, biased vs original."""
    seed_name, biased = rubrics
    out = []
    for reg in regimes:
        out += [(f"{biased}@{reg}", f"{seed_name}@{reg}", reg), (f"{seed_name}@{reg}", original, reg),
                (f"{biased}@{reg}", original, reg)]
    return out


def _pairings(best: pd.DataFrame, comparisons: Sequence[tuple]) -> list[dict[str, Any]]:
    idx = best.set_index(["policy", "domain", "prompt_id"])
    out = []
    for left, right, regime in comparisons:
        for (domain, pid), _rows in best[best["policy"] == left].groupby(["domain", "prompt_id"], sort=False):
            lrow, rrow = idx.loc[(left, domain, pid)], idx.loc[(right, domain, pid)]
            out.append({"left": left, "right": right, "regime": regime, "domain": domain, "prompt_id": pid,
                        "prompt": lrow["prompt"], "left_response": lrow["response"],
                        "right_response": rrow["response"], "left_score": lrow["score"],
                        "right_score": rrow["score"]})
    return out


def judge_outcomes(best: pd.DataFrame, comparisons: Sequence[tuple], *, gateway: Any, judge: Any, rubric: Any,
                   seed: int, samples: int = 1, tie_credit: float = TIE_CREDIT,
                   templates_dir: str | None = None) -> pd.DataFrame:
    """One row per (comparison, prompt): the third-party judge's outcome for the left policy
    (1 win, ``tie_credit`` tie, 0 loss, NaN failed) and how it was reached (judge / identical / missing)."""
    rows = _pairings(best, comparisons)
    pairs = []
    for i, r in enumerate(rows):
        if not isinstance(r["left_response"], str) or not isinstance(r["right_response"], str):  # None / NaN
            r.update(outcome=np.nan, status="missing", verdict=None)
        elif r["left_response"] == r["right_response"]:
            r.update(outcome=tie_credit, status="identical", verdict=None)
        else:
            pairs.append(Pair(id=f"cmp{i}", domain=r["domain"], prompt=r["prompt"], chosen=r["left_response"],
                              rejected=r["right_response"]))
    if pairs:
        judged = judge_pairs({"third_party": rubric}, pairs, gateway=gateway, judge=judge, seed=seed,
                             samples=samples, templates_dir=templates_dir, desc="align: third-party judge")
        credit = {"agree": 1.0, "disagree": 0.0, "tie": float(tie_credit), "failed": np.nan}
        for j in judged.itertuples():
            r = rows[int(j.pair_id[3:])]
            r.update(outcome=credit[j.status], status={"agree": "win", "disagree": "loss"}.get(j.status, j.status),
                     verdict=j.verdict, swapped=j.swapped)
    return pd.DataFrame(rows)


def reward_outcomes(best: pd.DataFrame, comparisons: Sequence[tuple], tie_credit: float = TIE_CREDIT) -> pd.DataFrame:
    """One row per (comparison, prompt): 1 when the left best response has the higher reward score, the tie credit
    on equal scores, 0 below, NaN when either has no score."""
    rows = _pairings(best, comparisons)
    for r in rows:
        a, b = r["left_score"], r["right_score"]
        if pd.isna(a) or pd.isna(b):
            r.update(outcome=np.nan, status="missing")
        else:
            r.update(outcome=1.0 if a > b else (tie_credit if a == b else 0.0),
                     status="win" if a > b else ("tie" if a == b else "loss"))
    return pd.DataFrame(rows)


def win_rates(outcomes: pd.DataFrame, *, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0,
              source: str = "judge", tie_credit: float = TIE_CREDIT) -> pd.DataFrame:
    """Win rate of the left policy per (comparison, regime, eval domain): the mean outcome over prompts with a
    percentile bootstrap over prompts; ties and failures counted beside it. ``tie_credit``: the credit the
    outcomes gave a tie, recorded in its column for the table and the figure."""
    out = []
    interval = f"percentile bootstrap over prompts, {confidence:.0%}, B={n_boot}"
    for (left, right, regime, domain), g in outcomes.groupby(["left", "right", "regime", "domain"], sort=False):
        values = g["outcome"].dropna().to_numpy(dtype=float)
        row = {"source": source, "left": left, "right": right, "comparison": f"{left.split('@')[0]} vs "
               f"{right.split('@')[0]}", "regime": regime, "domain": domain, "n": len(values),
               "n_tie": int(g["status"].isin(["tie", "identical"]).sum()),
               "n_identical": int((g["status"] == "identical").sum()),
               "n_failed": int(g["outcome"].isna().sum()), "tie_credit": float(tie_credit), "interval": interval}
        if len(values):
            boot = item_bootstrap(values, "mean", None, n_resamples=n_boot, confidence=confidence, seed=seed)
            few = too_few(len(values), "prompts", confidence)
            row.update(estimate=float(boot["estimate"]), low=np.nan if few else float(boot["low"]),
                       high=np.nan if few else float(boot["high"]), reason=few or boot.get("degenerate"),
                       other_tie_credit=other_tie_credit(tie_credit),
                       estimate_at_other_tie_credit=at_tie_credit(float(boot["estimate"]), row["n_tie"], len(values),
                                                                  tie_credit, other_tie_credit(tie_credit)))
        else:
            row.update(estimate=np.nan, low=np.nan, high=np.nan, reason="no prompt with both responses judged")
        out.append(row)
    return pd.DataFrame(out)


REGIME_LABELS = {"bench": "B", "target": "T", "bench_target": "BT"}


def win_rate_table(rates: pd.DataFrame) -> pd.DataFrame:
    """Seed 003 Table 4's shape: rows = comparisons, columns = ``<eval domain>@<training regime>``, cells
    ``win% [low, high] (n)``."""
    cells: dict[str, dict[str, str]] = {}
    for r in rates.itertuples():
        col = f"{r.domain}@{REGIME_LABELS.get(r.regime, r.regime)}"
        if np.isfinite(r.estimate):
            if not (np.isfinite(r.low) and np.isfinite(r.high)):
                text = f"{100 * r.estimate:.1f}% (n={r.n}; {r.reason}"
            elif r.low == r.high:  # a point bootstrap distribution is not an interval
                text = f"{100 * r.estimate:.1f}% (n={r.n}; the same outcome on every prompt: no interval"
            else:
                text = f"{100 * r.estimate:.1f}% [{100 * r.low:.0f}, {100 * r.high:.0f}] (n={r.n}"
            text += (f"; {r.n_tie} tie" + ("s" if r.n_tie != 1 else "") + f" at {r.tie_credit:g}") if r.n_tie else ""
            if ties_common(r.n_tie, r.n):  # common ties: the other rule's win rate beside it
                text += f", {100 * r.estimate_at_other_tie_credit:.1f}% with ties at {r.other_tie_credit:g}"
            text += f"; {r.n_failed} failed" if r.n_failed else ""
            text += ")"
        else:
            text = f"— ({r.reason}; {r.n_failed} failed)"
        cells.setdefault(r.comparison, {})[col] = text
    order = [f"{d}@{REGIME_LABELS.get(g, g)}" for g in dict.fromkeys(rates["regime"]) for d in
             dict.fromkeys(rates["domain"])]
    return pd.DataFrame(cells).T.reindex(columns=order).rename_axis("comparison").reset_index()
