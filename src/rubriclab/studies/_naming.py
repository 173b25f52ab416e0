"""Study names: a readable prefix and a digest of everything that makes two runs the same study."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def study_name(prefix: str, identity: Any, *, digits: int = 12) -> str:
    """``<prefix>-<digest>``: the first ``digits`` hex digits of the SHA-256 of ``identity`` as canonical JSON (sorted
    keys; what JSON cannot hold written with ``str``). Two runs share a study (and resume each other's trials) exactly
    when their prefix and identity agree, so ``identity`` holds what changes the objective's values: the rubric, the
    settings, the models, the pairs."""
    blob = json.dumps(identity, sort_keys=True, default=str)
    return f"{prefix}-{hashlib.sha256(blob.encode()).hexdigest()[:digits]}"
