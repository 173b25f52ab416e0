"""Preference fit, empirical: rubric-conditioned judge accuracy against held-out human labels.

Protocol (paper 000, §B.4 / App. E.10; METHODS.md "Preference fit, empirical"): for every rubric set the
judge compares the two responses of each held-out pair under two templates — ``direct`` (the whole rubric
set as a numbered list, one A/B verdict; a rubric set that carries a judge template is judged with that
template instead, through ``rubriclab.judging.pairwise_request``) and ``per_rubric`` (JSON scores per criterion for both
responses, then an overall score; verdict from the overall scores) — plus a ``no_rubric`` baseline
(direct template without the rubric section). Each verdict is the majority of ``samples`` samples at
``temperature``. Accuracy is measured against the HUMAN label (the letter that holds ``chosen``).

Conventions (all stated in the returned numbers, never silent):

* A sample whose reply does not parse (after the gateway's re-asks) or whose call failed is not a vote,
  but it uses up a sample. An item whose samples all failed is a *failure*: it has no verdict, so it is
  counted (``n_failed``) and left out. An item whose majority is a tie (tied vote counts, or a
  per-rubric overall tie winning) is *judged*: accuracy is over all judged items, a tie credited
  ``tie_credit`` (0.5 by default: half a win), and the decided rate (#A/B verdicts / #judged) is
  reported beside it.
* Majority with early stopping: samples are bought in waves (first ``ceil((samples+1)/2)`` per item,
  then only what ``samples_still_needed`` says the undecided items need). The stopping rule is exact,
  so every verdict equals the full-sampling verdict; samples are cached by sample index, so a later
  full-sampling run reuses them.
* Item = pair. With ``both_orders`` every pair is judged in both presentation orders; both judgments
  belong to ONE bootstrap item. Otherwise the order is the seeded ``present(pair, ctx.seed)`` swap.
* Paired comparisons use per-judgment credit (1 right, ``tie_credit`` tie, 0 wrong) on the same item
  set for both conditions: every judgment judged under both. Which items are compared does not depend
  on the verdicts; only a judgment with no verdict at all (every sample failed) under either condition
  is left out of both, and counted with the comparison. The MDE is stated at the Bonferroni level
  α/m for the m comparisons in the family, the level BH holds the smallest p-value to.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rubriclab.audit._context import AuditContext, from_bootstrap, metric
from rubriclab.data import Pair, present, present_both_orders
from rubriclab.errors import InputError
from rubriclab.judging import PairwiseRubric, load_judge_prompt, pairwise_request
from rubriclab.llm import (
    CallRequest,
    CallResult,
    RoleSpec,
    answer_format,
    bounded_integer,
    json_parser,
    load_prompt,
)
from rubriclab.rubrics import RubricSet
from rubriclab.settings import AUDIT_TEMPLATES
from rubriclab.stats import (
    adjust_family,
    at_tie_credit,
    item_bootstrap,
    majority_decided,
    other_tie_credit,
    paired_bootstrap,
    paired_test,
    position_consistency,
    samples_still_needed,
    ties_common,
)

NO_RUBRIC = "no_rubric"
TEMPLATES = AUDIT_TEMPLATES
TIE = "tie"
FAILED = "fail"  # how a failed sample is written in the items table
REASONING_MAX_CHARS = 200  # schema bound for the embedded model: keeps K+1 reasonings within the budget

# -- per-rubric JSON reply ------------------------------------------------------------------------------

def _integral(v: float) -> float:
    if not float(v).is_integer():
        raise ValueError(f"{v} is not an integer (the scale is integer 0-10)")
    return v


# Strict: a JSON number 0-10 on the integer scale (7.0 accepted, 7.5 not); strings or booleans are failures.
_Score = Annotated[float, Field(strict=True, ge=0, le=10), AfterValidator(_integral)]


class _Adherence(BaseModel):
    """Scores of candidate (response A) and baseline (response B) on one trait or overall."""

    model_config = ConfigDict(extra="ignore")
    candidate_reasoning: str = ""
    candidate_adherence: _Score
    baseline_reasoning: str = ""
    baseline_adherence: _Score


class PerRubricReply(BaseModel):
    """The paper's per-rubric JSON reply: ``trait_scores`` by criterion id plus ``overall_score``."""

    model_config = ConfigDict(extra="ignore")
    trait_scores: dict[str, _Adherence]
    overall_score: _Adherence

    def verdict(self) -> str:
        """A if the candidate (A) scores higher overall, B if lower, ``"tie"`` if equal."""
        c, b = self.overall_score.candidate_adherence, self.overall_score.baseline_adherence
        return "A" if c > b else "B" if c < b else TIE


