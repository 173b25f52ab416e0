"""inspect_ai eval logs as recorded judgments: each scorer's value on each sample is a grader's judgment, read with
inspect itself (``inspect_ai.log.read_eval_log``; a ``.eval`` or ``.json`` log, or a folder of them). "I graded 200
samples by hand: how good is my grader, and where does it disagree?"

What is read, per log:

* the item: one graded answer — a sample's id (``<model>/<id>`` when the logs hold several models under test;
  ``<id>#<epoch>`` when a sample ran several epochs, each epoch's answer its own item; with ``epochs: conditions``
  the epoch is part of the condition instead). Prompt = the sample's input. A sample that errored is left out,
  counted: its answer was never graded as a finished one.
* the judgment: the value of each scorer in ``sample.scores`` (a dict value: one condition per key). Condition =
  the scorer's name (``<task>/<scorer>`` when the logs hold several tasks). Judge = the model(s) the scorer called,
  as the sample's events record them (a panel: ``a + b``), else its ``model`` option, else, for inspect's
  ``model_graded_*``, the ``grader`` role or the evaluated model (what inspect grades with), else the scorer's name.
* the label: ``labels: target`` — the sample's target read as a grade; or ``labels: <table>`` — a CSV / JSON lines
  / parquet file of human grades with columns ``sample_id`` and ``label`` (optional ``epoch``: that epoch only,
  else every epoch of the sample; ``model``, required with several models under test; ``annotator``: several
  annotators, the label is their majority). No ``labels``: nothing is compared with a label.

Grades → the project's pairwise records (``rubriclab.recorded._records``). A pointwise grade ("is this answer
correct?") is read as inspect's own ``value_to_float`` reads it: ``C``/correct/yes/true/1 → ``1`` = correct,
``I``/incorrect/no/false/0 and ``N`` (no answer) → ``2`` = incorrect, ``P``/partial/0.5 → ``tie`` = partial; a
number against ``threshold`` (≥ → correct) where one is set, and any other number without one is an error. The
human's grade is read the same way and becomes the item's label, so the card's accuracy is the share of answers on
which grader and human agree, κ their chance-corrected agreement and the confusion matrix label (rows) × grade.
Such judgments are order-free (``mode=rating``): there is one graded answer, no presentation order. A scorer whose
values are ``A``/``B``/``tie`` (first/second shown) is a pairwise grader: its verdict is as presented, the
sample's metadata ``order`` (``original`` | ``swapped``) and ``pair_id`` (both orders of one pair) place it, and a
label (target or table) is read as presented in its sample. A value the scorer could not produce — inspect's
unscored NaN, a ``grader_failed`` / ``scoring_failed`` reason, an older log's "Grade not found in model output"
(recorded as ``I``), a missing score, a word outside the scale — is ``none``: counted, never guessed, the
explanation kept as raw text.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from rubriclab.data import read_rows
from rubriclab.errors import InputError, MissingDependencyError
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, meta_tuple, to_choice, to_verdict
from rubriclab.recorded._registry import SourceContext, register_format

# inspect's value_to_float: C = yes = true = 1, P = 0.5, I = N = no = false = 0 (N: no answer, incorrect)
GRADES = {"c": "1", "correct": "1", "yes": "1", "true": "1", "i": "2", "incorrect": "2", "no": "2", "false": "2",
          "n": "2", "p": "tie", "partial": "tie"}
NUMBER_GRADES = {1.0: "1", 0.0: "2", 0.5: "tie"}
PAIRWISE = {"a": "first", "first": "first", "b": "second", "second": "second", "tie": "tie", "draw": "tie"}
_PAIRWISE_ONLY = {"a", "b", "first", "second"}  # the words that make a scorer pairwise
FAILED_REASONS = ("grader_failed", "scoring_failed")  # inspect's ScoreReason for the instrument failing
LEGACY_FAILED = "Grade not found in model output"  # model_graded_* before Score.unscored: value I, this explanation
MODEL_GRADED = ("model_graded_qa", "model_graded_fact")
EPOCHS = ("items", "conditions")
MEANING = "1 = correct, 2 = incorrect, tie = partial"
_OUT1, _OUT2 = ("output_1", "response_a", "response_1"), ("output_2", "response_b", "response_2")
_ANSWER_CHARS = 300


def _inspect() -> tuple[Any, Any]:
    try:
        from inspect_ai.log import list_eval_logs, read_eval_log
    except ImportError:
        raise MissingDependencyError("recorded format inspect_ai (reading inspect_ai eval logs)",
                                     "'rubriclab[inspect]'  # or: pip install inspect-ai") from None
    return list_eval_logs, read_eval_log


def _log_files(path: Path) -> list[str]:
    list_eval_logs, _ = _inspect()
    if path.is_file():
        return [str(path)]
    if not path.is_dir():
        raise InputError("not found", file=str(path), expected="an inspect_ai eval log (.eval, .json) or a folder of them")
    files = sorted(unquote(urlparse(i.name).path) if i.name.startswith("file:") else i.name
                   for i in list_eval_logs(str(path), recursive=True))
    if not files:
        raise InputError("no inspect_ai eval log in the folder", file=str(path),
                         expected="*.eval or *.json logs written by inspect_ai (inspect eval … --log-dir)")
    return files


def _id(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


def _text(value: Any) -> str:
    """A sample's input (a string or chat messages) as text."""
    if isinstance(value, str):
        return value
    return "\n\n".join(f"{getattr(m, 'role', '')}: {getattr(m, 'text', m)}" for m in value or ())


