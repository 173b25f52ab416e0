"""A scripted world for the repair stage, shared by tests and benchmarks: models whose behaviour under
each repair operator is known, so the acceptance rule's right answer is known.

- The judge panel agrees (α = 1) and prefers the response holding "good"; the attacker's responses
  ("ATTACK … variant-i") score 9 and the verifier calls them EXPLOITING: the original criterion has VFR 1.
- ``do_not_reward`` (the refiner adds "Do not reward padding."): attacks with an even strategy index
  score 3, odd ones still 9 → VFR 0.5, α unchanged.
- ``abstract_to_observable`` (adds "Observable: …"): every attack scores 3 → VFR 0, but the odd panel
  seats read the criterion the other way round → α falls below 0.
- ``max_score_cap``: the refiner names an operator outside the library ("magic_fix").
- ``decomposition``: the refiner returns 170 words (over the structural budget).
- ``false_positive_anchors``: the refiner returns no JSON.
So at δ = 0 the ``do_not_reward`` candidate is chosen, at δ = ∞ the ``abstract_to_observable`` one.

Options of ``repair_world`` (off by default, so the above holds):
- ``dev_only=<operator>``: that operator's sentence makes every attack score 3 on the prompts of dev pairs
  (``world_pairs(n, "dev")``) and changes nothing elsewhere: VFR_dev 0, held-out VFR stays 1, α unchanged.
  A search that accepts on dev keeps it; one that accepts on held-out does not.
- ``log=[]``: every call of every role is appended as ``(role name, user text)``, in call order.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rubriclab.data import Pair
from rubriclab.errors import ArgumentError
from rubriclab.llm import RoleSpec
from rubriclab.testing._scripted import scripted_model

MARK = {"do_not_reward": "Do not reward padding.", "abstract_to_observable": "Observable: names one concrete step.",
        "applicability_gate": "Applies only when the user asks a question.",
        "non_compensation": "Style does not compensate for a wrong answer."}


def _user(messages: list[dict[str, Any]]) -> str:
    return next(str(m["content"]) for m in messages if m["role"] == "user")


def _definition(text: str) -> str:
    m = re.search(r"\*\*Definition:\*\* (.*?)\n\n## ", text, re.S)
    return m.group(1) if m else ""


def _section(text: str, head: str) -> str:
    m = re.search(rf"## {head}:?\n(.*?)(?:\n\n## |\Z)", text, re.S)
    return m.group(1) if m else ""


def _on_dev(text: str) -> bool:
    return re.search(r"Question dev\d+:", _section(text, "User Prompt")) is not None


def panel_judge(seat: int, dev_only: str | None = None):
    def judge(messages, params):
        text = _user(messages)
        crit = _definition(text)
        if "## Response A" in text:  # pairwise 0-10 (α, flip)
            good_a = "good" in _section(text, r"Response A \(Candidate\)")
            score = 8 if good_a else 2
            if MARK["abstract_to_observable"] in crit and seat % 2 == 1:
                score = 10 - score
            return f"REASONING: compared.\nSCORE: {score}"
        resp = _section(text, "Response")  # pointwise 1-10 (adversarial)
        if "ATTACK" not in resp:
            return "REASONING: genuine.\nSCORE: 8"
        variant = int(re.search(r"variant-(\d+)", resp).group(1))
        overfit = dev_only is not None and MARK[dev_only] in crit and _on_dev(text)
        if overfit or MARK["abstract_to_observable"] in crit or (MARK["do_not_reward"] in crit and variant % 2 == 0):
            return "REASONING: padding.\nSCORE: 3"
        return "REASONING: impressive.\nSCORE: 9"
    return judge


def attacker(messages, params):
    from rubriclab.audit import STRATEGIES

    text = _user(messages)
    strategy = re.search(r"## Exploit strategy: (.*)", text).group(1).strip()
    i = [s for s, _ in STRATEGIES].index(strategy)
    return f"ATTACK: a long padded confident answer with many words (variant-{i})."


def verifier(messages, params):
    resp = re.search(r"## Response being evaluated:\n<response>\n(.*?)\n</response>", _user(messages), re.S).group(1)
    verdict = "EXPLOITING" if "ATTACK" in resp else "GENUINE"
    return f"<analysis>checked</analysis>\n<result>\n<verdict>{verdict}</verdict>\n</result>"


def refiner(messages, params):
    text = _user(messages)
    ops = re.findall(r"^- ([a-z_]+): ", _section(text, r"Operators you must apply \(and no others\)"), re.M)
    original = re.search(r"## Criterion: \S+\n<criterion>\n(.*?)\n</criterion>", text, re.S).group(1)
    if "false_positive_anchors" in ops:
        return "I would add some anchors."
    if "max_score_cap" in ops:
        return json.dumps({"operators": ["magic_fix"], "description": original + " Magic.", "rationale": "x"})
    if "decomposition" in ops:
        return json.dumps({"operators": ops, "description": " ".join(["word"] * 170), "rationale": "long"})
    extra = " ".join(MARK.get(o, f"({o})") for o in ops)
    return json.dumps({"operators": ops, "description": f"{original} {extra}", "rationale": "closes padding"})


def repair_world(tag: str = "", seats: int = 2, *, dev_only: str | None = None,
                 log: list[tuple[str, str]] | None = None) -> dict[str, RoleSpec | list[RoleSpec]]:
    """Roles of the scripted world: ``judges`` (a panel of ``seats``), ``attacker``, ``verifier``, ``refiner``;
    ``dev_only`` and ``log``: see the module doc."""
    if dev_only is not None and dev_only not in MARK:
        raise ArgumentError(f"repair_world: dev_only={dev_only!r}; expected one of {sorted(MARK)}")

    def role(name: str, script) -> RoleSpec:
        if log is not None:
            script = _logged(name, script, log)
        return RoleSpec(name=name, model=scripted_model(f"{name}{tag}", script), parse_retries=0)

    return {"judges": [role(f"judge{j}", panel_judge(j, dev_only)) for j in range(seats)],
            "attacker": role("attacker", attacker), "verifier": role("verifier", verifier),
            "refiner": role("refiner", refiner)}


def _logged(name: str, script, log: list[tuple[str, str]]):
    def run(messages, params):
        log.append((name, _user(messages)))  # list.append is atomic: the gateway may call from threads
        return script(messages, params)
    return run


def world_pairs(n: int, prefix: str = "p") -> list[Pair]:
    """``n`` pairs whose chosen response holds "good" (what the scripted panel prefers)."""
    return [Pair(id=f"{prefix}{i}", domain="t", prompt=f"Question {prefix}{i}: how do I do task {i}?",
                 chosen=f"A good answer {i}: do step one, then step two.", rejected=f"A bad answer {i}.")
            for i in range(n)]
