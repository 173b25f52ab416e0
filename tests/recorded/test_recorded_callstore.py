"""The project's call store as a recorded source: the pairwise verdicts a stage got through ``judge_pairs`` (or the
audit's templated rubrics, both orders) are found again by rebuilding its requests — parse re-asks, truncated
replies and majority over draws included — without a model call, and feed the same analysis."""

from __future__ import annotations

import pandas as pd
import pytest

from rubriclab.errors import InputError
from rubriclab.judging import PairwiseRubric, judge_pairs, pairwise_request
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.recorded import Settings, analyze, read_store
from rubriclab.rubrics import JudgeTemplate
from rubriclab.testing import drift_pairs, scripted_model, scripted_provider

TPL = ("Judge the two answers to <question>{question}</question>.\n<answer_a>{answer_a}</answer_a>\n"
       "<answer_b>{answer_b}</answer_b>\nAnswer [[A]] if A is better, [[B]] if B is better.")
STRICT = JudgeTemplate(name="strict", text=TPL + " Be strict.")
LENIENT = JudgeTemplate(name="lenient", text=TPL + " Be lenient.")


def _script(messages, params):
    """Right (the REF_CHOSEN side) mostly; pair 1 first replies without a verdict (the re-ask answers), pair 2
    never states one, pair 3 is cut at the token limit once, the lenient rubric's draws on pair 4 split."""
    original = messages[0]["content"]
    right = "A" if original.find("REF_CHOSEN") < original.find("REF_REJECTED") else "B"
    reask = len(messages) > 1
    if "case bench 1," in original and not reask:
        return "I think both are fine."
    if "case bench 2," in original:
        return "no idea"
    if "case bench 3," in original and not reask:
        return {"text": f"[[{right}]] because", "finish_reason": "length"}
    if "case bench 4," in original and "lenient" in original:
        return f"[[{right if params.get('seed', 0) % 2 else ('B' if right == 'A' else 'A')}]]"
    return f"[[{right}]]"


@pytest.fixture
def judged(store, gateway):
    judge = RoleSpec(name="judge", model=scripted_model("replay-judge", _script), temperature=0.7, concurrency=2,
                     parse_retries=1)
    pairs = drift_pairs(6, "bench")
    rows = judge_pairs({"strict": STRICT, "lenient": LENIENT}, pairs, gateway=gateway, judge=judge, seed=5,
                       samples=3)
    return judge, pairs, rows


def test_replay_gives_the_stages_verdicts_without_a_call(store, judged):
    judge, pairs, rows = judged
    calls, ledger = scripted_provider().calls["replay-judge"], store.ledger()
    rs = read_store(store, pairs, {"strict": STRICT, "lenient": LENIENT}, judge, seed=5, samples=3, where="calls")
    assert scripted_provider().calls["replay-judge"] == calls and store.ledger() == ledger  # no call, no batch row
    assert len(rs.judgments) == 12 and rs.extras["missing"] == 0
    letter = {"first": "A", "second": "B", "tie": "tie", "none": None}
    got = {(j.condition, j.pair_id): j for j in rs.judgments}
    for r in rows.itertuples():
        j = got[(r.rubric, r.pair_id)]
        assert letter[j.verdict] == (None if pd.isna(r.verdict) else r.verdict), (r.rubric, r.pair_id)
        assert j.order == "original"
        assert rs.pairs[r.pair_id].label == ("1" if r.human == "A" else "2")
    by = rows.set_index(["rubric", "pair_id"])
    assert by.loc[("strict", "bench-1"), "status"] == "agree"  # answered on the re-ask
    assert by.loc[("strict", "bench-3"), "status"] == "agree"  # truncated, then re-asked
    assert by.loc[("strict", "bench-2"), "status"] == "failed" and got[("strict", "bench-2")].verdict == "none"
    assert got[("strict", "bench-2")].raw == "no idea" and "parse_error" in dict(got[("strict", "bench-2")].meta)
    assert got[("lenient", "bench-4")].meta_value("votes") == by.loc[("lenient", "bench-4"), "votes"]
    # the same analysis as on published verdicts: accuracy counts the failed pair wrong
    res = analyze(rs, Settings(n_boot=50))
    strict = rows[rows["rubric"] == "strict"]
    assert res.cell(judge.model, "strict")["metrics"]["accuracy"]["value"] == pytest.approx(
        (strict["status"] == "agree").sum() / len(strict))
    assert res.cell(judge.model, "strict")["n_none"] == 1


def test_what_the_store_lacks_is_counted_never_guessed(store, judged):
    judge, pairs, _ = judged
    extra = drift_pairs(2, "other")
    rs = read_store(store, [*pairs, *extra], {"strict": STRICT}, judge, seed=5, samples=3)
    assert len(rs.judgments) == 6 and rs.extras["missing"] == 2 and "2 of 8 judgments are not in the store" in \
        " ".join(rs.notes)
    with pytest.raises(InputError, match=r"none of the 12 judgments asked for is complete.*temperature"):
        read_store(store, pairs, {"strict": STRICT, "lenient": LENIENT}, judge.with_(temperature=0.2), seed=5,
                   samples=3)
    # as if the stage had stopped early out of 4 draws: 3 unanimous draws decide; bench-2's 3 failed ones do not
    early = read_store(store, pairs, {"strict": STRICT}, judge, seed=5, samples=4)
    assert len(early.judgments) == 5 and early.extras["incomplete"] == 1
    assert all(j.meta_value("early_stopped") == "3 of 4 draws decide the majority" for j in early.judgments)
    with pytest.raises(InputError, match=r"none of the 2 judgments .* complete .* \(2 lack a draw or a re-ask\)"):
        read_store(store, pairs[2:3], {"strict": STRICT, "lenient": LENIENT}, judge, seed=5, samples=4)


