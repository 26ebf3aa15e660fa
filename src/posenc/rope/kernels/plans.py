"""Safety checks paid once per layout: the Triton path's plan cache.

Every call of a fused kernel must be safe for any strides and any aliasing (see "Memory safety" in
``docs/kernels.md``). Most of what that takes depends only on the call's *layout*: the shapes,
strides, dtypes and devices of the seven operands (q, k, q_out, k_out, cos, sin, positions), the
rotary width. Those checks (shapes agree, dtypes are ones the kernel reads, no output has elements
that share memory, ...) and the launch constants derived from the layout are computed once per
layout key and kept in a bounded, thread-safe cache: a :class:`Plan`.

What a layout key cannot know is where the operands lie in memory, so aliasing is checked on every
call, in O(1) for the usual case: each operand's footprint is a byte interval ``[ptr, ptr + span)``
whose span the plan holds, and an output whose interval meets no other operand's interval shares no
memory with it. Only when intervals meet (q and k as views of one projection, an in-place call)
does the exact search of :mod:`.overlap` run, and its answer is cached per layout and per pointer
difference, the only thing it depends on. An output exactly equal to its own input (same pointer,
same shape and strides) is in place, which is allowed.

:data:`STATS` counts the plans built and the exact searches run, so tests can check that the
layout checks run once per layout and not once per call.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

import torch

from . import overlap

#: Plans (and exact-overlap answers) kept at most; the oldest are dropped first.
MAX_PLANS = 1024

#: ``plans``: kernel layouts checked in full; ``pairs``: in-place (q, k) layouts checked in full;
#: ``exact``: exact overlap searches run (all cumulative).
STATS: Dict[str, int] = {"plans": 0, "pairs": 0, "exact": 0}

_lock = threading.Lock()
#: layout key -> Plan; ("pair", ...) -> PairPlan; (key, output, other, pointer difference) -> the
#: exact search's answer. One bounded cache: what was checked once per layout.
_plans: Dict[Hashable, Any] = {}

#: Output index -> index of the input it may be (in place): q_out may be q, k_out may be k.
_OWN_INPUT = {2: 0, 3: 1}


class Plan:
    """What one layout needs at every call: which operand pairs to test for overlap, each
    operand's footprint span in bytes, and the launch constants of the kernel (``launch``)."""

    __slots__ = ("key", "spans", "dims", "pairs", "launch", "same_layout")

    def __init__(
        self,
        key: Hashable,
        spans: Tuple[int, ...],
        dims: Tuple[Any, ...],
        pairs: Tuple[Tuple[int, int, bool], ...],
        launch: Any,
    ) -> None:
        self.key = key
        self.spans = spans  # bytes from the data pointer to the end of each operand's footprint
        self.dims = dims  # (element size, ((size, stride), ...)) per operand, for the exact search
        self.pairs = pairs  # (output, other operand, whether "other" is the output's own input)
        self.launch = launch
        # whether q_out (k_out) has q's (k's) layout: at q's (k's) address it is then in place
        self.same_layout = (dims[2] == dims[0], dims[3] == dims[1])


def _span(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    return (sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 1) + 1) * t.element_size()


def layout_key(operands: Sequence[Optional[torch.Tensor]], extra: Hashable) -> Hashable:
    """The layout of a call: shape, strides, dtype and device of every operand, plus ``extra``
    (the kernel's own arguments that change its plan, such as the rotary width)."""
    key: List[Hashable] = [extra]
    for t in operands:
        if t is None:
            key.append(None)
        else:
            key += (t.shape, t.stride(), t.dtype, t.device)
    return tuple(key)


def cached(key: Hashable) -> Optional[Plan]:
    """The plan already built for ``key``, or ``None``."""
    plan: Optional[Plan] = _plans.get(key)
    return plan


def plan_for(
    key: Hashable,
    operands: Sequence[Optional[torch.Tensor]],
    check: Callable[[], None],
    launch: Callable[[], Any],
) -> Plan:
    """The cached plan for ``key``, or a new one: ``check()`` runs the full checks on this call's
    operands (raising on anything unsafe), ``launch()`` computes the launch constants."""
    plan = cached(key)
    if plan is not None:
        return plan
    check()  # the full checks, overlap included, on this call's pointers: raises if refused
    spans = tuple(0 if t is None else _span(t) for t in operands)
    dims = tuple(
        None if t is None else (t.element_size(), tuple((n, s) for n, s in zip(t.shape, t.stride()) if n > 1))
        for t in operands
    )
    pairs: List[Tuple[int, int, bool]] = []
    for out in (2, 3):
        if not spans[out]:
            continue  # an empty output writes nothing
        for other in range(len(operands)):
            if other == out or not spans[other] or (out == 3 and other == 2):
                continue  # q_out against k_out is tested once, from k_out's side below
            own = _OWN_INPUT[out] == other and dims[other] == dims[out]
            pairs.append((out, other, own))
    if spans[2] and spans[3]:
        pairs.append((3, 2, False))
    plan = Plan(key, spans, dims, tuple(pairs), launch())
    _store(_plans, key, plan, "plans")
    return plan


