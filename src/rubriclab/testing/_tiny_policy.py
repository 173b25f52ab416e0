"""A tiny random-initialised causal LM with a byte-level BPE tokenizer and a chat template, saved as a plain
Hugging Face checkpoint: the align tests (and users trying the DPO path) train it in seconds, offline."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_policy(path: str | Path, corpus: Sequence[str] = (), *, seed: int = 0, hidden: int = 32, layers: int = 2,
                vocab_size: int = 400, reward_head: bool = False) -> Path:
    """Write a tiny Llama (``hidden``, ``layers``) and its tokenizer to ``path``; ``reward_head``: a sequence-
    classification model with one logit (a stand-in reward model)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification, PreTrainedTokenizerFast

    path = Path(path)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    text = list(corpus) or ["user assistant the a answer question help please sorry cannot"]
    bpe.train_from_iterator(text + ["user", "assistant"], trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=None, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", unk_token=None)
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         bos_token_id=None, tie_word_embeddings=True, num_labels=1)
    model = (LlamaForSequenceClassification if reward_head else LlamaForCausalLM)(config)
    if getattr(model, "generation_config", None) is not None:  # a sequence-classification model has none
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
