"""A preference world with planted criteria for discovery tests: pairs whose chosen response is better on four
attributes and differs on a neutral fifth, and scripted extractor, embedder, consolidator and judge models that
behave as a model that sees those attributes would (tests/discover/, and the stage and audit tests that reuse it)."""

from __future__ import annotations

import hashlib
import json
import random
import re

import numpy as np

from rubriclab.data import Pair
from rubriclab.testing._scripted import last_user_text

DISCOVER_PREFERRED = ["accuracy", "directness", "safety", "examples"]  # chosen is better on these
DISCOVER_NEUTRAL = "length"  # differs between responses, but not in the preferred direction
DISCOVER_ATTRS = DISCOVER_PREFERRED + [DISCOVER_NEUTRAL]
_VARIANTS = {
    "accuracy": ["Factual accuracy", "Correct facts", "Accurate information"],
    "directness": ["Directness", "Answers directly", "Direct answer"],
    "safety": ["Safety", "Avoids harm", "Safe guidance"],
    "examples": ["Concrete examples", "Uses examples", "Illustrative examples"],
    "length": ["Length", "Response length", "Verbosity level"],
}


def planted_hash(*parts) -> int:
    return int(hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest(), 16)


def planted_pairs(n: int, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        attrs = rng.sample(DISCOVER_ATTRS, 3)
        chosen, rejected = [], []
        for a in attrs:
            if a == DISCOVER_NEUTRAL:
                long_chosen = rng.random() < 0.5
                chosen.append("LONG_length" if long_chosen else "SHORT_length")
                rejected.append("SHORT_length" if long_chosen else "LONG_length")
            else:
                chosen.append(f"GOOD_{a}")
                rejected.append(f"BAD_{a}")
        pairs.append(Pair(id=f"p{i:03d}", domain="planted", prompt=f"Question {i}?",
                          chosen="Answer " + " ".join(chosen), rejected="Answer " + " ".join(rejected),
                          meta={"planted": attrs}))
    return pairs


def _attr_of(text: str) -> str | None:
    for a in DISCOVER_ATTRS:
        if a in text.lower():
            return a
    return None


def discover_extractor_script(messages, params):
    text = last_user_text(messages)
    a = re.search(r"RESPONSE A:\n(.*?)\n\nRESPONSE B:", text, re.S).group(1)
    b = re.search(r"RESPONSE B:\n(.*?)\n\nWINNER", text, re.S).group(1)
    crits = []
    for attr in DISCOVER_ATTRS:
        ma, mb = re.search(rf"(\w+)_{attr}", a), re.search(rf"(\w+)_{attr}", b)
        if not ma or not mb or ma.group(1) == mb.group(1):
            continue
        score = {"GOOD": 8, "BAD": 3, "LONG": 7, "SHORT": 4}
        name = _VARIANTS[attr][planted_hash(text, attr) % 3]
        crits.append({"name": name, "description": f"Judges the {attr} of the response.",
                      "model_a_score": score[ma.group(1)], "model_b_score": score[mb.group(1)]})
    return json.dumps({"criteria": crits})


def discover_embed_script(messages, params):
    text = last_user_text(messages)
    vec = np.zeros(len(DISCOVER_ATTRS) + 2)
    attr = _attr_of(text)
    if attr:
        vec[DISCOVER_ATTRS.index(attr)] = 1.0
    vec[-1] = (planted_hash(text) % 100) / 1000.0  # tiny noise: variants are near-duplicates, not identical
    return vec.tolist()


def discover_consolidator_script(bad_reply_every: int = 0):
    calls = {"n": 0}

    def script(messages, params):
        text = last_user_text(messages)
        lines = re.findall(r"^- (\S+): (.*)$", text, re.M)
        if "Identify groups of rubrics" in text:
            calls["n"] += 1
            if bad_reply_every and calls["n"] % bad_reply_every == 0:
                ids = [lid for lid, _ in lines]
                bad = [
                    "not json at all",
                    json.dumps({"subgroups": [ids[:2] + ["r999"]], "unmerged": ids[2:]}),  # unknown id
                    json.dumps({"subgroups": [ids[:2], ids[1:3]], "unmerged": ids[3:]}),  # duplicate
                    json.dumps({"subgroups": [ids[:2]], "unmerged": []}),  # missing ids
                ]
                return bad[calls["n"] // bad_reply_every % len(bad)]
            groups: dict[str, list[str]] = {}
            unmerged = []
            for lid, body in lines:
                attr = _attr_of(body)
                (groups.setdefault(attr, []) if attr else unmerged).append(lid)
            subgroups = [g for g in groups.values() if len(g) >= 2]
            unmerged += [g[0] for g in groups.values() if len(g) == 1]
            return json.dumps({"subgroups": subgroups, "unmerged": unmerged})
        attr = _attr_of(text) or "misc"
        return json.dumps({"rubric_id": attr, "rubric_description": (
            f"Rewards responses whose {attr} serves the user: the response is judged on its {attr} as observed in "
            "the text, independent of the specific prompt, with clear high and low ends of the scale.")})

    return script


def discover_judge_script(messages, params):
    text = last_user_text(messages)
    crit = re.search(r"## Rubric: (\S+)", text).group(1)
    response = re.search(r"## Response:\n(.*?)\n\n## Task", text, re.S).group(1)
    attr = _attr_of(crit)
    m = re.search(rf"(\w+)_{attr}", response) if attr else None
    score = {"GOOD": 8, "BAD": 3, "LONG": 7, "SHORT": 4}[m.group(1)] if m else 5
    return f"REASONING: looked for {attr}.\nSCORE: {score}"


DISCOVER_CFG = {"min_criteria": 1, "max_criteria": 15, "k": 5, "target_size": 5, "cluster_size": 6, "max_levels": 6,
       "n_min": 3, "min_pairs": 2, "mmr_lambda": 0.7, "pref_rank": {"pool": 5, "max_pairs": 30, "mode": "score"}}
