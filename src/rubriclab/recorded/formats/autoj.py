"""Auto-J's pairwise test set and judges' outputs (Li et al. 2023, "Generative Judge for Evaluating Alignment";
github.com/GAIR-NLP/auto-j), read as the repository lays them out::

    data/test/testdata_pairwise.jsonl        {scenario, label: 0|1|2, prompt, "response 1", "response 2"} a line
    data/outputs/pairwise_<judge>_output.jsonl            {"output": 0|1|2} a line, the test set's order
    data/outputs/pairwise_exchange_<judge>_output.jsonl   the same pairs with the two responses swapped

``label`` / ``output``: 0 = the first response is better, 1 = the second, 2 = a tie. An exchange file's outputs are
as the judge saw them (0 = the response shown first, i.e. response 2); a judge without one (a reward model rating
each response alone, the leaderboard's "single" type) is read in the original order only. An ``output`` that is
text (a judge's judgement, or the publisher's OpenAI-batch rows ``{output, cost, finish_reason}``) is read with
the publisher's own extractor (its README's ``extract_pariwise_result``: the text after the last "final decision is
"); anything else (-1, null, "Failed!") is ``none``: counted, its raw value kept, never guessed.

``autoj_leaderboard`` reproduces ``codes/leaderboard/pairwise_eval.py``: counts per scenario, summed (not averaged)
per scenario group of ``utils_constants.scenario_group`` and overall; for ``--type pairwise`` agreement = pairs whose
two orders both equal the label / pairs (a tie right only on a tie label) and consistency = 1 − pairs whose two orders
differ / pairs; for ``--type single`` agreement = original-order outputs equal to the label / pairs; ×100, rounded
to 2 places by Python's ``round``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubriclab.errors import InputError
from rubriclab.recorded._jsonfile import jsonl_rows
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, license_name, meta_tuple
from rubriclab.recorded._registry import SourceContext, register_check, register_format
from rubriclab.recorded._shipped import resolve_path

TESTDATA = "testdata_pairwise.jsonl"
OUTPUT_GLOB = "*pairwise*output.jsonl"
ANNOTATOR = "human"
LABELS = {0: "1", 1: "2", 2: "tie"}  # Auto-J's label → the pair's output (tie a class of its own)
AS_PRESENTED = {0: "first", 1: "second", 2: "tie"}  # an output as the judge saw the pair
TO_PUBLISHER = {"1": 0, "2": 1, "tie": 2}  # a choice back to Auto-J's 0/1/2 (none has no code)
TYPES = {"pairwise": "both orders (an exchange file beside the original)", "single": "the original order only"}
_EXCHANGE = re.compile(r"exchange[_-]?")
# utils_constants.scenario_group: the leaderboard's eight groups of the 58 scenarios, in its print order
SCENARIO_GROUPS: dict[str, tuple[str, ...]] = {
    "Summarization": ("post_summarization", "text_summarization", "note_summarization"),
    "Exam Questions": ("math_reasoning", "solving_exam_question_with_math", "solving_exam_question_without_math"),
    "Code": ("code_simplification", "code_generation", "explaining_code", "code_correction_rewriting",
             "code_to_code_translation"),
    "Rewriting": ("text_simplification", "language_polishing", "instructional_rewriting", "text_correction",
                  "paraphrasing"),
    "Creative Writing": ("writing_song_lyrics", "writing_social_media_post", "writing_blog_post",
                         "writing_personal_essay", "creative_writing", "writing_advertisement",
                         "writing_marketing_materials", "writing_presentation_script", "counterfactual"),
    "Functional Writing": ("writing_product_description", "writing_job_application", "writing_news_article",
                           "writing_biography", "writing_email", "writing_legal_document",
                           "writing_technical_document", "writing_scientific_paper", "functional_writing",
                           "writing_cooking_recipe"),
    "General Communication": ("asking_how_to_question", "open_question", "analyzing_general", "explaining_general",
                              "seeking_advice", "recommendation", "value_judgement", "verifying_fact", "chitchat",
                              "roleplay", "planning", "brainstorming"),
    "NLP Tasks": ("ranking", "text_to_text_translation", "data_analysis", "classification_identification",
                  "title_generation", "question_generation", "reading_comprehension", "keywords_extraction",
                  "information_extraction", "topic_modeling", "others"),
}
GROUP_OF = {s: g for g, scenarios in SCENARIO_GROUPS.items() for s in scenarios}
OTHER_GROUP = "(not in Auto-J's scenario groups)"
OVERALL = "Overall"
FULL_SIZE = 58 * 24  # the released test set: 24 pairs for each of the 58 scenarios
# codes/leaderboard/README.md: pairwise_eval.py's output on the released example files (pairwise_example_output.jsonl
# and its exchange file; the same figures as the main README's Auto-J row, 54.96 / 83.41)
README_FIGURES: dict[str, dict[tuple[str, str], dict[str, float]]] = {"example": {
    ("pairwise", "agreement"): {"Summarization": 45.83, "Exam Questions": 38.89, "Code": 47.5, "Rewriting": 49.17,
                                "Creative Writing": 59.72, "Functional Writing": 61.67,
                                "General Communication": 55.21, "NLP Tasks": 57.58, OVERALL: 54.96},
    ("pairwise", "consistency"): {"Summarization": 73.61, "Exam Questions": 69.44, "Code": 75.83, "Rewriting": 74.17,
                                  "Creative Writing": 87.04, "Functional Writing": 81.67,
                                  "General Communication": 92.36, "NLP Tasks": 86.36, OVERALL: 83.41},
    ("single", "agreement"): {"Summarization": 56.94, "Exam Questions": 41.67, "Code": 54.17, "Rewriting": 57.5,
                              "Creative Writing": 63.43, "Functional Writing": 68.33, "General Communication": 57.29,
                              "NLP Tasks": 62.12, OVERALL: 59.99},
}}


def extract_pairwise_result(text: str) -> int:
    """The publisher's parse of a generated judgement (Auto-J README, ``extract_pariwise_result``): 0 / 1 / 2 after
    the last "final decision is " ("response 1" / "response 2" / "tie"), else -1."""
    raw = text.strip()
    pos = raw.rfind("final decision is ")
    if pos == -1:
        return -1
    rest = raw[pos + len("final decision is "):].strip().lower()
    for code, start in ((0, "response 1"), (1, "response 2"), (2, "tie")):
        if rest.startswith(start):
            return code
    return -1


def _code(value: Any) -> int | None:
    """An output as Auto-J's 0/1/2 (a JSON number equal to one of them), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value in (0, 1, 2) else None


