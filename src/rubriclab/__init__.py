"""rubriclab: rubric-conditioned LLM judges as measurement instruments."""

from __future__ import annotations

import os

# litellm fetches a remote cost map at import unless told otherwise; rubriclab must run offline.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"
