"""JudgeBench's judge outputs (Tan et al. 2024, "JudgeBench: A Benchmark for Evaluating LLM-Based Judges";
github.com/ScalerLab/JudgeBench), read as ``run_judge.py`` writes them::

    outputs/<dataset>,judge_name=<judge_name>,judge_model=<model with / as _>.jsonl    one pair a line:
    {pair_id, original_id, source, question, response_model, response_A, response_B, label: "A>B"|"B>A",
     judge_name, judgments: [first, second]}
    a judgment: {"judgment": {judge_model, prompt, response | scores}, "decision": "A>B"|"B>A"|"A=B"|null} or null

The second judgment saw the responses swapped (``response_B`` shown as "A"); a file of one judgment a pair is a
``--single_game`` run (order-free judges such as reward models). A pair's label is objective (which response is
correct). Judge = the judge model, condition = ``judge_name`` (the prompt / protocol: ``arena_hard``,
``reward_model``, …), domain = the source's category (JudgeBench's prefixes: ``mmlu-pro`` knowledge,
``livebench-reasoning``, ``livebench-math``, ``livecodebench``). Lines are in the order judging finished, so pairs
are joined on ``pair_id``.

Verdicts as presented: ``A>B`` first, ``B>A`` second, ``A=B`` (or ``B=A``) a tie; null, a failed judgment and any
other string (e.g. ``A<B``) are ``none``, counted, their raw decision kept. A reward model's decision is the larger
of its two ``scores`` with equal scores broken toward B; here equal scores are a tie (the recorded decision kept for
the check). ``judgebench_accuracy`` reproduces ``utils/metrics.py`` from the recorded decisions themselves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubriclab.errors import InputError
from rubriclab.recorded._jsonfile import jsonl_rows
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, license_name, meta_tuple
from rubriclab.recorded._registry import SourceContext, register_check, register_format

KEYS = ("pair_id", "source", "question", "response_A", "response_B", "label", "judgments")
LABELS = {"A>B": "1", "B>A": "2", "A=B": "tie"}
AS_PRESENTED = {"A>B": "first", "B>A": "second", "A=B": "tie", "B=A": "tie"}
ORDERS = ("original", "swapped")
# run_judge.py prints the accuracy per source prefix, then overall ("" matches every source)
CATEGORIES = (("mmlu-pro", "knowledge"), ("livebench-reasoning", "reasoning"), ("livebench-math", "math"),
              ("livecodebench", "coding"), ("", "overall"))
_FILE = re.compile(r"^(?P<dataset>.+),judge_name=(?P<name>[^,]+),judge_model=(?P<model>.+)\.jsonl$")


def flip_judgment(decision: Any) -> Any:
    """The decision read from the other order (utils/metrics.py ``flip_judgment``: only A>B and B>A change)."""
    return {"A>B": "B>A", "B>A": "A>B"}.get(decision, decision) if isinstance(decision, str) else decision


def category(source: str) -> str:
    """A pair's domain: the name of the first JudgeBench prefix its source starts with, else the source."""
    return next((name for prefix, name in CATEGORIES[:-1] if source.startswith(prefix)), source)


def _file_parts(path: Path) -> tuple[str, str | None, str | None]:
    m = _FILE.match(path.name)
    return (m["dataset"], m["name"], m["model"]) if m else (path.stem, None, None)


def _judgment(entry: Any, path: Path, line: int, i: int) -> tuple[Any, str, str, float | None, str | None]:
    """(decision as recorded, verdict as presented, raw text, score, the judge model it names) of one entry."""
    if entry is None:  # run_judge.py stores None where the judge raised
        return None, "none", "", None, None
    if not isinstance(entry, dict) or "decision" not in entry:
        raise InputError(f"judgments[{i}] is {str(entry)[:60]!r}", file=str(path), line=line, field="judgments",
                         expected='null or {"judgment": {...}, "decision": "A>B" | "B>A" | "A=B" | null}')
    decision = entry["decision"]
    if decision is not None and not isinstance(decision, str):
        raise InputError(f"judgments[{i}].decision is {decision!r}", file=str(path), line=line, field="decision",
                         expected='a decision string such as "A>B", or null')
    inner = entry.get("judgment") if isinstance(entry.get("judgment"), dict) else {}
    verdict = AS_PRESENTED.get(decision, "none")
    score = None
    scores = inner.get("scores")
    if (isinstance(scores, list) and len(scores) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in scores)):
        score = float(scores[0] - scores[1])
        if score == 0 and verdict != "none":
            verdict = "tie"  # the reward-model judges break equal scores toward B: no preference was stated
    raw = inner.get("response") or (f"scores: {scores}" if scores is not None else
                                     "" if decision is None else str(decision))
    model = inner.get("judge_model")
    return decision, verdict, str(raw), score, (str(model) if model else None)


