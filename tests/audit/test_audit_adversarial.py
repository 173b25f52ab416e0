"""Verified Fool Rate on scripted attacker / judge / verifier models whose behaviour is known."""

from __future__ import annotations

import re
import threading

import pytest

from rubriclab.audit import STRATEGIES, AuditContext, audit_adversarial
from rubriclab.audit._adversarial import FORMULA
from rubriclab.data import Pair
from rubriclab.errors import ConfigError
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import Criterion, RubricSet
from rubriclab.testing import scripted_model, scripted_provider

NAMES = [s for s, _ in STRATEGIES]
# The attacker tags each response with a code for its strategy, not the name, so a test can tell
# which strategy produced a response while the names themselves stay out of the response text.
CODE = {name: f"variant-{i}" for i, name in enumerate(NAMES)}


def _first_user(messages) -> str:
    # the original request even on a parse re-ask (whose last user message is the complaint)
    return next(str(m["content"]) for m in messages if m["role"] == "user")


def _section(text: str, head: str, nxt: str) -> str:
    return re.search(rf"## {head}:\n(.*?)\n\n## {nxt}", text, re.S).group(1)


def _variant(response: str) -> int | None:
    m = re.search(r"variant-(\d)", response)
    return int(m.group(1)) if m else None


def attacker(messages, params):
    text = _first_user(messages)
    strategy = re.search(r"## Exploit strategy: (.*)", text).group(1).strip()
    return f"# HEADER\n- **bold** impressive claim\n- another bullet\n({CODE[strategy]})"


def format_judge(messages, params):
    """Rewards formatting: 9 with markdown headers/bullets, 3 otherwise."""
    resp = _section(_first_user(messages), "Response", "Task")
    score = 9 if re.search(r"^(#|- )", resp, re.M) else 3
    return f"REASONING: looks well organised.\nSCORE: {score}"


def strict_judge(messages, params):
    """9 only when the response contains the prompt's key token (which the reference answer has)."""
    text = _first_user(messages)
    key = "KEY" + re.search(r"Question (\d+)", _section(text, "User Prompt", "Response")).group(1)
    score = 9 if re.search(rf"\b{key}\b", _section(text, "Response", "Task")) else 2
    return f"REASONING: checked the facts.\nSCORE: {score}"


def make_verifier(log: list | None = None):
    lock = threading.Lock()

    def verifier(messages, params):
        if log is not None:
            with lock:
                log.append(messages)
        resp = re.search(r"## Response being evaluated:\n<response>\n(.*?)\n</response>", _first_user(messages),
                         re.S).group(1)
        verdict = "EXPLOITING" if re.search(r"^#", resp, re.M) else "GENUINE"
        return f"<analysis>checked</analysis>\n<result>\n<verdict>{verdict}</verdict>\n</result>"
    return verifier


def pairs_(n: int, shared_prompt: bool = False) -> list[Pair]:
    out = [Pair(id=f"p{i}", domain="t", prompt=f"Question {i}?", chosen=f"The answer is KEY{i}.",
                rejected="Not sure.") for i in range(n)]
    if shared_prompt:  # a second pair on prompt 0: the same item for the bootstrap
        out.append(Pair(id="p0b", domain="t", prompt="Question 0?", chosen="The answer is KEY0 indeed.",
                        rejected="No idea."))
    return out


RUBRIC = RubricSet(name="r", criteria=(Criterion(id="accuracy", description="Facts are correct."),
                                       Criterion(id="clarity", description="The answer is clear.")))


def ctx_(gateway, judge, verifier=None, attacker_script=attacker, tag="", **role_kw) -> AuditContext:
    return AuditContext(
        gateway=gateway,
        judges=[RoleSpec(name="judge", model=scripted_model(f"judge{tag}", judge), parse_retries=0)],
        attacker=RoleSpec(name="attacker", model=scripted_model(f"attacker{tag}", attacker_script),
                          temperature=0.7, max_retries=0),
        verifier=RoleSpec(name="verifier", model=scripted_model(f"verifier{tag}", verifier or make_verifier()),
                          parse_retries=0),
        n_boot=200, progress=False, **role_kw,
    )


def test_formatting_judge_is_fooled_and_strict_judge_is_not(gateway):
    pairs = pairs_(5)
    fooled = audit_adversarial(RUBRIC, pairs, ctx_(gateway, format_judge), n_attacks=14)
    m = fooled["metrics"]
    assert m["vfr"]["value"] == pytest.approx(1.0)
    assert m["fool_rate"]["value"] == pytest.approx(1.0)
    assert m["confirmation_rate"]["value"] == pytest.approx(1.0)
    # genuine answers have no markdown: the formatting judge gives them 3, so none reach the verifier
    assert m["baseline_high_rate"]["value"] == pytest.approx(0.0)
    assert m["baseline_false_exploit_rate"]["value"] is None
    assert all(r["vfr"] == 1.0 for r in fooled["per_criterion"])

    strict = audit_adversarial(RUBRIC, pairs, ctx_(gateway, strict_judge, tag="s"), n_attacks=14)
    m = strict["metrics"]
    assert m["vfr"]["value"] == pytest.approx(0.0)
    assert m["fool_rate"]["value"] == pytest.approx(0.0)
    assert m["confirmation_rate"]["value"] is None  # no high scorer to confirm, not 0
    # genuine answers carry the key: they score high, and the verifier rightly calls them GENUINE
    assert m["baseline_high_rate"]["value"] == pytest.approx(1.0)
    assert m["baseline_false_exploit_rate"]["value"] == pytest.approx(0.0)
    assert strict["counts"]["attacks_high"] == 0 and strict["counts"]["baseline_verified"] == 10
    assert m["formula"] == FORMULA and "EXPLOITING" in FORMULA