def per_rubric_schema(criterion_ids: Sequence[str]) -> dict[str, Any]:
    """JSON schema for a schema-constrained judge: integer 0-10 scores, short reasoning (reasoning first,
    as in the paper's template, so the score follows it)."""
    reason = {"type": "string", "maxLength": REASONING_MAX_CHARS}
    score = bounded_integer(0, 10)
    adherence = {
        "type": "object",
        "properties": {"candidate_reasoning": reason, "candidate_adherence": score,
                       "baseline_reasoning": reason, "baseline_adherence": score},
        "required": ["candidate_reasoning", "candidate_adherence", "baseline_reasoning", "baseline_adherence"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "trait_scores": {"type": "object", "properties": {cid: adherence for cid in criterion_ids},
                             "required": list(criterion_ids), "additionalProperties": False},
            "overall_score": adherence,
        },
        "required": ["trait_scores", "overall_score"],
        "additionalProperties": False,
    }


def render_traits(rubric_set: RubricSet) -> tuple[str, str]:
    """The ``traits`` block (one line per criterion, id first) and the ``trait_template`` JSON fragment."""
    traits = "\n".join(
        f"- {c.id}" + (f" ({c.title})" if c.title else "") + f": {c.description.strip()}"
        for c in rubric_set.criteria
    )
    template = ", ".join(
        f'"{c.id}": {{"candidate_reasoning": "<1-2 sentences>", "candidate_adherence": <0-10>, '
        f'"baseline_reasoning": "<1-2 sentences>", "baseline_adherence": <0-10>}}'
        for c in rubric_set.criteria
    )
    return traits, template


# -- the audit ------------------------------------------------------------------------------------------


