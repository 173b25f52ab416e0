"""Bad inputs: every malformed file, params entry or model reply gives the one line a user must see, and
none of them costs finished work.

File errors follow ``rubriclab.errors.InputError``: ``<file>[:<line>][: field '<field>']: <problem>; expected
<expectation>``; params errors are ConfigErrors from ``load_params``; a model reply that cannot be used is a
recorded parse failure ``<model>: <problem>; expected <expectation>``, never a verdict or a score.
The malformed files live in tests/project/bad_inputs/ (byte-exact: see its .gitattributes); the 50 MB line is made
at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rubriclab.config import load_params
from rubriclab.data import Pair, build_splits, load_source, read_pairs
from rubriclab.errors import ConfigError, InputError, TemplateError
from rubriclab.judging import PairwiseRubric, judge_pairs, load_pairwise_rubric
from rubriclab.llm import CallRequest, Gateway, RoleSpec, answer_format, load_prompt
from rubriclab.rubrics import Criterion, JudgeTemplate, RubricSet, load_rubric_file, load_template, read_ripd_lines
from rubriclab.testing import scripted_model, scripted_provider

BAD = Path(__file__).parent / "bad_inputs"
PROJECT_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
TPL = ("Judge the two answers to the question.\n<question>\n{question}\n</question>\n<answer_a>\n{answer_a}\n"
       "</answer_a>\n<answer_b>\n{answer_b}\n</answer_b>\nAnswer [[A]] if A is better, [[B]] if B is better.")


@dataclass(frozen=True)
class Case:
    run: Callable[[Path, Gateway], str]  # (tmp_path, gateway) -> the message the user sees
    expected: str  # the exact line; {bad} stands for tests/project/bad_inputs, {tmp} for the test's tmp_path


def _raises(exc_type: type[Exception], fn: Callable[[], object]) -> str:
    with pytest.raises(exc_type) as info:
        fn()
    return str(info.value)


# -- data -----------------------------------------------------------------------------------------------------


def _local(path: Path, tmp: Path):
    return load_source({"loader": "local", "path": str(path)}, tmp, name="mine")


def _dropped(path: Path, tmp: Path) -> str:
    """A source row the loader drops: what the data stage logs (and writes to its report and metrics)."""
    pairs, drops = _local(path, tmp)
    assert [p.id for p in pairs] == ["p1"]  # the good row is kept
    return f"source mine: dropped {dict(drops)}"


def _fifty_mb_line(tmp: Path, gw: Gateway) -> str:
    path = tmp / "big.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"id": "p1", "domain": "d", "prompt": "q", "chosen": "a", "rejected": "b"}\n')
        fh.write('{"id": "p2", "domain": "d", "prompt": "q2", "chosen": "' + "x" * (50 * 2**20) + '", "rejected": "b"}\n')
    return _raises(InputError, lambda: _local(path, tmp))


# -- params ---------------------------------------------------------------------------------------------------


def _params(tmp: Path, fragment: str | None = None, overrides: list[str] | None = None) -> str:
    params = yaml.safe_load(PROJECT_PARAMS.read_text(encoding="utf-8"))
    if fragment:
        _merge(params, yaml.safe_load((BAD / fragment).read_text(encoding="utf-8")))
    path = tmp / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return _raises(ConfigError, lambda: load_params(path, overrides=overrides or []))


def _merge(into: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


# -- model outputs --------------------------------------------------------------------------------------------

PAIR = Pair(id="q1", domain="d", prompt="Which is the capital of France?", chosen="Paris.", rejected="Lyon.")


def _judged(name: str, reply: str | dict) -> Callable[[Path, Gateway], str]:
    """Judge one pair through judge_pairs (the audit/drift/align path) with a judge that always says ``reply``
    (re-asks included): the failure is the row's ``error``, the stage's failure tally counts it."""

    def run(tmp: Path, gw: Gateway) -> str:
        judge = RoleSpec(name="judge", model=scripted_model(name, lambda m, p: reply), parse_retries=1)
        rows = judge_pairs([PairwiseRubric.of(JudgeTemplate(name="t", text=TPL))], [PAIR], gateway=gw,
                           judge=judge, seed=0)
        row = rows.iloc[0]
        assert row["status"] == "failed" and row["verdict"] is None and row["n_failed_samples"] == 1
        assert scripted_provider().calls[name] == 2  # asked, re-asked once, then recorded
        assert next(r for r in gw.store.ledger() if r["role"] == "judge")["parse_failures"] == 1  # the tally
        return row["error"]

    return run


def _scored(name: str, reply: str) -> Callable[[Path, Gateway], str]:
    """A 1-10 score through the gateway as a pointwise judge asks for it (``answer_format`` score_1_10)."""

    def run(tmp: Path, gw: Gateway) -> str:
        role = RoleSpec(name="reward", model=scripted_model(name, lambda m, p: reply), parse_retries=1)
        req = CallRequest(messages=[{"role": "user", "content": "Rate this reply. SCORE: n"}],
                          **answer_format(role, "score_1_10"))
        res = gw.run([req])[0]
        assert not res.ok and res.value is None and res.text == reply  # recorded with its raw text, never a score
        return res.parse_error

    return run


# -- the cases ------------------------------------------------------------------------------------------------

CASES: dict[str, Case] = {
    # data files, through the readers the stages use (read_pairs) and the data stage's loaders (load_source)
    "data-truncated-json-line": Case(
        lambda tmp, gw: _raises(InputError, lambda: read_pairs(BAD / "pairs_truncated.jsonl")),
        "{bad}/pairs_truncated.jsonl:2: invalid JSON: Unterminated string starting at: line 1 column 77 (char 76);"
        " expected one JSON object per line"),
    "data-truncated-json-line-loader": Case(
        lambda tmp, gw: _raises(InputError, lambda: _local(BAD / "pairs_truncated.jsonl", tmp)),
        "{bad}/pairs_truncated.jsonl:2: invalid JSON: Unterminated string starting at: line 1 column 77 (char 76);"
        " expected one JSON object per line"),
    "data-missing-column": Case(
        lambda tmp, gw: _raises(InputError, lambda: read_pairs(BAD / "pairs_missing_column.jsonl")),
        "{bad}/pairs_missing_column.jsonl: field 'prompt': required column is missing; expected a column 'prompt'"
        " (available: id, domain, question, chosen, rejected)"),
    "data-missing-column-loader": Case(
        lambda tmp, gw: _raises(InputError, lambda: _local(BAD / "pairs_missing_column.jsonl", tmp)),
        "{bad}/pairs_missing_column.jsonl: field 'prompt': required column is missing; expected a column 'prompt'"
        " (available: id, domain, question, chosen, rejected)"),
    "data-empty-response": Case(
        lambda tmp, gw: _raises(InputError, lambda: read_pairs(BAD / "pairs_empty_response.jsonl")),
        "{bad}/pairs_empty_response.jsonl:2: field 'chosen': value is empty; expected non-empty text"),
    # a source's bad row is dropped and counted by reason (the data stage's policy), never kept
    "data-empty-response-loader": Case(
        lambda tmp, gw: _dropped(BAD / "pairs_empty_response.jsonl", tmp),
        "source mine: dropped {'empty_response': 1}"),
    "data-non-utf8": Case(
        lambda tmp, gw: _raises(InputError, lambda: read_pairs(BAD / "pairs_non_utf8.jsonl")),
        "{bad}/pairs_non_utf8.jsonl:2: not UTF-8 (invalid continuation byte 0xe9 at byte offset 143);"
        " expected UTF-8 text"),
    "data-non-utf8-loader": Case(
        lambda tmp, gw: _dropped(BAD / "pairs_non_utf8.jsonl", tmp),
        "source mine: dropped {'undecodable_text': 1}"),
    "data-50mb-line": Case(
        _fifty_mb_line,
        "{tmp}/big.jsonl:2: line is 52,428,874 characters long; expected one JSON object per line of at most"
        " 16,777,216 characters"),
    "data-empty-file": Case(
        lambda tmp, gw: _raises(InputError, lambda: read_pairs(BAD / "pairs_empty.jsonl")),
        "{bad}/pairs_empty.jsonl: file holds no pairs; expected rows with id, domain, prompt, chosen, rejected"),
    "data-empty-file-loader": Case(
        lambda tmp, gw: _raises(InputError, lambda: _local(BAD / "pairs_empty.jsonl", tmp)),
        "{bad}/pairs_empty.jsonl: file has no rows; expected at least one record"),
    # rubric files
    "rubric-duplicate-ids": Case(
        lambda tmp, gw: _raises(InputError, lambda: load_rubric_file(BAD / "rubric_duplicate_ids.json")),
        "{bad}/rubric_duplicate_ids.json: field 'criteria[2].id': duplicate criterion id 'accuracy';"
        " expected unique criterion ids"),
    "rubric-empty-criteria": Case(
        lambda tmp, gw: _raises(InputError, lambda: load_pairwise_rubric(BAD / "rubric_empty_criteria.json")),
        "{bad}/rubric_empty_criteria.json: field 'criteria': rubric set 'empty' has no criteria and no template;"
        " expected at least one criterion, or a judge template"),
    "rubric-empty-description": Case(
        lambda tmp, gw: _raises(InputError, lambda: load_rubric_file(BAD / "rubric_empty_description.yaml")),
        "{bad}/rubric_empty_description.yaml: field '[1].description': criterion 'clarity' has an empty"
        " description; expected non-empty text"),
    "rubric-malformed-yaml": Case(
        lambda tmp, gw: _raises(InputError, lambda: load_rubric_file(BAD / "rubric_malformed.yaml")),
        "{bad}/rubric_malformed.yaml:5: invalid YAML (expected ',' or ']', but got ':', while parsing a flow"
        " sequence opened on line 4); expected valid YAML"),
    "rubric-malformed-json": Case(
        lambda tmp, gw: _raises(InputError, lambda: load_rubric_file(BAD / "rubric_malformed.json")),
        "{bad}/rubric_malformed.json:4: invalid JSON (Expecting property name enclosed in double quotes);"
        " expected valid JSON"),
    "rubric-non-utf8": Case(
        lambda tmp, gw: _raises(InputError, lambda: load_rubric_file(BAD / "rubric_non_utf8.yaml")),
        "{bad}/rubric_non_utf8.yaml:4: not UTF-8 (invalid continuation byte 0xe9 at byte offset 60);"
        " expected a UTF-8 text file"),
    "judge-template-no-answer-b": Case(
        lambda tmp, gw: _raises(TemplateError, lambda: load_template(BAD / "judge_template_no_answer_b.json")),
        "{bad}/judge_template_no_answer_b.json: field 'template': template lacks placeholder {answer_b};"
        " expected placeholders {answer_a}, {answer_b} and one of {instruction}/{question}/{prompt}"),
    "judge-template-no-verdict": Case(
        lambda tmp, gw: _raises(TemplateError, lambda: load_template(BAD / "judge_template_no_verdict.json")),
        "{bad}/judge_template_no_verdict.json: field 'template': template does not mention the verdict format"
        " [[A]] and [[B]]; expected the [[A]]/[[B]] verdict format in the instructions"),
    "ripd-line-no-verdict": Case(
        lambda tmp, gw: _raises(TemplateError, lambda: read_ripd_lines(BAD / "ripd_no_verdict.jsonl")),
        "{bad}/ripd_no_verdict.jsonl:2: field 'template': template does not mention the verdict format"
        " [[A]] and [[B]]; expected the [[A]]/[[B]] verdict format in the instructions"),
    # a user's override of the criteria-list judge prompt (llm.templates_dir)
    "judge-prompt-no-response-b": Case(
        lambda tmp, gw: _raises(TemplateError, lambda: load_prompt("judge_direct", BAD / "templates_no_response_b")),
        "{bad}/templates_no_response_b/judge_direct.txt: template lacks placeholder(s) {response_b};"
        " expected placeholders {prompt}, {response_a}, {response_b}, {rubric}"),
    "judge-prompt-no-verdict": Case(
        lambda tmp, gw: _raises(TemplateError, lambda: PairwiseRubric.of(
            RubricSet(name="crit", criteria=(Criterion(id="helpful", description="Answers the question."),))
        ).messages("q", "a", "b", templates_dir=str(BAD / "templates_no_verdict"))),
        "{bad}/templates_no_verdict/judge_direct.txt: judge prompt asks for no verdict format the A/B parser reads;"
        " expected an instruction to answer <verdict>A</verdict> or <verdict>B</verdict> (or [[A]] / [[B]])"),
    # params (the validator in rubriclab/settings.py, raised by load_params)
    "params-unknown-role": Case(
        lambda tmp, gw: _params(tmp, "params_unknown_role.yaml"),
        "{tmp}/params.yaml: llm.roles.jduge: unknown role; expected one of judge, extractor, consolidator,"
        " paraphraser, attacker, verifier, refiner, generator, embedder, evaluator, policy, reward,"
        " pairwise_judge"),
    "params-wrong-type": Case(
        lambda tmp, gw: _params(tmp, overrides=["audit.runs=abc"]),
        "{tmp}/params.yaml: audit.runs: got 'abc'; expected an integer >= 1 (from --set audit.runs=abc)"),
    "params-negative-size": Case(
        lambda tmp, gw: _params(tmp, "params_negative_size.yaml"),
        "{tmp}/params.yaml: audit.pool_size: got -3; expected an integer >= 1"),
    # model replies through the gateway: a recorded parse failure naming the model and what was expected
    "model-decimal-score": Case(
        _scored("bad-decimal", "The reply is good. SCORE: 7.5"),
        "scripted/bad-decimal: score 7.5 is not an integer in reply: 'The reply is good. SCORE: 7.5';"
        " expected one integer 'SCORE: n' with n from 1 to 10"),
    "model-score-out-of-range": Case(
        _scored("bad-range", "SCORE: 11"),
        "scripted/bad-range: score 11 outside [1, 10] in reply: 'SCORE: 11';"
        " expected one integer 'SCORE: n' with n from 1 to 10"),
    "model-cut-at-token-limit": Case(
        _judged("bad-cut", {"text": "[[A]] because the first answer", "finish_reason": "length"}),
        "scripted/bad-cut: reply cut off at the token limit (max_tokens=512, finish_reason=length);"
        " give a shorter complete reply"),
    "model-both-verdicts": Case(
        _judged("bad-both", "[[A]] is more direct, but [[B]] is more careful."),
        "scripted/bad-both: ambiguous verdict ['A', 'B'] in reply: '[[A]] is more direct, but [[B]] is more"
        " careful.'; expected exactly one verdict, [[A]] or [[B]] (or <verdict>A</verdict> / <verdict>B</verdict>)"),
    "model-restated-format": Case(
        _judged("bad-restated", "<verdict>A or B</verdict>"),
        "scripted/bad-restated: the reply only restates the answer format; it states no verdict:"
        " '<verdict>A or B</verdict>'; expected exactly one verdict, [[A]] or [[B]]"
        " (or <verdict>A</verdict> / <verdict>B</verdict>)"),
}

@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_gives_the_one_line_a_user_must_see(name, tmp_path, gateway):
    case = CASES[name]
    message = case.run(tmp_path, gateway)
    assert isinstance(message, str) and "\n" not in message
    assert message == case.expected.replace("{bad}", str(BAD)).replace("{tmp}", str(tmp_path))


# -- no finished work is lost ---------------------------------------------------------------------------------


def _first_user(messages: list[dict]) -> str:
    return next(str(m["content"]) for m in messages if m["role"] == "user")


def test_bad_replies_keep_every_good_result_and_its_stored_call(gateway):
    """A batch mixing good and bad judge replies: good verdicts are kept, bad ones are failed rows, and a rerun
    on the same store makes no provider call (good replies and the recorded failures are both stored)."""
    bad = {"both": "[[A]] ... [[B]]", "restated": "<verdict>A or B</verdict>",
           "cut": {"text": "[[A]] because", "finish_reason": "length"}}
    pairs = [Pair(id=f"p{i}", domain="d", prompt=f"question {i} ({kind})", chosen=f"good {i}", rejected=f"bad {i}")
             for i, kind in enumerate(["ok", "both", "ok", "restated", "ok", "cut", "ok"])]

    def script(messages, params):
        text = _first_user(messages)
        return next((reply for kind, reply in bad.items() if f"({kind})" in text), "[[A]]")

    judge = RoleSpec(name="judge", model=scripted_model("mixed", script), parse_retries=1)
    rubric = [PairwiseRubric.of(JudgeTemplate(name="t", text=TPL))]
    first = judge_pairs(rubric, pairs, gateway=gateway, judge=judge, seed=0)
    by = first.set_index("pair_id")
    good = [p.id for p in pairs if "(ok)" in p.prompt]
    assert (by.loc[good, "verdict"] == "A").all() and by.loc[good, "error"].isna().all()
    failed = [p.id for p in pairs if "(ok)" not in p.prompt]
    assert (by.loc[failed, "status"] == "failed").all() and by.loc[failed, "verdict"].isna().all()
    calls = scripted_provider().calls["mixed"]
    assert calls == len(good) + 2 * len(failed)  # a bad reply is re-asked once, then recorded

    again = judge_pairs(rubric, pairs, gateway=Gateway(gateway.store, stage="rerun", progress=False), judge=judge,
                        seed=0)
    assert scripted_provider().calls["mixed"] == calls  # 0 provider calls on the rerun
    assert again.equals(first)


def test_bad_scores_keep_every_good_score_and_its_stored_call(gateway):
    replies = {"a": "SCORE: 8", "b": "SCORE: 7.5", "c": "SCORE: 3", "d": "SCORE: 11", "e": "SCORE: 10"}
    role = RoleSpec(name="reward", model=scripted_model("mixed-scores", lambda m, p: replies[_first_user(m)[-1]]),
                    parse_retries=1)
    reqs = [CallRequest(messages=[{"role": "user", "content": f"Rate reply {k}"}], tag=k,
                        **answer_format(role, "score_1_10")) for k in replies]
    first = gateway.run(reqs)
    assert {r.tag: r.value for r in first} == {"a": 8, "b": None, "c": 3, "d": None, "e": 10}
    calls = scripted_provider().calls["mixed-scores"]
    again = Gateway(gateway.store, stage="rerun", progress=False).run(reqs)
    assert scripted_provider().calls["mixed-scores"] == calls
    assert [r.value for r in again] == [r.value for r in first] and all(r.cached for r in again)


def test_a_bad_source_fails_the_data_stage_before_any_output_is_touched(tmp_path):
    """build_splits (the data stage) loads every source before it writes a split: a source that went bad since
    the last run stops the stage with the file and line, and the splits written last time stay as they were."""
    good = "".join(
        f'{{"id": "{s}{i}", "domain": "d", "prompt": "{s} question {i}", "chosen": "yes {i}", "rejected": "no {i}"}}\n'
        for s in ("a", "b") for i in range(12))
    lines = good.splitlines(keepends=True)
    (tmp_path / "a.jsonl").write_text("".join(lines[:12]), encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("".join(lines[12:]), encoding="utf-8")
    data = {"seed": 1,
            "sources": {"a": {"loader": "local", "path": "a.jsonl"}, "b": {"loader": "local", "path": "b.jsonl"}},
            "premise": {"sources": ["a", "b"], "extraction": 4, "audit": 4, "heldout": 4}}
    out = tmp_path / "outputs" / "data"
    build_splits(data, out, base_dir=tmp_path)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(out.rglob("*.parquet"))}
    assert len(before) == 8  # extraction, audit, heldout, dev for each source

    (tmp_path / "b.jsonl").write_bytes((BAD / "pairs_truncated.jsonl").read_bytes())
    with pytest.raises(InputError, match=re.escape(f"{tmp_path / 'b.jsonl'}:2: invalid JSON")):
        build_splits(data, out, base_dir=tmp_path)
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(out.rglob("*.parquet"))}
    assert after == before
    assert not [p for p in out.rglob("*") if p.is_file() and p not in before]  # no stray temp files either
