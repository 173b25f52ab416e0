"""The audit's numbers are what they claim: distinct draws, α's orientation, metrics with no valid votes,
generated text checked before use."""

from __future__ import annotations

import hashlib
import re

import krippendorff
import numpy as np
import pytest

from rubriclab.audit import AuditContext, audit_adversarial, audit_applicability, audit_reliability, audit_structure
from rubriclab.audit._validity import attack_problem, check_paraphrases, gibberish_share
from rubriclab.data import Pair, present
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import Criterion, RubricSet
from rubriclab.testing import last_user_text, scripted_model, scripted_provider

RUBRIC = RubricSet(name="r", source="test", criteria=(
    Criterion(id="accuracy", description="The response states correct facts about the question."),
    Criterion(id="clarity", description="The response is easy to follow and well organised.")))


def _h(*parts) -> int:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest(), 16)


def pairs(n: int) -> list[Pair]:
    return [Pair(id=f"p{i}", domain="t", prompt=f"Question {i}?", chosen=f"Good answer {i}.",
                 rejected=f"Bad answer {i}.") for i in range(n)]


def ctx(gateway, judges, **kw) -> AuditContext:
    return AuditContext(gateway=gateway, judges=judges, n_boot=100, progress=False, **kw)


# -- repeated draws are distinct provider calls ----------------------------------------------------------


def test_flip_runs_never_reuse_the_panels_draws(gateway):
    """A panel repeating one model at the flip runs' temperature: α's seats and the flip runs are
    different draws (before, run r was seat r's cached reply, so α and flip shared their samples)."""
    model = scripted_model("hot", lambda m, p: f"SCORE: {_h(last_user_text(m), p.get('seed')) % 11}")
    panel = [RoleSpec(name=f"judge[{i}]", model=model, temperature=0.7) for i in range(3)]
    n, runs = 5, 3
    audit_reliability(RUBRIC, pairs(n), ctx(gateway, panel), runs=runs, temperature=0.7, axes=("alpha", "flip"))
    assert scripted_provider().calls["hot"] == RUBRIC.K * n * (3 + runs)
    stored = gateway.store._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    assert stored == RUBRIC.K * n * (3 + runs)  # one stored draw per request


def test_the_same_prompt_twice_is_two_applicability_draws(gateway):
    model = scripted_model("app_hot", lambda m, p: "yes" if _h(p.get("seed")) % 2 else "no")
    judge = RoleSpec(name="judge", model=model, temperature=0.7)
    same = {"a": "Question 1?", "b": "Question 1?"}  # two pairs sharing a prompt
    audit_applicability(RUBRIC, same, {"o": "Question 1?"}, ctx(gateway, [judge]))
    assert scripted_provider().calls["app_hot"] == RUBRIC.K * 3


def test_an_attack_written_twice_is_judged_and_verified_as_separate_draws(gateway):
    judge = RoleSpec(name="judge", model=scripted_model("adv_judge", lambda m, p: "SCORE: 9"), temperature=0.7)
    c = ctx(gateway, [judge],
            attacker=RoleSpec(name="attacker", model=scripted_model(
                "same_attack", lambda m, p: "# Title\n- a confident bullet about the whole topic"), temperature=0.9),
            verifier=RoleSpec(name="verifier", temperature=0.5, model=scripted_model(
                "adv_verifier", lambda m, p: "<verdict>EXPLOITING</verdict>")))
    n_attacks = 6
    out = audit_adversarial(RUBRIC, pairs(2), c, n_attacks=n_attacks, baseline=False)
    assert out["counts"]["attacks_scored"] == RUBRIC.K * n_attacks
    # one attack text per criterion, yet every attempt is its own judge call and verifier call
    assert scripted_provider().calls["adv_judge"] == RUBRIC.K * n_attacks
    assert scripted_provider().calls["adv_verifier"] == RUBRIC.K * n_attacks


# -- α's orientation is a choice, printed, and computed by the krippendorff package -------------------------


