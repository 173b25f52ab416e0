"""The shape of params.yaml: one pydantic model per section, checked when params are loaded.

``validate_params`` checks what is present and changes nothing: stages read the dict with their own defaults
(and tests pass partial params), so every field's default (None) is never validated and never filled in.
Unknown keys are errors that list the allowed ones, except in free-form maps whose keys are user names
(``data.sources``, ``data.ripd``, ``drift.seed_rubrics``, ``align.rubrics``, ``probe.datasets``,
``audit.out_of_domain``, ``discover.task_derived.tasks``, ``recorded.sources``, a role's ``extra``), where only
the values' shapes are checked. Every problem becomes one line::

    params.yaml: audit.runs: got 'abc'; expected an integer >= 1 (from --set audit.runs=abc)

The allowed values below repeat the constants of the code that reads them (``rubriclab.llm.ROLES``,
``rubriclab.audit._accuracy.TEMPLATES``, ...) so loading params imports none of those packages;
tests/test_params_schema.py checks that the two agree.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import annotated_types as at
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from rubriclab.calibrate._table import NONE_POLICIES, ORDER_CHOICES  # defined once, by the code
from rubriclab.errors import ConfigError
from rubriclab.secrets import is_secret_key, looks_like_secret_value, redact_urls, scrub

# -- allowed values (kept equal to the code's constants by tests/test_params_schema.py) -------------------------
ROLES = ("judge", "extractor", "consolidator", "paraphraser", "attacker", "verifier", "refiner", "generator",
         "embedder", "evaluator", "policy", "reward", "pairwise_judge")
LOADERS = ("demo", "hf", "rmb", "local")
PREF_RANK_MODES = ("score", "yes_no")
AUDIT_AXES = ("structure", "reliability", "fit", "adversarial")
AUDIT_TEMPLATES = ("direct", "per_rubric")
ALPHA_ORIENTATIONS = ("as_presented", "chosen_oriented")
BASELINE_REFERENCES = ("other", "none")
OPERATORS = ("applicability_gate", "do_not_reward", "max_score_cap", "decomposition", "abstract_to_observable",
             "false_positive_anchors", "non_compensation")
NESTED_CONDITIONAL_SCOPES = ("first_paragraph", "all")
DRIFT_METHODS = ("seed", "random", "icl", "textgrad", "ours")
ALIGN_REGIMES = ("bench", "target", "bench_target")
DPO_MODES = ("lora", "full")
DPO_LOSS_TYPES = ("sigmoid", "ipo", "hinge", "robust")
DPO_DEVICES = ("auto", "cpu", "cuda")
PROBE_MODELS = ("majority", "nb", "lr", "embed")
ITEM_FORMATS = ("auto", "healthbench", "researchrubrics")
PROBE_BALANCE = ("none", "subsample")
RECORDED_FORMATS = ("llmbar", "pandalm", "table", "mlflow", "store")
INF_WORDS = ("inf", ".inf", "infinity", "+inf")  # repair.sweep.deltas spellings of ∞ (repair.parse_delta)


@dataclass(frozen=True)
class Expect:
    """Annotated metadata: what an error at this field says is expected (pydantic ignores it)."""

    text: str


def _lit(values: tuple[str, ...]) -> Any:
    return Literal.__getitem__(values)


def _custom(check: Any, text: str) -> Any:
    """A value checked by ``check`` (returns the value or raises ValueError), described as ``text``."""

    def validate(value: Any) -> Any:
        try:
            return check(value)
        except ValueError:
            raise PydanticCustomError("expected", "expected {expected}", {"expected": text}) from None

    return Annotated[Any, PlainValidator(validate), Expect(text)]


# -- leaf types ----------------------------------------------------------------------------------------------------
Int = Annotated[int, Field(strict=True)]
PosInt = Annotated[int, Field(strict=True, ge=1)]        # sizes and counts
NonNegInt = Annotated[int, Field(strict=True, ge=0)]     # where 0 means something (off, none)
Num = Annotated[float, Field(strict=True)]               # floats accept ints (YAML `1` is an int), never bools
NonNegNum = Annotated[float, Field(strict=True, ge=0)]   # temperatures, tolerances
PosNum = Annotated[float, Field(strict=True, gt=0)]
Share = Annotated[float, Field(strict=True, ge=0, le=1)]  # credits, shares, weights in [0, 1]
Prob = Annotated[float, Field(strict=True, gt=0, lt=1)]   # confidence levels, FDR levels, power
TopP = Annotated[float, Field(strict=True, gt=0, le=1)]
Bool = Annotated[bool, Field(strict=True)]
Str = Annotated[str, Field(strict=True)]
Name = Annotated[str, Field(strict=True, min_length=1)]


def _model_string(value: Any) -> Any:
    ok = isinstance(value, str) and value.strip() or (
        isinstance(value, list) and value and all(isinstance(m, str) and m.strip() for m in value))
    if not ok:
        raise ValueError
    return value


def _delta(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in INF_WORDS:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise ValueError
    return value


def _prompt_id(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
        raise ValueError
    return value


ModelString = _custom(_model_string, "a model string or a non-empty list of model strings")
Delta = _custom(_delta, "a number >= 0 or inf")
PromptId = _custom(_prompt_id, "a string, an integer or null")


class Section(BaseModel):
    """A params mapping: unknown keys are errors, nothing is coerced, defaults are never validated."""

    model_config = ConfigDict(extra="forbid", strict=True)


# -- llm -----------------------------------------------------------------------------------------------------------
class RoleFields(Section):
    """``llm.defaults`` and each ``llm.roles.<role>`` (rubriclab.llm.RoleSpec)."""

    model: ModelString = None
    temperature: NonNegNum = None
    max_tokens: PosInt = None
    top_p: TopP | None = None
    timeout: PosNum = None
    concurrency: PosInt = None
    rpm: PosNum | None = None
    tpm: PosNum | None = None
    max_retries: NonNegInt = None
    parse_retries: NonNegInt = None
    api_base: Str | None = None
    api_key_env: Str | None = None
    seed: Int = None
    structured: Bool | None = None
    extra: dict[str, Any] = None  # provider params passed through as they are
    max_failure_share: Share = None  # a stage fails when more of a role's calls end in an error (default 0.5)


def _role_string(value: Any) -> Any:
    return {"model": value} if isinstance(value, str) else value


Role = Annotated[RoleFields, BeforeValidator(_role_string),
                 Expect("a model string or a mapping with keys " + ", ".join(RoleFields.model_fields))]


class Roles(Section):
    judge: Role = None
    extractor: Role = None
    consolidator: Role = None
    paraphraser: Role = None
    attacker: Role = None
    verifier: Role = None
    refiner: Role = None
    generator: Role = None
    embedder: Role = None
    evaluator: Role = None
    policy: Role = None
    reward: Role = None
    pairwise_judge: Role = None


class LlmBudget(Section):
    """``llm.budget``: limits on one stage's fresh calls (rubriclab.llm.SpendBudget); null: no limit."""

    prompt_tokens: PosInt | None = None
    cost_usd: NonNegNum | None = None


