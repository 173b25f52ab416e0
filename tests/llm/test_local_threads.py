"""$RUBRICLAB_THREADS sets the embedded chat model's CPU threads (test workers and jobs sharing a machine)."""

from __future__ import annotations

import sys
import types

import pytest

from rubriclab.llm import LocalProvider
from rubriclab.llm._local import local_threads


def test_unset_means_every_core(monkeypatch):
    monkeypatch.delenv("RUBRICLAB_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 7)
    assert local_threads() == 7


@pytest.mark.parametrize("raw", ["0", "-1", "two", "1.5"])
def test_a_bad_value_names_the_variable_and_what_it_expects(monkeypatch, raw):
    monkeypatch.setenv("RUBRICLAB_THREADS", raw)
    with pytest.raises(ValueError, match=r"\$RUBRICLAB_THREADS: got .*expected an integer >= 1"):
        local_threads()


def test_the_chat_model_is_loaded_with_that_many_threads_for_decoding_and_the_prompt(monkeypatch):
    seen = {}

    class Llama:
        def __init__(self, **kwargs):
            seen.update(kwargs)

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=Llama))
    monkeypatch.setattr("rubriclab.llm._local.guard_prefix_reuse", lambda llm, **kwargs: llm)
    monkeypatch.setattr("rubriclab.llm._local.grammar_last", lambda llm: llm)
    monkeypatch.setattr("rubriclab.llm._local.chat_weights", lambda name: f"/weights/{name}.f16.gguf")
    monkeypatch.setenv("RUBRICLAB_THREADS", "3")
    provider = LocalProvider()
    try:
        provider.chat_model("smollm2-135m")
    finally:
        provider.close()
    assert seen["n_threads"] == 3
    assert seen["n_threads_batch"] == 3  # the prompt too: llama-cpp-python's own default is every core
    assert seen["model_path"] == "/weights/smollm2-135m.f16.gguf"  # the F16 copy, not the shipped file


def test_the_engine_evaluates_prompts_on_that_many_threads(monkeypatch):
    """The real llama.cpp context, not a stand-in: llama-cpp-python's default for the prompt is every core."""
    from rubriclab.llm._local import load_chat_model
    from rubriclab.llm._weights import chat_weights

    monkeypatch.setenv("RUBRICLAB_THREADS", "1")
    llm = load_chat_model(chat_weights("smollm2-135m"))
    try:
        assert (llm.context_params.n_threads, llm.context_params.n_threads_batch) == (1, 1)
    finally:
        llm.close()
