"""llama.cpp runs a YaRN Llama whose config says ``attention_factor: 1.0`` with ``0.1 ln(factor) + 1``.

In a venv with ``llama-cpp-python`` (built from source), ``transformers``, ``sentencepiece`` and the
``gguf`` package of the same llama.cpp tree::

    python benchmarks/conform_engines/repro_llama_cpp_yarn_attention_factor.py LLAMA_CPP_TREE/convert_hf_to_gguf.py

It writes one tiny random Llama (2 layers, head_dim 32) with ``rope_parameters`` ``{"rope_type": "yarn",
"factor": 8, "original_max_position_embeddings": 256, "attention_factor": 1.0}`` and a SentencePiece
tokenizer trained here on standard-library source, converts it to float32 GGUF with llama.cpp's own
converter, and prints the largest logit difference over 1,500 tokens between llama.cpp (float32 key/value
cache) and transformers in float64 (eager attention) with the config as written (attention factor 1.0),
and with the attention factor set to ``0.1 ln 8 + 1 = 1.2079``. Exit status 1 when llama.cpp is closer to
the second. No posenc needed: the reference is transformers' own YaRN (``_compute_yarn_parameters`` returns
an explicit ``attention_factor`` unchanged).
"""

from __future__ import annotations

import difflib
import inspect
import math
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

TOKENS = 1500
ROPE = {"rope_theta": 10000.0, "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 256}


def model_with(attention_factor: float, vocab: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        rope_parameters={**ROPE, "attention_factor": attention_factor},
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    torch.manual_seed(0)  # same weights for every attention factor
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    return model.eval()


def main(converter: str) -> int:
    import sentencepiece as spm
    from llama_cpp import GGML_TYPE_F32, Llama

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "text.txt").write_text(inspect.getsource(difflib))
        spm.SentencePieceTrainer.train(
            input=str(root / "text.txt"), model_prefix=str(root / "tokenizer"), vocab_size=512,
            model_type="unigram", bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2,
        )  # fmt: skip
        sp = spm.SentencePieceProcessor(model_file=str(root / "tokenizer.model"))
        ids = (sp.encode(inspect.getsource(difflib)) * 4)[:TOKENS]
        model = model_with(1.0, sp.get_piece_size())
        model.save_pretrained(root / "hf")
        (root / "hf" / "tokenizer.model").write_bytes((root / "tokenizer.model").read_bytes())
        gguf = root / "model-f32.gguf"
        subprocess.run([sys.executable, converter, str(root / "hf"), "--outfile", str(gguf), "--outtype", "f32"],
                       check=True, capture_output=True)  # fmt: skip
        llm = Llama(model_path=str(gguf), n_ctx=2048, n_batch=512, logits_all=True,
                    type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False)  # fmt: skip
        llm.eval(ids)
        got = np.array(llm.scores[:TOKENS], dtype=np.float64)
    errors = {}
    for factor in (1.0, 0.1 * math.log(8.0) + 1.0):
        with torch.no_grad():
            want = model_with(factor, sp.get_piece_size()).double()(torch.tensor([ids])).logits[0].numpy()
        errors[factor] = float(np.abs(got - want).max())
        print(f"llama.cpp vs float64 transformers at attention_factor {factor:.4f}: max |diff| {errors[factor]:.3e}")
    configured, misread = errors.values()
    print("llama.cpp uses 0.1*ln(8)+1 = 1.2079" if misread < configured else "llama.cpp uses the configured 1.0")
    return 1 if misread < configured else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
