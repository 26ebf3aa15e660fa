"""Applying the rotation to queries and keys.

:func:`rotate_reference` is the plain PyTorch definition that every faster path is tested against.
:func:`apply_rotary` is the one public entry for prefill, decode and packed batches (tables plus a
``row_offset`` or per-token ``positions``): it checks its arguments (once per layout) and
:func:`fused_kernel`, the one "fused or reference?" predicate, picks the path (see
``docs/kernels.md``):

* CPU tensors: the fused C kernel of :mod:`posenc.rope.kernels.cpu` (one pass over q and k);
* CUDA tensors: the Triton kernel of :mod:`posenc.rope.kernels.triton_rope`;
* under ``torch.compile``: by device (:data:`COMPILED_PATH`), the registered op
  ``torch.ops.posenc.rotary`` (:func:`rotary_op`, one node in the graph) or the reference, which
  Inductor fuses with its neighbours; neither breaks a graph;
* anything else (other devices, tensor subclasses, ``vmap``, gradients wanted for cos/sin, or no
  fused kernel available here): the reference.

The common dense case (plain tensors, no gradients; out of place or in place, with consecutive
rows or per-token positions, on CPU and on CUDA) is recognised in O(1) on a seen
layout: its checks, path choice and the kernel's arguments (packed for the C kernel; the launch
constants and a pre-bound launcher for Triton) are kept per layout (:func:`_planned_call`), and a
call hands over only the data pointers. The module's decode call (:func:`rotate_cached_rows`, a
window of its cache) takes the same plan where the CPU kernel's lean decode call does not apply
(on CUDA).

Both kernels take every stride of every operand, and refuse (``ValueError``) an output that shares
memory with another operand unless it is exactly its own input. With ``inplace=True``, q and k may be
the same tensor (rotated once); any other overlap between them is refused on every path.

:func:`apply_rotary_at` (packed batches) and :func:`rotate_cached_rows` (a module's cached tables
and a row offset) are thin wrappers over the same path.

With autograd the fused path runs as :class:`FusedRotary`, whose backward is the inverse rotation
(the same kernel with sin negated), applied to the incoming gradients without a copy. A planned
layout out of place by consecutive rows runs as :class:`PlannedRotary` instead: the forward is the
layout's plan, the backward's inverse rotation the plan of the gradients' layout.

Conventions (see :mod:`posenc.rope.layout`): pair ``i`` is ``(x[i], x[i + r/2])`` for
``layout="half"`` and ``(x[2i], x[2i+1])`` for ``layout="interleaved"``; each pair ``(a, b)`` becomes
``(a*cos - b*sin, a*sin + b*cos)``, a counter-clockwise rotation by the pair's angle. Only the first
``rotary_dim`` features of each head are rotated (partial rotary, as in GPT-NeoX/Phi); the rest pass
through unchanged.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Dict, Hashable, Optional, Tuple

import torch
import torch.autograd.forward_ad as _forward_ad

from .._checks import check_choice, check_int, check_position_dtype, check_positions, check_tensor
from . import kernels
from .kernels import Kernel, overlap, plans
from .kernels.contract import table_dtype
from .kernels.cpu import TableFields
from .layout import LAYOUTS


def rotate_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half", rotary_dim: Optional[int] = None
) -> torch.Tensor:
    """Rotate ``x`` by the angles whose cos/sin are given. Out of place.

    Args:
        x: (..., seq, head_dim) queries or keys.
        cos, sin: half-width tables broadcastable to (..., seq, rotary_dim // 2).
        layout: ``"half"`` or ``"interleaved"``.
        rotary_dim: rotated features per head (even, <= head_dim); ``None`` means all.

    bf16/fp16 inputs are rotated in float32 and rounded once at the end.
    """
    head_dim = x.shape[-1]
    r = head_dim if rotary_dim is None else rotary_dim
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    rot = x[..., :r].to(compute)
    c, s = cos.to(compute), sin.to(compute)
    if layout == "half":
        a, b = rot[..., : r // 2], rot[..., r // 2 :]
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
    out = out.to(x.dtype)
    if r == head_dim:
        return out
    return torch.cat((out, x[..., r:]), dim=-1)


#: Argument layouts :func:`check_rotary_inputs` has accepted -> their rotary_dim, and the planned
#: calls of :func:`_planned_call` (keys starting with ``_PLANNED``); one bound for both.
_ACCEPTED: Dict[Hashable, Any] = {}
_ACCEPTED_MAX = 1024
_accepted_lock = threading.Lock()


def check_rotary_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    *,
    window: bool = False,
) -> int:
    """Validate the arguments of :func:`apply_rotary`; return the resolved rotary_dim.

    ``window=False``: cos/sin have one row per position (rows = seq). ``window=True``: they are a
    table that the call reads a window or named rows of; the caller checks which rows exist.

    Everything checked here is a function of the arguments' types, shapes and dtypes, the layout
    name and rotary_dim, so a combination once accepted is remembered (a bounded, thread-safe
    cache) and the next call with it costs one dictionary lookup: the checks run once per layout,
    not once per layer and step. Anything else (tensor subclasses, code being traced by
    ``torch.compile``, an unusual rotary_dim) runs the checks every time.
    """
    if (
        type(q) in _PLAIN
        and type(k) in _PLAIN
        and type(cos) in _PLAIN
        and type(sin) in _PLAIN
        and (rotary_dim is None or type(rotary_dim) is int)
        and type(layout) is str
        and not _is_compiling()
    ):
        shapes = (q.shape, k.shape, cos.shape, sin.shape)
        key = (*shapes, q.dtype, k.dtype, cos.dtype, sin.dtype, layout, rotary_dim, window)
        r: Optional[int] = _ACCEPTED.get(key)
        if r is None:
            r = _check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window)
            _remember(key, r)
        return r
    return _check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window)


def _remember(key: Hashable, value: Any) -> None:
    with _accepted_lock:
        while _ACCEPTED and len(_ACCEPTED) >= _ACCEPTED_MAX:  # a bound lowered at run time shrinks too
            _ACCEPTED.pop(next(iter(_ACCEPTED)))
        _ACCEPTED[key] = value


def _check_rotary_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    window: bool = False,
) -> int:
    check_tensor("q", q, ndim=4, floating=True)
    check_tensor("k", k, ndim=4, floating=True)
    check_tensor("cos", cos, ndim=(2, 3), floating=True)
    check_tensor("sin", sin, ndim=(2, 3), floating=True)
    check_choice("layout", layout, set(LAYOUTS))
    head_dim = q.shape[-1]
    if k.shape[-1] != head_dim:
        raise ValueError(f"q and k must have the same head_dim, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(
            f"q and k must agree in batch and seq (dims 0 and 2), got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    r = head_dim if rotary_dim is None else rotary_dim
    check_int("rotary_dim", r, minimum=2, maximum=head_dim, even=True)
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.shape[-1] != r // 2:
        raise ValueError(
            f"cos/sin must have last dimension rotary_dim // 2 = {r // 2} (one value per "
            f"rotation pair), got {cos.shape[-1]}"
        )
    if not window and cos.shape[-2] != q.shape[2]:
        raise ValueError(f"cos/sin cover {cos.shape[-2]} positions but q/k have seq={q.shape[2]}")
    if cos.dim() == 3 and cos.shape[0] not in (1, q.shape[0]):
        raise ValueError(f"cos/sin batch size {cos.shape[0]} must be 1 or q's batch size {q.shape[0]}")
    return r


class FusedRotary(torch.autograd.Function):
    """A fused out-of-place rotation of (q, k) as an autograd node (backward and forward mode).

    The rotation is linear and orthogonal, so its backward is its transpose, the rotation by the
    negated angles: ``grad_q = R(-theta) grad_q'``. That is the same kernel with ``inverse`` flipped,
    applied through this Function again, so double backward works too. cos/sin get no gradient (the
    dispatcher sends tables that require one to the reference).

    In-place application with gradients goes through :class:`FusedRotaryInplace`, one tensor per
    node: autograd refuses a Function that modifies a view in place and returns two tensors, and q
    and k usually are views (of one qkv projection).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kernel: Kernel,
        interleaved: bool,
        rotary_dim: int,
        inverse: bool,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        ctx.save_for_backward(cos, sin)
        ctx.save_for_forward(cos, sin)
        ctx.config = (kernel, interleaved, rotary_dim, inverse)
        return rotated(kernel, q, k, cos, sin, interleaved, rotary_dim, inverse)

    @staticmethod
    def jvp(ctx: Any, tangent_q: torch.Tensor, tangent_k: torch.Tensor, *_: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """Forward-mode AD: the rotation is linear, so the tangents rotate like the inputs."""
        cos, sin = ctx.saved_tensors
        kernel, interleaved, rotary_dim, inverse = ctx.config
        return rotated(kernel, tangent_q, tangent_k, cos, sin, interleaved, rotary_dim, inverse)

    @staticmethod
    def backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        cos, sin = ctx.saved_tensors
        kernel, interleaved, rotary_dim, inverse = ctx.config
        # the kernels read any strides (an expanded gradient too): no copy before the launch, and
        # the only allocations are the two gradients
        if _plain_gradients(grad_q, grad_k):
            gq, gk = rotated(kernel, grad_q, grad_k, cos, sin, interleaved, rotary_dim, not inverse)
        else:  # create_graph, or wrapped gradients: a node of its own (double backward)
            gq, gk = FusedRotary.apply(grad_q, grad_k, cos, sin, kernel, interleaved, rotary_dim, not inverse)
        return gq, gk, None, None, None, None, None, None


class FusedRotaryInplace(torch.autograd.Function):
    """Rotate one tensor in place as an autograd node (q or k alone; see :class:`FusedRotary`)."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kernel: Kernel,
        interleaved: bool,
        rotary_dim: int,
    ) -> torch.Tensor:
        none = x[:, :0]  # (B, 0, S, D): no heads
        kernel(x, none, x, none, cos, sin, interleaved=interleaved, rotary_dim=rotary_dim)
        ctx.mark_dirty(x)
        ctx.save_for_backward(cos, sin)
        ctx.save_for_forward(cos, sin)
        ctx.config = (kernel, interleaved, rotary_dim)
        return x

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor, *_: Any) -> torch.Tensor:
        cos, sin = ctx.saved_tensors
        kernel, interleaved, rotary_dim = ctx.config
        if tangent.is_neg():
            tangent = tangent.resolve_neg()  # the kernel writes raw memory
        if not overlap.self_overlaps(tangent):
            none = tangent[:, :0]
            kernel(tangent, none, tangent, none, cos, sin, interleaved=interleaved, rotary_dim=rotary_dim)
            torch.autograd.graph.increment_version(tangent)  # the kernel wrote behind autograd's back
        else:
            dense = tangent.contiguous()
            none = dense[:, :0]
            kernel(dense, none, dense, none, cos, sin, interleaved=interleaved, rotary_dim=rotary_dim)
            tangent.copy_(dense)
        return tangent

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        cos, sin = ctx.saved_tensors
        kernel, interleaved, rotary_dim = ctx.config
        none = grad[:, :0]  # (B, 0, S, D): no heads, a view
        if _plain_gradients(grad, grad):
            g = torch.empty_like(grad)  # the one allocation: the gradient autograd asks for
            kernel(grad, none, g, none, cos, sin, interleaved=interleaved, rotary_dim=rotary_dim, inverse=True)
        else:  # create_graph, or a wrapped gradient: a node of its own (double backward)
            g, _ = FusedRotary.apply(grad, none, cos, sin, kernel, interleaved, rotary_dim, True)
        return g, None, None, None, None, None


def rotated(
    kernel: Kernel,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    interleaved: bool,
    rotary_dim: int,
    inverse: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``kernel``'s rotation of q and k into two new tensors (``torch.empty_like``: the inputs'
    layout where dense), the only allocations: the fused out-of-place forward, its tangents and its
    backward all come through here."""
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    kernel(q, k, q_out, k_out, cos, sin, interleaved=interleaved, rotary_dim=rotary_dim, inverse=inverse)
    return q_out, k_out


def _plain_gradients(grad_q: torch.Tensor, grad_k: torch.Tensor) -> bool:
    """Whether a backward may call the kernel directly on these gradients: no graph is being built
    for a second derivative (``create_graph``), no forward-mode level is open, and both are plain
    tensors with storage (not functorch's batched gradients of a vectorised jacobian)."""
    return (
        not torch.is_grad_enabled()
        and type(grad_q) is torch.Tensor
        and type(grad_k) is torch.Tensor
        and not _is_functorch_wrapped(grad_q)
        and not _is_functorch_wrapped(grad_k)
        and not _forward_ad_active()
    )


def _forward_ad_active() -> bool:
    """Whether a ``torch.autograd.forward_ad.dual_level`` is open (dual tensors need the Function)."""
    return getattr(_forward_ad, "_current_level", -1) >= 0


_PLAIN = (torch.Tensor, torch.nn.Parameter)
# A private PyTorch function: there is no public way to ask whether a tensor is a functorch (vmap,
# grad) wrapper, which no fused kernel can read. It waits for a public predicate in torch.func;
# tests/rope/test_kernel_dispatch.py::test_functorch_wrapper_probe_is_still_there fails loudly if this one goes.
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_is_compiling = torch.compiler.is_compiling
_CPU = torch.device("cpu")
_FUSED_DTYPES = frozenset((torch.float32, torch.bfloat16, torch.float16, torch.float64))


#: Under ``torch.compile``, per device type: ``"op"`` traces the registered op
#: ``torch.ops.posenc.rotary`` (one node, the fused kernel at run time, CUDA-graph capturable);
#: ``"reference"`` traces :func:`rotate_reference`, which Inductor fuses with its neighbours into
#: generated code. Inductor's fusion wins on both: on CPU the rotation joins the projection's
#: epilogue; on an H200 the compiled reference took 0.56-0.68x the op's time in every case measured
#: (see "Under torch.compile" in ``docs/kernels.md``).
COMPILED_PATH = {"cpu": "reference", "cuda": "reference"}


def fused_kernel(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor] = None,
    *,
    inplace: bool = False,
) -> Optional[Kernel]:
    """The one "fused or reference?" predicate: the kernel for these inputs, or ``None``.

    ``None`` means the reference: under ``torch.compile`` (:func:`_rotate` then picks the op or the
    reference by :data:`COMPILED_PATH`), tensor subclasses, ``vmap``/functorch wrappers, a dtype no
    kernel reads, operands on different devices (the reference raises torch's own error), a device
    without a fused kernel, tables that want gradients, or an in-place call on a lazily negated q
    or k (only torch's own ops keep the bit's meaning when writing).

    Strides and aliasing do not matter here: both kernels take every stride of every operand and
    check overlap themselves (the Triton path once per layout, :mod:`.kernels.plans`).
    """
    if _is_compiling():
        return None
    if not (type(q) in _PLAIN and type(k) in _PLAIN and type(cos) in _PLAIN and type(sin) in _PLAIN):
        return None
    if _is_functorch_wrapped(q) or _is_functorch_wrapped(k) or _is_functorch_wrapped(cos):
        return None
    if q.dtype != k.dtype or q.dtype not in _FUSED_DTYPES:
        return None
    if (cos.requires_grad or sin.requires_grad) and torch.is_grad_enabled():
        return None
    if inplace and (q.is_neg() or k.is_neg()):
        return None
    if positions is not None and (type(positions) not in _PLAIN or _is_functorch_wrapped(positions)):
        return None
    if q.is_cpu and k.is_cpu and cos.is_cpu and sin.is_cpu and (positions is None or positions.is_cpu):
        return kernels.kernel_for(_CPU)
    device = q.device
    if not (device == k.device == cos.device == sin.device) or (positions is not None and positions.device != device):
        return None  # let the reference raise torch's own device error
    return kernels.kernel_for(device)


def _lazy_negated(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether q or k has PyTorch's lazy negation bit: written in place, only torch's own ops (the
    reference path) keep its meaning; a kernel refuses such an output."""
    return q.is_neg() or k.is_neg()


def _has_storage(t: torch.Tensor) -> bool:
    return type(t) in _PLAIN and not t.is_meta and not _is_functorch_wrapped(t) and not _is_compiling()


def _inplace_aliasing(q: torch.Tensor, k: torch.Tensor, full: bool) -> bool:
    """Rules for ``inplace=True``; returns whether q and k are one view (then it is rotated once).

    With ``full`` (paths where no kernel sees q and k together: the reference, and the autograd
    Functions, which rotate q and k in separate calls) it also raises ``ValueError`` when q and k
    overlap otherwise, or when either has elements that share memory. The fused direct path leaves
    those checks to the kernel, which applies the same rule.
    """
    if not (_has_storage(q) and _has_storage(k)):
        return False  # no memory to alias (meta, functorch, compile)
    if not full:
        # empty tensors have no memory to share, whatever their data pointers say
        return bool(q.numel()) and q.data_ptr() == k.data_ptr() and q.shape == k.shape and overlap.identical(q, k)
    # what depends on the layouts alone is worked out once per pair of layouts; where the two lie
    # is tested at every call (O(1) unless their byte ranges meet, see kernels/plans.py)
    pair = plans.pair_plan(q, k)
    for name, t, overlapping in (("q", q, pair.self_overlap[0]), ("k", k, pair.self_overlap[1])):
        if overlapping:
            raise ValueError(
                f"{name} has elements that share memory (an expanded or otherwise "
                f"overlapping view, strides {tuple(t.stride())}), so rotating it in place "
                "is ambiguous; pass a .contiguous() or .clone() copy"
            )
    q_ptr, k_ptr = q.data_ptr(), k.data_ptr()
    same = bool(pair.spans[0]) and q_ptr == k_ptr and pair.same_layout
    if not same and plans.pair_overlaps(pair, q_ptr, k_ptr):
        raise ValueError(
            "q and k share memory, so rotating both in place would rotate the shared "
            "elements twice; pass inplace=False, or q and k that do not overlap (the "
            "same tensor for both is fine: it is rotated once)"
        )
    return same


def apply_rotary(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    rotary_dim: Optional[int] = None,
    inplace: bool = False,
    validate: bool = True,
    positions: Optional[torch.Tensor] = None,
    row_offset: int = 0,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys (never values) by their positions' angles: the one entry for prefill,
    decode and packed batches.

    Args:
        q: (batch, q_heads, seq, head_dim).
        k: (batch, kv_heads, seq, head_dim); kv_heads may differ from q_heads (GQA/MQA).
        cos, sin: the half-width tables of :func:`posenc.rope.tables.rope_cos_sin`, shared by all
            heads: (batch or 1, rows, rotary_dim // 2) or (rows, rotary_dim // 2). Which rows a
            token reads: row ``s`` for position ``s`` (then rows = seq); row ``row_offset + s``
            (a decode step: ``row_offset`` tokens are already in the KV cache); or row
            ``positions[b, s]`` (packed and variable-length batches).
        layout: ``"half"`` (GPT-NeoX / Hugging Face) or ``"interleaved"`` (GPT-J / Meta).
        rotary_dim: rotated features per head; ``None`` means ``head_dim``.
        inplace: write the result into ``q`` and ``k`` and return them. ``q`` and ``k`` may be the
            same tensor (it is rotated once, as the reference would); any other overlap between
            them raises ``ValueError``.
        validate: check shapes, dtypes and the layout name. ``False`` is for callers that already
            did (a model checks once per forward, not once per layer); memory safety does not
            depend on it, because the fused kernels check strides, bounds and overlap themselves.
        positions: (batch or 1, seq) or (seq,) integer rows of the tables, as in
            :func:`apply_rotary_at`; ``None`` for consecutive rows.
        row_offset: the first row read without ``positions``; ``0 <= row_offset <= rows - seq``.

    Returns:
        ``(q_rotated, k_rotated)`` with the shapes and dtypes of ``q`` and ``k``.

    Any strides are accepted (transposed, sliced, expanded inputs; expanded outputs are refused).
    The fused paths compute in float32 (float64 for float64 inputs) and round once, like the
    reference; on CPU they agree with it bit for bit.
    """
    if (
        validate
        and type(q) is type(k) is type(cos) is type(sin) is torch.Tensor
        and not (cos.requires_grad or sin.requires_grad)
        and (positions is None or type(positions) is torch.Tensor)
    ):
        done = None
        if not (q.requires_grad or k.requires_grad):
            done = _planned_call(q, k, cos, sin, layout, rotary_dim, row_offset, inplace, positions)
        elif torch.is_grad_enabled() and not inplace and positions is None:
            done = _planned_call(q, k, cos, sin, layout, rotary_dim, row_offset, mode=_GRAD)
        if done is not None:
            return done
    if positions is not None:
        return apply_rotary_at(
            q, k, cos, sin, positions, layout=layout, rotary_dim=rotary_dim, inplace=inplace, validate=validate
        )
    if validate:
        if type(row_offset) is not int or row_offset < 0:
            check_int("row_offset", row_offset, minimum=0)
        if row_offset:
            r = check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window=True)
            rows = cos.shape[-2]
            if row_offset + q.shape[2] > rows:
                raise ValueError(
                    f"row_offset + seq - 1 must be < {rows} (the number of table rows), got "
                    f"{row_offset + q.shape[2] - 1}; grow the table first (RotaryEmbedding.extend)"
                )
        else:
            r = check_rotary_inputs(q, k, cos, sin, layout, rotary_dim)
    else:
        r = q.shape[-1] if rotary_dim is None else rotary_dim
    return _rotate(q, k, cos, sin, None, row_offset, layout, r, inplace)


_PLANNED = object()  # the first item of a planned call's key in _ACCEPTED
_GRAD = "grad"  # a planned call's mode: a forward whose outputs need gradients (PlannedRotary)
_INVERSE = "inverse"  # a planned call's mode: a backward's rotation of the gradients by -theta
_KERNEL_FOR = kernels.kernel_for  # the dispatcher plans are made for; a replaced one is honoured


def _planned_call(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    row_offset: int,
    inplace: bool = False,
    positions: Optional[torch.Tensor] = None,
    *,
    window: bool = False,
    mode: Optional[str] = None,
) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """The common dense case of :func:`apply_rotary` recognised in O(1): plain tensors on one
    device with a fused kernel (the C kernel on CPU, Triton on CUDA), no gradients (but see
    ``mode``), out of place or in place, consecutive rows or rows named by int64/int32 ``positions``.
    Returns ``None`` for anything else (then the general path runs, and raises where it should).

    What depends on the layout alone (the argument checks, the "fused or reference?" choice, the
    kernel's checks of shapes, dtypes and strides, what it is given besides the data pointers, the
    outputs' strides, and on CUDA the launch constants) is worked out once per layout (shapes,
    strides, dtypes and device of all four operands, layout name, rotary_dim, whether rows start at
    an offset, or the tables are a ``window`` of which the call reads rows ``row_offset ..
    row_offset + seq - 1``, as :func:`rotate_cached_rows` hands a module's whole cache) and kept
    in :data:`_ACCEPTED`; a call on a seen layout tests only what can change
    between calls with it (compiling, functorch wrappers, forward-mode AD, the lazy negation bit,
    the row bounds, which kernel is loaded, that :func:`kernels.kernel_for` is not replaced) and
    then hands the data pointers to the kernel: the C side checks every operand's memory as on
    every call, and every position; the Triton plan tests the outputs' byte ranges against the
    inputs' (:func:`.kernels.plans.disjoint`) and reads the positions' minimum and maximum back.

    ``mode`` (part of the key) plans calls that take part in autograd, out of place by consecutive
    rows, where the device's planner also plans the inverse rotation (Triton): ``_GRAD`` runs the
    plan inside :class:`PlannedRotary` (q or k needs gradients), whose backward calls this with
    ``_INVERSE`` on the gradients' own layout (the rotation by -theta, planned like the forward).
    """
    if _is_compiling() or type(layout) is not str or type(row_offset) is not int or row_offset < 0:
        return None
    if not (rotary_dim is None or type(rotary_dim) is int) or getattr(_forward_ad, "_current_level", -1) >= 0:
        return None
    if _is_functorch_wrapped(q) or _is_functorch_wrapped(k) or _is_functorch_wrapped(cos) or _is_functorch_wrapped(sin):
        return None
    if q.is_neg() or k.is_neg() or cos.is_neg() or sin.is_neg() or kernels.kernel_for is not _KERNEL_FOR:
        return None
    device = q.device
    if k.device != device or cos.device != device or sin.device != device:
        return None  # the general path lets torch name the devices
    rows: Any = window or row_offset > 0  # tables with more rows than seq: the offset's bound checked per call
    if positions is not None:  # rows by positions: row_offset is not read
        if positions.device != device or positions.is_neg() or _is_functorch_wrapped(positions):
            return None
        rows, row_offset = (positions.shape, positions.stride(), positions.dtype), 0
    key = (
        *(_PLANNED, q.shape, k.shape, cos.shape, sin.shape, q.stride(), k.stride(), cos.stride(), sin.stride()),
        *(q.dtype, k.dtype, cos.dtype, sin.dtype, device, layout, rotary_dim, rows, inplace, mode),
    )
    plan = _ACCEPTED.get(key)
    if plan is not None:
        run, state, name, token = plan
        if (state[name] if name in state else None) is not token:
            plan = None  # planned for a kernel since dropped or loaded (kernels.cpu.reset()): anew
    if plan is None:
        plan = _plan_call(q, k, cos, sin, layout, rotary_dim, rows is True, inplace, positions, mode)
        if plan is None:
            return None
        _remember(key, plan)
        run = plan[0]
    if run is None:
        return None
    if rows is True and row_offset + q.shape[2] > cos.shape[-2]:
        return None  # the general path names the bound
    if mode is _GRAD:
        try:
            q_out: torch.Tensor
            k_out: torch.Tensor
            q_out, k_out = PlannedRotary.apply(q, k, cos, sin, run, row_offset, layout, rotary_dim, window)
        except _Refused:
            return None  # nothing written, no node recorded: the general path explains
        return q_out, k_out
    done: Optional[Tuple[torch.Tensor, torch.Tensor]] = run(q, k, cos, sin, row_offset, positions)
    return done


class _Refused(Exception):
    """A planned run inside :class:`PlannedRotary` refused its operands (before writing)."""


class PlannedRotary(torch.autograd.Function):
    """:class:`FusedRotary` for a planned layout (:func:`_planned_call`, out of place, consecutive
    rows): the forward is the layout's planned run, the backward the plan of the gradients' layout
    with the inverse rotation (no layout key, no full check on a seen one; the two gradients are
    the only allocations). A backward that builds a graph (``create_graph``) or gets wrapped
    gradients goes through :class:`FusedRotary` with the general kernel, exactly as a general call's
    does; forward-mode AD, functorch and ``torch.compile`` never reach this Function.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        run: Any,
        row_offset: int,
        layout: str,
        rotary_dim: Optional[int],
        window: bool,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        done = run(q, k, cos, sin, row_offset, None)
        if done is None:
            raise _Refused
        ctx.save_for_backward(cos, sin)
        ctx.config = (row_offset, layout, rotary_dim, window)
        out: Tuple[torch.Tensor, torch.Tensor] = done
        return out

    @staticmethod
    def backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        cos, sin = ctx.saved_tensors
        row_offset, layout, rotary_dim, window = ctx.config
        rest = (None, None, None, None, None, None, None)
        plain = _plain_gradients(grad_q, grad_k)
        if plain:
            done = _planned_call(grad_q, grad_k, cos, sin, layout, rotary_dim, row_offset, window=window, mode=_INVERSE)
            if done is not None:
                return (*done, *rest)
        # the general kernel, as :func:`_rotate` would pick it for these tables (plain tensors)
        kernel = kernels.kernel_for(cos.device)
        if kernel is None:  # pragma: no cover - the kernel was loaded when the forward was planned
            raise RuntimeError("the fused kernel this rotation was planned with is no longer loaded")
        if row_offset:
            kernel = functools.partial(kernel, row_offset=row_offset)
        interleaved = layout == "interleaved"
        r = grad_q.shape[-1] if rotary_dim is None else rotary_dim
        if plain:
            gq, gk = rotated(kernel, grad_q, grad_k, cos, sin, interleaved, r, True)
        else:  # create_graph, or wrapped gradients: a node of its own (double backward)
            gq, gk = FusedRotary.apply(grad_q, grad_k, cos, sin, kernel, interleaved, r, True)
        return (gq, gk, *rest)


def _plan_call(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    window: bool,
    inplace: bool,
    positions: Optional[torch.Tensor],
    mode: Optional[str] = None,
) -> Optional[Tuple[Any, Dict[str, Any], str, Any]]:
    """A new layout's plan for :func:`_planned_call`: ``(run, state, name, token)`` of the device's
    :class:`.kernels.Planner`, with ``run`` ``None`` when this layout takes the general path (a
    dtype pair the kernel does not read as is, positions of another integer dtype, no fused kernel
    for the device, a variant its planner does not plan); either is redone once the loader holds
    another kernel than ``token``. Raises, and remembers nothing, for
    arguments the checks refuse; with positions, ``None`` instead (remember nothing), so that the
    general path raises in its own order, which reads the positions' values first (no check here
    reads them: the C kernel checks them at every call)."""
    if positions is None:
        r = check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window=window)
    else:
        try:
            r = _check_rotary_at(q, k, cos, sin, positions, layout, rotary_dim, values=False)
        except (TypeError, ValueError):
            return None
    planner = kernels.planner_for(q.device)
    tables = table_dtype(q.dtype)
    readable = q.dtype == k.dtype and q.dtype in _FUSED_DTYPES and cos.dtype == tables and sin.dtype == tables
    if positions is not None and positions.dtype not in (torch.int64, torch.int32):
        readable = False
    if mode is not None and not planner.inverts:
        readable = False  # calls with gradients are planned only where the inverse rotation is too
    run = None
    if readable and planner.make is not None and fused_kernel(q, k, cos, sin, positions, inplace=inplace) is not None:
        interleaved = layout == "interleaved"
        if mode is _INVERSE:
            run = planner.make(q, k, cos, sin, r, interleaved, inplace=inplace, positions=positions, inverse=True)
        else:
            run = planner.make(q, k, cos, sin, r, interleaved, inplace=inplace, positions=positions)
    return run, planner.state, planner.name, planner.token


def _rotate(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    layout: str,
    r: int,
    inplace: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The rotation of checked arguments: tables (B|1, rows, r/2) or (rows, r/2); positions (B|1, S)
    int64/int32 already range-checked where that is the caller's job, or ``None`` for rows
    ``row_offset .. row_offset + S - 1``. Picks the fused kernel, the op (compiled) or the reference.
    The kernels read 2-d tables as they are; the op and the reference get a (1, rows, r/2) view."""
    interleaved = layout == "interleaved"
    kernel = fused_kernel(q, k, cos, sin, positions, inplace=inplace)
    if kernel is None:
        if cos.dim() == 2:
            cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)  # (1, rows, r/2)
        if _is_compiling() and COMPILED_PATH.get(q.device.type) == "op" and _op_reads(q, k, cos, sin):
            return _rotate_with_op(q, k, cos, sin, positions, row_offset, interleaved, r, inplace)
        return _reference_rows(q, k, cos, sin, positions, row_offset, layout, r, inplace)
    tables = table_dtype(q.dtype)
    if cos.dtype != tables or sin.dtype != tables:
        cos, sin = cos.to(tables), sin.to(tables)
    if positions is not None:
        kernel = functools.partial(kernel, positions=positions)
    elif row_offset:
        kernel = functools.partial(kernel, row_offset=row_offset)
    return _run_fused(q, k, cos, sin, kernel, interleaved, r, inplace, torch.is_grad_enabled())


