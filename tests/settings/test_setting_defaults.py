"""One default per setting (issue 61): the schema (``rubriclab.settings``, one pydantic model per params.yaml section)
holds each key's default, and everything else that states it agrees: params.yaml, the docs and the CLI's help.

- params.yaml: every key it spells is at the schema's default unless ``OVERRIDES`` lists it, with why (the embedded
  demo's small sizes, the pipeline's own inputs, the embedded model's needs); a listed key must differ from the
  default, or it is a stale copy and leaves the list. A role's field must differ from ``llm.defaults`` (else the role
  repeats it). No comment in params.yaml states a default.
- the docs: every default the hand-written pages and the README state (```recorded.alpha` (0.05``, ```drift.gate``:
  `epsilon` (0.05)``, ``(`llm.provider_processes`, default 1)``) is the schema's; the generated params reference
  shows each default as the schema's value.
- the CLI: an option that stands for a setting (``CLI_SETTINGS``) takes its default from the schema (argparse
  default None) and a default its help states is the schema's; every params key a help names exists; an option
  that states or holds a default of its own is either a setting's or listed in ``CLI_ONLY``.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from rubriclab import settings as S
from rubriclab.settings import _strip  # the schema's own unwrapping of Annotated / | None

ROOT = Path(__file__).resolve().parents[2]
NAME = "<name>"  # a user-named entry (data.sources.<name>, ...), as the params reference writes it

# -- params.yaml's deliberate departures from the schema's defaults ---------------------------------------------------
DEMO = "the embedded demo's small size (the schema's default is the paper's or the full set)"
INPUTS = "what the shipped pipeline runs on (the schema's default: nothing configured)"
EMBEDDED = "the embedded model (SmolLM2-135M, one call at a time on a 2-core CPU)"
OVERRIDES: dict[str, str] = {
    "llm.defaults.max_tokens": EMBEDDED + ": short replies",
    "llm.defaults.concurrency": EMBEDDED + ": it decodes one call at a time",
    "data.premise.sources": INPUTS,
    "data.premise.extraction": DEMO,
    "data.premise.audit": DEMO,
    "data.premise.heldout": DEMO,
    "data.premise.dev": "repair's acceptance split; the schema's 0 leaves it empty",
    f"data.ripd.{NAME}.train": DEMO,
    f"data.ripd.{NAME}.val": DEMO,
    f"data.ripd.{NAME}.test": DEMO,
    "discover.datasets": INPUTS,
    "discover.max_pairs": DEMO,
    "discover.min_criteria": DEMO,
    "discover.max_criteria": DEMO,
    "discover.k": DEMO,
    "discover.target_size": DEMO,
    "discover.cluster_size": DEMO,
    "discover.max_levels": DEMO,
    "discover.n_min": DEMO,
    "discover.min_pairs": DEMO,
    "discover.pref_rank.pool": DEMO,
    "discover.pref_rank.max_pairs": DEMO,
    "discover.pref_rank.mode": EMBEDDED + ": yes_no reads its logit gap; score needs a real judge",
    "discover.task_derived.k": DEMO + " (the schema's: discover.k)",
    "discover.task_derived.tasks": INPUTS,
    "audit.sources": INPUTS,
    "audit.pool_size": DEMO,
    "audit.heldout_size": DEMO,
    "audit.out_of_domain": INPUTS,
    "audit.runs": DEMO,
    "audit.paraphrases": DEMO,
    "audit.samples": DEMO,
    "audit.n_attacks": DEMO,
    "audit.n_boot": DEMO,
    "audit.n_boot_paired": DEMO,
    "repair.sources": INPUTS,
    "repair.dev_size": DEMO,
    "repair.heldout_size": DEMO,
    "repair.n_attacks": DEMO,
    "repair.max_criteria": DEMO,
    "repair.packet.per_kind": DEMO,
    "repair.sweep.deltas": "the shipped study's δ grid (the schema's: 0 and ∞ only)",
    "repair.sweep.candidates": DEMO,
    "drift.settings": INPUTS,
    "drift.seed_rubrics": INPUTS,
    "drift.limits.train": DEMO,
    "drift.limits.val": DEMO,
    "drift.limits.test": DEMO,
    "drift.val_budget": DEMO,
    "drift.max_chars": DEMO + ": shorter rewriting prompts for the embedded model",
    "drift.search.population": DEMO,
    "drift.search.rounds": DEMO,
    "drift.search.top_k": DEMO,
    "drift.search.children": DEMO,
    "drift.cases.bench": DEMO,
    "drift.cases.target": DEMO,
    "drift.study.grid.eps_train": "the shipped study's grid (the schema's: the configured point)",
    "drift.study.grid.population": "the shipped study's grid (the schema's: the configured point)",
    "drift.study.grid.rounds": "the shipped study's grid (the schema's: the configured point)",
    "drift.stealth.runs": DEMO,
    "align.settings": INPUTS,
    "align.label.pairs": DEMO,
    "align.dpo.learning_rate": DEMO + ": a few steps on a handful of pairs need a higher rate than the paper's",
    "align.dpo.batch_size": DEMO,
    "align.dpo.warmup_ratio": DEMO + ": on a few steps 3% warm-up is one whole step at rate 0",
    "align.dpo.max_length": DEMO,
    "align.evaluate.prompts": DEMO,
    "align.evaluate.n": DEMO,
    "align.evaluate.max_new_tokens": DEMO,
    f"probe.datasets.{NAME}.format": "the shipped sets name their format (the schema's: auto, detected)",
    f"probe.datasets.{NAME}.limit": DEMO,
    "probe.counterfactual.datasets": INPUTS,
    "probe.counterfactual.n_items": DEMO,
}
# the entries of a user-named map are the user's data, not copies of a default: their required keys and the keys a
# format reads have no default to compare (data.sources.<name>.loader, recorded.sources.<name>.path, ...)
FREE_FORM = (f"data.sources.{NAME}", f"recorded.sources.{NAME}", f"align.rubrics.{NAME}", f"data.ripd.{NAME}.bench",
             f"data.ripd.{NAME}.target", f"probe.datasets.{NAME}.path")

# -- CLI options that stand for a setting ------------------------------------------------------------------------------
CLI_SETTINGS: dict[tuple[str, ...], str] = {
    ("discover", "--k"): "discover.k",
    ("repair", "--candidates"): "repair.sweep.candidates",
    ("repair", "--storage"): "repair.study.storage",
    ("calibrate", "verdicts", "--order"): "recorded.calibrate.order",
    ("calibrate", "verdicts", "--none"): "recorded.calibrate.none",
    ("calibrate", "verdicts", "--label-fraction"): "recorded.calibrate.label_fraction",
    ("calibrate", "verdicts", "--seed"): "recorded.calibrate.seed",
    ("calibrate", "verdicts", "--confidence"): "recorded.confidence",
    ("calibrate", "verdicts", "--lam"): "recorded.calibrate.lam",
    ("drift", "check", "--samples"): "drift.gate.samples",
    ("drift", "check", "--alpha"): "drift.gate.alpha",
    ("drift", "check", "--epsilon"): "drift.gate.epsilon",
    ("report", "--ui-url"): "report.mlflow_ui",
    ("recorded", "--epsilon"): "drift.gate.epsilon",
    ("calls", "--store"): "llm.store",
}
# options with a default of their own that is no params.yaml setting (why)
CLI_ONLY: dict[tuple[str, ...], str] = {
    ("calibrate", "export", "--n-adversarial"): "the labelling sheet's size [paper: 25]; no params key",
    ("calibrate", "export", "--n-baseline"): "the labelling sheet's size [paper: 17]; no params key",
    ("calibrate", "export", "--seed"): "the sheet's draw; no params key",
    ("calibrate", "import", "--confidence"): "annotator agreement intervals; no params key",
    ("calibrate", "import", "--n-boot"): "annotator agreement intervals; no params key",
    ("calibrate", "import", "--seed"): "annotator agreement intervals; no params key",
    ("drift", "check", "--by"): "how the gate groups pairs for this run; no params key",
    ("ui", "--host"): "where `rubriclab ui` listens; no params key",
    ("ui", "--port"): "where `rubriclab ui` listens; no params key",
    ("ui", "--workers"): "uvicorn processes of `rubriclab ui`; no params key",
    ("recorded", "--order"): "the presentation order `recorded gate` compares; no params key",
}


# -- the schema's leaves -------------------------------------------------------------------------------------------
def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _default(field: Any) -> Any:
    value = field.get_default(call_default_factory=True)
    return list(value) if isinstance(value, tuple) else value


def schema_leaves() -> dict[str, Any]:
    """``{dotted key: its field}`` for every leaf of the schema (not llm.roles: a role's fields inherit llm.defaults);
    the fields of a user-named map's entries under ``<name>``."""
    out: dict[str, Any] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            key = f"{prefix}.{name}" if prefix else name
            inner = _strip(field.annotation)
            if inner is S.Roles:
                continue
            if _is_model(inner):
                walk(inner, key)
            elif typing.get_origin(inner) is dict and _is_model(_strip(typing.get_args(inner)[1])):
                walk(_strip(typing.get_args(inner)[1]), f"{key}.{NAME}")
            else:
                out[key] = field

    walk(S.Params, "")
    return out


LEAVES = schema_leaves()


def _params_yaml() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def spelled(tree: dict[str, Any]) -> dict[str, list[tuple[str, Any]]]:
    """``{schema key: [(params.yaml's key, value), ...]}`` for every schema leaf params.yaml spells (one per named
    entry under ``<name>``)."""
    out: dict[str, list[tuple[str, Any]]] = {}

    def walk(key: str, parts: list[str], node: Any, path: list[str]) -> None:
        if len(path) == len(parts):
            out.setdefault(key, []).append((".".join(path), node))
            return
        if not isinstance(node, dict):
            return
        part = parts[len(path)]
        for name in (list(node) if part == NAME else [part] if part in node else []):
            walk(key, parts, node[name], path + [str(name)])

    for key in LEAVES:
        walk(key, key.split("."), tree, [])
    return out


def _is_free_form(key: str) -> bool:
    return any(key == f or key.startswith(f + ".") for f in FREE_FORM)


# -- params.yaml ---------------------------------------------------------------------------------------------------
def test_every_key_params_yaml_spells_is_at_the_schema_default_or_a_listed_override():
    stale, wrong = [], []
    for key, places in spelled(_params_yaml()).items():
        field = LEAVES[key]
        if _is_free_form(key) or field.is_required():
            continue
        default = _default(field)
        for where, value in places:
            if key in OVERRIDES:
                if value == default:
                    stale.append(f"{where}: {value!r} is the schema's default; drop {key} from OVERRIDES")
            elif value != default:
                wrong.append(f"{where}: params.yaml {value!r}, schema {default!r}")
    assert not wrong, ("params.yaml departs from the schema's default (fix the copy, or list the key in OVERRIDES "
                       "with why):\n" + "\n".join(wrong))
    assert not stale, "\n".join(stale)


def test_every_listed_override_is_a_schema_key_that_params_yaml_spells():
    used = spelled(_params_yaml())
    assert not set(OVERRIDES) - set(LEAVES), f"not schema keys: {sorted(set(OVERRIDES) - set(LEAVES))}"
    assert not set(OVERRIDES) - set(used), f"not in params.yaml: {sorted(set(OVERRIDES) - set(used))}"


def test_a_role_in_params_yaml_does_not_repeat_llm_defaults():
    params = S.Params.of(_params_yaml())
    defaults = params.llm.defaults.model_dump()
    repeats = []
    for role in params.llm.roles.model_fields_set:
        spec = getattr(params.llm.roles, role)
        for k in spec.model_fields_set:
            if k != "model" and k in defaults and getattr(spec, k) == defaults[k]:
                repeats.append(f"llm.roles.{role}.{k}: {getattr(spec, k)!r} is llm.defaults.{k}")
    assert not repeats, "a role repeats llm.defaults (drop the key from the role):\n" + "\n".join(repeats)


def _yaml_comments(text: str) -> list[tuple[int, str]]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        cut = line.find("#")
        if cut >= 0 and (cut == 0 or line[cut - 1].isspace()):
            out.append((i, line[cut + 1:]))
    return out


def test_no_comment_in_params_yaml_states_a_default():
    """A default is the schema's; a comment restating it ("keep the default (2)") goes stale when the schema
    changes. "[...]" brackets are the paper's values, and "null: ..." says what null means: both are fine."""
    said = [f"params.yaml:{i}:{c.strip()}" for i, c in _yaml_comments((ROOT / "params.yaml").read_text())
            if re.search(r"\bdefaults?\b\W{0,3}\(?-?\d", c)]
    assert not said, "\n".join(said)


# -- the docs ------------------------------------------------------------------------------------------------------
KEY = r"`(?P<key>[a-z_][a-z0-9_]*(?:\.[a-z0-9_<>]+)*)`"
VALUE = r"(?P<val>-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?%?|true|false|null|\.inf)(?![\w.-])"
# `key` (V  |  `key`, V  |  `key` = V  |  `key`, default V  |  `key` (default V
STATEMENT = re.compile(KEY + r"(?: ?\(|,| =)? ?(?:default:? )?" + VALUE + r"(?P<after>[^)\n]{0,80})")
# `section` (`a`, `b`: V ...)  -- several keys of one mapping sharing a value
SHARED = re.compile(KEY + r" \((?P<names>`[a-z_]+`(?:, `[a-z_]+`)*): " + VALUE)
SHIPPED_WORDS = ("demo", "params.yaml", "shipped", "here")  # "(3 in the demo)": params.yaml's value, not a default


def _doc_files() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*.md") if p.relative_to(ROOT / "docs").as_posix()
            not in ("reference/params.md", "reference/cli.md", "benchmarks.md")]
    return [ROOT / "README.md", *sorted(docs)]


