from __future__ import annotations

import pytest

from rubriclab.errors import ConfigError
from rubriclab.rubrics import RULES, BudgetLimits, Criterion, RubricSet, budget_report, check_budget, within_budget
from rubriclab.settings import Params

COMPLIANT = """Judge whether the response states only facts that a careful reader could verify.

1. Claims agree with widely accepted sources.
2. Numbers and dates are exact.
3. Uncertainty is stated where evidence is weak.

Applies only when the response makes factual claims.
Do not reward confident tone on its own.
Do not give credit for citations that do not support the claim."""


def rules(text, limits=None):
    return [v.rule for v in check_budget(text, limits)]


def test_compliant_text_has_no_violations():
    assert check_budget(COMPLIANT) == []
    assert within_budget(COMPLIANT)
    assert within_budget(Criterion("factuality", COMPLIANT))


def test_total_words():
    text = "Short opening.\n\n" + "\n\n".join(["word " * 50] * 3)
    vs = check_budget(text)
    assert [v.rule for v in vs] == ["total_words"]
    assert (vs[0].value, vs[0].limit) == (152, 150)
    assert "152 words > 150" in vs[0].message


def test_total_words_boundary():
    exactly = "\n\n".join(["Short opening."] + ["w " * 37] * 4)  # 2 + 148 = 150
    assert "total_words" not in rules(exactly)
    assert "total_words" in rules(exactly + " extra")


def test_first_paragraph_words():
    vs = check_budget("word " * 61 + "\n\nSecond paragraph.")
    assert [v.rule for v in vs] == ["first_paragraph_words"]
    assert (vs[0].value, vs[0].limit) == (61, 60)
    assert rules("word " * 60 + "\n\nSecond paragraph.") == []
    # The first paragraph ends at the first list item even without a blank line.
    assert rules("Intro.\n1. " + "w " * 59) == []


def test_nested_conditional():
    vs = check_budget("Reward the response if it cites a source when the claim is disputed.")
    assert [v.rule for v in vs] == ["nested_conditional"]
    assert vs[0].value == 1 and vs[0].limit == 0
    assert rules("If the claim is disputed, reward responses that cite a source.") == []
    assert rules("If A holds, and if B holds, then reward it.") == []
    # Only the first paragraph is checked by default; scope "all" extends it.
    later = "Reward sourced claims.\n\nReward it if it cites a source when the claim is disputed."
    assert rules(later) == []
    assert rules(later, BudgetLimits(nested_conditional_scope="all")) == ["nested_conditional"]
    assert rules(later.replace("\n\n", " "), BudgetLimits(allow_nested_conditionals=True)) == []


def test_anti_gaming_count():
    text = (
        "Reward accurate claims.\n\nDo not reward length. Does not reward formatting. "
        "Score the content regardless of tone."
    )
    vs = check_budget(text)
    assert [v.rule for v in vs] == ["anti_gaming_count"]
    assert (vs[0].value, vs[0].limit) == (3, 2)
    assert rules(text, BudgetLimits(max_anti_gaming_clauses=3)) == []


def test_anti_gaming_clause_words():
    long_clause = "Do not reward " + "padding " * 40 + "."
    vs = check_budget("Reward accurate claims.\n\n" + long_clause)
    assert [v.rule for v in vs] == ["anti_gaming_clause_words"]
    assert (vs[0].value, vs[0].limit) == (43, 40)
    assert rules("Reward accurate claims.\n\nDo not reward " + "padding " * 36 + ".") == []


def test_applicability_gates():
    text = "Reward exact dates.\n\nApplies only when dates appear. N/A if the answer is a refusal."
    vs = check_budget(text)
    assert [v.rule for v in vs] == ["applicability_gates"]
    assert (vs[0].value, vs[0].limit) == (2, 1)
    assert rules("Reward exact dates.\n\nOnly applicable to historical questions.") == []


def test_numbered_items():
    text = "Check:\n1. a\n2. b\n3. c\n4. d"
    vs = check_budget(text)
    assert [v.rule for v in vs] == ["numbered_items"]
    assert (vs[0].value, vs[0].limit) == (4, 3)
    assert rules("Check:\n1. a\n2. b\n3. c") == []


@pytest.mark.parametrize(
    "text",
    [
        "Check:\n1. a\n1.1 sub\n2. b",
        "Check:\n1. a\n   - sub bullet\n2. b",
        "Check:\n1. a\n    a) sub item\n2. b",
        "Check:\n1. a\n   1. deeper\n2. b",
    ],
)
def test_nested_items(text):
    assert rules(text) == ["nested_items"]


def test_bullets_after_prose_are_not_nested():
    assert rules("Check:\n1. a\n2. b\n\nNotes\n  - indented bullet under prose") == []


@pytest.mark.parametrize(
    "phrase",
    [
        "Reward answers that address this prompt directly.",
        "Penalise drift in this conversation.",
        "Reward answers to the user's question about tax law.",
        "Reward answers that restate {question}.",
        "Reward answers that quote <prompt>.",
    ],
)
def test_prompt_specific(phrase):
    vs = check_budget(phrase)
    assert [v.rule for v in vs] == ["prompt_specific"]
    assert vs[0].limit == 0 and vs[0].value >= 1


def test_prompt_agnostic_text_and_quotes_pass():
    assert rules('Reward answers that address the user\'s request; never reward "As an AI" disclaimers.') == []


def test_each_rule_id_is_reachable():
    broken = {
        "total_words": "x.\n\n" + "w " * 150,
        "first_paragraph_words": "w " * 61,
        "nested_conditional": "Reward it if it cites a source when disputed.",
        "anti_gaming_count": "A.\n\nDo not reward a. Do not reward b. Do not reward c.",
        "anti_gaming_clause_words": "A.\n\nDo not reward " + "x " * 40,
        "applicability_gates": "A.\n\nApplies only when x. Applies only if y.",
        "numbered_items": "A:\n1. a\n2. b\n3. c\n4. d",
        "nested_items": "A:\n1. a\n1.1 b",
        "prompt_specific": "Reward answers to this question.",
    }
    assert set(broken) == set(RULES)
    for rule, text in broken.items():
        assert rule in rules(text), rule


def test_limits_are_repair_budget_with_the_schemas_defaults_and_errors():
    lim = Params.of({"repair": {"budget": {"max_words": 10}}}).repair.budget
    assert lim.max_words == 10 and lim.max_numbered_items == 3 and BudgetLimits().max_words == 150  # the paper's
    assert rules("one two three four five six seven eight nine ten eleven", lim) == ["total_words"]
    assert rules("one two three four five six seven eight nine ten", lim) == []
    with pytest.raises(ConfigError, match=r"^params\.yaml: repair\.budget\.max_wordz: unknown key; expected one of "):
        Params.of({"repair": {"budget": {"max_wordz": 3}}})
    with pytest.raises(ConfigError, match=r"repair\.budget\.nested_conditional_scope: got 'everywhere'; expected "
                                          r"one of first_paragraph, all"):
        Params.of({"repair": {"budget": {"nested_conditional_scope": "everywhere"}}})


def test_violation_str_and_report():
    rs = RubricSet("r", (Criterion("ok", COMPLIANT), Criterion("bad", "Reward answers to this prompt.")))
    report = budget_report(rs)
    assert report["ok"] == []
    assert [v.rule for v in report["bad"]] == ["prompt_specific"]
    assert str(report["bad"][0]).startswith("prompt_specific: 1 reference(s) to a specific prompt")
    assert report["bad"][0].excerpt == "this prompt"
