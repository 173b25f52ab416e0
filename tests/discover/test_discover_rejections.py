"""Junk from a model never becomes a criterion: extraction (E.1), the describe step (E.3) and the
task-derived source re-ask, keep what is usable, count the rest by reason; conservation is checked."""

from __future__ import annotations

import json
import re

import pytest

from rubriclab.data import Pair
from rubriclab.discover import consolidate, discover, extract_candidates, nodes_from_candidates, task_derived_rubric
from rubriclab.errors import InvariantError
from rubriclab.llm import RoleSpec
from rubriclab.testing import DISCOVER_CFG as CFG
from rubriclab.testing import discover_consolidator_script as consolidator_script
from rubriclab.testing import discover_embed_script as embed_script
from rubriclab.testing import last_user_text, planted_pairs, scripted_model

COPY = {"name": "criterion_name", "description": "what responses should achieve for this criterion",
        "model_a_score": 5, "model_b_score": 5}
REASK = "That reply could not be used"


def _crit(name: str, description: str, a: int = 8, b: int = 3) -> dict:
    return {"name": name, "description": description, "model_a_score": a, "model_b_score": b}


def _question(messages) -> int:
    return int(re.search(r"Question (\d+)\?", messages[0]["content"]).group(1))


def _pairs(n: int) -> list[Pair]:
    return [Pair(id=f"p{i:02d}", domain="t", prompt=f"Question {i}?", chosen=f"Good answer {i}.",
                 rejected=f"Bad answer {i}.") for i in range(n)]


def _role(name: str, script, retries: int = 2) -> RoleSpec:
    return RoleSpec(name="extractor", model=scripted_model(name, script), parse_retries=retries)


def test_a_copied_example_is_reasked_with_the_reason_and_the_answer_to_the_reask_is_kept(gateway):
    seen_problems = []

    def script(messages, params):
        text = last_user_text(messages)
        if REASK in text:
            seen_problems.append(text)
            i = _question(messages)
            return json.dumps({"criteria": [_crit(f"Factual accuracy {'abc'[i % 3]}x",
                                                  f"Judges the accuracy of facts, variant {i}.")]})
        return json.dumps({"criteria": [COPY]})

    cands, report = extract_candidates(_pairs(3), gateway, _role("rj_reask", script), seed=1, min_criteria=1,
                                       max_criteria=5)
    assert len(seen_problems) == 3 and all("example_copy" in t for t in seen_problems)
    assert [c["name"] for c in cands] == ["Factual accuracy ax", "Factual accuracy bx", "Factual accuracy cx"]
    assert report["pairs_failed"] == 0 and report["reasks"] == 3


def test_a_mixed_reply_keeps_its_usable_criteria_and_counts_the_rest_by_reason(gateway):
    def script(messages, params):
        i = _question(messages)
        return json.dumps({"criteria": [
            COPY, _crit("A", "Great question!"), _crit("name", "description"),
            _crit("Accuracy", f"In case {i}, states facts that are correct."),
            _crit("accuracy", f"In case {i}, a second criterion with the same name."),
            _crit("Clarity", f"In case {i}, explains each step in plain words."),
            {"name": "Broken", "description": "No scores given here at all."}]})

    cands, report = extract_candidates(_pairs(4), gateway, _role("rj_mixed", script), seed=1, min_criteria=2,
                                       max_criteria=10)
    assert sorted({c["name"] for c in cands}) == ["Accuracy", "Clarity"] and len(cands) == 8
    assert report["rejected"] == {"malformed": 4, "example_copy": 4, "field_name": 4, "single_token": 4,
                                  "duplicate_in_reply": 4}
    assert report["criteria_seen"] == 28 and report["pairs_failed"] == 0
    names = {r["name"] for r in report["rejected_rows"]}
    assert {"criterion_name", "A", "name", "accuracy"} <= names and not names & {"Accuracy", "Clarity"}


