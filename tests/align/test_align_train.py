"""DPO training on a tiny random-initialised policy: the pipeline trains (loss falls, the chosen-vs-rejected
margin rises on the training pairs), flipping the labels flips the learned direction, step metrics reach a
nested MLflow run, and the settings are validated."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from mlflow import MlflowClient

from rubriclab.align import DPOSettings, dpo_dataset, load_policy, load_tokenizer, preference_margins, train_dpo
from rubriclab.errors import ConfigError, InputError
from rubriclab.testing import tiny_policy
from rubriclab.tracking import stage_run, tracking_uri

GOOD = ["Boil the egg for nine minutes, then cool it in cold water.",
        "Mix flour and water, knead it, then bake for twenty minutes.",
        "Water the plant once a week and keep it in indirect light."]
BAD = ["Sorry, I cannot help with that.", "No.", "I do not know."]


def _rows(n: int = 8) -> pd.DataFrame:
    return pd.DataFrame([{"prompt": f"How do I do task {i}?", "chosen": GOOD[i % 3], "rejected": BAD[i % 3]}
                         for i in range(n)])


SETTINGS = DPOSettings.of({"mode": "lora", "learning_rate": 5e-3, "batch_size": 4, "epochs": 4, "max_length": 64,
                           "warmup_ratio": 0.0,
                           "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}})


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    rows = _rows()
    return str(tiny_policy(tmp_path_factory.mktemp("policy") / "tiny", [*rows["prompt"], *GOOD, *BAD]))


@pytest.fixture(scope="module")
def trained(policy, tmp_path_factory):
    out = tmp_path_factory.mktemp("trained")
    rows = _rows()
    flipped = rows.rename(columns={"chosen": "rejected", "rejected": "chosen"})
    return {
        "rows": rows,
        "plain": train_dpo(policy, rows, SETTINGS, out / "plain"),
        "flipped": train_dpo(policy, flipped, SETTINGS, out / "flipped"),
        "before": preference_margins(policy, rows),
    }


def test_dpo_loss_falls_and_margin_rises(trained):
    h = trained["plain"]["history"]
    assert len(h) == SETTINGS.total_steps(8) == 8 == trained["plain"]["steps"]
    assert h["loss"].iloc[0] == pytest.approx(np.log(2), abs=1e-3)  # policy == reference at step 1
    assert h["loss"].iloc[-1] < h["loss"].iloc[0] - 0.02
    assert h["rewards/margins"].iloc[-1] > h["rewards/margins"].iloc[0]
    assert (trained["plain"]["out_dir"] / "adapter_config.json").exists()


def test_margin_on_training_pairs_rises_after_training(policy, trained):
    after = preference_margins(policy, trained["rows"], adapter=trained["plain"]["out_dir"])
    assert (after > trained["before"]).all()


def test_flipped_labels_flip_the_learned_direction(policy, trained):
    before = trained["before"]
    plain = preference_margins(policy, trained["rows"], adapter=trained["plain"]["out_dir"]) - before
    flipped = preference_margins(policy, trained["rows"], adapter=trained["flipped"]["out_dir"]) - before
    assert (plain > 0).all() and (flipped < 0).all()
    assert np.sign(plain.mean()) == -np.sign(flipped.mean())


def test_training_and_loading_an_adapter_print_no_checkpointing_deprecation(policy, tmp_path, recwarn):
    """transformers 5 renamed gradient checkpointing to activation checkpointing: our DPOConfig uses the new name, and
    the old alias PEFT and TRL read themselves is silenced around them (each was a line in every `make repro` log)."""
    settings = DPOSettings.of({"mode": "lora", "batch_size": 2, "epochs": 1, "max_length": 64,
                               "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}})
    res = train_dpo(policy, _rows(2), settings, tmp_path / "lora")
    preference_margins(policy, _rows(2), adapter=res["out_dir"])
    said = [str(w.message) for w in recwarn if "checkpointing" in str(w.message)]
    assert not said, said
    with pytest.warns(FutureWarning, match="is_gradient_checkpointing"):
        assert load_policy(policy).is_gradient_checkpointing is False  # the alias still warns outside: nothing global changed


def test_the_checkpointing_switch_takes_the_name_the_installed_transformers_has():
    from dataclasses import make_dataclass

    from rubriclab.align._train import _checkpointing_arg

    assert _checkpointing_arg(make_dataclass("Args4", [("gradient_checkpointing", bool)])) == "gradient_checkpointing"
    both = make_dataclass("Args5", [("gradient_checkpointing", bool), ("activation_checkpointing", bool)])
    assert _checkpointing_arg(both) == "activation_checkpointing"


def test_step_metrics_reach_a_nested_mlflow_run(policy, tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with stage_run("align", "align@t", {}, tmp_path, experiment="t") as run, run.trial("dpo seed@bench") as child:
        train_dpo(policy, _rows(4), DPOSettings.of({"mode": "full", "learning_rate": 1e-3,
                                                    "batch_size": 2, "epochs": 2, "max_length": 64}), tmp_path / "full", run=child)
    client = MlflowClient(tracking_uri(tmp_path))
    got = client.get_run(child.run_id)
    assert got.data.tags["mlflow.parentRunId"] == run.run_id
    losses = client.get_metric_history(child.run_id, "loss")
    assert [m.step for m in losses] == [1, 2, 3, 4]
    assert (tmp_path / "full" / "config.json").exists()  # a full fine-tune saves the whole model


class _Stop(Exception):
    """Raised by the stand-in trainer once it has seen what train_dpo built."""


@pytest.mark.parametrize("device, bf16", [("cpu", False), ("cuda", True)])
def test_training_keeps_float32_master_weights_on_every_device(policy, tmp_path, monkeypatch, device, bf16):
    """AdamW steps at lr 1e-6 mostly round away in bf16 weights: the policy is trained from float32 weights, with
    bf16 autocast (TrainingArguments bf16=True over float32 parameters) on cuda. Checked without a GPU: the device
    is forced, the move to it is skipped and the trainer is a stand-in that records what it was given."""
    import transformers

    from rubriclab.align import _train

    seen = {}

    def trainer(model, args, **kwargs):
        seen.update(dtypes={p.dtype for p in model.parameters()}, bf16=args.bf16, use_cpu=args.use_cpu)
        raise _Stop

    monkeypatch.setattr(_train, "pick_device", lambda _: device)
    monkeypatch.setattr(transformers.PreTrainedModel, "to", lambda self, *a, **k: self)
    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    monkeypatch.setattr(_train, "shared_reference_trainer", lambda memo: trainer)  # the DPOTrainer subclass
    with pytest.raises(_Stop):
        train_dpo(policy, _rows(2), SETTINGS, tmp_path / "a")
    assert seen == {"dtypes": {torch.float32}, "bf16": bf16, "use_cpu": device == "cpu"}


def test_inference_and_training_load_float32_weights_on_cuda_too(policy, monkeypatch):
    """Evaluation on cuda loads float32 weights (bf16 autocast does the compute): a bf16 copy would round a small
    trained update away (tests/align/test_align_precision.py)."""
    import transformers

    monkeypatch.setattr(transformers.PreTrainedModel, "to", lambda self, *a, **k: self)
    dtypes = {(device, training): next(load_policy(policy, device=device, training=training).parameters()).dtype
              for device in ("cpu", "cuda") for training in (False, True)}
    assert dtypes == {("cpu", False): torch.float32, ("cpu", True): torch.float32,
                      ("cuda", False): torch.float32, ("cuda", True): torch.float32}


def test_conversational_format_uses_the_chat_template(policy):
    ds = dpo_dataset(_rows(2), load_tokenizer(policy))
    assert ds[0]["prompt"] == [{"role": "user", "content": "How do I do task 0?"}]
    assert ds[0]["chosen"][0]["role"] == "assistant"


def test_settings_are_validated():
    with pytest.raises(ConfigError, match=r"align\.dpo\.mode: got 'qlora'; expected one of lora, full"):
        DPOSettings.of({"mode": "qlora"})
    with pytest.raises(ConfigError, match="beta"):
        DPOSettings.of({"beta": 0})
    with pytest.raises(ConfigError, match=r"align\.dpo\.warmup: unknown key; expected one of mode, beta"):
        DPOSettings.of({"warmup": 3}, 0)
    with pytest.raises(ConfigError, match=r"align\.dpo\.lora\.rank: unknown key"):
        DPOSettings.of({"lora": {"rank": 8}}, 0)
    s = DPOSettings.of({"lora": {"r": 4, "target_modules": ["q_proj"]}, "batch_size": 3}, seed=5)
    assert (s.dpo.lora.r, s.dpo.lora.target_modules, s.seed) == (4, ["q_proj"], 5)
    assert s.total_steps(10) == 4 and DPOSettings.of({"max_steps": 7}).total_steps(10) == 7
    # settings.json and the MLflow trial params: flat, in this order (as before the section was passed down)
    assert list(s.to_dict().items()) == [
        ("mode", "lora"), ("beta", 0.1), ("loss_type", "sigmoid"), ("epochs", 1.0), ("max_steps", None),
        ("learning_rate", 1e-4), ("batch_size", 3), ("grad_accum", 1), ("scheduler", "cosine"),
        ("warmup_ratio", 0.03), ("max_length", 2048), ("max_grad_norm", 1.0), ("lora_r", 4), ("lora_alpha", 32),
        ("lora_dropout", 0.05), ("target_modules", ["q_proj"]), ("device", "auto"), ("seed", 5), ("extra", {})]


def test_no_training_pair_is_a_clear_error(policy):
    tok = load_tokenizer(policy)
    with pytest.raises(InputError, match="no training pair"):
        dpo_dataset(pd.DataFrame(columns=["prompt", "chosen", "rejected"]), tok)
    with pytest.raises(InputError, match=r"lack column\(s\) \['rejected'\]"):
        dpo_dataset(_rows(2).drop(columns=["rejected"]), tok)


def test_sequence_logprobs_evaluate_each_distinct_sequence_once_in_input_order(policy):
    """Batched by length, deduplicated and memoised, the log-probabilities are each sequence's own (as evaluated
    alone), returned in the order asked; a memo of the same model's values spares those sequences."""
    from rubriclab.align import sequence_logprobs

    tokenizer, model = load_tokenizer(policy), load_policy(policy)
    prompts = ["How do I do task 0?", "How do I do task 1?", "How do I do task 0?", "How do I do task 2?"]
    responses = [GOOD[0], BAD[1], GOOD[0], GOOD[2] + " " + GOOD[1]]
    alone = np.array([sequence_logprobs(model, tokenizer, [p], [r])[0] for p, r in zip(prompts, responses)])
    forwards = []
    hook = model.register_forward_hook(lambda m, args, kwargs_out: forwards.append(1))
    try:
        memo: dict = {}
        together = sequence_logprobs(model, tokenizer, prompts, responses, batch_size=3, memo=memo)
        assert len(forwards) == 1 and len(memo) == 3  # three distinct sequences: one batch of 3
        assert np.allclose(together, alone, atol=1e-4) and together[0] == together[2]
        again = sequence_logprobs(model, tokenizer, prompts[::-1], responses[::-1], memo=memo)
        assert len(forwards) == 1 and np.array_equal(again, together[::-1])  # all from the memo
    finally:
        hook.remove()


