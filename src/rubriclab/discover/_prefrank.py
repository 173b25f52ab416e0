"""Preference-rank selection (PReMISE §3.3): the preference-fit repair.

Score the chosen and the rejected response of the discovery pairs on each high-impact criterion;
preference fit = share of pairs where chosen scores strictly higher (ties and failures are counted
and reported, not folded in); keep the top K, texts unchanged.
"""

from __future__ import annotations

from typing import Any

from rubriclab.data import Pair
from rubriclab.errors import ConfigError
from rubriclab.llm import CallRequest, Gateway, RoleSpec, distinct_draws, load_prompt, score_parser, yes_no_gap
from rubriclab.rubrics import Criterion
from rubriclab.settings import PREF_RANK_MODES

MODES = PREF_RANK_MODES


def score_requests(criteria: list[Criterion], pairs: list[Pair], role: RoleSpec, mode: str,
                   templates_dir: str | None = None) -> list[CallRequest]:
    """One pointwise request per (criterion, pair, side)."""
    if mode not in MODES:
        raise ConfigError(f"discover.pref_rank.mode: {mode!r}; allowed: {', '.join(MODES)}")
    tpl = load_prompt("pointwise_score" if mode == "score" else "pointwise_yes_no", templates_dir)
    reqs = []
    for c in criteria:
        for p in pairs:
            for side, text in (("chosen", p.chosen), ("rejected", p.rejected)):
                if mode == "score":
                    msgs = tpl.render(criterion_id=c.id, criterion=c.description, prompt=p.prompt, response=text)
                    reqs.append(CallRequest(role=role, messages=msgs, parser=score_parser(1, 10),
                                            tag=(c.id, p.id, side)))
                else:
                    msgs = tpl.render(criterion=f"{c.id}: {c.description}", prompt=p.prompt, response=text)
                    reqs.append(CallRequest(role=role.with_(max_tokens=1), messages=msgs, logprobs=20,
                                            tag=(c.id, p.id, side)))
    return reqs


def preference_fit(criteria: list[Criterion], pairs: list[Pair], gateway: Gateway, role: RoleSpec, mode: str,
                   templates_dir: str | None = None) -> list[dict[str, Any]]:
    """Per criterion: wins (chosen > rejected), ties, losses, failed pairs and fit = wins / scored."""
    # at T > 0 a response scored twice (two pairs sharing it) is two draws, not one cached reply
    results = gateway.run(distinct_draws(score_requests(criteria, pairs, role, mode, templates_dir)), desc="pref-rank")
    scores: dict[tuple[str, str, str], float | None] = {}
    for res in results:
        value = (res.value if res.ok else None) if mode == "score" else (yes_no_gap(res.extra) if res.ok else None)
        scores[res.tag] = value
    rows = []
    for c in criteria:
        wins = ties = losses = failed = 0
        for p in pairs:
            a, b = scores.get((c.id, p.id, "chosen")), scores.get((c.id, p.id, "rejected"))
            if a is None or b is None:
                failed += 1
            elif a > b:
                wins += 1
            elif a == b:
                ties += 1
            else:
                losses += 1
        scored = wins + ties + losses
        rows.append({"id": c.id, "support": c.support, "wins": wins, "ties": ties, "losses": losses,
                     "failed": failed, "scored": scored, "fit": wins / scored if scored else float("nan")})
    return rows


def rank_by_fit(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Highest fit first; NaN (nothing scored) last; ties broken by support then id."""
    def key(r: dict[str, Any]) -> tuple:
        fit = r["fit"]
        return (fit != fit, -(fit if fit == fit else 0.0), -r["support"], r["id"])

    return sorted(rows, key=key)
