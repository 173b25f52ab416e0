"""Parsers from each public source's real row format to canonical pair dicts.

Each parser takes rows exactly as ``datasets.load_dataset`` (or the source's own files) yield them
and never touches the network, so tests feed it small files written in the same format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rubriclab.data._clean import text_problem
from rubriclab.data._io import require_columns
from rubriclab.data._schema import stable_id
from rubriclab.errors import ConfigError, RubricLabError


class Drop(RubricLabError):
    """A row cannot become a pair; ``reason`` is counted, never hidden."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


ROLE_NAMES = {"user": "Human", "human": "Human", "assistant": "Assistant", "gpt": "Assistant", "system": "System"}


def _get(row: dict, key: str) -> Any:
    value = row.get(key)
    if value is None:
        raise Drop("missing_field")
    return value


def _text(value: Any) -> str:
    """Message content as text; content may be a str or a list of ``{type, text}`` parts (Arena)."""
    if isinstance(value, list):
        parts = []
        for part in value:
            if not isinstance(part, dict):
                raise Drop("undecodable_text")
            if (part.get("type") or "text") != "text":
                raise Drop("non_text")  # images etc.: a text judge cannot see them
            parts.append(part.get("text") or "")
        value = "".join(parts)
    problem = text_problem(value)
    if problem:
        raise Drop(problem)
    return value


def _messages(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, str):  # some mirrors store conversations as JSON strings
        try:
            value = json.loads(value)
        except ValueError:
            raise Drop("unparseable_messages") from None
    if not isinstance(value, list) or not value:
        raise Drop("unparseable_messages")
    out = []
    for msg in value:
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise Drop("unparseable_messages")
        out.append((msg["role"].lower(), _text(msg.get("content"))))
    return out


def render_messages(messages: list[tuple[str, str]]) -> str:
    """A single user turn as its bare text; longer contexts as a ``Human:``/``Assistant:`` transcript.

    Same shape as the HH-RLHF prompts, so every source gives judges prompts of one kind.
    """
    if len(messages) == 1 and messages[0][0] in ("user", "human"):
        return messages[0][1].strip()
    return "\n\n".join(f"{ROLE_NAMES.get(r, r.capitalize())}: {c.strip()}" for r, c in messages)


def _last_assistant(value: Any) -> str:
    if isinstance(value, str):
        return value
    msgs = _messages(value)
    if msgs[-1][0] not in ("assistant", "gpt"):
        raise Drop("unparseable_messages")
    return msgs[-1][1]


# --- Anthropic/hh-rlhf ------------------------------------------------------------------------

_HH_ASSISTANT = "\n\nAssistant:"


def _hh_split(text: Any) -> tuple[str, str]:
    if text is None:
        raise Drop("missing_field")
    problem = text_problem(text)
    if problem:
        raise Drop(problem)
    i = text.rfind(_HH_ASSISTANT)
    if i < 0:
        raise Drop("unparseable_transcript")
    return text[:i], text[i + len(_HH_ASSISTANT) :]


def _hh_row(line: int, row: dict, opts: dict) -> dict:
    ctx_c, chosen = _hh_split(row.get("chosen"))
    ctx_r, rejected = _hh_split(row.get("rejected"))
    if ctx_c.strip() != ctx_r.strip():
        raise Drop("prompt_mismatch")
    n_turns = ctx_c.count("\n\nHuman:") + ctx_c.count("\n\nAssistant:")
    prompt = ctx_c.strip()
    if n_turns == 1 and prompt.startswith("Human:"):
        prompt = prompt[len("Human:") :].strip()
    return {
        "id": f"{opts['id_prefix']}{line:05d}",
        "domain": opts["domain"],
        "prompt": prompt,
        "chosen": chosen.strip(),
        "rejected": rejected.strip(),
        "meta": {"n_turns_context": n_turns},
    }


# --- HuggingFaceH4/ultrafeedback_binarized ----------------------------------------------------


