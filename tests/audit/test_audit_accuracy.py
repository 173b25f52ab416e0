"""Rubric-conditioned judge accuracy (preference fit, empirical) with scripted judges of known behaviour."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from rubriclab.audit import AuditContext, audit_accuracy
from rubriclab.data import Pair, swap_for
from rubriclab.errors import InputError
from rubriclab.llm import Gateway, RoleSpec, open_store
from rubriclab.rubrics import Criterion, RubricSet
from rubriclab.testing import scripted_model, scripted_provider

N = 40


def make_pairs(n: int = N) -> list[Pair]:
    return [Pair(id=f"p{i:03d}", domain="demo", prompt=f"Question {i}?", chosen=f"Answer {i} GOOD_accuracy CHOSEN",
                 rejected=f"Answer {i} BAD_accuracy REJECTED") for i in range(n)]


def rubric(name: str, cid: str, text: str) -> RubricSet:
    return RubricSet(name=name, criteria=(Criterion(id=cid, description=text),))


RUBRICS = {
    "acc": rubric("acc", "factual_accuracy", "Rewards accuracy of the stated facts."),
    "style": rubric("style", "tone", "Rewards a friendly tone."),
}


# -- reading the rendered prompts (scripts look at the FIRST user message: re-asks append more) ------------

def first_user(messages: list[dict]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0] if start in text else ""


def shown(text: str) -> tuple[str, str, str, bool]:
    """(response A, response B, rubric text, per-rubric?) from a rendered judge prompt."""
    if "<traits_to_evaluate>" in text:
        return (between(text, "<candidate_response>", "</candidate_response>"),
                between(text, "<baseline_response>", "</baseline_response>"),
                between(text, "<traits_to_evaluate>", "</traits_to_evaluate>"), True)
    return (between(text, "## Response A", "## Response B"), between(text, "## Response B", "## Task"),
            between(text, "## Evaluation Dimensions", "## User Prompt"), False)


def per_rubric_reply(traits: str, cand: int, base: int) -> str:
    ids = re.findall(r"^- (\w+)", traits, re.M)
    block = lambda c, b: {"candidate_reasoning": "r", "candidate_adherence": c,  # noqa: E731
                          "baseline_reasoning": "r", "baseline_adherence": b}
    return json.dumps({"trait_scores": {i: block(cand, base) for i in ids}, "overall_score": block(cand, base)})


def keyword_judge(messages, params):
    """Picks the response with GOOD_<x> only when the rubric mentions x; otherwise A (or a per-rubric tie)."""
    a, b, rubric_text, per_rubric = shown(first_user(messages))

    def good(resp: str) -> bool:
        return any(k in rubric_text for k in re.findall(r"GOOD_(\w+)", resp))

    if per_rubric:
        cand, base = (9, 3) if good(a) else (3, 9) if good(b) else (5, 5)
        return per_rubric_reply(rubric_text, cand, base)
    return f"<verdict>{'B' if good(b) and not good(a) else 'A'}</verdict>"


class SpyGateway(Gateway):
    """Counts gateway batches, to check that one wave is one batch."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.batches: list[int] = []

    def run(self, requests, desc="calls"):
        self.batches.append(len(requests))
        return super().run(requests, desc=desc)


def context(gateway, model: str, **role) -> AuditContext:
    judge = RoleSpec(name="judge", model=model, parse_retries=0, **role)
    return AuditContext(gateway=gateway, judges=[judge], seed=42, n_boot=400, progress=False)


def find(rows, **match):
    out = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(out) == 1, (match, len(out))
    return out[0]


# -- tests ----------------------------------------------------------------------------------------------

