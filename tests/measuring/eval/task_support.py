"""Tokenizers and checkpoints the task tests share: a byte-level tokenizer (a lab export's), a BPE
tokenizer trained offline on standard-library text, and a tiny random Llama saved with it."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from posenc.measuring.corpus import stdlib_root

#: a chat template of the usual shape: a user turn, then the assistant's opening
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def sample_text(files=("argparse.py", "textwrap.py", "dataclasses.py", "typing.py")) -> str:
    root = stdlib_root()
    return "\n\n".join((root / n).read_text(encoding="utf-8") for n in files)


def bpe_tokenizer(text: str, vocab: int = 400, chat: bool = False):
    """A byte-level BPE ``PreTrainedTokenizerFast`` of ``vocab`` tokens trained on ``text`` (offline),
    with ``<s>`` first by default (as Llama's) and ``</s>``; with ``chat``, a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([text[i : i + 4000] for i in range(0, len(text), 4000)], trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


def bpe_llama(folder: Path, text: Optional[str] = None, chat: bool = False, trained: int = 128) -> Path:
    """A tiny random Llama with a BPE tokenizer, saved at ``folder`` as a checkpoint eval loads."""
    from posenc.testing import tiny_model_of_type

    tokenizer = bpe_tokenizer(text or sample_text(), chat=chat)
    model = tiny_model_of_type("llama", vocab_size=len(tokenizer), max_position_embeddings=trained)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def byte_tokenizer():
    """The lab export's byte-level tokenizer (token ``b`` is byte ``b``), without a model."""
    from posenc.measuring.lab.export import byte_tokenizer as make

    return make()


def encode_all(tokenizer, text: str) -> List[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