def audit_accuracy(
    rubric_sets: dict[str, RubricSet],
    pairs: list[Pair],
    ctx: AuditContext,
    *,
    samples: int = 5,
    temperature: float = 0.7,
    templates: tuple[str, ...] = TEMPLATES,
    both_orders: bool = False,
    early_stop: bool = True,
    n_boot: int | None = None,
    n_boot_paired: int = 5000,
    tie_credit: float | None = None,
) -> dict[str, Any]:
    """Rubric-conditioned judge accuracy (majority of ``samples`` at ``temperature``) per rubric set and
    template, a no-rubric baseline (direct template), position consistency, and paired comparisons.

    ``rubric_sets`` maps a source name to its rubric set (``"no_rubric"`` is reserved for the
    baseline, which runs when ``"direct"`` is among ``templates``). ``n_boot`` defaults to
    ``ctx.n_boot``. All requests of one sampling wave go to ``ctx.gateway.run`` in one batch.

    Returns ``{"metrics", "comparisons", "items", "counts"}``:

    * ``metrics[source]``: per template t — ``acc_<t>`` (metric entry over judged pairs, ties credited;
      n = pairs), ``decided_rate_<t>``, with both_orders also ``acc_<t>_both_orders`` (a pair's worse
      order's credit) and ``swap_flip_rate_<t>``; ``first_position_rate_<t>``; ints ``no_verdict_<t>``
      (pairs with no parsed sample), ``ties_<t>``, ``calls_made_<t>``, ``calls_full_<t>``, ``calls_saved_<t>``.
    * ``comparisons``: one row per pair of sources per template (paired bootstrap, BH, MDE, label).
    * ``items``: one row per judged (source, template, pair, order).
    * ``counts[source][t]``: judgments, failures, ties, dropped, sample failures, calls.
    """
    n_boot = ctx.n_boot if n_boot is None else int(n_boot)
    credit = float(ctx.tie_credit if tie_credit is None else tie_credit)
    if not 0.0 <= credit <= 1.0:
        raise InputError(f"tie_credit={tie_credit!r}", field="tie_credit", expected="a credit in [0, 1]")
    cells = _cells(rubric_sets, templates)
    slots = _slots(cells, pairs, ctx, both_orders)
    samples = int(samples)
    if samples < 1:
        raise InputError(f"samples={samples!r}", field="samples", expected="at least 1 sample per verdict")
    judge = ctx.judge.with_(temperature=float(temperature))
    builders = _Builders(judge, rubric_sets, ctx.templates_dir)

    votes, results = _sample(slots, builders, ctx, samples, early_stop)
    for source in dict.fromkeys(src for src, _ in cells):
        ctx.tally.add(source, "accuracy", [r for k, rs in results.items() if k[0] == source for r in rs])

    items: list[dict[str, Any]] = []
    verdict: dict[tuple, Any] = {}
    for key, slot in slots.items():
        # equals majority_vote over all samples: either decided early or all samples are in
        v = majority_decided(votes[key], samples)
        verdict[key] = v
        items.append(_item_row(slot, votes[key], v, results[key], credit))

    metrics: dict[str, dict[str, Any]] = defaultdict(dict)
    counts: dict[str, dict[str, Any]] = defaultdict(dict)
    per_cell: dict[tuple[str, str], dict[tuple, Any]] = {}
    for source, template in cells:
        keys = [k for k in slots if k[:2] == (source, template)]
        cell_verdicts = {k: verdict[k] for k in keys}
        per_cell[(source, template)] = cell_verdicts
        m, c = _cell_metrics(cell_verdicts, slots, votes, results, samples, both_orders, ctx, n_boot, credit)
        ctx.tally.drop(source, "accuracy", f"{template}: held-out pair with no verdict (every sample failed)",
                       c["n_failed"])
        metrics[source].update({_metric_name(name, template): value for name, value in m.items()})
        counts[source][template] = c

    comparisons = _comparisons(cells, per_cell, slots, ctx, n_boot_paired, credit)
    return {"metrics": dict(metrics), "comparisons": comparisons, "items": items, "counts": dict(counts)}


# -- setup ----------------------------------------------------------------------------------------------


def _cells(rubric_sets: dict[str, RubricSet], templates: Sequence[str]) -> list[tuple[str, str]]:
    """(source, template) cells in a stable order: rubric sets as given, no_rubric last (direct only)."""
    templates = tuple(templates)
    unknown = [t for t in templates if t not in TEMPLATES]
    if unknown or not templates:
        raise InputError(f"templates={templates!r}", field="templates", expected=f"a non-empty subset of {TEMPLATES}")
    if NO_RUBRIC in rubric_sets:
        raise InputError(f"a rubric set is named '{NO_RUBRIC}'", field="rubric_sets",
                         expected=f"names other than '{NO_RUBRIC}' (reserved for the no-rubric baseline)")
    for name, rs in rubric_sets.items():
        if rs.K == 0:
            raise InputError(f"rubric set '{name}' has no criteria", field="rubric_sets",
                             expected="at least one criterion per rubric set")
    cells = [(s, t) for s in rubric_sets for t in templates]
    if "direct" in templates:
        cells.append((NO_RUBRIC, "direct"))
    return cells


