"""Peak GPU memory of one ``posenc eval`` forward against the command's estimate.

    PYTHONPATH=src python benchmarks/eval_memory_gpu.py          # on a CUDA machine

A Llama-3.1-8B-shaped model (hidden 4096, MLP 14336, 32 heads, 8 key-value heads, vocabulary 128256)
with 4 of its 32 layers, random bfloat16 weights, ``sdpa`` attention: the plan holds one layer's
activations at a time, so the peak beside the weights does not depend on the number of layers. Each
length reads 64k tokens per forward (``rows = 65536 / length``), as ``posenc eval --batch-size 1``
does for lengths up to 64k. Prints one JSON line per length: the measured peak
(``torch.cuda.max_memory_allocated`` above the allocation before the forward) and
:func:`posenc.measuring.eval.cli.estimate_bytes`.
"""

from __future__ import annotations

import json
import time

import torch


def main() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from posenc.measuring.eval import measure
    from posenc.measuring.eval.cli import estimate_bytes

    widths = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8)
    config = LlamaConfig(**widths, num_hidden_layers=4, vocab_size=128256, max_position_embeddings=131072)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    for length in (8192, 16384, 32768, 65536):
        rows = 65536 // length
        ids = torch.randint(0, config.vocab_size, (rows, length + 1), device="cuda")
        with torch.no_grad():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            start = time.time()
            measure.causal_lm_nats(model, ids[:, :-1], ids[:, 1:])
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - before
        estimate = estimate_bytes(model.config, rows, length, 2, "cuda")
        row = {
            "length": length,
            "rows": rows,
            "attention": model.config._attn_implementation,
            "peak_gib": round(peak / 2**30, 3),
            "estimate_gib": round(estimate / 2**30, 3),
            "seconds": round(time.time() - start, 2),
            "torch": torch.__version__,
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