class Llm(Section):
    store: Str | None = None
    templates_dir: Str | None = None
    prefix_order: Bool = None
    budget: LlmBudget | None = None
    defaults: RoleFields = None
    roles: Roles = None


# -- data ----------------------------------------------------------------------------------------------------------
class Source(BaseModel):
    """One ``data.sources.<name>``; loader-specific keys are checked by the loader (rubriclab.data)."""

    model_config = ConfigDict(extra="allow", strict=True)

    loader: _lit(LOADERS)
    domain: Str | None = None
    limit: NonNegInt | None = None


class Premise(Section):
    sources: list[Name] = None
    extraction: NonNegInt = None
    audit: NonNegInt = None
    heldout: NonNegInt = None
    dev: NonNegInt = None


class RipdSetting(Section):
    bench: Name
    target: Name
    train: NonNegInt = None
    val: NonNegInt = None
    test: NonNegInt = None


class MaxChars(Section):
    """``data.max_chars``: per-field size limits (rubriclab.data.DEFAULT_MAX_CHARS)."""

    prompt: PosInt = None
    response: PosInt = None


class Data(Section):
    seed: Int = None
    sources: dict[str, Source] = None
    premise: Premise = None
    ripd: dict[str, RipdSetting] = None
    max_chars: MaxChars = None