def read_testdata(path: Path) -> tuple[dict[str, RecordedPair], dict[str, str]]:
    """``testdata_pairwise.jsonl`` as pairs (id = the row's position, ``"0"``, ``"1"``, …; domain = its scenario
    group) and each pair's scenario."""
    pairs: dict[str, RecordedPair] = {}
    scenarios: dict[str, str] = {}
    for i, (line, row) in enumerate(jsonl_rows(path)):
        if not isinstance(row, dict):
            raise InputError(f"row {i} is a JSON {type(row).__name__}", file=str(path), line=line,
                             expected="a JSON object")
        for key in ("scenario", "label", "prompt", "response 1", "response 2"):
            if key not in row:
                raise InputError(f"row {i} has no '{key}'", file=str(path), line=line, field=key,
                                 expected="an object with scenario, label, prompt, response 1, response 2")
        label = _code(row["label"])
        if label is None:
            raise InputError(f"label {row['label']!r}", file=str(path), line=line, field="label",
                             expected="0 (response 1 better), 1 (response 2) or 2 (tie)")
        if not isinstance(row["scenario"], str) or not row["scenario"]:
            raise InputError(f"scenario {row['scenario']!r}", file=str(path), line=line, field="scenario",
                             expected="a scenario name such as seeking_advice")
        pid = str(i)
        scenarios[pid] = row["scenario"]
        pairs[pid] = RecordedPair(id=pid, labels=((ANNOTATOR, LABELS[label]),), prompt=str(row["prompt"]),
                                  output_1=str(row["response 1"]), output_2=str(row["response 2"]),
                                  domain=GROUP_OF.get(row["scenario"], OTHER_GROUP))
    if not pairs:
        raise InputError("no rows", file=str(path), expected="the test pairs, one JSON object a line")
    return pairs, scenarios


def judge_name(file_name: str) -> str:
    """The judge a file holds: ``pairwise_<judge>_output.jsonl`` (and its exchange file) → ``<judge>``; any other
    name matching ``*pairwise*output.jsonl`` → its stem without ``_output``."""
    stem = _EXCHANGE.sub("", file_name, count=1).removesuffix(".jsonl").removesuffix("_output")
    return stem.removeprefix("pairwise_") or stem


