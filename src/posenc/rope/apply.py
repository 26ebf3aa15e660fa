"""Applying the rotation to queries and keys.

:func:`rotate_reference` is the plain PyTorch definition that every faster path is tested against.
:func:`apply_rotary` is the one public entry for prefill, decode and packed batches: tables plus a
``row_offset`` or per-token ``positions``. Every call takes one road (``docs/kernels.md`` draws it):
the argument check, once per layout (:func:`check_rotary_inputs`); the one "fused or reference?"
predicate (:func:`fused_kernel`); then one of three routes: the reference (which Inductor fuses with
its neighbours under ``torch.compile``), the autograd Functions (:class:`FusedRotary`, in place
:class:`FusedRotaryInplace`; backward = the same kernel by the negated angles), or the kernel
itself. Each kernel owns its per-layout state: the C kernel checks every operand on every call, the
Triton kernel keeps its checks per layout (:mod:`.kernels.plans`). Both take every stride and refuse
an output that shares memory with another operand unless it is exactly its own input; in place, q
and k may be one tensor (rotated once). The same rotation as one ``torch.library`` op, for code
that wants a single graph node, is :mod:`posenc.rope.op`.

Conventions (see :mod:`posenc.rope.layout`): pair ``i`` is ``(x[i], x[i + r/2])`` for
``layout="half"`` and ``(x[2i], x[2i+1])`` for ``layout="interleaved"``; each pair ``(a, b)`` becomes
``(a*cos - b*sin, a*sin + b*cos)``, a counter-clockwise rotation by the pair's angle. Only the first
``rotary_dim`` features of each head are rotated (partial rotary, as in GPT-NeoX/Phi); the rest pass
through unchanged.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Hashable, Optional, Tuple

import torch
import torch.autograd.forward_ad as _forward_ad

from .._checks import check_choice, check_int, check_position_dtype, check_positions, check_tensor
from . import kernels
from .kernels import Kernel, overlap, plans
from .layout import LAYOUTS

Pair = Tuple[torch.Tensor, torch.Tensor]


def rotate_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half", rotary_dim: Optional[int] = None
) -> torch.Tensor:
    """Rotate ``x`` by the angles whose cos/sin are given. Out of place.

    Args:
        x: (..., seq, head_dim) queries or keys.
        cos, sin: half-width tables broadcastable to (..., seq, rotary_dim // 2).
        layout: ``"half"`` or ``"interleaved"``.
        rotary_dim: rotated features per head (even, <= head_dim); ``None`` means all.

    Returns:
        (..., seq, head_dim), ``x``'s dtype. bf16/fp16 inputs are rotated in float32 and rounded
        once at the end.
    """
    head_dim = x.shape[-1]
    r = head_dim if rotary_dim is None else rotary_dim
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    rot = x[..., :r].to(compute)  # (..., S, r)
    c, s = cos.to(compute), sin.to(compute)  # (..., S, r/2)
    if layout == "half":
        a, b = rot[..., : r // 2], rot[..., r // 2 :]  # (..., S, r/2) each
        out = torch.cat((a * c - b * s, a * s + b * c), dim=-1)  # (..., S, r)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]  # (..., S, r/2) each
        out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)  # (..., S, r)
    out = out.to(x.dtype)
    if r == head_dim:
        return out
    return torch.cat((out, x[..., r:]), dim=-1)  # (..., S, D)


# -- the argument check, once per layout ----------------------------------------------------------
#: Argument layouts :func:`check_rotary_inputs` has accepted -> their rotary_dim (bounded).
_ACCEPTED: Dict[Hashable, int] = {}
_ACCEPTED_MAX = 1024
_accepted_lock = threading.Lock()
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_STRIDED = torch.strided


def check_dense(name: str, t: Any) -> None:
    """Raise ``TypeError`` naming ``name`` unless ``t`` is a dense strided tensor (not sparse,
    mkldnn or nested: the rotation addresses memory through strides)."""
    if isinstance(t, torch.Tensor) and (t.layout is not _STRIDED or t.is_nested):
        kind = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
        raise TypeError(
            f"{name} must be a dense strided tensor, got a {kind} tensor; convert it first "
            "(.to_dense(), or .to_padded_tensor(0.0) for a nested one)"
        )


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

    Everything checked here is a function of the arguments' types, layouts, shapes and dtypes, the
    layout name and rotary_dim, so a combination once accepted is remembered (a bounded,
    thread-safe cache) and the next call with it costs one dictionary lookup: the checks run once
    per layout, not once per layer and step. Anything else (tensor subclasses, code being traced by
    ``torch.compile``, an unusual rotary_dim) runs the checks every time.
    """
    if (
        type(q) in _PLAIN
        and type(k) in _PLAIN
        and type(cos) in _PLAIN
        and type(sin) in _PLAIN
        and q.layout is _STRIDED
        and k.layout is _STRIDED
        and not (q.is_nested or k.is_nested)
        and (rotary_dim is None or type(rotary_dim) is int)
        and type(layout) is str
        and not _is_compiling()
    ):
        shapes, dtypes = (q.shape, k.shape, cos.shape, sin.shape), (q.dtype, k.dtype, cos.dtype, sin.dtype)
        key = (*shapes, *dtypes, layout, rotary_dim, window)
        r = _ACCEPTED.get(key)
        if r is None:
            r = _remember(key, _check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window))
        return r
    return _check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window)