def _label(value: Any, path: Path, line: int) -> str:
    if value not in LABELS:
        raise InputError(f"label {value!r}", file=str(path), line=line, field="label",
                         expected="A>B or B>A (which response is correct; A=B for a pair of equal ones)")
    return LABELS[value]


def read_judgebench_file(path: Path, known: dict[str, RecordedPair] | None = None) -> dict[str, Any]:
    """One output file: ``{"judgments", "pairs", "sources" (pair → source), "decisions" ((pair, judge, condition,
    order) → the decision as recorded), "info" (file, dataset, judge, condition, games, pairs)}``; a pair of
    ``known`` (other files' pairs) must be the same pair here."""
    known = known or {}
    pairs: dict[str, RecordedPair] = {}
    sources: dict[str, str] = {}
    decisions: dict[tuple[str, str, str, str], Any] = {}
    dataset, name, model = _file_parts(path)
    rows = jsonl_rows(path)
    if not rows:
        raise InputError("no rows", file=str(path), expected="one judged pair a line")
    games = None
    seen: set[str] = set()
    parsed = []
    for line, row in rows:
        if not isinstance(row, dict):
            raise InputError(f"a JSON {type(row).__name__}", file=str(path), line=line, expected="a JSON object")
        for key in KEYS:
            if key not in row:
                raise InputError(f"no '{key}'", file=str(path), line=line, field=key,
                                 expected=f"a judged pair with {', '.join(KEYS)}")
        pid = str(row["pair_id"])
        if pid in seen:
            raise InputError(f"pair_id {pid} appears twice", file=str(path), line=line, field="pair_id",
                             expected="one line per pair (run_judge.py skips pairs already judged)")
        seen.add(pid)
        js = row["judgments"]
        if not isinstance(js, list) or len(js) not in (1, 2):
            raise InputError(f"judgments holds {len(js) if isinstance(js, list) else type(js).__name__}",
                             file=str(path), line=line, field="judgments",
                             expected="a list of 2 judgments (both orders) or 1 (--single_game)")
        if games is None:
            games = len(js)
        elif len(js) != games:
            raise InputError(f"{len(js)} judgments where the file's first line has {games}", file=str(path),
                             line=line, field="judgments", expected="one run: every pair judged in the same orders")
        label = _label(row["label"], path, line)
        source = str(row["source"])
        pair = RecordedPair(id=pid, labels=(("label", label),), prompt=str(row["question"]),
                            output_1=str(row["response_A"]), output_2=str(row["response_B"]), domain=category(source))
        old = known.get(pid)
        if old is not None and (old.labels, old.prompt, old.output_1, old.output_2) != (
                pair.labels, pair.prompt, pair.output_1, pair.output_2):
            raise InputError(f"pair_id {pid} differs from the same pair in another file", file=str(path), line=line,
                             field="pair_id", expected="one question, response pair and label per pair_id")
        pairs[pid], sources[pid] = pair, source
        parsed.append((line, pid, row, [_judgment(e, path, line, i) for i, e in enumerate(js)]))
    named = {m for *_, js in parsed for *_, m in js if m}
    judge = model or "judge"
    if model and len(named) == 1 and next(iter(named)).replace("/", "_") == model:
        judge = next(iter(named))  # the file name writes the model's "/" as "_"
    condition = name or str(parsed[0][2].get("judge_name") or "published")
    out = []
    for line, pid, _row, js in parsed:
        for order, (decision, verdict, raw, score, _m) in zip(ORDERS, js):
            decisions[(pid, judge, condition, order)] = decision
            meta = {"file": path.name, "line": line, "decision": "null" if decision is None else decision}
            if score is not None:  # a reward model scores each response alone: position plays no part
                meta["mode"] = "rating"
            out.append(Judgment(pair_id=pid, judge=judge, condition=condition, order=order, verdict=verdict, raw=raw,
                                score=score, meta=meta_tuple(meta)))
    info = {"file": path.name, "dataset": dataset, "judge": judge, "condition": condition, "games": games,
            "pairs": len(parsed)}
    return {"judgments": out, "pairs": pairs, "sources": sources, "decisions": decisions, "info": info}


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    folder = path / "outputs" if (path / "outputs").is_dir() else path
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise InputError("no *.jsonl output file", file=str(folder),
                         expected="JudgeBench's outputs/<dataset>,judge_name=<name>,judge_model=<model>.jsonl")
    return files