def output_files(folder: Path, only: Path | None = None) -> dict[str, dict[str, Path]]:
    """The outputs in ``folder`` by judge: ``{"original": file, "swapped": its exchange file (if any)}``; with
    ``only`` just that file's judge."""
    by: dict[str, dict[str, Path]] = {}
    for f in sorted(folder.glob(OUTPUT_GLOB)):
        by.setdefault(judge_name(f.name), {})["swapped" if _EXCHANGE.search(f.name) else "original"] = f
    if only is not None:
        by = {k: v for k, v in by.items() if only in v.values()}
    for judge, files in by.items():
        if "original" not in files:
            raise InputError(f"an exchange file without the original-order outputs of judge {judge!r}",
                             file=str(files["swapped"]), expected=f"pairwise_{judge}_output.jsonl beside it")
    return by


def _judgments(path: Path, judge: str, kind: str, order: str, n: int) -> list[Judgment]:
    rows = jsonl_rows(path)
    if len(rows) != n:
        raise InputError(f"{len(rows)} outputs but {TESTDATA} has {n} pairs", file=str(path),
                         expected="one output a line, in the test set's order (pairwise_eval.py asserts it)")
    out = []
    for i, (line, row) in enumerate(rows):
        if not isinstance(row, dict) or "output" not in row:
            raise InputError(f"row {i} has no 'output'", file=str(path), line=line, field="output",
                             expected='{"output": 0|1|2} (0 = the first shown response better, 1 = the second, 2 = tie)')
        value = row["output"]
        meta: dict[str, Any] = {"file": path.name, "line": line}
        if isinstance(value, str):
            code = extract_pairwise_result(value)
            raw = value
            meta["parse"] = "extract_pariwise_result"
        else:
            code = _code(value)
            raw = json.dumps(value)
        if "cost" in row:
            meta["cost"] = row["cost"]
        verdict = AS_PRESENTED.get(code, "none")
        finish = row.get("finish_reason")
        out.append(Judgment(pair_id=str(i), judge=judge, condition=kind, order=order, verdict=verdict, raw=raw,
                            finish_reason=str(finish) if finish not in (None, "") else None,
                            meta=meta_tuple(meta)))
    return out


def _layout(path: Path, testdata: Path | None) -> tuple[Path, Path, Path | None]:
    """(testdata file, outputs folder, the one output file asked for or None)."""
    only = path if path.is_file() else None
    if only is not None:
        outputs = path.parent
    elif (path / "data" / "outputs").is_dir():
        outputs = path / "data" / "outputs"
    else:
        outputs = path
    if testdata is not None:
        return testdata, outputs, only
    candidates = list(dict.fromkeys([path / "data" / "test" / TESTDATA, outputs / TESTDATA,
                                     outputs.parent / "test" / TESTDATA]))
    for c in candidates:
        if c.is_file():
            return c, outputs, only
    raise InputError(f"no {TESTDATA} found (looked for {', '.join(str(c) for c in candidates)})", file=str(path),
                     expected="Auto-J's layout (data/test/testdata_pairwise.jsonl and data/outputs/) or the "
                              "source key testdata")


