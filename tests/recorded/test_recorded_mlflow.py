"""MLflow 3 traces as recorded judgments: traces with LLM-judge and human feedback logged into a real local tracking
store (SQLite in tmp_path) give exactly the numbers the same judgments give when read from a table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rubriclab.recorded import Settings, analyze, read_mlflow, read_table

mlflow = pytest.importorskip("mlflow")

LETTER = {"first": "A", "second": "B", "tie": "tie", "none": "no idea"}


def _plan(n_pairs=12, seed=3):
    """Per pair and order, each judge's verdict as presented, and three annotators' labels (pair's outputs)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_pairs):
        labels = [str(x) for x in rng.choice(["1", "2"], size=3, p=[0.6, 0.4])]
        for order in ("original", "swapped"):
            for judge in ("judge-x", "judge-y"):
                verdict = str(rng.choice(["first", "second", "tie", "none"], p=[0.5, 0.35, 0.1, 0.05]))
                rows.append({"pair_id": f"p{i}", "order": order, "judge": judge, "verdict": verdict,
                             "labels": labels, "output_1": "one " * (i + 1), "output_2": "two " * (12 - i)})
    return rows


def _as_presented(label: str, order: str) -> str:
    first = "1" if order == "original" else "2"
    return "A" if label == first else "B"


def _log_traces(uri: str, plan) -> None:
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("judge-review")
    by_trace: dict[tuple[str, str], list[dict]] = {}
    for r in plan:
        by_trace.setdefault((r["pair_id"], r["order"]), []).append(r)
    for (pid, order), rows in by_trace.items():
        r0 = rows[0]
        first, second = (r0["output_1"], r0["output_2"]) if order == "original" else (r0["output_2"], r0["output_1"])
        with mlflow.start_span(name="compare") as span:
            span.set_inputs({"prompt": f"question {pid}", "output_1": first, "output_2": second})
            span.set_outputs({"shown": order})
            trace_id = span.trace_id
        mlflow.flush_trace_async_logging()  # the trace must be in the store before it is tagged
        mlflow.set_trace_tag(trace_id, "pair_id", pid)
        mlflow.set_trace_tag(trace_id, "order", order)
        for r in rows:
            mlflow.log_feedback(trace_id=trace_id, name="preference", value=LETTER[r["verdict"]],
                                source=AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE,
                                                        source_id=r["judge"]),
                                rationale=f"{r['judge']} on {pid}")
        for k, label in enumerate(r0["labels"]):
            mlflow.log_feedback(trace_id=trace_id, name="preference", value=_as_presented(label, order),
                                source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=f"ann{k}"))


def _table(plan, path):
    rows = []
    for r in plan:
        rows.append({"pair_id": r["pair_id"], "judge": r["judge"], "condition": "preference", "order": r["order"],
                     "verdict": r["verdict"], "output_1": r["output_1"], "output_2": r["output_2"],
                     **{f"label.ann{k}": lab for k, lab in enumerate(r["labels"])}})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_traces_give_the_numbers_of_the_same_judgments_in_a_table(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    uri = f"sqlite:///{(tmp_path / 'mlflow.db').as_posix()}"
    plan = _plan()
    try:
        _log_traces(uri, plan)
    finally:
        mlflow.set_tracking_uri(None)  # also unsets $MLFLOW_TRACKING_URI, which set_tracking_uri(uri) set
    from_traces = read_mlflow(uri, "judge-review")
    from_table = read_table(_table(plan, tmp_path / "same.csv"))
    assert sorted(from_traces.judges) == ["judge-x", "judge-y"] and from_traces.conditions == ["preference"]
    assert len(from_traces.judgments) == len(plan)
    v = {(j.pair_id, j.judge, j.order): j for j in from_traces.judgments}
    for r in plan:
        j = v[(r["pair_id"], r["judge"], r["order"])]
        assert j.verdict == r["verdict"]
        if r["verdict"] == "none":
            assert j.raw.startswith("no idea")
    assert {p: from_traces.pairs[p].label for p in from_traces.pairs} == {p: from_table.pairs[p].label
                                                                          for p in from_table.pairs}
    assert from_traces.pairs["p3"].output_1 == "one " * 4   # the pair's own output 1, whatever the trace showed
    s = Settings(n_boot=100, seed=1)
    a, b = analyze(from_traces, s), analyze(from_table, s)
    for ca, cb in zip(a.cells, b.cells, strict=True):
        assert (ca["judge"], ca["condition"]) == (cb["judge"], cb["condition"])
        for k, e in ca["metrics"].items():
            assert (e["value"], e["low"], e["high"], e["n"]) == (cb["metrics"][k]["value"], cb["metrics"][k]["low"],
                                                                 cb["metrics"][k]["high"], cb["metrics"][k]["n"]), k
    assert a.judge_agreement[0]["krippendorff_alpha"]["value"] == b.judge_agreement[0]["krippendorff_alpha"]["value"]
    assert a.annotator_agreement["krippendorff_alpha"]["value"] == b.annotator_agreement["krippendorff_alpha"]["value"]
    assert [r["prefers_longer"]["value"] for r in a.biases] == [r["prefers_longer"]["value"] for r in b.biases]


def test_spans_are_fetched_only_for_a_cut_preview_and_long_texts_come_back_whole(tmp_path, monkeypatch):
    """search_traces runs without spans; a pair whose inputs outgrow MLflow's 1,000-character request preview has
    its one trace fetched, so its texts are whole; short pairs cost no fetch."""
    from mlflow import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    uri = f"sqlite:///{(tmp_path / 'mlflow.db').as_posix()}"
    plan = _plan(n_pairs=4)
    long = "a long answer " * 200  # 2,800 characters: the preview is cut
    for r in plan:
        if r["pair_id"] == "p1":
            r["output_1"] = long
    try:
        _log_traces(uri, plan)
    finally:
        mlflow.set_tracking_uri(None)
    fetched, searched = [], []
    get_trace, search = MlflowClient.get_trace, MlflowClient.search_traces
    monkeypatch.setattr(MlflowClient, "get_trace", lambda self, tid, **kw: fetched.append(tid) or get_trace(self, tid,
                                                                                                             **kw))
    monkeypatch.setattr(MlflowClient, "search_traces",
                        lambda self, *a, **kw: searched.append(kw.get("include_spans")) or search(self, *a, **kw))
    rs = read_mlflow(uri, "judge-review")
    assert searched and set(searched) == {False}
    assert rs.pairs["p1"].output_1 == long and rs.pairs["p2"].output_1 == "one " * 3
    assert len(fetched) == 1   # p1's first trace only: its second order's texts are already known
