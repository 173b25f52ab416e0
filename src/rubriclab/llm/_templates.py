"""Prompt templates: text files in the package (or a user's folder), named placeholders.

A file may split into ``[system]`` and ``[user]`` sections (lines holding only that marker).
Each known prompt declares its placeholders; a file that lacks one (or adds an unknown one) is an
error when it is loaded, not when the first call is made.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rubriclab.errors import TemplateError

# prompt name -> placeholders its file must contain (later stages register theirs here)
PROMPTS: dict[str, frozenset[str]] = {
    "judge_direct": frozenset({"rubric", "prompt", "response_a", "response_b"}),
    "judge_no_rubric": frozenset({"prompt", "response_a", "response_b"}),
    "pointwise_yes_no": frozenset({"criterion", "prompt", "response"}),
    "pointwise_score": frozenset({"criterion_id", "criterion", "prompt", "response"}),
    "discover_extract": frozenset({"prompt", "response_a", "response_b", "winner", "min_criteria", "max_criteria"}),
    "discover_subgroup": frozenset({"rubrics_text"}),
    "discover_describe": frozenset({"rubrics_text"}),
    "task_criteria": frozenset({"task", "k"}),
    "judge_per_rubric": frozenset({"prompt", "response_a", "response_b", "traits", "trait_template"}),
    "audit_pairwise_score": frozenset({"criterion_id", "criterion", "prompt", "response_a", "response_b"}),
    "audit_paraphrase": frozenset({"criterion"}),
    "audit_structure": frozenset({"criterion_id", "criterion", "property_name", "property_description"}),
    "audit_applicability": frozenset({"criterion_id", "criterion", "prompt"}),
    "audit_attacker": frozenset({"criterion_id", "criterion", "prompt", "strategy", "strategy_description"}),
    # reference_section/calibration: the paper's "Reference (good) Response" block for attacks, a neutral
    # one (or none) for the baseline pool of genuine responses
    "audit_verifier": frozenset({"criterion_id", "criterion", "prompt", "response", "reference_section",
                                 "calibration"}),
}


def register_prompt(name: str, placeholders: set[str] | frozenset[str]) -> None:
    """Declare a prompt and the placeholders its template must hold."""
    PROMPTS[name] = frozenset(placeholders)


def placeholders_of(text: str) -> set[str]:
    """Named placeholders in a format string (``{{``/``}}`` are literal braces)."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str | None
    user: str
    source: str

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled; a missing value is an error."""
        missing = PROMPTS.get(self.name, placeholders_of(self.user)) - set(values)
        if missing:
            raise TemplateError(f"no value for placeholder(s) {sorted(missing)}", file=self.source,
                                expected=f"values for {sorted(PROMPTS.get(self.name, ()))}")
        messages = []
        if self.system:
            messages.append({"role": "system", "content": self.system.format(**values)})
        messages.append({"role": "user", "content": self.user.format(**values)})
        return messages


def parse_prompt(name: str, text: str, source: str) -> PromptTemplate:
    """Split sections and check placeholders against the prompt's declaration."""
    system, user, current = [], [], None
    lines = text.splitlines()
    if not any(line.strip() in ("[system]", "[user]") for line in lines):
        user, current = lines, "user"
    else:
        for line in lines:
            if line.strip() == "[system]":
                current = "system"
            elif line.strip() == "[user]":
                current = "user"
            elif current == "system":
                system.append(line)
            elif current == "user":
                user.append(line)
    sys_text = "\n".join(system).strip() or None
    user_text = "\n".join(user).strip()
    if not user_text:
        raise TemplateError("template has no [user] section", file=source, expected="a user message")
    try:
        found = placeholders_of(user_text) | (placeholders_of(sys_text) if sys_text else set())
    except ValueError as exc:
        raise TemplateError(f"malformed braces ({exc})", file=source, expected="{name} placeholders; {{ }} for literal braces") from None
    required = PROMPTS.get(name)
    if required is not None:
        missing, unknown = required - found, found - required
        if missing:
            raise TemplateError(f"template lacks placeholder(s) {', '.join('{' + m + '}' for m in sorted(missing))}",
                                file=source, expected=f"placeholders {', '.join('{' + r + '}' for r in sorted(required))}")
        if unknown:
            raise TemplateError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in sorted(unknown))}",
                                file=source, expected=f"only {', '.join('{' + r + '}' for r in sorted(required))}")
    return PromptTemplate(name=name, system=sys_text, user=user_text, source=source)


def load_prompt(name: str, directory: str | Path | None = None) -> PromptTemplate:
    """Load ``<name>.txt`` from ``directory`` (user overrides) or from the package's templates."""
    if directory is not None and (Path(directory) / f"{name}.txt").exists():
        path = Path(directory) / f"{name}.txt"
        return parse_prompt(name, path.read_text(encoding="utf-8"), str(path))
    res = resources.files("rubriclab.llm") / "templates" / f"{name}.txt"
    if not res.is_file():
        known = sorted(p.name[:-4] for p in (resources.files("rubriclab.llm") / "templates").iterdir()
                       if p.name.endswith(".txt"))
        raise TemplateError(f"no prompt template named {name!r}", expected=f"one of {known}")
    return parse_prompt(name, res.read_text(encoding="utf-8"), f"rubriclab/llm/templates/{name}.txt")
