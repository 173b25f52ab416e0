"""MLflow 3 traces as recorded judgments: on each trace of an experiment, an assessment whose source is an LLM judge
is a verdict, and assessments of the same name whose source is a human are the labels (one per annotator).

What is read, per trace (``MlflowClient.search_traces`` over the experiment, 500 a page, without spans: the
assessments, tags and request preview are in the trace info; a trace's spans are fetched only when its preview was
cut at MLflow's 1,000 characters and its pair's texts are not yet known):

* the pair: trace tag ``pair_id`` (default: the trace id) and ``order`` (``original`` | ``swapped``; default
  ``original``) — two traces of one pair in both orders share a ``pair_id``; the root span's inputs, when a
  mapping, give the pair's texts (``prompt``/``instruction``/``question``, ``output_1``/``response_1``/
  ``response_a``, ``output_2``/``response_2``/``response_b``).
* verdicts: feedback from a source of type ``LLM_JUDGE``; judge = the source id, condition = the assessment's
  metadata ``condition`` or else its name. Labels: feedback or expectations of the same name from ``HUMAN``
  sources (annotator = source id). Assessments marked invalid (overridden) are skipped.
* values are as presented in the trace: ``first``/``A``/``1`` (the output shown first), ``second``/``B``/``2``,
  ``tie`` (case-insensitive; ``values`` maps other words). A judge's value outside them, or a feedback carrying an
  error, is ``none`` (counted, the value and rationale kept); a human's is no label (counted in the notes).

When the experiment holds several assessment names, each name labels its own items: the pair id becomes
``<pair_id>#<name>``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rubriclab.errors import ConfigError, InputError
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, meta_tuple, to_choice
from rubriclab.recorded._registry import SourceContext, register_format

WORDS = {"first": "first", "a": "first", "1": "first", "second": "second", "b": "second", "2": "second",
         "tie": "tie"}
_PROMPT = ("prompt", "instruction", "question", "input")
_OUT1 = ("output_1", "response_1", "response1", "response_a")
_OUT2 = ("output_2", "response_2", "response2", "response_b")


def _word(value: Any, words: Mapping[str, str]) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return words.get(str(value).strip().lower())


def _source(a: Any) -> tuple[str, str]:
    src = getattr(a, "source", None)
    kind = getattr(src, "source_type", "") or ""
    return str(getattr(kind, "value", kind)).upper(), str(getattr(src, "source_id", "") or "")


def _value(a: Any) -> tuple[Any, str | None]:
    """The assessment's value and its error (feedback) or None."""
    fb = getattr(a, "feedback", None)
    if fb is not None:
        err = getattr(fb, "error", None)
        return getattr(fb, "value", None), (str(getattr(err, "error_message", None) or err) if err else None)
    ex = getattr(a, "expectation", None)
    if ex is not None:
        return getattr(ex, "value", None), None
    return getattr(a, "value", None), None


def _as_mapping(inputs: Any) -> dict[str, Any] | None:
    if isinstance(inputs, str):
        try:
            inputs = json.loads(inputs)
        except ValueError:
            return None
    return inputs if isinstance(inputs, dict) else None


def _root_inputs(trace: Any) -> dict[str, Any]:
    data = getattr(trace, "data", None)
    spans = list(getattr(data, "spans", None) or [])
    root = next((s for s in spans if getattr(s, "parent_id", None) is None), spans[0] if spans else None)
    return (_as_mapping(getattr(root, "inputs", None)) if root is not None else None) or {}


def _inputs(client: Any, trace: Any, fetched: Counter) -> dict[str, Any]:
    """The root span's inputs without loading the trace's spans where the stored request preview holds them whole
    (MLflow keeps the root inputs' JSON as ``request_preview``, cut at 1,000 characters); a cut preview is
    completed by fetching that one trace."""
    preview = _as_mapping(getattr(trace.info, "request_preview", None))
    if preview is not None:
        return preview
    if not getattr(trace.info, "request_preview", None):
        return _root_inputs(trace)
    fetched["traces_fetched"] += 1
    return _root_inputs(client.get_trace(trace.info.trace_id, display=False))