class Tracking(Section):
    experiment: Name = None


# -- discover ------------------------------------------------------------------------------------------------------
class PrefRank(Section):
    pool: PosInt = None
    max_pairs: PosInt = None
    mode: _lit(PREF_RANK_MODES) = None


class TaskDerived(Section):
    k: PosInt = None
    tasks: dict[str, Name] = None


class Discover(Section):
    datasets: list[Name] = None
    max_pairs: PosInt = None
    min_criteria: PosInt = None
    max_criteria: PosInt = None
    k: PosInt = None
    target_size: PosInt = None
    cluster_size: PosInt = None
    max_levels: NonNegInt = None  # 0: no consolidation level
    batch_size: PosInt = None
    min_split: PosInt = None
    n_min: PosInt = None
    min_pairs: PosInt = None
    mmr_lambda: Share = None
    min_description_words: NonNegInt = None
    min_candidate_words: NonNegInt = None
    identical_limit: Share = None  # 1.0 = off
    pref_rank: PrefRank = None
    task_derived: TaskDerived = None
    imported_dir: Name = None


# -- audit ---------------------------------------------------------------------------------------------------------
class ParaphraseCheck(Section):
    min_similarity: Annotated[float, Field(strict=True, ge=-1, le=1)] = None
    max_similarity: Annotated[float, Field(strict=True, ge=-1, le=1)] = None
    min_length_ratio: NonNegNum = None
    max_length_ratio: NonNegNum = None


class AttackCheck(Section):
    min_words: NonNegNum = None
    max_words: NonNegNum = None


class Audit(Section):
    sources: list[Name] = None
    axes: list[_lit(AUDIT_AXES)] = None
    pool_size: PosInt = None
    heldout_size: PosInt = None
    out_of_domain: dict[str, Name] = None
    runs: PosInt = None
    run_temperature: NonNegNum = None
    paraphrases: NonNegInt = None  # 0 or 1: no paraphrase ρ
    paraphrase_temperature: NonNegNum = None
    samples: PosInt = None
    sample_temperature: NonNegNum = None
    templates: Annotated[list[_lit(AUDIT_TEMPLATES)], Field(min_length=1)] = None
    both_orders: Bool = None
    early_stop: Bool = None
    n_attacks: PosInt = None
    tau: Annotated[float, Field(strict=True, ge=0, le=10)] = None  # on the judge's 0-10 score
    n_boot: PosInt = None
    n_boot_paired: PosInt = None
    confidence: Prob = None
    tie_credit: Share = None
    alpha_orientation: _lit(ALPHA_ORIENTATIONS) = None
    baseline_reference: _lit(BASELINE_REFERENCES) = None
    paraphrase_check: ParaphraseCheck = None
    attack_check: AttackCheck = None
    injection: Bool = None


# -- repair --------------------------------------------------------------------------------------------------------
class Packet(Section):
    per_kind: NonNegInt = None
    margin: NonNegNum = None
    unstable_spread: NonNegNum = None
    max_chars: PosInt = None


class Budget(Section):
    """``repair.budget``: rubriclab.rubrics.BudgetLimits (its own keys; unknown ones are refused there too)."""

    max_words: NonNegInt = None
    max_first_paragraph_words: NonNegInt = None
    allow_nested_conditionals: Bool = None
    nested_conditional_scope: _lit(NESTED_CONDITIONAL_SCOPES) = None
    max_anti_gaming_clauses: NonNegInt = None
    max_anti_gaming_clause_words: NonNegInt = None
    max_applicability_gates: NonNegInt = None
    max_numbered_items: NonNegInt = None
    allow_nested_items: Bool = None
    require_prompt_agnostic: Bool = None