def read_judgebench(path: str | Path, *, name: str | None = None, judges: Iterable[str] | None = None,
                    conditions: Iterable[str] | None = None) -> RecordedSet:
    """Every JudgeBench output file in ``path`` (the repository, its ``outputs/`` folder, or one file), optionally
    only some judges (judge models) and conditions (judge names)."""
    path = Path(path)
    keep_j, keep_c = set(judges or []), set(conditions or [])
    pairs: dict[str, RecordedPair] = {}
    sources: dict[str, str] = {}
    decisions: dict[tuple[str, str, str, str], Any] = {}
    judgments: list[Judgment] = []
    files, seen = [], []
    for f in _files(path):
        got = read_judgebench_file(f, pairs)
        info = got["info"]
        seen.append(f"{info['judge']} · {info['condition']}")
        if (keep_j and info["judge"] not in keep_j) or (keep_c and info["condition"] not in keep_c):
            continue
        judgments += got["judgments"]
        pairs.update(got["pairs"])
        sources.update(got["sources"])
        decisions.update(got["decisions"])
        files.append(info)
    if not judgments:
        raise InputError("no output file for the judges/conditions asked", file=str(path),
                         expected="one of (judge · condition): " + ", ".join(sorted(set(seen))))
    ties = sum(1 for j in judgments if j.verdict == "tie" and j.score == 0)
    notes = ["Labels are objective (which response is correct). Verdicts are the recorded decisions (A>B first, B>A "
             "second, A=B a tie); null, a failed judgment or any other string is `none`, counted wrong, kept in "
             "judgments.parquet (meta: decision).",
             "JudgeBench's own accuracy (the publisher check) reads both orders together: a pair is right when more "
             "of its two decisions pick the correct response than the wrong one (one right and one tie or null is "
             "right, one right and one wrong is not). The card's accuracy instead averages the orders, a tie "
             "earning recorded.tie_credit.",
             "A judge run on several datasets (GPT-4o's and Claude's pairs) is one card cell over all its pairs; the "
             "publisher check reports each output file."]
    if ties:
        notes.append(f"{ties} reward-model judgment(s) scored both responses equally: a tie here, B>A in the "
                     "publisher's decision (its tie-break), which the publisher check uses.")
    return RecordedSet(
        name=name or path.stem, format="judgebench", path=str(path), pairs=pairs,
        judgments=judgments,
        provenance="JudgeBench (Tan et al. 2024; github.com/ScalerLab/JudgeBench): judges' decisions on response "
                   "pairs with objective correctness labels, both presentation orders, as run_judge.py writes them",
        license=license_name(path if path.is_dir() else path.parent),
        label_rule="the pair's objective label (A>B: response A is correct, B>A: response B)",
        notes=notes, extras={"decisions": decisions, "sources": sources, "files": files},
    )


# -- the publisher's accuracy -------------------------------------------------------------------------------------
def _decision(rs: RecordedSet, j: Judgment | None) -> Any:
    if j is None:
        return None
    return (rs.extras.get("decisions") or {}).get((j.pair_id, j.judge, j.condition, j.order))


def pair_counter(label: str, d1: Any, d2: Any) -> int:
    """utils/metrics.py's per-pair counter over the two decisions (the second already flipped back): +1 for each
    equal to the label, −1 for each equal to the flipped label (a tie, a null or another string: 0)."""
    return sum(1 if d == label else -1 if d == flip_judgment(label) else 0 for d in (d1, d2))


def two_order_counts(pairs: list[tuple[str, Any, Any]]) -> dict[str, int]:
    """utils/metrics.py ``compute_final_metrics`` with ``reverse_order``: over ``(label, first decision, second
    decision as recorded)``, the second flipped back; per pair +1 for each decision equal to the label, −1 for each
    equal to the flipped label; ``n_correct`` pairs > 0, ``n_incorrect`` < 0, ``n_tie`` = 0; and its consistency
    counts (``n_all_correct``, ``n_all_incorrect``, ``n_some_correct``, ``n_inconsistent``, ``n_nulls``)."""
    c = dict.fromkeys(("n_pairs", "n_correct", "n_incorrect", "n_tie", "n_all_correct", "n_all_incorrect",
                       "n_some_correct", "n_inconsistent", "n_nulls"), 0)
    for label, d1, raw2 in pairs:
        d2 = flip_judgment(raw2)
        c["n_pairs"] += 1
        c["n_nulls"] += d1 is None or d2 is None
        if d1 == label and d2 == label:
            c["n_all_correct"] += 1
        elif d1 != label and d2 != label:
            c["n_all_incorrect"] += 1
        else:
            c["n_some_correct"] += 1
        c["n_inconsistent"] += d1 != d2
        counter = pair_counter(label, d1, d2)
        c["n_correct" if counter > 0 else "n_incorrect" if counter < 0 else "n_tie"] += 1
    return c