def test_rubric_naming_the_planted_keyword_beats_no_rubric(store):
    gw = SpyGateway(store, stage="test", progress=False)
    pairs = make_pairs()
    ctx = context(gw, scripted_model("keyword", keyword_judge))
    out = audit_accuracy(RUBRICS, pairs, ctx, samples=3, n_boot_paired=2000)
    m = out["metrics"]
    unswapped = sum(not swap_for(p.id, 42) for p in pairs) / N  # always-A accuracy under the seeded swap
    assert 0.3 < unswapped < 0.7

    assert m["acc"]["acc_direct"]["value"] == 1.0 and m["acc"]["acc_per_rubric"]["value"] == 1.0
    assert m["acc"]["acc_direct"]["n"] == N
    assert m["no_rubric"]["acc_direct"]["value"] == pytest.approx(unswapped)
    assert m["style"]["acc_direct"]["value"] == pytest.approx(unswapped)
    assert set(m["no_rubric"]) >= {"acc_direct", "no_verdict_direct", "decided_rate_direct"}
    assert not any(k.endswith("per_rubric") for k in m["no_rubric"])  # baseline is direct-only
    # per-rubric without the keyword: every overall score ties -> judged, credited 0.5 each, never guessed
    # as a letter; the decided rate says none was decided
    assert m["style"]["ties_per_rubric"] == N and m["style"]["acc_per_rubric"]["value"] == 0.5
    assert m["style"]["acc_per_rubric"]["n"] == N and m["style"]["acc_per_rubric"]["n_ties"] == N
    assert m["style"]["decided_rate_per_rubric"]["value"] == 0.0 and m["acc"]["decided_rate_per_rubric"]["value"] == 1
    assert out["counts"]["style"]["per_rubric"]["n_dropped"] == 0

    comp = out["comparisons"]
    assert len(comp) == 3 + 1  # direct: acc/style/no_rubric pairwise; per_rubric: acc vs style
    win = find(comp, template="direct", a="acc", b="no_rubric")
    assert win["diff"] == pytest.approx(1 - unswapped) and win["n_items"] == N
    assert win["p_adjusted"] < 0.01 and win["label"] == "difference" and win["mde"] > 0
    same = find(comp, template="direct", a="style", b="no_rubric")
    assert same["diff"] == 0 and same["label"].startswith("no difference: identical on every shared item")
    # the same items under both: style's ties stay in (credited 0.5), so the comparison has all N pairs
    ties = find(comp, template="per_rubric", a="acc", b="style")
    assert ties["n_obs"] == N and ties["n_excluded"] == 0 and ties["diff"] == pytest.approx(0.5)
    assert ties["label"] == "difference"
    assert all(r["p_adjusted"] is None or r["p_adjusted"] >= r["p_value"] for r in comp)

    items = out["items"]
    assert len(items) == N * 5
    assert all(r["credit"] == 1.0 for r in items if r["source"] == "acc")
    row = find(items, source="style", template="per_rubric", pair_id="p000")
    assert row["majority"] == "tie" and row["credit"] == 0.5 and row["votes"] == "tie,tie"
    # a deterministic judge is decided after the first wave (2 of 3 samples): one batch, calls saved
    assert gw.batches == [N * 5 * 2]
    assert m["acc"]["calls_saved_direct"] == N and m["acc"]["calls_full_direct"] == 3 * N
    assert scripted_provider().calls["keyword"] == N * 5 * 2


def test_always_a_judge_is_caught_by_both_orders(gateway):
    def always_a(messages, params):
        a, b, traits, per_rubric = shown(first_user(messages))
        return per_rubric_reply(traits, 8, 2) if per_rubric else "<verdict>A</verdict>"

    ctx = context(gateway, scripted_model("always_a", always_a))
    out = audit_accuracy({"acc": RUBRICS["acc"]}, make_pairs(), ctx, samples=1, both_orders=True)
    for source, template in (("acc", "direct"), ("acc", "per_rubric"), ("no_rubric", "direct")):
        m = out["metrics"][source]
        assert m[f"first_position_rate_{template}"]["value"] == 1.0
        assert m[f"swap_flip_rate_{template}"]["value"] == 1.0
        acc = m[f"acc_{template}"]
        assert acc["value"] == 0.5 and acc["n_judgments"] == 2 * N
        # a pair judged in both orders is ONE bootstrap item: every pair scores 0.5, so the pair-level
        # interval collapses; treating the 80 judgments as independent would give a wide interval
        assert acc["n"] == N and acc["n_obs"] == 2 * N
        assert acc["low"] == acc["high"] == 0.5
        assert m[f"acc_{template}_both_orders"]["value"] == 0.0  # never right in both orders
        assert m[f"acc_{template}_both_orders"]["n"] == N
    assert {r["order"] for r in out["items"]} == {"orig", "swapped"}
    row = find(out["comparisons"], template="direct", a="acc", b="no_rubric")
    assert row["n_items"] == N and row["n_obs"] == 2 * N and row["diff"] == 0