def _remember(key: Hashable, r: int) -> int:
    """Store an accepted combination's rotary_dim in the bounded cache; return it."""
    with _accepted_lock:
        while _ACCEPTED and len(_ACCEPTED) >= _ACCEPTED_MAX:  # a bound lowered at run time too
            _ACCEPTED.pop(next(iter(_ACCEPTED)))
        _ACCEPTED[key] = r
    return r


def _check_rotary_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    window: bool = False,
) -> int:
    for name, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        check_dense(name, t)
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


def _check_rotary_at(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Any,
    layout: str,
    r: Any,
    values: bool = True,
) -> int:
    """The checks of a call by ``positions`` (2-d tables, the positions' dtype, shape and, with
    ``values``, values ``>= 0``); return the resolved rotary_dim. The upper bound is the caller's.
    ``values=False`` leaves the values to the C kernel, which checks every position as it reads
    it; a later refusal here then names a bad value first, as ``values=True`` would have.

    What does not depend on the values is remembered per layout in the cache of
    :func:`check_rotary_inputs`, with the positions' shape and dtype in its key."""
    key: Optional[Hashable] = None
    if (
        type(q) in _PLAIN
        and type(k) in _PLAIN
        and type(cos) in _PLAIN
        and type(sin) in _PLAIN
        and type(positions) in _PLAIN
        and q.layout is _STRIDED
        and k.layout is _STRIDED
        and not (q.is_nested or k.is_nested)
        and positions.dtype in (torch.int64, torch.int32)
        and (r is None or type(r) is int)
        and type(layout) is str
        and not _is_compiling()
    ):
        shapes = (q.shape, k.shape, cos.shape, sin.shape, positions.shape)
        key = ("at", *shapes, q.dtype, k.dtype, cos.dtype, sin.dtype, positions.dtype, layout, r)
        seen = _ACCEPTED.get(key)
        if seen is not None:  # the layout was accepted: only the values are left
            if values:
                check_positions("positions", positions)
            return seen
    for name, t in (("q", q), ("k", k), ("cos_table", cos), ("sin_table", sin)):
        check_dense(name, t)
    check_tensor("q", q, ndim=4, floating=True)
    check_tensor("k", k, ndim=4, floating=True)
    check_tensor("cos_table", cos, ndim=2, floating=True)
    check_tensor("sin_table", sin, ndim=2, floating=True)
    if values:
        check_positions("positions", positions)
    elif not (isinstance(positions, torch.Tensor) and positions.dtype in (torch.int64, torch.int32)):
        check_position_dtype("positions", positions)  # int64 and int32 pass it; no copy made for them
    try:
        shape = positions.shape if positions.dim() != 1 else (1, *positions.shape)
        if len(shape) != 2 or shape[-1] != q.shape[2] or shape[0] not in (1, q.shape[0]):
            raise ValueError(
                f"positions must have shape (batch or 1, seq) = ({q.shape[0]} or 1, {q.shape[2]}) "
                f"or ({q.shape[2]},), got {tuple(positions.shape)}"
            )
        if cos.shape != sin.shape:
            raise ValueError(
                f"cos_table and sin_table must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
            )
        resolved = check_rotary_inputs(q, k, cos, sin, layout, r, window=True)
    except (ValueError, TypeError):
        if not values:
            _raise_bad_values(positions)
        raise
    return resolved if key is None else _remember(key, resolved)


