"""Step 2 of discovery: the embed → cluster → sub-group → describe loop (PReMISE §3.1, E.2–E.3).

Support (how many raw candidates a node stands for) and provenance (which raw candidates and which
pairs) are carried through every level: a merge sums its members' support, and a node that no valid
reply merged stays as it was. Nothing is lost: total support is constant across levels.

A described criterion passes the rules of ``_validate`` (no copy of the prompt's example
``concise_snake_case_name``, no field name, ≥ ``min_words`` words, ...); one that does not is re-asked,
and when it stays unusable the group's members stay unmerged and the reason is counted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from rubriclab.discover._validate import EXPLAIN, Echo, check_criterion, count_reasons, echo_of
from rubriclab.errors import InvariantError, ParseFailure
from rubriclab.llm import (
    CallRequest,
    CallResult,
    CallStore,
    Gateway,
    RoleSpec,
    embed_texts,
    extract_json,
    load_prompt,
)
from rubriclab.rubrics import slugify, unique_id

_SNAKE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


@dataclass
class Node:
    """A criterion in the consolidation pool."""

    id: str
    name: str
    description: str
    support: int
    members: list[str]  # raw candidate ids
    pairs: list[str]  # distinct source pair ids
    level: int = 0
    merged_from: list[str] = field(default_factory=list)  # node ids at the previous level

    @property
    def text(self) -> str:
        return f"{self.name}: {self.description}"


def nodes_from_candidates(candidates: list[dict[str, Any]]) -> list[Node]:
    """Level-0 pool: one node per distinct candidate text. Exact duplicates (same name and description
    up to case and spacing) are one construct, merged here without a model call; support counts them."""
    taken: set[str] = set()
    by_text: dict[tuple[str, str], Node] = {}
    for c in candidates:
        norm = (" ".join(c["name"].lower().split()), " ".join(c["description"].lower().split()))
        node = by_text.get(norm)
        if node is not None:
            node.support += 1
            node.members.append(c["cand_id"])
            if c["pair_id"] not in node.pairs:
                node.pairs.append(c["pair_id"])
            continue
        nid = unique_id(slugify(c["name"]) or "criterion", taken)
        taken.add(nid)
        by_text[norm] = Node(id=nid, name=c["name"], description=c["description"], support=1,
                             members=[c["cand_id"]], pairs=[c["pair_id"]])
    return list(by_text.values())


# -- sub-grouping replies ------------------------------------------------------------------------
def check_subgroups(data: Any, ids: list[str]) -> tuple[list[list[str]], list[str], list[str]]:
    """Validate a sub-grouping reply against the ids shown.

    Returns (valid groups, unmerged ids, problems). A reply is valid when problems is empty: every
    id exactly once, no unknown ids, every subgroup ≥2. Problems are listed, not fixed, so the caller
    can re-ask; ``salvage`` keeps what is valid.
    """
    problems: list[str] = []
    if not isinstance(data, dict) or not isinstance(data.get("subgroups", []), list):
        return [], list(ids), ["reply is not an object with a 'subgroups' list"]
    known = set(ids)
    seen: set[str] = set()

    def claim(x: object) -> str | None:
        """The id if it is known and not yet used; otherwise record the problem."""
        x = str(x)
        if x not in known:
            problems.append(f"unknown id {x!r}")
        elif x in seen:
            problems.append(f"duplicate id {x!r}")
        else:
            seen.add(x)
            return x
        return None

    groups: list[list[str]] = []
    for g in data.get("subgroups") or []:
        if not isinstance(g, list):
            problems.append(f"subgroup {g!r} is not a list")
            continue
        members = [x for x in map(claim, g) if x is not None]
        if len(members) >= 2:
            groups.append(members)
        elif g:
            problems.append(f"subgroup {g!r} has fewer than 2 valid ids")
    for x in data.get("unmerged") or []:
        claim(x)
    missing = [x for x in ids if x not in seen]
    if missing:
        problems.append(f"{len(missing)} id(s) missing: {missing[:5]}")
    in_groups = {x for g in groups for x in g}
    return groups, [x for x in ids if x not in in_groups], problems


def subgroup_parser(ids: list[str]):
    def parse(text: str) -> list[list[str]]:
        groups, _, problems = check_subgroups(extract_json(text), ids)
        if problems:
            raise ParseFailure("invalid sub-grouping: " + "; ".join(problems[:4]))
        return groups

    return parse


def salvage(text: str | None, ids: list[str]) -> list[list[str]]:
    """The valid groups of an invalid reply (unknown/duplicate ids dropped, short groups undone)."""
    try:
        groups, _, _ = check_subgroups(extract_json(text or ""), ids)
    except ParseFailure:
        return []
    return groups


# -- describe replies ----------------------------------------------------------------------------
def check_description(text: str, echo: Echo, min_words: int) -> tuple[dict[str, str], str | None]:
    """(the reply's rubric_id and description, the ``_validate`` reason code or None). ParseFailure when
    the reply is not an object with a snake_case ``rubric_id``."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise ParseFailure("reply is not a JSON object")
    rid = str(data.get("rubric_id", "")).strip()
    desc = " ".join(str(data.get("rubric_description", "")).split())
    if not _SNAKE.match(rid):
        raise ParseFailure(f"rubric_id {rid!r} is not snake_case")
    return {"rubric_id": rid, "rubric_description": desc}, check_criterion(rid, desc, echo, min_words)


def describe_parser(min_words: int, echo: Echo | None = None):
    """Parser for a describe reply; a criterion the rules of ``_validate`` reject is a ParseFailure
    naming the reason code (re-asked; after the retries the members stay unmerged)."""
    echo = echo or echo_of(load_prompt("discover_describe"))

    def parse(text: str) -> dict[str, str]:
        value, reason = check_description(text, echo, min_words)
        if reason == "too_few_words":
            n = len(value["rubric_description"].split())
            raise ParseFailure(f"too_few_words: rubric_description has {n} words; expected ≥{min_words}")
        if reason:
            raise ParseFailure(f"{reason}: the criterion {EXPLAIN[reason]} (rubric_id {value['rubric_id']!r}); "
                               "write the merged quality in your own words")
        return value

    return parse


def describe_failure(res: CallResult, echo: Echo, min_words: int) -> str:
    """The reason code of a describe call that stayed unusable (``call_error``/``unparseable`` when the
    reply could not be checked)."""
    if res.parse_error is None:
        return "call_error"
    try:
        return check_description(res.text or "", echo, min_words)[1] or "unparseable"
    except ParseFailure:
        return "unparseable"


def subgroup_schema(ids: list[str]) -> dict[str, Any]:
    """Reply schema for one batch: ids restricted to the ones shown, so a constrained decoder (llama.cpp,
    structured outputs) cannot invent ids; duplicates and omissions are still checked after."""
    item = {"type": "string", "enum": list(ids)}
    group = {"type": "array", "items": item, "minItems": 2, "maxItems": len(ids)}
    return {"type": "object", "required": ["subgroups", "unmerged"],
            "properties": {"subgroups": {"type": "array", "items": group, "maxItems": max(1, len(ids) // 2)},
                           "unmerged": {"type": "array", "items": item, "maxItems": len(ids)}}}


DESCRIBE_SCHEMA = {"type": "object", "properties": {"rubric_id": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,47}$"},
                                                    "rubric_description": {"type": "string"}},
                   "required": ["rubric_id", "rubric_description"]}


def _rubrics_text(nodes: list[Node], local_ids: list[str]) -> str:
    return "\n".join(f"- {lid}: {n.name} — {n.description}" for lid, n in zip(local_ids, nodes))


def _cluster(X: np.ndarray, target_size: int) -> np.ndarray:
    n = len(X)
    k = max(1, math.ceil(n / max(1, target_size)))
    if n < 2 or k >= n:
        return np.arange(n)
    return AgglomerativeClustering(n_clusters=k, metric="cosine", linkage="average").fit_predict(X)


def _subgroup_level(clusters: list[list[Node]], gateway: Gateway, role: RoleSpec, batch_size: int,
                    min_split: int, templates_dir: str | None, stats: dict[str, int]) -> list[list[Node]]:
    """Sub-group every cluster; invalid replies are re-asked (by the gateway), then split in halves,
    then salvaged. Returns the merge groups (lists of ≥2 nodes)."""
    tpl = load_prompt("discover_subgroup", templates_dir)
    batches = [c[i : i + batch_size] for c in clusters for i in range(0, len(c), batch_size)]
    groups: list[list[Node]] = []
    while batches:
        requests = []
        for batch in batches:
            local = [f"r{i + 1}" for i in range(len(batch))]
            requests.append(CallRequest(
                role=role, messages=tpl.render(rubrics_text=_rubrics_text(batch, local)),
                parser=subgroup_parser(local),
                response_format={"type": "json_object", "schema": subgroup_schema(local)},
                tag=(batch, local)))
        stats["subgroup_calls"] += len(requests)
        next_batches = []
        for res in gateway.run(requests, desc="subgroup"):
            batch, local = res.tag
            by_local = dict(zip(local, batch))
            stats["reasks"] += max(0, res.attempts - 1)
            if res.ok:
                groups += [[by_local[x] for x in g] for g in res.value]
            elif len(batch) >= 2 * min_split:
                stats["splits"] += 1
                half = len(batch) // 2
                next_batches += [batch[:half], batch[half:]]
            else:
                kept = salvage(res.text, local)
                stats["salvaged_replies"] += 1
                stats["salvaged_groups"] += len(kept)
                groups += [[by_local[x] for x in g] for g in kept]
        batches = next_batches
    return groups


def consolidate(nodes: list[Node], gateway: Gateway, *, consolidator: RoleSpec, embedder: RoleSpec,
                store: CallStore, target_size: int, cluster_size: int, max_levels: int, batch_size: int = 150,
                min_split: int = 4, min_words: int = 20, templates_dir: str | None = None,
                progress: bool = True) -> tuple[list[Node], list[dict[str, Any]]]:
    """Run the loop until ``len(nodes) <= target_size``, ``max_levels`` levels, or a level merges
    nothing. Returns the final pool and one report row per level."""
    describe_tpl = load_prompt("discover_describe", templates_dir)
    echo = echo_of(describe_tpl)
    levels: list[dict[str, Any]] = []
    total_support = sum(n.support for n in nodes)
    for level in range(1, max_levels + 1):
        if len(nodes) <= target_size:
            break
        stats = {"level": level, "nodes_in": len(nodes), "subgroup_calls": 0, "reasks": 0, "splits": 0,
                 "salvaged_replies": 0, "salvaged_groups": 0}
        X = embed_texts([n.text for n in nodes], embedder, store, progress=progress, stage=gateway.stage)
        labels = _cluster(X, cluster_size)
        clusters = [[nodes[i] for i in np.flatnonzero(labels == lab)] for lab in sorted(set(labels.tolist()))]
        multi = [c for c in clusters if len(c) > 1]
        stats["clusters"] = len(clusters)
        groups = _subgroup_level(multi, gateway, consolidator, batch_size, min_split, templates_dir, stats)
        stats["subgroups"] = len(groups)

        describe = [CallRequest(role=consolidator,
                                messages=describe_tpl.render(rubrics_text=_rubrics_text(g, [n.id for n in g])),
                                parser=describe_parser(min_words, echo),
                                response_format={"type": "json_object", "schema": DESCRIBE_SCHEMA}, tag=g)
                    for g in groups]
        described = gateway.run(describe, desc="describe") if describe else []
        merged_ids: set[str] = set()
        taken = {n.id for n in nodes}
        new_nodes: list[Node] = []
        failures = [describe_failure(res, echo, min_words) for res in described if not res.ok]
        stats["describe_failures"] = len(failures)  # their members stay as they are
        stats["describe_rejected"] = count_reasons(failures)
        stats["describe_reasks"] = sum(max(0, res.attempts - 1) for res in described)
        for res in described:
            group: list[Node] = res.tag
            if not res.ok:
                continue
            for n in group:
                taken.discard(n.id)
            nid = unique_id(res.value["rubric_id"], taken)
            taken.add(nid)
            merged_ids.update(n.id for n in group)
            new_nodes.append(Node(
                id=nid, name=res.value["rubric_id"], description=res.value["rubric_description"],
                support=sum(n.support for n in group), members=[m for n in group for m in n.members],
                pairs=sorted({p for n in group for p in n.pairs}), level=level, merged_from=[n.id for n in group]))
        nodes = [n for n in nodes if n.id not in merged_ids] + new_nodes
        stats["merged_members"] = len(merged_ids)
        stats["nodes_out"] = len(nodes)
        support_out = sum(n.support for n in nodes)
        if support_out != total_support:
            raise InvariantError(f"consolidate level {level}: total support {support_out} after merging, "
                                 f"{total_support} before; support must be conserved (each candidate in one node)")
        levels.append(stats)
        if not merged_ids:
            break
    return nodes, levels