def _number(text: str) -> Any:
    if text.endswith("%"):
        return float(text[:-1].replace(",", "")) / 100
    return yaml.safe_load(text.replace(",", ""))


def _resolve(key: str, context: list[str]) -> str | None:
    """``key`` as a schema leaf: as written, under a mapping named earlier in the paragraph (```drift.gate``: `alpha`
    (0.05)``), or a leaf name that only one schema key has."""
    if key in LEAVES:
        return key
    for prefix in reversed(context):
        if f"{prefix}.{key}" in LEAVES:
            return f"{prefix}.{key}"
    if "." not in key:
        ends = [k for k in LEAVES if k.rsplit(".", 1)[-1] == key]
        if len(ends) == 1:
            return ends[0]
    return None


def _prefixes() -> set[str]:
    return {k.rsplit(".", i)[0] for k in LEAVES for i in range(1, k.count(".") + 1)}


def doc_statements() -> list[tuple[str, str, Any, bool, str]]:
    """``(where, schema key, stated value, about params.yaml's value, text)`` for every value a doc states."""
    prefixes = _prefixes()
    out = []
    for path in _doc_files():
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        for para in re.split(r"\n\s*\n", text):
            line0 = text[:text.find(para)].count("\n") + 1
            context = [m.group("key") for m in re.finditer(KEY, para) if m.group("key") in prefixes]
            found = []
            for m in SHARED.finditer(para):
                for name in re.findall(r"`([a-z_]+)`", m.group("names")):
                    found.append((m.start(), f"{m.group('key')}.{name}", m.group("val"), "", m.group(0)))
            for m in STATEMENT.finditer(para):
                found.append((m.start(), m.group("key"), m.group("val"), m.group("after"), m.group(0)))
            for start, key, val, after, said in found:
                before = [c for c in context if para.find(f"`{c}`") < start]
                leaf = _resolve(key, before)
                if leaf is None:
                    continue
                shipped = any(w in after.split(";")[0].split(",")[0] for w in SHIPPED_WORDS)
                out.append((f"{rel}:{line0 + para[:start].count(chr(10))}", leaf, _number(val), shipped, said))
    return out


