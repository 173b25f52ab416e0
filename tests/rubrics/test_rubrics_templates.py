from __future__ import annotations

import pytest

from rubriclab.errors import InputError, TemplateError
from rubriclab.rubrics import JudgeTemplate, extract_template_criteria, parse_template, rubric_set_from_template

BASE = "Judge {instruction}\nA: {answer_a}\nB: {answer_b}\nAnswer [[A]] or [[B]]."
EXPECTED = "placeholders {answer_a}, {answer_b} and one of {instruction}/{question}/{prompt}"


@pytest.mark.parametrize("field", ["instruction", "question", "prompt"])
def test_each_prompt_placeholder_renders(field):
    tpl = parse_template(BASE.replace("{instruction}", "{" + field + "}"), "t")
    assert tpl.prompt_field == field
    out = tpl.render("What is {x}?", "first", "second")
    assert out == "Judge What is {x}?\nA: first\nB: second\nAnswer [[A]] or [[B]]."


def test_missing_answer_b_error_is_one_line_with_file_field_expectation():
    with pytest.raises(TemplateError) as err:
        parse_template(BASE.replace("{answer_b}", "..."), "t", file="seed.json")
    e = err.value
    assert isinstance(e, InputError)
    assert (e.file, e.field, e.expected) == ("seed.json", "template", EXPECTED)
    assert str(e) == f"seed.json: field 'template': template lacks placeholder {{answer_b}}; expected {EXPECTED}"


def test_missing_answer_a():
    with pytest.raises(TemplateError, match=r"lacks placeholder \{answer_a\}"):
        parse_template(BASE.replace("{answer_a}", "..."), "t")


def test_unknown_placeholder_lists_allowed_ones():
    with pytest.raises(TemplateError) as err:
        parse_template(BASE + " {reference}", "t", file="f.json")
    msg = str(err.value)
    assert "unknown placeholder {reference}" in msg
    for allowed in ("{answer_a}", "{answer_b}", "{instruction}", "{question}", "{prompt}"):
        assert allowed in msg


def test_positional_and_format_spec_placeholders_rejected():
    with pytest.raises(TemplateError, match=r"unknown placeholder \{\}"):
        parse_template(BASE + " {}", "t")
    with pytest.raises(TemplateError, match="conversion or format spec"):
        parse_template(BASE.replace("{answer_a}", "{answer_a!r}"), "t")


def test_exactly_one_prompt_placeholder():
    with pytest.raises(TemplateError, match=r"exactly one prompt placeholder, found \{instruction\}, \{question\}"):
        parse_template(BASE + " {question}", "t")
    with pytest.raises(TemplateError, match="found none"):
        parse_template(BASE.replace("{instruction}", "the question"), "t")


def test_verdict_format_required():
    with pytest.raises(TemplateError, match=r"verdict format \[\[B\]\]"):
        parse_template(BASE.replace("[[B]]", "B"), "t")
    with pytest.raises(TemplateError, match=r"\[\[A\]\] and \[\[B\]\]"):
        parse_template(BASE.replace("[[A]] or [[B]]", "A or B"), "t")


def test_escaped_braces_are_literal_and_unbalanced_ones_are_errors():
    tpl = parse_template(BASE + ' Output {{"winner": "A"}}.', "t")
    assert tpl.render("p", "a", "b").endswith('Output {"winner": "A"}.')
    with pytest.raises(TemplateError, match=r'unknown placeholder \{"winner"\}.*literal braces as \{\{ and \}\}'):
        parse_template(BASE + ' Output {"winner": "A"}.', "t", file="x.json")
    with pytest.raises(TemplateError, match="not a valid format string"):
        parse_template(BASE + " }", "t")


def test_direct_construction_validates_too():
    with pytest.raises(TemplateError, match="answer_b"):
        JudgeTemplate("t", "{prompt} {answer_a} [[A]] [[B]]")
    with pytest.raises(TemplateError, match="name"):
        parse_template(BASE, "")


def test_numbered_criteria_extracted_with_continuations():
    text = BASE + (
        "\nConsider:\n1. Accuracy: claims are correct\n   and sourced.\n2) **Tone** \u2014 polite\n"
        "3. This line is a long sentence without any title separator at all\n\n4. Accuracy: again\n"
    )
    rs = rubric_set_from_template(parse_template(text, "tpl"))
    assert rs.criterion_ids == ("accuracy", "tone", "accuracy_2")
    assert rs.get("accuracy").description == "claims are correct and sourced."
    assert rs.get("tone").title == "Tone" and rs.get("tone").description == "polite"
    assert rs.source == "template" and rs.template.name == "tpl"
    assert [c.provenance["line"] for c in rs] == [6, 8, 11]


def test_template_without_criteria_gives_empty_set():
    tpl = parse_template(BASE, "plain")
    assert extract_template_criteria(tpl) == ()
    assert rubric_set_from_template(tpl).K == 0
