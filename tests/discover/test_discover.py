"""Discovery on data with planted criteria, driven by scripted providers whose behaviour is known."""

from __future__ import annotations

import pytest

from rubriclab.discover import check_subgroups, consolidate, discover, nodes_from_candidates
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.testing import (
    DISCOVER_ATTRS as ATTRS,
)
from rubriclab.testing import (
    DISCOVER_CFG as CFG,
)
from rubriclab.testing import (
    DISCOVER_NEUTRAL as NEUTRAL,
)
from rubriclab.testing import (
    DISCOVER_PREFERRED as PREFERRED,
)
from rubriclab.testing import (
    discover_consolidator_script as consolidator_script,
)
from rubriclab.testing import (
    discover_embed_script as embed_script,
)
from rubriclab.testing import (
    discover_extractor_script as extractor_script,
)
from rubriclab.testing import (
    discover_judge_script as judge_script,
)
from rubriclab.testing import (
    planted_pairs,
    scripted_model,
)


@pytest.fixture
def roles():
    return {
        "extractor": RoleSpec(name="extractor", model=scripted_model("extractor", extractor_script)),
        "consolidator": RoleSpec(name="consolidator", model=scripted_model("consolidator", consolidator_script())),
        "embedder": RoleSpec(name="embedder", model=scripted_model("embedder", embed_script)),
        "judge": RoleSpec(name="judge", model=scripted_model("judge", judge_script)),
    }


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