class RepairSweep(Section):
    deltas: list[Delta] = None
    candidates: list[PosInt] = None


class Study(Section):
    storage: Str | None = None


class Repair(Section):
    sources: list[Name] = None
    dev_size: PosInt = None
    heldout_size: PosInt = None
    n_attacks: PosInt = None
    max_criteria: PosInt | None = None  # null: all
    max_operators: PosInt = None
    operators: list[_lit(OPERATORS)] | None = None  # null: all seven
    packet: Packet = None
    budget: Budget = None
    sweep: RepairSweep = None
    study: Study = None


# -- drift ---------------------------------------------------------------------------------------------------------
class DriftLimits(Section):
    train: PosInt | None = None  # null: all
    val: PosInt | None = None
    test: PosInt | None = None


class DriftSearch(Section):
    population: PosInt = None
    rounds: PosInt = None
    subsample: TopP = None  # a share in (0, 1]
    eps_train: NonNegNum = None
    top_k: PosInt = None
    children: PosInt = None


class DriftCases(Section):
    bench: NonNegInt = None
    target: NonNegInt = None


class TextGrad(Section):
    bench_batch: NonNegInt = None
    target_batch: NonNegInt = None
    rollback: PosInt = None


class DriftGrid(Section):
    eps_train: list[NonNegNum] = None
    population: list[PosInt] = None
    rounds: list[PosInt] = None


class DriftStudy(Section):
    grid: DriftGrid = None
    storage: Str | None = None


class Stealth(Section):
    runs: PosInt = None


class Transfer(Section):
    judges: list[Name] = None


class Gate(Section):
    """``drift.gate`` (rubriclab.stages.drift_check.GATE_DEFAULTS)."""

    alpha: Prob = None
    power: Prob = None
    confidence: Prob = None
    n_boot: PosInt = None
    tie_credit: Share = None
    epsilon: Share = None
    samples: PosInt = None
    seed: Int | None = None  # null: data.seed
    max_clusters: PosInt = None


class Drift(Section):
    settings: list[Name] = None
    seed_rubrics: dict[str, Name] = None
    limits: DriftLimits | None = None
    methods: list[_lit(DRIFT_METHODS)] = None
    val_budget: PosInt = None
    refill: NonNegInt = None
    samples: PosInt = None
    tie_credit: Share = None
    max_chars: PosInt = None
    search: DriftSearch = None
    cases: DriftCases = None
    textgrad: TextGrad = None
    study: DriftStudy = None
    stealth: Stealth = None
    transfer: Transfer = None
    n_boot: PosInt = None
    confidence: Prob = None
    gate: Gate | None = None


# -- align ---------------------------------------------------------------------------------------------------------
class AlignRubrics(Section):
    seed: Name = None
    biased: Name = None
    seed_prompt_id: PromptId = None
    biased_prompt_id: PromptId = None


class AlignLabel(Section):
    pairs: PosInt | None = None  # null: all
    samples: PosInt = None


class Lora(Section):
    r: PosInt = None
    alpha: PosInt = None
    dropout: Annotated[float, Field(strict=True, ge=0, lt=1)] = None
    target_modules: list[Name] = None


class Dpo(Section):
    """``align.dpo`` (rubriclab.align.DPOSettings)."""

    mode: _lit(DPO_MODES) = None
    beta: PosNum = None
    loss_type: _lit(DPO_LOSS_TYPES) = None
    epochs: PosNum = None
    max_steps: PosInt | None = None
    learning_rate: PosNum = None
    batch_size: PosInt = None
    grad_accum: PosInt = None
    scheduler: Name = None
    warmup_ratio: Annotated[float, Field(strict=True, ge=0, lt=1)] = None
    max_length: PosInt = None
    max_grad_norm: NonNegNum = None  # 0: no clipping
    lora: Lora = None
    device: _lit(DPO_DEVICES) = None


