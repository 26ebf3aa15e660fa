"""Reproduce: transformers' Llama rotary embedding ignores partial_rotary_factor for the default rope
type, while the same family's linear rope (at factor 1, the same frequencies) reads it.

    python benchmarks/conform/transformers_llama_partial_default.py

The exact answer (posenc's reading, and what the linear rope gives): a head of 32 features with
partial_rotary_factor 0.5 rotates 16 features, 8 pairs, with theta_i = 10000 ** (-2i / 16). The default
rope builds 16 pairs over the whole head (theta_i = 10000 ** (-2i / 32)) instead.
"""

from __future__ import annotations

from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from posenc.hf import rotary_kwargs_from_hf


def main() -> None:
    fields = {"head_dim": 32, "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 4096}
    for rope in (
        {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        {"rope_type": "linear", "factor": 1.0, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    ):
        config = LlamaConfig(**fields, rope_parameters=dict(rope))
        pairs = LlamaRotaryEmbedding(config).inv_freq.shape[0]
        exact = rotary_kwargs_from_hf({**fields, "rope_parameters": rope})["rotary_dim"] // 2
        print(f"{rope['rope_type']:>8}: transformers builds {pairs} pairs, the config asks for {exact}")


if __name__ == "__main__":
    main()
