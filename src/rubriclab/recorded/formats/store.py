"""``format: store``: a stage's own pairwise verdicts read back from the call store, found by rebuilding its
requests (``rubriclab.recorded._callstore``, imported when such a source is read: it needs ``rubriclab.llm``)."""

from __future__ import annotations

from typing import Any

from rubriclab.errors import ConfigError
from rubriclab.paths import display_path
from rubriclab.recorded._registry import SourceContext, register_format
from rubriclab.recorded._shipped import resolve_path

# what format store judged with (each enters the stored calls' keys)
STORE_KEYS = ("pairs", "rubrics", "seed", "samples", "both_orders", "judge_model", "temperature")


@register_format("store", what="the call store (a file, a URL, or llm.store for the project's own), with pairs "
                                "and rubrics as the stage judged them", keys=STORE_KEYS,
                 required={"pairs": "the pairs file the stage judged",
                           "rubrics": "condition name: rubric file, a RIPD line as file.jsonl#prompt_id"})
def _store_source(s: Any, ctx: SourceContext) -> Any:
    """The judge's pairwise verdicts on ``pairs`` under ``rubrics`` read back from the call store at ``path``
    (``llm.store`` for the project's own), with the judge role of ``llm.roles.judge``."""
    from rubriclab.data import read_pairs
    from rubriclab.judging import load_pairwise_rubric
    from rubriclab.llm import panel, roles_from_params, store_location
    from rubriclab.recorded._callstore import read_store

    llm, project, name = ctx.llm, ctx.project, ctx.name
    roles = roles_from_params(llm)
    if "judge" not in roles:
        raise ConfigError(f"params.yaml: recorded.sources.{name}: format store needs llm.roles.judge (the role the "
                          "stage judged with)")
    judge = panel(roles["judge"])[0]
    if s.judge_model:
        judge = judge.with_(model=s.judge_model, name="judge")
    if s.temperature is not None:
        judge = judge.with_(temperature=float(s.temperature))
    loc = store_location(llm, project) if s.path == "llm.store" else (
        s.path if "://" in s.path else str(resolve_path(s.path, project)))
    rubrics = {}
    for cond, ref in s.rubrics.items():
        file, _, prompt_id = ref.partition("#")
        rubrics[cond] = load_pairwise_rubric(resolve_path(file, project), prompt_id or None)
    kept = {k: v for k in ("samples", "both_orders") if (v := getattr(s, k)) is not None}  # else read_store's
    return read_store(loc, read_pairs(resolve_path(s.pairs, project)), rubrics, judge,
                      seed=ctx.data_seed if s.seed is None else s.seed, templates_dir=llm.templates_dir, name=name,
                      where=display_path(loc, project), **kept)
