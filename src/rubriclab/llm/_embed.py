"""Embeddings through litellm (``local/minilm`` or any provider), cached per text in the call store."""

from __future__ import annotations

import time
from collections.abc import Sequence

import litellm
import numpy as np
from tqdm.auto import tqdm

from rubriclab.errors import ModelCallError
from rubriclab.llm._retry import (
    MalformedResponseError,
    backoff_seconds,
    describe,
    is_retryable,
    retry_after_seconds,
)
from rubriclab.llm._roles import RoleSpec
from rubriclab.llm._store import CallStore
from rubriclab.secrets import public_endpoint


def embed_texts(texts: Sequence[str], role: RoleSpec, store: CallStore, batch_size: int = 64,
                normalize: bool = True, progress: bool = True, stage: str = "embed") -> np.ndarray:
    """Embed ``texts`` (rows L2-normalised when ``normalize``); repeated texts cost nothing."""
    if role.model.startswith("local/"):
        from rubriclab.llm._local import local_provider

        local_provider()
    unique = list(dict.fromkeys(texts))
    # two endpoints behind one model string may serve different weights: the endpoint is part of the key
    where = public_endpoint(role.endpoint)
    model_key = f"{role.model}@{where}" if where else role.model
    have = store.get_embeddings(model_key, unique)
    missing = [t for t in unique if t not in have]
    for start in tqdm(range(0, len(missing), batch_size), desc="embed", disable=not progress or not missing,
                      leave=False):
        chunk = missing[start : start + batch_size]
        vectors = _embed_chunk(chunk, role, store, stage)
        store.put_embeddings(model_key, vectors)
        have.update(vectors)
    matrix = np.array([have[t] for t in texts], dtype=np.float64).reshape(len(texts), -1)
    if normalize and len(matrix):
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
    return matrix


def _embed_chunk(chunk: list[str], role: RoleSpec, store: CallStore, stage: str) -> dict[str, list[float]]:
    """One embeddings request through the one retry layer (litellm's retries off): transport faults and bodies
    that are not an embeddings response for every input are retried, each retry recorded in the ledger."""
    retries = 0
    while True:
        try:
            try:
                resp = litellm.embedding(model=role.model, input=chunk, timeout=role.timeout, num_retries=0,
                                         max_retries=0, **role.transport_params())
            except (TypeError, KeyError, AttributeError) as exc:  # litellm choking on a body that is not a response
                raise MalformedResponseError(f"embeddings response could not be read ({describe(exc)})") from exc
            data = list(getattr(resp, "data", None) or [])
            if len(data) != len(chunk) or not all(_vector(d) for d in data):
                raise MalformedResponseError(f"embeddings response has {len(data)} vectors for {len(chunk)} inputs")
            return {t: list(map(float, _vector(d))) for t, d in zip(chunk, data)}
        except Exception as exc:  # noqa: BLE001 - classified below
            if not is_retryable(exc) or retries >= role.max_retries:
                raise ModelCallError(f"embedder {role.model}: {describe(exc)}") from exc
            delay = retry_after_seconds(exc)
            store.record_retry(f"embed:{len(chunk)}:{chunk[0][:40]}", stage, role.name, role.model, describe(exc))
            time.sleep(backoff_seconds(retries) if delay is None else delay)
            retries += 1


def _vector(item) -> list[float] | None:
    vec = item.get("embedding") if isinstance(item, dict) else getattr(item, "embedding", None)
    return vec if isinstance(vec, list) and vec else None