class AlignEvaluate(Section):
    prompts: PosInt | None = None  # null: all
    n: PosInt = None
    temperature: NonNegNum = None
    top_p: TopP = None
    max_new_tokens: PosInt = None
    tie_credit: Share = None
    judge_samples: PosInt = None


class Align(Section):
    settings: list[Name] = None
    rubrics: dict[str, AlignRubrics] = None
    third_party_template: Name = None
    regimes: list[_lit(ALIGN_REGIMES)] = None
    label: AlignLabel = None
    dpo: Dpo = None
    evaluate: AlignEvaluate = None
    n_boot: PosInt = None
    confidence: Prob = None


# -- probe ---------------------------------------------------------------------------------------------------------
class ProbeDataset(Section):
    path: Name
    format: _lit(ITEM_FORMATS) = None
    limit: PosInt | None = None  # null: all records


class ProbeRubricSets(Section):
    files: list[Name] = None
    pairs: Name = None
    max_pairs: PosInt = None


class Counterfactual(Section):
    datasets: list[Name] = None
    n_items: NonNegInt | None = None  # conversations, one rubric item each; null: all


class Probe(Section):
    datasets: dict[str, ProbeDataset] = None
    rubric_sets: ProbeRubricSets = None
    models: list[_lit(PROBE_MODELS)] = None
    encoder: Name | None = None
    class_weight: Literal["balanced"] | None = None
    balance: _lit(PROBE_BALANCE) = None
    test_size: Prob = None
    cv_folds: NonNegInt = None  # < 2: no cross-validation (reported as such)
    n_boot: PosInt = None
    confidence: Prob = None
    counterfactual: Counterfactual = None


class Report(Section):
    mlflow_ui: Name | None = None


# -- recorded ------------------------------------------------------------------------------------------------------
ConditionPair = Annotated[list[Name], Field(min_length=2, max_length=2), Expect("[condition a, condition b]")]


class RecordedSource(Section):
    """``recorded.sources.<name>`` (rubriclab.stages.recorded)."""

    path: Name  # a folder (llmbar, pandalm), a file (table), a tracking URI or .db file (mlflow), a call store
    # (store: a file, a URL, or llm.store for the project's own); shipped:<set> for a set shipped with the package
    format: _lit(RECORDED_FORMATS)
    experiment: Name = None  # mlflow: experiment name or id
    assessments: list[Name] = None  # mlflow: only these assessment names
    judges: list[Name] = None
    conditions: list[Name] = None
    baseline: Name | None = None  # overrides recorded.baseline for this source
    contrasts: dict[str, ConditionPair] | None = None  # overrides recorded.contrasts
    contrast_judges: list[Name] | None = None  # overrides recorded.contrast_judges
    title: Name = None
    license: Name = None
    # format store: what the stage judged with
    pairs: Name = None  # the pairs file (e.g. outputs/data/ripd/<setting>/target_test.parquet)
    rubrics: dict[str, Name] = None  # condition name: rubric file (file.jsonl#prompt_id for a RIPD line)
    seed: NonNegInt = None  # presentation seed (default data.seed)
    samples: PosInt = None
    both_orders: Bool = None
    judge_model: Name = None  # overrides llm.roles.judge's model
    temperature: NonNegNum = None  # overrides llm.roles.judge's temperature


class RecordedCalibrate(Section):
    """``recorded.calibrate`` (rubriclab.calibrate.CellSettings)."""

    label_fraction: Prob = None
    seed: NonNegInt = None
    lam: NonNegNum | None = None
    order: _lit(ORDER_CHOICES) = None
    none: _lit(NONE_POLICIES) = None


class Recorded(Section):
    sources: dict[str, RecordedSource] = None
    confidence: Prob = None
    n_boot: PosInt = None
    seed: NonNegInt = None
    alpha: Prob = None
    power: Prob = None
    tie_credit: Share = None
    baseline: Name | None = None
    contrasts: dict[str, ConditionPair] | None = None  # name: [a, b], Δ = a − b within a judge
    contrast_judges: list[Name] | None = None
    calibrate: RecordedCalibrate | None = None