def test_an_adapter_loaded_for_inference_is_merged_and_computes_the_adapted_model(policy, trained):
    from peft import PeftModel

    adapter = trained["plain"]["out_dir"]
    merged = load_policy(policy, adapter=adapter)
    adapted = load_policy(policy, adapter=adapter, training=True).eval()  # training keeps the PEFT wrapper
    assert not isinstance(merged, PeftModel) and isinstance(adapted, PeftModel)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    ids = load_tokenizer(policy)("How do I do task 1? " + GOOD[1], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        got, want = merged(ids).logits, adapted(ids).logits
        base = load_policy(policy)(ids).logits
    assert torch.allclose(got, want, atol=1e-4)  # the merge is the adapted model, up to float rounding
    assert not torch.allclose(base, want, atol=1e-3)  # and the adapter moved it: the comparison can fail


def test_trainings_sharing_a_reference_memo_evaluate_each_pair_once_and_train_the_same(policy, trained, tmp_path):
    rows = trained["rows"]
    memo: dict = {}
    first = train_dpo(policy, rows.iloc[:4], SETTINGS, tmp_path / "first", reference_memo=memo)
    assert first["reference_passes"] == 4 and len(memo) == 8  # each pair once: its chosen and rejected sequence
    flipped = rows.rename(columns={"chosen": "rejected", "rejected": "chosen"})
    second = train_dpo(policy, flipped, SETTINGS, tmp_path / "second", reference_memo=memo)
    assert second["reference_passes"] == 4 and len(memo) == 16  # pairs 0-3 (swapped roles) came from the memo
    # the same losses as the flipped training with its own memo: the memo's values went to the right sequences
    np.testing.assert_allclose(second["history"]["loss"], trained["flipped"]["history"]["loss"], atol=1e-5)


def test_precomputed_reference_values_train_as_trls_own_reference_pass(policy, trained, tmp_path):
    inline = DPOSettings(SETTINGS.dpo, SETTINGS.seed, {"precompute_ref_log_probs": False})
    res = train_dpo(policy, trained["rows"], inline, tmp_path / "inline")
    assert res["reference_passes"] == 0  # TRL evaluated the reference inside each step
    np.testing.assert_allclose(res["history"]["loss"], trained["plain"]["history"]["loss"], atol=1e-5)
    np.testing.assert_allclose(res["history"]["rewards/margins"], trained["plain"]["history"]["rewards/margins"],
                               atol=1e-5)


def test_ld_dpo_reference_values_are_not_shared(policy, trained, tmp_path):
    memo: dict = {}
    ld = DPOSettings(SETTINGS.dpo, SETTINGS.seed, {"ld_alpha": 0.5})  # a value depends on the partner's length
    res = train_dpo(policy, trained["rows"].iloc[:2], ld, tmp_path / "ld", reference_memo=memo)
    assert memo == {} and res["reference_passes"] == 0  # TRL's own precomputation ran
    assert res["steps"] == SETTINGS.total_steps(2) and np.isfinite(res["history"]["loss"]).all()