def test_a_pair_with_too_few_usable_criteria_fails_with_its_reason_text(gateway):
    def script(messages, params):
        return json.dumps({"criteria": [COPY, _crit("B", "Yes."), _crit("Accuracy", "Correct facts stated here.")]})

    cands, report = extract_candidates(_pairs(2), gateway, _role("rj_few", script, retries=1), seed=1, min_criteria=2,
                                       max_criteria=5)
    assert cands == [] and report["pairs_failed"] == 2
    fail = report["failures"][0]
    assert fail["cause"] == "too_few_valid" and fail["attempts"] == 2
    assert "only 1 of 3 criteria usable, at least 2 needed" in fail["error"] and "example_copy" in fail["error"]
    assert fail["rejected"] == {"example_copy": 1, "single_token": 1}
    assert report["rejected"] == {"example_copy": 2, "single_token": 2} and report["valid_in_failed_replies"] == 2
    assert report["failed_by_cause"] == {"too_few_valid": 2}


def test_text_identical_across_unrelated_pairs_is_dropped_after_all_replies(gateway):
    def script(messages, params):
        i = _question(messages)
        return json.dumps({"criteria": [_crit("Helpfulness", "The response is helpful to the user."),
                                        _crit(f"Clarity {'abcdefgh'[i]}", f"Explains step {i} in plain words.")]})

    cands, report = extract_candidates(_pairs(8), gateway, _role("rj_same", script), seed=1, min_criteria=1,
                                       max_criteria=5)
    assert {c["name"] for c in cands} == {f"Clarity {x}" for x in "abcdefgh"}
    assert report["rejected"] == {"identical_across_pairs": 8} and report["candidates"] == 8
    # the limit is a share of the replies: at 1.0 the rule is off
    cands, _ = extract_candidates(_pairs(8), gateway, _role("rj_same", script), seed=1, min_criteria=1,
                                  max_criteria=5, identical_limit=1.0)
    assert len(cands) == 16


def test_describe_replies_that_copy_the_example_never_become_criteria(gateway, store):
    pairs = planted_pairs(12)
    extractor = RoleSpec(name="extractor", model=scripted_model("rj_ext", _planted_extractor))
    cands, _ = extract_candidates(pairs, gateway, extractor, seed=42, min_criteria=1, max_criteria=15)
    inner = consolidator_script()

    def lazy(messages, params):
        text = last_user_text(messages)
        if "Identify groups of rubrics" in text:
            return inner(messages, params)
        return json.dumps({"rubric_id": "concise_snake_case_name", "rubric_description": (
            "Detailed description (at least 20 words) that can serve as an evaluation rubric for responses of "
            "every kind, measuring the quality all of the rubrics above share.")})

    consolidator = RoleSpec(name="consolidator", model=scripted_model("rj_lazy", lazy), parse_retries=1)
    embedder = RoleSpec(name="embedder", model=scripted_model("rj_emb", embed_script))
    nodes, levels = consolidate(nodes_from_candidates(cands), gateway, consolidator=consolidator, embedder=embedder,
                                store=store, target_size=3, cluster_size=6, max_levels=2, progress=False)
    assert not any("concise" in n.id or "snake" in n.id for n in nodes)
    assert levels[0]["describe_failures"] == levels[0]["subgroups"] > 0
    assert levels[0]["describe_rejected"] == {"example_copy": levels[0]["subgroups"]}
    assert levels[0]["describe_reasks"] == levels[0]["subgroups"]
    assert sum(n.support for n in nodes) == len(cands)  # members stayed as they were


def _planted_extractor(messages, params):
    from rubriclab.testing import discover_extractor_script as extractor_script

    return extractor_script(messages, params)


