"""What every audit axis shares: the gateway, the judge panel and other roles, the shape of a metric
entry in the audit card (estimate, interval with its method, level and unit, n), and the tally of
parse failures, transport failures and dropped items per source, axis and role."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rubriclab.errors import ConfigError
from rubriclab.llm import CallResult, Gateway, RoleSpec
from rubriclab.settings import ALPHA_ORIENTATIONS, Audit, Data, Llm, check_places

ORIENTATIONS = ALPHA_ORIENTATIONS
_A = Audit()  # audit.*'s defaults (rubriclab.settings.Audit, docs there)


@dataclass
class Tally:
    """Counts behind every number: per (source, axis, role) the judged items, parse failures (a reply
    that stated no usable answer after the re-asks) and transport failures (no reply after the
    retries); per (source, axis, reason) the items left out of a metric. Reconciles with the ledger."""

    calls: dict[tuple[str, str, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    dropped: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, source: str, axis: str, results: Iterable[CallResult]) -> None:
        for r in results:
            row = self.calls[(source, axis, r.request.role.name)]
            row["items"] += 1
            if not r.ok:
                row["parse_failures" if r.parse_error is not None else "transport_failures"] += 1

    def drop(self, source: str, axis: str, reason: str, n: int = 1) -> None:
        if n:
            self.dropped[(source, axis, reason)] += int(n)

    def totals(self, source: str) -> dict[str, int]:
        """parse_failures, transport_failures and dropped_items of one source, over every axis and role."""
        out = Counter()
        for (src, _, _), c in self.calls.items():
            if src == source:
                out["parse_failures"] += c["parse_failures"]
                out["transport_failures"] += c["transport_failures"]
        out["dropped_items"] = sum(n for (src, _, _), n in self.dropped.items() if src == source)
        return {k: int(out[k]) for k in ("parse_failures", "transport_failures", "dropped_items")}

    def rows(self) -> list[dict[str, Any]]:
        """One row per (source, axis, role) with its counts, and one per (source, axis, reason) dropped."""
        out = [{"source": s, "axis": a, "role": r, "items": c["items"], "parse_failures": c["parse_failures"],
                "transport_failures": c["transport_failures"]} for (s, a, r), c in sorted(self.calls.items())]
        out += [{"source": s, "axis": a, "dropped": reason, "items": n}
                for (s, a, reason), n in sorted(self.dropped.items())]
        return out

    def by_role(self) -> dict[str, dict[str, int]]:
        """parse/transport failures per role over every source and axis (what the ledger shows)."""
        out: dict[str, Counter] = defaultdict(Counter)
        for (_, _, role), c in self.calls.items():
            out[role]["items"] += c["items"]
            out[role]["parse_failures"] += c["parse_failures"]
            out[role]["transport_failures"] += c["transport_failures"]
        return {r: dict(c) for r, c in out.items()}


@dataclass
class AuditContext:
    """Models and settings for one audit. ``judges`` is the panel; ``judges[0]`` is "the judge" used
    where the protocol names a single judge (flip rate, paraphrases, accuracy, adversarial scoring).

    ``tie_credit``: credit of a tied verdict in accuracy (0.5 = half a win). ``alpha_orientation``:
    the scores α is computed on — ``as_presented`` (the 0–10 score of Response A as the judge saw it) or
    ``chosen_oriented`` (10 − s where the chosen response was shown as B). ``embedder``: checks that a
    paraphrase keeps its original's meaning (cosine similarity band); without one only the cheap text
    checks run."""

    gateway: Gateway
    judges: list[RoleSpec]
    paraphraser: RoleSpec | None = None
    attacker: RoleSpec | None = None
    verifier: RoleSpec | None = None
    embedder: RoleSpec | None = None
    templates_dir: str | None = None
    seed: int = Data().seed
    n_boot: int = _A.n_boot
    confidence: float = _A.confidence
    tie_credit: float = _A.tie_credit
    alpha_orientation: str = _A.alpha_orientation
    progress: bool = True
    tally: Tally = field(default_factory=Tally)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:  # the audit section's ranges and allowed values (rubriclab.settings)
        check_places(self, {k: k for k in ("n_boot", "confidence", "tie_credit", "alpha_orientation")}, "audit")

    @property
    def judge(self) -> RoleSpec:
        return self.judges[0]


def interval(method: str, level: float | None = None, unit: str | None = None,
             resamples: int | None = None) -> dict[str, Any]:
    """How an interval was made: ``method`` (e.g. "percentile bootstrap"), confidence ``level``, the
    resampled ``unit`` (pairs, prompts, criteria, …) and the number of ``resamples``."""
    return {"method": method, "level": level, "unit": unit, "resamples": resamples}


def interval_label(ci: dict[str, Any] | None) -> str:
    """One line saying what an interval is, e.g. "95% percentile bootstrap over pairs (B=1000)"."""
    if not ci:
        return "no interval"
    level = f"{100 * ci['level']:g}% " if ci.get("level") is not None else ""
    unit = f" over {ci['unit']}" if ci.get("unit") else ""
    boot = f" (B={ci['resamples']})" if ci.get("resamples") else ""
    return f"{level}{ci['method']}{unit}{boot}"


def metric(value: float | None, low: float | None = None, high: float | None = None, n: int | None = None,
           ci: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """One audit-card entry: the estimate, its interval ``[low, high]`` with ``ci`` saying what the interval
    is (see ``interval``), and the number of items behind it.

    NaN/None values stay (reported as missing, never dropped silently); ``extra`` carries context such as
    ``reason`` (why a value is missing), ``n_failed`` or the formula used."""
    def clean(x: float | None) -> float | None:
        if x is None:
            return None
        x = float(x)
        return None if math.isnan(x) else x

    low, high = clean(low), clean(high)
    return {"value": clean(value), "low": low, "high": high, "n": n,
            "ci": ci if (low is not None and high is not None) else None, **extra}


def from_bootstrap(boot: dict[str, Any], unit: str, **extra: Any) -> dict[str, Any]:
    """A metric entry from ``rubriclab.stats.item_bootstrap``'s result; ``unit`` names what was resampled."""
    ci = interval(f"{str(boot.get('method', 'percentile')).lower()} bootstrap", boot.get("confidence"), unit,
                  boot.get("n_resamples"))
    if boot.get("degenerate") and "degenerate" not in extra:
        extra["degenerate"] = boot["degenerate"]
    return metric(boot.get("estimate"), boot.get("low"), boot.get("high"), boot.get("n_items"), ci=ci, **extra)