def test_alpha_orientation_matches_krippendorff_on_the_same_matrix(gateway):
    ps = pairs(12)
    rubric = RubricSet(name="one", source="t", criteria=(RUBRIC.criteria[0],))
    # seat j scores pair i as shown: high when chosen is A, low when it is B, a little seat noise. As
    # presented the pairs spread over the scale; oriented to chosen they all sit near 8 and the noise dominates.
    chosen_a = np.array([present(p, 42)["human"] == "A" for p in ps])
    table = {(j, p.id): (8 if chosen_a[i] else 2) + ((i + j) % 3 - 1) for j in range(3) for i, p in enumerate(ps)}

    def seat(j):
        def script(m, params):
            pid = "p" + re.search(r"Question (\d+)\?", last_user_text(m)).group(1)
            return f"SCORE: {table[(j, pid)]}"
        return script

    judges = [RoleSpec(name=f"judge[{j}]", model=scripted_model(f"ori{j}", seat(j))) for j in range(3)]
    shown = np.array([[table[(j, p.id)] for p in ps] for j in range(3)], dtype=float)
    oriented = np.where(chosen_a, shown, 10 - shown)
    assert not chosen_a.all() and chosen_a.any()  # the seeded swap puts chosen on both sides
    expected = {name: krippendorff.alpha(reliability_data=m, value_domain=list(range(11)),
                                         level_of_measurement="ordinal")
                for name, m in (("as_presented", shown), ("chosen_oriented", oriented))}
    assert expected["as_presented"] - expected["chosen_oriented"] > 0.3  # the choice matters
    for orientation, want in expected.items():
        res = audit_reliability(rubric, ps, ctx(gateway, judges, alpha_orientation=orientation), axes=("alpha",))
        assert res["metrics"]["alpha"]["value"] == pytest.approx(want)
        assert res["metrics"]["alpha"]["orientation"] == orientation


def test_an_unknown_orientation_is_refused():
    from rubriclab.errors import ConfigError

    with pytest.raises(ConfigError, match="as_presented, chosen_oriented"):
        AuditContext(gateway=None, judges=[], alpha_orientation="towards_chosen")


# -- a metric with no valid votes is missing, not zero ---------------------------------------------------


def test_structure_with_every_vote_unparseable_is_missing_not_zero(gateway):
    mute = [RoleSpec(name=f"judge[{i}]", parse_retries=0,
                     model=scripted_model(f"mute{i}", lambda m, p: "REASONING: it could pass over details."))
            for i in range(3)]
    res = audit_structure(RUBRIC, ctx(gateway, mute))
    s = res["metrics"]["struct"]
    assert s["value"] is None and s["n"] == 0 and "every one of 30 structure votes failed" in s["reason"]
    assert s["n_failed_votes"] == 30 and s["n_votes"] == 0
    assert all(res["metrics"][f"struct.{p}"]["value"] is None for p in ("atomic", "unambiguous_scope"))


def test_structure_partly_failed_stands_on_its_votes(gateway):
    def half(seat):
        def script(m, p):
            text = last_user_text(m)
            if seat == 2:
                return "no idea"  # one seat never answers
            fail = "Atomic" in text and "clarity" in text
            return f"VERDICT: {'FAIL' if fail else 'PASS'}"
        return script

    judges = [RoleSpec(name=f"judge[{i}]", parse_retries=0, model=scripted_model(f"half{i}", half(i))) for i in range(3)]
    s = audit_structure(RUBRIC, ctx(gateway, judges))["metrics"]["struct"]
    assert s["value"] == pytest.approx((5 + 4) / 2) and s["n"] == 2
    assert s["n_votes"] == 20 and s["n_failed_votes"] == 10


def test_a_tied_structure_vote_is_undecided_and_leaves_the_criterion_out(gateway):
    yes = RoleSpec(name="judge[0]", model=scripted_model("yes_s", lambda m, p: "VERDICT: PASS"))
    no = RoleSpec(name="judge[1]", model=scripted_model(
        "no_s", lambda m, p: "VERDICT: FAIL" if "clarity" in last_user_text(m) else "VERDICT: PASS"))
    res = audit_structure(RUBRIC, ctx(gateway, [yes, no]))
    s = res["metrics"]["struct"]
    assert s["value"] == 5.0 and s["n"] == 1 and s["n_left_out"] == 1  # clarity's 1-1 votes decide nothing
    assert {r["criterion"]: r["struct"] for r in res["per_criterion"]} == {"accuracy": 5, "clarity": None}


# -- generated text is checked before it is used ---------------------------------------------------------