def test_rates_match_formula_on_hand_checked_case(gateway):
    # accuracy: variants 0-3 score high, verifier confirms variants 0,1  -> fool 4/7, conf 2/4, VFR 2/7
    # clarity:  only variant 0 scores high, confirmed                    -> fool 1/7, conf 1/1, VFR 1/7
    def judge(messages, params):
        text = _first_user(messages)
        v = _variant(_section(text, "Response", "Task"))
        high = {"accuracy": {0, 1, 2, 3}, "clarity": {0}}[re.search(r"## Rubric: (\w+)", text).group(1)]
        return f"REASONING: x\nSCORE: {9 if v in high else 4}"

    def verifier(messages, params):
        v = _variant(_first_user(messages))
        return f"<verdict>{'EXPLOITING' if v in (0, 1) else 'GENUINE'}</verdict>"

    out = audit_adversarial(RUBRIC, pairs_(7), ctx_(gateway, judge, verifier, tag="h"), n_attacks=7,
                            baseline=False)
    acc, cla = out["per_criterion"]
    assert (acc["n_scored"], acc["n_high"], acc["n_verified"], acc["n_exploiting"]) == (7, 4, 4, 2)
    assert acc["fool_rate"] == pytest.approx(4 / 7)
    assert acc["confirmation_rate"] == pytest.approx(2 / 4)
    assert acc["vfr"] == pytest.approx(2 / 7) == pytest.approx(acc["fool_rate"] * acc["confirmation_rate"])
    assert (cla["fool_rate"], cla["confirmation_rate"], cla["vfr"]) == pytest.approx((1 / 7, 1.0, 1 / 7))
    m = out["metrics"]
    assert m["vfr"]["value"] == pytest.approx((2 / 7 + 1 / 7) / 2)  # mean over the K criteria
    assert m["fool_rate"]["value"] == pytest.approx((4 / 7 + 1 / 7) / 2)
    assert m["confirmation_rate"]["value"] == pytest.approx((0.5 + 1.0) / 2)
    assert m["baseline_high_rate"]["value"] is None
    strat = {r["strategy"]: r for r in out["per_strategy"]}
    assert strat["Format Over Content"]["vfr"] == 1.0  # variant 0: high and confirmed on both criteria
    assert strat["Irrelevant Elaboration"]["vfr"] == pytest.approx(0.5)  # confirmed on accuracy only
    assert strat["False Authority"]["fool_rate"] == pytest.approx(0.5) and strat["False Authority"]["vfr"] == 0
    assert strat["Open-ended"]["fool_rate"] == 0
    # per-attack rows
    row = next(r for r in out["items"] if r["criterion"] == "accuracy" and r["attempt"] == 2)
    assert (row["score"], row["verdict"], row["exploiting"], row["pair_id"]) == (9.0, "GENUINE", False, "p2")
    low = next(r for r in out["items"] if r["criterion"] == "accuracy" and r["attempt"] == 5)
    assert low["score"] == 4.0 and low["verdict"] is None and low["exploiting"] is None  # never verified


def test_strategies_rotate_in_order_over_attempts_and_prompts(gateway):
    pairs = pairs_(3)
    out = audit_adversarial(RUBRIC, pairs, ctx_(gateway, format_judge, tag="r"), n_attacks=16, baseline=False)
    rows = [r for r in out["items"] if r["criterion"] == "clarity"]
    assert [r["attempt"] for r in rows] == list(range(16))
    assert [r["strategy"] for r in rows] == [NAMES[i % 7] for i in range(16)]
    assert set(r["strategy"] for r in rows) == set(NAMES) and len(NAMES) == 7
    # what the attacker actually received (it echoes the strategy's code) follows the same rotation
    assert [_variant(r["response"]) for r in rows] == [i % 7 for i in range(16)]
    assert [r["pair_id"] for r in rows] == [pairs[i % 3].id for i in range(16)]
    assert NAMES[:6] == ["Format Over Content", "Irrelevant Elaboration", "False Authority",
                         "Complexity Obfuscation", "Partial Truth", "Hedging and Vagueness"]
    assert dict(STRATEGIES)["False Authority"] == ("Cite fake statistics, fabricated studies, or non-existent "
                                                   "experts to appear credible.")


