"""The policy backbone: a Hugging Face model loaded by transformers (never through litellm).

``llm.roles.policy.model`` is ``local/smollm2-135m`` (the embedded GGUF, dequantized once into a plain
checkpoint under ``.rubriclab/models/``), ``hf/<org>/<name>`` or a bare Hugging Face id / local folder.
A model loaded from GGUF is dequantized but still flagged as GGUF-quantized, and Trainer refuses such a
model for training, hence the one-time save as a plain checkpoint (quantization config dropped).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rubriclab.errors import ConfigError, MissingDependencyError

ALIGN_PACKAGES = {"trl": "trl", "peft": "peft", "accelerate": "accelerate"}
DEFAULT_CACHE = ".rubriclab/models"


def require_align(*extra: str) -> None:
    """Raise a MissingDependencyError naming the install command when trl/peft (or ``extra``) are missing."""
    missing = [pkg for mod, pkg in {**ALIGN_PACKAGES, **{e: e for e in extra}}.items()
               if importlib.util.find_spec(mod) is None]
    if missing:
        raise MissingDependencyError("rubriclab align (DPO training)", "'rubriclab[align]'  # missing: "
                                     + ", ".join(missing))


def policy_source(model: str, cache_dir: str | Path) -> str:
    """Where transformers loads ``model`` from: a plain checkpoint folder or a Hugging Face id."""
    model = str(model or "").strip()
    if not model:
        raise ConfigError("params.yaml: llm.roles.policy.model is empty; expected local/smollm2-135m, "
                          "hf/<org>/<name> or a local checkpoint folder")
    if model.startswith("local/"):
        from rubriclab.llm import CHAT_MODELS, locate_model_file

        name = model.split("/", 1)[1]
        if name not in CHAT_MODELS:
            raise ConfigError(f"params.yaml: llm.roles.policy.model={model!r}: unknown embedded model; allowed: "
                              + ", ".join(f"local/{m}" for m in CHAT_MODELS))
        gguf = locate_model_file(*CHAT_MODELS[name])
        return str(checkpoint_from_gguf(gguf, Path(cache_dir) / name))
    if model.startswith("hf/"):
        return model[3:]
    return model


def checkpoint_from_gguf(gguf: str | Path, dest: str | Path) -> Path:
    """Dequantize ``gguf`` into a plain float32 checkpoint at ``dest`` (once; reused while the GGUF is unchanged).

    Written to a temporary folder and renamed, so a killed conversion never leaves a half checkpoint."""
    gguf, dest = Path(gguf), Path(dest)
    stamp = {"gguf": gguf.name, "size": gguf.stat().st_size, "mtime_ns": gguf.stat().st_mtime_ns}
    marker = dest / "rubriclab_source.json"
    if marker.exists() and json.loads(marker.read_text()) == stamp:
        return dest
    require_align("gguf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with gguf_read_once():
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "rubriclab_source.json").write_text(json.dumps(stamp))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, dest)
    return dest


@contextmanager
def gguf_read_once() -> Iterator[None]:
    """Within the block, transformers' GGUF loading parses each file once and builds gguf's tensor-name map once.

    Unaided it parses the file three times (config, tokenizer, weights: ~3.6 s each on 2 cores for SmolLM2's 49k-token
    vocabulary) and rebuilds the same name map for each of the model's ~400 modules (~6 s): 17 s of a conversion
    whose dequantization takes 1 s, 7 s with this (benchmarks/policy_conversion.py, the same files). transformers
    looks both up on the ``gguf`` module at call time (``from gguf import ...`` inside its functions), so they are
    swapped there for the block and put back after: the swap is process-wide, so no other thread should read a GGUF
    meanwhile (the align stage converts before it starts any)."""
    import gguf

    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: str | os.PathLike, mode: str = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map


def pick_device(device: str = "auto") -> str:
    """``auto``: cuda when available, else cpu."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise ConfigError(f"params.yaml: align.dpo.device={device!r}; allowed: auto, cpu, cuda")
    return device


def load_tokenizer(source: str) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(source)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def policy_dtype(device: str, training: bool = False) -> Any:
    """The dtype the weights are loaded in: float32 on every device, for training and for evaluation alike. AdamW
    updates at the paper's lr 1e-6 mostly round away in bf16 weights: after 21 steps a bf16 copy changed 26% of the
    weights and its update had cosine 0.34 with the trained one, so "after" margins and generations would mostly be
    the base model's. On cuda the compute runs under bf16 autocast instead (``inference_precision``; the trainer's
    ``bf16=True``), which keeps the update in the weights."""
    import torch

    del device, training  # one dtype for every device and use; the arguments say where it is asked from
    return torch.float32


@contextmanager
def inference_precision(device: Any) -> Iterator[None]:
    """bf16 autocast for a forward pass on cuda (float32 weights, bf16 matmuls); nothing elsewhere."""
    import torch

    kind = getattr(device, "type", str(device))
    if kind == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            yield
    else:
        yield


def trained_folder(folder: str | Path) -> str:
    """What a trained policy folder holds: ``adapter`` (a LoRA adapter on the base model) or ``full`` (a whole
    checkpoint, from ``align.dpo.mode: full``)."""
    folder = Path(folder)
    if (folder / "adapter_config.json").exists():
        return "adapter"
    if (folder / "config.json").exists():
        return "full"
    raise ConfigError(f"{folder}: no trained policy; expected adapter_config.json (LoRA) or config.json (full "
                      "fine-tune); run `rubriclab align train` (or the `align` stage) first")


@contextmanager
def libraries_own_deprecations() -> Iterator[None]:
    """Silence transformers' ``is_gradient_checkpointing`` alias warning, which PEFT and TRL trigger from their own
    code (nothing a user can change): otherwise every adapter load and DPO reference pass adds a line to `make repro`."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def load_policy(source: str, adapter: str | Path | None = None, device: str = "cpu", training: bool = False) -> Any:
    """The base model from ``source``, or a trained policy when ``adapter`` names its folder (a LoRA adapter put on
    ``source``, or a full checkpoint loaded in its place), in eval mode on ``device``; ``training``: float32. For
    inference a LoRA adapter is merged into the weights (a plain model, equal to the adapted one up to float rounding);
    with ``training`` it stays a PEFT model."""
    from transformers import AutoModelForCausalLM

    kind = None if adapter is None else trained_folder(adapter)
    weights = str(adapter) if kind == "full" else source
    try:
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=policy_dtype(device, training))
    except OSError as exc:
        raise ConfigError(f"policy model {weights!r} could not be loaded ({exc}); give a Hugging Face id that is in "
                          "the local cache (HF_HUB_OFFLINE=1 here) or a checkpoint folder") from None
    if kind == "adapter":
        from peft import PeftModel

        with libraries_own_deprecations():
            model = PeftModel.from_pretrained(model, str(adapter))
        if not training:  # W + BA folded in once, no extra matmuls per layer: 1.06x on the demo's best-of-n
            model = model.merge_and_unload()
    return model.to(device).eval()


def chat_prompt(tokenizer: Any, prompt: str) -> str:
    """The policy's input text for a user prompt (its chat template when it has one)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)
    return prompt + "\n"