class Params(Section):
    llm: Llm = None
    data: Data = None
    tracking: Tracking = None
    discover: Discover = None
    audit: Audit = None
    repair: Repair = None
    drift: Drift = None
    align: Align = None
    probe: Probe = None
    report: Report = None
    recorded: Recorded = None


# -- errors as one line --------------------------------------------------------------------------------------------
def _strip(tp: Any) -> Any:
    """``tp`` without Annotated metadata and without ``| None``."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            rest = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _field_type(field: FieldInfo) -> Any:
    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _resolve(loc: tuple[Any, ...], root: Any = Params) -> Any:
    """The declared type at ``loc`` (pydantic's error location), or None when the schema has no such place."""
    tp = root
    for i, part in enumerate(loc):
        if part == "[key]":  # pydantic's marker after a mapping key that failed: the key was resolved already
            continue
        tp = _strip(tp)
        origin = typing.get_origin(tp)
        if _is_model(tp):
            field = tp.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            tp = _field_type(field)
        elif origin is list and isinstance(part, int):
            tp = typing.get_args(tp)[0]
        elif origin is dict:
            key_type, value_type = typing.get_args(tp)
            tp = key_type if loc[i + 1:i + 2] == ("[key]",) else value_type
        else:
            return None
    return tp


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _bounds(meta: list[Any]) -> str:
    b: dict[str, Any] = {}
    for m in meta:
        if isinstance(m, (at.Gt, at.Ge, at.Lt, at.Le)):
            name = type(m).__name__.lower()
            b[name] = getattr(m, name)
    low = ("(", b["gt"]) if "gt" in b else ("[", b["ge"]) if "ge" in b else None
    high = (")", b["lt"]) if "lt" in b else ("]", b["le"]) if "le" in b else None
    if low and high:
        return f" in {low[0]}{_num(low[1])}, {_num(high[1])}{high[0]}"
    if low:
        return f" {'>' if low[0] == '(' else '>='} {_num(low[1])}"
    if high:
        return f" {'<' if high[0] == ')' else '<='} {_num(high[1])}"
    return ""


def _describe(tp: Any, plural: bool = False) -> str:
    """What a value of declared type ``tp`` must be, in words (``plural``: as a list's items)."""
    meta: list[Any] = []
    nullable = False
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp, *extra = typing.get_args(tp)
            for m in extra:
                if isinstance(m, Expect) and not plural:
                    return m.text + (" or null" if nullable else "")
                meta += list(m.metadata) if isinstance(m, FieldInfo) else [m]
        elif origin in (Union, types.UnionType) and type(None) in typing.get_args(tp):
            rest = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(rest) != 1:
                break
            nullable, tp = True, rest[0]
        else:
            break
    origin = typing.get_origin(tp)
    min_len = next((m.min_length for m in meta if isinstance(m, at.MinLen)), 0)
    if tp is bool:
        text = "booleans (true or false)" if plural else "true or false"
    elif tp is int:
        text = ("integers" if plural else "an integer") + _bounds(meta)
    elif tp is float:
        text = ("numbers" if plural else "a number") + _bounds(meta)
    elif tp is str:
        text = ("non-empty strings" if plural else "a non-empty string") if min_len else (
            "strings" if plural else "a string")
    elif origin is Literal:
        values = ", ".join(str(v) for v in typing.get_args(tp))
        text = f"values from {values}" if plural else f"one of {values}"
    elif origin is list:
        text = ("lists" if plural else "a non-empty list" if min_len else "a list") + " of " + _describe(
            typing.get_args(tp)[0], plural=True)
    elif origin is dict:
        text = ("mappings" if plural else "a mapping") + " of names to " + _describe(typing.get_args(tp)[1], True)
    elif _is_model(tp):
        text = ("mappings" if plural else "a mapping") + " with keys " + ", ".join(tp.model_fields)
    elif tp is Any:
        text = "any values" if plural else "any value"
    else:
        text = str(tp)
    return text + (" or null" if nullable else "")


_BY_TYPE = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "bool_type": "true or false",
    "bool_parsing": "true or false", "string_type": "a string", "list_type": "a list", "dict_type": "a mapping",
    "model_type": "a mapping", "model_attributes_type": "a mapping",
}
_BY_BOUND = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="), "less_than": ("lt", "<"),
             "less_than_equal": ("le", "<=")}


