"""Shared state of one drift run: settings, the benchmark–target splits, a judging cache over the call store,
and the registry of every candidate rubric any method proposed."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.data import Pair, stable_hash
from rubriclab.drift._refine import check_candidate
from rubriclab.errors import InputError
from rubriclab.judging import PairwiseRubric, agreement, judge_pairs
from rubriclab.llm import CallRequest, Gateway, RoleSpec
from rubriclab.rubrics import JudgeTemplate
from rubriclab.settings import DRIFT_METHODS, Data, Drift, Params, as_section

SPLITS = ("train", "val", "test")
DOMAINS = ("bench", "target")
METHODS = DRIFT_METHODS


@dataclass(frozen=True)
class DriftSettings:
    """One run's settings: the ``drift`` section (every default, range and doc in rubriclab.settings.Drift)
    and the data seed (``data.seed``)."""

    drift: Drift = field(default_factory=Drift)
    seed: int = Data().seed

    @classmethod
    def of(cls, drift: Drift | Mapping[str, Any] | None = None, seed: int = Data().seed) -> DriftSettings:
        """The ``drift`` section, typed or a mapping validated as params.yaml's (``{"search": {"rounds": 2}}``)."""
        return cls(as_section("drift", drift), int(seed))

    def with_search(self, **point: Any) -> DriftSettings:
        """A study grid point: ``drift.search`` fields changed, validated as params.yaml's."""
        search = Params.of({"drift": {"search": {**self.drift.search.model_dump(), **point}}}).drift.search
        return dataclasses.replace(self, drift=self.drift.model_copy(update={"search": search}))


@dataclass
class DriftData:
    """The six splits of a benchmark–target setting; pairs are relabelled with domain ``bench``/``target``."""

    splits: dict[tuple[str, str], list[Pair]]
    bench_name: str = "bench"
    target_name: str = "target"

    @classmethod
    def of(cls, splits: Mapping[tuple[str, str], Sequence[Pair]], bench_name: str = "bench",
           target_name: str = "target") -> DriftData:
        seen: dict[str, str] = {}
        out: dict[tuple[str, str], list[Pair]] = {}
        for (domain, split), pairs in splits.items():
            if domain not in DOMAINS or split not in SPLITS:
                raise InputError(f"unknown split {domain}_{split}", field="splits",
                                 expected=f"keys (domain, split) with domain in {DOMAINS} and split in {SPLITS}")
            relabelled = []
            for p in pairs:
                where = f"{domain}_{split}"
                if p.id in seen:
                    raise InputError(f"pair id {p.id!r} is in both {seen[p.id]} and {where}", field="id",
                                     expected="disjoint benchmark/target splits with unique pair ids")
                seen[p.id] = where
                relabelled.append(dataclasses.replace(p, domain=domain, meta={**p.meta, "source_domain": p.domain}))
            out[(domain, split)] = relabelled
        for key in [(d, s) for d in DOMAINS for s in SPLITS]:
            out.setdefault(key, [])
        return cls(out, bench_name, target_name)

    def get(self, domain: str, split: str) -> list[Pair]:
        return self.splits[(domain, split)]

    def both(self, split: str) -> list[Pair]:
        return self.get("bench", split) + self.get("target", split)

    @property
    def by_id(self) -> dict[str, Pair]:
        return {p.id: p for ps in self.splits.values() for p in ps}

    def subsample(self, share: float, round_index: int, seed: int) -> list[Pair]:
        """A seeded ``share`` of each train split (at least one pair of each non-empty split)."""
        out = []
        for domain in DOMAINS:
            pairs = self.get(domain, "train")
            k = min(len(pairs), max(1, math.ceil(share * len(pairs)))) if pairs else 0
            out += random.Random(stable_hash("drift-subsample", seed, round_index, domain)).sample(pairs, k)
        return out

    def counts(self) -> dict[str, int]:
        return {f"{d}_{s}": len(self.get(d, s)) for d in DOMAINS for s in SPLITS}