def test_task_derived_keeps_usable_criteria_drops_duplicate_names_and_says_it_fell_short(gateway):
    def script(messages, params):
        return json.dumps({"criteria": [
            {"name": "Accuracy", "description": "States only facts that can be checked."},
            {"name": "accuracy", "description": "Another take on the same name, with more words."},
            {"name": "concise_snake_case_name", "description": "what a good response does on this criterion"},
            {"name": "Safety", "description": "Refuses dangerous help and explains why briefly."}]})

    rs, report = task_derived_rubric("Answer questions.", 5, gateway, _role("rj_task", script), "t-task_derived")
    assert [c.id for c in rs.criteria] == ["accuracy", "safety"]
    assert report["rejected"] == {"example_copy": 1, "duplicate_in_reply": 1}
    sf = rs.provenance["shortfall"]
    assert sf["asked"] == 5 and sf["got"] == 2 and "example_copy: 1" in sf["reason"]


def test_task_derived_with_only_junk_gives_an_empty_set_with_the_reason(gateway):
    def script(messages, params):
        return json.dumps({"criteria": [{"name": "A", "description": "Great question!"},
                                        {"name": "name", "description": "description"}]})

    rs, report = task_derived_rubric("Answer questions.", 4, gateway, _role("rj_task_junk", script, retries=1),
                                     "t-task_derived")
    assert rs.K == 0 and rs.source == "task_derived" and report["ok"] is False
    assert report["rejected"] == {"field_name": 1, "single_token": 1}
    sf = rs.provenance["shortfall"]
    assert (sf["asked"], sf["got"]) == (4, 0)
    assert "no usable criterion after 2 attempt(s)" in sf["reason"] and "single_token: 1" in sf["reason"]


def test_consolidation_that_loses_support_raises_invariant_error(gateway, store, monkeypatch):
    import rubriclab.discover._consolidate as cons

    pairs = planted_pairs(12)
    extractor = RoleSpec(name="extractor", model=scripted_model("inv_ext", _planted_extractor))
    cands, _ = extract_candidates(pairs, gateway, extractor, seed=42, min_criteria=1, max_criteria=15)

    def merge_one_node_twice(clusters, *args, **kwargs):
        c = clusters[0]
        return [[c[0], c[1]], [c[1], c[2]]]  # c[1] would be counted in two merged criteria

    monkeypatch.setattr(cons, "_subgroup_level", merge_one_node_twice)
    roles = {"consolidator": RoleSpec(name="consolidator", model=scripted_model("inv_cons", consolidator_script())),
             "embedder": RoleSpec(name="embedder", model=scripted_model("inv_emb", embed_script))}
    with pytest.raises(InvariantError, match=r"consolidate level 1: total support \d+ after merging, \d+ before"):
        consolidate(nodes_from_candidates(cands), gateway, store=store, target_size=3, cluster_size=50,
                    max_levels=2, progress=False, **roles)


def test_discover_that_loses_support_in_the_filter_raises_invariant_error(gateway, store, monkeypatch):
    import rubriclab.discover._pipeline as pipe
    from rubriclab.testing import discover_embed_script as emb
    from rubriclab.testing import discover_judge_script as judge_script

    real = pipe.filter_pool

    def lossy(nodes, **kw):
        kept, dropped = real(nodes, **kw)
        return kept[:-1], dropped  # one criterion vanishes: neither kept nor dropped

    monkeypatch.setattr(pipe, "filter_pool", lossy)
    roles = {"extractor": RoleSpec(name="extractor", model=scripted_model("inv2_ext", _planted_extractor)),
             "consolidator": RoleSpec(name="consolidator", model=scripted_model("inv2_cons", consolidator_script())),
             "embedder": RoleSpec(name="embedder", model=scripted_model("inv2_emb", emb)),
             "judge": RoleSpec(name="judge", model=scripted_model("inv2_judge", judge_script))}
    with pytest.raises(InvariantError, match=r"support \d+ extracted, \d+ in the final pool, \d+ kept"):
        discover(planted_pairs(12), CFG, gateway=gateway, store=store, dataset="planted", progress=False, **roles)