def _first(d: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    return next((str(d[k]) for k in keys if d.get(k) not in (None, "")), "")


def _traces(client: Any, experiment_id: str, max_traces: int | None) -> list[Any]:
    import inspect

    # MLflow ≥ 3.5 scopes a search by ``locations`` (``experiment_ids`` deprecated); 3.4 knows only the latter
    where = ("locations" if "locations" in inspect.signature(client.search_traces).parameters else "experiment_ids")
    out, token = [], None
    while True:
        # assessments and tags live in the trace info: the spans (the bulk of a trace) are not loaded
        page = client.search_traces(**{where: [experiment_id]}, max_results=500, page_token=token,
                                    include_spans=False)
        out += list(page)
        token = getattr(page, "token", None)
        if not token or (max_traces and len(out) >= max_traces):
            return out[:max_traces] if max_traces else out


def read_mlflow(tracking_uri: str, experiment: str, *, name: str | None = None, assessments: Iterable[str] | None = None,
                values: Mapping[str, str] | None = None, max_traces: int | None = None) -> RecordedSet:
    """The experiment's traces (by name or id) on ``tracking_uri`` as a RecordedSet (see the module docstring);
    ``assessments`` keeps only those names, ``values`` adds words → ``first``/``second``/``tie``."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        try:
            exp = client.get_experiment(experiment)
        except Exception:  # noqa: BLE001 - MLflow raises several kinds for an unknown id
            exp = None
    if exp is None:
        raise ConfigError(f"{tracking_uri}: no MLflow experiment named (or with id) {experiment!r}")
    words = {**WORDS, **{str(k).strip().lower(): v for k, v in (values or {}).items()}}
    bad = sorted({v for v in words.values() if v not in ("first", "second", "tie")})
    if bad:
        raise ConfigError(f"recorded values map to {', '.join(bad)}; expected first, second or tie")
    keep = set(assessments) if assessments else None
    where = f"{tracking_uri} experiment {exp.name!r}"
    traces = _traces(client, exp.experiment_id, max_traces)
    used: list[tuple[Any, list[Any]]] = []
    names: set[str] = set()
    for t in traces:
        got = [a for a in (getattr(t.info, "assessments", None) or []) if getattr(a, "valid", True) is not False
               and (keep is None or a.name in keep)]
        used.append((t, got))
        names |= {a.name for a in got if _source(a)[0] in ("LLM_JUDGE", "HUMAN")}
    several = len(names) > 1
    texts: dict[str, dict[str, str]] = {}
    labels: dict[str, dict[str, tuple[str, str]]] = {}  # pair -> annotator -> (label, trace id)
    judged: dict[tuple[str, str, str, str], tuple[int, Judgment]] = {}
    counts: Counter = Counter()
    for t, got in used:
        tags = dict(getattr(t.info, "tags", None) or {})
        base_id = str(tags.get("pair_id") or t.info.trace_id)
        order = str(tags.get("order") or "original").strip().lower()
        if order not in ("original", "swapped"):
            raise InputError(f"trace {t.info.trace_id}: tag order={tags.get('order')!r}", file=where, field="order",
                             expected="original or swapped (or no tag: original)")
        inputs: dict[str, Any] | None = None
        for a in got:
            kind, who = _source(a)
            if kind not in ("LLM_JUDGE", "HUMAN"):
                continue
            pid = f"{base_id}#{a.name}" if several else base_id
            if pid not in texts and inputs is None:
                inputs = _inputs(client, t, counts)
            if inputs:
                texts.setdefault(pid, {"prompt": _first(inputs, _PROMPT),
                                       "output_1": _first(inputs, _OUT1 if order == "original" else _OUT2),
                                       "output_2": _first(inputs, _OUT2 if order == "original" else _OUT1)})
            value, error = _value(a)
            verdict = None if error else _word(value, words)
            if kind == "HUMAN":
                if verdict is None:
                    counts["unreadable_labels"] += 1
                    continue
                label = to_choice(order, verdict)
                prev = labels.setdefault(pid, {}).get(who)
                if prev is not None and prev[0] != label:
                    counts["conflicting_labels"] += 1
                    labels[pid][who] = ("conflict", prev[1])
                elif prev is None:
                    labels[pid][who] = (label, t.info.trace_id)
                continue
            meta = dict(getattr(a, "metadata", None) or {})
            condition = str(meta.get("condition") or a.name)
            if verdict is None:
                counts["not_verdicts"] += 1
            rationale = getattr(a, "rationale", None) or ""
            raw = str(value) if value is not None else (error or "")
            if rationale:
                raw = f"{raw}\n{rationale}" if raw else str(rationale)
            stamp = int(getattr(a, "create_time_ms", 0) or 0)
            key = (pid, who or "llm_judge", condition, order)
            j = Judgment(pair_id=pid, judge=who or "llm_judge", condition=condition, order=order,
                         verdict=verdict or "none", raw=raw, meta=meta_tuple({"trace_id": t.info.trace_id,
                                                                               "experiment_id": exp.experiment_id,
                                                                               "assessment": a.name}))
            if key in judged:
                counts["repeated_judgments"] += 1
                if judged[key][0] > stamp:
                    continue
            judged[key] = (stamp, j)
    pair_ids = set(labels) | {k[0] for k in judged} | set(texts)
    pairs = {pid: RecordedPair(id=pid, labels=tuple(sorted((who, lab) for who, (lab, _) in labels.get(pid, {}).items()
                                                           if lab != "conflict")),
                               **texts.get(pid, {})) for pid in sorted(pair_ids)}
    judgments = [j for _, j in sorted(judged.values(), key=lambda x: (x[1].pair_id, x[1].judge, x[1].condition,
                                                                      x[1].order))]
    if not judgments:
        raise InputError("no feedback from an LLM_JUDGE source", file=where,
                         expected="traces with LLM-judge feedback (and human feedback of the same name as labels)")
    notes = []
    if counts["not_verdicts"]:
        notes.append(f"{counts['not_verdicts']} LLM-judge assessment(s) held no verdict (a value outside "
                     f"{', '.join(sorted(words))}, or an error): none, counted wrong, value and rationale kept.")
    if counts["unreadable_labels"]:
        notes.append(f"{counts['unreadable_labels']} human assessment(s) held no readable label: left out.")
    if counts["conflicting_labels"]:
        notes.append(f"{counts['conflicting_labels']} annotator(s) labelled a pair differently on its two traces: "
                     "that annotator's label of the pair is left out.")
    if counts["repeated_judgments"]:
        notes.append(f"{counts['repeated_judgments']} repeated LLM-judge assessment(s) of one trace: the latest kept.")
    return RecordedSet(name=name or exp.name, format="mlflow", path=where, pairs=pairs, judgments=judgments,
                       provenance=f"MLflow traces of experiment {exp.name!r} ({tracking_uri}): LLM-judge feedback "
                                  "against human feedback of the same name",
                       label_rule="label = the majority of the human assessments of the same name on the pair's "
                                  "traces (one annotator: its label)", notes=notes)


def tracking_location(path: str, project: Path) -> str:
    """A tracking URI as given (``sqlite:///…``, ``http://…``), or a local ``.db`` file as ``sqlite:///<abs path>``."""
    if "://" in path:
        return path
    p = Path(path)
    return f"sqlite:///{(p if p.is_absolute() else project / p).resolve().as_posix()}"


@register_format("mlflow", what="an MLflow tracking URI or .db file, with experiment: the traces' assessments",
                 keys=("experiment", "assessments"), required={"experiment": "a name or id"})
def _mlflow_source(s: Any, ctx: SourceContext) -> RecordedSet:
    return read_mlflow(tracking_location(ctx.raw_path, ctx.project), s.experiment, name=ctx.name,
                       assessments=s.assessments)