def test_a_gibberish_paraphrase_is_rejected_and_counted(gateway):
    para = RoleSpec(name="paraphraser", model=scripted_model(
        "gib", lambda m, p: "hpdrsncl gnvprpf cnqjzzsrc" if p.get("seed") % 2 else
        "The answer gives facts about the question that are correct."), temperature=0.8)
    seen: list[str] = []

    def judge_script(m, p):
        seen.append(last_user_text(m))
        return "SCORE: 5"

    judge = RoleSpec(name="judge", model=scripted_model("para_judge", judge_script))
    c = ctx(gateway, [judge], paraphraser=para)
    res = audit_reliability(RUBRIC, pairs(4), c, paraphrases=2, paraphrase_temperature=0.8, axes=("paraphrase",))
    assert res["paraphrases_rejected"] == {"gibberish": RUBRIC.K}  # one of the two per criterion
    used = [t for texts in res["paraphrases"].values() for t in texts.values()]
    assert len(used) == RUBRIC.K and not any("hpdrsncl" in t for t in used)
    assert seen and not any("hpdrsncl" in t for t in seen)  # never judged with, never a criterion
    assert res["metrics"]["paraphrase_rho"]["value"] is None
    assert "rejected: gibberish 2" in res["metrics"]["paraphrase_rho"]["reason"]
    assert any(r.get("dropped") == "paraphrase rejected: gibberish" and r["items"] == 2 for r in c.tally.rows())


def test_paraphrase_meaning_is_checked_with_the_embedder(gateway):
    def embed(messages, params):
        text = last_user_text(messages).lower()
        return [1.0, 0.0] if "correct" in text else [0.9, 0.3] if "fact" in text else [0.0, 1.0]

    c = ctx(gateway, [], embedder=RoleSpec(name="embedder", model=scripted_model("emb", embed)))
    original = "The response states correct facts about the question."
    rows = [(("p", 0), original, "The reply gets its facts right about the question asked.", None),
            (("p", 1), original, "The reply is cheerful and uses many friendly emojis.", None),
            (("p", 2), original, original, None),
            (("p", 3), original, None, "ParseFailure: cut off")]
    out = check_paraphrases(rows, c)
    assert out[("p", 0)][1] is None
    assert out[("p", 1)][1] == "meaning drifted"
    assert out[("p", 2)][1] == "copy"
    assert out[("p", 3)][1] == "no usable reply"


def test_attack_replies_that_are_not_responses_are_rejected():
    prompt = "How do I boil an egg?"
    strategy = "Use impressive formatting (headers, bullet points, code blocks) to mask shallow or incorrect content."
    assert attack_problem("# Eggs\n- Boil water, add the egg, wait ten minutes.", prompt=prompt,
                          strategy_description=strategy) is None
    assert attack_problem("", prompt=prompt, strategy_description=strategy) == "empty"
    assert attack_problem("Sure!", prompt=prompt, strategy_description=strategy) == "too short"
    assert attack_problem("hpdrsncl gnvprpf cnqjzzsrc xkcdfgh brrtwq zzkpl", prompt=prompt, strategy_description=strategy) == \
        "gibberish"
    assert attack_problem("How do I boil an egg?", prompt=prompt, strategy_description=strategy,
                          bounds={"min_words": 3}) == "copy of the prompt"
    assert attack_problem(f"Strategy: {strategy} Here goes.", prompt=prompt, strategy_description=strategy) == \
        "copy of the attack instructions"
    assert gibberish_share("The quick brown fox jumps over the lazy dog") == 0.0
    from rubriclab.audit._validity import template_markers
    from rubriclab.llm import load_prompt

    markers = template_markers(load_prompt("audit_attacker").user)
    assert {"## Rubric:", "**Definition:**", "## Exploit strategy:"} <= set(markers)
    copied = "## Rubric: answers_the_question\n**Definition:** This answer is a general guideline for eggs."
    assert attack_problem(copied, prompt=prompt, strategy_description=strategy, markers=markers) == \
        "copy of the attack instructions"


