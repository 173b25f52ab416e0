"""The inspect_ai format: real eval logs written by inspect itself (``inspect_ai.eval`` on its mock model, graders
on ``mockllm`` replying from a table, no network), read back and checked figure by figure against a hand count.

The logs are written once per module by this file run as a script in a subprocess (``python <this file> <dir>``):
inspect's traces and caches go to a temporary home there, and its event loop and registry stay out of pytest's
process. Every reply of every model is fixed below, so each figure is known in advance.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

# main log: sample -> (solver's answer, grader's reply, human grade or None = no label row); target "Paris"
MAIN = {
    "1": ("Paris", "Right.\nGRADE: C", "C"),
    "2": ("Paris", "Right.\nGRADE: C", "C"),
    "3": ("Lyon", "Close enough.\nGRADE: C", "I"),      # grader too lenient
    "4": ("Lyon", "Wrong.\nGRADE: I", "I"),
    "5": ("Nice", "Wrong.\nGRADE: I", "I"),
    "6": ("Paris", "Not convinced.\nGRADE: I", "C"),    # grader too strict
    "7": ("Paris", "Partly.\nGRADE: P", "C"),           # partial = tie: tie_credit
    "8": ("Lille", "I am not sure.", "I"),              # no grade: unscored (none)
    "9": ("Paris", "GRADE: X", "C"),                    # off-menu grade: unscored (none)
    "10": ("Paris", "Right.\nGRADE: C", None),          # no human label
}
RESCORE = {"1": "GRADE: C", "2": "GRADE: I", "3": "GRADE: I", "4": "GRADE: I", "5": "GRADE: C", "6": "GRADE: C",
           "7": "GRADE: C", "8": "GRADE: I", "9": "GRADE: C", "10": "GRADE: C", "11": "GRADE: C"}
ERRORED = "11"  # its solver raises: the sample errors and is left out


def _write_logs(out: Path) -> None:  # noqa: C901 - one script writing every log the tests read
    import re

    from inspect_ai import Task, eval, score
    from inspect_ai.dataset import Sample
    from inspect_ai.log import read_eval_log, write_eval_log
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, match, model_graded_fact, scorer
    from inspect_ai.solver import solver

    def reply(text: str, model: str = "mockllm/model") -> ModelOutput:
        o = ModelOutput.from_content(model, text)
        o.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # else mockllm counts with tiktoken
        return o

    def grader(replies: dict[str, str]):
        def answer(messages, tools, tool_choice, config):
            q = re.search(r"\[Question\]: (q\d+)", messages[-1].text).group(1)[1:]
            return reply(replies[q])
        return answer

    @solver
    def fixed(answers: dict[str, str]):
        async def solve(state, generate):
            if state.input_text == f"q{ERRORED}":
                raise RuntimeError("the solver failed")
            text = answers[state.input_text]
            if "{epoch}" in text or "{model}" in text:
                text = text.format(epoch=state.epoch, model=str(state.model).split("/")[-1])
            state.output = reply(text)
            return state
        return solve

    def run(task, log_dir, **kw):
        return eval(task, model=kw.pop("model", "mockllm/model"), log_dir=str(log_dir), display="none",
                    fail_on_error=False, **kw)

    # 1. main: model_graded_fact (partial credit offered) on mockllm/grader, and match; one errored sample
    samples = [Sample(id=int(k), input=f"q{k}", target="Paris") for k in [*MAIN, ERRORED]]
    task = Task(name="capitals", dataset=samples, solver=fixed({f"q{k}": v[0] for k, v in MAIN.items()}),
                scorer=[model_graded_fact(partial_credit=True,
                                          model=get_model("mockllm/grader",
                                                          custom_outputs=grader({k: v[1] for k, v in MAIN.items()}))),
                        match()])
    main = run(task, out / "main")[0]
    # 2. the same answers re-scored by a second grader (inspect score), beside the original log
    (out / "rescored").mkdir()
    main_file = Path(main.location)
    (out / "rescored" / main_file.name).write_bytes(main_file.read_bytes())
    second = get_model("mockllm/second", custom_outputs=grader(RESCORE))
    rescored = score(read_eval_log(main.location), [model_graded_fact(model=second)], action="overwrite", display="none")
    write_eval_log(rescored, str(out / "rescored" / "rescored.eval"))

    # 3. epochs (a .json log): the answer differs per epoch, the grader grades by the answer
    @scorer(metrics=[])
    def by_answer():
        async def score_(state, target):
            return Score(value="C" if state.output.completion.endswith("e1") else "I",
                         explanation=f"graded {state.output.completion}")
        return score_

    task = Task(name="epochs", dataset=[Sample(id=k, input=f"q{k}", target="x") for k in (1, 2)],
                solver=fixed({"q1": "q1-e{epoch}", "q2": "q2-e{epoch}"}), scorer=by_answer())
    run(task, out / "epochs", epochs=2, log_format="json")

    # 4. pairwise: a custom grader's A/B/tie, both orders of each pair, targets as presented
    plan = {"p1o": ("p1", "original", "A", "A"), "p1s": ("p1", "swapped", "B", "B"),
            "p2o": ("p2", "original", "A", "B"), "p2s": ("p2", "swapped", "A", "A"),
            "p3o": ("p3", "original", "tie", "A"), "p3s": ("p3", "swapped", "maybe", "B")}

    @scorer(metrics=[])
    def pair_grader():
        async def score_(state, target):
            return Score(value=plan[state.sample_id][2], explanation=f"verdict for {state.sample_id}")
        return score_

    pairs = [Sample(id=sid, input=f"which is better for {pid}?", target=t,
                    metadata={"pair_id": pid, "order": order,
                              "output_1": f"{pid} one", "output_2": f"{pid} the second output"})
             for sid, (pid, order, _, t) in plan.items()]
    run(Task(name="pairs", dataset=pairs, solver=fixed({s.input: "n/a" for s in pairs}), scorer=pair_grader()),
        out / "pairwise")

    # 5. a dict-valued rubric scorer (a word and a 1-10 number), an older log's "Grade not found", N (no answer);
    #    the targets are the human grades (a meta-evaluation set)
    rubric_plan = {"r1": ("C", 9, "C", "C"), "r2": ("I", 7, "I", "I"), "r3": ("C", 3, "N", "I"),
                   "r4": ("I", 8, "Grade not found", "C"), "r5": ("C", 10, "grader_failed", "C")}

    @scorer(metrics=[])
    def rubric():
        async def score_(state, target):
            word, number, _, _ = rubric_plan[state.sample_id]
            return Score(value={"verdict": word, "score": number}, explanation=f"rubric {state.sample_id}")
        return score_

    @scorer(metrics=[])
    def legacy():
        async def score_(state, target):
            value = rubric_plan[state.sample_id][2]
            if value == "Grade not found":  # model_graded_* before Score.unscored recorded INCORRECT and this text
                return Score(value="I", explanation="Grade not found in model output: hmm")
            if value == "grader_failed":  # a value, but the reason says the instrument failed
                return Score(value="I", reason="grader_failed", explanation="refused to grade")
            return Score(value=value, explanation=f"legacy {state.sample_id}")
        return score_

    run(Task(name="rubric", dataset=[Sample(id=k, input=f"grade {k}", target=v[3]) for k, v in rubric_plan.items()],
             solver=fixed({f"grade {k}": "answer" for k in rubric_plan}), scorer=[rubric(), legacy()]),
        out / "rubric")

    # 6. two models under test, one grader (a custom scorer naming the answer's model)
    @scorer(metrics=[])
    def says_a():
        async def score_(state, target):
            return Score(value="C" if state.output.completion.startswith("a") else "I")
        return score_

    run(Task(name="models", dataset=[Sample(id=k, input=f"m{k}", target="x") for k in (1, 2)],
             solver=fixed({"m1": "{model} one", "m2": "{model} two"}), scorer=says_a()),
        out / "models", model=["mockllm/a", "mockllm/b"])


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("inspect_logs")
    home = tmp_path_factory.mktemp("inspect_home")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # no provider could be reached
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CACHE_HOME=str(home / "cache"),
               HF_HUB_OFFLINE="1", INSPECT_LOG_DIR=str(out), INSPECT_DISPLAY="none", NO_COLOR="1")
    done = subprocess.run([sys.executable, __file__, str(out)], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _one(folder: Path) -> Path:
    (found,) = [p for p in folder.iterdir() if p.suffix in (".eval", ".json")]
    return found


def _labels(tmp_path: Path, rows: list[dict], name: str = "labels.csv") -> Path:
    import pandas as pd

    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _human(tmp_path: Path) -> Path:
    return _labels(tmp_path, [{"sample_id": k, "label": v[2]} for k, v in MAIN.items() if v[2]])


def _metrics(analysis, judge: str, condition: str) -> dict:
    return analysis.cell(judge, condition)["metrics"]


def _analyze(rs):
    from rubriclab.recorded import Settings, analyze

    return analyze(rs, Settings(n_boot=200, seed=0))


# -- the main log, by hand -------------------------------------------------------------------------------------------
def test_grader_against_human_grades_by_hand(logs, tmp_path):
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    rs = read_inspect(_one(logs / "main"), labels=_human(tmp_path))
    assert rs.format == "inspect_ai" and set(rs.judges) == {"mockllm/grader", "match"}
    assert rs.conditions == ["match", "model_graded_fact"]
    # the grader's judge is the model its scorer called (from the sample's events); match calls none
    assert ERRORED not in rs.pairs and len(rs.pairs) == 10 and rs.counts()["labelled_pairs"] == 9
    assert any("1 sample(s) ended in an error" in n for n in rs.notes)
    by = {(j.judge, j.pair_id): j for j in rs.judgments}
    # C -> first (choice 1 = correct), I -> second (2 = incorrect), P -> tie, unscored -> none
    grades = {k: by[("mockllm/grader", k)].choice for k in MAIN}
    assert grades == {"1": "1", "2": "1", "3": "1", "4": "2", "5": "2", "6": "2", "7": "tie", "8": "none",
                      "9": "none", "10": "1"}
    assert by[("mockllm/grader", "8")].raw == "Grade not found in model output: I am not sure."
    assert by[("mockllm/grader", "8")].meta_value("reason") == "grader_failed"
    assert by[("mockllm/grader", "1")].raw == "Right.\nGRADE: C" and by[("mockllm/grader", "1")].finish_reason == "stop"
    assert by[("mockllm/grader", "3")].meta_value("answer") == "Lyon"
    assert {rs.pairs[k].label for k in ("1", "2", "6", "7", "9")} == {"1"} and rs.pairs["10"].label is None
    assert "1 = correct, 2 = incorrect" in rs.label_rule

    m = _metrics(_analyze(rs), "mockllm/grader", "model_graded_fact")
    # credits on the 9 labelled: 1, 1, 0, 1, 1, 0, 0.5 (partial vs correct), 0 (none), 0 (none)
    assert m["accuracy"]["value"] == pytest.approx(4.5 / 9) and m["accuracy"]["n"] == 9
    assert m["accuracy"]["n_none"] == 2 and m["accuracy"]["n_tie"] == 1
    # confusion human (rows 1, 2) x grader (1, 2, tie, none): [[2, 1, 1, 1], [1, 2, 0, 1]]
    po, pe = 4 / 9, (5 * 3 + 4 * 3) / 81
    assert m["kappa"]["value"] == pytest.approx((po - pe) / (1 - pe))
    p1, p2, r1, r2 = 2 / 3, 2 / 3, 2 / 5, 2 / 4
    assert m["macro_precision"]["value"] == pytest.approx((p1 + p2) / 2)
    assert m["macro_recall"]["value"] == pytest.approx((r1 + r2) / 2)
    f1 = [2 * p * r / (p + r) for p, r in ((p1, r1), (p2, r2))]
    assert m["macro_f1"]["value"] == pytest.approx(sum(f1) / 2)
    for key in ("positional_agreement", "first_position_rate"):  # one graded answer: no presentation order
        assert m[key]["value"] is None and "pointwise rating" in m[key]["reason"]

    frame = rs.frame()
    cm = frame[frame.judge == "mockllm/grader"].dropna(subset=["label"]).groupby(["label", "choice"]).size().to_dict()
    assert cm == {("1", "1"): 2, ("1", "2"): 1, ("1", "tie"): 1, ("1", "none"): 1, ("2", "1"): 1, ("2", "2"): 2,
                  ("2", "none"): 1}

    exact = _metrics(_analyze(rs), "match", "match")  # match agrees with the human on every labelled answer
    assert exact["accuracy"]["value"] == 1.0 and exact["kappa"]["value"] == pytest.approx(1.0)


def test_calibration_target_is_the_human_pass_rate(logs, tmp_path):
    from rubriclab.calibrate import verdict_table
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    rs = read_inspect(_one(logs / "main"), labels=_human(tmp_path))
    vt = verdict_table(rs, "mockllm/grader", "model_graded_fact")
    human = vt.frame["human"].dropna()
    assert human.mean() == pytest.approx(5 / 9)  # "response 1 preferred" = graded correct by the human


def test_two_graders_on_the_same_answers_are_compared(logs, tmp_path):
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    rs = read_inspect(logs / "rescored", labels=_human(tmp_path))
    assert set(rs.judges) == {"mockllm/grader", "mockllm/second", "match"} and len(rs.pairs) == 10
    assert any(n.startswith("1 sample(s) ended in an error") for n in rs.notes)  # in both logs, counted once
    a = _analyze(rs)
    second = _metrics(a, "mockllm/second", "model_graded_fact")
    # RESCORE against the human on 1-9: disagrees on 2 (I vs C) and 5 (C vs I) -> 7 / 9
    assert second["accuracy"]["value"] == pytest.approx(7 / 9)
    row = next(r for r in a.comparisons if r["family"] == "condition:model_graded_fact" and r["metric"] == "accuracy")
    assert {row["a"], row["b"]} == {"mockllm/grader", "mockllm/second"} and row["n_pairs"] == 9
    assert any(r.get("condition") == "model_graded_fact" for r in a.judge_agreement)


def test_several_annotators_their_majority(logs, tmp_path):
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    rows = [{"sample_id": 3, "annotator": who, "label": grade} for who, grade in (("ann", "I"), ("bo", "C"), ("cy", "I"))]
    rows += [{"sample_id": 6, "annotator": who, "label": grade} for who, grade in (("ann", "C"), ("bo", "I"))]
    rs = read_inspect(_one(logs / "main"), labels=_labels(tmp_path, rows))
    assert rs.pairs["3"].labels == (("ann", "2"), ("bo", "1"), ("cy", "2")) and rs.pairs["3"].label == "2"
    assert rs.pairs["6"].label is None  # one each: no majority
    assert _analyze(rs).annotator_agreement is not None


# -- other scales --------------------------------------------------------------------------------------------------
def test_target_labels_dict_values_threshold_legacy_and_noanswer(logs):
    from rubriclab.errors import InputError
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    log = _one(logs / "rubric")
    with pytest.raises(InputError, match=r"rubric.*field 'scores': scorer 'rubric/score', sample 'r\d' .*value \d "
                                         r"is a number other than 0, 0.5 and 1; expected a threshold"):
        read_inspect(log, labels="target")
    rs = read_inspect(log, labels="target", threshold=7)
    assert rs.conditions == ["legacy", "rubric/score", "rubric/verdict"]
    assert {p: rs.pairs[p].label for p in rs.pairs} == {"r1": "1", "r2": "2", "r3": "2", "r4": "1", "r5": "1"}
    got = {(j.condition, j.pair_id): j.choice for j in rs.judgments}
    ids = ("r1", "r2", "r3", "r4", "r5")
    assert [got[("rubric/score", p)] for p in ids] == ["1", "1", "2", "1", "1"]  # 9, 7, 3, 8, 10 against 7
    assert [got[("legacy", p)] for p in ids] == ["1", "2", "2", "none", "none"]  # N = incorrect
    assert next(j for j in rs.judgments if j.condition == "rubric/score" and j.pair_id == "r1").score == 9.0
    assert any("1 grade(s) were N" in n for n in rs.notes)
    assert any("(1 grade not found, 1 grader_failed)" in n for n in rs.notes)
    a = _analyze(rs)
    assert _metrics(a, "rubric", "rubric/score")["accuracy"]["value"] == pytest.approx(4 / 5)  # r2 (7 ≥ 7) wrong
    assert _metrics(a, "rubric", "rubric/verdict")["accuracy"]["value"] == pytest.approx(3 / 5)  # r3, r4 wrong
    assert _metrics(a, "legacy", "legacy")["accuracy"]["value"] == pytest.approx(3 / 5)  # r4, r5 none


def _legacy_log(path: Path) -> Path:
    """A log in the layout inspect 0.3.4x wrote (version 2, scorers marked by step events, no spans, no unscored
    NaN), as inspect's own tests/log/test_list_logs/2024-11-05…json has it; its grader is another model than the
    one evaluated."""
    def sample(i, grade, reply):
        out = {"model": "gpt-4o", "choices": [{"message": {"role": "assistant", "content": reply}, "stop_reason": "stop"}]}
        return {"id": i, "epoch": 1, "input": f"question {i}", "target": "", "messages": [],
                "output": {"model": "gpt-4o-mini", "choices": [{"message": {"role": "assistant", "content": f"answer {i}"},
                                                                 "stop_reason": "stop"}]},
                "scores": {"model_graded_fact": {"value": grade, "answer": f"answer {i}", "explanation": reply}},
                "metadata": {}, "store": {},
                "events": [{"timestamp": "2024-11-05T13:32:17-05:00", "event": "step", "action": "begin", "type": "scorer",
                            "name": "model_graded_fact"},
                           {"timestamp": "2024-11-05T13:32:18-05:00", "event": "model", "model": "openai/gpt-4o",
                            "input": [], "tools": [], "tool_choice": "none", "config": {}, "output": out},
                           {"timestamp": "2024-11-05T13:32:19-05:00", "event": "step", "action": "end", "type": "scorer",
                            "name": "model_graded_fact"}]}
    log = {"version": 2, "status": "success",
           "eval": {"run_id": "r", "created": "2024-11-05T13:31:45-05:00", "task": "input_task", "task_id": "t",
                    "task_version": 0, "task_attribs": {}, "task_args": {}, "model": "openai/gpt-4o-mini",
                    "dataset": {"samples": 3, "sample_ids": [1, 2, 3], "shuffled": False}, "model_args": {},
                    "config": {}, "packages": {"inspect_ai": "0.3.43"}},
           "plan": {"name": "plan", "steps": [], "config": {}},
           "samples": [sample(1, "C", "Fine.\nGRADE: C"), sample(2, "I", "Grade not found in model output: dunno"),
                       sample(3, "I", "Wrong.\nGRADE: I")]}
    path.write_text(json.dumps(log))
    return path


def test_a_log_of_an_older_inspect(tmp_path):
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    rs = read_inspect(_legacy_log(tmp_path / "old.json"),
                      labels=_labels(tmp_path, [{"sample_id": i, "label": g} for i, g in ((1, "C"), (2, "I"), (3, "C"))]))
    assert rs.judges == ["openai/gpt-4o"]  # the model called inside the scorer's step, not the evaluated one
    assert [(j.pair_id, j.choice, j.finish_reason) for j in rs.judgments] == [("1", "1", "stop"), ("2", "none", "stop"),
                                                                              ("3", "2", "stop")]
    assert _metrics(_analyze(rs), "openai/gpt-4o", "model_graded_fact")["accuracy"]["value"] == pytest.approx(1 / 3)


def test_epochs_as_items_or_conditions(logs, tmp_path):
    from rubriclab.errors import InputError
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    log = _one(logs / "epochs")
    assert log.suffix == ".json"
    # sample 1's two answers graded by hand per epoch; sample 2's one row labels both its epochs
    table = _labels(tmp_path, [{"sample_id": 1, "epoch": 1, "label": "correct"},
                               {"sample_id": 1, "epoch": 2, "label": "correct"},
                               {"sample_id": 2, "epoch": "", "label": "incorrect"}])
    rs = read_inspect(log, labels=table)
    assert sorted(rs.pairs) == ["1#1", "1#2", "2#1", "2#2"]
    assert {p: rs.pairs[p].label for p in rs.pairs} == {"1#1": "1", "1#2": "1", "2#1": "2", "2#2": "2"}
    # the grader: C on epoch 1's answers, I on epoch 2's -> agrees on 1#1 and 2#2
    assert _metrics(_analyze(rs), "by_answer", "by_answer")["accuracy"]["value"] == pytest.approx(2 / 4)
    assert any("each epoch's answer is its own item" in n for n in rs.notes)

    rs = read_inspect(log, labels=_labels(tmp_path, [{"sample_id": 1, "label": "C"}, {"sample_id": 2, "label": "I"}],
                                          "per_sample.csv"), epochs="conditions")
    assert sorted(rs.pairs) == ["1", "2"] and rs.conditions == ["by_answer (epoch 1)", "by_answer (epoch 2)"]
    a = _analyze(rs)
    assert _metrics(a, "by_answer", "by_answer (epoch 1)")["accuracy"]["value"] == pytest.approx(1 / 2)
    assert any(r["family"] == "judge:by_answer" for r in a.comparisons)
    with pytest.raises(InputError, match=r"labels\.csv: field 'epoch': an epoch column, but epochs: conditions"):
        read_inspect(log, labels=table, epochs="conditions")


def test_pairwise_grader_in_both_orders_by_hand(logs):
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    rs = read_inspect(_one(logs / "pairwise"), labels="target")
    assert sorted(rs.pairs) == ["p1", "p2", "p3"]
    assert {p: rs.pairs[p].label for p in rs.pairs} == {"p1": "1", "p2": "2", "p3": "1"}
    assert rs.pairs["p1"].output_2 == "p1 the second output"
    got = {(j.pair_id, j.order): (j.verdict, j.choice) for j in rs.judgments}
    assert got == {("p1", "original"): ("first", "1"), ("p1", "swapped"): ("second", "1"),
                   ("p2", "original"): ("first", "1"), ("p2", "swapped"): ("first", "2"),
                   ("p3", "original"): ("tie", "tie"), ("p3", "swapped"): ("none", "none")}
    m = _metrics(_analyze(rs), "pair_grader", "pair_grader")
    assert m["accuracy_original"]["value"] == pytest.approx(1.5 / 3)
    assert m["accuracy_swapped"]["value"] == pytest.approx(2 / 3)
    assert m["accuracy"]["value"] == pytest.approx((1 + 0.5 + 0.25) / 3)
    assert m["both_correct"]["value"] == pytest.approx(1 / 3)
    assert m["positional_agreement"]["value"] == pytest.approx(1 / 3)
    assert m["first_position_rate"]["value"] == pytest.approx(3 / 4)


def test_several_models_under_test_need_a_model_column(logs, tmp_path):
    from rubriclab.errors import InputError
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    folder = logs / "models"
    with pytest.raises(InputError, match=r"labels\.csv: field 'model': the logs hold answers of several models "
                                         r"\(mockllm/a, mockllm/b\)"):
        read_inspect(folder, labels=_labels(tmp_path, [{"sample_id": 1, "label": "C"}]))
    table = _labels(tmp_path, [{"sample_id": 1, "model": "mockllm/a", "label": "C"},
                               {"sample_id": 1, "model": "mockllm/b", "label": "C"},
                               {"sample_id": 2, "model": "mockllm/b", "label": "I"}], "by_model.csv")
    rs = read_inspect(folder, labels=table)
    assert sorted(rs.pairs) == ["mockllm/a/1", "mockllm/a/2", "mockllm/b/1", "mockllm/b/2"]
    assert rs.pairs["mockllm/a/2"].label is None and rs.pairs["mockllm/b/2"].label == "2"
    got = {j.pair_id: j.choice for j in rs.judgments}
    assert got == {"mockllm/a/1": "1", "mockllm/a/2": "1", "mockllm/b/1": "2", "mockllm/b/2": "2"}


# -- bad input: one line naming file, row and field --------------------------------------------------------------------
@pytest.mark.parametrize("rows, pattern", [
    ([{"id": 1, "label": "C"}], r"bad\.csv: field 'sample_id': required column is missing"),
    ([{"sample_id": 1, "label": "C"}, {"sample_id": 2, "label": ""}], r"bad\.csv:3: field 'label': is empty"),
    ([{"sample_id": 1, "label": "maybe"}], r"bad\.csv:2: field 'label': sample '1': label 'maybe' is not a grade; "
                                           r"expected a grade: C/correct"),
    ([{"sample_id": 1, "label": "C"}, {"sample_id": 1, "label": "I"}],
     r"bad\.csv:3: field 'sample_id': sample '1' labelled again by 'human' \(first on line 2\)"),
    ([{"sample_id": "nope", "label": "C"}], r"bad\.csv: field 'sample_id': none of the 1 label rows names a sample"),
    ([{"sample_id": 1, "label": "C", "epoch": "first"}], r"bad\.csv:2: field 'epoch': epoch 'first'"),
])
def test_bad_label_tables(logs, tmp_path, rows, pattern):
    from rubriclab.errors import InputError
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    with pytest.raises(InputError, match=pattern) as err:
        read_inspect(_one(logs / "main"), labels=_labels(tmp_path, rows, "bad.csv"))
    assert "\n" not in str(err.value)


def test_bad_logs_and_targets(logs, tmp_path):
    from rubriclab.errors import InputError
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    with pytest.raises(InputError, match=r"main.*\.eval: field 'target': sample '1' \(epoch 1\): target 'Paris' is "
                                         r"not a grade; .* or give the human labels in a table"):
        read_inspect(_one(logs / "main"), labels="target")
    fake = tmp_path / "fake.json"
    fake.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(InputError, match=r"fake\.json: not a readable inspect_ai eval log"):
        read_inspect(fake)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty: no inspect_ai eval log in the folder"):
        read_inspect(tmp_path / "empty")
    with pytest.raises(InputError, match=r"pairwise scorers \(pairs/pair_grader\) and pointwise ones \(epochs/by_answer\)"):
        mixed = tmp_path / "mixed"
        mixed.mkdir()
        for sub in ("pairwise", "epochs"):
            src = _one(logs / sub)
            (mixed / src.name).write_bytes(src.read_bytes())
        read_inspect(mixed)


def test_missing_inspect_is_one_line(monkeypatch, tmp_path):
    from rubriclab.errors import MissingDependencyError
    from rubriclab.recorded.formats.inspect_ai import read_inspect

    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if not installed
    with pytest.raises(MissingDependencyError, match=r"Install with: pip install 'rubriclab\[inspect\]'"):
        read_inspect(tmp_path)


def test_importing_rubriclab_recorded_does_not_import_inspect():
    code = "import sys, rubriclab.recorded; assert 'inspect_ai' not in sys.modules, 'imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# -- params.yaml and the CLI -----------------------------------------------------------------------------------------
def test_source_keys_and_relative_labels(logs, tmp_path):
    import shutil

    from rubriclab.errors import ConfigError
    from rubriclab.recorded import read_source

    shutil.copy(_human(tmp_path), tmp_path / "grades.csv")
    src = {"path": str(_one(logs / "main")), "format": "inspect_ai", "labels": "grades.csv"}
    rs = read_source(src, tmp_path, "mine")
    assert rs.name == "mine" and rs.counts()["labelled_pairs"] == 9
    rs = read_source({**src, "judges": ["match"]}, tmp_path, "mine")
    assert rs.judges == ["match"]
    with pytest.raises(ConfigError, match=r"experiment do not apply to format inspect_ai"):
        read_source({**src, "experiment": "x"}, tmp_path, "mine")
    with pytest.raises(ConfigError, match=r"epochs"):
        read_source({**src, "epochs": "pairs"}, tmp_path, "mine")


def test_cli_writes_a_card(logs, tmp_path, monkeypatch, capsys):
    import yaml

    from rubriclab.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"recorded": {"n_boot": 50}}))
    log = _one(logs / "main")
    assert main(["recorded", "--path", str(log), "--format", "inspect_ai", "--no-track", "--out",
                 str(tmp_path / "card")]) == 0
    md = (tmp_path / "card" / "card.md").read_text()
    assert "mockllm/grader" in md and "format `inspect_ai`" in md and "no labels" in md
    # with the human grades, through a params.yaml source
    _human(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"recorded": {"n_boot": 50, "sources": {
        "grader": {"path": str(log), "format": "inspect_ai", "labels": "labels.csv"}}}}))
    assert main(["recorded", "grader", "--no-track", "--out", str(tmp_path / "card2")]) == 0
    card = json.loads((tmp_path / "card2" / "card.json").read_text())
    cell = next(c for c in card["cells"] if c["judge"] == "mockllm/grader")
    assert cell["metrics"]["accuracy"]["value"] == pytest.approx(0.5) and not math.isnan(cell["metrics"]["kappa"]["value"])
    assert "1 = correct" in (tmp_path / "card2" / "card.md").read_text()


if __name__ == "__main__":
    _write_logs(Path(sys.argv[1]))
