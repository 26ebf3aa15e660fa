"""Fused rotation kernels behind :func:`posenc.apply_rotary`.

* :mod:`.cpu`: a C kernel (``rope_kernel.c``) compiled on first use, one pass over q and k,
  threads over positions; it checks every operand itself, in C, on every call.
* :mod:`.triton_rope`: a Triton kernel for GPUs (also run on CPU in Triton's interpreter by the
  tests); its checks are paid once per layout (:mod:`.plans`).
* :mod:`.contract`: the calling convention both share (operand ranks, the dtypes they read, how a
  table of either rank is addressed);
* :mod:`.overlap`: whether two strided tensors share memory, answered exactly from pointers, shapes
  and strides;
* :mod:`.plans`: safety checks paid once per layout and cached: the Triton kernel's plans, and the
  in-place rules' pairs of q and k layouts.

Both kernels have one calling convention (:data:`Kernel`), so the autograd Functions of
:mod:`posenc.rope.apply` wrap either; their backward is the same kernel with sin negated. Both are
checked against :func:`posenc.rope.apply.rotate_reference`, which stays the definition.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Dict, Optional

import torch

from . import cpu

#: ``kernel(q, k, q_out, k_out, cos, sin, *, interleaved, rotary_dim, inverse=False, positions=None,
#: row_offset=0)`` writes the rotation of (q, k) into (q_out, k_out); see :func:`.cpu.rotate`.
Kernel = Callable[..., None]

_lock = threading.Lock()
#: ``"kernel"``: the Triton kernel, or ``None``; ``"reason"``: why there is none.
_triton: Dict[str, Any] = {}


def cpu_kernel() -> Optional[Kernel]:
    """The fused CPU kernel, or ``None`` (after one warning) when it cannot be built here."""
    return cpu.kernel()


def triton_kernel() -> Optional[Kernel]:
    """The Triton kernel, or ``None`` (after one warning) when Triton cannot be imported."""
    if "kernel" not in _triton:
        with _lock:
            if "kernel" not in _triton:
                try:
                    from . import triton_rope

                    _triton["kernel"] = triton_rope.rotate
                except Exception as exc:  # an absent or broken Triton install must not break posenc
                    _triton["kernel"] = None
                    _triton["reason"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    warnings.warn(
                        f"posenc: Triton RoPE kernel unavailable ({_triton['reason']}); using the PyTorch reference",
                        RuntimeWarning,
                        stacklevel=3,
                    )
    kernel: Optional[Kernel] = _triton["kernel"]
    return kernel


def kernel_for(device: torch.device) -> Optional[Kernel]:
    """The fused kernel for tensors on ``device``; ``None`` means use the reference.

    CPU gets the C kernel, CUDA (and ROCm, which PyTorch also calls ``cuda``) the Triton kernel.
    Other devices have no fused kernel and use the reference without a warning.
    """
    if device.type == "cpu":
        return cpu.kernel()
    if device.type == "cuda":
        return triton_kernel()
    return None