@dataclass
class _Scale:
    """How one condition's values become choices (``1``/``2``/``tie``) or verdicts."""

    threshold: float | None

    def pointwise(self, value: Any, where: str, file: str, field_: str) -> str | None:
        """A pointwise grade as ``1``/``2``/``tie``; None = not a grade on this scale."""
        if isinstance(value, bool):
            return "1" if value else "2"
        number = value if isinstance(value, (int, float)) else None
        if isinstance(value, str):
            word = value.strip().lower()
            if word in GRADES:
                return GRADES[word]
            try:
                number = float(word)
            except ValueError:
                return None
        if number is None or math.isnan(number):
            return None
        if self.threshold is not None:
            return "1" if number >= self.threshold else "2"
        if float(number) in NUMBER_GRADES:
            return NUMBER_GRADES[float(number)]
        raise InputError(f"{where}: value {value!r} is a number other than 0, 0.5 and 1", file=file, field=field_,
                         expected="a threshold for this source (threshold: a value ≥ it is a correct grade)")


def _pairwise_word(value: Any) -> str | None:
    return PAIRWISE.get(value.strip().lower()) if isinstance(value, str) else None


def _failed(score: Any) -> str | None:
    """Why a score is no grade (inspect could not produce one), or None."""
    value = score.value
    if isinstance(value, float) and math.isnan(value):
        return str(score.reason or "unscored")
    if score.reason in FAILED_REASONS:
        return str(score.reason)
    if (score.explanation or "").startswith(LEGACY_FAILED):
        return "grade not found"
    return None


# -- the grader's model --------------------------------------------------------------------------------------------
def _scorer_models(sample: Any) -> dict[str, tuple[set[str], str | None]]:
    """Per scorer of the sample: the models called inside its last span (a re-scored log keeps the earlier
    scoring's events before the new ones) and the last call's stop reason. Logs before inspect's spans (0.3.4x)
    mark a scorer with step begin/end events instead."""
    parent: dict[str, str | None] = {}
    scorer_of: dict[str, str] = {}
    spans: dict[str, tuple[set[str], str | None]] = {}
    last: dict[str, str] = {}  # scorer -> its last span
    step: str | None = None  # the open legacy scorer step
    for n, e in enumerate(getattr(sample, "events", None) or ()):
        kind = getattr(e, "event", None)
        if kind == "span_begin":
            parent[e.id] = e.parent_id
            if e.type == "scorer":
                scorer_of[e.id], last[e.name] = e.name, e.id
                spans[e.id] = (set(), None)
        elif kind == "step" and e.type == "scorer":
            step = f"step:{n}" if e.action == "begin" else None
            if step:
                scorer_of[step], last[e.name], spans[step] = e.name, step, (set(), None)
        elif kind == "model":
            span, hops = getattr(e, "span_id", None), 0
            while span is not None and span not in scorer_of and hops < 64:  # nested spans inside the scorer
                span, hops = parent.get(span), hops + 1
            span = span if span in scorer_of else step
            if span in scorer_of:
                output = getattr(e, "output", None)
                stop = str(output.stop_reason) if output is not None and getattr(output, "choices", None) else None
                spans[span] = (spans[span][0] | {str(e.model)}, stop)
    return {name: spans[span] for name, span in last.items()}