def test_the_docs_state_defaults_as_the_schema_has_them():
    statements = doc_statements()
    # the pages state a good many (drift-gate.md alone: the gate's nine): the extraction still finds them
    assert len(statements) >= 15, statements
    shipped_tree = _params_yaml()
    wrong = []
    for where, key, value, shipped, said in statements:
        if shipped:
            places = spelled(shipped_tree).get(key, [])
            ok = any(v == value for _, v in places)
            want = [v for _, v in places]
        else:
            want = _default(LEAVES[key])
            ok = value == want or (isinstance(want, float) and isinstance(value, (int, float))
                                   and math.isclose(value, want))
        if not ok:
            wrong.append(f"{where}: {said!r} -> {key} = {value!r}; {'params.yaml' if shipped else 'schema'}: {want!r}")
    assert not wrong, "a doc states a default the schema does not have:\n" + "\n".join(wrong)


def test_the_doc_statement_finder_reads_the_forms_the_pages_use():
    leaves = {(k, v) for _, k, v, _, _ in doc_statements()}
    assert ("drift.gate.epsilon", 0.05) in leaves            # `drift.gate` ... `epsilon` (0.05, ...
    assert ("llm.provider_processes", 1) in leaves            # (`llm.provider_processes`, default 1)
    assert ("data.max_chars.response", 32000) in leaves       # `data.max_chars` (`prompt`, `response`: 32,000 ...


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference_for_defaults", ROOT / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_params_reference_shows_the_schema_defaults():
    ref = _reference()
    rows = {r.key: r.default for r in ref.rows()}
    checked = 0
    for key, field in LEAVES.items():
        if field.is_required() or key not in rows:
            continue
        default = _default(field)
        if isinstance(default, BaseModel):
            continue
        shown = yaml.safe_load(rows[key])
        assert shown == default or (isinstance(default, float) and math.isclose(shown, default)), (
            f"reference/params.md shows {key} = {rows[key]!r}, the schema has {default!r}")
        checked += 1
    assert checked > 150
    page = ref.params_page()
    assert "| `drift.gate.epsilon` | a number in [0, 1] | `0.05` |" in page


