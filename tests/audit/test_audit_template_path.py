"""The audit's ``direct`` accuracy judges a rubric set that carries a judge template with its template (the
shared ``judging.pairwise_request`` path used by drift and align); a plain criteria set still goes through
the ``judge_direct`` prompt, and per_rubric / no_rubric are unchanged."""

from __future__ import annotations

from rubriclab.audit import AuditContext, audit_accuracy
from rubriclab.data import Pair
from rubriclab.llm import RoleSpec
from rubriclab.rubrics import Criterion, JudgeTemplate, RubricSet, rubric_set_from_template
from rubriclab.testing import scripted_model

WORDING = "TEMPLATE_WORDING_7731: you are a strict grader of helpfulness."
TEMPLATE = JudgeTemplate(name="ripd_seed", text=(
    f"{WORDING}\nFactors such as accuracy and helpfulness of the responses.\n"
    "[User Question]\n{question}\n[The Start of Assistant A's Answer]\n{answer_a}\n"
    "[The End of Assistant A's Answer]\n[The Start of Assistant B's Answer]\n{answer_b}\n"
    "[The End of Assistant B's Answer]\nOutput your final verdict: [[A]] if A is better, [[B]] if B is better."))
N = 12


def pairs() -> list[Pair]:
    return [Pair(id=f"t{i:02d}", domain="demo", prompt=f"Question {i}?", chosen=f"CHOSEN answer {i}",
                 rejected=f"REJECTED answer {i}") for i in range(N)]


def judge(messages, params):
    """Right ([[A]]/[[B]]) only when it reads the template's wording; under judge_direct it answers A."""
    text = next(m["content"] for m in messages if m["role"] == "user")
    if WORDING in text:
        assert "## Evaluation Dimensions" not in text  # the template as it is, not wrapped in judge_direct
        answer_a = text.split("[The Start of Assistant A's Answer]", 1)[1].split("[The End of Assistant A's", 1)[0]
        return "Compared. [[A]]" if "CHOSEN" in answer_a else "Compared. [[B]]"
    if "<traits_to_evaluate>" in text:
        block = ('{"candidate_reasoning": "r", "candidate_adherence": 5, "baseline_reasoning": "r", '
                 '"baseline_adherence": 5}')
        ids = [ln[2:].split(":", 1)[0].split(" ", 1)[0] for ln in text.splitlines() if ln.startswith("- ")]
        traits = ", ".join(f'"{i}": {block}' for i in ids)
        return f'{{"trait_scores": {{{traits}}}, "overall_score": {block}}}'
    return "<verdict>A</verdict>"


def test_template_carrying_set_is_judged_with_its_template(gateway):
    templated = rubric_set_from_template(TEMPLATE)
    assert templated.template is not None and templated.K >= 1
    plain = RubricSet(name="plain", criteria=(Criterion(id="accuracy", description="Rewards accuracy."),))
    role = RoleSpec(name="judge", model=scripted_model("audit-template-judge", judge), parse_retries=0)
    ctx = AuditContext(gateway=gateway, judges=[role], seed=3, n_boot=200, progress=False)
    ps = pairs()
    out = audit_accuracy({"ripd": templated, "plain": plain}, ps, ctx, samples=1, early_stop=False)
    m = out["metrics"]
    assert m["ripd"]["acc_direct"]["value"] == 1.0 and m["ripd"]["acc_direct"]["n"] == N
    # the plain set and the baseline went through judge_direct / judge_no_rubric: always A
    always_a = sum(r["human"] == "A" for r in out["items"] if r["source"] == "plain" and r["template"] == "direct")
    assert m["plain"]["acc_direct"]["value"] == always_a / N < 1.0
    assert m["no_rubric"]["acc_direct"]["value"] == always_a / N
    # per_rubric is unchanged: the template's criteria are scored trait by trait (ties here)
    assert m["ripd"]["ties_per_rubric"] == N and m["ripd"]["no_verdict_per_rubric"] == 0
