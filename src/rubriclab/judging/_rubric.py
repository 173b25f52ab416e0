"""What a pairwise judge is conditioned on: a whole judge template, or a criteria list.

A judge template (RIPD-style, ``{answer_a}``/``{answer_b}`` and one prompt placeholder, ``[[A]]``/``[[B]]``
verdict) is rendered as it is. A criteria list is rendered into the packaged ``judge_direct`` prompt, the
audit's direct template. Either way the reply is parsed by the same A/B verdict parser, so the audit,
drift and align judge through one code path.

Untrusted text cannot escape its slot: the prompt and both answers filled into a judge template are escaped
against that template's delimiters by the same rule ``PromptTemplate.render`` applies (``rubriclab.llm``'s
``escape_for``: a template tag gets ``&lt;``/``&gt;``, a marker line such as ``[The End of Assistant A's
Answer]`` gets `` (quoted)`` before its closing bracket). A judge template that pastes the answers or the
prompt outside any delimited slot gets an ``UndelimitedPlaceholderWarning`` (once), never an error.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from rubriclab.errors import InputError, TemplateError
from rubriclab.llm import PromptTemplate, escape_for, load_prompt, warn_undelimited
from rubriclab.rubrics import JudgeTemplate, RubricSet, is_ripd_file, load_ripd, load_rubric_file


@dataclass(frozen=True)
class PairwiseRubric:
    """A judge template or a criteria set, ready to render one (prompt, A, B) comparison."""

    name: str
    template: JudgeTemplate | None = None
    rubric_set: RubricSet | None = None

    def __post_init__(self) -> None:
        if (self.template is None) == (self.rubric_set is None):
            raise InputError("needs exactly one of a judge template or a criteria set", field="rubric",
                             expected="PairwiseRubric(template=…) or PairwiseRubric(rubric_set=…)")
        if self.template is not None:
            warn_undelimited(self.template, f"judge template {self.template.name!r}")

    @classmethod
    def of(cls, rubric: JudgeTemplate | RubricSet | PairwiseRubric, name: str | None = None) -> PairwiseRubric:
        """Wrap a template or a rubric set (a set carrying a template is judged with its template)."""
        if isinstance(rubric, PairwiseRubric):
            return rubric
        if isinstance(rubric, JudgeTemplate):
            return cls(name=name or rubric.name, template=rubric)
        if isinstance(rubric, RubricSet):
            if rubric.template is not None:
                return cls(name=name or rubric.name, template=rubric.template)
            if not rubric.criteria:
                raise InputError(f"rubric set {rubric.name!r} has no criteria and no template", field="criteria",
                                 expected="at least one criterion, or a judge template")
            return cls(name=name or rubric.name, rubric_set=rubric)
        raise InputError(f"is a {type(rubric).__name__}", field="rubric",
                         expected="a JudgeTemplate, a RubricSet or a PairwiseRubric")

    @property
    def kind(self) -> str:
        return "template" if self.template is not None else "criteria"

    @property
    def text(self) -> str:
        """The text that conditions the judge: the template, or the rendered criteria list."""
        return self.template.text if self.template is not None else self.rubric_set.render_list()

    @property
    def digest(self) -> str:
        """A short content hash of ``text`` (two rubrics with the same text judge identically)."""
        return hashlib.sha256(f"{self.kind}\x1f{self.text}".encode()).hexdigest()[:12]

    def messages(self, prompt: str, answer_a: str, answer_b: str, templates_dir: str | None = None) -> list[dict]:
        """Chat messages for one comparison."""
        if self.template is not None:
            text = self.template.text
            return [{"role": "user", "content": self.template.render(
                escape_for(text, prompt), escape_for(text, answer_a), escape_for(text, answer_b))}]
        direct = load_judge_prompt("judge_direct", templates_dir)
        return direct.render(rubric=self.text, prompt=prompt, response_a=answer_a, response_b=answer_b)


def load_judge_prompt(name: str, templates_dir: str | Path | None = None) -> PromptTemplate:
    """A pairwise judge prompt (packaged, or a user's override in ``templates_dir``) that asks for a verdict
    the A/B parser reads: ``<verdict>A</verdict>`` or ``[[A]]``/``[[B]]``. A prompt asking for none would
    turn every reply into a parse failure, so it is refused before the first call."""
    prompt = load_prompt(name, templates_dir)
    text = "\n".join(t for t in (prompt.system, prompt.user) if t)
    if "<verdict>" not in text.lower() and not ("[[A]]" in text and "[[B]]" in text):
        raise TemplateError("judge prompt asks for no verdict format the A/B parser reads", file=prompt.source,
                            expected="an instruction to answer <verdict>A</verdict> or <verdict>B</verdict> "
                                     "(or [[A]] / [[B]])")
    return prompt


def load_pairwise_rubric(path: str | Path, prompt_id: str | None = None) -> PairwiseRubric:
    """Any rubric file as a PairwiseRubric: a RIPD JSON-lines file (line ``prompt_id``, default the last),
    a judge template ``{"name", "template"}``, a saved rubric set, a criteria list or a markdown list."""
    path = Path(path)
    if is_ripd_file(path):
        tpl = load_ripd(path, prompt_id)
        return PairwiseRubric(name=f"{path.stem}:{tpl.name}", template=tpl)
    if prompt_id is not None:
        raise InputError("prompt_id given but the file is not a RIPD JSON-lines file", file=str(path),
                         field="prompt_id", expected='a .jsonl of {"prompt_id", "prompt"} lines')
    try:
        return PairwiseRubric.of(load_rubric_file(path))
    except InputError as exc:  # a set with no criteria: the error names the file it came from
        if exc.file is not None:
            raise
        raise type(exc)(exc.problem, file=str(path), line=exc.line, field=exc.field, expected=exc.expected) from None