def _noisy_judge(messages, params):
    """Sample-dependent (via the seed param) verdicts; P(A) depends on the pair; some replies unparseable."""
    text = first_user(messages)
    i = int(re.search(r"Question (\d+)\?", text).group(1))
    u = int(hashlib.sha256(f"{i}|{params.get('seed')}".encode()).hexdigest()[:8], 16) / 16**8
    if u > 0.93:
        return "I cannot decide."
    return f"<verdict>{'A' if u < (0.05, 0.5, 0.95, 0.3, 0.7)[i % 5] else 'B'}</verdict>"


def test_early_stopping_gives_the_full_sampling_verdicts_with_fewer_calls(tmp_path):
    pairs = make_pairs(30)
    kw = {"samples": 5, "temperature": 0.7, "templates": ("direct",), "n_boot": 200, "n_boot_paired": 200}
    runs = {}
    for early in (False, True):
        store = open_store(tmp_path / f"{early}.sqlite")
        model = scripted_model(f"noisy_{early}", _noisy_judge)
        gw = SpyGateway(store, stage="test", progress=False)
        out = audit_accuracy({"acc": RUBRICS["acc"]}, pairs, context(gw, model), early_stop=early, **kw)
        runs[early] = (out, gw, store, model)

    full, early = runs[False][0], runs[True][0]
    key = lambda r: (r["source"], r["template"], r["pair_id"], r["order"])  # noqa: E731
    full_v = {key(r): r["majority"] for r in full["items"]}
    early_v = {key(r): r["majority"] for r in early["items"]}
    assert early_v == full_v
    assert {"A", "B"} <= set(full_v.values())  # not a trivial judge
    assert sum(r["votes"].count("fail") for r in full["items"]) > 0  # failed samples took part
    # the same sample indices were bought: early votes are a prefix of the full votes
    full_votes = {key(r): r["votes"] for r in full["items"]}
    assert all(full_votes[key(r)].startswith(r["votes"]) for r in early["items"])
    assert full["metrics"]["acc"]["acc_direct"] == early["metrics"]["acc"]["acc_direct"]

    for source in ("acc", "no_rubric"):
        f, e = full["counts"][source]["direct"], early["counts"][source]["direct"]
        assert f["calls_saved"] == 0 and f["calls_made"] == f["calls_full"] == 5 * 30
        assert e["calls_saved"] > 0 and e["calls_made"] + e["calls_saved"] == e["calls_full"] == 5 * 30
    made = sum(early["counts"][s]["direct"]["calls_made"] for s in ("acc", "no_rubric"))
    _, gw, store, model = runs[True]
    assert scripted_provider().calls[model.split("/")[1]] == made
    assert len(runs[False][1].batches) == 1 and len(gw.batches) >= 2  # one batch per wave
    assert gw.batches[0] == 2 * 30 * 3  # first wave: ceil((5+1)/2) = 3 samples per item

    # samples are cached by index: a later full-sampling run only buys what early stopping skipped
    again = audit_accuracy({"acc": RUBRICS["acc"]}, pairs, context(Gateway(store, progress=False), model),
                           **{**kw, "early_stop": False})
    assert scripted_provider().calls[model.split("/")[1]] == 2 * 5 * 30
    assert {key(r): r["majority"] for r in again["items"]} == full_v
    for _, _, st, _ in runs.values():
        st.close()


