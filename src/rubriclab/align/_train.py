"""DPO with TRL's DPOTrainer on judge-labelled pairs, and the learned preference on those pairs.

Step metrics (loss, rewards/margins, rewards/accuracies, learning rate, …) go to a nested MLflow run
through a TrainerCallback on our RunHandle (thread-safe, no global MLflow state) and into a history
table; the adapter (LoRA) or the full model is saved to ``out_dir``.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.align._policy import (
    chat_prompt,
    inference_precision,
    libraries_own_deprecations,
    load_policy,
    load_tokenizer,
    pick_device,
    require_align,
)
from rubriclab.align._reference import shared_reference_trainer
from rubriclab.atomic import write_json, write_text
from rubriclab.errors import InputError
from rubriclab.paths import display_path
from rubriclab.settings import Data, Dpo, Params


@dataclass(frozen=True)
class DPOSettings:
    """One training's settings: ``align.dpo`` (every default, range and the paper's value (seed 003 Table 5) in
    rubriclab.settings.Dpo), the data seed, and extra DPOConfig keywords."""

    dpo: Dpo = field(default_factory=Dpo)
    seed: int = Data().seed
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, dpo: Dpo | dict[str, Any] | None = None, seed: int = Data().seed) -> DPOSettings:
        """The ``align.dpo`` section, typed or a mapping validated as params.yaml's (``{"lora": {"r": 8}}``)."""
        return cls(dpo if isinstance(dpo, Dpo) else Params.of({"align": {"dpo": dict(dpo or {})}}).align.dpo, seed)

    def total_steps(self, n_pairs: int) -> int:
        d = self.dpo
        if d.max_steps:
            return int(d.max_steps)
        return max(1, math.ceil(math.ceil(n_pairs / (d.batch_size * d.grad_accum)) * d.epochs))

    def to_dict(self) -> dict[str, Any]:
        """Flat, in the order settings.json and the MLflow params have always had."""
        d, lora = self.dpo.model_dump(exclude={"lora", "device"}), self.dpo.lora
        return {**d, "learning_rate": self.dpo.lr, "lora_r": lora.r, "lora_alpha": lora.alpha, "lora_dropout": lora.dropout,
                "target_modules": list(lora.target_modules), "device": self.dpo.device, "seed": self.seed,
                "extra": dict(self.extra)}


def dpo_dataset(rows: pd.DataFrame, tokenizer: Any) -> Any:
    """TRL's preference format: conversational (chat template) when the tokenizer has one, else plain text."""
    from datasets import Dataset

    missing = {"prompt", "chosen", "rejected"} - set(rows.columns)
    if missing:
        raise InputError(f"training rows lack column(s) {sorted(missing)}", field="rows",
                         expected="columns prompt, chosen, rejected")
    if not len(rows):
        raise InputError("no training pair (every label was a tie or failed)", field="rows",
                         expected="at least one labelled pair")
    if getattr(tokenizer, "chat_template", None):
        data = [{"prompt": [{"role": "user", "content": str(r.prompt)}],
                 "chosen": [{"role": "assistant", "content": str(r.chosen)}],
                 "rejected": [{"role": "assistant", "content": str(r.rejected)}]} for r in rows.itertuples()]
    else:
        data = [{"prompt": str(r.prompt) + "\n", "chosen": str(r.chosen), "rejected": str(r.rejected)}
                for r in rows.itertuples()]
    return Dataset.from_list(data)


def _callback(run: Any, history: list[dict[str, Any]]) -> Any:
    from transformers import TrainerCallback

    class StepLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001 - TrainerCallback API
            numbers = {k: float(v) for k, v in (logs or {}).items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}
            if not numbers:
                return
            history.append({"step": int(state.global_step), **numbers})
            if run is not None:
                run.log_metrics(numbers, step=int(state.global_step))

    return StepLog()


def _checkpointing_arg(config_class: Any) -> str:
    """transformers 5 renamed ``gradient_checkpointing`` to ``activation_checkpointing`` (the old name warns); the
    project allows transformers 4.45 too, where only the old name exists."""
    fields = getattr(config_class, "__dataclass_fields__", {})
    return "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"


