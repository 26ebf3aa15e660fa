"""How much memory one forward pass of ``posenc eval`` takes, and how much the device has: lengths
whose pass would not fit are skipped before anything runs (``tests/measuring/eval/test_eval_memory.py`` holds the
estimate between the measured peak and three times it)."""

from __future__ import annotations

import os
from typing import Optional


def available_bytes(device, limit_gb: Optional[float]) -> int:
    """Memory the evaluation may use on ``device`` besides the loaded weights."""
    import torch

    if limit_gb is not None:
        return int(limit_gb * 2**30)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


#: attention implementations of transformers that never hold a (length x length) score matrix
FUSED_ATTENTION = ("flash_attention_2", "flash_attention_3", "flex_attention", "paged_attention")


def estimate_bytes(
    config,
    rows: int,
    length: int,
    element: int,
    device_type: str,
    *,
    chunk: int = 1024,
    attention: Optional[str] = None,
    float16: Optional[bool] = None,
) -> int:
    """Peak memory of one forward pass of ``rows`` sequences of ``length`` tokens, besides the weights.

    Hidden states and MLP activations of one layer at a time (no cache, no gradients), the float32
    logits of one chunk of the output head, and the attention scores where the backend holds them:
    ``eager`` attention (transformers' ``attn_implementation``) holds each layer's
    ``(rows, heads, length, length)`` scores, their float32 softmax and its cast back; ``sdpa`` on CUDA,
    and on CPU in float32 and bfloat16, runs PyTorch's fused kernels, which never do (CPU float16
    falls back to the math path and is counted like eager); the flash and flex backends never do.
    ``attention=None`` reads ``config._attn_implementation`` (``eager`` when absent), ``float16=None``
    ``config.dtype``. An upper bound:
    ``tests/measuring/eval/test_eval_memory.py`` holds it between the measured peak and 3x it on CPU.
    """
    text = getattr(config, "text_config", None) or config
    hidden = int(getattr(text, "hidden_size", 0) or getattr(text, "n_embd", 0))
    inter = int(getattr(text, "intermediate_size", 0) or 4 * hidden)
    heads = int(getattr(text, "num_attention_heads", 0) or getattr(text, "n_head", 1))
    vocab = int(getattr(text, "vocab_size", 0))
    attention = attention or getattr(config, "_attn_implementation", None) or "eager"
    tokens = rows * length
    activations = tokens * (8 * hidden + 3 * inter) * element
    if float16 is None:
        dtype_name = str(getattr(config, "dtype", ""))
        float16 = dtype_name.endswith("float16") and not dtype_name.endswith("bfloat16")
    if attention in FUSED_ATTENTION:
        fused = True
    elif attention == "sdpa":
        fused = not (device_type == "cpu" and float16)
    else:
        fused = False
    scores = 0 if fused else rows * heads * length * length * (2 * element + 4)
    logits = rows * min(chunk, length) * vocab * 4 * 3
    return activations + scores + logits


def size_text(nbytes: float) -> str:
    """A size in the unit that shows it (``1.25 GiB``, ``310 MiB``, ``12 KiB``), never ``0.00 GiB``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return (
                f"{value:.2f} {unit}"
                if value < 10
                else f"{value:.0f} {unit}"
                if value >= 100
                else f"{value:.1f} {unit}"
            )
    return f"{int(nbytes)} bytes"
