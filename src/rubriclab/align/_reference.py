"""The DPO reference model's log-probabilities, each distinct sequence evaluated once for all trainings of a stage.

TRL's DPOTrainer evaluates the reference (with LoRA: the policy with its adapter disabled) on every batch of every
training: a forward pass of about a third of a step's cost on the CPU. The align stage trains up to six policies
(two rubrics × three regimes) on overlapping pairs from one base model, so most of those passes repeat: the demo's
21 steps evaluated 84 reference sequences, 24 of them distinct. ``shared_reference_trainer`` gives TRL's own
precomputation path (``precompute_ref_log_probs``: the values become dataset columns, the batch's reference pass is
skipped) a memo keyed by the tokens TRL would evaluate (after its truncation to ``max_length``), so a sequence that
an earlier training of the stage evaluated is not evaluated again. Each pair is evaluated alone (its chosen and
rejected sequences padded to each other only), so a sequence's value does not depend on which training met it first.
With ``ld_alpha`` (LD-DPO: a sequence's value depends on its partner's length) TRL's own precomputation runs instead.
"""

from __future__ import annotations

from typing import Any

Key = tuple[tuple[int, ...], tuple[int, ...]]  # (input ids, completion mask) of one sequence, unpadded


def _sequence_keys(batch: dict[str, Any]) -> list[Key]:
    keys = []
    for ids, attn, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist(),
                               batch["completion_mask"].tolist()):
        n = sum(attn)  # right padding: the first n positions are the sequence
        keys.append((tuple(ids[:n]), tuple(mask[:n])))
    return keys


def shared_reference_trainer(memo: dict[Key, float]) -> type:
    """A DPOTrainer subclass whose reference log-probabilities come from ``memo`` (filled as it goes). Train it with
    ``precompute_ref_log_probs=True``; ``memo`` must only ever hold values of the one reference model (and DPO
    settings) it is used with."""
    from trl import DPOTrainer

    class SharedReferenceDPOTrainer(DPOTrainer):
        reference_passes = 0  # pairs this trainer evaluated (the others came from the memo)

        def _precompute_ref_logps(self, dataset: Any, name: str, batch_size: int) -> Any:
            if self.ld_alpha is not None:  # a value per (chosen, rejected) pair, not per sequence: nothing to share
                return super()._precompute_ref_logps(dataset, name, batch_size)
            model = self.ref_model or self.model
            device = self.accelerator.device
            chosen, rejected = [], []
            for example in dataset:
                batch = self.data_collator([example])  # rows: [chosen, rejected], truncated as in training
                keys = _sequence_keys(batch)
                if not all(k in memo for k in keys):  # compute_ref_log_probs runs without grad, adapter off
                    values = self.compute_ref_log_probs(model, {k: v.to(device) for k, v in batch.items()})
                    memo.update((key, value.item()) for key, value in zip(keys, values))
                    self.reference_passes += 1
                chosen.append(memo[keys[0]])
                rejected.append(memo[keys[1]])
            return dataset.add_column("ref_chosen_logps", chosen).add_column("ref_rejected_logps", rejected)

    return SharedReferenceDPOTrainer