def read_autoj(path: str | Path, *, testdata: str | Path | None = None, name: str | None = None,
               judges: Iterable[str] | None = None) -> RecordedSet:
    """Auto-J's test pairs and every judge's outputs in ``path`` (the repository, its ``data/outputs`` folder or one
    output file; ``testdata`` the test set when it is not where the repository keeps it), optionally only some
    judges. A judge with an exchange file is condition ``pairwise`` (both orders), one without ``single``."""
    path = Path(path)
    test_path, outputs, only = _layout(path, Path(testdata) if testdata is not None else None)
    pairs, scenarios = read_testdata(test_path)
    keep = set(judges) if judges else None
    judgments: list[Judgment] = []
    files = output_files(outputs, only)
    for judge, by_order in sorted(files.items()):
        if keep and judge not in keep:
            continue
        kind = "pairwise" if "swapped" in by_order else "single"
        for order, f in sorted(by_order.items()):
            judgments += _judgments(f, judge, kind, order, len(pairs))
    if not judgments:
        raise InputError(f"no output file ({OUTPUT_GLOB})" + (" for the judges asked" if keep else ""),
                         file=str(outputs), expected="pairwise_<judge>_output.jsonl (and pairwise_exchange_<judge>_"
                                                     "output.jsonl for the swapped order)")
    unknown = sorted({s for s in scenarios.values() if s not in GROUP_OF})
    notes = ["Labels and outputs are Auto-J's 0 / 1 / 2 (response 1 / response 2 / tie); an exchange file's outputs "
             "are as the judge saw the swapped pair. An output that is no verdict (not 0, 1 or 2; text without "
             "\"final decision is ...\") is `none`, counted wrong, its raw value kept.",
             "The card credits a tie verdict on a 1/2 label with recorded.tie_credit; Auto-J's leaderboard (the "
             "publisher check) credits a tie only on a tie label, and its agreement is the card's both-correct, its "
             "consistency the card's positional agreement.",
             "Domains are the leaderboard's eight scenario groups (each pair's scenario is kept for the check)."]
    if unknown:
        notes.append(f"{len(unknown)} scenario(s) are not in Auto-J's groups ({', '.join(unknown[:5])}): group "
                     f"{OTHER_GROUP!r}; the publisher's pairwise_eval.py would stop on them (KeyError).")
    return RecordedSet(
        name=name or path.stem, format="autoj", path=str(path), pairs=pairs, judgments=judgments,
        provenance="Auto-J (Li et al. 2023, Generative Judge for Evaluating Alignment; github.com/GAIR-NLP/auto-j): "
                   "the pairwise test set with its human labels and the judges' outputs in both orders",
        license=license_name(path if path.is_dir() else path.parent),
        label_rule=f"the human label of {TESTDATA} (0 response 1, 1 response 2, 2 tie: a class of its own)",
        notes=notes, extras={"scenarios": scenarios, "testdata": str(test_path)},
    )


# -- the publisher's leaderboard ----------------------------------------------------------------------------------
def _publisher_code(j: Judgment | None) -> int | None:
    """A judgment's choice as Auto-J's 0/1/2 in the original order (pairwise_eval's exchange_to_ori_label), None
    for none or a missing order."""
    return None if j is None else TO_PUBLISHER.get(j.choice)


def right(pred: int | None, gt: int | None) -> bool:
    """pairwise_eval.py's ``gt_label == pred_label``: exact, so a tie verdict is right only on a tie label."""
    return pred is not None and pred == gt


def agree(pred: int | None, ex: int | None) -> bool:
    """The two orders agree (``pred_label_exchange == pred_label``). pairwise_eval.py asserts outputs in 0/1/2 and
    so has no rule for a none: here it never agrees, as in the card's positional agreement."""
    return pred is not None and pred == ex


def _counts(rs: RecordedSet, judgments: list[Judgment]) -> dict[str, dict[str, int]]:
    """pairwise_eval.py's register_scenario_wise_results, summed per group and overall (group_wise_collect)."""
    by: dict[str, dict[str, Judgment]] = {}
    for j in judgments:
        by.setdefault(j.pair_id, {})[j.order] = j
    scenarios = rs.extras.get("scenarios") or {}
    zero = {"correct": 0, "correct_exchange": 0, "correct_both": 0, "total": 0, "exchange_dont_agree": 0, "none": 0}
    groups: dict[str, dict[str, int]] = {OVERALL: dict(zero)}
    for pid, orders in by.items():
        gt = TO_PUBLISHER.get(rs.pairs[pid].label)
        pred, ex = _publisher_code(orders.get("original")), _publisher_code(orders.get("swapped"))
        row = {"correct": int(right(pred, gt)), "correct_exchange": int(right(ex, gt)),
               "correct_both": int(right(pred, gt) and right(ex, gt) and agree(pred, ex)), "total": 1,
               "exchange_dont_agree": int(not agree(pred, ex)),
               "none": int(pred is None or ("swapped" in orders and ex is None))}
        group = GROUP_OF.get(scenarios.get(pid, ""), OTHER_GROUP)
        for g in (group, OVERALL):
            acc = groups.setdefault(g, dict(zero))
            for k, v in row.items():
                acc[k] += v
    return groups


def _figures(c: dict[str, int], kind: str) -> dict[str, float]:
    """group_wise_collect's agreement / consistency of one group's counts, as it computes and rounds them."""
    total = float(c["total"])
    if kind == "single":
        return {"agreement": round(100 * c["correct"] / total, 2)}
    return {"agreement": round(100 * c["correct_both"] / total, 2),
            "consistency": round(100 * (1 - c["exchange_dont_agree"] / total), 2)}


