"""AlpacaEval's annotations (Li, Dubois et al.; github.com/tatsu-lab/alpaca_eval, Apache-2.0), read as downloaded::

    results/<model>/<annotator>/annotations.json    the publishers' results tree
    <annotator>/<model>.json                        a folder of such folders, a folder of <model>.json, one file
    [{instruction, output_1, generator_1, dataset, output_2, generator_2, annotator, preference,
      price_per_example, time_per_example, raw_completion}, ...]

A row is one instruction judged between the baseline (``output_1`` by ``generator_1``) and a model (``output_2`` by
``generator_2``) by an annotator (the judge). ``preference``: 1 = the baseline, 2 = the model, 1.5 or 0 = a draw,
null = no verdict (counted, never guessed). A fractional preference (the weighted annotators, from the judge's
logprobs) is kept as the judgment's score; its choice is the side it leans to, as AlpacaEval's own analysis reads
it (below 1.5 the baseline, above it the model, 1.5 a draw). Price and time per example are kept per judgment.

The pair is (baseline output, model output) on one instruction: judge = annotator, condition = the model judged.
There are no human labels, so the card's accuracy columns are empty; the leaderboard (``recorded._leaderboard``)
is what the publishers computed from these files.

Presentation order: AlpacaEval shows the two outputs switched or not per instruction by a seeded coin
(``alpaca_eval.processors.RandomSwitchTwoColumnsProcessor``: ``random.Random("is_switched_outputs" + instruction +
"0").choices([False, True])``). Where the rows carry the judge's raw first token (the weighted annotators answer
``m`` for the first listed output, ``M`` for the second), the reconstruction is checked against it; it holds for
an annotator only when the check is far beyond chance (its agreement is reported), and the order is then known.
Elsewhere it is recorded as unknown and the card's position metrics say so.

Beside the annotations a folder may hold the publishers' leaderboard (``<annotator>_leaderboard.csv`` or
``<annotator>_leaderboard_rows.csv``), their length-controlled weights (``weights/<annotator>/length_controlled_v1/
baseline_<baseline>.csv`` or ``baseline_<baseline>*weights*.csv``) and the per-instruction difficulty their
length-controlled win rate needs (``instruction_difficulty.csv``, or the source key ``instruction_difficulty``).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats

from rubriclab.errors import InputError
from rubriclab.recorded._jsonfile import json_array, require
from rubriclab.recorded._records import Judgment, RecordedPair, RecordedSet, license_name, meta_tuple, to_verdict
from rubriclab.recorded._registry import SourceContext, register_check, register_format
from rubriclab.recorded._shipped import resolve_path

KEYS = ("instruction", "output_1", "generator_1", "output_2", "generator_2", "annotator", "preference")
SWITCH_SEED = "0"  # the annotators' processor seed in the released annotations (checked on the raw tokens)
FIRST_TOKENS = {"m": "first", "M": "second"}  # the weighted annotators' identifiers, in the order listed
ORDER_CHECK_P = 1e-6  # a reconstruction is kept only where chance agreement this high is this unlikely
_LEADERBOARD = re.compile(r"^(?P<annotator>.+?)_leaderboard(?:_rows)?\.csv$")
_WEIGHTS = re.compile(r"^baseline_(?P<baseline>.+?)(?:_lc_weights)?\.csv$")


def instruction_key(instruction: str) -> str:
    """A short stable key of an instruction (the join key across models and annotators)."""
    return hashlib.sha1(instruction.encode("utf-8")).hexdigest()[:10]


def switched(instruction: str, seed: str = SWITCH_SEED) -> bool:
    """Whether AlpacaEval showed the model's output first for this instruction (its seeded coin)."""
    return random.Random("is_switched_outputs" + instruction + seed).choices([False, True], k=1)[0]


def choice_of(preference: Any) -> str:
    """The side a preference chose: ``1`` baseline, ``2`` model, ``tie`` a draw (1.5 or 0), ``none`` no verdict."""
    if preference is None or isinstance(preference, bool):
        return "none"
    try:
        p = float(preference)
    except (TypeError, ValueError):
        return "none"
    if math.isnan(p):
        return "none"
    if p == 0 or p == 1.5:
        return "tie"
    if not 1 <= p <= 2:
        return "none"
    return "1" if p < 1.5 else "2"


