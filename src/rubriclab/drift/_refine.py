"""The rewriting model's side of the drift search: case serialisation, the hard rubric constraints, and the
refiner requests (asymmetric refinement, random search, TextGrad-style rewriting).

Asymmetric refinement (seed 003 §4.1, lines 11–12 of Alg. 1): the refiner is shown benchmark cases the judge
got wrong (expected verdict = the reference) and target cases it got *right*, presented as errors (expected
verdict = the other letter). It believes it is fixing mistakes; nothing in the prompt says which cases are
which. Cases are shuffled (seeded) so their order does not give the split away either.

Hard constraints (App. C.1), checked deterministically on every candidate before it may cost a judge call:
the template parses, keeps exactly the seed's placeholders, and still states the ``[[A]]``/``[[B]]`` verdict.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from rubriclab.data import Pair, present
from rubriclab.errors import ParseFailure, TemplateError
from rubriclab.llm import CallRequest, RoleSpec, load_prompt, register_prompt
from rubriclab.rubrics import JudgeTemplate, check_template_text

register_prompt("drift_refine", {"rubric", "cases", "constraints"})
register_prompt("drift_guidelines", {"rubric"})
register_prompt("drift_random", {"guidelines", "rubric", "constraints"})
register_prompt("drift_rewrite", {"instruction", "rubric", "constraints"})
register_prompt("drift_textgrad_feedback", {"instruction", "rubric", "cases"})
register_prompt("drift_textgrad_update", {"instruction", "feedback"})

_RUBRIC_REPLY = re.compile(r"<rubric>\s*(.*?)\s*</rubric>", re.S | re.I)
_INSTRUCTION_REPLY = re.compile(r"<instruction>\s*(.*?)\s*</instruction>", re.S | re.I)
_PLACEHOLDER = re.compile(r"(?<!\{)\{([a-z_]+)\}(?!\})")

INITIAL_INSTRUCTION = ("Rewrite the judge rubric so that it is clearer and leads the judge to the correct verdict "
                       "more often. Keep it general: it must work for any query.")


def placeholders(text: str) -> set[str]:
    """The ``{name}`` placeholders of a template text."""
    return set(_PLACEHOLDER.findall(text))


def constraints_text(seed: JudgeTemplate) -> str:
    """The hard constraints as the rewriting model reads them."""
    names = ", ".join("{" + p + "}" for p in sorted(placeholders(seed.text)))
    return (f"- Keep the placeholders {names} exactly as written, each where the judge needs that text; add no "
            "other text in curly braces.\n"
            "- Keep the final verdict format: the judge must end with [[A]] if Assistant A is better or [[B]] if "
            "Assistant B is better.\n"
            "- Keep it a general rubric: do not mention any specific query, topic or case.")


def check_candidate(text: str | None, seed: JudgeTemplate) -> str | None:
    """None when ``text`` satisfies the hard constraints, else the rule it breaks (a short reason)."""
    if text is None or not text.strip():
        return "unparsed"
    try:
        check_template_text(text)
    except TemplateError as exc:
        return f"constraint: {exc.problem}"
    if placeholders(text) != placeholders(seed.text):
        return "constraint: placeholders differ from the seed's"
    return None


def parse_rubric_reply(text: str) -> str:
    """The rubric between ``<rubric>`` and ``</rubric>`` (the last block if several)."""
    found = _RUBRIC_REPLY.findall(text or "")
    if not found:
        raise ParseFailure("no <rubric>…</rubric> block in the reply")
    return found[-1].strip()


def parse_instruction_reply(text: str) -> str:
    found = _INSTRUCTION_REPLY.findall(text or "")
    if not found or not found[-1].strip():
        raise ParseFailure("no <instruction>…</instruction> block in the reply")
    return found[-1].strip()


def _cut(text: str, max_chars: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def serialize_cases(cases: Sequence[dict[str, Any]], max_chars: int = 600) -> str:
    """Case blocks (App. C.2): query, both responses, the judge's verdict and the expected one."""
    blocks = []
    for i, c in enumerate(cases, 1):
        blocks.append(
            f"### Case {i}\nQuery: {_cut(c['prompt'], max_chars)}\nResponse A: {_cut(c['a'], max_chars)}\n"
            f"Response B: {_cut(c['b'], max_chars)}\nJudge verdict: [[{c['verdict']}]]\n"
            f"Expected verdict: [[{c['expected']}]]"
        )
    return "\n\n".join(blocks) if blocks else "(no cases)"


def _other(letter: str) -> str:
    return "B" if letter == "A" else "A"


