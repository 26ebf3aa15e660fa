"""Fused rotation kernels behind :func:`posenc.apply_rotary`.

* :mod:`.cpu`: a C kernel (``rope_kernel.c``) compiled on first use, one pass over q and k,
  threads over positions.
* :mod:`.triton_rope`: a Triton kernel for GPUs (also run on CPU in Triton's interpreter by the
  tests).
* :mod:`.contract`: the calling convention both share (operand ranks, the dtypes they read, how a
  table of either rank is addressed);
* :mod:`.overlap`: whether two strided tensors share memory, answered exactly from pointers, shapes
  and strides;
* :mod:`.plans`: safety checks paid once per layout and cached: the Triton path's plans, and the
  in-place rules' pairs of q and k layouts.

:func:`planner_for` gives, per device, what :func:`posenc.rope.apply.apply_rotary` needs to plan its
dense call once per layout (:func:`.cpu.make_planned`, :func:`.triton_rope.make_planned`).

Both have one calling convention (see :func:`.cpu.rotate`), so the autograd Functions of
:mod:`posenc.rope.apply` wrap either; their backward is the same kernel with sin negated.

Both are checked against :func:`posenc.rope.apply.rotate_reference`, which stays the definition.
"""

from __future__ import annotations

import functools
import threading
import warnings
from typing import Any, Callable, Dict, NamedTuple, Optional

import torch

from . import cpu

#: A kernel writes the rotation of (q, k) into (q_out, k_out); see :func:`.cpu.rotate`.
Kernel = Callable[..., None]

_lock = threading.Lock()
_triton: Dict[str, Any] = {}
_cpu_kernel: Dict[str, Any] = {}


def cpu_kernel() -> Optional[Kernel]:
    """The fused CPU kernel, or ``None`` (after one warning) when it cannot be built here."""
    lib = cpu.library()
    if lib is None:
        return None
    cached = _cpu_kernel.get("kernel")
    if cached is None or _cpu_kernel.get("lib") is not lib:
        cached = cpu.make_rotate(lib)
        _cpu_kernel.update(kernel=cached, lib=lib)
    return cached


def cpu_decode() -> Optional[cpu.Decode]:
    """The decode step's lean call into the CPU kernel (:func:`.cpu.make_decode`), or ``None``
    when the kernel cannot be built here."""
    lib = cpu.library()
    if lib is None:
        return None
    cached: Optional[cpu.Decode] = _cpu_kernel.get("decode")
    if cached is None or _cpu_kernel.get("decode_lib") is not lib:
        cached = cpu.make_decode(lib)
        _cpu_kernel.update(decode=cached, decode_lib=lib)
    return cached


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
        return cpu_kernel()
    if device.type == "cuda":
        return triton_kernel()
    return None


class Planner(NamedTuple):
    """How to plan a call on one device, and how to tell that a plan is stale.

    ``make(q, k, cos, sin, rotary_dim, interleaved, *, inplace, positions)`` checks one layout in
    full (raising on what the kernel refuses) and returns ``run(q, k, cos, sin, row_offset,
    positions) -> (q_out, k_out) or None`` for operands of exactly that layout, or ``None`` for a
    layout it leaves to the general path (both plan out of place and in place, by consecutive rows
    and by positions); ``make`` is ``None`` where the device has no fused kernel here. ``token`` is what the loader
    holds under ``state[name]`` now (the kernel, or ``None``): a plan made with it is stale once
    that changes (:func:`.cpu.reset`, a kernel loaded later), which a call tells by a dictionary
    read, no function call. ``inverts``: ``make`` also takes ``inverse=True`` (the rotation by the
    negated angles, a backward's), so calls that need gradients may be planned too.
    """

    make: Optional[Callable[..., Optional[Callable[..., Any]]]]
    state: Dict[str, Any]
    name: str
    token: Any
    inverts: bool = False


def planner_for(device: torch.device) -> Planner:
    """The :class:`Planner` of ``device``'s fused kernel (its ``make`` ``None`` where there is
    none). Called once per new layout, never per call."""
    if device.type == "cpu":
        lib = cpu.library()
        return Planner(None if lib is None else functools.partial(cpu.make_planned, lib), cpu.STATE, "lib", lib, True)
    if device.type == "cuda":
        kernel = triton_kernel()
        if kernel is None:
            return Planner(None, _triton, "kernel", None)
        from . import triton_rope

        return Planner(triton_rope.make_planned, _triton, "kernel", kernel, True)
    return Planner(None, {}, "", None)
