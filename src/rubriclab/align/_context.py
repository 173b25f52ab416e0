"""What the align steps share for one ``align.settings`` entry (the stage builds it from params.yaml): the settings,
the roles, the two rubrics, the output folder, and the call gateway (opened on first use: the train step calls no
model); and the layout of the outputs the steps hand each other (label sets, adapters)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.settings import ALIGN_REGIMES, Align

if TYPE_CHECKING:
    from rubriclab.judging import PairwiseRubric
    from rubriclab.llm import Gateway, RoleSpec

RUBRICS = ("seed", "biased")
STEPS = ("label", "train", "evaluate")
DOMAINS = ("bench", "target")


@dataclass
class AlignContext:
    """One align setting's run: ``rubrics`` maps ``seed``/``biased`` to ``{"rubric": PairwiseRubric, "path": Path}``;
    ``models`` names each role's model (for the summary and the run's tags); ``embedded`` the roles on the embedded
    model; ``adhoc`` is True for an ad-hoc run (its own ``out`` folder, no metrics file)."""

    project: Path
    setting: str
    align: Align
    seed: int
    out: Path
    adhoc: bool
    judge: RoleSpec
    policy: RoleSpec
    reward: RoleSpec
    third: RoleSpec
    third_rubric: PairwiseRubric
    models: dict[str, str]
    embedded: list[str]
    templates_dir: str | None
    rubrics: dict[str, dict[str, Any]]
    regimes: tuple[str, ...]
    cache_dir: Path
    open_gateway: Callable[[], Gateway] = field(repr=False)
    _gateway: Gateway | None = field(default=None, init=False, repr=False)

    @property
    def gateway(self) -> Gateway:
        """The setting's call gateway, opened on first use."""
        if self._gateway is None:
            self._gateway = self.open_gateway()
        return self._gateway

    @property
    def gateway_opened(self) -> bool:
        return self._gateway is not None

    @property
    def tie_credit(self) -> float:
        """The stage's one tie rule (``align.evaluate.tie_credit``, the paper's 0.5): label agreement and win rates."""
        return float(self.align.evaluate.tie_credit)


def ripd_split(ctx: AlignContext, domain: str, split: str, limit: int | None) -> list:
    """The ``data.ripd`` setting's ``<domain>_<split>`` pairs (the first ``limit``, or all)."""
    path = ctx.project / "outputs/data/ripd" / ctx.setting / f"{domain}_{split}.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: missing; run `dvc repro data` (data.ripd.{ctx.setting})")
    pairs = read_pairs(path)
    return pairs[: int(limit)] if limit is not None else pairs


def read_labels(ctx: AlignContext, rubric: str, regime: str) -> pd.DataFrame:
    """The label set the label step wrote for ``rubric``, over the regime's domains."""
    domains = {"bench": ["bench"], "target": ["target"], "bench_target": ["bench", "target"]}.get(regime)
    if domains is None:
        raise ConfigError(f"params.yaml: align.regimes: unknown regime {regime!r}; allowed: {', '.join(ALIGN_REGIMES)}")
    frames = []
    for d in domains:
        f = ctx.out / "labels" / f"{rubric}.{d}.jsonl"
        if not f.exists():
            raise ConfigError(f"{f}: missing; run `rubriclab align label` (or the whole `align` stage) first")
        frames.append(pd.read_json(f, lines=True) if f.stat().st_size else pd.DataFrame())
    return pd.concat(frames, ignore_index=True)


def policy_name(rubric: str, regime: str) -> str:
    return f"{rubric}@{regime}"


def label_digest(data: pd.DataFrame) -> str:
    """A label set's identity: two equal label sets train one policy."""
    text = data[["prompt", "chosen", "rejected"]].to_json(orient="values", force_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def policy_digest(folder: Path) -> str:
    """A saved policy's identity: every file's name and bytes (an adapter copied for an equal label set has the
    original's)."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def adapter_dir(ctx: AlignContext, rubric: str, regime: str) -> Path:
    return ctx.out / "adapters" / f"{rubric}_{regime}"