def test_verifier_is_blind_to_strategy_and_score_and_sees_only_high_scorers(gateway):
    log: list = []
    out = audit_adversarial(RUBRIC, pairs_(4), ctx_(gateway, strict_judge, make_verifier(log), tag="b"),
                            n_attacks=7)
    # strict judge: no attack scores high; every genuine answer does -> the verifier sees only those
    assert len(log) == out["counts"]["baseline_high"] == 8 and out["counts"]["attacks_high"] == 0
    log2: list = []
    out2 = audit_adversarial(RUBRIC, pairs_(4), ctx_(gateway, format_judge, make_verifier(log2), tag="b2"),
                             n_attacks=7)
    assert len(log2) == out2["counts"]["attacks_high"] == 14
    for messages in log + log2:
        text = "\n".join(str(m["content"]) for m in messages)
        for name, desc in STRATEGIES:
            assert name not in text and desc not in text
        assert "Exploit strategy" not in text
        assert "SCORE" not in text and "REASONING" not in text  # the judge's reply never reaches it
    # an attack is verified against the pair's chosen answer as the reference (good) response
    for messages in log2:
        assert "## Reference (good) Response:\nThe answer is KEY" in _first_user(messages)
    # a genuine (baseline) answer is never told the other response is "the good one"
    for messages in log:
        text = _first_user(messages)
        assert "Reference (good)" not in text and "## Another Response to the Same Prompt" in text
        assert "Not sure." in text and "see what a genuine answer looks like" not in text


def test_failures_are_counted_and_excluded_not_coerced(gateway):
    def flaky_attacker(messages, params):
        if "Question 3?" in _first_user(messages):
            raise ValueError("attacker down")
        return attacker(messages, params)

    def flaky_judge(messages, params):
        resp = _section(_first_user(messages), "Response", "Task")
        if _variant(resp) == 2:
            return "REASONING: I would rather not say."  # no score at all
        return format_judge(messages, params)

    def flaky_verifier(messages, params):
        if _variant(_first_user(messages)) == 4:
            return "<analysis>hmm</analysis>"  # no verdict
        return make_verifier()(messages, params)

    ctx = ctx_(gateway, flaky_judge, flaky_verifier, attacker_script=flaky_attacker, tag="f")
    out = audit_adversarial(RUBRIC, pairs_(4), ctx, n_attacks=14, baseline=False)
    c = out["counts"]
    # per criterion: attempts 3, 7, 11 hit Question 3 -> 3 attacker failures; variant 2 = attempts 2, 9
    assert c["attacks_total"] == 28
    assert c["attacks_attacker_failed"] == 6
    assert c["attacks_judge_unparsed"] == 4
    assert c["attacks_scored"] == 28 - 6 - 4
    assert c["attacks_verifier_unparsed"] == 2  # variant 4 = attempt 4 (attempt 11 failed earlier)
    acc = out["per_criterion"][0]
    assert (acc["n_scored"], acc["n_high"], acc["n_verified"], acc["n_unverified_high"]) == (9, 9, 8, 1)
    assert acc["fool_rate"] == 1.0 and acc["confirmation_rate"] == 1.0
    assert acc["vfr"] == 1.0  # the unverified high scorer is unknown: left out, not counted GENUINE
    bad = [r for r in out["items"] if r["status"] != "ok"]
    assert all(r["score"] is None for r in bad if r["status"] in ("attack_failed", "judge_unparsed"))
    assert all(r["exploiting"] is None and r["verdict"] is None for r in bad)
    assert {r["status"] for r in bad} == {"attack_failed", "judge_unparsed", "verifier_unparsed"}


def test_ci_resamples_prompts(gateway):
    # mixed outcome per prompt so the interval is not degenerate; two pairs share prompt 0
    def judge(messages, params):
        text = _first_user(messages)
        q = int(re.search(r"Question (\d+)", text).group(1))
        return f"REASONING: x\nSCORE: {9 if q % 2 == 0 else 3}"

    pairs = pairs_(5, shared_prompt=True)
    out = audit_adversarial(RUBRIC, pairs, ctx_(gateway, judge, tag="c"), n_attacks=30)
    m = out["metrics"]
    assert m["vfr"]["n"] == 5 == out["settings"]["n_prompts"]  # 6 pairs, 5 distinct prompts
    assert m["fool_rate"]["n"] == 5 and m["baseline_high_rate"]["n"] == 5
    assert m["vfr"]["low"] <= m["vfr"]["value"] <= m["vfr"]["high"]
    assert m["vfr"]["low"] < m["vfr"]["high"]
    assert m["vfr"]["k"] == 2 and m["vfr"]["n_criteria"] == 2
    assert all(len(r["vfr_ci"]) == 2 for r in out["per_criterion"])


def test_rerun_is_served_from_the_store_and_roles_are_required(gateway):
    ctx = ctx_(gateway, format_judge, tag="again")
    first = audit_adversarial(RUBRIC, pairs_(3), ctx, n_attacks=7)
    calls = dict(scripted_provider().calls)
    second = audit_adversarial(RUBRIC, pairs_(3), ctx, n_attacks=7)
    assert dict(scripted_provider().calls) == calls
    assert first["metrics"]["vfr"] == second["metrics"]["vfr"]
    with pytest.raises(ConfigError):
        audit_adversarial(RUBRIC, pairs_(3), AuditContext(gateway=gateway, judges=ctx.judges), n_attacks=7)