def _translate(error: dict[str, Any]) -> str:
    """The expected text from pydantic's error type and constraints (when the schema place is unknown)."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _BY_TYPE:
        return _BY_TYPE[kind]
    if kind in _BY_BOUND:
        key, op = _BY_BOUND[kind]
        return f"a value {op} {_num(ctx[key])}"
    if kind == "literal_error":
        return f"one of {ctx.get('expected', '')}".replace("'", "")
    if kind == "too_short":
        return f"at least {ctx.get('min_length')} item(s)"
    if kind == "expected":
        return str(ctx.get("expected"))
    return error["msg"]


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short_repr(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_error(error: dict[str, Any]) -> str:
    """``<dotted.key>: got <value>; expected <what>`` for one pydantic error (no file, no override)."""
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        parent = _strip(_resolve(loc[:-1]))
        allowed = ", ".join(parent.model_fields) if _is_model(parent) else "a known key"
        what = "unknown role" if loc[:2] == ("llm", "roles") and len(loc) == 3 else "unknown key"
        return f"{_dotted(loc)}: {what}; expected one of {allowed}"
    declared = _resolve(loc)
    expected = _describe(declared) if declared is not None else _translate(error)
    if error["type"] == "missing":
        return f"{_dotted(loc)}: missing; expected {expected}"
    return f"{_dotted(loc)}: got {_shown(loc, error.get('input'))}; expected {expected}"


def _shown(loc: tuple[Any, ...], value: Any) -> str:
    """The offending value as an error may show it: never a credential."""
    if is_secret_key(_dotted(loc)) or looks_like_secret_value(value):
        return "a value that looks like a credential (not shown)"
    return redact_urls(_short_repr(scrub(value)))


def _override_of(loc: tuple[Any, ...], overrides: list[str]) -> str | None:
    """The last ``--set`` override whose key is at, above or below ``loc``."""
    parts = [str(p) for p in loc if p != "[key]"]
    for item in reversed(overrides):
        key = item.split("=", 1)[0].strip().split(".")
        n = min(len(key), len(parts))
        if key[:n] == parts[:n]:
            return item
    return None


def _override_note(loc: tuple[Any, ...], overrides: list[str]) -> str:
    """`` (from --set KEY=VALUE)`` for the override that set ``loc`` (credentials not shown), or ``""``."""
    override = _override_of(loc, overrides)
    if override is None:
        return ""
    key, _, value = override.partition("=")
    if is_secret_key(key.strip()) or looks_like_secret_value(value.strip()):
        override = f"{key}=…"
    return f" (from --set {redact_urls(override)})"


def validate_params(params: dict[str, Any], source: str = "params.yaml", overrides: list[str] | None = None) -> None:
    """Check ``params`` (read from ``source``, with ``overrides`` applied) against the schema; changes nothing.

    Raises ConfigError listing every problem on one line, each as ``<source>: <place>: got <value>; expected
    <what>`` with the ``--set`` it came from, joined by "; " (``params.yaml: audit.runs: got 'abc'; expected an
    integer >= 1; params.yaml: data.seed: got 'x'; expected an integer``)."""
    try:
        Params.model_validate(params)
    except ValidationError as exc:
        lines: list[str] = []
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            line = f"{source}: {describe_error(error)}{_override_note(loc, list(overrides or []))}"
            if line not in lines:  # a value failing every branch of a union is one problem
                lines.append(line)
        raise ConfigError("; ".join(lines)) from None
