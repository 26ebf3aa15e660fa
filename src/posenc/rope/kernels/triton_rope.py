"""The Triton rotation kernel: q and k of one token per program, every head, one launch.

Grid: one program per (batch, position). Every operand is addressed through its own strides (all
four dims of q, k and the outputs, all three of cos and sin, both of positions), and
:func:`check_operands` refuses overlapping outputs before the launch, as the C kernel does.
A program loads its position's half-width cos/sin row once
(through ``positions`` when given, so packed variable-length batches need no gathered copy of the
table), then walks the q heads and the k heads in blocks of ``BLOCK_H``. Each element of q and k is
read once and written once; GQA needs nothing special because the heads of q and of k are separate
loops over the same cos/sin registers.

The rotation is computed in the tables' dtype (float32, or float64 for float64 inputs) and rounded to
the storage dtype once, like :func:`posenc.rope.apply.rotate_reference`. ``INVERSE`` negates sin,
which turns the rotation into its inverse (its transpose): that is the backward pass.

The same code runs on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1`` set before
``triton`` is imported), which is how the test suite checks it without a GPU.
"""

from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

import torch
import triton
import triton.language as tl

from . import overlap, plans
from .contract import DATA_DTYPES, check_ranks, table_dtype, table_geometry


# triton.jit carries no annotations, and triton reads a kernel's parameter annotations itself
# (tl.constexpr), so the kernel parameters stay unannotated (hence the two ignores).
@triton.jit  # type: ignore[untyped-decorator]
def _rotate_heads(  # type: ignore[no-untyped-def]
    x_ptr,
    y_ptr,
    n_heads,
    xs_h,
    xs_d,
    ys_h,
    ys_d,
    c,
    s,
    offs_a,
    offs_b,
    mask_r,
    HALF_R: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_REST: tl.constexpr,
    COPY_REST: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    for h0 in range(0, n_heads, BLOCK_H):
        heads = h0 + tl.arange(0, BLOCK_H)
        mask_h = heads < n_heads
        mask = mask_h[:, None] & mask_r[None, :]
        x_row = x_ptr + heads[:, None].to(tl.int64) * xs_h
        y_row = y_ptr + heads[:, None].to(tl.int64) * ys_h
        a = tl.load(x_row + offs_a[None, :] * xs_d, mask=mask, other=0.0).to(c.dtype)  # (BLOCK_H, BLOCK_R)
        b = tl.load(x_row + offs_b[None, :] * xs_d, mask=mask, other=0.0).to(c.dtype)
        new_a = a * c[None, :] - b * s[None, :]
        new_b = a * s[None, :] + b * c[None, :]
        tl.store(y_row + offs_a[None, :] * ys_d, new_a.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(y_row + offs_b[None, :] * ys_d, new_b.to(y_ptr.dtype.element_ty), mask=mask)
        if COPY_REST:
            offs_rest = 2 * HALF_R + tl.arange(0, BLOCK_REST)
            mask_rest = mask_h[:, None] & (offs_rest < HEAD_DIM)[None, :]
            rest = tl.load(x_row + offs_rest[None, :].to(tl.int64) * xs_d, mask=mask_rest, other=0.0)
            tl.store(y_row + offs_rest[None, :].to(tl.int64) * ys_d, rest, mask=mask_rest)


# triton.jit carries no annotations, and triton reads a kernel's parameter annotations itself
# (tl.constexpr), so the kernel parameters stay unannotated (hence the two ignores).
@triton.jit(do_not_specialize=["row_offset"])  # type: ignore[untyped-decorator]
def _rope_kernel(  # type: ignore[no-untyped-def]
    q_ptr,
    k_ptr,
    qo_ptr,
    ko_ptr,
    cos_ptr,
    sin_ptr,
    pos_ptr,
    seq,
    n_qh,
    n_kh,
    rows,
    row_offset,
    qs_b,
    qs_h,
    qs_s,
    qs_d,
    qos_b,
    qos_h,
    qos_s,
    qos_d,
    ks_b,
    ks_h,
    ks_s,
    ks_d,
    kos_b,
    kos_h,
    kos_s,
    kos_d,
    cs_b,
    cs_s,
    cs_i,
    ss_b,
    ss_s,
    ss_i,
    ps_b,
    ps_s,
    HALF_R: tl.constexpr,
    BLOCK_R: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_REST: tl.constexpr,
    COPY_REST_Q: tl.constexpr,
    COPY_REST_K: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    HAS_POS: tl.constexpr,
    INVERSE: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    b = pid // seq
    t = pid % seq
    offs = tl.arange(0, BLOCK_R)
    mask_r = offs < HALF_R
    if HAS_POS:
        row = tl.load(pos_ptr + b * ps_b + t * ps_s).to(tl.int64)
        # never read outside the table: an out-of-range position (possible only when the caller
        # skipped validation) rotates by NaN instead, visibly wrong rather than a stray read
        valid = (row >= 0) & (row < rows)
        row = tl.where(valid, row, 0)  # row 0 exists: check_operands refuses rows == 0
        c = tl.load(cos_ptr + b * cs_b + row * cs_s + offs * cs_i, mask=mask_r, other=0.0)
        s = tl.load(sin_ptr + b * ss_b + row * ss_s + offs * ss_i, mask=mask_r, other=0.0)
        c = tl.where(valid, c, float("nan"))
        s = tl.where(valid, s, float("nan"))
    else:
        row = t + row_offset  # checked on the host: row_offset + seq <= rows
        c = tl.load(cos_ptr + b * cs_b + row * cs_s + offs * cs_i, mask=mask_r, other=0.0)
        s = tl.load(sin_ptr + b * ss_b + row * ss_s + offs * ss_i, mask=mask_r, other=0.0)
    if INVERSE:
        s = -s
    if INTERLEAVED:
        offs_a = (2 * offs).to(tl.int64)
        offs_b = (2 * offs + 1).to(tl.int64)
    else:
        offs_a = offs.to(tl.int64)
        offs_b = (offs + HALF_R).to(tl.int64)
    _rotate_heads(
        q_ptr + b * qs_b + t * qs_s,
        qo_ptr + b * qos_b + t * qos_s,
        n_qh,
        qs_h,
        qs_d,
        qos_h,
        qos_d,
        c,
        s,
        offs_a,
        offs_b,
        mask_r,
        HALF_R,
        HEAD_DIM,
        BLOCK_REST,
        COPY_REST_Q,
        BLOCK_H,
    )
    _rotate_heads(
        k_ptr + b * ks_b + t * ks_s,
        ko_ptr + b * kos_b + t * kos_s,
        n_kh,
        ks_h,
        ks_d,
        kos_h,
        kos_d,
        c,
        s,
        offs_a,
        offs_b,
        mask_r,
        HALF_R,
        HEAD_DIM,
        BLOCK_REST,
        COPY_REST_K,
        BLOCK_H,
    )


def check_operands(
    q: torch.Tensor,
    k: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    rotary_dim: int,
    positions: Optional[torch.Tensor] = None,
) -> None:
    """The C kernel's checks, in Python: shapes, dtypes and memory overlap (see ``rope_kernel.c``).

    Positions are not range-checked here (that would read them back to the host); the kernel masks
    out-of-range rows instead.
    """
    check_ranks(q, k, q_out, k_out, cos, sin)
    if q.dtype not in DATA_DTYPES or not (q.dtype == k.dtype == q_out.dtype == k_out.dtype):
        raise TypeError(
            "the fused kernel needs q, k, q_out and k_out of one dtype among float32, "
            f"bfloat16, float16, float64, got {[t.dtype for t in (q, k, q_out, k_out)]}"
        )
    tables = table_dtype(q.dtype)
    if cos.dtype != tables or sin.dtype != tables:
        raise TypeError(f"cos and sin must be {tables} for {q.dtype} q, got {cos.dtype} and {sin.dtype}")
    batch, _, seq, head_dim = q.shape
    if (
        (k.shape[0], k.shape[2], k.shape[3]) != (batch, seq, head_dim)
        or q_out.shape != q.shape
        or k_out.shape != k.shape
    ):
        raise ValueError(
            f"k must be (B, Hk, S, D) with q's B, S, D and q_out/k_out the shapes of q/k, got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, q_out {tuple(q_out.shape)}, "
            f"k_out {tuple(k_out.shape)}"
        )
    if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be even and in [2, head_dim={head_dim}], got {rotary_dim}")
    (table_batch, rows, half), _ = table_geometry(cos)
    if cos.shape != sin.shape or table_batch not in (1, batch) or half != rotary_dim // 2:
        raise ValueError(
            f"cos and sin must both be ((B or 1,) rows, rotary_dim // 2 = {rotary_dim // 2}), "
            f"got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if positions is None:
        if batch * seq and rows < seq:
            raise ValueError(f"cos/sin cover {rows} positions but q/k have seq={seq}")
    else:
        if positions.dim() != 2 or positions.shape[0] not in (1, batch) or positions.shape[1] != seq:
            raise ValueError(f"positions must be (B or 1, S) = ({batch} or 1, {seq}), got {tuple(positions.shape)}")
        if batch * seq and rows == 0:
            raise ValueError("positions must be < 0 (the number of table rows): the tables are empty")
        if positions.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"positions must be int64 or int32 here, got {positions.dtype}")
    inputs = [("q", q), ("k", k), ("cos", cos), ("sin", sin)]
    if positions is not None:
        inputs.append(("positions", positions))
    overlap.check_outputs(inputs, [("q_out", q_out), ("k_out", k_out)])


def _check_offset(row_offset: int, rows: int, seq: int) -> None:
    """Rows ``row_offset .. row_offset + seq - 1`` must exist (a host-side integer check)."""
    if isinstance(row_offset, bool) or not isinstance(row_offset, int) or row_offset < 0:
        raise ValueError(f"row_offset must be an int >= 0, got {row_offset!r}")
    if row_offset > rows - seq:
        raise ValueError(
            f"row_offset + seq - 1 must be < {rows} (the number of table rows), got {row_offset + seq - 1}; "
            "grow the table first (RotaryEmbedding.extend)"
        )


#: Launch shape: ``max_tile`` elements of a and of b per step of the head loop, and ``num_warps``
#: (``None``: Triton's default). Read when a layout's plan is built; ``plans.clear()`` after a change.
#: ``benchmarks/gpu_check.py`` times alternatives on the GPU.
LAUNCH: Dict[str, Any] = {"max_tile": 4096, "num_warps": None}


#: A call's operands in the kernel's order: (q, k, q_out, k_out, cos, sin, positions or None).
Operands = Tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]
]


def _launch_constants(
    operands: Operands, rotary_dim: int, interleaved: bool, inverse: bool
) -> Tuple[Tuple[int, ...], Tuple[int, ...], Dict[Tuple[bool, bool], Dict[str, Any]], Dict[str, Any]]:
    """The kernel's integer arguments before and after ``row_offset``, its constexprs (by whether
    the tail is copied into q_out and k_out) and its launch options, for a checked layout (they
    depend on shapes and strides only, and on :data:`LAUNCH`)."""
    q, k, q_out, k_out, cos, sin, positions = operands
    batch, n_qh, seq, head_dim = q.shape
    half = rotary_dim // 2
    rest = head_dim - rotary_dim
    (table_batch, rows, _), cos_strides = table_geometry(cos)
    _, sin_strides = table_geometry(sin)
    if table_batch == 1:  # one table for every row of the batch
        cos_strides, sin_strides = (0, *cos_strides[1:]), (0, *sin_strides[1:])
    position_strides = (0, 0)
    if positions is not None:
        position_strides = (positions.stride(0) if positions.shape[0] > 1 else 0, positions.stride(1))
    # heads per step: all of them, but at most LAUNCH["max_tile"] elements of a/b per tile (registers)
    tile = LAUNCH["max_tile"]
    block_h = max(1, min(triton.next_power_of_2(max(n_qh, k.shape[1], 1)), tile // triton.next_power_of_2(half)))
    before = (seq, n_qh, k.shape[1], rows)
    # every stride parameter of the kernel, in its order: q, q_out, k, k_out, cos, sin, positions
    strides = (q.stride(), q_out.stride(), k.stride(), k_out.stride(), cos_strides, sin_strides, position_strides)
    after = tuple(n for operand in strides for n in operand)
    # the constexprs for each answer to "is q_out (k_out) exactly q (k)?", which decides per call
    # whether the untouched tail of a partial rotation is copied; kept in the kernel's order
    constexprs = {
        (copy_q, copy_k): dict(
            HALF_R=half,
            BLOCK_R=triton.next_power_of_2(half),
            HEAD_DIM=head_dim,
            BLOCK_REST=triton.next_power_of_2(max(rest, 1)),
            COPY_REST_Q=copy_q,
            COPY_REST_K=copy_k,
            INTERLEAVED=bool(interleaved),
            HAS_POS=positions is not None,
            INVERSE=bool(inverse),
            BLOCK_H=block_h,
        )
        for copy_q in (False, True)
        for copy_k in (False, True)
    }
    options = {} if LAUNCH["num_warps"] is None else {"num_warps": int(LAUNCH["num_warps"])}
    return before, after, constexprs, options


def rotate(
    q: torch.Tensor,
    k: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool,
    rotary_dim: int,
    inverse: bool = False,
    positions: Optional[torch.Tensor] = None,
    row_offset: int = 0,
) -> None:
    """Write the rotation of ``q``/``k`` into ``q_out``/``k_out`` (each may be its own input).

    Same contract as :func:`posenc.rope.kernels.cpu.rotate`: q (B, Hq, S, D), k (B, Hk, S, D), one
    dtype, any strides; cos/sin (B|1, rows, rotary_dim // 2) or (rows, rotary_dim // 2) in float32
    (float64 for float64 q), any strides; ``positions`` (B|1, S) int64/int32 indexing ``rows``. A
    position outside ``[0, rows)`` gives NaN for that token. Without ``positions``, position ``s``
    reads row ``row_offset + s`` (``0 <= row_offset <= rows - S``). Inputs with the lazy negation
    bit are resolved, outputs with it refused (:func:`.overlap.resolve_lazy_inputs`).

    The checks of :func:`check_operands` run once per layout (:mod:`.plans`); later calls with that
    layout pay only the pointer-interval test for aliasing, which falls back to the exact search
    (cached per pointer difference) when two operands' byte ranges meet. Then one launch covers q
    and k, through ``JITFunction``'s own launch.
    """
    if q.is_neg() or k.is_neg() or cos.is_neg() or sin.is_neg() or q_out.is_neg() or k_out.is_neg():
        q, k, cos, sin = overlap.resolve_lazy_inputs(q, k, cos, sin, q_out, k_out)
    if positions is not None and positions.is_neg():
        positions = positions.resolve_neg()
    operands: Operands = (q, k, q_out, k_out, cos, sin, positions)
    key = plans.layout_key(operands, (rotary_dim, bool(interleaved), bool(inverse)))
    plan = plans.cached(key)
    if plan is None:  # a new layout: the full checks on this call's operands, then the plan
        check = functools.partial(_check_layout, operands, rotary_dim)
        launch = functools.partial(_launch_constants, operands, rotary_dim, bool(interleaved), bool(inverse))
        plan = plans.plan_for(key, operands, check, launch)
    ptrs = tuple(0 if t is None else t.data_ptr() for t in operands)
    if not plans.disjoint(plan, ptrs):
        _check_layout(operands, rotary_dim)  # raises the full check's explanation
        raise ValueError("an output shares memory with another operand")  # pragma: no cover
    batch, _, seq, head_dim = q.shape
    if positions is None and row_offset:
        _check_offset(row_offset, cos.shape[-2], seq)
    if batch * seq == 0:
        return
    # the untouched tail is copied unless that output is exactly its own input
    rest = head_dim > rotary_dim
    copy_q = rest and not (ptrs[2] == ptrs[0] and plan.same_layout[0])
    copy_k = rest and not (ptrs[3] == ptrs[1] and plan.same_layout[1])
    before, after, constexprs, options = plan.launch
    pos = cos if positions is None else positions  # never read without HAS_POS
    _rope_kernel[(batch * seq,)](
        q, k, q_out, k_out, cos, sin, pos, *before, row_offset, *after, **constexprs[copy_q, copy_k], **options
    )


def _check_layout(operands: Operands, rotary_dim: int) -> None:
    """The full checks of one call's operands (one device, then :func:`check_operands`)."""
    devices = {t.device for t in operands if t is not None}
    if len(devices) > 1:
        raise ValueError(f"the fused kernel needs all operands on one device, got {sorted(map(str, devices))}")
    q, k, q_out, k_out, cos, sin, positions = operands
    check_operands(q, k, q_out, k_out, cos, sin, rotary_dim, positions)
