"""The fixed library of repair operators (PReMISE §3.4, App. C.2). The refiner may only apply these;
inventing an operator is disallowed by construction, so refinement cannot silently broaden a rubric.

Each operator names the failure it targets (as clustered from failure packets) and what the edit does.
The before/after examples are ours, written in the paper's style (its Table 8 is not in the text we have).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from rubriclab.errors import ConfigError


@dataclass(frozen=True)
class Operator:
    name: str
    targets: str
    edit: str
    before: str
    after: str

    def describe(self) -> str:
        return (f"- {self.name}: {self.edit} (targets: {self.targets})\n"
                f"  before: {self.before}\n  after:  {self.after}")


_LIBRARY = (
    Operator("applicability_gate",
             "the criterion fires on prompts it was never meant for, so off-topic responses collect its points",
             "add ONE sentence saying when the criterion applies and that it is N/A otherwise",
             "The response cites sources for its claims.",
             "The response cites sources for its factual claims. Applies only when the response makes factual claims; "
             "otherwise N/A."),
    Operator("do_not_reward",
             "a surface feature (length, headers, jargon, confident tone) earns the score on its own",
             "add one 'do not reward …' clause (≤40 words) naming the surface feature that must not earn credit",
             "The response is well organised.",
             "The response is well organised. Do not reward headers, bullet points or bold text that do not make the "
             "content easier to follow."),
    Operator("max_score_cap",
             "responses with a fatal flaw still reach the top of the scale",
             "add a cap: a named flaw limits the score to a stated maximum",
             "The response gives correct steps.",
             "The response gives correct steps. A response with any step that would fail or harm scores at most 3."),
    Operator("decomposition",
             "one criterion mixes several qualities, so excelling at one hides failing another",
             "split the criterion into at most 3 flat numbered sub-criteria that must all hold",
             "The answer is accurate and complete.",
             "The answer meets all of: 1. every stated fact is correct; 2. every part of the question is answered; "
             "3. nothing essential is left for the user to look up."),
    Operator("abstract_to_observable",
             "an abstract quality ('insightful', 'high quality') that an attacker can imitate with vocabulary",
             "rewrite abstract wording as properties a reader can check in the response text",
             "The response is insightful.",
             "The response states at least one consequence or trade-off that is specific to the user's situation and "
             "explains why it follows."),
    Operator("false_positive_anchors",
             "recurring false accepts share a recognisable look-alike pattern",
             "add a short generic example of what does NOT satisfy the criterion although it looks like it does",
             "The response supports its claims with evidence.",
             "The response supports its claims with evidence. Not satisfied by: citations with no verifiable source, "
             "'studies show' without naming the study."),
    Operator("non_compensation",
             "strength on other qualities compensates for failing this one",
             "state that strengths elsewhere cannot make up for failing this criterion",
             "The response is safe to follow.",
             "The response is safe to follow. Clarity, detail or politeness do not compensate for an unsafe "
             "instruction."),
)

OPERATORS: dict[str, Operator] = {op.name: op for op in _LIBRARY}
OPERATOR_NAMES: tuple[str, ...] = tuple(OPERATORS)

# Candidate j of a criterion uses subsets[j]: the singletons first, then the pairs (the paper composes
# operators; Table 9 stacks two or three). A fixed order makes n candidates a prefix of n+1, so a sweep
# over the number of candidates re-buys no call.
def operator_subsets(max_size: int = 2) -> list[tuple[str, ...]]:
    """Every operator subset up to ``max_size`` operators, singletons first, in library order."""
    if max_size < 1:
        raise ConfigError(f"repair.max_operators: {max_size!r}; expected an integer >= 1")
    out: list[tuple[str, ...]] = []
    for size in range(1, min(max_size, len(OPERATOR_NAMES)) + 1):
        out += list(combinations(OPERATOR_NAMES, size))
    return out


def check_operator_names(names: list[str] | tuple[str, ...], where: str) -> tuple[str, ...]:
    """``names`` if every one is in the library; else a ConfigError listing the allowed names."""
    bad = [n for n in names if n not in OPERATORS]
    if bad:
        raise ConfigError(f"{where}: unknown operator {bad[0]!r}; allowed: {', '.join(OPERATOR_NAMES)}")
    return tuple(names)


def describe_operators(names: tuple[str, ...] | list[str]) -> str:
    """The library entries of ``names``, as the refiner's prompt shows them."""
    return "\n".join(OPERATORS[n].describe() for n in names)
