"""The settings: one pydantic model per params.yaml section, each field with its one default, range and doc.

``Params.of(params)`` (and ``rubriclab.config.load_params``) validates params and fills in every default; stages
read the typed sections (``p.drift.search.population``) and hand them to the packages, whose own settings classes
take their defaults from these models. ``Params.given()`` is what the file spelled out (for the few readers that
depend on a key's absence), ``Params.effective()`` every value a run used (logged to MLflow, printed by
``rubriclab params``). Unknown keys are errors that list the allowed ones, except in free-form maps whose keys
are user names (``data.sources``, ``data.ripd``, ``drift.seed_rubrics``, ``align.rubrics``, ``probe.datasets``,
``audit.out_of_domain``, ``discover.task_derived.tasks``, ``recorded.sources``, a role's ``extra``), where only
the values' shapes are checked. Every problem becomes one line::

    params.yaml: audit.runs: got 'abc'; expected an integer >= 1 (from --set audit.runs=abc)

The allowed values are defined here once; the packages import them (``rubriclab.llm.ROLES``,
``rubriclab.audit._accuracy.TEMPLATES``, ...). This module imports no package, so any package may import it.
Numbers keep the type they were written with (YAML ``1`` stays an int): they are copied into outputs and call-store
keys as they are.
"""

from __future__ import annotations

import copy
import functools
import math
import pathlib
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import annotated_types as at
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from rubriclab.errors import ConfigError
from rubriclab.secrets import is_secret_key, looks_like_secret_value, redact_urls, scrub, url_credential

# -- allowed values: defined once, here; the packages import them -------------------------------------------------
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
DPO_LEARNING_RATES = {"lora": 1e-4, "full": 1e-6}  # seed 003 Table 5: LoRA r16 (~8B) 1e-4, full fine-tune (~2B) 1e-6
PROBE_MODELS = ("majority", "nb", "lr", "embed")
ITEM_FORMATS = ("auto", "healthbench", "researchrubrics")
PROBE_BALANCE = ("none", "subsample")
PROBE_PROJECTIONS = ("auto", "umap", "pca")  # rubriclab.probe.projection's method
# the recorded-verdict formats: the modules of rubriclab/recorded/formats/ (one per format, each registering its
# reader), listed without importing them (this module imports no package)
RECORDED_FORMATS = tuple(sorted(p.stem for p in (pathlib.Path(__file__).parent / "recorded" / "formats").glob("*.py")
                                if not p.stem.startswith("_")))
NONE_POLICIES = ("half", "exclude")  # recorded.calibrate.none (rubriclab.calibrate)
# The one rule for a tie verdict against a strict preference, in every rate of the project (the audit's accuracy, the
# drift search and gate, align's agreement and win rates, the recorded card): half credit, the expected credit of
# breaking the tie with a fair coin. Seed 003 counts ties 0.5 (stealth check, third-party judge), AlpacaEval's win
# rate counts a draw half a win, and LLMBar's statistics give a Rating strategy's equal scores half credit over the
# two orders. Every card shows the rate under the other rule (0: a tie never agrees) beside it where ties are
# more than TIES_COMMON of the verdicts; a publisher's own rule is reproduced in its publisher check.
TIE_CREDIT = 0.5
TIES_COMMON = 0.05
ORDER_CHOICES = ("both", "original", "swapped")
INF_WORDS = ("inf", ".inf", "infinity", "+inf")  # repair.sweep.deltas spellings of ∞ (repair.parse_delta)


@dataclass(frozen=True)
class Expect:
    """Annotated metadata: what an error at this field says is expected (pydantic ignores it)."""

    text: str
    plural: str | None = None  # as a list's items


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


# -- leaf types ----------------------------------------------------------------------------------------------------
Int = Annotated[int, Field(strict=True)]
PosInt = Annotated[int, Field(strict=True, ge=1)]        # sizes and counts
NonNegInt = Annotated[int, Field(strict=True, ge=0)]     # where 0 means something (off, none)
_CHECKS = {at.Gt: lambda v, b: v > b.gt, at.Ge: lambda v, b: v >= b.ge, at.Lt: lambda v, b: v < b.lt,
           at.Le: lambda v, b: v <= b.le}