def _uf_row(line: int, row: dict, opts: dict) -> dict:
    sc, sr = row.get("score_chosen"), row.get("score_rejected")
    if opts["drop_ties"] and sc is not None and sc == sr:
        raise Drop("tie")
    prompt = _get(row, "prompt")
    chosen, rejected = _last_assistant(_get(row, "chosen")), _last_assistant(_get(row, "rejected"))
    pid = row.get("prompt_id")
    return {
        "id": f"{opts['id_prefix']}{pid}" if pid else stable_id(prompt, chosen, rejected, prefix=opts["id_prefix"]),
        "domain": opts["domain"],
        "prompt": prompt,
        "chosen": chosen,
        "rejected": rejected,
        "meta": {"prompt_id": pid, "score_chosen": sc, "score_rejected": sr},
    }


# --- nvidia/HelpSteer3 (preference) -----------------------------------------------------------


def _hs3_row(line: int, row: dict, opts: dict) -> dict:
    if opts["language"] and row.get("language") not in _as_list(opts["language"]):
        raise Drop("other_language")
    pref = _get(row, "overall_preference")
    if not isinstance(pref, (int, float)) or isinstance(pref, bool):
        raise Drop("bad_label")
    if pref == 0:
        raise Drop("tie")
    r1, r2 = _get(row, "response1"), _get(row, "response2")
    chosen, rejected = (r1, r2) if pref < 0 else (r2, r1)  # negative = response1 better
    prompt = render_messages(_messages(_get(row, "context")))
    return {
        "id": stable_id(prompt, r1, r2, prefix=opts["id_prefix"]),
        "domain": opts["domain"] or row.get("domain") or "helpsteer3",
        "prompt": prompt,
        "chosen": chosen,
        "rejected": rejected,
        "meta": {
            "overall_preference": pref,
            "hs3_domain": row.get("domain"),
            "language": row.get("language"),
            "chosen_is": "response1" if pref < 0 else "response2",
        },
    }


# --- lmarena-ai/arena-human-preference-140k (and arena-expert-5k) ----------------------------

# RIPD groups Arena battles by the dataset's category labels; name -> "group.flag" in category_tag.
ARENA_CATEGORY_FLAGS = {
    "real_world": "criteria_v0.1.real_world",
    "creative_writing": "creative_writing_v0.1.creative_writing",
    "problem_solving": "criteria_v0.1.problem_solving",
    "math": "math_v0.1.math",
    "instruction_following": "if_v0.1.if",
    "complexity": "criteria_v0.1.complexity",
    "creativity": "criteria_v0.1.creativity",
    "domain_knowledge": "criteria_v0.1.domain_knowledge",
    "specificity": "criteria_v0.1.specificity",
    "technical_accuracy": "criteria_v0.1.technical_accuracy",
}
_ARENA_TIES = {"tie": "tie", "both_bad": "both_bad", "tie (bothbad)": "both_bad"}


def _flag(tags: Any, path: str) -> bool:
    if isinstance(tags, str):
        try:
            tags = json.loads(tags)
        except ValueError:
            return False
    group, _, name = path.rpartition(".")
    node = tags.get(group) if isinstance(tags, dict) else None
    return bool(node.get(name)) if isinstance(node, dict) else False


