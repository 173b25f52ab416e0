"""One audit over several rubric sources on one dataset: every selected axis per source, then the
rubric-conditioned accuracy across sources (paired on the same held-out pairs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rubriclab.audit._compare import adversarial_item_values, paired_item_comparisons
from rubriclab.audit._context import AuditContext
from rubriclab.audit._fit import audit_applicability, audit_score_structure
from rubriclab.audit._reliability import audit_reliability
from rubriclab.audit._structure import audit_structure
from rubriclab.audit._validity import ATTACK_BOUNDS, PARAPHRASE_BOUNDS, bounds_of
from rubriclab.data import Pair
from rubriclab.errors import ConfigError
from rubriclab.rubrics import RubricSet
from rubriclab.settings import AUDIT_AXES, Audit, as_section

AXES = AUDIT_AXES


def check_axes(axes: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    unknown = [a for a in axes if a not in AXES]
    if unknown:
        raise ConfigError(f"audit axes {unknown} unknown; allowed: {', '.join(AXES)}")
    return tuple(axes)


def not_audited_reason(rs: RubricSet) -> str:
    """Why a source with no criteria is not audited, in words (from its provenance when it says)."""
    short = (rs.provenance or {}).get("shortfall") or {}
    why = short.get("reason") if isinstance(short, dict) else None
    return "not audited: the rubric set has no criteria (K=0)" + (f" — {why}" if why else "")


def run_audit(sources: dict[str, RubricSet], *, pool: list[Pair], heldout: list[Pair], ood: list[Pair],
              ctx: AuditContext, cfg: Audit | Mapping[str, Any] | None,
              axes: tuple[str, ...] = AXES) -> dict[str, Any]:
    """Returns ``card`` ({source: {metric: entry}}), ``comparisons`` (paired rows), ``details``
    ({source: {axis: per-criterion rows / per-item rows}}), ``counts`` (per-axis detail counts),
    ``tally`` (parse/transport failures per source, axis and role; dropped items by reason) and
    ``not_audited`` ({source: reason} for sources with no criteria)."""
    c = as_section("audit", cfg).model_dump()  # params.yaml's audit section, every default filled in
    axes = check_axes(axes)
    # refuse a typo in a check's bounds before any model call, not after the attacks are written
    bounds_of(PARAPHRASE_BOUNDS, c["paraphrase_check"], "audit.paraphrase_check")
    bounds_of(ATTACK_BOUNDS, c["attack_check"], "audit.attack_check")
    card: dict[str, dict[str, Any]] = {src: {} for src in sources}
    details: dict[str, dict[str, Any]] = {src: {} for src in sources}
    counts: dict[str, Counter] = {src: Counter() for src in sources}
    item_values: dict[str, dict[str, Any]] = {"flip_rate": {}, "vfr": {}, "injection_rate": {}}
    not_audited: dict[str, str] = {}
    for src, rs in sources.items():
        card[src]["K"] = rs.K
        if rs.K == 0:
            not_audited[src] = not_audited_reason(rs)
            card[src]["status"] = not_audited[src]
            continue
        if "structure" in axes:
            r = audit_structure(rs, ctx, source=src)
            card[src].update(r["metrics"])
            details[src]["structure"] = r
            counts[src].update(r["counts"])
        if "reliability" in axes or "fit" in axes:
            rel_axes = ("alpha",) + (("flip", "paraphrase") if "reliability" in axes else ())
            r = audit_reliability(rs, pool, ctx, runs=c["runs"], temperature=c["run_temperature"],
                                  paraphrases=c["paraphrases"], paraphrase_temperature=c["paraphrase_temperature"],
                                  axes=rel_axes, source=src, paraphrase_bounds=c["paraphrase_check"])
            if "reliability" in axes:
                card[src].update(r["metrics"])
                if "flip_rate" in r["item_values"]:
                    item_values["flip_rate"][src] = r["item_values"]["flip_rate"]
            details[src]["reliability"] = {k: v for k, v in r.items() if k != "scores"}
            counts[src].update(r["counts"])
            if "fit" in axes:
                s = audit_score_structure(rs, r["scores"], ctx, source=src)
                card[src].update(s["metrics"])
                details[src]["bt_coef"] = s["bt_coef"] if "bt_coef" in s else {}
                counts[src].update(s["counts"])
        if "fit" in axes:
            a = audit_applicability(rs, {p.id: p.prompt for p in pool}, {p.id: p.prompt for p in ood}, ctx,
                                    source=src)
            card[src].update(a["metrics"])
            details[src]["applicability"] = a
            counts[src].update(a["counts"])
        if "adversarial" in axes:
            from rubriclab.audit._adversarial import audit_adversarial

            r = audit_adversarial(rs, pool, ctx, n_attacks=c["n_attacks"], tau=c["tau"], source=src,
                                  baseline_reference=c["baseline_reference"], attack_bounds=c["attack_check"])
            card[src].update({k: v for k, v in r["metrics"].items() if k != "formula"})
            details[src]["adversarial"] = r
            card[src]["vfr_formula"] = r["metrics"].get("formula")
            card[src]["baseline_verifier_reference"] = r["settings"]["baseline_reference_shown"]
            item_values["vfr"][src] = adversarial_item_values(r["items"])
            counts[src].update(r["counts"])
        if "adversarial" in axes and c["injection"]:
            from rubriclab.audit._injection import DEFINITION, audit_injection

            r = audit_injection(rs, pool, ctx, source=src)
            card[src].update(r["metrics"])
            card[src]["injection_definition"] = DEFINITION
            details[src]["injection"] = r
            item_values["injection_rate"][src] = r["item_values"]
            counts[src].update(r["counts"])
    comparisons: list[dict[str, Any]] = []
    accuracy_items: list[dict[str, Any]] = []
    live = {s: rs for s, rs in sources.items() if rs.K > 0}
    if "fit" in axes and live:
        from rubriclab.audit._accuracy import audit_accuracy

        acc = audit_accuracy(live, heldout, ctx, samples=c["samples"], temperature=c["sample_temperature"],
                             templates=tuple(c["templates"]), both_orders=c["both_orders"],
                             early_stop=c["early_stop"], n_boot=ctx.n_boot, n_boot_paired=c["n_boot_paired"])
        for src, m in acc["metrics"].items():
            card.setdefault(src, {}).update(m)
        comparisons = [{"metric": "accuracy", **row} for row in acc["comparisons"]]
        accuracy_items = acc["items"]
        for src, per_template in (acc.get("counts") or {}).items():
            counts.setdefault(src, Counter())
            for template, n in per_template.items():
                counts[src].update({f"accuracy_{template}.{k}": v for k, v in n.items() if isinstance(v, int)})
    for metric_name, per_source in item_values.items():
        if len(per_source) >= 2:
            comparisons += [{"template": None, **row} for row in paired_item_comparisons(
                per_source, metric_name, n_boot=c["n_boot_paired"], seed=ctx.seed, confidence=ctx.confidence)]
    for src in card:
        if src not in not_audited:
            card[src].update(ctx.tally.totals(src))
            card[src]["counts"] = dict(counts.get(src, {}))
    return {"card": card, "comparisons": comparisons, "details": details, "accuracy_items": accuracy_items,
            "counts": {s: dict(v) for s, v in counts.items()}, "tally": ctx.tally.rows(),
            "tally_by_role": ctx.tally.by_role(), "not_audited": not_audited}