def _slots(cells: list[tuple[str, str]], pairs: list[Pair], ctx: AuditContext,
           both_orders: bool) -> dict[tuple, dict[str, Any]]:
    """One slot per (source, template, pair_id, order): what the judge is shown and the human letter."""
    if not pairs:
        raise InputError("is empty", field="pairs", expected="at least one held-out pair")
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        raise InputError("has duplicate pair ids", field="pairs", expected="unique pair ids (one bootstrap item each)")
    shows = {p.id: (present_both_orders(p) if both_orders else [present(p, ctx.seed)]) for p in pairs}
    domains = {p.id: p.domain for p in pairs}
    slots: dict[tuple, dict[str, Any]] = {}
    for source, template in cells:
        for pid, views in shows.items():
            for view in views:
                order = "swapped" if view["swapped"] else "orig"
                slots[(source, template, pid, order)] = {
                    "source": source, "template": template, "pair_id": pid, "order": order,
                    "domain": domains[pid], "view": view,
                }
    return slots


class _Builders:
    """Makes the CallRequest for (slot, sample index); prompt templates and roles are built once."""

    def __init__(self, judge: RoleSpec, rubric_sets: dict[str, RubricSet], templates_dir: str | None) -> None:
        self.rubric_sets = rubric_sets
        self.direct = load_judge_prompt("judge_direct", templates_dir)  # refuses a prompt asking for no verdict
        self.no_rubric = load_judge_prompt("judge_no_rubric", templates_dir)
        self.per_rubric = load_prompt("judge_per_rubric", templates_dir)
        self.judge = judge
        self.ab = answer_format(judge, "ab")
        # a rubric set carrying a judge template is judged with its template (direct), through the shared
        # request builder that drift and align use; a plain criteria set goes through judge_direct
        self.templated = {name: PairwiseRubric.of(rs) for name, rs in rubric_sets.items() if rs.template is not None}
        self.templates_dir = templates_dir
        self.rendered = {name: rs.render_list() for name, rs in rubric_sets.items()}
        self.traits = {name: render_traits(rs) for name, rs in rubric_sets.items()}
        self.per_rubric_fields: dict[str, dict[str, Any]] = {}
        for name, rs in rubric_sets.items():
            # K+1 JSON blocks with reasonings do not fit a verdict-sized budget; truncated JSON would be a
            # parse failure caused only by max_tokens, so the budget grows with K (never shrinks).
            role = judge.with_(max_tokens=max(judge.max_tokens, 256 + 160 * (rs.K + 1)))
            fields: dict[str, Any] = {"role": role, "parser": json_parser(PerRubricReply)}
            if judge.use_schema:
                fields["response_format"] = {"type": "json_object", "schema": per_rubric_schema(rs.criterion_ids)}
            self.per_rubric_fields[name] = fields

    def request(self, key: tuple, slot: dict[str, Any], index: int) -> CallRequest:
        view, source, template = slot["view"], slot["source"], slot["template"]
        shown = {"prompt": view["prompt"], "response_a": view["a"], "response_b": view["b"]}
        if template == "per_rubric":
            traits, trait_template = self.traits[source]
            messages = self.per_rubric.render(traits=traits, trait_template=trait_template, **shown)
            return CallRequest(messages=messages, sample_index=index, tag=key, **self.per_rubric_fields[source])
        if source in self.templated:
            return pairwise_request(self.templated[source], view, self.judge, sample_index=index, tag=key,
                                    templates_dir=self.templates_dir)
        if source == NO_RUBRIC:
            messages = self.no_rubric.render(**shown)
        else:
            messages = self.direct.render(rubric=self.rendered[source], **shown)
        return CallRequest(messages=messages, sample_index=index, tag=key, **self.ab)


# -- sampling in waves ----------------------------------------------------------------------------------


def _vote(res: CallResult) -> Any:
    """A sample's verdict: "A", "B", "tie" (per-rubric equal overall), or None (failed: not a vote)."""
    if not res.ok:
        return None
    if isinstance(res.value, PerRubricReply):
        return res.value.verdict()
    return res.value