def _arena_row(line: int, row: dict, opts: dict) -> dict:
    winner = _get(row, "winner")
    if winner in _ARENA_TIES:
        raise Drop(_ARENA_TIES[winner])
    if winner not in ("model_a", "model_b"):
        raise Drop("bad_label")
    if opts["language"] and row.get("language") not in _as_list(opts["language"]):
        raise Drop("other_language")
    flags = {**ARENA_CATEGORY_FLAGS, **(opts["category_flags"] or {})}
    tags = row.get("category_tag")
    categories = [name for name, path in flags.items() if tags is not None and _flag(tags, path)]
    if opts["category"] and opts["category"] not in categories:
        raise Drop("other_category")
    conv_a, conv_b = _messages(_get(row, "conversation_a")), _messages(_get(row, "conversation_b"))
    if conv_a[-1][0] != "assistant" or conv_b[-1][0] != "assistant":
        raise Drop("unparseable_messages")
    ctx_a, ctx_b = conv_a[:-1], conv_b[:-1]
    if sum(r == "user" for r, _ in ctx_a) > 1 and not opts["multi_turn"]:
        raise Drop("multi_turn")
    if render_messages(ctx_a) != render_messages(ctx_b):
        raise Drop("context_mismatch")  # each side saw its own earlier answers: not one prompt
    a, b = conv_a[-1][1], conv_b[-1][1]
    chosen, rejected = (a, b) if winner == "model_a" else (b, a)
    win_model, lose_model = (
        (row.get("model_a"), row.get("model_b")) if winner == "model_a" else (row.get("model_b"), row.get("model_a"))
    )
    return {
        "id": f"{opts['id_prefix']}{row['id']}" if row.get("id") else stable_id(a, b, prefix=opts["id_prefix"]),
        "domain": opts["domain"] or opts["category"] or "arena",
        "prompt": render_messages(ctx_a),
        "chosen": chosen,
        "rejected": rejected,
        "meta": {
            "winner": winner,
            "chosen_model": win_model,
            "rejected_model": lose_model,
            "language": row.get("language"),
            "categories": categories,
        },
    }


# --- PKU-Alignment/PKU-SafeRLHF ---------------------------------------------------------------


def _pku_row(line: int, row: dict, opts: dict) -> dict:
    key = f"{opts['preference']}_response_id"
    winner = _get(row, key)
    if winner not in (0, 1) or isinstance(winner, bool):
        raise Drop("bad_label")
    prompt, r0, r1 = _get(row, "prompt"), _get(row, "response_0"), _get(row, "response_1")
    chosen, rejected = (r0, r1) if winner == 0 else (r1, r0)
    return {
        "id": stable_id(prompt, r0, r1, prefix=opts["id_prefix"]),
        "domain": opts["domain"],
        "prompt": prompt,
        "chosen": chosen,
        "rejected": rejected,
        "meta": {
            "preference": opts["preference"],
            "better_response_id": row.get("better_response_id"),
            "safer_response_id": row.get("safer_response_id"),
            "is_response_0_safe": row.get("is_response_0_safe"),
            "is_response_1_safe": row.get("is_response_1_safe"),
        },
    }


# --- RMB (Zhou-Zoey/RMB-Reward-Model-Benchmark, Pairwise_set/*.json) ---------------------------


def _rmb_row(line: int, row: dict, opts: dict) -> dict:
    chosen, reject = _get(row, "chosen"), _get(row, "reject")
    if not isinstance(chosen, dict) or not isinstance(reject, dict):
        raise Drop("missing_field")
    path = str(row.get("category_path") or "")
    goal = "harmless" if "Harmlessness" in path else "helpful" if "Helpfulness" in path else None
    uid = row.get("pair_uid")
    prompt = render_messages(_messages(_get(row, "conversation_input")))
    return {
        "id": f"{opts['id_prefix']}{uid}" if uid is not None else stable_id(prompt, prefix=opts["id_prefix"]),
        "domain": opts["domain"] or goal or "rmb",
        "prompt": prompt,
        "chosen": _get(chosen, "answer"),
        "rejected": _get(reject, "answer"),
        "meta": {
            "category_path": path,
            "chosen_model": chosen.get("llm_name"),
            "rejected_model": reject.get("llm_name"),
            "chosen_score": chosen.get("score"),
            "rejected_score": reject.get("score"),
        },
    }


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


@dataclass(frozen=True)
class SourceFormat:
    """How one public dataset looks on the hub and how its rows become pairs."""

    name: str
    hub_path: str | None
    hub_name: str | None
    default_split: str | None
    required: tuple[str, ...]
    optional: tuple[str, ...]
    row_fn: Callable[[int, dict, dict], dict]
    default_domain: str | None
    id_prefix: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.required + self.optional