def test_both_orders_of_the_audits_templated_path(store, gateway):
    from rubriclab.data import present_both_orders

    judge = RoleSpec(name="judge", model=scripted_model("replay-both", lambda m, p: "[[A]]"), parse_retries=0)
    pairs = drift_pairs(4, "bench")
    # as the audit judges a templated rubric with both_orders: one request per presentation
    reqs = [pairwise_request(PairwiseRubric.of(STRICT), view, judge) for p in pairs for view in present_both_orders(p)]
    Gateway(store, stage="audit@x", progress=False).run(reqs)
    rs = read_store(store, pairs, {"strict": STRICT}, judge, seed=5, both_orders=True)
    assert len(rs.judgments) == 8 and {j.order for j in rs.judgments} == {"original", "swapped"}
    res = analyze(rs, Settings(n_boot=50))
    m = res.cell(judge.model, "strict")["metrics"]
    # always "A": right in exactly one order of every pair, first position every time
    assert m["accuracy"]["value"] == pytest.approx(0.5) and m["first_position_rate"]["value"] == 1.0
    assert m["positional_agreement"]["value"] == 0.0


def test_stage_reads_a_store_source_from_params(tmp_path, monkeypatch):
    """`format: store` in params.yaml: the judge role from llm.roles.judge, the project's store (llm.store), the
    pairs and rubric files the stage used; the card says where the verdicts came from."""
    import json

    import yaml

    from rubriclab.config import load_params
    from rubriclab.data import write_pairs
    from rubriclab.llm import Gateway, open_store, panel, roles_from_params, store_location
    from rubriclab.stages.recorded import run_recorded_stage

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    scripted_model("stage-judge", _script)
    params = {"data": {"seed": 5}, "llm": {"store": "calls.sqlite", "roles": {"judge": {
        "model": "scripted/stage-judge", "temperature": 0.7, "parse_retries": 1}}},
        "recorded": {"n_boot": 50, "sources": {"live": {
            "path": "llm.store", "format": "store", "pairs": "pairs.jsonl", "samples": 3,
            "rubrics": {"strict": "strict.json", "lenient": "lenient.json"}}}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    for t in (STRICT, LENIENT):
        (tmp_path / f"{t.name}.json").write_text(json.dumps({"name": t.name, "template": t.text}))
    pairs = drift_pairs(6, "bench")
    write_pairs(pairs, tmp_path / "pairs.jsonl")
    params = load_params(tmp_path / "params.yaml").given()  # the file's dict, edited below
    judge = panel(roles_from_params(params)["judge"])[0]
    store = open_store(store_location(params, tmp_path))
    try:  # the stage's own judging, e.g. the drift gate's judge_pairs
        rows = judge_pairs({"strict": STRICT, "lenient": LENIENT}, pairs, gateway=Gateway(store, progress=False),
                           judge=judge, seed=5, samples=3)
    finally:
        store.close()
    res = run_recorded_stage(params, tmp_path, "live", out_dir=tmp_path / "out", track=False)
    rs = res["set"]
    assert rs.format == "store" and rs.judges == ["scripted/stage-judge"] and len(rs.judgments) == 12
    assert sum(j.verdict == "none" for j in rs.judgments) == int(rows["verdict"].isna().sum())
    md = (tmp_path / "out/card.md").read_text()
    assert "A stage's own judgments, read back from the call store" in md and "calls.sqlite" in md
    params["recorded"]["sources"]["live"]["temperature"] = 0.2  # not what the stage judged with: other keys
    with pytest.raises(InputError, match="none of the 12 judgments"):
        run_recorded_stage(params, tmp_path, "live", out_dir=tmp_path / "out2", track=False)


def test_a_store_source_reads_with_the_data_seed_the_stages_used_when_params_leave_it_out(tmp_path):
    """``format: store`` rebuilds the stage's requests with ``data.seed``; left out of params.yaml it is the schema's
    default (42, what the stages judged with). It was read as 0 here, so every verdict was missing."""
    import json

    from rubriclab.data import write_pairs
    from rubriclab.llm import open_store
    from rubriclab.recorded import read_source

    judge = RoleSpec(name="judge", model=scripted_model("seed-judge", _script), temperature=0.7, parse_retries=1)
    pairs = drift_pairs(4, "bench")
    write_pairs(pairs, tmp_path / "pairs.parquet")
    (tmp_path / "strict.json").write_text(json.dumps({"name": "strict", "template": STRICT.text}))
    store = open_store(tmp_path / "calls.sqlite")
    try:
        judge_pairs({"strict": STRICT}, pairs, gateway=Gateway(store, stage="audit", progress=False), judge=judge,
                    seed=42, samples=1)
    finally:
        store.close()
    params = {"llm": {"store": "calls.sqlite", "roles": {"judge": {"model": judge.model, "temperature": 0.7,
                                                                   "parse_retries": 1}}}}
    spec = {"path": "llm.store", "format": "store", "pairs": "pairs.parquet", "rubrics": {"strict": "strict.json"}}
    rs = read_source(spec, tmp_path, "mine", llm=params["llm"])  # data_seed: the schema's default
    assert len(rs.judgments) == 4 and rs.extras["missing"] == 0