def _option_models(option: Any) -> list[str]:
    if isinstance(option, str):
        return [option]
    if isinstance(option, dict) and isinstance(option.get("model"), str):
        return [option["model"]]
    if isinstance(option, list):
        return [m for o in option for m in _option_models(o)]
    return []


def _judge(scorer: str, seen: set[str], spec: Any) -> str:
    """The scorer's grading model(s) (module docstring), else the scorer's name."""
    models = sorted(seen)
    if not models:
        options = next((s.options or {} for s in spec.scorers or () if s.name == scorer), {})
        models = _option_models(options.get("model"))
        if not models and scorer in MODEL_GRADED:
            roles = spec.model_roles or {}
            models = _option_models(roles.get(options.get("model_role", "grader"))) or [spec.model]
    return " + ".join(models) if models else scorer


# -- reading -------------------------------------------------------------------------------------------------------
@dataclass
class _Item:
    """One graded answer (a RecordedPair to be) and where it was first read."""

    pid: str
    sample_id: str
    epoch: int
    model: str
    order: str
    texts: dict[str, str]
    file: str
    target: Any = None
    answers: dict[int, str] = field(default_factory=dict)  # epoch -> the graded answer (one with epochs: items)


@dataclass
class _Graded:
    item: _Item
    judge: str
    condition: str
    value: Any
    score: Any
    file: str
    task: str
    finish: str | None
    epoch: int


def _read_logs(files: list[str], epochs: str) -> tuple[dict[str, _Item], list[_Graded], Counter, list[str]]:
    _, read_eval_log = _inspect()
    logs = []
    for file in files:
        try:
            log = read_eval_log(file)
        except Exception as exc:  # noqa: BLE001 - inspect raises pydantic, JSON and zip errors alike
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"not a readable inspect_ai eval log ({first[:160]})", file=file,
                             expected="a .eval or .json log written by inspect_ai") from None
        if not log.samples:
            raise InputError("the log holds no samples", file=file,
                             expected="a log written with samples (inspect eval's default; not --no-log-samples)")
        logs.append((file, log))
    several_models = len({log.eval.model for _, log in logs}) > 1
    several_tasks = len({log.eval.task for _, log in logs}) > 1
    split_epochs = epochs == "items" and max(s.epoch for _, log in logs for s in log.samples) > 1
    items: dict[str, _Item] = {}
    graded: list[_Graded] = []
    counts: Counter = Counter()
    statuses = []
    errored: set[tuple[str, str, int]] = set()
    for file, log in logs:
        spec, task = log.eval, log.eval.task
        if log.status != "success":
            statuses.append(f"{Path(file).name}: status {log.status}")
        seen_models: dict[str, set[str]] = {}
        finish: dict[tuple[str, int, str], str | None] = {}
        for s in log.samples:
            for scorer, (models, stop) in _scorer_models(s).items():
                seen_models.setdefault(scorer, set()).update(models)
                finish[(_id(s.id), s.epoch, scorer)] = stop
        conditions: dict[str, str] = {}  # condition -> its scorer (a registry name may hold a "/")
        for s in log.samples:
            for scorer, sc in (s.scores or {}).items():
                keys = sc.value if isinstance(sc.value, dict) else {None: None}
                for key in keys:
                    conditions.setdefault(scorer if key is None else f"{scorer}/{key}", scorer)
        judges = {scorer: _judge(scorer, seen_models.get(scorer, set()), spec)
                  for scorer in set(conditions.values())}
        epoch_condition = epochs == "conditions" and max(x.epoch for x in log.samples) > 1
        for s in sorted(log.samples, key=lambda x: (_id(x.id), x.epoch)):
            if s.error is not None:  # counted once however many logs hold it
                errored.add((spec.model, _id(s.id), s.epoch))
                continue
            item = _item(s, spec.model, several_models, split_epochs, file, items)
            given = {}
            for scorer, sc in (s.scores or {}).items():
                if isinstance(sc.value, dict):
                    given.update({f"{scorer}/{k}": (scorer, v, sc) for k, v in sc.value.items()})
                else:
                    given[scorer] = (scorer, sc.value, sc)
            for cond, scorer in conditions.items():
                _, value, sc = given.get(cond, (scorer, None, None))
                name = (f"{task}/{cond}" if several_tasks else cond) + (f" (epoch {s.epoch})" if epoch_condition else "")
                graded.append(_Graded(item, judges[scorer], name, value, sc, file, task,
                                      finish.get((_id(s.id), s.epoch, scorer)), s.epoch))
    counts["errored"] = len(errored)
    return items, graded, counts, statuses