def _number(*bounds: Any) -> Any:
    """A number (int or float, never bool) within ``bounds``, kept as given: YAML ``1`` stays the int 1 (it is
    written into outputs and call-store keys as it is), ``1.0`` stays a float."""

    def validate(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not all(
                _CHECKS[type(b)](value, b) for b in bounds):
            raise PydanticCustomError("expected", "expected {expected}", {"expected": text})
        return value

    text = "a number" + _bounds(list(bounds))
    return Annotated[Any, PlainValidator(validate), Expect(text, "numbers" + _bounds(list(bounds)))]


Num = _number()
NonNegNum = _number(at.Ge(0))   # temperatures, tolerances
PosNum = _number(at.Gt(0))
Share = _number(at.Ge(0), at.Le(1))  # credits, shares, weights in [0, 1]
Prob = _number(at.Gt(0), at.Lt(1))   # confidence levels, FDR levels, power
TopP = _number(at.Gt(0), at.Le(1))
Cosine = _number(at.Ge(-1), at.Le(1))
Tau = _number(at.Ge(0), at.Le(10))  # on the judge's 0-10 score
Dropout = _number(at.Ge(0), at.Lt(1))
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


def _url_setting(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip() or url_credential(value):
        raise ValueError
    return value


ModelString = _custom(_model_string, "a model string or a non-empty list of model strings")
# every URL-valued setting: dvc.lock copies it into git, so a password or key in its user:password@ or its query is
# refused (rubriclab.secrets.url_credential); it belongs in the environment (PGPASSWORD, ~/.pgpass, os.environ/NAME)
Url = _custom(_url_setting, "a URL or path without a credential in it (a password or key in user:password@ or in "
                            "the query belongs in the environment: PGPASSWORD, ~/.pgpass, or os.environ/NAME)")
Delta = _custom(_delta, "a number >= 0 or inf")
PromptId = _custom(_prompt_id, "a string, an integer or null")


class Section(BaseModel):
    """A params mapping: unknown keys are errors, nothing is coerced; every field holds its one default."""

    model_config = ConfigDict(extra="forbid", strict=True)


def knob(default: Any = None, doc: str = "", paper: str | None = None) -> Any:
    """A field with its one default (mutable defaults copied per instance), its doc and the paper's value."""
    extra = {"paper": paper} if paper else None
    if isinstance(default, type) and issubclass(default, BaseModel):
        return Field(default_factory=default, description=doc, json_schema_extra=extra)
    if isinstance(default, (list, dict)):
        return Field(default_factory=lambda: copy.deepcopy(default), description=doc, json_schema_extra=extra)
    return Field(default, description=doc, json_schema_extra=extra)


# -- llm -----------------------------------------------------------------------------------------------------------
class RoleFields(Section):
    """One ``llm.roles.<role>``: every field unset inherits ``llm.defaults`` (rubriclab.llm.RoleSpec)."""

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
    api_base: Url | None = None
    api_key_env: Str | None = None
    seed: Int = None
    structured: Bool | None = None
    extra: dict[str, Any] = None  # provider params passed through as they are
    max_failure_share: Share = None


class RoleDefaults(RoleFields):
    """``llm.defaults``: applied to every role unless the role overrides them."""

    temperature: NonNegNum = knob(0.0, "sampling temperature (enters the call-store key)")
    max_tokens: PosInt = knob(512, "reply length limit (enters the call-store key)")
    timeout: PosNum = knob(120.0, "seconds per call")
    concurrency: PosInt = knob(8, "calls in flight per model")
    max_retries: NonNegInt = knob(6, "429 / 5xx / timeouts / dropped connections, exponential backoff")
    parse_retries: NonNegInt = knob(2, "re-asks after an unparseable reply")
    seed: Int = knob(0, "request seed base")
    extra: dict[str, Any] = knob({}, "provider params passed through as they are")
    max_failure_share: Share = knob(0.5, "a stage fails when more of a role's calls end in an error")


def _role_string(value: Any) -> Any:
    return {"model": value} if isinstance(value, str) else value


Role = Annotated[RoleFields, BeforeValidator(_role_string),
                 Expect("a model string or a mapping with keys " + ", ".join(RoleFields.model_fields))]


class Roles(Section):
    """``llm.roles``: an absent role is not configured (a stage needing it says so)."""

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

    prompt_tokens: PosInt | None = knob(None, "prompt tokens per stage; null: no limit")
    cost_usd: NonNegNum | None = knob(None, "estimated cost per stage; null: no limit")


class Llm(Section):
    store: Url | None = knob(".rubriclab/calls.sqlite", "the call store: cache + resume point + ledger")
    templates_dir: Str | None = knob(None, "a folder of <prompt>.txt overriding the packaged prompts")
    prefix_order: Bool = knob(True, "embedded model: run calls sharing a prompt prefix back to back")
    provider_processes: PosInt = knob(1, "processes making calls to providers over the network; 1: the stage's own")
    budget: LlmBudget | None = knob(LlmBudget, "per stage, fresh calls only")
    defaults: RoleDefaults = knob(RoleDefaults, "applied to every role unless the role overrides them")
    roles: Roles = knob(Roles, "the models per role")


# -- data ----------------------------------------------------------------------------------------------------------
class Source(BaseModel):
    """One ``data.sources.<name>``; loader-specific keys are checked by the loader (rubriclab.data)."""

    model_config = ConfigDict(extra="allow", strict=True)

    loader: _lit(LOADERS)
    domain: Str | None = knob(None, "domain label; null: the source's name")
    limit: NonNegInt | None = knob(None, "pairs read; null: all")


class Premise(Section):
    sources: list[Name] = knob([], "data sources split for PReMISE")
    extraction: NonNegInt = knob(1000, "discovery pairs", paper="1000")
    audit: NonNegInt = knob(500, "audit-pool pairs", paper="500")
    heldout: NonNegInt = knob(3000, "held-out pairs", paper="3000")
    dev: NonNegInt = knob(0, "repair's acceptance split", paper="not given")


class RipdSetting(Section):
    bench: Name
    target: Name
    train: NonNegInt = knob(1000, "pairs per domain", paper="1000")
    val: NonNegInt = knob(1000, "pairs per domain", paper="1000")
    test: NonNegInt = knob(1000, "pairs per domain", paper="1000")


class MaxChars(Section):
    """``data.max_chars``: a pair with a longer prompt or response is dropped (rubriclab.data.DEFAULT_MAX_CHARS)."""

    prompt: PosInt = knob(32_000, "characters")
    response: PosInt = knob(32_000, "characters")


class Data(Section):
    seed: Int = knob(42, "the one seed of splits, presentation orders and training")
    sources: dict[str, Source] = knob({}, "named pair sources")
    premise: Premise = knob(Premise, "PReMISE splits per source")
    ripd: dict[str, RipdSetting] = knob({}, "benchmark-target settings")
    max_chars: MaxChars = knob(MaxChars, "size guard")


class Tracking(Section):
    experiment: Name = knob("rubriclab", "MLflow experiment")


# -- discover ------------------------------------------------------------------------------------------------------
class PrefRank(Section):
    pool: PosInt = knob(40, "high-impact pool: top support criteria", paper="2K")
    max_pairs: PosInt = knob(1000, "discovery pairs scored", paper="all extraction pairs")
    mode: _lit(PREF_RANK_MODES) = knob("score", "score (1-10, real judges) | yes_no (logit gap)")


class TaskDerived(Section):
    k: PosInt = knob(None, "rubric size; absent: discover.k")
    tasks: dict[str, Name] = knob({}, "dataset: task description (no task: source skipped)")


class Discover(Section):
    datasets: list[Name] = knob([], "one discover stage instance per dataset")
    max_pairs: PosInt = knob(1000, "extraction pairs used", paper="1000")
    min_criteria: PosInt = knob(5, "criteria per extraction reply", paper="5")
    max_criteria: PosInt = knob(15, "criteria per extraction reply", paper="15")
    k: PosInt = knob(20, "final rubric size K", paper="20")
    target_size: PosInt = knob(40, "stop consolidating at this pool size", paper="2K")
    cluster_size: PosInt = knob(20, "agglomerative cluster size target T", paper="20")
    max_levels: NonNegInt = knob(10, "L_max; 0: no consolidation level", paper="10")
    batch_size: PosInt = knob(150, "ids per sub-grouping call", paper="<=150")
    min_split: PosInt = knob(4, "an invalid batch is halved down to this size")
    n_min: PosInt = knob(10, "minimum support", paper="10")
    min_pairs: PosInt = knob(3, "distinct source pairs behind a criterion")
    mmr_lambda: Share = knob(0.7, "MMR weight on support vs diversity")
    min_description_words: NonNegInt = knob(20, "consolidated descriptions", paper=">=20 words")
    min_candidate_words: NonNegInt = knob(4, "shorter descriptions are rejected")
    identical_limit: Share = knob(0.5, "share of replies a verbatim criterion may repeat in; 1.0 = off")
    pref_rank: PrefRank = knob(PrefRank, "preference-rank selection")
    task_derived: TaskDerived = knob(TaskDerived, "criteria from a task description alone")
    imported_dir: Name = knob("experiments/rubrics", "hand-written or external rubric sets")


# -- audit ---------------------------------------------------------------------------------------------------------
class ParaphraseCheck(Section):
    min_similarity: Cosine = knob(0.6, "cosine to the original; below = meaning changed")
    max_similarity: Cosine = knob(0.995, "at or above = a copy")
    min_length_ratio: NonNegNum = knob(0.4, "words of paraphrase / words of original")
    max_length_ratio: NonNegNum = knob(2.5, "words of paraphrase / words of original")


class AttackCheck(Section):
    min_words: NonNegNum = knob(5, "an attacker reply shorter than this is not a response")
    max_words: NonNegNum = knob(2000, "an attacker reply longer than this is not a response")


class Audit(Section):
    sources: list[Name] = knob([], "rubric sets audited")
    axes: list[_lit(AUDIT_AXES)] = knob(list(AUDIT_AXES), "axes run")
    pool_size: PosInt = knob(None, "audit-pool pairs used; absent: all", paper="500")
    heldout_size: PosInt = knob(None, "held-out pairs; absent: all", paper="3000")
    out_of_domain: dict[str, Name] = knob({}, "dataset whose audit-pool prompts measure App_out")
    runs: PosInt = knob(5, "flip-rate re-runs R", paper="5")
    run_temperature: NonNegNum = knob(0.7, "temperature of the re-runs")
    paraphrases: NonNegInt = knob(5, "P; 0 or 1: no paraphrase rho", paper="5")
    paraphrase_temperature: NonNegNum = knob(0.8, "paraphraser temperature")
    samples: PosInt = knob(5, "majority of n samples", paper="5")
    sample_temperature: NonNegNum = knob(0.7, "temperature of the samples")
    templates: Annotated[list[_lit(AUDIT_TEMPLATES)], Field(min_length=1)] = knob(
        list(AUDIT_TEMPLATES), "judge templates")
    both_orders: Bool = knob(False, "judge each held-out pair in both orders")
    early_stop: Bool = knob(True, "stop sampling once the majority cannot change")
    n_attacks: PosInt = knob(500, "adversarial attempts per criterion N", paper="500")
    tau: Tau = knob(7, "high-score threshold on the judge's 0-10 score", paper="7")
    n_boot: PosInt = knob(2000, "item-bootstrap resamples for CIs", paper="2000")
    n_boot_paired: PosInt = knob(5000, "paired bootstrap between rubric sets", paper="5000")
    confidence: Prob = knob(0.95, "level of every interval in the card")
    tie_credit: Share = knob(TIE_CREDIT, "accuracy credit of a tied verdict (TIE_CREDIT: the project's one rule)")
    alpha_orientation: _lit(ALPHA_ORIENTATIONS) = knob("as_presented", "alpha on scores as presented | chosen_oriented")
    baseline_reference: _lit(BASELINE_REFERENCES) = knob("other", "what the baseline verifier sees")
    paraphrase_check: ParaphraseCheck = knob(ParaphraseCheck, "a paraphrase is used only if it keeps its meaning")
    attack_check: AttackCheck = knob(AttackCheck, "an attacker reply is an attack only if it is a response")
    injection: Bool = knob(True, "injection sensitivity of judge[0]")


# -- repair --------------------------------------------------------------------------------------------------------
class Packet(Section):
    per_kind: NonNegInt = knob(3, "cases shown to the refiner per kind")
    margin: NonNegNum = knob(1.0, "|panel mean - 5| <= margin: a borderline pair")
    unstable_spread: NonNegNum = knob(4.0, "panel max - min >= this: unstable")
    max_chars: PosInt = knob(400, "each response cut to this many characters")


class Budget(Section):
    """``repair.budget`` (rubriclab.rubrics.BudgetLimits is this model); {} = the paper's."""

    max_words: NonNegInt = knob(150, "words per criterion")
    max_first_paragraph_words: NonNegInt = knob(60, "words of the first paragraph")
    allow_nested_conditionals: Bool = knob(False, "")
    nested_conditional_scope: _lit(NESTED_CONDITIONAL_SCOPES) = knob("first_paragraph", "")
    max_anti_gaming_clauses: NonNegInt = knob(2, "")
    max_anti_gaming_clause_words: NonNegInt = knob(40, "")
    max_applicability_gates: NonNegInt = knob(1, "")
    max_numbered_items: NonNegInt = knob(3, "")
    allow_nested_items: Bool = knob(False, "")
    require_prompt_agnostic: Bool = knob(True, "")


class RepairSweep(Section):
    deltas: list[Delta] = knob([0.0, math.inf], "reliability tolerances delta; 0 and inf are always in")
    candidates: list[PosInt] = knob([4], "candidates per criterion", paper="not given")


class Study(Section):
    storage: Url | None = knob(None, "null: a journal file under the stage's outputs; or an RDB URL")


class Repair(Section):
    sources: list[Name] = knob([], "rubric sets to repair")
    dev_size: PosInt = knob(None, "dev pairs; absent: all", paper="not given")
    heldout_size: PosInt = knob(None, "held-out pairs; absent: all", paper="3000")
    n_attacks: PosInt = knob(500, "attacks per criterion on dev and held-out", paper="500")
    max_criteria: PosInt | None = knob(None, "criteria repaired per set; null: all", paper="all")
    max_operators: PosInt = knob(2, "operators composed per candidate", paper="2-3")
    operators: list[_lit(OPERATORS)] | None = knob(None, "restrict to a subset of the library; null or []: all seven")
    packet: Packet = knob(Packet, "failure packet per criterion")
    budget: Budget = knob(Budget, "structural budget")
    sweep: RepairSweep = knob(RepairSweep, "the Optuna study")
    study: Study = knob(Study, "")


# -- drift ---------------------------------------------------------------------------------------------------------
class DriftLimits(Section):
    train: PosInt | None = knob(None, "pairs per domain; null: all", paper="1000")
    val: PosInt | None = knob(None, "pairs per domain; null: all", paper="1000")
    test: PosInt | None = knob(None, "pairs per domain; null: all", paper="1000")


class DriftSearch(Section):
    population: PosInt = knob(12, "few-shot ICL initial population", paper="12")
    rounds: PosInt = knob(4, "T", paper="4")
    subsample: TopP = knob(0.2, "share of each train split per round", paper="20%")
    eps_train: NonNegNum = knob(0.05, "eps_train", paper="0.05")
    top_k: PosInt = knob(10, "k", paper="10")
    children: PosInt = knob(4, "t", paper="4")


class DriftCases(Section):
    bench: NonNegInt = knob(4, "error cases per refinement prompt", paper="not given")
    target: NonNegInt = knob(4, "error cases per refinement prompt", paper="not given")


class TextGrad(Section):
    bench_batch: NonNegInt = knob(2, "", paper="2")
    target_batch: NonNegInt = knob(4, "", paper="4")
    rollback: PosInt = knob(3, "", paper="3")


class DriftGrid(Section):
    eps_train: list[NonNegNum] = knob(None, "absent: the configured point")
    population: list[PosInt] = knob(None, "absent: the configured point")
    rounds: list[PosInt] = knob(None, "absent: the configured point")


class DriftStudy(Section):
    grid: DriftGrid = knob(DriftGrid, "Optuna grid; the configured point is always in it")
    storage: Url | None = knob(None, "null: a journal file in outputs/drift/<setting>/; or an RDB URL")


class Stealth(Section):
    runs: NonNegInt = knob(30, "evaluator comparisons per selected rubric; 0: off", paper="30")


class Transfer(Section):
    judges: list[Name] = knob([], "other judge models for the selected rubrics")


class Gate(Section):
    """``drift.gate``: ``rubriclab drift check`` (not part of the stage)."""

    alpha: Prob = knob(0.05, "FDR level (Benjamini-Hochberg across domains)")
    power: Prob = knob(0.8, "power of the stated minimum detectable drop")
    confidence: Prob = knob(0.95, "level of the paired bootstrap intervals")
    n_boot: PosInt = knob(2000, "bootstrap resamples (pairs)")
    tie_credit: Share = knob(TIE_CREDIT, "agreement credit of a tied verdict")
    epsilon: Share = knob(0.05, "benchmark tolerance eps: the largest benchmark drop that still preserves it",
                          paper="eps_train 0.05")
    samples: PosInt = knob(1, "judge draws per verdict (majority)")
    seed: Int | None = knob(None, "null: data.seed")
    max_clusters: PosInt = knob(12, "prompt clusters when the data has no domain labels")


class Drift(Section):
    settings: list[Name] = knob([], "data.ripd settings: one drift stage instance each")
    seed_rubrics: dict[str, Name] = knob({}, "the seed judge template per setting")
    limits: DriftLimits | None = knob(DriftLimits, "pairs used per split and domain")
    methods: list[_lit(DRIFT_METHODS)] = knob(list(DRIFT_METHODS), "search methods run")
    val_budget: PosInt = knob(30, "candidates each method validates", paper="30")
    refill: NonNegInt = knob(2, "invalid proposals replaced by <= refill x val_budget more")
    samples: PosInt = knob(1, "judge draws per verdict", paper="1")
    tie_credit: Share = knob(TIE_CREDIT, "agreement credit of a tied verdict", paper="0.5")
    max_chars: PosInt = knob(600, "each response cut to this many characters in rewriting prompts")
    search: DriftSearch = knob(DriftSearch, "Alg. 1")
    cases: DriftCases = knob(DriftCases, "")
    textgrad: TextGrad = knob(TextGrad, "")
    study: DriftStudy = knob(DriftStudy, "")
    stealth: Stealth = knob(Stealth, "")
    transfer: Transfer = knob(Transfer, "")
    n_boot: PosInt = knob(1000, "")
    confidence: Prob = knob(0.95, "")
    gate: Gate | None = knob(Gate, "null: every gate default")


# -- align ---------------------------------------------------------------------------------------------------------
class AlignRubrics(Section):
    seed: Name = None
    biased: Name = None
    seed_prompt_id: PromptId = None
    biased_prompt_id: PromptId = None


class AlignLabel(Section):
    pairs: PosInt | None = knob(None, "train pairs labelled per domain; null: all", paper="20,000")
    samples: PosInt = knob(1, "judge draws per label (majority)")


class Lora(Section):
    r: PosInt = knob(16, "")
    alpha: PosInt = knob(32, "")
    dropout: Dropout = knob(0.05, "")
    target_modules: list[Name] = knob(["q_proj", "k_proj", "v_proj", "o_proj"], "")


class Dpo(Section):
    """``align.dpo`` (rubriclab.align.DPOSettings)."""

    mode: _lit(DPO_MODES) = knob("lora", "lora | full", paper="full for ~2B, LoRA for ~8B")
    beta: PosNum = knob(0.1, "", paper="0.1")
    loss_type: _lit(DPO_LOSS_TYPES) = knob("sigmoid", "", paper="sigmoid")
    epochs: PosNum = knob(1.0, "", paper="1")
    max_steps: PosInt | None = knob(None, "null: by epochs")
    learning_rate: PosNum | None = knob(None, "null: the paper's for the mode (DPO_LEARNING_RATES)",
                                        paper="1e-4 LoRA, 1e-6 full")
    batch_size: PosInt = knob(4, "", paper="32")
    grad_accum: PosInt = knob(1, "")
    scheduler: Name = knob("cosine", "", paper="cosine")
    warmup_ratio: Dropout = knob(0.03, "", paper="0.03")
    max_length: PosInt = knob(2048, "", paper="2048")
    max_grad_norm: NonNegNum = knob(1.0, "0: no clipping", paper="1")
    lora: Lora = knob(Lora, "")
    device: _lit(DPO_DEVICES) = knob("auto", "")

    @property
    def lr(self) -> float:
        """The learning rate a training uses: ``learning_rate``, or the paper's for ``mode`` when it is null (full
        fine-tuning at LoRA's 1e-4 would be 100× the paper's step)."""
        return float(self.learning_rate) if self.learning_rate is not None else DPO_LEARNING_RATES[self.mode]


class AlignEvaluate(Section):
    prompts: PosInt | None = knob(None, "null: all")
    n: PosInt = knob(4, "generations per prompt")
    temperature: NonNegNum = knob(0.7, "")
    top_p: TopP = knob(0.9, "")
    max_new_tokens: PosInt = knob(256, "")
    tie_credit: Share = knob(TIE_CREDIT, "win credit of a tie", paper="0.5")
    judge_samples: PosInt = knob(1, "")


class Align(Section):
    settings: list[Name] = knob([], "data.ripd settings: one align stage instance each")
    rubrics: dict[str, AlignRubrics] = knob({}, "per setting: the seed and the second rubric")
    third_party_template: Name = knob("experiments/align/rewardbench_pairwise.json", "the third party's prompt")
    regimes: list[_lit(ALIGN_REGIMES)] = knob(list(ALIGN_REGIMES), "B, T, BT")
    label: AlignLabel = knob(AlignLabel, "")
    dpo: Dpo = knob(Dpo, "TRL DPOTrainer")
    evaluate: AlignEvaluate = knob(AlignEvaluate, "")
    n_boot: PosInt = knob(1000, "")
    confidence: Prob = knob(0.95, "")


# -- probe ---------------------------------------------------------------------------------------------------------
class ProbeDataset(Section):
    path: Name
    format: _lit(ITEM_FORMATS) = knob("auto", "")
    limit: PosInt | None = knob(None, "null: all records")


class ProbeRubricSets(Section):
    files: list[Name] = knob([], "")
    pairs: Name = knob("outputs/data/premise/demo_helpful/audit.parquet", "")
    max_pairs: PosInt = knob(3, "")


class Counterfactual(Section):
    datasets: list[Name] = knob(None, "absent: the first labelled dataset")
    n_items: NonNegInt | None = knob(None, "conversations, one rubric item each; null: all")


class Probe(Section):
    datasets: dict[str, ProbeDataset] = knob({}, "")
    rubric_sets: ProbeRubricSets = knob(ProbeRubricSets, "")
    models: list[_lit(PROBE_MODELS)] = knob(list(PROBE_MODELS), "")
    encoder: Name | None = knob(None, "a fine-tuned encoder (needs a GPU); null: none")
    class_weight: Literal["balanced"] | None = knob("balanced", "")
    balance: _lit(PROBE_BALANCE) = knob("none", "")
    test_size: Prob = knob(0.2, "")
    split_tolerance: Share = knob(0.1, "largest miss of the held-out item share from test_size; a group split that "
                                       "misses more is refused")
    cv_folds: NonNegInt = knob(5, "< 2: no cross-validation")
    n_boot: PosInt = knob(10000, "")
    confidence: Prob = knob(0.95, "")
    counterfactual: Counterfactual = knob(Counterfactual, "")
    projection: _lit(PROBE_PROJECTIONS) = knob("auto", "semantic 2-D projection; auto: UMAP from 20 labelled items, "
                                                       "else PCA")


class Report(Section):
    mlflow_ui: Url = knob("http://127.0.0.1:5000", "the MLflow UI address the report's and cards' run links point to "
                                                   "(`rubriclab ui` serves it there)")


# -- recorded ------------------------------------------------------------------------------------------------------
ConditionPair = Annotated[list[Name], Field(min_length=2, max_length=2), Expect("[condition a, condition b]")]


class RecordedSource(Section):
    """``recorded.sources.<name>`` (rubriclab.stages.recorded); unset keys are absent (the format decides)."""

    path: Name  # a folder (llmbar, pandalm), a file (table), a tracking URI or .db file (mlflow), a call store
    # (store: a file, a URL, or llm.store for the project's own); shipped:<set> for a set shipped with the package
    format: _lit(RECORDED_FORMATS)
    experiment: Name = None  # mlflow: experiment name or id
    instruction_difficulty: Name = None  # alpaca_eval: the publishers' instruction_difficulty.csv (for the LC rate)
    assessments: list[Name] = None  # mlflow: only these assessment names
    testdata: Name = None  # autoj: testdata_pairwise.jsonl (default: found beside the outputs, as the repo lays it out)
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
    # format inspect_ai: the human grades (a table with sample_id, label; or `target`: each sample's target), the
    # number at or above which a numeric score is a correct grade, and several epochs as items or conditions
    labels: Name = None
    threshold: Num = None
    epochs: _lit(("items", "conditions")) = None


class RecordedCalibrate(Section):
    """``recorded.calibrate`` (rubriclab.calibrate.CellSettings)."""

    label_fraction: Prob = knob(0.1, "share of pairs given a human label")
    seed: NonNegInt = knob(0, "")
    lam: NonNegNum | None = knob(1.0, "ppi_py's lambda (1: plain PPI; null: power-tuned PPI++, "
                                                "under-covered with few labels)")
    order: _lit(ORDER_CHOICES) = knob("both", "")
    none: _lit(NONE_POLICIES) = knob("half", "")
    coverage_draws: NonNegInt = knob(200, "label draws that check each interval's coverage on a fully labelled set "
                                          "(0: not checked, and no level is claimed)")


class Recorded(Section):
    sources: dict[str, RecordedSource] = knob({}, "one recorded stage instance each")
    confidence: Prob = knob(0.95, "")
    n_boot: PosInt = knob(2000, "")
    seed: NonNegInt = knob(0, "")
    alpha: Prob = knob(0.05, "")
    power: Prob = knob(0.8, "")
    tie_credit: Share = knob(TIE_CREDIT, "credit of a tie verdict when the label is not a tie")
    length_delta: NonNegInt = knob(30, "prefers longer: pairs whose lengths differ by more than this many characters "
                                       "(AlpacaEval's significant_delta_length)")
    min_list_items: PosInt = knob(1, "prefers lists: list lines that make a list (AlpacaEval's contains_list: 1)")
    baseline: Name | None = knob(None, "")
    contrasts: dict[str, ConditionPair] | None = knob(None, "name: [a, b]; null: the importer's own; {}: none")
    contrast_judges: list[Name] | None = knob(None, "")
    calibrate: RecordedCalibrate | None = knob(None, "null: no calibration")


class Params(Section):
    """The whole params.yaml, every default filled in (``Params.of``); ``given()`` is what the file said."""

    llm: Llm = knob(Llm)
    data: Data = knob(Data)
    tracking: Tracking = knob(Tracking)
    discover: Discover = knob(Discover)
    audit: Audit = knob(Audit)
    repair: Repair = knob(Repair)
    drift: Drift = knob(Drift)
    align: Align = knob(Align)
    probe: Probe = knob(Probe)
    report: Report = knob(Report)
    recorded: Recorded = knob(Recorded)

    @classmethod
    def of(cls, params: Any, source: str = "params.yaml", overrides: list[str] | None = None) -> Params:
        """``params`` as a typed object: a Params as it is; a mapping validated (one-line ConfigError)."""
        if isinstance(params, Params):
            return params
        try:
            return cls.model_validate(dict(params or {}))
        except ValidationError as exc:
            raise ConfigError(_one_line(exc, source, overrides)) from None

    def given(self) -> dict[str, Any]:
        """What params.yaml (and ``--set``) spelled out, as a plain dict (no defaults)."""
        return self.model_dump(exclude_unset=True)

    def effective(self, sections: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Every effective value of ``sections`` (all when None), defaults included; roles as configured."""
        out = self.model_dump()
        out["llm"]["roles"] = self.llm.roles.model_dump(exclude_unset=True)
        return {k: v for k, v in out.items() if sections is None or k in sections}


# the sections each stage reads (dvc.yaml lists the same under `params:`), for `rubriclab params STAGE`
STAGE_SECTIONS: dict[str, tuple[str, ...]] = {
    "data": ("data", "tracking"), "discover": ("discover", "llm", "data", "tracking"),
    "audit": ("audit", "llm", "data", "tracking"), "repair": ("repair", "audit", "llm", "data", "tracking"),
    "drift": ("drift", "llm", "data", "tracking"), "align": ("align", "llm", "data", "tracking"),
    "probe": ("probe", "llm", "data", "tracking"), "recorded": ("recorded", "llm", "data", "drift", "tracking"),
    "report": ("report", "llm", "tracking")}


def given(params: Any) -> dict[str, Any]:
    """The plain dict of ``params`` (a Params or a mapping) as spelled out, for code reading dicts."""
    return params.given() if isinstance(params, Params) else params


def section_of(params: Any, name: str) -> Any:
    """The typed section ``name`` of ``params``: the section itself as it is, else that of ``Params.of(params)``."""
    kind = Params.model_fields[name].default_factory
    return params if isinstance(params, kind) else getattr(Params.of(params), name)


def check_places(obj: Any, places: dict[str, str], under: str = "") -> None:
    """Check the fields of a flat settings object (RepairSettings, recorded Settings, AuditContext) at their places
    in params.yaml (``{"margin": "packet.margin"}`` ``under`` ``"repair"``): the schema's ranges and allowed values,
    its one-line errors, defined nowhere else."""
    tree: dict[str, Any] = {}
    for name, place in places.items():
        *up, key = f"{under}.{place}".strip(".").split(".")
        value = getattr(obj, name)  # a tuple as params.yaml's list
        functools.reduce(lambda d, k: d.setdefault(k, {}), up, tree)[key] = list(value) if type(value) is tuple else value
    Params.of(tree)


def as_section(name: str, value: Any) -> Any:
    """``value`` as the typed section ``name``: the section as it is; a mapping (or None) validated as params.yaml's
    ``name:`` would be, with the same one-line errors."""
    kind = Params.model_fields[name].default_factory
    return value if isinstance(value, kind) else getattr(Params.of({name: dict(value or {})}), name)


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


def _describe(tp: Any, plural: bool = False) -> str:
    """What a value of declared type ``tp`` must be, in words (``plural``: as a list's items)."""
    meta: list[Any] = []
    nullable = False
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp, *extra = typing.get_args(tp)
            for m in extra:
                if isinstance(m, Expect) and (not plural or m.plural):
                    return (m.plural if plural else m.text) + (" or null" if nullable else "")
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
    if isinstance(value, str) and url_credential(value):
        return f"a URL with {url_credential(value)} (not shown)"
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


def _one_line(exc: ValidationError, source: str, overrides: list[str] | None) -> str:
    """Every problem of ``exc`` as ``<source>: <place>: got <value>; expected <what>`` with the ``--set`` it came
    from, joined by "; " (``params.yaml: audit.runs: got 'abc'; expected an integer >= 1``)."""
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        line = f"{source}: {describe_error(error)}{_override_note(loc, list(overrides or []))}"
        if line not in lines:  # a value failing every branch of a union is one problem
            lines.append(line)
    return "; ".join(lines)


def validate_params(params: Any, source: str = "params.yaml", overrides: list[str] | None = None) -> Params:
    """``params`` checked against the schema and every default filled in; raises one ConfigError listing every
    problem on one line (``_one_line``)."""
    return Params.of(params, source, overrides)