def _preference(value: Any, path: Path, line: int) -> float:
    """A preference as a float (NaN for null); anything else is an error naming the file and line."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"preference {value!r}", file=str(path), line=line, field="preference",
                         expected="a number in [1, 2] (1 = output_1, 2 = output_2, 1.5 or 0 = draw) or null")
    p = float(value)
    if not (p == 0 or 1 <= p <= 2 or math.isnan(p)):
        raise InputError(f"preference {value!r}", file=str(path), line=line, field="preference",
                         expected="a number in [1, 2] (1 = output_1, 2 = output_2, 1.5 or 0 = draw) or null")
    return p


def annotation_files(path: Path) -> list[Path]:
    """The annotation files under ``path``: the file itself, or every ``*.json`` below a folder."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError("not found", file=str(path), expected="an AlpacaEval annotations file or folder")
    files = sorted(p for p in path.rglob("*.json") if p.is_file())
    if not files:
        raise InputError("holds no .json file", file=str(path),
                         expected="results/<model>/<annotator>/annotations.json, <annotator>/<model>.json or a "
                                  "folder of <model>.json")
    return files


def _raw_token(raw: Any) -> str | None:
    if isinstance(raw, dict):
        text = raw.get("text")
        if text is None and isinstance(raw.get("message"), dict):
            text = raw["message"].get("content")
        return text.strip() if isinstance(text, str) else None
    return raw.strip() if isinstance(raw, str) else None


def read_rows(path: Path) -> pd.DataFrame:
    """Every annotation row under ``path`` with its file and line (the frame the leaderboard is computed from)."""
    rows = []
    for file in annotation_files(path):
        listed = listed_as(file, path)
        for line, item in json_array(file):
            r = require(item, KEYS, file=file, line=line, what="annotation")
            for key in ("instruction", "output_1", "output_2", "generator_1", "generator_2", "annotator"):
                if not isinstance(r[key], str) or (key != "output_2" and key != "output_1" and not r[key].strip()):
                    raise InputError(f"{key} is {type(r[key]).__name__} {str(r[key])[:40]!r}", file=str(file),
                                     line=line, field=key, expected="a string")
            rows.append({"file": str(file), "line": line, "instruction": r["instruction"],
                         "key": instruction_key(r["instruction"]), "output_1": r["output_1"],
                         "output_2": r["output_2"], "baseline": r["generator_1"], "model": r["generator_2"],
                         "annotator": r["annotator"], "listed_as": listed or r["generator_2"],
                         "dataset": str(r.get("dataset") or ""),
                         "preference": _preference(r["preference"], file, line),
                         "price_per_example": _number(r.get("price_per_example")),
                         "time_per_example": _number(r.get("time_per_example")),
                         "token": _raw_token(r.get("raw_completion"))})
    df = pd.DataFrame(rows)
    dup = df.duplicated(["annotator", "model", "baseline", "key"], keep="first")
    if dup.any():
        r = df[dup].iloc[0]
        raise InputError(f"instruction annotated twice by {r['annotator']!r} for {r['model']!r}", file=r["file"],
                         line=int(r["line"]), field="instruction",
                         expected="one annotation per instruction, model and annotator")
    return df


def listed_as(file: Path, root: Path) -> str | None:
    """The model a file is filed under in the publishers' layout: ``results/<model>/<annotator>/annotations.json``
    or ``<model>.json`` (the publishers key their leaderboard by it, whatever the rows' ``generator_2`` says)."""
    if file.name == "annotations.json":
        parts = file.relative_to(root).parts if root.is_dir() else ()
        return parts[-3] if len(parts) >= 3 else None
    return file.stem