# -- the CLI -------------------------------------------------------------------------------------------------------
HELP_DEFAULT = re.compile(r"default:?\s+(?:(?P<ref>[a-z_]+(?:\.[a-z_<>]+)+),\s*)?"
                          r"(?P<val>-?\d[\d.]*|true|false|null|https?://[^\s),;]+)")
HELP_KEY = re.compile(r"\b(?P<key>(?:" + "|".join(S.Params.model_fields) + r")(?:\.[a-z_<>]+)+)")


def cli_options() -> list[tuple[tuple[str, ...], argparse.Action]]:
    from rubriclab.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, path + (name,))
            elif action.option_strings and not isinstance(action, argparse._HelpAction):
                yield path + (action.option_strings[0],), action

    return list(walk(build_parser(), ()))


def _has_own_default(action: argparse.Action) -> bool:
    return (action.default not in (None, [], argparse.SUPPRESS) and not isinstance(
        action, (argparse._StoreTrueAction, argparse._StoreFalseAction)))


def test_cli_help_names_only_params_keys_that_exist():
    known = set(LEAVES) | _prefixes() | {f"{k}.{NAME}" for k in _prefixes()}
    bad = []
    for where, action in cli_options():
        for m in HELP_KEY.finditer(action.help or ""):
            key = re.sub(r"\.<[a-z]+>", f".{NAME}", m.group("key")).rstrip(".")
            if key not in known:
                bad.append(f"{' '.join(where)}: {m.group('key')}")
    assert not bad, "help names params keys the schema does not have:\n" + "\n".join(bad)