class Judging:
    """Judges rubrics on pairs once per (rubric text, pair) in this process; the call store makes it once ever."""

    def __init__(self, gateway: Gateway, judge: RoleSpec, settings: DriftSettings,
                 templates_dir: str | None = None) -> None:
        self.gateway, self.judge, self.settings, self.templates_dir = gateway, judge, settings, templates_dir
        self._rows: dict[tuple[str, str], dict[str, Any]] = {}

    def rows(self, rubrics: Mapping[str, JudgeTemplate | PairwiseRubric], pairs: Sequence[Pair],
             desc: str = "judge") -> pd.DataFrame:
        """``judge_pairs`` rows for every (rubric, pair); ``rubric`` is the caller's key."""
        wrapped = {name: PairwiseRubric.of(r, name=name) for name, r in rubrics.items()}
        by_digest = {r.digest: r for r in wrapped.values()}
        missing_pairs: dict[str, list[Pair]] = {}
        for digest in by_digest:
            todo = [p for p in pairs if (digest, p.id) not in self._rows]
            if todo:
                missing_pairs[digest] = todo
        if missing_pairs:
            # one gateway batch: all rubrics over the union of their missing pairs (re-judging a cached
            # pair is a store hit, never a provider call)
            union = list({p.id: p for ps in missing_pairs.values() for p in ps}.values())
            got = judge_pairs({d: by_digest[d] for d in missing_pairs}, union, gateway=self.gateway,
                              judge=self.judge, seed=self.settings.seed, samples=self.settings.drift.samples,
                              templates_dir=self.templates_dir, desc=desc)
            for row in got.to_dict("records"):
                self._rows[(row["rubric"], row["pair_id"])] = row
        out = []
        for name, r in wrapped.items():
            for p in pairs:
                out.append({**self._rows[(r.digest, p.id)], "rubric": name})
        return pd.DataFrame(out)

    def scores(self, rows: pd.DataFrame) -> dict[str, dict[str, Any]]:
        """Agreement per domain (bench, target) of one rubric's rows."""
        cfg, seed = self.settings.drift, self.settings.seed
        return {d: agreement(rows[rows["domain"] == d], tie_credit=cfg.tie_credit, n_boot=cfg.n_boot,
                             confidence=cfg.confidence, seed=seed) for d in DOMAINS}


@dataclass
class Candidate:
    """One proposed rubric: where it came from and what it measured."""

    prompt_id: str
    method: str
    text: str | None
    parent: str | None = None
    gen_step: int = 0
    status: str = "ok"            # ok | duplicate | unparsed | call_failed | constraint: …
    duplicate_of: str | None = None
    train: dict[int, dict[str, float]] = field(default_factory=dict)   # round -> {bench, target, n_bench, ...}
    val: dict[str, dict[str, Any]] = field(default_factory=dict)       # domain -> agreement dict
    feasible_val: bool | None = None
    note: str = ""

    @property
    def usable(self) -> bool:
        return self.status == "ok"

    def template(self) -> JudgeTemplate:
        return JudgeTemplate(name=self.prompt_id, text=self.text)


class Registry:
    """Every candidate of every method, deduplicated by text (a repeated text costs nothing and is listed
    as a duplicate of its first occurrence)."""

    def __init__(self, seed: JudgeTemplate) -> None:
        self.seed = seed
        self.candidates: list[Candidate] = []
        self._by_text: dict[str, Candidate] = {seed.text.strip(): Candidate("seed", "seed", seed.text)}
        self._counts: dict[str, int] = {}

    def add(self, method: str, text: str | None, *, parent: str | None, gen_step: int,
            failure: str | None = None) -> Candidate:
        n = self._counts.get(method, 0)
        self._counts[method] = n + 1
        cand = Candidate(f"{method}-{n:03d}", method, text, parent=parent, gen_step=gen_step)
        if failure is not None:
            cand.status = failure
        else:
            problem = check_candidate(text, self.seed)
            if problem:
                cand.status = problem
            else:
                first = self._by_text.get(text.strip())
                if first is not None:
                    cand.status, cand.duplicate_of = "duplicate", first.prompt_id
                else:
                    self._by_text[text.strip()] = cand
        self.candidates.append(cand)
        return cand

    def from_result(self, method: str, res, *, parent: str | None, gen_step: int) -> Candidate:
        """A candidate from a refiner CallResult (failed calls and unparsed replies are kept, with why)."""
        if not res.ok:
            failure = "unparsed" if res.parse_error else "call_failed"
            return self.add(method, res.text, parent=parent, gen_step=gen_step, failure=failure)
        return self.add(method, res.value, parent=parent, gen_step=gen_step)

    def canonical(self, cand: Candidate) -> Candidate:
        """The first candidate with this text (itself unless a duplicate)."""
        if cand.duplicate_of is None:
            return cand
        return next((c for c in self.candidates if c.prompt_id == cand.duplicate_of),
                    Candidate("seed", "seed", self.seed.text))

    def rejected(self, method: str | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.candidates:
            if (method is None or c.method == method) and c.status != "ok":
                key = "duplicate" if c.status == "duplicate" else c.status
                out[key] = out.get(key, 0) + 1
        return out


def run_refiner(gateway: Gateway, requests: list[CallRequest], desc: str) -> list:
    """Refiner calls in one batch (results in request order)."""
    return gateway.run(requests, desc=desc) if requests else []


def rank_key(c: Candidate, round_index: int) -> tuple:
    m = c.train.get(round_index, {})
    return (m.get("target", np.inf), -m.get("bench", -np.inf))