def mislabelled(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Files whose rows are of another model than the one the layout files them under."""
    out = []
    for (annotator, listed, model), g in df.groupby(["annotator", "listed_as", "model"], sort=True):
        if listed != model:
            out.append({"annotator": annotator, "listed_as": listed, "model": model, "rows": len(g),
                        "file": g["file"].iloc[0]})
    return out


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def order_check(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per annotator: does the seeded switch explain its raw first tokens? ``{checked, agree, p_value, known}``
    (``known`` when the agreement is beyond chance at ``ORDER_CHECK_P``; no raw token: not checked, unknown)."""
    out = {}
    for annotator, g in df.groupby("annotator", sort=True):
        use = g[g["token"].isin(list(FIRST_TOKENS)) & g["preference"].notna()]
        agree = 0
        for r in use.itertuples():
            shown = 3 - r.preference if switched(r.instruction) else r.preference  # as the judge saw it
            agree += (FIRST_TOKENS[r.token] == "first") == (shown < 1.5)
        n = len(use)
        p = float(stats.binomtest(agree, n, 0.5, alternative="greater").pvalue) if n else 1.0
        out[annotator] = {"checked": n, "agree": int(agree), "p_value": p, "known": bool(n and p < ORDER_CHECK_P)}
    return out


def side_files(folder: Path) -> dict[str, Any]:
    """The publishers' leaderboard rows (per annotator), length-controlled weights (per (annotator or None,
    baseline)) and instruction difficulty found beside the annotations."""
    out: dict[str, Any] = {"leaderboard": {}, "weights": {}, "difficulty": None}
    if not folder.is_dir():
        return out
    for p in sorted(folder.rglob("*.csv")):
        m = _LEADERBOARD.match(p.name)
        if m:
            out["leaderboard"][m["annotator"]] = pd.read_csv(p, index_col=0)
            continue
        m = _WEIGHTS.match(p.name)
        if m:
            # the publishers keep them under weights/<annotator>/length_controlled_v1/
            parts = p.relative_to(folder).parts
            annotator = parts[-3] if len(parts) >= 3 and parts[-2] == "length_controlled_v1" else None
            out["weights"][(annotator, m["baseline"])] = pd.read_csv(p, index_col=0)
        elif p.name == "instruction_difficulty.csv":
            out["difficulty"] = p
    return out


def read_alpaca_eval(path: str | Path, *, name: str | None = None, difficulty: str | Path | None = None
                     ) -> RecordedSet:
    """AlpacaEval annotations under ``path`` as a RecordedSet (see the module docstring)."""
    path = Path(path)
    df = read_rows(path)
    checks = order_check(df)
    pairs: dict[str, RecordedPair] = {}
    judgments = []
    for r in df.itertuples():
        pid = f"{r.baseline} vs {r.model}/{r.key}"
        pair = pairs.get(pid)
        if pair is None:
            pairs[pid] = RecordedPair(id=pid, prompt=r.instruction, output_1=r.output_1, output_2=r.output_2,
                                      domain=r.dataset)
        known = checks[r.annotator]["known"]
        order = ("swapped" if switched(r.instruction) else "original") if known else "original"
        choice = choice_of(r.preference)
        judgments.append(Judgment(
            pair_id=pid, judge=r.annotator, condition=r.model, order=order, verdict=to_verdict(order, choice),
            raw="" if r.token is None else r.token, score=None if math.isnan(r.preference) else float(r.preference),
            meta=meta_tuple({"baseline": r.baseline, "model": r.model, "instruction_key": r.key,
                             "order_known": int(known), "price_usd": r.price_per_example,
                             "seconds": r.time_per_example, "dataset": r.dataset})))
    folder = path if path.is_dir() else path.parent
    wrong = mislabelled(df)
    sides = side_files(folder)
    if difficulty is not None:
        sides["difficulty"] = Path(difficulty)
    notes = [
        "AlpacaEval has no human labels: each row is one instruction judged between the baseline (output 1) and a "
        "model (output 2); the condition is the model judged. The accuracy columns are empty; the leaderboard "
        "section is what the publishers computed from these files.",
        "A fractional preference (the weighted annotators) is kept as the judgment's score; its choice is the side "
        "it leans to (< 1.5 the baseline, > 1.5 the model); 1.5 or 0 is a draw; null is no verdict (`none`).",
    ]
    for w in wrong:
        notes.append(f"{Path(w['file']).name} ({w['annotator']}) is filed under {w['listed_as']} but its {w['rows']} "
                     f"rows are of {w['model']} (generator_2): the card analyses them as {w['model']}; the publisher "
                     f"check keys them as the publishers' leaderboard does, by {w['listed_as']}")
    for annotator, c in checks.items():
        if c["known"]:
            notes.append(f"{annotator}: presentation order reconstructed from AlpacaEval's seeded switch; it explains "
                         f"{c['agree']} of {c['checked']} raw first tokens (chance: half; the rest are sampled "
                         "tokens against the logprob-weighted preference)")
        else:
            notes.append(f"{annotator}: presentation order unknown (" + (
                f"the seeded switch explains only {c['agree']} of {c['checked']} raw first tokens"
                if c["checked"] else "the rows carry no raw first token to check AlpacaEval's seeded switch on")
                + "): no first-position rate")
    return RecordedSet(
        name=name or folder.name, format="alpaca_eval", path=str(path), pairs=pairs, judgments=judgments,
        provenance="AlpacaEval (Li, Dubois et al. 2023; github.com/tatsu-lab/alpaca_eval): the annotators' "
                   "published annotations, read from the publisher's files",
        license=license_name(folder), label_rule="none: AlpacaEval's annotations carry no human label",
        notes=notes, extras={"alpaca_eval": df.drop(columns=["output_1"]), "order_check": checks,
                             "mislabelled": wrong, **sides})


@register_format("alpaca_eval", what="AlpacaEval annotations: results/<model>/<annotator>/annotations.json, "
                                     "<annotator>/<model>.json, a folder of <model>.json or one file",
                 keys=("instruction_difficulty",))
def _alpaca_eval_source(s: Any, ctx: SourceContext) -> RecordedSet:
    difficulty = resolve_path(s.instruction_difficulty, ctx.project) if s.instruction_difficulty else None
    return read_alpaca_eval(ctx.path, name=ctx.name, difficulty=difficulty)


@register_check("alpaca_eval")
def alpaca_eval_check(rs: RecordedSet, analysis: Any) -> dict[str, Any] | None:
    """The publishers' leaderboard rows found beside the annotations, every figure reproduced by their own
    definitions (``rubriclab.recorded._leaderboard``): to 1e-9, the LC rate to 1e-3 where it is computable."""
    from rubriclab.recorded._leaderboard import publisher_rows

    if not rs.extras.get("leaderboard"):
        return None
    rows = publisher_rows(rs, analysis.settings)
    exact = [r for r in rows if not r["figure"].startswith("length")]
    lc = [r for r in rows if r["figure"].startswith("length")]
    bad = [r for r in exact if not r["match"]]
    summary = (f"{sum(r['match'] for r in exact)} of {len(exact)} leaderboard figures (win_rate, standard_error, "
               f"n_wins, n_wins_base, n_draws, n_total, discrete_win_rate, avg_length) of "
               f"{len({(r['annotator'], r['model']) for r in exact})} published rows reproduced to 1e-9 from the "
               "annotations by the publishers' definitions (alpaca_eval.metrics.get_winrate).")
    if lc:
        done = [r for r in lc if r["reproduced"] is not None]
        summary += (f" Length-controlled win rate: {sum(r['match'] for r in done)} of {len(lc)} reproduced to 1e-3"
                    + (f"; {len(lc) - len(done)} not computable: "
                       + "; ".join(sorted({r['note'] for r in lc if r['reproduced'] is None})) if len(done) < len(lc)
                       else "") + ".")
    if bad:
        summary += " Not reproduced: " + "; ".join(f"{r['annotator']}/{r['model']} {r['figure']}: published "
                                                  f"{r['published']:g}, here {r['reproduced']} ({r['note']})"
                                                  for r in bad[:8])
    for w in rs.extras.get("mislabelled") or []:
        summary += (f" The publishers' row for {w['listed_as']} under {w['annotator']} is computed from annotations "
                    f"of {w['model']} (the file they file under {w['listed_as']} holds {w['model']}'s rows), so it "
                    f"is {w['model']}'s win rate with {w['listed_as']}'s avg_length.")
    return {"kind": "alpaca_eval leaderboard", "rows": rows, "summary": summary}