def test_cli_options_that_state_or_hold_a_default_are_classified():
    options = {w for w, _ in cli_options()}
    assert not set(CLI_SETTINGS) - options, f"no such options: {sorted(set(CLI_SETTINGS) - options)}"
    assert not set(CLI_ONLY) - options, f"no such options: {sorted(set(CLI_ONLY) - options)}"
    unknown = [f"{' '.join(w)} (default {a.default!r}; help {a.help!r})" for w, a in cli_options()
               if w not in CLI_SETTINGS and w not in CLI_ONLY
               and ((_has_own_default(a) and not callable(a.default)) or HELP_DEFAULT.search(a.help or ""))]
    assert not unknown, ("an option states or holds a default: map it to its setting in CLI_SETTINGS, or list it in "
                         "CLI_ONLY with why:\n" + "\n".join(unknown))


def _help_mismatches(where: tuple[str, ...], action: argparse.Action) -> list[str]:
    key = CLI_SETTINGS[where]
    default = _default(LEAVES[key])
    wrong = []
    for m in HELP_DEFAULT.finditer(action.help or ""):
        if m.group("ref") and m.group("ref") != key:
            wrong.append(f"{' '.join(where)}: help says default {m.group('ref')}, the option is {key}")
        stated = m.group("val") if m.group("val").startswith("http") else yaml.safe_load(m.group("val"))
        if stated != default:
            wrong.append(f"{' '.join(where)}: help says default {m.group('val')}, {key}'s is {default!r}")
    return wrong


def _literal_default(where: tuple[str, ...], action: argparse.Action) -> list[str]:
    if not _has_own_default(action):
        return []
    key = CLI_SETTINGS[where]
    return [f"{' '.join(where)}: default={action.default!r} (schema {key}: {_default(LEAVES[key])!r})"]


def test_a_default_the_cli_help_states_is_the_schemas():
    wrong = [w for where, action in cli_options() if where in CLI_SETTINGS
             for w in _help_mismatches(where, action)]
    assert not wrong, "\n".join(wrong)


def test_an_option_for_a_setting_takes_its_default_from_the_schema():
    """argparse default None (the schema's default, or params.yaml's value, applies); a literal default here is a
    second copy that also ignores params.yaml."""
    literal = [w for where, action in cli_options() if where in CLI_SETTINGS
               for w in _literal_default(where, action)]
    assert not literal, "an option holds its own copy of a setting's default:\n" + "\n".join(literal)