def _raise_bad_values(positions: torch.Tensor) -> None:
    """Raise the ``ValueError`` of :func:`check_positions` (the first negative position and its
    index) if ``positions`` has a negative value; a refused call's path only, as it reads them back."""
    try:
        check_positions("positions", positions)
    except ValueError as exc:
        raise exc from None


def _checked_offset(row_offset: Any, positions: Optional[torch.Tensor]) -> int:
    """``row_offset`` as an int (0 for ``None``), refused by name unless an int >= 0, and unless 0
    or ``None`` beside ``positions`` (which already name every token's row)."""
    if row_offset is None:
        return 0
    offset = check_int("row_offset", row_offset, minimum=0)  # a bool, a float, a string, -5: refused
    if offset and positions is not None:
        raise ValueError(
            f"row_offset must be 0 or None when positions are given (they name every token's row), "
            f"got {offset}; add the offset to the positions instead"
        )
    return offset


# -- the one entry ----------------------------------------------------------------------------------
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
    row_offset: Optional[int] = None,
) -> Pair:
    """Rotate queries and keys (never values) by their positions' angles: the one entry for prefill,
    decode and packed batches.

    Args:
        q: (batch, q_heads, seq, head_dim).
        k: (batch, kv_heads, seq, head_dim); kv_heads may differ from q_heads (GQA/MQA).
        cos, sin: the half-width tables of :func:`posenc.rope.tables.rope_cos_sin`, shared by all
            heads: (batch or 1, rows, rotary_dim // 2) or (rows, rotary_dim // 2). Which rows a
            token reads: row ``s`` for position ``s`` (then rows = seq); row ``row_offset + s``
            (a decode step: ``row_offset`` tokens are already in the KV cache); or row
            ``positions[b, s]`` (packed and variable-length batches; then (rows, rotary_dim // 2)).
        layout: ``"half"`` (GPT-NeoX / Hugging Face) or ``"interleaved"`` (GPT-J / Meta).
        rotary_dim: rotated features per head; ``None`` means ``head_dim``.
        inplace: write the result into ``q`` and ``k`` and return them. ``q`` and ``k`` may be the
            same tensor (it is rotated once, as the reference would); any other overlap between
            them raises ``ValueError``.
        validate: check shapes, dtypes and the layout name (once per layout). ``False`` is for
            callers that already did; memory safety does not depend on it, because the fused
            kernels check strides, bounds and overlap themselves.
        positions: (batch or 1, seq) or (seq,) integer rows of the tables, as in
            :func:`apply_rotary_at`; ``None`` for consecutive rows.
        row_offset: the first row read without ``positions``, ``0 <= row_offset <= rows - seq``;
            ``None`` (the default) means the tables have exactly ``seq`` rows. With ``positions``
            it must be 0 or ``None``.

    Returns:
        ``(q_rotated, k_rotated)`` with the shapes and dtypes of ``q`` and ``k``.

    Any strides are accepted (transposed, sliced, expanded inputs; expanded outputs are refused).
    The fused paths compute in float32 (float64 for float64 inputs) and round once, like the
    reference; on CPU they agree with it bit for bit.
    """
    if type(row_offset) is int and row_offset >= 0 and positions is None:
        offset = row_offset
    else:
        offset = _checked_offset(row_offset, positions)
    kernel = fused_kernel(q, k, cos, sin, positions, inplace=inplace)  # the one predicate, once per call
    if positions is not None:
        given = positions
        positions, deferred = _checked_positions(
            q, k, cos, sin, positions, layout, rotary_dim, inplace, validate, kernel
        )
        r = q.shape[-1] if rotary_dim is None else rotary_dim
        if deferred:  # the C kernel checks the values
            try:
                return _rotate(q, k, cos, sin, positions, offset, layout, r, inplace, kernel)
            except Exception:
                _raise_bad_values(given)  # a negative position is named first, as validate promises
                raise
    elif validate:
        r = check_rotary_inputs(q, k, cos, sin, layout, rotary_dim, window=row_offset is not None)
        if row_offset is not None and offset + q.shape[2] > cos.shape[-2]:
            raise ValueError(
                f"row_offset + seq - 1 must be < {cos.shape[-2]} (the number of table rows), got "
                f"{offset + q.shape[2] - 1}; grow the table first (RotaryEmbedding.extend)"
            )
    else:
        r = q.shape[-1] if rotary_dim is None else rotary_dim
    return _rotate(q, k, cos, sin, positions, offset, layout, r, inplace, kernel)


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
) -> Pair:
    """:func:`apply_rotary` with ``positions``: rotate q (B, Hq, S, D) and k (B, Hk, S, D) by rows
    ``positions[b, s]`` ((B|1, S) or (S,) integers in ``[0, rows)``) of ``cos_table``/``sin_table``
    (rows, rotary_dim // 2), for packed and variable-length batches (positions restart at each
    document: ``[0, 1, 2, 0, 1, 0, 1, 2, 3]``); no per-token copy of the tables is made. With
    ``validate=False`` the CPU kernel still checks every position; the Triton kernel never reads
    outside the table (an out-of-range position rotates its token by NaN: no host synchronisation).
    Returns ``(q_rotated, k_rotated)``, equal to ``apply_rotary(q, k, cos_table[positions],
    sin_table[positions], ...)``.
    """
    return apply_rotary(
        q,
        k,
        cos_table,
        sin_table,
        layout=layout,
        rotary_dim=rotary_dim,
        inplace=inplace,
        validate=validate,
        positions=positions,
    )