def test_rejected_attacks_are_counted_not_scored(gateway):
    judge = RoleSpec(name="judge", model=scripted_model("rej_judge", lambda m, p: "SCORE: 9"))
    c = ctx(gateway, [judge], attacker=RoleSpec(name="attacker", model=scripted_model(
        "junk_attacker", lambda m, p: "hpdrsncl gnvprpf cnqjzzsrc xkcdfgh brrtwq zzkpl" if p.get("seed", 0) % 2 else
        "# Title\n- a confident bullet about the whole topic"), temperature=0.9),
            verifier=RoleSpec(name="verifier", model=scripted_model("rej_ver", lambda m, p: "<verdict>GENUINE</verdict>")))
    out = audit_adversarial(RUBRIC, pairs(2), c, n_attacks=4, baseline=False)
    assert out["counts"]["attacks_rejected"] > 0
    assert out["counts"]["attacks_scored"] == RUBRIC.K * 4 - out["counts"]["attacks_rejected"]
    assert all(r["score"] is None for r in out["items"] if r["status"] == "attack_rejected")
    dropped = [r for r in c.tally.rows() if r.get("dropped", "").startswith("attack rejected: gibberish")]
    assert dropped and dropped[0]["items"] == out["counts"]["attacks_rejected"]


def test_check_bounds_with_a_typo_are_refused():
    from rubriclab.errors import ConfigError

    with pytest.raises(ConfigError, match="audit.attack_check: unknown key.*min_word"):
        attack_problem("a b c d e f", prompt="q", strategy_description="s", bounds={"min_word": 3})


def test_fast_alpha_matrix_gives_the_pivot_alpha_on_resamples_with_repeated_pairs():
    """The α bootstrap builds its raters × items matrix in numpy; it must equal the pandas pivot (pairs
    drawn twice kept as two columns, missing ratings as NaN) on every resample."""
    import numpy as np
    import pandas as pd

    from rubriclab.audit._reliability import _grid, _matrix
    from rubriclab.stats import krippendorff_alpha

    rng = np.random.default_rng(3)
    rows = [{"who": f"rater{j}", "pair_id": f"p{i}", "score": float(rng.integers(0, 11))}
            for j in range(3) for i in range(12)]
    scores = pd.DataFrame(rows)
    scores.loc[rng.choice(len(scores), 5, replace=False), "score"] = np.nan
    for _ in range(20):
        ids = rng.choice([f"p{i}" for i in range(12)], 12)  # a bootstrap resample: some pairs twice
        sample = pd.concat([scores[scores.pair_id == i] for i in ids], ignore_index=True)
        fast, slow = _matrix(sample), _grid(sample).to_numpy()
        a, b = krippendorff_alpha(fast)["alpha"], krippendorff_alpha(slow)["alpha"]
        assert (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b)
        assert np.count_nonzero(~np.isnan(fast)) == np.count_nonzero(~np.isnan(slow))


def test_fast_paraphrase_rho_equals_the_pivot_rho_on_resamples_with_repeated_pairs():
    """The paraphrase ρ bootstrap builds its paraphrases × items matrix in numpy (``_rho``); ρ must be exactly the
    pivot's on every resample: pairs drawn twice, missing scores, a paraphrase with no score at all."""
    import numpy as np
    import pandas as pd

    from rubriclab.audit._reliability import _grid, _rho
    from rubriclab.stats import paraphrase_stability

    def pivot_rho(s: pd.DataFrame) -> float:  # the definition before: a pandas pivot per resample
        grid = _grid(s)
        return paraphrase_stability(grid.to_numpy())["rho"] if len(grid) >= 2 else np.nan

    rng = np.random.default_rng(5)
    rows = [{"who": f"para{j}", "pair_id": f"p{i:02d}", "score": float(rng.integers(0, 11))}
            for j in range(4) for i in range(10)]
    scores = pd.DataFrame(rows)
    scores.loc[rng.choice(len(scores), 6, replace=False), "score"] = np.nan
    scores.loc[scores.who == "para3", "score"] = np.nan
    seen = 0
    for _ in range(30):
        ids = rng.choice([f"p{i:02d}" for i in range(10)], 10)
        sample = pd.concat([scores[scores.pair_id == i] for i in ids], ignore_index=True)
        fast, slow = _rho(sample), pivot_rho(sample)
        assert (np.isnan(fast) and np.isnan(slow)) or fast == slow
        seen += not np.isnan(fast)
    assert seen > 20
    one = scores[scores.who.isin(["para0", "para3"])]  # one paraphrase with scores: no pair, no ρ
    assert np.isnan(_rho(one)) and np.isnan(pivot_rho(one))