def autoj_leaderboard(rs: RecordedSet) -> list[dict[str, Any]]:
    """Auto-J's leaderboard figures for every judge, by ``codes/leaderboard/pairwise_eval.py``'s definitions: one row
    per (judge, type, group, metric) with the reproduced value, n (pairs), the pairs with a none, and, where the
    publisher printed the figure (its README's example files), published and match. A ``pairwise`` judge has both
    types: ``pairwise`` (both orders) and ``single`` (``--type single``: its original-order file alone)."""
    by: dict[str, list[Judgment]] = {}
    for j in rs.judgments:
        by.setdefault(j.judge, []).append(j)
    order = [*SCENARIO_GROUPS, OTHER_GROUP, OVERALL]
    rows = []
    for judge, js in sorted(by.items()):
        kinds = ["pairwise", "single"] if any(j.order == "swapped" for j in js) else ["single"]
        for kind in kinds:
            use = js if kind == "pairwise" else [j for j in js if j.order == "original"]
            groups = _counts(rs, use)
            # the README's figures are of the full released test set: a subset is not compared with them
            published = README_FIGURES.get(judge, {}) if groups[OVERALL]["total"] == FULL_SIZE else {}
            for group in sorted(groups, key=order.index):
                for metric, value in _figures(groups[group], kind).items():
                    want = published.get((kind, metric), {}).get(group)
                    rows.append({"judge": judge, "type": kind, "group": group, "metric": metric, "reproduced": value,
                                 "published": want, "match": None if want is None else value == want,
                                 "n": groups[group]["total"], "n_with_none": groups[group]["none"]})
    return rows


def _summary(rows: list[dict[str, Any]]) -> str:
    overall = [r for r in rows if r["group"] == OVERALL]
    per = "; ".join(f"{r['judge']} ({r['type']}) {r['metric']} {r['reproduced']:g}" for r in overall)
    checked = [r for r in rows if r["match"] is not None]
    text = ("Auto-J's leaderboard (codes/leaderboard/pairwise_eval.py): per scenario group and overall, counts summed "
            "over the scenarios (not averaged); --type pairwise: agreement = pairs whose two orders both equal the "
            "human label (a tie counts only on a tie label) / pairs, consistency = 1 − pairs whose two orders "
            "differ / pairs; --type single: agreement of the original order alone; ×100, rounded to 2 places. "
            f"Overall: {per}.")
    nones = sorted({(r["judge"], r["type"], r["n_with_none"]) for r in overall if r["n_with_none"]})
    if nones:
        text += (" Pairs with an output that is no verdict (the publisher's script accepts only 0/1/2; here such an "
                 "output is wrong and inconsistent): "
                 + "; ".join(f"{j} ({k}): {n}" for j, k, n in nones) + ".")
    if checked:
        bad = [r for r in checked if not r["match"]]
        text += (f" {len(checked) - len(bad)} of {len(checked)} figures the publisher printed (codes/leaderboard/"
                 "README.md, its example outputs) reproduced exactly.")
        if bad:
            text += " Mismatches: " + "; ".join(f"{r['judge']} {r['type']} {r['group']} {r['metric']}: published "
                                                f"{r['published']}, here {r['reproduced']}" for r in bad[:10])
    return text


@register_check("autoj")
def autoj_publisher_check(rs: RecordedSet, analysis: Any) -> dict[str, Any] | None:
    """Auto-J's leaderboard agreement and consistency, reproduced from the verdicts by the publisher's definitions
    (``autoj_leaderboard``)."""
    rows = autoj_leaderboard(rs)
    if not rows:
        return None
    metrics = {f"{r['judge']} · {r['type']} · {r['metric']}": r["reproduced"] for r in rows if r["group"] == OVERALL}
    checked = [r for r in rows if r["match"] is not None]
    if checked:
        metrics.update(figures=len(checked), reproduced=sum(bool(r["match"]) for r in checked))
    return {"kind": "autoj leaderboard (pairwise_eval.py)", "rows": rows, "summary": _summary(rows),
            "metrics": metrics}


@register_format("autoj", keys=("testdata",),
                 what="Auto-J's repository or data/outputs folder: data/test/testdata_pairwise.jsonl and "
                      "data/outputs/pairwise_[exchange_]<judge>_output.jsonl")
def _autoj_source(s: Any, ctx: SourceContext) -> RecordedSet:
    testdata = resolve_path(s.testdata, ctx.project) if s.testdata else None
    return read_autoj(ctx.path, testdata=testdata, name=ctx.name, judges=s.judges)