def _reference_rows(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    layout: str,
    r: int,
    inplace: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The reference on the rows the call names; ``cos``/``sin`` (B|1, rows, r/2)."""
    seq = q.shape[2]
    if positions is not None:
        # (B|1, S, r/2): a batch of tables is indexed row by row, one shared table by positions alone
        if cos.shape[0] == 1:
            cos, sin = cos[0][positions], sin[0][positions]
        else:
            batch = torch.arange(cos.shape[0], device=cos.device).unsqueeze(1)
            cos, sin = cos[batch, positions], sin[batch, positions]
    elif row_offset or cos.shape[1] != seq:
        cos, sin = cos[:, row_offset : row_offset + seq], sin[:, row_offset : row_offset + seq]
    if inplace and _inplace_aliasing(q, k, full=True):
        return _rotate_shared_reference(q, cos, sin, layout, r)
    return apply_reference(q, k, cos, sin, layout, r, inplace)


def cached_rows_fields(cos_rows: torch.Tensor, sin_rows: torch.Tensor) -> Optional[TableFields]:
    """What :func:`rotate_cached_rows` may reuse about tables whose metadata never changes (a
    module's private views of its cache): their dtypes, shapes and strides as the CPU kernel reads
    them, or ``None`` when they are not plain CPU float32/float64 tables."""
    return kernels.cpu.table_fields(cos_rows, sin_rows)


def rotate_cached_rows(
    q: torch.Tensor,
    k: torch.Tensor,
    cos_rows: torch.Tensor,
    sin_rows: torch.Tensor,
    offset: int,
    *,
    interleaved: bool,
    rotary_dim: int,
    fields: Optional[TableFields] = None,
) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """Rotate by rows ``offset .. offset + seq - 1`` of whole tables in one fused-kernel call (a
    decode step, or a prefill after a cached prefix), or return ``None`` when these inputs need the
    reference (then call :func:`apply_rotary`).

    Args:
        q, k: (batch, heads, seq, head_dim), as for :func:`apply_rotary`; not checked here: the
            kernel checks shapes, dtypes, strides, the row bounds and memory overlap before it
            reads anything, and raises ``ValueError``/``TypeError``.
        cos_rows, sin_rows: (1, rows, rotary_dim // 2) tables, e.g. a module's whole cache.
        offset: the row of the call's first position (the number of tokens in the KV cache).
        fields: :func:`cached_rows_fields` of the tables, when their metadata cannot change: on
            CPU the call then reads only q's and k's metadata and the tables' data pointers
            (:func:`posenc.rope.kernels.cpu.make_decode`). Without them (on CUDA, where there are
            none) the call is planned per layout as :func:`apply_rotary`'s dense call is
            (:func:`_planned_call` with the tables as a window): a seen layout is recognised in
            O(1), and the Triton plan makes one pre-bound launch for q and k.

    ``None`` means :func:`fused_kernel` chose the reference (device, subclass, ``torch.compile``,
    ``vmap``), or the tables have another dtype than the kernel reads. With autograd the call runs
    through :class:`FusedRotary` like every other fused call.
    """
    no_grad = not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)) and not _forward_ad_active()
    plain = type(q) is torch.Tensor and type(k) is torch.Tensor
    if fields is not None and no_grad and plain:
        decode = kernels.cpu_decode()
        if decode is not None and not _is_compiling() and not _is_functorch_wrapped(q) and not _is_functorch_wrapped(k):
            rotated = decode(q, k, cos_rows, sin_rows, fields, offset, interleaved, rotary_dim)
            if rotated is not None:
                return rotated
            # declined or refused: the general call below raises the kernel's explanation
    elif no_grad and plain and type(cos_rows) is type(sin_rows) is torch.Tensor:
        if not (cos_rows.requires_grad or sin_rows.requires_grad):
            layout = "interleaved" if interleaved else "half"
            done = _planned_call(q, k, cos_rows, sin_rows, layout, rotary_dim, offset, window=True)
            if done is not None:
                return done  # planned per layout (on CUDA, the Triton plan)
    kernel = fused_kernel(q, k, cos_rows, sin_rows)
    if kernel is None or cos_rows.dtype != table_dtype(q.dtype):
        return None
    kernel = functools.partial(kernel, row_offset=offset)
    return _run_fused(q, k, cos_rows, sin_rows, kernel, interleaved, rotary_dim, False, torch.is_grad_enabled())


def _run_fused(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    kernel: Kernel,
    interleaved: bool,
    r: int,
    inplace: bool,
    grad: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Run ``kernel``: through the autograd Functions when q or k need gradients, directly otherwise."""
    if (grad and (q.requires_grad or k.requires_grad)) or _forward_ad_active():
        if inplace:
            if _inplace_aliasing(q, k, full=True):
                q = FusedRotaryInplace.apply(q, cos, sin, kernel, interleaved, r)
                return q, q
            q_done: torch.Tensor = FusedRotaryInplace.apply(q, cos, sin, kernel, interleaved, r)
            k_done: torch.Tensor = FusedRotaryInplace.apply(k, cos, sin, kernel, interleaved, r)
            return q_done, k_done
        q_out: torch.Tensor
        k_out: torch.Tensor
        q_out, k_out = FusedRotary.apply(q, k, cos, sin, kernel, interleaved, r, False)
        return q_out, k_out
    if inplace:
        if _inplace_aliasing(q, k, full=False):
            none = q[:, :0]  # (B, 0, S, D): no heads
            kernel(q, none, q, none, cos, sin, interleaved=interleaved, rotary_dim=r)
            torch.autograd.graph.increment_version(q)
            return q, q
        kernel(q, k, q, k, cos, sin, interleaved=interleaved, rotary_dim=r)
        # as any in-place torch op does, so autograd notices if q or k was saved for a backward
        torch.autograd.graph.increment_version((q, k))
        return q, k
    return rotated(kernel, q, k, cos, sin, interleaved, r)


def apply_rotary_at(
    q: torch.Tensor,
    k: torch.Tensor,
    cos_table: torch.Tensor,
    sin_table: torch.Tensor,
    positions: torch.Tensor,
    *,
    layout: str = "half",
    rotary_dim: Optional[int] = None,
    inplace: bool = False,
    validate: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k by the table rows that ``positions`` name: packed and variable-length batches
    (:func:`apply_rotary` with ``positions``).

    When several documents are packed into one row, positions restart at each document boundary
    (``[0, 1, 2, 0, 1, 0, 1, 2, 3]``). Instead of gathering a per-token copy of the tables first,
    the fused kernels read row ``positions[b, s]`` of the shared table directly.

    Args:
        q: (batch, q_heads, seq, head_dim).
        k: (batch, kv_heads, seq, head_dim).
        cos_table, sin_table: (rows, rotary_dim // 2), e.g. ``RotaryEmbedding.cos_cached``.
        positions: (batch or 1, seq) or (seq,) integers in ``[0, rows)``.
        layout, rotary_dim, inplace, validate: as in :func:`apply_rotary`. With ``validate=False``
            positions are still bounds-checked where a kernel reads them: the CPU kernel raises the
            same ``ValueError``, the Triton kernel never reads outside the table (it writes NaN for
            an out-of-range position instead, to stay free of host synchronisation).

    Returns:
        ``(q_rotated, k_rotated)``, equal to ``apply_rotary(q, k, cos_table[positions],
        sin_table[positions], ...)``.
    """
    if validate:
        r = _check_rotary_at(q, k, cos_table, sin_table, positions, layout, rotary_dim, values=True)
    else:
        r = q.shape[-1] if rotary_dim is None else rotary_dim
    if positions.dim() == 1:
        positions = positions.unsqueeze(0)
    fused = fused_kernel(q, k, cos_table, sin_table, positions, inplace=inplace) is not None
    # The CPU kernel checks the range itself, with the same message, without a separate pass here.
    # The reference path checks even without validate: indexing would wrap a negative position.
    if not fused and not validate:
        check_positions("positions", positions)
    if (validate or not fused) and positions.numel() and not _is_compiling() and not (fused and q.is_cpu):
        rows = cos_table.shape[0]
        if int(positions.max()) >= rows:
            raise ValueError(
                f"positions must be < {rows} (the number of table rows), got a maximum of "
                f"{int(positions.max())}; grow the table first (RotaryEmbedding.extend)"
            )
    if positions.dtype not in (torch.int64, torch.int32):
        positions = positions.long()  # uint8 would index as a boolean mask; the kernels read int64/int32
    return _rotate(q, k, cos_table, sin_table, positions, 0, layout, r, inplace)


def _check_rotary_at(
    q: torch.Tensor,
    k: torch.Tensor,
    cos_table: torch.Tensor,
    sin_table: torch.Tensor,
    positions: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    *,
    values: bool,
) -> int:
    """:func:`apply_rotary_at`'s argument checks; return the resolved rotary_dim. ``values=False``
    checks the positions' dtype but reads none of them (a planned call leaves that to the C kernel,
    whose refusal sends the call back here with ``values=True``)."""
    check_tensor("q", q, ndim=4, floating=True)
    check_tensor("k", k, ndim=4, floating=True)
    check_tensor("cos_table", cos_table, ndim=2, floating=True)
    check_tensor("sin_table", sin_table, ndim=2, floating=True)
    if values:
        check_positions("positions", positions)
    else:
        check_position_dtype("positions", positions)
    shape = positions.shape if positions.dim() != 1 else (1, *positions.shape)
    if len(shape) != 2 or shape[-1] != q.shape[2] or shape[0] not in (1, q.shape[0]):
        raise ValueError(
            f"positions must have shape (batch or 1, seq) = ({q.shape[0]} or 1, {q.shape[2]}) "
            f"or ({q.shape[2]},), got {tuple(positions.shape)}"
        )
    if cos_table.shape != sin_table.shape:
        raise ValueError(
            f"cos_table and sin_table must have the same shape, got {tuple(cos_table.shape)} "
            f"and {tuple(sin_table.shape)}"
        )
    return check_rotary_inputs(q, k, cos_table, sin_table, layout, rotary_dim, window=True)


def _rotate_shared_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, r: int
) -> Tuple[torch.Tensor, torch.Tensor]:
    """In place, when q and k are one tensor: rotate it once, as the reference does for q and k."""
    x.copy_(rotate_reference(x, cos.unsqueeze(1), sin.unsqueeze(1), layout=layout, rotary_dim=r))
    return x, x


def apply_reference(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, r: int, inplace: bool
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The reference path of :func:`apply_rotary` for checked inputs: ``cos``/``sin`` are (B|1, S, r/2)
    and are broadcast over heads; ``r`` is the resolved rotary_dim. Also what ``posenc bench`` times."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B|1, 1, S, r/2): over heads
    q_out = rotate_reference(q, cos, sin, layout=layout, rotary_dim=r)
    k_out = rotate_reference(k, cos, sin, layout=layout, rotary_dim=r)
    if inplace:
        q.copy_(q_out)
        k.copy_(k_out)
        return q, k
    return q_out, k_out


# -- the registered op -----------------------------------------------------------------------------
@torch.library.custom_op("posenc::rotary", mutates_args=())
def rotary_op(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    rotary_dim: int,
    interleaved: bool,
    inverse: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.posenc.rotary``: the rotation as one ``torch.library`` op, out of place.

    Args:
        q: (B, Hq, S, D); k: (B, Hk, S, D); one floating dtype, any strides.
        cos, sin: (B|1, rows, rotary_dim // 2) in float32 (float64 for float64 q).
        positions: (B|1, S) int64/int32 rows, or ``None`` for rows ``row_offset + s``.
        row_offset: the first row without positions.
        rotary_dim: rotated features per head; interleaved: the pair layout; inverse: rotate by
            the negated angles (the backward).

    Returns:
        ``(q_out, k_out)``, new tensors of the shapes, dtypes and strides ``torch.empty_like`` gives.

    The fused kernel of the device runs (the reference where there is none); the fake kernel gives
    the outputs' metadata, so ``torch.compile(fullgraph=True)`` traces one node and CUDA graphs
    capture the launch; its backward is this op with ``inverse`` flipped (no copy, no extra
    buffer beyond the two gradients autograd asks for). Nothing is validated beyond what the
    kernels check: the public entry is :func:`apply_rotary`.
    """
    kernel = kernels.kernel_for(q.device)
    if kernel is None:
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        layout = "interleaved" if interleaved else "half"
        s = -sin if inverse else sin
        q_ref, k_ref = _reference_rows(q, k, cos, s, positions, row_offset, layout, rotary_dim, False)
        q_out.copy_(q_ref)
        k_out.copy_(k_ref)
        return q_out, k_out
    kernel = functools.partial(kernel, positions=positions, row_offset=row_offset)
    return rotated(kernel, q, k, cos, sin, interleaved, rotary_dim, inverse)


@rotary_op.register_fake
def _rotary_fake(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    rotary_dim: int,
    interleaved: bool,
    inverse: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k)


def _rotary_setup(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    _, _, cos, sin, positions, row_offset, rotary_dim, interleaved, inverse = inputs
    ctx.save_for_backward(cos, sin, positions)
    ctx.config = (row_offset, rotary_dim, interleaved, inverse)


def _rotary_backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
    cos, sin, positions = ctx.saved_tensors
    row_offset, rotary_dim, interleaved, inverse = ctx.config
    # the transpose of a rotation is the rotation by the negated angles: the same op, inverse flipped;
    # eager and without create_graph the kernel runs on the gradients directly (no dispatch)
    kernel = kernels.kernel_for(grad_q.device) if _plain_gradients(grad_q, grad_k) and not _is_compiling() else None
    if kernel is not None:
        kernel = functools.partial(kernel, positions=positions, row_offset=row_offset)
        gq, gk = rotated(kernel, grad_q, grad_k, cos, sin, interleaved, rotary_dim, not inverse)
    else:
        gq, gk = rotary_op(grad_q, grad_k, cos, sin, positions, row_offset, rotary_dim, interleaved, not inverse)
    return gq, gk, None, None, None, None, None, None, None


rotary_op.register_autograd(_rotary_backward, setup_context=_rotary_setup)


def _op_reads(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Whether the compiled path may use the op: a dtype the kernels read, no table gradients."""
    return q.dtype == k.dtype and q.dtype in _FUSED_DTYPES and not (cos.requires_grad or sin.requires_grad)


def _rotate_with_op(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    interleaved: bool,
    r: int,
    inplace: bool,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The compiled path through ``torch.ops.posenc.rotary`` (in place: the op, then a copy, which
    functionalisation turns back into a write of the op's outputs)."""
    tables = table_dtype(q.dtype)
    cos, sin = cos.to(tables), sin.to(tables)
    q_out, k_out = rotary_op(q, k, cos, sin, positions, row_offset, r, interleaved, False)
    if inplace:
        q.copy_(q_out)
        k.copy_(k_out)
        return q, k
    return q_out, k_out