def _item(s: Any, model: str, several_models: bool, split_epochs: bool, file: str, items: dict[str, _Item]) -> _Item:
    meta = s.metadata if isinstance(s.metadata, dict) else {}
    sid = _id(s.id)
    base = _id(meta["pair_id"]) if not _blank(meta.get("pair_id")) else sid
    pid = (f"{model}/" if several_models else "") + base + (f"#{s.epoch}" if split_epochs else "")
    order = str(meta.get("order") or "original").strip().lower()
    where = f"sample {sid!r} (epoch {s.epoch})"
    if order not in ("original", "swapped"):
        raise InputError(f"{where}: metadata order {meta.get('order')!r}", file=file, field="metadata.order",
                         expected="original or swapped (or none: original)")
    texts = {"prompt": _text(s.input),
             "output_1": next((str(meta[k]) for k in (_OUT1 if order == "original" else _OUT2) if meta.get(k)), ""),
             "output_2": next((str(meta[k]) for k in (_OUT2 if order == "original" else _OUT1) if meta.get(k)), ""),
             "domain": str(meta["domain"]) if isinstance(meta.get("domain"), str) else ""}
    answer = s.output.completion if s.output is not None else ""
    key = f"{pid}|{order}"
    known = items.get(key)
    if known is None:
        items[key] = known = _Item(pid, sid, s.epoch, model, order, texts, file, s.target)
    if known.texts["prompt"] != texts["prompt"] or known.answers.get(s.epoch, answer) != answer:
        what = "input" if known.texts["prompt"] != texts["prompt"] else "graded answer"
        raise InputError(f"{where} has another {what} than in {known.file}: two logs grade different answers under "
                         "one id", file=file, field="input" if what == "input" else "output",
                         expected="logs of the same answers (e.g. re-scored with inspect score); read others as "
                                  "separate sources")
    known.answers[s.epoch] = answer
    return known


# -- grades → verdicts ---------------------------------------------------------------------------------------------
def _kinds(graded: list[_Graded]) -> dict[str, str]:
    """Per condition: ``pairwise`` where any of its values is A/B (first/second shown), else ``pointwise``."""
    kinds: dict[str, str] = {}
    for g in graded:
        word = g.value.strip().lower() if isinstance(g.value, str) else None
        if word in _PAIRWISE_ONLY:
            kinds[g.condition] = "pairwise"
        else:
            kinds.setdefault(g.condition, "pointwise")
    if len(set(kinds.values())) > 1:
        pw = sorted(c for c, k in kinds.items() if k == "pairwise")
        pt = sorted(c for c, k in kinds.items() if k == "pointwise")
        raise InputError(f"pairwise scorers ({', '.join(pw)}) and pointwise ones ({', '.join(pt)}) grade the same "
                         "samples", file=graded[0].file, field="scores",
                         expected="one kind of grade per source (read the others with conditions: or as a second "
                                  "source)")
    return kinds


def _verdict(g: _Graded, kind: str, scale: _Scale) -> tuple[str, str | None, float | None]:
    """(verdict as presented, why it is none, the numeric value) of one graded answer."""
    if g.score is None:
        return "none", "no score recorded", None
    failed = _failed(g.score)
    if failed:
        return "none", failed, None
    value = g.value
    if isinstance(value, float) and math.isnan(value):
        return "none", "unscored", None
    if kind == "pairwise":
        verdict = _pairwise_word(value)
        return (verdict, None, None) if verdict else ("none", "not a pairwise grade", None)
    where = f"scorer {g.condition!r}, sample {g.item.sample_id!r} (epoch {g.item.epoch})"
    choice = scale.pointwise(value, where, g.file, "scores")
    if choice is None:
        return "none", "not a grade", None
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return to_verdict("original", choice), None, number