def _sample(slots: dict[tuple, dict], builders: _Builders, ctx: AuditContext, samples: int,
            early_stop: bool) -> tuple[dict[tuple, list], dict[tuple, list[CallResult]]]:
    """Votes per slot, bought in waves (one gateway batch per wave across all cells)."""
    votes: dict[tuple, list] = {k: [] for k in slots}
    results: dict[tuple, list[CallResult]] = {k: [] for k in slots}
    want = {k: (min(samples, math.ceil((samples + 1) / 2)) if early_stop else samples) for k in slots}
    wave = 0
    while any(want.values()):
        wave += 1
        requests = [builders.request(k, slots[k], len(votes[k]) + j) for k, n in want.items() for j in range(n)]
        for res in ctx.gateway.run(requests, desc=f"accuracy wave {wave}"):
            key = res.tag
            votes[key].append(_vote(res))
            results[key].append(res)
        # exact: a wave never buys a sample that one-at-a-time early stopping would have skipped
        want = samples_still_needed(votes, samples) if early_stop else dict.fromkeys(slots, 0)
    return votes, results


# -- metrics --------------------------------------------------------------------------------------------


def _metric_name(name: str, template: str) -> str:
    # flat, MLflow-friendly keys: acc -> acc_<t>, acc_both_orders -> acc_<t>_both_orders, x -> x_<t>
    if name.startswith("acc"):
        return "acc_" + template + name[3:]
    return f"{name}_{template}"


def _decided(v: Any) -> bool:
    return v in ("A", "B")


def _judged(v: Any) -> bool:
    """A verdict or a tie: the judge answered. Only an item with no parsed sample at all is not judged."""
    return v is not None


def _credit(v: Any, human: str, tie_credit: float) -> float:
    return 1.0 if v == human else tie_credit if v == TIE else 0.0