def error_cases(rows, pairs_by_id: dict[str, Pair], *, seed: int, data_seed: int, n_bench: int, n_target: int,
                bench_domain: str) -> list[dict[str, Any]]:
    """Asymmetric error cases from one rubric's judgments (a ``judge_pairs`` frame): up to ``n_bench`` benchmark
    disagreements (expected = the reference) and ``n_target`` target agreements (expected = the other letter),
    sampled with ``seed`` and shuffled together."""
    rng = random.Random(seed)
    bench = [r for r in rows.itertuples() if r.domain == bench_domain and r.status == "disagree"]
    target = [r for r in rows.itertuples() if r.domain != bench_domain and r.status == "agree"]
    picked = rng.sample(bench, min(n_bench, len(bench))) + rng.sample(target, min(n_target, len(target)))
    rng.shuffle(picked)
    cases = []
    for r in picked:
        view = present(pairs_by_id[r.pair_id], data_seed)
        expected = r.human if r.domain == bench_domain else _other(r.human)
        cases.append({"pair_id": r.pair_id, "domain": r.domain, "prompt": view["prompt"], "a": view["a"],
                      "b": view["b"], "verdict": r.verdict, "expected": expected})
    return cases


def minibatch_cases(rows, pairs_by_id: dict[str, Pair], *, data_seed: int, bench_domain: str) -> list[dict[str, Any]]:
    """TextGrad mini-batch cases (not restricted to errors): every judged row, target references flipped."""
    cases = []
    for r in rows.itertuples():
        if r.verdict not in ("A", "B"):
            continue
        view = present(pairs_by_id[r.pair_id], data_seed)
        expected = r.human if r.domain == bench_domain else _other(r.human)
        cases.append({"pair_id": r.pair_id, "domain": r.domain, "prompt": view["prompt"], "a": view["a"],
                      "b": view["b"], "verdict": r.verdict, "expected": expected})
    return cases


def _request(name: str, role: RoleSpec, sample_index: int, tag: Any, templates_dir: str | None,
             parser=parse_rubric_reply, **values: str) -> CallRequest:
    messages = load_prompt(name, templates_dir).render(**values)
    return CallRequest(role=role, messages=messages, sample_index=sample_index, parser=parser, tag=tag)


def refine_request(rubric: str, cases: Sequence[dict[str, Any]], seed: JudgeTemplate, refiner: RoleSpec, *,
                   sample_index: int, tag: Any = None, templates_dir: str | None = None,
                   max_chars: int = 600) -> CallRequest:
    """Few-shot ICL / asymmetric refinement of ``rubric`` from error cases."""
    return _request("drift_refine", refiner, sample_index, tag, templates_dir, rubric=rubric,
                    cases=serialize_cases(cases, max_chars), constraints=constraints_text(seed))


def guidelines_request(seed: JudgeTemplate, refiner: RoleSpec, *, templates_dir: str | None = None) -> CallRequest:
    """Distil rubric-writing guidelines from the seed (random search)."""
    return _request("drift_guidelines", refiner, 0, "guidelines", templates_dir, parser=_nonempty, rubric=seed.text)


def random_request(seed: JudgeTemplate, guidelines: str, refiner: RoleSpec, *, sample_index: int,
                   templates_dir: str | None = None) -> CallRequest:
    """One guideline-constrained rubric variant, without feedback (random search)."""
    return _request("drift_random", refiner, sample_index, ("random", sample_index), templates_dir,
                    guidelines=guidelines, rubric=seed.text, constraints=constraints_text(seed))


def rewrite_request(seed: JudgeTemplate, instruction: str, refiner: RoleSpec, *, sample_index: int, tag: Any = None,
                    templates_dir: str | None = None) -> CallRequest:
    """Rewrite the seed with the (optimised) rewriting instruction (TextGrad's forward pass)."""
    return _request("drift_rewrite", refiner, sample_index, tag, templates_dir, instruction=instruction,
                    rubric=seed.text, constraints=constraints_text(seed))


def feedback_request(instruction: str, rubric: str, cases: Sequence[dict[str, Any]], refiner: RoleSpec, *,
                     sample_index: int, templates_dir: str | None = None, max_chars: int = 600) -> CallRequest:
    """Textual gradient: feedback on the rewriting instruction from the mini-batch."""
    return _request("drift_textgrad_feedback", refiner, sample_index, ("feedback", sample_index), templates_dir,
                    parser=_nonempty, instruction=instruction, rubric=rubric,
                    cases=serialize_cases(cases, max_chars))


def update_request(instruction: str, feedback: str, refiner: RoleSpec, *, sample_index: int,
                   templates_dir: str | None = None) -> CallRequest:
    """Apply the feedback to the instruction (TextGrad's optimiser step)."""
    return _request("drift_textgrad_update", refiner, sample_index, ("update", sample_index), templates_dir,
                    parser=parse_instruction_reply, instruction=instruction, feedback=feedback)


def _nonempty(text: str) -> str:
    if not (text or "").strip():
        raise ParseFailure("empty reply")
    return text.strip()
