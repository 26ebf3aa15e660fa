"""The Triton rotation kernel: q and k of one token per program, every head, one launch.

Grid: one program per (batch, position). A program loads its position's half-width cos/sin row once
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

from typing import Optional

import torch
import triton
import triton.language as tl


@triton.jit
def _rotate_heads(x_ptr, y_ptr, n_heads, xs_h, ys_h, c, s, offs_a, offs_b, mask_r,
                  HALF_R: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_REST: tl.constexpr,
                  COPY_REST: tl.constexpr, BLOCK_H: tl.constexpr):
    for h0 in range(0, n_heads, BLOCK_H):
        heads = h0 + tl.arange(0, BLOCK_H)
        mask_h = heads < n_heads
        mask = mask_h[:, None] & mask_r[None, :]
        x_row = x_ptr + heads[:, None].to(tl.int64) * xs_h
        y_row = y_ptr + heads[:, None].to(tl.int64) * ys_h
        a = tl.load(x_row + offs_a[None, :], mask=mask, other=0.0).to(c.dtype)   # (BLOCK_H, BLOCK_R)
        b = tl.load(x_row + offs_b[None, :], mask=mask, other=0.0).to(c.dtype)
        new_a = a * c[None, :] - b * s[None, :]
        new_b = a * s[None, :] + b * c[None, :]
        tl.store(y_row + offs_a[None, :], new_a.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(y_row + offs_b[None, :], new_b.to(y_ptr.dtype.element_ty), mask=mask)
        if COPY_REST:
            offs_rest = 2 * HALF_R + tl.arange(0, BLOCK_REST)
            mask_rest = mask_h[:, None] & (offs_rest < HEAD_DIM)[None, :]
            rest = tl.load(x_row + offs_rest[None, :], mask=mask_rest, other=0.0)
            tl.store(y_row + offs_rest[None, :], rest, mask=mask_rest)


@triton.jit
def _rope_kernel(q_ptr, k_ptr, qo_ptr, ko_ptr, cos_ptr, sin_ptr, pos_ptr,
                 seq, n_qh, n_kh,
                 qs_b, qs_h, qs_s, qos_b, qos_h, qos_s,
                 ks_b, ks_h, ks_s, kos_b, kos_h, kos_s,
                 cs_b, cs_s, ps_b, ps_s,
                 HALF_R: tl.constexpr, BLOCK_R: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_REST: tl.constexpr, COPY_REST: tl.constexpr, INTERLEAVED: tl.constexpr,
                 HAS_POS: tl.constexpr, INVERSE: tl.constexpr, BLOCK_H: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    b = pid // seq
    t = pid % seq
    if HAS_POS:
        row = tl.load(pos_ptr + b * ps_b + t * ps_s).to(tl.int64)
    else:
        row = t
    offs = tl.arange(0, BLOCK_R)
    mask_r = offs < HALF_R
    c = tl.load(cos_ptr + b * cs_b + row * cs_s + offs, mask=mask_r, other=0.0)
    s = tl.load(sin_ptr + b * cs_b + row * cs_s + offs, mask=mask_r, other=0.0)
    if INVERSE:
        s = -s
    if INTERLEAVED:
        offs_a = 2 * offs
        offs_b = 2 * offs + 1
    else:
        offs_a = offs
        offs_b = offs + HALF_R
    _rotate_heads(q_ptr + b * qs_b + t * qs_s, qo_ptr + b * qos_b + t * qos_s, n_qh, qs_h, qos_h,
                  c, s, offs_a, offs_b, mask_r, HALF_R, HEAD_DIM, BLOCK_REST, COPY_REST, BLOCK_H)
    _rotate_heads(k_ptr + b * ks_b + t * ks_s, ko_ptr + b * kos_b + t * kos_s, n_kh, ks_h, kos_h,
                  c, s, offs_a, offs_b, mask_r, HALF_R, HEAD_DIM, BLOCK_REST, COPY_REST, BLOCK_H)


def rotate(q: torch.Tensor, k: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor,
           cos: torch.Tensor, sin: torch.Tensor, *, interleaved: bool, rotary_dim: int,
           inverse: bool = False, positions: Optional[torch.Tensor] = None) -> None:
    """Write the rotation of ``q``/``k`` into ``q_out``/``k_out`` (which may be ``q``/``k``).

    Same contract as :func:`posenc.rope.kernels.cpu.rotate`: q (B, Hq, S, D), k (B, Hk, S, D), one
    dtype, contiguous last dimension; cos/sin (B|1, rows, rotary_dim // 2) with a contiguous last
    dimension, in float32 (float64 for float64 q); ``positions`` (B|1, S) integers indexing ``rows``.
    """
    batch, n_qh, seq, head_dim = q.shape
    if batch * seq == 0:
        return
    half = rotary_dim // 2
    rest = head_dim - rotary_dim
    copy_rest = rest > 0 and q_out.data_ptr() != q.data_ptr()
    cs_b = cos.stride(0) if cos.shape[0] > 1 else 0
    if positions is not None:
        ps_b = positions.stride(0) if positions.shape[0] > 1 else 0
        ps_s = positions.stride(1)
        pos = positions
    else:
        ps_b = ps_s = 0
        pos = cos                      # never read: HAS_POS is False
    # heads per step: all of them, but at most ~4096 elements of a/b per tile to bound registers
    block_h = max(1, min(triton.next_power_of_2(max(n_qh, k.shape[1], 1)),
                         4096 // triton.next_power_of_2(half)))
    _rope_kernel[(batch * seq,)](
        q, k, q_out, k_out, cos, sin, pos, seq, n_qh, k.shape[1],
        q.stride(0), q.stride(1), q.stride(2), q_out.stride(0), q_out.stride(1), q_out.stride(2),
        k.stride(0), k.stride(1), k.stride(2), k_out.stride(0), k_out.stride(1), k_out.stride(2),
        cs_b, cos.stride(1), ps_b, ps_s,
        HALF_R=half, BLOCK_R=triton.next_power_of_2(half), HEAD_DIM=head_dim,
        BLOCK_REST=triton.next_power_of_2(max(rest, 1)), COPY_REST=copy_rest,
        INTERLEAVED=interleaved, HAS_POS=positions is not None, INVERSE=inverse, BLOCK_H=block_h)