def _cell_metrics(cell: dict[tuple, Any], slots: dict, votes: dict, results: dict, samples: int,
                  both_orders: bool, ctx: AuditContext, n_boot: int,
                  tie_credit: float) -> tuple[dict[str, Any], dict[str, Any]]:
    keys = list(cell)
    n_failed = sum(not _judged(cell[k]) for k in keys)
    n_ties = sum(cell[k] == TIE for k in keys)
    n_sample_failures = sum(v is None for k in keys for v in votes[k])
    calls_made = sum(len(votes[k]) for k in keys)
    calls_full = samples * len(keys)
    boot_kw = {"n_resamples": n_boot, "confidence": ctx.confidence, "seed": ctx.seed}
    rule = f"credit 1 if the verdict is the human's, {tie_credit:g} for a tie, 0 otherwise"

    # accuracy over every judged item (ties credited); item = pair (both orders resampled together)
    judged = [k for k in keys if _judged(cell[k])]
    dec = [k for k in judged if _decided(cell[k])]
    credit = np.array([_credit(cell[k], slots[k]["view"]["human"], tie_credit) for k in judged])
    pair_ids = np.array([slots[k]["pair_id"] for k in judged], dtype=object)
    acc = _boot_metric(credit, pair_ids, boot_kw, n_judgments=len(judged), n_decided=len(dec), n_ties=n_ties,
                       n_failed=n_failed, tie_credit=tie_credit, samples=samples, formula=rule,
                       excluded="held-out pairs where every sample failed (no verdict; counted in n_failed)")
    if not judged:
        acc["reason"] = f"no verdict: every sample of all {len(keys)} judgments failed"
    elif ties_common(n_ties, len(judged)) and acc.get("value") is not None:  # every tie met a strict human label
        other = other_tie_credit(tie_credit)
        acc["at_other_tie_credit"] = {"tie_credit": other,
                                      "value": at_tie_credit(acc["value"], n_ties, len(judged), tie_credit, other)}
    decided_rate = metric(len(dec) / len(judged) if judged else None, n=len(judged),
                          formula="#{A/B verdicts} / #{judged (verdict or tie)}",
                          reason=None if judged else "no judged item")
    dec_ids = np.array([slots[k]["pair_id"] for k in dec], dtype=object)
    first = _boot_metric(np.array([float(cell[k] == "A") for k in dec]), dec_ids, boot_kw, n_decided=len(dec),
                         formula="#{verdict = A} / #{decided judgments} (ties have no position)")
    if not dec:
        first["reason"] = "no decided (A/B) verdict"
    out: dict[str, Any] = {"acc": acc, "decided_rate": decided_rate, "first_position_rate": first}

    if both_orders:
        pids = list(dict.fromkeys(slots[k]["pair_id"] for k in keys))
        src, tpl = keys[0][:2]

        def letter(pid: str, order: str) -> Any:
            v = cell[(src, tpl, pid, order)]
            return v if _decided(v) else None  # a tie has no position; it counts as not evaluated

        orig = [letter(p, "orig") for p in pids]
        swap = [letter(p, "swapped") for p in pids]
        pc = position_consistency(orig, swap)
        ev = pc["evaluated"]
        flips = pc["flips"][ev].astype(float)
        out["swap_flip_rate"] = _boot_metric(
            flips, np.array(pids, dtype=object)[ev], boot_kw, n_failed=len(pids) - pc["n_items"],
            formula="#{pairs: same letter in both orders} / #{pairs decided (A/B) in both orders}")
        out["first_position_rate"]["formula"] = "#{verdict = A} / #{decided judgments}, both orders pooled"
        # both orders: a pair's credit is its worse order's (right in both = 1; a tie in one = tie credit)
        both_credit, both_ids, n_not = [], [], 0
        for pid in pids:
            vs = [cell[(src, tpl, pid, o)] for o in ("orig", "swapped")]
            if not all(_judged(v) for v in vs):
                n_not += 1
                continue
            humans = [slots[(src, tpl, pid, o)]["view"]["human"] for o in ("orig", "swapped")]
            both_credit.append(min(_credit(v, h, tie_credit) for v, h in zip(vs, humans)))
            both_ids.append(pid)
        out["acc_both_orders"] = _boot_metric(
            np.array(both_credit), np.array(both_ids, dtype=object), boot_kw, n_failed=n_not,
            formula=f"mean over pairs judged in both orders of the worse order's credit ({rule})")
    out["no_verdict"] = n_failed
    out["ties"] = n_ties
    out["calls_made"] = calls_made
    out["calls_full"] = calls_full
    out["calls_saved"] = calls_full - calls_made
    counts = {
        "n_judgments": len(keys), "n_pairs": len({slots[k]["pair_id"] for k in keys}), "n_judged": len(judged),
        "n_decided": len(dec), "n_failed": n_failed, "n_ties": n_ties, "n_dropped": n_failed,
        "n_sample_failures": n_sample_failures,
        "n_sample_transport_errors": sum(1 for k in keys for r in results[k] if not r.ok and r.parse_error is None),
        "calls_made": calls_made, "calls_full": calls_full, "calls_saved": calls_full - calls_made,
        # how many of these the call store served is the store's history, not the card's: see the ledger
    }
    return out, counts


def _boot_metric(values: np.ndarray, item_ids: np.ndarray, boot_kw: dict, **extra: Any) -> dict[str, Any]:
    """Metric entry with an item-level (pair) bootstrap CI; a degenerate interval says why."""
    boot = item_bootstrap(np.asarray(values, dtype=float), "mean", item_ids, **boot_kw)
    return from_bootstrap(boot, "pairs", n_obs=boot["n_obs"], **extra)


def _item_row(slot: dict[str, Any], votes: list, verdict: Any, results: list[CallResult],
              tie_credit: float) -> dict[str, Any]:
    human = slot["view"]["human"]
    errors = [r.parse_error or r.error for r in results if not r.ok]
    return {
        "source": slot["source"], "template": slot["template"], "pair_id": slot["pair_id"],
        "order": slot["order"], "swapped": slot["view"]["swapped"], "domain": slot["domain"],
        "votes": ",".join(FAILED if v is None else str(v) for v in votes), "n_samples": len(votes),
        "majority": FAILED if verdict is None else str(verdict), "human": human,
        "credit": _credit(verdict, human, tie_credit) if _judged(verdict) else None,
        "error": (errors[0] or "")[:200] if errors else None,
    }