def dpo_config(settings: DPOSettings, device: str, steps: int, work: Path, progress: bool = False) -> Any:
    """TRL's DPOConfig for ``settings``. On cuda ``bf16=True`` over the float32 weights ``load_policy(training=True)``
    gives is mixed precision (bf16 autocast, float32 optimizer updates); the cpu trains in float32."""
    from trl import DPOConfig

    d = settings.dpo
    return DPOConfig(
        output_dir=str(work), beta=d.beta, loss_type=[d.loss_type],
        num_train_epochs=float(d.epochs), max_steps=int(d.max_steps or -1),
        per_device_train_batch_size=d.batch_size, gradient_accumulation_steps=d.grad_accum,
        learning_rate=d.lr, lr_scheduler_type=d.scheduler,
        warmup_steps=int(math.ceil(d.warmup_ratio * steps)),  # DPOConfig here takes steps, not a ratio
        max_length=d.max_length, max_grad_norm=d.max_grad_norm, logging_steps=1,
        report_to=[], save_strategy="no", seed=settings.seed, data_seed=settings.seed,
        use_cpu=device == "cpu", bf16=device == "cuda", **{_checkpointing_arg(DPOConfig): False},
        disable_tqdm=not progress,
        # the reference's values once per distinct sequence (align._reference), unless ``extra`` says otherwise
        **{"precompute_ref_log_probs": True, **settings.extra})


def train_dpo(source: str, rows: pd.DataFrame, settings: DPOSettings, out_dir: str | Path, *,
              run: Any = None, progress: bool = False, reference_memo: dict | None = None) -> dict[str, Any]:
    """Train one DPO policy from ``source`` on ``rows`` (prompt, chosen, rejected); save it to ``out_dir``.

    Returns ``{"history": DataFrame(step, loss, rewards/margins, …), "out_dir", "steps", "seconds",
    "seconds_per_step", "device", "n_pairs", "reference_passes"}``. ``run``: an MLflow RunHandle for the step
    metrics. ``reference_memo``: the reference log-probabilities of earlier trainings from the same ``source`` with
    the same settings (filled here); a pair whose sequences it holds is not evaluated again (``reference_passes``
    counts the pairs that were)."""
    require_align()
    import torch

    device = pick_device(settings.dpo.device)
    torch.manual_seed(settings.seed)
    tokenizer = load_tokenizer(source)
    dataset = dpo_dataset(rows, tokenizer)
    steps = settings.total_steps(len(dataset))
    out_dir = Path(out_dir)
    work = out_dir.with_name(out_dir.name + ".trainer")
    config = dpo_config(settings, device, steps, work, progress)
    peft_config = None
    if settings.dpo.mode == "lora":
        from peft import LoraConfig

        lora = settings.dpo.lora
        peft_config = LoraConfig(r=lora.r, lora_alpha=lora.alpha,
                                 lora_dropout=lora.dropout, target_modules=list(lora.target_modules),
                                 task_type="CAUSAL_LM")
    model = load_policy(source, device=device, training=True).train()  # float32 master weights
    history: list[dict[str, Any]] = []
    trainer_class = shared_reference_trainer({} if reference_memo is None else reference_memo)
    with libraries_own_deprecations():
        trainer = trainer_class(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                                peft_config=peft_config, callbacks=[_callback(run, history)])
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    portable_checkpoint(tmp, source, config)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)  # a killed run never leaves half an adapter under the output name
    shutil.rmtree(work, ignore_errors=True)
    frame = pd.DataFrame([h for h in history if "loss" in h])
    done = int(trainer.state.global_step)
    return {"history": frame, "out_dir": out_dir, "steps": done, "seconds": seconds,
            "seconds_per_step": seconds / max(done, 1), "device": device, "n_pairs": len(dataset),
            "reference_passes": trainer.reference_passes}


