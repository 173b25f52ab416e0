"""Full fine-tuning uses the paper's learning rate (1e-6, not LoRA's 1e-4), and the policy that is evaluated is the
trained one: on cuda the evaluation loaded bf16 weights, in which an update at lr 1e-6 mostly rounds away."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from rubriclab.align import DPOSettings, inference_precision, load_policy, policy_dtype, train_dpo
from rubriclab.settings import DPO_LEARNING_RATES
from rubriclab.testing import tiny_policy

GOOD = ["Boil the egg for nine minutes, then cool it in cold water.", "Water the plant once a week."]
BAD = ["Sorry, I cannot help with that.", "No."]


def _rows(n: int = 8) -> pd.DataFrame:
    return pd.DataFrame([{"prompt": f"How do I do task {i}?", "chosen": GOOD[i % 2], "rejected": BAD[i % 2]}
                         for i in range(n)])


def test_the_learning_rate_follows_the_mode_unless_it_is_set() -> None:
    assert DPO_LEARNING_RATES == {"lora": 1e-4, "full": 1e-6}
    assert DPOSettings.of({"mode": "full"}).dpo.lr == 1e-6
    assert DPOSettings.of({"mode": "lora"}).dpo.lr == 1e-4
    assert DPOSettings.of({"mode": "full", "learning_rate": 5e-4}).dpo.lr == 5e-4
    assert DPOSettings.of({"mode": "full"}).to_dict()["learning_rate"] == 1e-6


def _flat(model) -> np.ndarray:
    return np.concatenate([p.detach().double().cpu().numpy().ravel() for p in model.parameters()])


def test_the_evaluated_policy_differs_from_the_base_by_the_trained_update(tmp_path) -> None:
    rows = _rows()
    source = str(tiny_policy(tmp_path / "tiny", [*rows["prompt"], *GOOD, *BAD]))
    settings = DPOSettings.of({"mode": "full", "batch_size": 4, "epochs": 2, "max_length": 64, "warmup_ratio": 0.0})
    assert settings.dpo.lr == 1e-6  # the paper's full fine-tuning rate, by default
    out = train_dpo(source, rows, settings, tmp_path / "full")["out_dir"]
    base32 = _flat(load_policy(source, device="cpu"))
    true_update = _flat(load_policy(source, adapter=out, device="cpu")) - base32
    assert np.abs(true_update).max() > 0  # the training moved the weights

    # what an evaluation on cuda loads: the weights in policy_dtype("cuda"), the trained checkpoint and the base
    from transformers import AutoModelForCausalLM

    dtype = policy_dtype("cuda")
    evaluated = _flat(AutoModelForCausalLM.from_pretrained(str(out), dtype=dtype))
    base = _flat(AutoModelForCausalLM.from_pretrained(source, dtype=dtype))
    seen = evaluated - base
    cosine = seen @ true_update / (np.linalg.norm(seen) * np.linalg.norm(true_update))
    assert cosine > 0.999 and np.allclose(seen, true_update, rtol=0, atol=1e-9)

    # the failure this guards against: a bf16 copy keeps little of an update this small
    b16 = (torch.tensor(base32 + true_update).to(torch.bfloat16).double() - torch.tensor(base32).to(torch.bfloat16)
           .double()).numpy()
    assert b16 @ true_update / (np.linalg.norm(b16) * np.linalg.norm(true_update) + 1e-300) < 0.9


def test_cuda_forward_passes_run_under_bf16_autocast_and_cpu_ones_do_not() -> None:
    with inference_precision("cpu"):
        assert not torch.is_autocast_enabled()
    with inference_precision(torch.device("cpu")):
        assert not torch.is_autocast_enabled()
    if torch.cuda.is_available():  # pragma: no cover - no GPU here
        with inference_precision("cuda"):
            assert torch.is_autocast_enabled() and torch.get_autocast_gpu_dtype() == torch.bfloat16


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_weights_are_float32_for_training_and_evaluation(device: str) -> None:
    assert policy_dtype(device, training=True) == torch.float32 == policy_dtype(device, training=False)