# -- labels --------------------------------------------------------------------------------------------------------
def _label_choice(value: Any, kind: str, order: str, scale: _Scale, where: str, file: str, field_: str,
                  line: int | None = None) -> str:
    """A human's grade (or a target) as the pair's ``1``/``2``/``tie``; an error naming where when it is none."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if kind == "pairwise":
        word = value.strip().lower() if isinstance(value, str) else _id(value)
        verdict = PAIRWISE.get(word) or {"1": "first", "2": "second"}.get(word)
        if verdict:
            return to_choice(order, verdict)
        expected = "A, B or tie (as presented in the sample: A = shown first)"
    else:
        try:
            choice = scale.pointwise(value, where, file, field_) if not isinstance(value, list) else None
        except InputError:
            choice = None
        if choice:
            return choice
        expected = ("a grade: C/correct/yes/true/1, I/incorrect/no/false/0 or N, P/partial/0.5"
                    + (f", or a number (≥ {scale.threshold:g} = correct)" if scale.threshold is not None
                       else " (another number needs a threshold)"))
    if field_ == "target":
        expected += " — or give the human labels in a table (labels: <file> with sample_id, label)"
    raise InputError(f"{where}: {field_} {value!r} is not a grade", file=file, line=line, field=field_,
                     expected=expected)


def _put_label(item_labels: dict[str, dict[str, tuple[str, str]]], pid: str, annotator: str, choice: str,
               where: str, file: str, line: int | None, field_: str) -> None:
    prev = item_labels.setdefault(pid, {}).get(annotator)
    if prev is not None and prev[0] != choice:
        raise InputError(f"{where}: {annotator}'s label of item {pid!r} is {choice} here but {prev[0]} at {prev[1]}",
                         file=file, line=line, field=field_, expected="one label per item and annotator")
    item_labels[pid][annotator] = (choice, f"{Path(file).name}" + (f":{line}" if line else ""))


def _target_labels(items: dict[str, _Item], kind: str, scale: _Scale) -> dict[str, dict[str, tuple[str, str]]]:
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for it in items.values():
        where = f"sample {it.sample_id!r} (epoch {it.epoch})"
        choice = _label_choice(it.target, kind, it.order, scale, where, it.file, "target")
        _put_label(out, it.pid, "target", choice, where, it.file, None, "target")
    return out


def _table_labels(path: Path, items: dict[str, _Item], kind: str, scale: _Scale, several_models: bool,
                  epochs: str, counts: Counter) -> dict[str, dict[str, tuple[str, str]]]:
    file = str(path)
    rows = read_rows(path)
    if not rows:
        raise InputError("no rows", file=file, expected="one row per human label: sample_id, label")
    cols = {k for _, r in rows for k in r}
    for col in ("sample_id", "label"):
        if col not in cols:
            raise InputError("required column is missing", file=file, field=col,
                             expected="columns sample_id and label (optional: epoch, model, annotator)")
    models = sorted({it.model for it in items.values()})
    if several_models and "model" not in cols:
        raise InputError(f"the logs hold answers of several models ({', '.join(models)})", file=file, field="model",
                         expected="a model column naming the model whose answer each label grades")
    if "epoch" in cols and epochs == "conditions":
        raise InputError("an epoch column, but epochs: conditions makes the sample (all its epochs) one item",
                         file=file, field="epoch", expected="no epoch column, or epochs: items")
    index: dict[tuple[str, str], list[_Item]] = {}
    for it in items.values():
        index.setdefault((it.model if several_models else "", it.sample_id), []).append(it)
    out: dict[str, dict[str, tuple[str, str]]] = {}
    first: dict[tuple[str, str, str, str], int] = {}
    for line, row in rows:
        for col in ("sample_id", "label"):
            if _blank(row.get(col)):
                raise InputError("is empty", file=file, line=line, field=col, expected="a non-empty value")
        sid = _id(row["sample_id"])
        epoch = None if _blank(row.get("epoch")) else row["epoch"]
        if epoch is not None:
            try:
                epoch = int(float(epoch))
            except (TypeError, ValueError):
                raise InputError(f"epoch {row['epoch']!r}", file=file, line=line, field="epoch",
                                 expected="an epoch number (1, 2, …) or empty: every epoch") from None
        model = "" if not several_models else ("" if _blank(row.get("model")) else str(row["model"]).strip())
        if several_models and not model:
            raise InputError("is empty", file=file, line=line, field="model", expected=f"one of {', '.join(models)}")
        annotator = "human" if _blank(row.get("annotator")) else str(row["annotator"]).strip()
        key = (model, sid, "" if epoch is None else str(epoch), annotator)
        if key in first:
            raise InputError(f"sample {sid!r} labelled again by {annotator!r} (first on line {first[key]})", file=file,
                             line=line, field="sample_id", expected="one row per sample (and epoch, model) and annotator")
        first[key] = line
        matched = [it for it in index.get((model, sid), []) if epoch is None or it.epoch == epoch]
        if not matched:
            counts["unmatched_labels"] += 1
            continue
        for it in matched:
            where = f"sample {sid!r}" + (f" (epoch {epoch})" if epoch is not None else "")
            choice = _label_choice(row["label"], kind, it.order, scale, where, file, "label", line)
            _put_label(out, it.pid, annotator, choice, where, file, line, "label")
    if not out:
        ids = sorted({it.sample_id for it in items.values()})[:3]
        raise InputError(f"none of the {len(rows)} label rows names a sample of the logs", file=file, field="sample_id",
                         expected="the logs' sample ids (e.g. " + ", ".join(repr(i) for i in ids) + ")")
    return out


# -- the set -------------------------------------------------------------------------------------------------------
def read_inspect(path: str | Path, *, name: str | None = None, labels: str | Path | None = None,
                 threshold: float | None = None, epochs: str = "items", project: Path | None = None) -> RecordedSet:
    """inspect_ai eval logs (a ``.eval`` / ``.json`` file or a folder of them) as a RecordedSet: every scorer's
    value per sample a judgment, the label from ``labels`` (``"target"``, or a table of human grades; a relative
    path from ``project``); mapping and keys in the module docstring."""
    if epochs not in EPOCHS:
        raise InputError(f"epochs {epochs!r}", field="epochs", expected=" or ".join(EPOCHS))
    path = Path(path)
    files = _log_files(path)
    items, graded, counts, statuses = _read_logs(files, epochs)
    if not graded:
        raise InputError("no scored sample in the logs", file=str(path),
                         expected="samples with scores (a task with a scorer, run to the end)")
    kinds = _kinds(graded)
    kind = next(iter(kinds.values()))
    scale = _Scale(threshold)
    several_models = len({it.model for it in items.values()}) > 1
    if labels is None:
        human: dict[str, dict[str, tuple[str, str]]] = {}
    elif str(labels) == "target":
        human = _target_labels(items, kind, scale)
    else:
        table = Path(labels)
        table = table if table.is_absolute() or project is None else project / table
        human = _table_labels(table, items, kind, scale, several_models, epochs, counts)
    judgments, first = [], {}
    reasons: Counter = Counter()
    noanswer = 0
    for g in graded:
        verdict, why, number = _verdict(g, kind, scale)
        it = g.item
        key = (it.pid, g.judge, g.condition, it.order)
        if key in first:
            raise InputError(f"item {it.pid!r} graded again by {g.judge!r} under {g.condition!r} (also in {first[key]})",
                             file=g.file, field="scores",
                             expected="one log per task, model under test and grader (or distinct scorers)")
        first[key] = g.file
        if why:
            reasons[why] += 1
        elif isinstance(g.value, str) and g.value.strip().upper() == "N":
            noanswer += 1
        sc = g.score
        raw = (sc.explanation or "") if sc is not None else ""
        answer = it.answers.get(g.epoch, "")
        meta = {"log": Path(g.file).name, "task": g.task, "sample_id": it.sample_id, "epoch": g.epoch,
                "value": repr(g.value)[:100], **({"mode": "rating"} if kind == "pointwise" else {}),
                **({"reason": why} if why else {}), **({"answer": answer[:_ANSWER_CHARS]} if answer else {})}
        judgments.append(Judgment(pair_id=it.pid, judge=g.judge, condition=g.condition, order=it.order,
                                  verdict=verdict, raw=raw or ("" if g.value is None else str(g.value)),
                                  finish_reason=g.finish, score=number, meta=meta_tuple(meta)))
    pairs: dict[str, RecordedPair] = {}
    for it in sorted(items.values(), key=lambda x: (x.pid, x.order)):
        if it.pid not in pairs:
            pairs[it.pid] = RecordedPair(id=it.pid, labels=tuple(sorted((a, c) for a, (c, _) in
                                                                        human.get(it.pid, {}).items())), **it.texts)
    return RecordedSet(name=name or (path.stem if path.is_file() else path.name), format="inspect_ai",
                       path=str(path), pairs=pairs, judgments=judgments,
                       provenance=f"inspect_ai eval logs ({len(files)} log(s), task(s) "
                                  f"{', '.join(sorted({g.task for g in graded}))}): each scorer's value per sample",
                       label_rule=_label_rule(labels, kind, epochs, items),
                       notes=_notes(kind, threshold, reasons, noanswer, counts, statuses, items, epochs),
                       extras={"inspect_ai": {"logs": [Path(f).name for f in files], "kind": kind}})


def _label_rule(labels: Any, kind: str, epochs: str, items: dict[str, _Item]) -> str:
    scale = f" ({MEANING})" if kind == "pointwise" else " (as presented in its sample, mapped to the pair's outputs)"
    if labels is None:
        return ("no labels: nothing is compared with a label (labels: target reads each sample's target as the "
                "grade, labels: <file> a table of human grades)")
    if str(labels) == "target":
        return f"label = the sample's target read as a grade{scale}"
    every = ", a row without an epoch labelling every epoch of its sample" if epochs == "items" and any(
        it.epoch > 1 for it in items.values()) else ""
    return (f"label = the human grade in {Path(labels).name}{scale}, joined on sample_id{every}; several "
            "annotators: their majority")


def _notes(kind: str, threshold: float | None, reasons: Counter, noanswer: int, counts: Counter, statuses: list[str],
           items: dict[str, _Item], epochs: str) -> list[str]:
    if kind == "pointwise":
        notes = ["Pointwise grades, read as inspect's value_to_float reads them: 1 = correct (C, correct, yes, true, "
                 "1), 2 = incorrect (I, incorrect, no, false, 0, and N: no answer), tie = partial (P, 0.5)"
                 + (f"; a number ≥ {threshold:g} is correct, below it incorrect" if threshold is not None else "")
                 + ". Grader and human grade the same answer: accuracy is their agreement, κ its chance-corrected "
                 "form, the confusion matrix human (rows) × grader; a partial grade against a correct/incorrect "
                 "label earns recorded.tie_credit. Order-free: one graded answer, no presentation order."]
    else:
        notes = ["Pairwise grades: A = the output shown first, B = the second, tie; the sample's metadata order "
                 "(original | swapped) maps them to the pair's outputs."]
    if reasons:
        notes.append(f"{sum(reasons.values())} score(s) held no grade ("
                     + ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
                     + "): none, counted wrong, the explanation kept as raw text.")
    if noanswer:
        notes.append(f"{noanswer} grade(s) were N (no answer): incorrect, as inspect counts them.")
    if counts["errored"]:
        notes.append(f"{counts['errored']} sample(s) ended in an error: left out (their answer was not graded as a "
                     "finished one).")
    if counts["unmatched_labels"]:
        notes.append(f"{counts['unmatched_labels']} label row(s) name no sample of the logs: left out.")
    epochs_seen = max((it.epoch for it in items.values()), default=1)
    if epochs_seen > 1 and epochs == "items":
        notes.append("Several epochs: each epoch's answer is its own item (<id>#<epoch>); the intervals resample "
                     "them as independent items, though epochs of one sample are alike.")
    if statuses:
        notes.append("Logs not complete: " + "; ".join(statuses) + " (their logged samples are read).")
    return notes


@register_format("inspect_ai", what="an inspect_ai eval log (.eval or .json) or a folder of them",
                 keys=("labels", "threshold", "epochs"))
def _inspect_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_inspect(ctx.path, name=ctx.name, labels=s.labels, threshold=s.threshold,
                        epochs=s.epochs or "items", project=ctx.project)
