"""RIPD-style pairwise judge templates: placeholder and verdict-format validation, rendering."""

from __future__ import annotations

import string
from dataclasses import dataclass, field

from rubriclab.errors import TemplateError

ANSWER_FIELDS = ("answer_a", "answer_b")
PROMPT_FIELDS = ("instruction", "question", "prompt")
ALLOWED_FIELDS = ANSWER_FIELDS + PROMPT_FIELDS
VERDICT_MARKERS = ("[[A]]", "[[B]]")
_EXPECTED = "placeholders {answer_a}, {answer_b} and one of {instruction}/{question}/{prompt}"


def _placeholders(text: str, file: str | None) -> list[tuple[str, str, str]]:
    """(field_name, format_spec, conversion) for every replacement field in ``text``."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise TemplateError(
            f"template is not a valid format string ({exc})",
            file=file,
            field="template",
            expected="literal braces escaped as {{ and }}",
        ) from None
    return [(name, spec or "", conv or "") for _, name, spec, conv in parsed if name is not None]


def check_template_text(text: str, *, file: str | None = None) -> str:
    """Validate a judge template's text; return the name of its prompt placeholder."""
    if not isinstance(text, str) or not text.strip():
        raise TemplateError("template is empty", file=file, field="template", expected=_EXPECTED)
    fields = _placeholders(text, file)
    allowed = ", ".join("{" + f + "}" for f in ALLOWED_FIELDS)
    for name, spec, conv in fields:
        if name not in ALLOWED_FIELDS:
            raise TemplateError(
                f"template has unknown placeholder {{{name}}}",
                file=file,
                field="template",
                expected=f"only the placeholders {allowed} (write literal braces as {{{{ and }}}})",
            )
        if spec or conv:
            raise TemplateError(
                f"placeholder {{{name}}} carries a conversion or format spec",
                file=file,
                field="template",
                expected=f"bare placeholders such as {{{name}}}",
            )
    names = {name for name, _, _ in fields}
    for needed in ANSWER_FIELDS:
        if needed not in names:
            raise TemplateError(
                f"template lacks placeholder {{{needed}}}", file=file, field="template", expected=_EXPECTED
            )
    prompts = [p for p in PROMPT_FIELDS if p in names]
    if len(prompts) != 1:
        found = ", ".join("{" + p + "}" for p in prompts) or "none"
        raise TemplateError(
            f"template needs exactly one prompt placeholder, found {found}",
            file=file,
            field="template",
            expected=_EXPECTED,
        )
    missing = [m for m in VERDICT_MARKERS if m not in text]
    if missing:
        raise TemplateError(
            f"template does not mention the verdict format {' and '.join(missing)}",
            file=file,
            field="template",
            expected="the [[A]]/[[B]] verdict format in the instructions",
        )
    return prompts[0]


@dataclass(frozen=True)
class JudgeTemplate:
    """A pairwise judge prompt with ``{answer_a}``, ``{answer_b}`` and one prompt placeholder."""

    name: str
    text: str
    prompt_field: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise TemplateError("template name is empty", field="name", expected="a non-empty string")
        object.__setattr__(self, "prompt_field", check_template_text(self.text))

    def render(self, prompt: str, answer_a: str, answer_b: str) -> str:
        """Fill the placeholders; braces inside the values are kept verbatim."""
        return self.text.format(**{self.prompt_field: prompt, "answer_a": answer_a, "answer_b": answer_b})

    def to_dict(self) -> dict:
        """The shared template-file shape ``{"name", "template"}``."""
        return {"name": self.name, "template": self.text}


def parse_template(text: str, name: str, file: str | None = None) -> JudgeTemplate:
    """Validate ``text`` (errors name ``file``) and build a :class:`JudgeTemplate`."""
    check_template_text(text, file=file)
    if not isinstance(name, str) or not name.strip():
        raise TemplateError("template name is empty", file=file, field="name", expected="a non-empty string")
    return JudgeTemplate(name=name, text=text)


def template_from_dict(data: object, *, file: str | None = None, field_prefix: str = "") -> JudgeTemplate:
    """Build a template from ``{"name", "template"}`` (``text`` accepted for ``template``)."""
    where = field_prefix + "." if field_prefix else ""
    if not isinstance(data, dict):
        raise TemplateError(
            f"template entry is a {type(data).__name__}",
            file=file,
            field=field_prefix or None,
            expected='an object {"name": ..., "template": ...}',
        )
    text = data.get("template", data.get("text"))
    if not isinstance(text, str):
        raise TemplateError(
            "template text is missing or not a string",
            file=file,
            field=where + "template",
            expected=_EXPECTED,
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TemplateError("template name is missing", file=file, field=where + "name", expected="a non-empty string")
    try:
        return parse_template(text, name, file=file)
    except TemplateError as exc:
        raise TemplateError(
            exc.problem, file=file, field=where + (exc.field or "template"), expected=exc.expected
        ) from None