def single_game_counts(pairs: list[tuple[str, Any]]) -> dict[str, int]:
    """utils/metrics.py without ``reverse_order`` (``--single_game``): the first decision equal to the label."""
    n_correct = sum(d == label for label, d in pairs)
    return {"n_pairs": len(pairs), "n_correct": n_correct, "n_incorrect": len(pairs) - n_correct}


def judgebench_accuracy(rs: RecordedSet) -> list[dict[str, Any]]:
    """JudgeBench's accuracy (``100 * n_correct / n_pairs``) for every output file read, per source category as
    ``run_judge.py`` prints it (mmlu-pro, livebench-reasoning, livebench-math, livecodebench, then overall), from the
    recorded decisions by ``utils/metrics.py``'s rule; with that rule's counts."""
    labels_back = {v: k for k, v in LABELS.items()}
    sources = rs.extras.get("sources") or {}
    by: dict[tuple[str, str, str], dict[str, dict[str, Judgment]]] = {}
    for j in rs.judgments:
        key = (j.meta_value("file") or "", j.judge, j.condition)
        by.setdefault(key, {}).setdefault(j.pair_id, {})[j.order] = j
    games_of = {f["file"]: f["games"] for f in rs.extras.get("files") or []}
    rows = []
    for (file, judge, condition), per_pair in sorted(by.items()):
        games = games_of.get(file, 2 if any("swapped" in o for o in per_pair.values()) else 1)
        for prefix, cat in CATEGORIES:
            ids = sorted(pid for pid in per_pair if sources.get(pid, "").startswith(prefix))
            if not ids:
                continue  # the publisher's script divides by zero here
            label = {pid: labels_back[rs.pairs[pid].label] for pid in ids}
            if games == 2:
                counts = two_order_counts([(label[p], _decision(rs, per_pair[p].get("original")),
                                            _decision(rs, per_pair[p].get("swapped"))) for p in ids])
                rule = "two orders (reverse_order)"
            else:
                counts = single_game_counts([(label[p], _decision(rs, per_pair[p].get("original"))) for p in ids])
                rule = "single game"
            # published / match: JudgeBench's files carry no figure of their own to compare with
            rows.append({"file": file, "judge": judge, "condition": condition, "rule": rule,
                         "category": prefix or "Overall", "domain": cat,
                         "accuracy": 100 * counts["n_correct"] / counts["n_pairs"], **counts,
                         "published": None, "match": None})
    return rows


def _summary(rows: list[dict[str, Any]]) -> str:
    overall = [r for r in rows if r["category"] == "Overall"]
    per = "; ".join(f"{r['judge']} · {r['condition']} ({r['file'].split(',judge_name=')[0]}): {r['accuracy']:.2f}% "
                    f"of {r['n_pairs']} ({r['n_tie']} undecided, {r['n_inconsistent']} inconsistent)"
                    if r["rule"].startswith("two") else
                    f"{r['judge']} · {r['condition']}: {r['accuracy']:.2f}% of {r['n_pairs']} (single game)"
                    for r in overall)
    return ("JudgeBench's accuracy (utils/metrics.py compute_final_metrics; per source category as run_judge.py "
            "prints it): per pair, +1 for each order whose decision (the second read back from the swapped order) is "
            "the label and −1 for each that is the opposite; the pair is correct when the sum is positive, so a pair "
            "with one right decision and one tie or null counts correct, one right and one wrong counts as "
            "not correct (undecided), and accuracy = correct pairs / pairs × 100. "
            f"Overall: {per}.")


@register_check("judgebench")
def judgebench_publisher_check(rs: RecordedSet, analysis: Any) -> dict[str, Any] | None:
    """JudgeBench's accuracy under its own two-order rule, reproduced from the recorded decisions
    (``judgebench_accuracy``)."""
    rows = judgebench_accuracy(rs)
    if not rows:
        return None
    metrics = {f"{r['judge']} · {r['condition']} · {r['file'].split(',judge_name=')[0]}": r["accuracy"]
               for r in rows if r["category"] == "Overall"}
    return {"kind": "judgebench accuracy (utils/metrics.py)", "rows": rows, "summary": _summary(rows),
            "metrics": metrics}


@register_format("judgebench", what="JudgeBench's repository or outputs/ folder: <dataset>,judge_name=<name>,"
                                    "judge_model=<model>.jsonl, one judged pair a line")
def _judgebench_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_judgebench(ctx.path, name=ctx.name, judges=s.judges, conditions=s.conditions)
