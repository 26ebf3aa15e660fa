"""Do two strided tensors share memory? Exact answers from pointers, shapes and strides only.

The rule every rotation path enforces (see "Memory safety" in ``docs/kernels.md``): an output must
not share memory with any other operand, except that it may be exactly its own input (in place).
The C kernel applies the same algorithm to its own arguments; this module serves the Triton kernel
and the in-place checks of :func:`posenc.apply_rotary`, and the tests compare the two.

Two tensors ``x`` and ``y`` of one element size overlap when ``x.base + sum(i_d * xs_d) == y.base
+ sum(j_d * ys_d)`` for some in-range indices. Grouping equal strides into one difference variable
``e = i - j`` turns that into a small bounded integer equation, searched dimension by dimension from
the largest stride down with interval pruning: one or two candidates per level for the layouts
attention produces (q and k as interleaved views of one projection resolve in a handful of steps).
A search that runs out of budget reports a possible overlap, which the callers refuse.

Memory also has to mean what torch says it means: :func:`resolve_lazy_inputs` handles tensors whose
values are their memory negated (PyTorch's lazy negation bit), for both kernels.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch

#: Nodes the search may visit before it gives up (and the caller refuses the call).
BUDGET = 100_000

Footprint = Tuple[int, int, Tuple[Tuple[int, int], ...], bool]  # base, element size, (size, stride), empty


def footprint(t: torch.Tensor) -> Footprint:
    """Base address, element size, the (size, stride) of dims of size > 1, and whether it is empty."""
    dims = tuple((n, s) for n, s in zip(t.shape, t.stride()) if n > 1)
    return t.data_ptr(), t.element_size(), dims, t.numel() == 0


def _end(f: Footprint) -> int:
    base, es, dims, _ = f
    return base + (sum((n - 1) * s for n, s in dims) + 1) * es


def identical(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Same addresses for the same indices (in-place use of an output is allowed exactly then)."""
    return footprint(x) == footprint(y)


def _solve(terms: List[Tuple[int, int, int]], target: int) -> int:
    """1 if ``sum(c * e) == target`` has a solution with ``lo <= e <= hi`` per term, 0 if not, -1 if
    the search ran out of budget. Terms ``(c, lo, hi)`` are sorted by decreasing ``c > 0``."""
    n = len(terms)
    lo_sum, hi_sum = [0] * (n + 1), [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        c, lo, hi = terms[i]
        lo_sum[i], hi_sum[i] = lo_sum[i + 1] + c * lo, hi_sum[i + 1] + c * hi
    budget = [BUDGET]

    def search(i: int, rest: int) -> int:
        budget[0] -= 1
        if budget[0] < 0:
            return -1
        if i == n:
            return int(rest == 0)
        c, lo, hi = terms[i]
        first = max(lo, -((hi_sum[i + 1] - rest) // c))  # ceil((rest - hi_sum) / c)
        last = min(hi, (rest - lo_sum[i + 1]) // c)
        for e in range(first, last + 1):
            found = search(i + 1, rest - e * c)
            if found:
                return found
        return 0

    return search(0, target)


def overlap_of(x: Footprint, y: Footprint) -> int:
    """1 when some element of ``x`` and some element of ``y`` share a byte, 0 when none does, -1 when
    that could not be decided within :data:`BUDGET` (treat as an overlap)."""
    (xb, xes, xdims, xempty), (yb, yes_, ydims, yempty) = x, y
    if xempty or yempty or _end(x) <= yb or _end(y) <= xb:
        return 0
    delta = yb - xb
    if xes != yes_ or delta % xes:
        return 1  # different dtypes or misaligned views: the byte ranges decide
    merged: Dict[int, Tuple[int, int]] = {}  # stride -> (lowest, highest) index multiple
    for dims, sign in ((xdims, 1), (ydims, -1)):
        for n, s in dims:
            if s == 0:
                continue  # an expanded dim adds no address
            lo, hi = merged.get(s, (0, 0))
            merged[s] = (lo - (n - 1), hi) if sign < 0 else (lo, hi + n - 1)
    terms = sorted(((s, lo, hi) for s, (lo, hi) in merged.items()), reverse=True)
    return _solve(terms, delta // xes)


def overlaps(x: torch.Tensor, y: torch.Tensor) -> int:
    """:func:`overlap_of` for two tensors."""
    return overlap_of(footprint(x), footprint(y))


def self_overlaps(t: torch.Tensor) -> bool:
    """Whether two elements of ``t`` may share memory (an expanded view, for instance).

    Sufficient test, as in the C kernel: with the dims sorted by stride, each stride must exceed the
    span of all smaller ones. Every dense, transposed or sliced layout passes.
    """
    if t.numel() == 0:
        return False
    span = 0
    for s, n in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if s <= span:
            return True
        span += (n - 1) * s
    return False


def check_outputs(
    named_inputs: Sequence[Tuple[str, torch.Tensor]], named_outputs: Sequence[Tuple[str, torch.Tensor]]
) -> None:
    """Raise ``ValueError`` unless every output is disjoint from every other operand (an output may
    be exactly the input at the same index: in place).

    Args:
        named_inputs: ``[(name, tensor), ...]`` read-only operands, the first ones paired with outputs.
        named_outputs: ``[(name, tensor), ...]``; output ``i`` may be identical to input ``i``.
    """
    ins = [(name, footprint(t)) for name, t in named_inputs]
    outs = [(name, footprint(t)) for name, t in named_outputs]
    for i, (out_name, out) in enumerate(named_outputs):
        if self_overlaps(out):
            raise ValueError(
                f"{out_name} has elements that share memory (an expanded or otherwise "
                f"overlapping view, strides {tuple(out.stride())}), so writing it is "
                "ambiguous; pass a .contiguous() or .clone() copy"
            )
        mine = outs[i][1]
        others = [(n, f) for j, (n, f) in enumerate(ins) if not (j == i and f == mine)] + outs[i + 1 :]
        for other_name, other in others:
            found = overlap_of(mine, other)
            if found:
                how = "may share memory (an overlap could not be ruled out)" if found < 0 else "share memory"
                raise ValueError(
                    f"{out_name} and {other_name} {how}: an output must not overlap any "
                    "other operand, except that it may be exactly its own input (in "
                    "place); pass separate tensors, or .clone() one of them"
                )


def resolve_lazy_inputs(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The inputs with PyTorch's lazy negation bit resolved; an output with it is refused.

    A tensor with the bit (``x.is_neg()``; ``z.conj().imag`` makes one) holds ``-x`` in memory and
    negates on every read by torch. A kernel reads and writes raw memory, so it would see the wrong
    sign: inputs are resolved here (a copy); an output cannot be, since the caller reads it back
    through the bit.
    """
    for name, out in (("q_out", q_out), ("k_out", k_out)):
        if out.is_neg():
            raise TypeError(
                f"{name} has PyTorch's lazy negation bit set ({name}.is_neg(), e.g. a view made by "
                "z.conj().imag), so a kernel writing its memory would store the wrong sign; pass a "
                f"tensor without it (for example {name}.resolve_neg(), then copy back)"
            )
    return q.resolve_neg(), k.resolve_neg(), cos.resolve_neg(), sin.resolve_neg()
