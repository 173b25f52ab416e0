"""Discovery end to end: extract → consolidate → filter → MMR (`discovered`) and preference-rank
selection over the high-impact pool (`pref_repaired`).

A source with fewer criteria than ``k`` (0 included) is still returned, with
``provenance["shortfall"] = {"asked", "got", "reason"}``; ``report["shortfall"]`` repeats it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rubriclab.data import Pair
from rubriclab.discover._consolidate import Node, consolidate, nodes_from_candidates
from rubriclab.discover._extract import extract_candidates
from rubriclab.discover._prefrank import preference_fit, rank_by_fit
from rubriclab.discover._select import filter_pool, mmr_select
from rubriclab.discover._shortfall import discovered_reason, pref_reason, shortfall
from rubriclab.discover._validate import merge_counts
from rubriclab.errors import InvariantError
from rubriclab.llm import CallStore, Gateway, RoleSpec, embed_texts
from rubriclab.rubrics import Criterion, RubricSet
from rubriclab.settings import Discover, as_section


@dataclass
class DiscoveryResult:
    discovered: RubricSet
    pref_repaired: RubricSet
    candidates: list[dict[str, Any]]
    nodes: list[Node]
    levels: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    pref_rows: list[dict[str, Any]]
    report: dict[str, Any] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)  # extracted criteria that failed validation


def _criterion(n: Node, dataset: str) -> Criterion:
    return Criterion(id=n.id, title=n.name if n.name != n.id else "", description=n.description, support=n.support,
                     provenance={"dataset": dataset, "level": n.level, "merged_from": n.merged_from,
                                 "candidates": n.members, "pairs": n.pairs})


def discover(pairs: list[Pair], cfg: Discover | Mapping[str, Any] | None, *, gateway: Gateway, store: CallStore, extractor: RoleSpec,
             consolidator: RoleSpec, embedder: RoleSpec, judge: RoleSpec, dataset: str, seed: int = 42,
             templates_dir: str | None = None, progress: bool = True) -> DiscoveryResult:
    """Run PReMISE discovery on ``pairs`` (the extraction split) with settings ``cfg``: params.yaml's ``discover``
    section (typed, or a mapping read as that section: every default from rubriclab.settings.Discover)."""
    c = as_section("discover", cfg).model_dump()
    pairs = pairs[: c["max_pairs"]]
    candidates, extract_report = extract_candidates(pairs, gateway, extractor, seed=seed,
                                                    min_criteria=c["min_criteria"], max_criteria=c["max_criteria"],
                                                    templates_dir=templates_dir, min_words=c["min_candidate_words"],
                                                    identical_limit=c["identical_limit"])
    nodes, levels = consolidate(nodes_from_candidates(candidates), gateway, consolidator=consolidator,
                                embedder=embedder, store=store, target_size=c["target_size"],
                                cluster_size=c["cluster_size"], max_levels=c["max_levels"],
                                batch_size=c["batch_size"], min_split=c["min_split"],
                                min_words=c["min_description_words"], templates_dir=templates_dir, progress=progress)
    kept, dropped = filter_pool(nodes, n_min=c["n_min"], min_pairs=c["min_pairs"])
    X = embed_texts([n.text for n in kept], embedder, store, progress=progress, stage=gateway.stage) if kept else None
    order = mmr_select(kept, X, c["k"], c["mmr_lambda"]) if kept else []
    provenance = {"dataset": dataset, "pairs": len(pairs), "extractor": extractor.model,
                  "consolidator": consolidator.model, "embedder": embedder.model,
                  "settings": {k: v for k, v in c.items() if k != "pref_rank"}}
    if len(order) < c["k"]:
        provenance["shortfall"] = shortfall(c["k"], len(order), discovered_reason(
            asked=c["k"], got=len(order), extraction=extract_report, pool_final=len(nodes), kept=len(kept),
            n_min=c["n_min"], min_pairs=c["min_pairs"], extractor=extractor.model))
    discovered = RubricSet(name=f"{dataset}-discovered", criteria=tuple(_criterion(kept[i], dataset) for i in order),
                           source="discovered", provenance=provenance)

    # preference-rank selection over the high-impact pool (top support), texts unchanged
    pool_nodes = sorted(kept, key=lambda n: (-n.support, n.id))[: c["pref_rank"]["pool"]]
    pool = [_criterion(n, dataset) for n in pool_nodes]
    pref_pairs = pairs[: c["pref_rank"]["max_pairs"]]
    pref_rows = rank_by_fit(preference_fit(pool, pref_pairs, gateway, judge, c["pref_rank"]["mode"],
                                           templates_dir)) if pool else []
    by_id = {cr.id: cr for cr in pool}
    top = [r for r in pref_rows if r["scored"] > 0][: c["k"]]
    pref_provenance = {"dataset": dataset, "from": "discovered pool", "pool": len(pool), "pairs": len(pref_pairs),
                       "judge": judge.model, "mode": c["pref_rank"]["mode"]}
    if len(top) < c["k"]:
        pref_provenance["shortfall"] = shortfall(c["k"], len(top), pref_reason(
            asked=c["k"], got=len(top), pool=len(pool), pool_limit=c["pref_rank"]["pool"], kept=len(kept),
            unscored=sum(r["scored"] == 0 for r in pref_rows), discovered=discovered.provenance.get("shortfall")))
    pref_repaired = RubricSet(
        name=f"{dataset}-pref_repaired",
        criteria=tuple(Criterion(**{**by_id[r["id"]].to_dict(), "meta": {"preference_fit": r["fit"],
                                                                        "pref_rank": i + 1}})
                       for i, r in enumerate(top)),
        source="pref_repaired", provenance=pref_provenance)

    support_in = len(candidates)
    support_kept = sum(n.support for n in kept)
    support_selected = sum(kept[i].support for i in order)
    report = {
        "extraction": {k: v for k, v in extract_report.items() if k not in ("failures", "rejected_rows")},
        "extraction_failures": extract_report["failures"],
        "rejected": {"extraction": extract_report["rejected"],
                     "describe": merge_counts(lv.get("describe_rejected", {}) for lv in levels)},
        "shortfall": {rs.source: rs.provenance["shortfall"] for rs in (discovered, pref_repaired)
                      if "shortfall" in rs.provenance},
        "levels": len(levels), "pool_final": len(nodes), "pool_kept": len(kept), "pool_dropped": len(dropped),
        "support": {"in": support_in, "kept": support_kept, "selected": support_selected,
                    "not_selected": support_kept - support_selected,
                    "filtered_out": sum(d["support"] for d in dropped)},
        "k_discovered": discovered.K, "k_pref_repaired": pref_repaired.K,
        "pref_rank": {"pool": len(pool), "pairs": len(pref_pairs),
                      "ties": sum(r["ties"] for r in pref_rows), "failed": sum(r["failed"] for r in pref_rows)},
    }
    support_pool = sum(n.support for n in nodes)
    if not support_in == support_pool == support_kept + report["support"]["filtered_out"]:
        raise InvariantError(f"discover@{dataset}: support {support_in} extracted, {support_pool} in the final pool, "
                             f"{support_kept} kept + {report['support']['filtered_out']} filtered out; the three must "
                             "be equal (every candidate in exactly one criterion)")
    return DiscoveryResult(discovered, pref_repaired, candidates, nodes, levels, dropped, pref_rows, report,
                           extract_report["rejected_rows"])