def portable_checkpoint(folder: Path, source: str, config: Any) -> None:
    """Make a saved checkpoint the same bytes in any clone: the base model's absolute path (PEFT writes it into
    ``adapter_config.json`` and the model card) becomes the path relative to the working folder; LoRA
    ``target_modules`` (a set, in hash order) are sorted; ``training_args.bin`` (a pickle holding the
    absolute output folder) is replaced by ``training_args.json`` without the folder paths."""
    shown = display_path(source) if Path(source).exists() else source
    absolute = {str(source), str(Path(source).resolve())} - {shown} if Path(source).exists() else set()
    for path in [*folder.glob("*.json"), *folder.glob("*.md")]:
        text = path.read_text(encoding="utf-8")
        for a in sorted(absolute, key=len, reverse=True):
            text = text.replace(a, shown)
        if path.name == "adapter_config.json":
            cfg = json.loads(text)
            if isinstance(cfg.get("target_modules"), list):
                cfg["target_modules"] = sorted(cfg["target_modules"])
            text = json.dumps(cfg, indent=2, sort_keys=True) + "\n"
        write_text(path, text)
    (folder / "training_args.bin").unlink(missing_ok=True)
    args = json.loads(config.to_json_string())
    for key in ("output_dir", "logging_dir"):
        args.pop(key, None)
    write_json(folder / "training_args.json", args, indent=2, sort_keys=True)


def sequence_logprobs(model: Any, tokenizer: Any, prompts: Sequence[str], responses: Sequence[str],
                      batch_size: int = 8, memo: dict[tuple[str, str], float] | None = None) -> np.ndarray:
    """Σ log π(response tokens | chat-formatted prompt) per (prompt, response).

    Each distinct (prompt, response) is evaluated once, in batches of similar length (less padding); ``memo``
    (the same model's earlier values, filled in here) spares the ones already evaluated."""
    import torch

    device = next(model.parameters()).device
    memo = {} if memo is None else memo
    pairs = [(str(p), str(r)) for p, r in zip(prompts, responses)]
    encoded: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    for p, r in dict.fromkeys(k for k in pairs if k not in memo):
        prefix = tokenizer(chat_prompt(tokenizer, p), add_special_tokens=False)["input_ids"]
        body = tokenizer(r + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
        encoded[(p, r)] = (prefix + body, [0] * len(prefix) + [1] * len(body))
    todo = sorted(encoded, key=lambda k: len(encoded[k][0]))  # stable: equal lengths keep their first-seen order
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for i in range(0, len(todo), batch_size):
        keys = todo[i:i + batch_size]
        ids, masks = [encoded[k][0] for k in keys], [encoded[k][1] for k in keys]
        width = max(map(len, ids))
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids], device=device)
        attn = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids], device=device)
        target = torch.tensor([m + [0] * (width - len(m)) for m in masks], device=device)
        with torch.no_grad(), inference_precision(device):
            logits = model(input_ids=input_ids, attention_mask=attn).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        memo.update(zip(keys, (logp * target[:, 1:]).sum(-1).cpu().numpy().tolist()))
    return np.array([memo[k] for k in pairs], dtype=float)


def preference_margins(source: str, rows: pd.DataFrame, adapter: str | Path | None = None,
                       device: str = "cpu", memo: dict[tuple[str, str], float] | None = None) -> np.ndarray:
    """log π(chosen|x) − log π(rejected|x) per row, for the base policy or the policy with ``adapter``.

    The DPO implicit reward margin on a pair is β × (this for the trained policy − this for the reference).
    ``memo``: the same policy's sequence log-probabilities from an earlier call (``sequence_logprobs``)."""
    tokenizer = load_tokenizer(source)
    model = load_policy(source, adapter=adapter, device=device)
    prompts = rows["prompt"].astype(str).tolist()
    both = sequence_logprobs(model, tokenizer, prompts + prompts,
                             rows["chosen"].astype(str).tolist() + rows["rejected"].astype(str).tolist(), memo=memo)
    return both[: len(prompts)] - both[len(prompts):]