def test_per_rubric_verdict_comes_from_overall_scores_and_bad_replies_are_failures(gateway):
    seen: list[str] = []

    def judge(messages, params):
        text = first_user(messages)
        seen.append(text)
        a, b, traits, _ = shown(text)
        case = int(re.search(r"Question (\d+)\?", text).group(1)) % 6
        hi_a = ("CHOSEN" in a) == (case == 0)  # case 0: prefers chosen; case 1: prefers rejected
        if case in (0, 1):
            reply = per_rubric_reply(traits, 9 if hi_a else 2, 2 if hi_a else 9)
            return f"```json\n{reply}\n```" if case == 0 else reply
        if case == 2:
            return "Candidate is better overall."
        if case == 3:
            return json.dumps({"trait_scores": {}})  # no overall score: not guessed from traits
        if case == 4:
            return per_rubric_reply(traits, 11, 2)  # outside 0-10
        return per_rubric_reply(traits, 6, 6)

    ctx = context(gateway, scripted_model("per_rubric", judge))
    out = audit_accuracy({"acc": RUBRICS["acc"]}, make_pairs(24), ctx, samples=1, templates=("per_rubric",))
    m = out["metrics"]["acc"]
    assert set(out["metrics"]) == {"acc"}  # no no-rubric cell without the direct template
    # 4 right, 4 wrong, 4 ties (credit 0.5) over the 12 judged; 12 with no verdict are counted, not judged
    assert m["acc_per_rubric"]["value"] == pytest.approx((4 + 0.5 * 4) / 12) and m["acc_per_rubric"]["n"] == 12
    assert m["no_verdict_per_rubric"] == 12 and m["ties_per_rubric"] == 4
    assert m["acc_per_rubric"]["n_failed"] == 12 and m["acc_per_rubric"]["n_ties"] == 4
    assert m["decided_rate_per_rubric"]["value"] == pytest.approx(8 / 12)
    rows = {r["pair_id"]: r for r in out["items"]}
    assert rows["p000"]["credit"] == 1.0 and rows["p001"]["credit"] == 0.0
    assert rows["p002"]["majority"] == "fail" and "not JSON" in rows["p002"]["error"]
    assert rows["p003"]["majority"] == "fail" and "overall_score" in rows["p003"]["error"]
    assert rows["p004"]["majority"] == "fail" and rows["p005"]["majority"] == "tie"
    # the prompt carries the criterion ids, their text and the per-trait JSON template
    assert "- factual_accuracy: Rewards accuracy" in seen[0] and '"factual_accuracy": {"candidate_reasoning"' in seen[0]


def test_schema_constrained_judge_gets_a_json_schema(gateway):
    params_seen: list[dict] = []

    def judge(messages, params):
        params_seen.append(params)
        a, b, traits, per_rubric = shown(first_user(messages))
        return per_rubric_reply(traits, 7, 3) if per_rubric else json.dumps({"answer": "A"})

    ctx = context(gateway, scripted_model("structured", judge), structured=True)
    out = audit_accuracy({"acc": RUBRICS["acc"]}, make_pairs(4), ctx, samples=1, n_boot=50, n_boot_paired=50)
    schemas = [p["response_format"]["schema"] for p in params_seen]
    per = next(s for s in schemas if "overall_score" in s["properties"])
    overall = per["properties"]["overall_score"]["properties"]
    assert overall["candidate_adherence"] == {"type": "integer", "minimum": 0, "maximum": 10, "enum": list(range(11))}
    assert overall["candidate_reasoning"]["maxLength"] <= 200
    assert per["properties"]["trait_scores"]["required"] == ["factual_accuracy"]
    assert any("answer" in s["properties"] for s in schemas)  # the direct verdict is constrained too
    assert out["metrics"]["acc"]["first_position_rate_per_rubric"]["value"] == 1.0


def test_bad_inputs_are_refused(gateway):
    ctx = context(gateway, scripted_model("unused", keyword_judge))
    with pytest.raises(InputError):
        audit_accuracy({"no_rubric": RUBRICS["acc"]}, make_pairs(2), ctx)
    with pytest.raises(InputError):
        audit_accuracy(RUBRICS, make_pairs(2) * 2, ctx)
    with pytest.raises(InputError):
        audit_accuracy(RUBRICS, make_pairs(2), ctx, templates=("pointwise",))
    assert scripted_provider().calls["unused"] == 0
