"""Embeddings through litellm (``local/minilm`` or any provider), cached per text in the call store."""

from __future__ import annotations

from collections.abc import Sequence

import litellm
import numpy as np
from tqdm.auto import tqdm

from rubriclab.errors import ModelCallError
from rubriclab.llm._retry import describe
from rubriclab.llm._roles import RoleSpec
from rubriclab.llm._store import CallStore
from rubriclab.secrets import public_endpoint


def embed_texts(texts: Sequence[str], role: RoleSpec, store: CallStore, batch_size: int = 64,
                normalize: bool = True, progress: bool = True) -> np.ndarray:
    """Embed ``texts`` (rows L2-normalised when ``normalize``); repeated texts cost nothing."""
    if role.model.startswith("local/"):
        from rubriclab.llm._local import local_provider

        local_provider()
    unique = list(dict.fromkeys(texts))
    # two endpoints behind one model string may serve different weights: the endpoint is part of the key
    where = public_endpoint(role.api_base)
    model_key = f"{role.model}@{where}" if where else role.model
    have = store.get_embeddings(model_key, unique)
    missing = [t for t in unique if t not in have]
    for start in tqdm(range(0, len(missing), batch_size), desc="embed", disable=not progress or not missing,
                      leave=False):
        chunk = missing[start : start + batch_size]
        try:
            resp = litellm.embedding(model=role.model, input=chunk, timeout=role.timeout, num_retries=role.max_retries,
                                     **role.transport_params())
        except Exception as exc:  # noqa: BLE001
            raise ModelCallError(f"embedder {role.model}: {describe(exc)}") from exc
        vectors = {t: list(map(float, d["embedding"])) for t, d in zip(chunk, resp.data)}
        store.put_embeddings(model_key, vectors)
        have.update(vectors)
    matrix = np.array([have[t] for t in texts], dtype=np.float64).reshape(len(texts), -1)
    if normalize and len(matrix):
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1.0, norms)
    return matrix
