"""The HTML report without a browser: sections follow the stages that produced outputs, every image is embedded
(no network, no file reference), the models table and the embedded-model banner come from the stage runs, raw
HTML in a stage's markdown is shown as text, and the ledger totals every stage and role."""

from __future__ import annotations

import json
import re

import pytest

from rubriclab.report import build_report, collect_sections
from rubriclab.tracking import stage_run, tracking_uri

CARD = {"settings": {"confidence": 0.95}, "card": {
    "mine": {"app_in": {"value": 0.8, "low": 0.7, "high": 0.9, "n": 5}, "app_out": {"value": 0.6, "low": 0.5,
             "high": 0.7, "n": 5}, "alpha": {"value": 0.4, "low": 0.2, "high": 0.6, "n": 5},
             "vfr": {"value": 0.1, "low": 0.0, "high": 0.2, "n": 3}},
    "empty": {"K": 0}}}


def _outputs(root):
    audit = root / "outputs/audit/ds"
    audit.mkdir(parents=True)
    (audit / "card.md").write_text("# Audit card: ds\n\n| source | α |\n|---|---|\n| mine | 0.4 [0.2, 0.6] n=5 |\n\n"
                                   "<script>alert('x')</script>\n")
    (audit / "card.json").write_text(json.dumps(CARD))
    (audit / "mine.reliability.per_criterion.csv").write_text("criterion,alpha\nc1,0.4\n")
    align = root / "outputs/align/demo"
    (align / "training").mkdir(parents=True)
    (align / "summary.md").write_text("# Propagation through DPO: demo\n\nwin rates here\n")


LEDGER = [{"stage": "audit@ds", "role": "judge", "items": 10, "cache_hits": 4, "calls": 6, "retries": 1,
           "parse_failures": 0, "transport_failures": 0, "failed": 0, "prompt_tokens": 100,
           "completion_tokens": 10, "cost": 0.0}]


def test_sections_follow_the_outputs(tmp_path):
    _outputs(tmp_path)
    ids = [s["id"] for s in collect_sections(tmp_path, LEDGER, "calls.sqlite")]
    assert ids == ["audit-ds", "align-demo", "ledger"]


def _report(root):
    _outputs(root)
    with stage_run("audit", "audit@ds", {}, root, tags={"models": "local/smollm2-135m", "embedded_model": "True"},
                   record_dir=root / "outputs/audit/ds") as run:
        run_id = run.run_id
    res = build_report(root, root / "outputs/report", tracking_uri=tracking_uri(root),
                       experiment="rubriclab", ledger_rows=LEDGER, store="calls.sqlite", ui_url="http://ui:9")
    return res, res["path"].read_text(), run_id


@pytest.fixture
def report(tmp_path, monkeypatch):
    """A project of its own, for a test that adds runs to its store or changes its outputs."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return _report(tmp_path)


@pytest.fixture(scope="module")
def built_report(tmp_path_factory):
    """The same project and report, built once for the tests that only read them (a new MLflow store is most of
    the time)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        return _report(tmp_path_factory.mktemp("report"))


def _build(res):
    text = res["build_path"].read_text()
    assert text.startswith("window.RUBRICLAB_BUILD = ") and text.rstrip().endswith(";")
    return json.loads(text.split("=", 1)[1].rstrip().rstrip(";"))


def test_the_page_is_self_contained(built_report):
    res, html, _ = built_report
    assert html.count("<img") == 2  # the two audit scatter plots
    assert re.findall(r'src="(?!data:image/png;base64,)([^"]*)"', html) == ["build.js"]  # only the build facts
    assert "<link" not in html


def test_the_page_is_the_same_bytes_on_a_later_build_with_new_runs(report, tmp_path):
    """What changes on every build (time, commit, run ids, the ledger at report time) lives in build.js, so a
    rebuild of the same outputs (a fresh clone's `dvc repro`) leaves the page, which DVC hashes, unchanged."""
    res, html, run_id = report
    project = res["path"].parents[2]
    with stage_run("audit", "audit@ds", {}, project, tags={"models": "local/smollm2-135m", "embedded_model": "True"},
                   record_dir=project / "outputs/audit/ds"):
        pass
    again = build_report(project, tmp_path / "again", tracking_uri=tracking_uri(project), experiment="rubriclab",
                         ledger_rows=[{**LEDGER[0], "items": 99}], store="calls.sqlite", ui_url="http://ui:9",
                         commit="0123456789abcdef")
    assert again["path"].read_text() == html
    first, second = _build(res), _build(again)
    assert first["runs"]["audit@ds"]["run_id"] == run_id != second["runs"]["audit@ds"]["run_id"]
    assert second["commit"] == "0123456789ab" and "99" in second["html"]["ledger"]


