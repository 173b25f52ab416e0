"""Step 3 of discovery with known answers: support/genericity filter, MMR, and the top-K cut end to end."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from rubriclab.data import Pair
from rubriclab.discover import Node, discover, filter_pool, mmr_select
from rubriclab.llm import RoleSpec
from rubriclab.testing import discover_consolidator_script as consolidator_script
from rubriclab.testing import discover_judge_script as judge_script
from rubriclab.testing import last_user_text, scripted_model


def _node(nid: str, support: int, pairs: int) -> Node:
    return Node(id=nid, name=nid, description=f"{nid} description", support=support,
                members=[f"c{nid}{i}" for i in range(support)], pairs=[f"p{i}" for i in range(pairs)])


def _unit(deg: float) -> list[float]:
    return [math.cos(math.radians(deg)), math.sin(math.radians(deg))]


def test_mmr_diversity_term_changes_the_pick_against_pure_support():
    # a (support 10) and b (9) point the same way (cos 0.995); c (6) is orthogonal to both.
    # λ=0.7, relevance = support/10: step 1 a: .70 > b .63 > c .42 → a.
    # step 2: b = .63 − .3·.995 = .3315, c = .42 − .3·0 = .42 → c (pure support would pick b).
    nodes = [_node("a", 10, 5), _node("b", 9, 5), _node("c", 6, 5)]
    b_deg = math.degrees(math.acos(0.995))
    X = np.array([_unit(0), _unit(b_deg), _unit(90)])
    assert mmr_select(nodes, X, 3, 0.7) == [0, 2, 1]
    assert mmr_select(nodes, X, 2, 0.7) == [0, 2]
    assert mmr_select(nodes, X, 3, 1.0) == [0, 1, 2]  # λ=1: support only
    assert mmr_select(nodes, X, 5, 0.7) == [0, 2, 1]  # K above the pool: everything, once


def test_mmr_ties_go_to_support_then_id():
    # equal relevance and no redundancy (orthogonal): the id decides, not the input order
    nodes = [_node("zeta", 4, 3), _node("alpha", 4, 3), _node("mid", 2, 3)]
    X = np.array([_unit(0), _unit(90), [0.0, 0.0]])
    assert mmr_select(nodes, X, 3, 0.5) == [1, 0, 2]
    assert mmr_select([], np.zeros((0, 2)), 3, 0.5) == []


def test_filter_pool_drops_by_support_then_genericity_with_reasons():
    nodes = [_node("rare", 2, 2), _node("one_pair", 5, 1), _node("both", 1, 1), _node("ok", 5, 3),
             _node("edge", 3, 2)]
    kept, dropped = filter_pool(nodes, n_min=3, min_pairs=2)
    assert [n.id for n in kept] == ["ok", "edge"]  # n_min and min_pairs are inclusive
    assert dropped == [
        {"id": "rare", "support": 2, "pairs": 2, "reason": "support"},
        {"id": "one_pair", "support": 5, "pairs": 1, "reason": "genericity"},
        {"id": "both", "support": 1, "pairs": 1, "reason": "support"},  # support is checked first
    ]


# -- end to end: K below the kept pool, a genericity-failing node, and MMR that bites ----------------
FREQ = {"accuracy": 20, "directness": 18, "examples": 16, "safety": 10, "length": 6}  # pairs showing each
ATTRS = list(FREQ)
WORDING = {  # three wordings per attribute, so no exact text repeats across most pairs
    "accuracy": [("Factual accuracy", "Judges the accuracy of the stated facts."),
                 ("Correct facts", "Rewards accuracy in every claim made."),
                 ("Accurate information", "Checks the accuracy of the information given.")],
    "directness": [("Directness", "Judges the directness of the answer."),
                   ("Answers directly", "Rewards directness: the answer comes first."),
                   ("Direct answer", "Checks the directness of the reply.")],
    "examples": [("Concrete examples", "Judges whether examples illustrate the claims."),
                 ("Uses examples", "Rewards examples that make the point concrete."),
                 ("Illustrative examples", "Checks that examples are relevant and specific.")],
    "safety": [("Safety", "Judges the safety of the advice given."),
               ("Avoids harm", "Rewards safety: no dangerous instructions."),
               ("Safe guidance", "Checks the safety of each recommendation.")],
    "length": [("Length", "Judges whether the length suits the question."),
               ("Response length", "Rewards a length proportionate to the request."),
               ("Verbosity level", "Checks the length against what was asked.")],
}
CITATIONS = [("Citations", "Judges the citations backing the claims."),  # one pair only: not generic
             ("Cites sources", "Rewards citations to named sources."),
             ("Source citations", "Checks that citations support each claim.")]


def _attr(text: str) -> str | None:
    for a in [*ATTRS, "citations"]:
        if a in text.lower():
            return a
    return None


def _pairs() -> list[Pair]:
    pairs = []
    for i in range(20):
        attrs = [a for a in ATTRS if i < FREQ[a]] + (["citations"] if i == 0 else [])
        pairs.append(Pair(id=f"q{i:02d}", domain="planted", prompt=f"Question {i}?",
                          chosen="Answer " + " ".join(f"GOOD_{a}" for a in attrs),
                          rejected="Answer " + " ".join(f"BAD_{a}" for a in attrs)))
    return pairs


def _extractor(messages, params):
    text = last_user_text(messages)
    i = int(re.search(r"Question (\d+)\?", text).group(1))
    a = re.search(r"RESPONSE A:\n(.*?)\n\nRESPONSE B:", text, re.S).group(1)
    crits = []
    for attr in [*ATTRS, "citations"]:
        if f"_{attr}" not in a:
            continue
        a_good = f"GOOD_{attr}" in a
        wordings = CITATIONS if attr == "citations" else [WORDING[attr][i % 3]]
        crits += [{"name": n, "description": d, "model_a_score": 8 if a_good else 3,
                   "model_b_score": 3 if a_good else 8} for n, d in wordings]
    return json.dumps({"criteria": crits})


def _embed(messages, params):
    # one axis per attribute, but `examples` leans towards `accuracy` (cos 0.9): MMR should avoid it
    vec = np.zeros(len(ATTRS) + 1)
    attr = _attr(last_user_text(messages))
    if attr == "examples":
        vec[0], vec[2] = 0.9, math.sqrt(1 - 0.81)
    elif attr == "citations":
        vec[-1] = 1.0
    elif attr:
        vec[ATTRS.index(attr)] = 1.0
    return vec.tolist()


def _consolidator():
    inner = consolidator_script()

    def script(messages, params):
        text = last_user_text(messages)
        if "Identify groups of rubrics" in text:
            lines = re.findall(r"^- (\S+): (.*)$", text, re.M)
            groups: dict[str, list[str]] = {}
            for lid, body in lines:
                groups.setdefault(_attr(body) or lid, []).append(lid)
            return json.dumps({"subgroups": [g for g in groups.values() if len(g) >= 2],
                               "unmerged": [g[0] for g in groups.values() if len(g) == 1]})
        if "citations" in text.lower():
            return json.dumps({"rubric_id": "citations", "rubric_description": (
                "Rewards responses whose citations serve the user: the response is judged on its citations as "
                "observed in the text, independent of the specific prompt, with clear high and low ends.")})
        return inner(messages, params)

    return script


@pytest.fixture
def planted_roles():
    return {
        "extractor": RoleSpec(name="extractor", model=scripted_model("sel_extractor", _extractor)),
        "consolidator": RoleSpec(name="consolidator", model=scripted_model("sel_consolidator", _consolidator())),
        "embedder": RoleSpec(name="embedder", model=scripted_model("sel_embedder", _embed)),
        "judge": RoleSpec(name="judge", model=scripted_model("sel_judge", judge_script)),
    }


def test_top_k_cut_genericity_filter_and_mmr_bite_end_to_end(gateway, store, planted_roles):
    cfg = {"min_criteria": 1, "max_criteria": 15, "k": 3, "target_size": 6, "cluster_size": 6, "max_levels": 6,
           "n_min": 3, "min_pairs": 2, "mmr_lambda": 0.7, "pref_rank": {"pool": 6, "max_pairs": 5, "mode": "score"}}
    res = discover(_pairs(), cfg, gateway=gateway, store=store, dataset="planted", progress=False, **planted_roles)
    pool = {n.id: (n.support, len(n.pairs)) for n in res.nodes}
    assert pool == {"accuracy": (20, 20), "directness": (18, 18), "examples": (16, 16), "safety": (10, 10),
                    "length": (6, 6), "citations": (3, 1)}
    assert res.dropped == [{"id": "citations", "support": 3, "pairs": 1, "reason": "genericity"}]
    # relevance 1, .9, .8, .5, .3; examples is redundant with accuracy (cos .9): .56 − .27 = .29 < safety .35
    assert [c.id for c in res.discovered.criteria] == ["accuracy", "directness", "safety"]
    assert res.report["support"] == {"in": 73, "kept": 70, "selected": 48, "not_selected": 22, "filtered_out": 3}
    assert "shortfall" not in res.discovered.provenance and res.report["shortfall"] == {}


def test_pref_rank_scores_a_shared_response_as_separate_draws(gateway):
    from rubriclab.data import Pair
    from rubriclab.discover import preference_fit
    from rubriclab.llm import RoleSpec
    from rubriclab.rubrics import Criterion
    from rubriclab.testing import scripted_model, scripted_provider

    model = scripted_model("pref_hot", lambda m, p: f"SCORE: {1 + p.get('seed', 0) % 10}")
    judge = RoleSpec(name="judge", model=model, temperature=0.7)
    # UltraFeedback-style: one chosen response paired with two different rejected ones
    pairs = [Pair(id=f"p{i}", domain="t", prompt="Q?", chosen="Same good answer.", rejected=f"Bad {i}.")
             for i in range(2)]
    preference_fit([Criterion(id="acc", description="Correct facts.")], pairs, gateway, judge, "score")
    assert scripted_provider().calls["pref_hot"] == 4  # the shared chosen response is scored twice