def _checked_positions(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    layout: str,
    rotary_dim: Optional[int],
    inplace: bool,
    validate: bool,
    kernel: Optional[Kernel],
) -> Tuple[torch.Tensor, bool]:
    """Positions as the kernels and the reference read them, (B|1, S) int64 or int32, checked, and
    whether checking their values was left to the C kernel.

    With ``validate`` the arguments and the positions' values are checked; the reference path
    checks the values even without it (indexing would wrap a negative position around). The C
    kernel checks every position against the table itself, as it reads them, so for it nothing is
    read back here: only a refused call reads the positions back, to name the first negative one
    (see :func:`apply_rotary`)."""
    by_c_kernel = kernel is not None and kernel is kernels.cpu_kernel()
    if validate:
        _check_rotary_at(q, k, cos, sin, positions, layout, rotary_dim, values=not by_c_kernel)
    if positions.dim() == 1:
        positions = positions.unsqueeze(0)  # (1, S)
    fused = kernel is not None
    if not fused and not validate:
        check_positions("positions", positions)
    if (validate or not fused) and positions.numel() and not _is_compiling() and not (fused and q.is_cpu):
        rows, top = cos.shape[0], int(positions.max())
        if top >= rows:
            raise ValueError(
                f"positions must be < {rows} (the number of table rows), got a maximum of {top}; "
                "grow the table first (RotaryEmbedding.extend)"
            )
    if positions.dtype not in (torch.int64, torch.int32):
        positions = positions.long()  # uint8 would index as a boolean mask; the kernels read int64/int32
    return positions, validate and by_c_kernel