# -- paired comparisons ---------------------------------------------------------------------------------


def _comparisons(cells: list[tuple[str, str]], per_cell: dict, slots: dict, ctx: AuditContext,
                 n_boot_paired: int, tie_credit: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for template in dict.fromkeys(t for _, t in cells):
        sources = [s for s, t in cells if t == template]
        for i, a in enumerate(sources):
            for b in sources[i + 1:]:
                rows.append(_compare(per_cell[(a, template)], per_cell[(b, template)], a, b, template, slots,
                                     ctx, n_boot_paired, tie_credit))
    return adjust_family(rows)


def _compare(cell_a: dict, cell_b: dict, a: str, b: str, template: str, slots: dict, ctx: AuditContext,
             n_boot_paired: int, tie_credit: float) -> dict[str, Any]:
    # the same judgment slot (pair, order) under both conditions; only a slot with no verdict at all under
    # either condition leaves both (a tie is judged and credited, so the item set does not follow outcomes)
    by_slot_b = {k[2:]: v for k, v in cell_b.items()}
    rows = [(k[2:], va, by_slot_b[k[2:]]) for k, va in cell_a.items()]
    both = [(s, va, vb) for s, va, vb in rows if _judged(va) and _judged(vb)]
    human = {k[2:]: slots[k]["view"]["human"] for k in cell_a}
    xa = np.array([_credit(va, human[s], tie_credit) for s, va, _ in both])
    xb = np.array([_credit(vb, human[s], tie_credit) for s, _, vb in both])
    ids = np.array([s[0] for s, _, _ in both], dtype=object)
    row: dict[str, Any] = {
        "template": template, "a": a, "b": b, "n_items": len(set(ids.tolist())), "n_obs": len(both),
        "n_excluded": len(rows) - len(both),
        "n_excluded_a": sum(not _judged(va) for _, va, _ in rows),
        "n_excluded_b": sum(not _judged(vb) for _, _, vb in rows),
        "acc_a": None, "acc_b": None, "diff": None, "low": None, "high": None, "se": None, "p_value": np.nan,
        "discordant_rate": None, "degenerate": None, "tie_credit": tie_credit,
        "n_resamples": n_boot_paired, "seed": ctx.seed, "confidence": ctx.confidence,
        "ci": f"{100 * ctx.confidence:g}% percentile paired bootstrap over pairs (B={n_boot_paired})",
        "excluded": "judgments with no verdict (every sample failed) under either condition, left out of both",
    }
    if not len(both):
        row["degenerate"] = "no judgment judged under both conditions"
        return row
    boot = paired_bootstrap(xa, xb, ids, n_resamples=n_boot_paired, seed=ctx.seed, confidence=ctx.confidence)
    row.update(acc_a=boot["mean_a"], acc_b=boot["mean_b"], diff=boot["diff"], low=_num(boot["low"]),
               high=_num(boot["high"]), boot_se=_num(boot["se"]), discordant_rate=float(np.mean(xa != xb)),
               degenerate=boot["degenerate"])
    # the test: a paired t-test on the per-pair mean credits (a pair's judgments move together, as resampled)
    per_pair = pd.DataFrame({"pair": ids, "a": xa, "b": xb}).groupby("pair", sort=False).mean()
    if len(per_pair) >= 2:
        row.update(paired_test(per_pair["a"].to_numpy(), per_pair["b"].to_numpy()))
    return row


def _num(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


__all__ = ["NO_RUBRIC", "TEMPLATES", "PerRubricReply", "audit_accuracy", "per_rubric_schema", "render_traits"]
