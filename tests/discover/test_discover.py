"""Discovery on data with planted criteria, driven by scripted providers whose behaviour is known."""

from __future__ import annotations

import hashlib
import json
import random
import re

import numpy as np
import pytest

from rubriclab.data import Pair
from rubriclab.discover import check_subgroups, consolidate, discover, nodes_from_candidates
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.testing import last_user_text, scripted_model

PREFERRED = ["accuracy", "directness", "safety", "examples"]  # chosen is better on these
NEUTRAL = "length"  # differs between responses, but not in the preferred direction
ATTRS = PREFERRED + [NEUTRAL]
VARIANTS = {
    "accuracy": ["Factual accuracy", "Correct facts", "Accurate information"],
    "directness": ["Directness", "Answers directly", "Direct answer"],
    "safety": ["Safety", "Avoids harm", "Safe guidance"],
    "examples": ["Concrete examples", "Uses examples", "Illustrative examples"],
    "length": ["Length", "Response length", "Verbosity level"],
}


def _h(*parts) -> int:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest(), 16)


def planted_pairs(n: int, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        attrs = rng.sample(ATTRS, 3)
        chosen, rejected = [], []
        for a in attrs:
            if a == NEUTRAL:
                long_chosen = rng.random() < 0.5
                chosen.append("LONG_length" if long_chosen else "SHORT_length")
                rejected.append("SHORT_length" if long_chosen else "LONG_length")
            else:
                chosen.append(f"GOOD_{a}")
                rejected.append(f"BAD_{a}")
        pairs.append(Pair(id=f"p{i:03d}", domain="planted", prompt=f"Question {i}?",
                          chosen="Answer " + " ".join(chosen), rejected="Answer " + " ".join(rejected),
                          meta={"planted": attrs}))
    return pairs


def _attr_of(text: str) -> str | None:
    for a in ATTRS:
        if a in text.lower():
            return a
    return None


def extractor_script(messages, params):
    text = last_user_text(messages)
    a = re.search(r"RESPONSE A:\n(.*?)\n\nRESPONSE B:", text, re.S).group(1)
    b = re.search(r"RESPONSE B:\n(.*?)\n\nWINNER", text, re.S).group(1)
    crits = []
    for attr in ATTRS:
        ma, mb = re.search(rf"(\w+)_{attr}", a), re.search(rf"(\w+)_{attr}", b)
        if not ma or not mb or ma.group(1) == mb.group(1):
            continue
        score = {"GOOD": 8, "BAD": 3, "LONG": 7, "SHORT": 4}
        name = VARIANTS[attr][_h(text, attr) % 3]
        crits.append({"name": name, "description": f"Judges the {attr} of the response.",
                      "model_a_score": score[ma.group(1)], "model_b_score": score[mb.group(1)]})
    return json.dumps({"criteria": crits})


def embed_script(messages, params):
    text = last_user_text(messages)
    vec = np.zeros(len(ATTRS) + 2)
    attr = _attr_of(text)
    if attr:
        vec[ATTRS.index(attr)] = 1.0
    vec[-1] = (_h(text) % 100) / 1000.0  # tiny noise: variants are near-duplicates, not identical
    return vec.tolist()


def consolidator_script(bad_reply_every: int = 0):
    calls = {"n": 0}

    def script(messages, params):
        text = last_user_text(messages)
        lines = re.findall(r"^- (\S+): (.*)$", text, re.M)
        if "Identify groups of rubrics" in text:
            calls["n"] += 1
            if bad_reply_every and calls["n"] % bad_reply_every == 0:
                ids = [lid for lid, _ in lines]
                bad = [
                    "not json at all",
                    json.dumps({"subgroups": [ids[:2] + ["r999"]], "unmerged": ids[2:]}),  # unknown id
                    json.dumps({"subgroups": [ids[:2], ids[1:3]], "unmerged": ids[3:]}),  # duplicate
                    json.dumps({"subgroups": [ids[:2]], "unmerged": []}),  # missing ids
                ]
                return bad[calls["n"] // bad_reply_every % len(bad)]
            groups: dict[str, list[str]] = {}
            unmerged = []
            for lid, body in lines:
                attr = _attr_of(body)
                (groups.setdefault(attr, []) if attr else unmerged).append(lid)
            subgroups = [g for g in groups.values() if len(g) >= 2]
            unmerged += [g[0] for g in groups.values() if len(g) == 1]
            return json.dumps({"subgroups": subgroups, "unmerged": unmerged})
        attr = _attr_of(text) or "misc"
        return json.dumps({"rubric_id": attr, "rubric_description": (
            f"Rewards responses whose {attr} serves the user: the response is judged on its {attr} as observed in "
            "the text, independent of the specific prompt, with clear high and low ends of the scale.")})

    return script


def judge_script(messages, params):
    text = last_user_text(messages)
    crit = re.search(r"## Rubric: (\S+)", text).group(1)
    response = re.search(r"## Response:\n(.*?)\n\n## Task", text, re.S).group(1)
    attr = _attr_of(crit)
    m = re.search(rf"(\w+)_{attr}", response) if attr else None
    score = {"GOOD": 8, "BAD": 3, "LONG": 7, "SHORT": 4}[m.group(1)] if m else 5
    return f"REASONING: looked for {attr}.\nSCORE: {score}"


@pytest.fixture
def roles():
    return {
        "extractor": RoleSpec(name="extractor", model=scripted_model("extractor", extractor_script)),
        "consolidator": RoleSpec(name="consolidator", model=scripted_model("consolidator", consolidator_script())),
        "embedder": RoleSpec(name="embedder", model=scripted_model("embedder", embed_script)),
        "judge": RoleSpec(name="judge", model=scripted_model("judge", judge_script)),
    }


CFG = {"min_criteria": 1, "max_criteria": 15, "k": 5, "target_size": 5, "cluster_size": 6, "max_levels": 6,
       "n_min": 3, "min_pairs": 2, "mmr_lambda": 0.7, "pref_rank": {"pool": 5, "max_pairs": 30, "mode": "score"}}


def test_discovery_recovers_planted_criteria_and_pref_rank_orders_them(gateway, store, roles):
    pairs = planted_pairs(30)
    res = discover(pairs, CFG, gateway=gateway, store=store, dataset="planted", progress=False, **roles)
    found = {c.id for c in res.discovered.criteria}
    assert set(ATTRS) <= found, found  # recall of the planted set among the final K = 1.0
    # provenance carries through: every raw candidate of a criterion mentions its attribute
    for c in res.discovered.criteria:
        members = [cand for cand in res.candidates if cand["cand_id"] in set(c.provenance["candidates"])]
        assert members and all(c.id in cand["description"] for cand in members)
        assert c.support == len(members) and set(c.provenance["pairs"]) == {m["pair_id"] for m in members}
    # preference-rank: the neutral criterion (length) separates pairs but not in the preferred direction
    ranking = [r["id"] for r in res.pref_rows]
    assert ranking[-1] == NEUTRAL and set(ranking[:4]) == set(PREFERRED)
    fit = {r["id"]: r for r in res.pref_rows}
    assert all(fit[a]["losses"] == 0 for a in PREFERRED) and fit[NEUTRAL]["losses"] > 0
    assert [c.id for c in res.pref_repaired.criteria][:4] == ranking[:4]
    s = res.report["support"]
    assert s["in"] == s["kept"] + s["filtered_out"] == len(res.candidates)


def test_second_run_makes_zero_model_calls(gateway, store, roles):
    from rubriclab.testing import scripted_provider

    pairs = planted_pairs(12)
    first = discover(pairs, CFG, gateway=gateway, store=store, dataset="planted", progress=False, **roles)
    before = dict(scripted_provider().calls)
    second = discover(pairs, CFG, gateway=Gateway(store, stage="again", progress=False), store=store,
                      dataset="planted", progress=False, **roles)
    assert dict(scripted_provider().calls) == before
    assert [c.to_dict() for c in second.discovered.criteria] == [c.to_dict() for c in first.discovered.criteria]


@pytest.mark.parametrize("every", [1, 2, 3])
def test_invalid_subgroup_replies_lose_no_candidate(gateway, store, roles, every):
    roles = {**roles, "consolidator": RoleSpec(name="consolidator", parse_retries=1,
                                               model=scripted_model(f"bad{every}", consolidator_script(every)))}
    pairs = planted_pairs(20, seed=every)
    from rubriclab.discover import extract_candidates

    cands, _ = extract_candidates(pairs, gateway, roles["extractor"], seed=42, min_criteria=1, max_criteria=15)
    nodes, levels = consolidate(nodes_from_candidates(cands), gateway, consolidator=roles["consolidator"],
                                embedder=roles["embedder"], store=store, target_size=5, cluster_size=6,
                                max_levels=5, min_split=2, progress=False)
    members = [m for n in nodes for m in n.members]
    assert sorted(members) == sorted(c["cand_id"] for c in cands)  # each candidate exactly once
    assert sum(n.support for n in nodes) == len(cands)
    assert sum(lv["reasks"] + lv["splits"] + lv["salvaged_replies"] for lv in levels) > 0


def test_check_subgroups_lists_every_problem():
    ids = ["r1", "r2", "r3", "r4"]
    groups, unmerged, problems = check_subgroups({"subgroups": [["r1", "r2", "r9"], ["r2", "r3"]]}, ids)
    assert groups == [["r1", "r2"]] and unmerged == ["r3", "r4"]
    text = " ".join(problems)
    assert "unknown id 'r9'" in text and "duplicate id 'r2'" in text and "missing" in text
    assert check_subgroups({"subgroups": [["r1", "r2"]], "unmerged": ["r3", "r4"]}, ids)[2] == []


def test_exact_duplicate_candidates_merge_before_any_model_call():
    cands = [{"cand_id": f"p{i}#0", "pair_id": f"p{i}", "name": "Clarity " if i % 2 else "clarity",
              "description": "The  response is clear."} for i in range(4)]
    cands.append({"cand_id": "p9#1", "pair_id": "p9", "name": "Safety", "description": "Avoids harm."})
    nodes = nodes_from_candidates(cands)
    assert [(n.id, n.support, len(n.pairs)) for n in nodes] == [("clarity", 4, 4), ("safety", 1, 1)]