# -- the one predicate ------------------------------------------------------------------------------
# A private PyTorch function: there is no public way to ask whether a tensor is a functorch (vmap,
# grad) wrapper, which no fused kernel can read. It waits for a public predicate in torch.func;
# tests/rope/test_kernel_dispatch.py::test_functorch_wrapper_probe_is_still_there fails loudly if this one goes.
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_is_compiling = torch.compiler.is_compiling
_CPU = torch.device("cpu")
_FUSED_DTYPES = frozenset((torch.float32, torch.bfloat16, torch.float16, torch.float64))


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

    ``None`` means the reference: under ``torch.compile`` (asked first, before any kernel is
    loaded: loading takes a lock, which Dynamo cannot trace), tensor subclasses, ``vmap``/functorch
    wrappers, a dtype no kernel reads, operands on different devices (the reference raises torch's
    own error), a device without a fused kernel, tables that want gradients, or an in-place call on
    a lazily negated q or k (only torch's own ops keep the bit's meaning when writing).

    Strides and aliasing do not matter here: both kernels take every stride of every operand and
    check overlap themselves.
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
    kernel: Optional[Kernel],
) -> Pair:
    """The rotation of checked arguments: q (B, Hq, S, D), k (B, Hk, S, D); tables (B|1, rows, r/2)
    or (rows, r/2); positions (B|1, S) int64/int32, or ``None`` for rows ``row_offset + s``. Takes
    the reference (``kernel`` ``None``), the autograd Functions or the kernel, as
    :func:`fused_kernel` said for these arguments."""
    inference = inplace and not _is_compiling() and (q.is_inference() or k.is_inference())
    if inference and not torch.is_inference_mode_enabled():
        raise RuntimeError(  # torch's rule, checked before anything is written (torch's ops write first)
            "Inplace update to inference tensor outside InferenceMode is not allowed: q or k was made "
            "under torch.inference_mode(); pass inplace=False, or rotate a .clone() of it"
        )
    if kernel is None:  # the reference (under torch.compile: what Inductor fuses with its neighbours)
        if cos.dim() == 2:
            cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)  # (1, rows, r/2)
        return reference_rows(q, k, cos, sin, positions, row_offset, layout, r, inplace)
    interleaved = layout == "interleaved"
    tables = torch.float64 if q.dtype is torch.float64 else torch.float32  # the kernels' compute dtype
    if cos.dtype is not tables or sin.dtype is not tables:
        cos, sin = cos.to(tables), sin.to(tables)  # (B|1, rows, r/2) or (rows, r/2)
    if (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)) or _forward_ad_active():
        return _rotate_with_autograd(q, k, cos, sin, positions, row_offset, kernel, interleaved, r, inplace)
    shared = inplace and _inplace_aliasing(q, k, full=False)  # q and k one view: rotated once
    if shared:
        k = q[:, :0]  # (B, 0, S, D): no heads
    q_out, k_out = (q, k) if inplace else (torch.empty_like(q), torch.empty_like(k))  # q's, k's layout where dense
    kernel(
        q, k, q_out, k_out, cos, sin, interleaved=interleaved, rotary_dim=r, positions=positions, row_offset=row_offset
    )
    if inplace:
        torch.autograd.graph.increment_version((q, k))  # as any in-place op does: autograd sees the write
    return (q, q) if shared else (q_out, k_out)


def _rotate_with_autograd(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    kernel: Kernel,
    interleaved: bool,
    r: int,
    inplace: bool,
) -> Pair:
    """The fused rotation as autograd nodes: :class:`FusedRotary` out of place, one
    :class:`FusedRotaryInplace` per tensor in place (q and k one view: one node)."""
    rows = (positions, row_offset, kernel, interleaved, r)
    if not inplace:
        q_out: torch.Tensor
        k_out: torch.Tensor
        q_out, k_out = FusedRotary.apply(q, k, cos, sin, *rows, False)
        return q_out, k_out
    if _inplace_aliasing(q, k, full=True):
        q = FusedRotaryInplace.apply(q, cos, sin, *rows)
        return q, q
    q_done: torch.Tensor = FusedRotaryInplace.apply(q, cos, sin, *rows)
    k_done: torch.Tensor = FusedRotaryInplace.apply(k, cos, sin, *rows)
    return q_done, k_done