def _store(cache: Dict[Hashable, Any], key: Hashable, value: Any, counter: str) -> None:
    """Keep ``value`` under ``key``, dropping the oldest entries down to the bound (lowered at run
    time too), and count it in :data:`STATS`."""
    with _lock:
        STATS[counter] += 1
        while cache and len(cache) >= MAX_PLANS:
            cache.pop(next(iter(cache)))
        cache[key] = value


def disjoint(plan: Plan, ptrs: Sequence[int]) -> bool:
    """Whether, at these data pointers, every output is disjoint from every other operand (or is
    exactly its own input). O(1) per pair unless two byte intervals meet; then the exact answer for
    this pointer difference is looked up, or searched once and cached."""
    spans = plan.spans
    for out, other, own in plan.pairs:
        po, pt = ptrs[out], ptrs[other]
        if po >= pt + spans[other] or pt >= po + spans[out]:
            continue  # the byte intervals do not meet
        if own and po == pt:
            continue  # exactly its own input: in place
        if _exact_overlap(plan, out, other, pt - po):
            return False
    return True


def _exact_overlap(plan: Plan, out: int, other: int, delta: int) -> bool:
    return _exact_search((plan.key, out, other, delta), plan.dims[out], plan.dims[other], delta)


def _exact_search(memo: Hashable, first: Any, second: Any, delta: int) -> bool:
    """Whether ``first`` at address 0 and ``second`` at ``delta`` (each ``(element size, ((size,
    stride), ...))``) may share a byte: searched once per ``memo``, then looked up."""
    found: Optional[bool] = _plans.get(memo)
    if found is None:
        (oes, odims), (tes, tdims) = first, second
        result = overlap.overlap_of((0, oes, odims, False), (delta, tes, tdims, False))
        found = result != 0  # "could not be ruled out" counts as an overlap
        _store(_plans, memo, found, "exact")
    return found


class PairPlan:
    """What the in-place rules need about two tensors' layouts (q and k of ``inplace=True`` with
    autograd, which rotates them in separate calls): each one's byte span, its dims for the exact
    search, whether its own elements share memory, and whether the two have one layout (then at one
    address they are one view, rotated once)."""

    __slots__ = ("key", "spans", "dims", "self_overlap", "same_layout")

    def __init__(self, key: Hashable, x: torch.Tensor, y: torch.Tensor) -> None:
        self.key = key
        self.spans = (_span(x), _span(y))
        self.dims = tuple(
            (t.element_size(), tuple((n, s) for n, s in zip(t.shape, t.stride()) if n > 1)) for t in (x, y)
        )
        self.self_overlap = (overlap.self_overlaps(x), overlap.self_overlaps(y))
        self.same_layout = x.shape == y.shape and self.dims[0] == self.dims[1]


def pair_plan(x: torch.Tensor, y: torch.Tensor) -> PairPlan:
    """The cached :class:`PairPlan` of two tensors' layouts (shapes, strides, dtypes)."""
    key = ("pair", x.shape, x.stride(), x.dtype, y.shape, y.stride(), y.dtype)
    plan = _plans.get(key)
    if plan is None:
        plan = PairPlan(key, x, y)
        _store(_plans, key, plan, "pairs")
    return plan


def pair_overlaps(plan: PairPlan, x_ptr: int, y_ptr: int) -> bool:
    """Whether the two tensors of ``plan``, at these data pointers, share memory without being one
    view: O(1) when their byte intervals do not meet, else the exact answer for this pointer
    difference (searched once, then looked up)."""
    x_span, y_span = plan.spans
    if not x_span or not y_span or x_ptr >= y_ptr + y_span or y_ptr >= x_ptr + x_span:
        return False
    if x_ptr == y_ptr and plan.same_layout:
        return False  # one view
    delta = y_ptr - x_ptr
    return _exact_search((plan.key, delta), plan.dims[0], plan.dims[1], delta)


def clear() -> None:
    """Forget every plan and cached answer (tests)."""
    with _lock:
        _plans.clear()
