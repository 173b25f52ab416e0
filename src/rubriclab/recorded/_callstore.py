"""The project's own call store as a source of recorded judgments: the pairwise verdicts a stage already obtained
(``rubriclab.judging.judge_pairs`` — the drift gate, the drift search, align's labelling — or the audit's templated
rubrics), read back without a model call, so the recorded analysis runs the same way on live judgments.

The store keeps no pair id, rubric name or tag: a stored call is content-addressed by (model, messages, decoding
params, sample index, parse attempt, endpoint). So the judgments are found the way the gateway finds a cached
call: the requests the stage sent are rebuilt with the shared request builder (``judging.pairwise_request`` on
``data.present(pair, seed)``, or on both presentation orders) and their keys looked up. Everything that entered
the key must be what the stage used: the judge role as configured (model, temperature, max_tokens, top_p,
use_schema, api_base — ``llm.roles.judge``, with any change the stage made, e.g. the audit's accuracy
temperature), the rubric text, the pairs, the presentation seed, the sample indices. A request the store does not
hold is not a judgment (never made, or its call failed: an error is kept for the ledger but never served): it is
counted, never guessed.

A reply that did not parse is followed through the gateway's re-asks (same keys, same messages), so a verdict
here is the verdict the stage got. Per (pair, rubric, order) the verdict is the majority of its ``samples``
draws (``stats.majority_vote``: tied votes are a tie; no parsed draw at all is ``none``, its raw text kept). A
judgment whose later draws are not in the store counts when the draws present already decide the majority
(``stats.majority_decided``, the audit's exact early stopping); otherwise it is left out and counted.

What this covers: every caller of ``judging.judge_pairs`` (the drift gate, the drift search, align's labelling
and evaluation) and the audit's ``direct`` template (a criteria list or a judge template: the same request). Not
the audit's ``no_rubric`` baseline or ``per_rubric`` template, whose requests the audit builds with its own
prompts and parsers.

Pairs become ``RecordedPair``s with output 1 = the response shown first in the stage's seeded presentation and
the label = the human-preferred one (``1``/``2``); that presentation is the ``original`` order, its reverse
``swapped`` (only with ``both_orders``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rubriclab.data import Pair, present
from rubriclab.errors import InputError
from rubriclab.judging import PairwiseRubric, pairwise_request
from rubriclab.llm import CallRecord, CallRequest, CallStore, Gateway, RoleSpec, open_store, store_salt
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, meta_tuple
from rubriclab.stats import majority_decided, majority_vote

HUMAN = "human"
_VERDICT = {"A": "first", "B": "second", "tie": "tie"}


def replay(store: CallStore, req: CallRequest, reader: Gateway) -> tuple[str, CallRecord | None, Any, str | None]:
    """One request as the gateway resolved it, from the store alone: ``(state, last record, value, problem)``
    with state ``ok`` (``value`` parsed), ``failed`` (no parse after every re-ask), ``missing`` (not in the
    store) or ``incomplete`` (a re-ask the gateway would have made is not in the store)."""
    messages = req.messages
    last: CallRecord | None = None
    problem: str | None = None
    for attempt in range(req.role.parse_retries + 1):
        key = req.key(attempt, messages if attempt else None, salt=store_salt(store))
        rec = store.get_ok([key]).get(key)
        if rec is None:
            return ("missing" if attempt == 0 else "incomplete"), last, None, problem
        last = rec
        # the gateway's own reading of a record (truncation, parser), not a copy of it: a replay is exact
        res = reader._from_record(req, rec, cached=True)  # noqa: SLF001
        if res.ok:
            return "ok", rec, res.value, None
        problem = (res.parse_error or res.error or "").removeprefix(f"{req.role.model}: ")
        messages = req.reask_messages(res.text, problem)
    return "failed", last, None, problem


def _views(pair: Pair, seed: int, both_orders: bool) -> list[tuple[str, dict[str, Any]]]:
    first = present(pair, seed)
    if not both_orders:
        return [("original", first)]
    other = {**first, "a": first["b"], "b": first["a"], "swapped": not first["swapped"],
             "human": "A" if first["human"] == "B" else "B"}
    return [("original", first), ("swapped", other)]


def read_store(store: CallStore | str, pairs: Sequence[Pair], rubrics: Mapping[str, Any], judge: RoleSpec, *,
               seed: int, samples: int = 1, sample_offset: int = 0, both_orders: bool = False,
               templates_dir: str | None = None, name: str = "store", where: str = "") -> RecordedSet:
    """The judgments of ``judge`` on ``pairs`` under each of ``rubrics`` (name -> PairwiseRubric, JudgeTemplate or
    RubricSet: the condition) that ``store`` holds, as a RecordedSet (see the module docstring)."""
    if samples < 1:
        raise InputError(f"samples={samples}", field="samples", expected="at least one draw per verdict")
    if not pairs:
        raise InputError("no pairs", field="pairs", expected="the pairs the stage judged")
    opened = isinstance(store, str)
    db: CallStore = open_store(store) if opened else store  # type: ignore[assignment]
    reader = Gateway(db, stage="recorded-replay", progress=False)  # reads records only: no batch, no call
    conditions = {n: PairwiseRubric.of(r, name=n) for n, r in rubrics.items()}
    rpairs: dict[str, RecordedPair] = {}
    judgments: list[Judgment] = []
    missing = incomplete = 0
    try:
        for p in pairs:
            views = _views(p, seed, both_orders)
            first = views[0][1]
            rpairs[p.id] = RecordedPair(id=p.id, labels=((HUMAN, "1" if first["human"] == "A" else "2"),),
                                        prompt=p.prompt, output_1=first["a"], output_2=first["b"], domain=p.domain)
            for cond, rubric in conditions.items():
                for order, view in views:
                    draws = []
                    for s in range(samples):  # in sample order: an early-stopped stage bought a prefix
                        d = replay(db, pairwise_request(rubric, view, judge, sample_index=sample_offset + s,
                                                        templates_dir=templates_dir), reader)
                        if d[0] in ("missing", "incomplete"):
                            break
                        draws.append(d)
                    votes = [d[2] if d[0] == "ok" else None for d in draws]  # None: a draw with no verdict
                    if len(draws) == samples:
                        decided = majority_vote(votes, tie="tie")
                    else:  # the draws present decide the full-sampling majority, or the judgment is incomplete
                        decided = majority_decided(votes, samples, tie="tie") if draws else None
                        if decided is None:
                            missing += not draws
                            incomplete += bool(draws)
                            continue
                    verdict = _VERDICT.get(decided, "none")
                    rec = draws[0][1]
                    meta = {"votes": "".join(str(v or "-") for v in votes), "rubric_digest": rubric.digest}
                    if len(draws) < samples:
                        meta["early_stopped"] = f"{len(draws)} of {samples} draws decide the majority"
                    if draws[0][0] == "failed" and draws[0][3]:
                        meta["parse_error"] = draws[0][3][:200]
                    judgments.append(Judgment(
                        pair_id=p.id, judge=judge.model, condition=cond, order=order, verdict=verdict,
                        raw=(rec.text or "") if rec else "", finish_reason=(rec.extra or {}).get("finish_reason")
                        if rec else None, meta=meta_tuple(meta)))
    finally:
        if opened:
            db.close()
    asked = len(pairs) * len(conditions) * (2 if both_orders else 1)
    if not judgments:
        lack = f" ({incomplete} lack a draw or a re-ask)" if incomplete else ""
        raise InputError(f"none of the {asked} judgments asked for is complete in the call store{lack}",
                         file=where or None,
                         expected="the pairs, rubrics, judge role (model, temperature, max_tokens, use_schema, "
                                  "api_base), presentation seed and samples the stage judged with: each enters the "
                                  "stored call's key")
    notes = [f"Live judgments read back from the project's call store ({where or 'given store'}): judge "
             f"{judge.model} (temperature {judge.temperature:g}), {samples} draw(s) per verdict (majority), "
             f"presentation seed {seed}; no model was called.",
             "Output 1 is the response shown first in the stage's seeded presentation; the label is the "
             "human-preferred response."]
    if missing or incomplete:
        notes.append(f"{missing + incomplete} of {asked} judgments are not in the store and are left out "
                     f"({missing} never stored — not made, or their call failed —, {incomplete} missing a draw or "
                     "a re-ask).")
    return RecordedSet(name=name, format="store", path=where or "call store", pairs=rpairs, judgments=judgments,
                       provenance=f"the project's call store: {judge.model}'s pairwise verdicts",
                       label_rule="the human-preferred response of each preference pair", notes=notes,
                       extras={"asked": asked, "missing": missing, "incomplete": incomplete})