def test_the_page_is_the_same_bytes_after_an_earlier_report_run(report, tmp_path):
    """The report logs a run of its own after building; a fresh clone's first build has none, every later build
    one: the page must not list it (a fresh clone's `dvc repro` wrote other bytes than a second one, and dvc.lock
    changed)."""
    res, html, _ = report
    project = res["path"].parents[2]
    with stage_run("report", "report", {}, project, tags={"sections": "audit-ds, ledger"},
                   record_dir=project / "outputs/report"):
        pass
    again = build_report(project, tmp_path / "again", tracking_uri=tracking_uri(project), experiment="rubriclab",
                         ledger_rows=LEDGER, store="calls.sqlite", ui_url="http://ui:9")
    assert again["path"].read_text() == html
    assert "report" in _build(again)["runs"]  # build.js (not hashed) still links it


def test_a_section_links_the_run_its_outputs_name_not_a_newer_run_of_that_name(report, tmp_path):
    from mlflow import MlflowClient

    res, _, run_id = report
    project = res["path"].parents[2]
    assert json.loads((project / "outputs/audit/ds/mlflow_run.json").read_text())["run_id"] == run_id
    client = MlflowClient(tracking_uri=tracking_uri(project))
    exp = client.get_experiment_by_name("rubriclab")
    newer = client.create_run(exp.experiment_id, run_name="audit@ds", tags={"stage": "audit"})  # e.g. a re-run
    client.set_terminated(newer.info.run_id)                                                     # elsewhere
    again = build_report(project, tmp_path / "again", tracking_uri=tracking_uri(project), experiment="rubriclab",
                         ledger_rows=LEDGER, store="calls.sqlite")
    fact = _build(again)["runs"]["audit@ds"]
    assert fact["run_id"] == run_id and fact["found_by"] == "outputs"
    (project / "outputs/audit/ds/mlflow_run.json").unlink()  # outputs that name no run: newest by name, said
    fact = _build(build_report(project, tmp_path / "third", tracking_uri=tracking_uri(project),
                               experiment="rubriclab", ledger_rows=LEDGER, store="calls.sqlite"))["runs"]["audit@ds"]
    assert fact["run_id"] == newer.info.run_id and fact["found_by"] == "newest by name"


def test_an_adhoc_cli_run_of_a_stage_does_not_take_its_sections_link(report, tmp_path):
    """``rubriclab audit --dataset ds`` (outputs/audit_cli/ds) is a run named ``audit@ds`` too: its record, in its own
    folder, must not replace the DVC stage's in the report (before, the record went into outputs/audit/ds itself)."""
    res, _, run_id = report
    project = res["path"].parents[2]
    with stage_run("audit", "audit@ds", {}, project, tags={"adhoc": "True"},
                   record_dir=project / "outputs/audit_cli/ds") as adhoc:
        pass
    assert json.loads((project / "outputs/audit_cli/ds/mlflow_run.json").read_text())["run_id"] == adhoc.run_id
    assert json.loads((project / "outputs/audit/ds/mlflow_run.json").read_text())["run_id"] == run_id
    again = build_report(project, tmp_path / "again", tracking_uri=tracking_uri(project), experiment="rubriclab",
                         ledger_rows=LEDGER, store="calls.sqlite")
    fact = _build(again)["runs"]["audit@ds"]
    assert fact["run_id"] == run_id and fact["found_by"] == "outputs"


def test_markdown_images_never_reach_the_page():
    """Model-written text (a rubric diff, a criterion) must not make the page fetch a remote address."""
    from rubriclab.report import render_report

    html = render_report([{"id": "x", "kind": "audit", "title": "x", "run_name": None,
                           "blocks": [("md", "![tracker](https://evil.example/pixel.png) and ![t](http://a/b.png)")]}],
                         {"experiment": "e", "embedded": [], "model_rows": [], "recorded": []})
    assert 'src="http' not in html and "evil.example/pixel.png" in html  # shown as text, never loaded


def test_raw_html_in_a_stage_summary_is_text(built_report):
    _, html, _ = built_report
    assert "&lt;script&gt;alert" in html