def context_from_params(llm: Llm, a: Audit, seed: int, gateway: Gateway) -> tuple[AuditContext, list[str]]:
    """The audit's context from params.yaml's sections (``llm``, ``audit``, ``data.seed``) on ``gateway``, and the
    models it names. Every stage that judges with the audit's protocol (audit, repair) builds it here, so their
    requests are identical and the call store serves one stage's calls to the other."""
    from rubriclab.llm import panel, roles_from_params

    roles = roles_from_params(llm)
    if "judge" not in roles:
        raise ConfigError("params.yaml: llm.roles.judge is not configured; the audit needs a judge (or a panel)")

    def one(name: str) -> RoleSpec | None:
        return panel(roles[name])[0] if name in roles else None

    ctx = AuditContext(gateway=gateway, judges=panel(roles["judge"]), paraphraser=one("paraphraser"),
                       attacker=one("attacker"), verifier=one("verifier"), embedder=one("embedder"),
                       templates_dir=llm.templates_dir, seed=int(seed), n_boot=int(a.n_boot),
                       confidence=float(a.confidence), tie_credit=float(a.tie_credit),
                       alpha_orientation=str(a.alpha_orientation))
    models = sorted({m.model for r in roles.values() for m in panel(r)})
    used = [*ctx.judges, ctx.paraphraser, ctx.attacker, ctx.verifier]  # the roles an audit calls
    ctx.extra["embedded_roles"] = sorted(m.name for m in used if m is not None and m.model.startswith("local/"))
    return ctx, models
