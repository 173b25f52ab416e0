from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest  # noqa: E402

from rubriclab.llm import Gateway, open_store  # noqa: E402


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path / "calls.sqlite")
    yield s
    s.close()


@pytest.fixture
def gateway(store):
    return Gateway(store, stage="test", progress=False)