def test_models_runs_and_banner(built_report):
    res, html, run_id = built_report
    assert res["embedded"] == ["audit@ds"] and 'id="embedded-banner"' in html
    runs = _build(res)["runs"]
    assert runs["audit@ds"]["link"].startswith("http://ui:9/#/experiments/")
    assert runs["audit@ds"]["link"].endswith(f"/runs/{run_id}")
    assert runs["align@demo"] is None  # the page then says "No MLflow run named align@demo was found"
    assert 'data-run-line="align@demo"' in html and 'data-run="audit@ds"' in html


def test_the_ledger_totals_every_row(built_report):
    res, html, _ = built_report
    assert 'data-build-html="ledger"' in html.split('id="ledger"')[1]
    ledger = _build(res)["html"]["ledger"]
    assert "audit@ds" in ledger and "TOTAL" in ledger and "cache hits" in ledger


def test_scatter_leaves_out_sources_without_values(built_report):
    _, html, _ = built_report
    assert "Not plotted (no value on this axis): empty." in html


def test_rubriclab_ui_serves_the_project_store_offline_on_the_runs_table(tmp_path, monkeypatch, capsys):
    import yaml

    from rubriclab import ui
    from rubriclab.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"tracking": {"experiment": "exp"}}))
    with stage_run("audit", "audit@ds", {}, tmp_path, experiment="exp"):
        pass
    seen = {}

    def fake_serve(argv, env=None, **kw):
        seen.update(argv=argv, env=env)
        return 0

    monkeypatch.setattr(ui, "serve", fake_serve)
    monkeypatch.chdir(tmp_path)
    assert main(["ui", "--port", "5999"]) == 0
    argv = seen["argv"]
    assert argv[1:4] == ["-m", "mlflow", "ui"] and argv[argv.index("--backend-store-uri") + 1] == tracking_uri(tmp_path)
    assert argv[argv.index("--port") + 1] == "5999"
    assert argv[argv.index("--workers") + 1] == "1"  # one uvicorn worker for a local UI, not mlflow's 4
    assert seen["env"]["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    out = capsys.readouterr().out
    assert re.search(r"http://127\.0\.0\.1:5999/#/experiments/\d+/runs\?workflowType=machine_learning", out)
    assert main(["ui", "--port", "5999", "--workers", "3"]) == 0
    assert seen["argv"][seen["argv"].index("--workers") + 1] == "3"
    with pytest.raises(SystemExit) as exc:
        main(["ui", "--workers", "0"])
    assert exc.value.code == 2 and "'0': expected a whole number >= 1" in capsys.readouterr().err


# -- the "Recorded judges" section -----------------------------------------------------------------------------------
def _recorded_outputs(root):
    """Two small cards written by the recorded stage's own code: an LLMBar-like source (two judges, three
    conditions, both orders, the rules / own-rubric contrasts, a publisher tally) and a PandaLM-like one (the
    README-claim check)."""
    from rubriclab.recorded import Judgment, RecordedPair, RecordedSet, Settings, analyze, publisher_check, write_card
    from rubriclab.recorded.formats.llmbar import CONTRASTS

    pairs = {str(i): RecordedPair(id=str(i), labels=(("dataset", "1" if i % 3 else "2"),), prompt=f"q{i}",
                                  output_1="one " * (i + 1), output_2="two\n- a\n- b" if i % 2 else "two")
             for i in range(12)}
    right = {("GPT-4", "Vanilla"): 11, ("GPT-4", "Vanilla_NoRules"): 10, ("GPT-4", "Metrics"): 9,
             ("ChatGPT", "Vanilla"): 9, ("ChatGPT", "Vanilla_NoRules"): 6, ("ChatGPT", "Metrics"): 8}
    judgments = []
    for (judge, cond), k in right.items():
        for i, p in pairs.items():
            for order in ("original", "swapped"):
                ok = int(i) < k or (order == "original" and int(i) == k)  # pair k: right in one order only
                choice = p.label if ok else ("2" if p.label == "1" else "1")
                first = (choice == "1") == (order == "original")
                judgments.append(Judgment(pair_id=i, judge=judge, condition=cond, order=order,
                                          verdict="first" if first else "second"))
    bar = RecordedSet(name="bar", format="llmbar", path="/somewhere/llmbar_natural", pairs=pairs,
                      judgments=judgments, provenance="LLMBar (the publisher's files)", license="MIT",
                      label_rule="the dataset's label", extras={"contrasts": CONTRASTS})
    res = analyze(bar, Settings(n_boot=200, seed=3))
    tally = {"kind": "llmbar statistics.json", "summary": "30 of 30 accuracy figures reproduced exactly.",
             "rows": [{"judge": j, "condition": c, "key": key, "published": "x", "reproduced": "x", "match": True}
                      for j, c in right for key in ("correct_False", "correct_True", "correct_average",
                                                    "correct_both", "equal")]}
    write_card(res, root / "outputs/recorded/bar", tally)

    ppairs = {str(i): RecordedPair(id=str(i), labels=(("a1", lab), ("a2", lab), ("a3", "tie")))
              for i, lab in enumerate(["1", "2", "tie", "1", "2", "1", "2", "1"])}
    verdicts = {"gpt-3.5-turbo": ["first", "second", "tie", "first", "first", "none", "second", "first"],
                "pandalm-7b": ["first", "second", "first", "tie", "second", "first", "first", "first"]}
    pj = [Judgment(pair_id=str(i), judge=j, condition="published", order="original", verdict=v)
          for j, vs in verdicts.items() for i, v in enumerate(vs)]
    panda = RecordedSet(name="panda", format="pandalm", path=str(root / "data/pandalm"), pairs=ppairs, judgments=pj,
                        provenance="PandaLM (as published)", license="Apache-2.0",
                        label_rule="label = the majority of the three annotators")
    pres = analyze(panda, Settings(n_boot=200))
    write_card(pres, root / "outputs/recorded/panda", publisher_check(panda, pres))
    return res, pres


@pytest.fixture(scope="module")
def recorded_report(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("recorded_report")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        return _recorded_report(tmp_path)


def _recorded_report(tmp_path):
    _outputs(tmp_path)
    res, pres = _recorded_outputs(tmp_path)
    with stage_run("audit", "audit@ds", {}, tmp_path, tags={"models": "local/smollm2-135m",
                                                            "embedded_model": "True"}):
        pass
    with stage_run("recorded", "recorded@bar", {}, tmp_path, tags={"recorded": "True", "embedded_model": "False",
                                                                   "judges": "ChatGPT, GPT-4"}):
        pass
    out = build_report(tmp_path, tmp_path / "outputs/report", tracking_uri=tracking_uri(tmp_path),
                       experiment="rubriclab", ledger_rows=LEDGER, store="calls.sqlite")
    html = out["path"].read_text()
    sections = {s: html.split(f'<section id="{s}"')[1].split("</section>")[0]
                for s in ("recorded-bar", "recorded-panda")}
    return out, html, sections, res, pres


def test_recorded_sections_come_first_and_only_with_cards(tmp_path):
    _outputs(tmp_path)
    _recorded_outputs(tmp_path)
    ids = [s["id"] for s in collect_sections(tmp_path, LEDGER, "calls.sqlite")]
    assert ids == ["recorded-bar", "recorded-panda", "audit-ds", "align-demo", "ledger"]
    kinds = {s["id"]: s for s in collect_sections(tmp_path, LEDGER, "calls.sqlite")}
    assert kinds["recorded-bar"]["run_name"] == "recorded@bar" and kinds["recorded-bar"]["kind"] == "recorded"


def test_recorded_section_names_judges_source_and_is_not_plumbing(recorded_report):
    out, html, sec, _, _ = recorded_report
    bar = sec["recorded-bar"]
    assert "Recorded judges: bar" in bar and "no model was called" in bar
    assert "Judges: ChatGPT, GPT-4" in bar and "LLMBar (the publisher's files)" in bar and "licence: MIT" in bar
    assert "recorded@bar" not in out["embedded"] and out["embedded"] == ["audit@ds"]
    banner = html.split('id="embedded-banner"')[1].split("</div>")[0]
    assert "Recorded judges: bar" in banner and "not plumbing" in banner
    models = html.split('id="models"')[1].split("</section>")[0]
    assert "recorded verdicts of ChatGPT, GPT-4 (no model call)" in models
    assert "licence: Apache-2.0" in sec["recorded-panda"]
    assert "<code>data/pandalm</code>" in sec["recorded-panda"]  # the source's path, from the project folder


def _fmt(e):
    return f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]"


def test_recorded_cells_table_states_intervals(recorded_report):
    _, _, sec, res, _ = recorded_report
    bar = sec["recorded-bar"]
    assert "95% percentile bootstrap over pairs (B=200)" in bar
    for c in res.cells:
        row = bar.split(f"<td>{c['judge']}</td>\n<td>{c['condition']}</td>")
        assert len(row) >= 2, (c["judge"], c["condition"])
        cells_row = row[-1].split("</tr>")[0]
        for m in ("accuracy", "accuracy_original", "accuracy_swapped", "positional_agreement", "both_correct"):
            assert _fmt(c["metrics"][m]) in cells_row, (c["judge"], c["condition"], m)
    # ChatGPT Vanilla_NoRules: 6 of 12 pairs right in both orders, pair 6 in the original order only
    m = res.cell("ChatGPT", "Vanilla_NoRules")["metrics"]
    assert m["accuracy"]["value"] == pytest.approx(6.5 / 12) and m["positional_agreement"]["value"] == pytest.approx(
        11 / 12)


def test_recorded_contrasts_answer_the_question_with_delta_ci_q_and_mde(recorded_report):
    _, _, sec, res, _ = recorded_report
    bar = sec["recorded-bar"]
    assert "The questions: rules, own rubric first" in bar
    assert "Within ChatGPT and GPT-4" in bar and "<strong>rules</strong>: Vanilla vs Vanilla_NoRules" in bar
    assert "two presentation orders" in bar and "Benjamini–Hochberg" in bar and "m=4 for accuracy" in bar
    acc = [r for r in res.contrasts if r["metric"] == "accuracy"]
    assert len(acc) == 4 and {r["family_size"] for r in acc} == {4}
    for r in acc:
        row = bar.split(f"<td>{r['judge']}</td>\n<td>{r['contrast']}: {r['a']} − {r['b']}</td>")[1].split("</tr>")[0]
        assert f"{r['diff']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]" in row
        assert f"<td>{r['p_adjusted']:.3f}</td>" in row and f"<td>{r['mde']:.3f}</td>" in row
    # ChatGPT rules: Vanilla 9.5/12 vs Vanilla_NoRules 6.5/12 on the same pairs
    rules = next(r for r in acc if (r["judge"], r["contrast"]) == ("ChatGPT", "rules"))
    assert rules["diff"] == pytest.approx(3 / 12) and rules["n_pairs"] == 12
    found = sum(r["label"] == "difference" for r in acc)
    assert f"{found} of 4 accuracy contrasts show a difference" in bar
    consistency = bar.split("Consistency across the two presentation orders")[1].split("</table>")[0]
    pos = res.cell("GPT-4", "Metrics")["metrics"]["positional_agreement"]
    assert "Vanilla_NoRules" in consistency and _fmt(pos) in consistency
    assert "Δ positional agreement" in bar


def test_recorded_publisher_checks_and_plot(recorded_report):
    _, html, sec, _, pres = recorded_report
    bar, panda = sec["recorded-bar"], sec["recorded-panda"]
    assert "30 of 30 accuracy figures reproduced exactly." in bar
    tally = bar.split("Publisher check")[1].split("</table>")[0]
    assert "<td>30</td>\n<td>30</td>\n<td>6</td>" in tally
    assert "PandaLM's README says PandaLM-7B reaches 93.75% of GPT-3.5's F1" in panda
    assert "Labels: label = the majority of the three annotators" in panda
    assert "<td>none wrong</td>" in panda and "<td>none = tie</td>" in panda  # both conventions for no verdict
    f1 = next(r for r in pres.to_dict()["cells"] if r["judge"] == "pandalm-7b")["metrics"]["macro_f1"]["value"]
    assert f"{f1:.4f}" in panda and "<strong>no</strong>" in panda
    assert "Agreement among the annotators" in panda
    for s in (bar, panda):  # one accuracy plot per source, embedded
        assert s.count('<img src="data:image/png;base64,') == 1 and "accuracy (mean over the presentation" in s
    assert re.findall(r'src="(?!data:image/png;base64,)([^"]*)"', html) == ["build.js"]


def test_build_facts_never_carry_a_tracking_credential(built_report, tmp_path, monkeypatch):
    res, _, _ = built_report
    project = res["path"].parents[2]
    monkeypatch.setattr("rubriclab.report._build.stage_runs", lambda *a, **k: {})  # no server to ask here
    out = build_report(project, tmp_path / "cred", tracking_uri="postgresql://ann:s3cr3t-Pa55@db.example:5432/ml",
                       experiment="rubriclab", ledger_rows=LEDGER, store="calls.sqlite")
    text = out["build_path"].read_text() + out["path"].read_text()
    assert "s3cr3t-Pa55" not in text and "db.example:5432/ml" in _build(out)["tracking_uri"]