FORMATS: dict[str, SourceFormat] = {
    f.name: f
    for f in (
        SourceFormat(
            "hh_rlhf", "Anthropic/hh-rlhf", None, "train", ("chosen", "rejected"), (), _hh_row, "harmless", "hh-"
        ),
        SourceFormat(
            "ultrafeedback",
            "HuggingFaceH4/ultrafeedback_binarized",
            None,
            "train_prefs",
            ("prompt", "chosen", "rejected"),
            ("prompt_id", "score_chosen", "score_rejected"),
            _uf_row,
            "helpful",
            "uf-",
            {"drop_ties": True},
        ),
        SourceFormat(
            "helpsteer3",
            "nvidia/HelpSteer3",
            "preference",
            "train",
            ("context", "response1", "response2", "overall_preference"),
            ("domain", "language", "individual_preference"),
            _hs3_row,
            None,
            "hs3-",
            {"language": None},
        ),
        SourceFormat(
            "arena",
            "lmarena-ai/arena-human-preference-140k",
            None,
            "train",
            ("winner", "conversation_a", "conversation_b"),
            ("id", "model_a", "model_b", "language", "category_tag"),
            _arena_row,
            None,
            "arena-",
            {"category": None, "category_flags": None, "language": None, "multi_turn": False},
        ),
        SourceFormat(
            "arena_expert",
            "lmarena-ai/arena-expert-5k",
            None,
            "train",
            ("winner", "conversation_a", "conversation_b"),
            ("id", "model_a", "model_b", "language", "category_tag"),
            _arena_row,
            "expert",
            "arena-expert-",
            {"category": None, "category_flags": None, "language": None, "multi_turn": False},
        ),
        SourceFormat(
            "pku_saferlhf",
            "PKU-Alignment/PKU-SafeRLHF",
            None,
            "train",
            ("prompt", "response_0", "response_1"),
            ("better_response_id", "safer_response_id", "is_response_0_safe", "is_response_1_safe"),
            _pku_row,
            "harmless",
            "pku-",
            {"preference": "safer"},
        ),
        SourceFormat(
            "rmb",
            None,
            None,
            None,
            ("conversation_input", "chosen", "reject"),
            ("pair_uid", "category_path"),
            _rmb_row,
            None,
            "rmb-",
        ),
    )
}


def format_options(fmt: str) -> dict[str, Any]:
    """Options a parser accepts, with their defaults (``domain`` and ``id_prefix`` always)."""
    f = get_format(fmt)
    return {"domain": f.default_domain, "id_prefix": f.id_prefix, **f.options}


def get_format(fmt: str) -> SourceFormat:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown dataset '{fmt}'; expected one of: {', '.join(sorted(FORMATS))}")
    return FORMATS[fmt]


def parse_rows(
    fmt: str, rows: Iterable[tuple[int, dict]], *, columns: Iterable[str], source: str, **options: Any
) -> tuple[list[tuple[int, dict]], Counter]:
    """Map raw ``(line_no, row)`` items of dataset ``fmt`` to canonical dicts, counting drops.

    ``columns`` are the source's column names: a required one missing is an InputError naming it.
    """
    f = get_format(fmt)
    columns = list(columns)
    require_columns(columns, f.required, file=source)
    defaults = format_options(fmt)
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ConfigError(
            f"dataset '{fmt}' got unknown option(s) {', '.join(unknown)}; expected some of: {', '.join(defaults)}"
        )
    opts = {**defaults, **{k: v for k, v in options.items() if v is not None}}
    if opts.get("category") and "category_tag" not in columns:
        # filtering on a column that is absent would silently drop every row
        require_columns(columns, ["category_tag"], file=source)
    if fmt == "pku_saferlhf" and opts["preference"] not in ("safer", "better"):
        raise ConfigError(f"pku_saferlhf preference '{opts['preference']}'; expected one of: safer, better")
    out: list[tuple[int, dict]] = []
    drops: Counter = Counter()
    for line_no, row in rows:
        try:
            out.append((line_no, f.row_fn(line_no, row, opts)))
        except Drop as d:
            drops[d.reason] += 1
    return out, drops