# -- the autograd Functions -------------------------------------------------------------------------
class FusedRotary(torch.autograd.Function):
    """A fused out-of-place rotation of (q, k) as an autograd node (backward and forward mode).

    ``FusedRotary.apply(q, k, cos, sin, positions, row_offset, kernel, interleaved, rotary_dim,
    inverse) -> (q_out, k_out)``, shapes as in :func:`apply_rotary` (tables in the kernel's dtype).

    The rotation is linear and orthogonal, so its backward is its transpose, the rotation by the
    negated angles: ``grad_q = R(-theta) grad_q'``, the same kernel with ``inverse`` flipped. With
    plain gradients and no graph to build it is called on them directly (the two gradients are the
    only allocations; expanded gradients are read as they are); under ``create_graph`` or with
    functorch's wrapped gradients it goes through this Function again, so double backward works.
    cos/sin get no gradient (the predicate sends tables that require one to the reference).

    In place with gradients goes through :class:`FusedRotaryInplace`, one tensor per node: autograd
    refuses a Function that modifies a view in place and returns two tensors, and q and k usually
    are views (of one qkv projection).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        positions: Optional[torch.Tensor],
        row_offset: int,
        kernel: Kernel,
        interleaved: bool,
        rotary_dim: int,
        inverse: bool,
    ) -> Pair:
        ctx.save_for_backward(cos, sin, positions)
        ctx.save_for_forward(cos, sin, positions)
        ctx.config = (row_offset, kernel, interleaved, rotary_dim, inverse)
        return rotated(kernel, q, k, cos, sin, positions, row_offset, interleaved, rotary_dim, inverse)

    @staticmethod
    def jvp(ctx: Any, tangent_q: torch.Tensor, tangent_k: torch.Tensor, *_: Any) -> Pair:
        """Forward-mode AD: the rotation is linear, so the tangents rotate like the inputs."""
        cos, sin, positions = ctx.saved_tensors
        row_offset, kernel, interleaved, rotary_dim, inverse = ctx.config
        return rotated(kernel, tangent_q, tangent_k, cos, sin, positions, row_offset, interleaved, rotary_dim, inverse)

    @staticmethod
    def backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        cos, sin, positions = ctx.saved_tensors
        row_offset, kernel, interleaved, r, inverse = ctx.config
        if _plain_gradients(grad_q, grad_k):
            gq, gk = rotated(kernel, grad_q, grad_k, cos, sin, positions, row_offset, interleaved, r, not inverse)
        else:  # create_graph, or wrapped gradients: a node of its own (double backward)
            gq, gk = FusedRotary.apply(
                grad_q, grad_k, cos, sin, positions, row_offset, kernel, interleaved, r, not inverse
            )
        return gq, gk, None, None, None, None, None, None, None, None


class FusedRotaryInplace(torch.autograd.Function):
    """Rotate one tensor in place as an autograd node (q or k alone; see :class:`FusedRotary`).

    ``FusedRotaryInplace.apply(x, cos, sin, positions, row_offset, kernel, interleaved, rotary_dim)
    -> x``, x (B, H, S, D) rotated in place and marked dirty.
    """

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        positions: Optional[torch.Tensor],
        row_offset: int,
        kernel: Kernel,
        interleaved: bool,
        rotary_dim: int,
    ) -> torch.Tensor:
        ctx.config = (row_offset, kernel, interleaved, rotary_dim)
        _rotate_one(x, x, cos, sin, positions, ctx.config, False)  # (B, H, S, D), in place
        ctx.mark_dirty(x)
        ctx.save_for_backward(cos, sin, positions)
        ctx.save_for_forward(cos, sin, positions)
        return x

    @staticmethod
    def jvp(ctx: Any, tangent: torch.Tensor, *_: Any) -> torch.Tensor:
        """Forward-mode AD: the tangent is rotated in place like the input."""
        cos, sin, positions = ctx.saved_tensors
        if tangent.is_neg():
            tangent = tangent.resolve_neg()  # the kernel writes raw memory
        dense = tangent if not overlap.self_overlaps(tangent) else tangent.contiguous()  # (B, H, S, D)
        _rotate_one(dense, dense, cos, sin, positions, ctx.config, False)
        if dense is tangent:
            torch.autograd.graph.increment_version(tangent)  # the kernel wrote behind autograd's back
        else:
            tangent.copy_(dense)
        return tangent

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        cos, sin, positions = ctx.saved_tensors
        if _plain_gradients(grad, grad):
            g = torch.empty_like(grad)  # (B, H, S, D): the one allocation, the gradient autograd asks for
            _rotate_one(grad, g, cos, sin, positions, ctx.config, True)
        else:  # create_graph, or a wrapped gradient: a node of its own (double backward)
            row_offset, kernel, interleaved, r = ctx.config
            none = grad[:, :0]  # (B, 0, S, D): no heads, a view
            g, _ = FusedRotary.apply(grad, none, cos, sin, positions, row_offset, kernel, interleaved, r, True)
        return g, None, None, None, None, None, None, None


def _rotate_one(
    x: torch.Tensor,
    out: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    config: Tuple[int, Kernel, bool, int],
    inverse: bool,
) -> None:
    """The kernel's rotation of one tensor, x (B, H, S, D), into out (x itself in place), by the
    ``(row_offset, kernel, interleaved, rotary_dim)`` of a :class:`FusedRotaryInplace` node."""
    row_offset, kernel, interleaved, r = config
    none = x[:, :0]  # (B, 0, S, D): the k of a call with no heads
    kernel(
        x,
        none,
        out,
        none,
        cos,
        sin,
        interleaved=interleaved,
        rotary_dim=r,
        inverse=inverse,
        positions=positions,
        row_offset=row_offset,
    )


def rotated(
    kernel: Kernel,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    interleaved: bool,
    rotary_dim: int,
    inverse: bool = False,
) -> Pair:
    """``kernel``'s rotation of q (B, Hq, S, D) and k (B, Hk, S, D) into two new tensors
    (``torch.empty_like``: the inputs' layout where dense), the only allocations: the fused
    out-of-place forward, its tangents, its backward and the op all come through here."""
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)  # (B, Hq, S, D), (B, Hk, S, D)
    kernel(
        q,
        k,
        q_out,
        k_out,
        cos,
        sin,
        interleaved=interleaved,
        rotary_dim=rotary_dim,
        inverse=inverse,
        positions=positions,
        row_offset=row_offset,
    )
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


# -- the in-place rules -----------------------------------------------------------------------------
def _inplace_aliasing(q: torch.Tensor, k: torch.Tensor, full: bool) -> bool:
    """Rules for ``inplace=True``; returns whether q and k are one view (then it is rotated once).

    With ``full`` (paths where no kernel sees q and k together: the reference, and the autograd
    Functions, which rotate q and k in separate calls) it also raises ``ValueError`` when q and k
    overlap otherwise, or when either has elements that share memory. The fused direct path leaves
    those checks to the kernel, which applies the same rule.
    """
    if _is_compiling() or not (type(q) in _PLAIN and type(k) in _PLAIN) or q.is_meta or k.is_meta:
        return False  # no memory to alias (compile, subclasses, meta)
    if _is_functorch_wrapped(q) or _is_functorch_wrapped(k):
        return False
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


# -- the reference ----------------------------------------------------------------------------------
def apply_reference(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, r: int, inplace: bool
) -> Pair:
    """The reference path of :func:`apply_rotary` for checked inputs: q (B, Hq, S, D), k (B, Hk, S,
    D), ``cos``/``sin`` (B|1, S, r/2) broadcast over heads; ``r`` the resolved rotary_dim. Also
    what ``posenc bench`` times."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B|1, 1, S, r/2): over heads
    q_out = rotate_reference(q, cos, sin, layout=layout, rotary_dim=r)  # (B, Hq, S, D)
    k_out = rotate_reference(k, cos, sin, layout=layout, rotary_dim=r)  # (B, Hk, S, D)
    if inplace:
        q.copy_(q_out)
        k.copy_(k_out)
        return q, k
    return q_out, k_out


def reference_rows(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: Optional[torch.Tensor],
    row_offset: int,
    layout: str,
    r: int,
    inplace: bool,
) -> Pair:
    """The reference on the rows a call names: q (B, Hq, S, D), k (B, Hk, S, D), ``cos``/``sin``
    (B|1, rows, r/2), positions (B|1, S) or ``None`` for rows ``row_offset .. row_offset + S - 1``;
    ``r`` the resolved rotary_dim. Returns the rotated (q, k) (in place: q and k themselves)."""
    seq = q.shape[2]
    if positions is not None:
        # (B|1, S, r/2): a batch of tables is indexed row by row, one shared table by positions alone
        if cos.shape[0] == 1:
            cos, sin = cos[0][positions], sin[0][positions]
        else:
            batch = torch.arange(cos.shape[0], device=cos.device).unsqueeze(1)  # (B, 1)
            cos, sin = cos[batch, positions], sin[batch, positions]
    elif row_offset or cos.shape[1] != seq:
        cos, sin = cos[:, row_offset : row_offset + seq], sin[:, row_offset : row_offset + seq]  # (B|1, S, r/2)
    if inplace and _inplace_aliasing(q, k, full=True):  # one tensor: rotated once
        q.copy_(rotate_reference(q, cos.unsqueeze(1), sin.unsqueeze(1), layout=layout, rotary_dim=r))
        return q, q
    return apply_reference(q, k, cos, sin, layout, r, inplace)
