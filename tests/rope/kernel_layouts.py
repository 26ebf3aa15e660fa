"""Random memory layouts and an independent float64 oracle for the rotation kernels.

Used in-process by ``test_kernel_safety.py`` and, unchanged, by the subprocesses it starts (the C
kernel under AddressSanitizer, the Triton kernel in its interpreter), so every path is driven by the
same cases.

Every tensor gets its *own* storage of exactly the size its view needs (plus a random leading
offset), so a read or write one element outside a view leaves the allocation: AddressSanitizer
reports it, and without ASan the comparison with the oracle catches the stray values. Layouts:
random dim order (transposed), padding between rows (sliced), stride 0 (expanded, inputs only),
arbitrary strides on size-1 dims, broadcast batch for the tables and positions.
"""

from __future__ import annotations

import random
from typing import Callable, Dict, List, Optional, Sequence

import torch

from posenc.rope.kernels.overlap import self_overlaps

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
#: unit roundoff of each storage format
UNIT = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float64: 2.0**-53}
#: smallest positive subnormal: the absolute floor of a rounding error
TINY = {torch.float32: 2.0**-149, torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24, torch.float64: 2.0**-1074}


def strided(
    shape: Sequence[int],
    dtype: torch.dtype,
    rng: random.Random,
    *,
    expand: bool = True,
    scale: float = 2.0,
    integers: Optional[int] = None,
) -> torch.Tensor:
    """A tensor of ``shape`` with a random layout in an exact-fit storage of its own."""
    dims = list(range(len(shape)))
    rng.shuffle(dims)  # innermost first
    strides = [0] * len(shape)
    span = 1
    for d in dims:
        n = shape[d]
        if n == 1 and rng.random() < 0.3:
            strides[d] = rng.choice([0, 1, 5, 1000])  # torch ignores the stride of a size-1 dim
        elif expand and n > 1 and rng.random() < 0.15:
            strides[d] = 0  # expanded
        else:
            strides[d] = span * rng.choice([1, 1, 1, 2, 3])  # padded rows: a sliced view
            span = strides[d] * max(n, 1)
    offset = rng.choice([0, 0, 1, 7])
    numel = 1
    for n in shape:
        numel *= n
    extent = offset + (1 + sum((n - 1) * s for n, s in zip(shape, strides)) if numel else 0)
    g = torch.Generator().manual_seed(rng.getrandbits(32))
    if integers is not None:
        base = torch.randint(0, integers, (extent,), generator=g, dtype=torch.int64).to(dtype)
    else:
        base = (torch.randn(extent, generator=g, dtype=torch.float64) * scale).to(dtype)
    return torch.as_strided(base, tuple(shape), tuple(strides), offset)


def oracle(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, r: int, interleaved: bool, inverse: bool
) -> torch.Tensor:
    """The rotation in float64 by explicit pair indices; cos/sin already per token (B|1, S, r/2)."""
    xd = x.double()
    out = xd.clone()
    half = r // 2
    ia = torch.arange(half) * 2 if interleaved else torch.arange(half)
    ib = ia + 1 if interleaved else ia + half
    c = cos.double().unsqueeze(1)  # (B|1, 1, S, r/2)
    s = sin.double().unsqueeze(1) * (-1.0 if inverse else 1.0)
    a, b = xd[..., ia], xd[..., ib]
    out[..., ia] = a * c - b * s
    out[..., ib] = a * s + b * c
    return out


def within_rounding(
    got: torch.Tensor, x: torch.Tensor, exact: torch.Tensor, r: int, interleaved: bool, ulps: float = 0.5
) -> bool:
    """|got - exact| within one rounding to the output format (``ulps`` units in the last place:
    0.5 for round-to-nearest) plus a few float32 (or float64) operations on the pair: the error
    bound of "compute in float32, round once"."""
    if got.shape != exact.shape:
        return False
    if not got.numel():
        return True
    compute = 2.0**-53 if got.dtype == torch.float64 else 2.0**-24
    xd = x.double().abs()
    half = r // 2
    ia = torch.arange(half) * 2 if interleaved else torch.arange(half)
    ib = ia + 1 if interleaved else ia + half
    pair = torch.zeros_like(xd)
    pair[..., ia] = pair[..., ib] = xd[..., ia] + xd[..., ib]
    bound = 2 * ulps * UNIT[got.dtype] * exact.abs() + 8 * compute * pair + TINY[got.dtype]
    diff = (got.double() - exact).abs()
    both_nan = got.double().isnan() & exact.isnan()
    return bool(((diff <= bound) | both_nan).all())


def random_case(rng: random.Random, *, positions_mode: str = "random") -> Dict:
    """One random valid call of the kernel-level interface (dict of tensors and options)."""
    dtype = rng.choice(DTYPES)
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    batch, hq, hk, seq = rng.randint(1, 3), rng.randint(0, 4), rng.randint(0, 3), rng.randint(0, 20)
    d = 2 * rng.randint(1, 12)
    r = 2 * rng.randint(1, d // 2)
    use_pos = positions_mode == "always" or (positions_mode == "random" and rng.random() < 0.4)
    rows = rng.randint(1, 30) if use_pos else seq + rng.choice([0, 0, 3])
    tb = rng.choice([1, batch])
    case = dict(
        q=strided((batch, hq, seq, d), dtype, rng),
        k=strided((batch, hk, seq, d), dtype, rng),
        cos=strided((tb, rows, r // 2), table_dtype, rng, scale=1.0),
        sin=strided((tb, rows, r // 2), table_dtype, rng, scale=1.0),
        interleaved=rng.random() < 0.5,
        inverse=rng.random() < 0.3,
        rotary_dim=r,
        positions=None,
    )
    if use_pos:
        case["positions"] = strided(
            (rng.choice([1, batch]), seq), rng.choice([torch.int64, torch.int32]), rng, integers=rows
        )
    mode = rng.choice(["fresh", "fresh", "fresh", "inplace", "inplace_q"])
    q, k = case["q"], case["k"]
    fresh = lambda t: strided(t.shape, dtype, rng, expand=False)  # noqa: E731
    if mode == "fresh" or self_overlaps(q) or self_overlaps(k):  # the rule the kernels refuse by
        case["q_out"], case["k_out"] = fresh(q), fresh(k)
    elif mode == "inplace":
        case["q_out"], case["k_out"] = q, k
    else:
        case["q_out"], case["k_out"] = q, fresh(k)
    return case


def hostile_case(rng: random.Random) -> Dict:
    """A case the kernel must refuse before touching memory: (case, expected exception type)."""
    case = random_case(rng, positions_mode="always" if rng.random() < 0.3 else "never")
    q, k = case["q"], case["k"]
    kind = rng.choice(
        ["out_is_k", "partial", "expanded_out", "bad_pos", "neg_pos", "short_table", "wrong_half", "dtype"]
    )
    if kind == "bad_pos" and case["positions"] is not None and q.shape[2] and q.shape[0]:
        p = case["positions"].clone()
        p[rng.randrange(p.shape[0]), rng.randrange(p.shape[1])] = case["cos"].shape[1] + rng.choice([0, 1, 10**9])
        case["positions"] = p
    elif kind == "neg_pos" and case["positions"] is not None and q.shape[2]:
        p = case["positions"].clone()
        p[rng.randrange(p.shape[0]), rng.randrange(p.shape[1])] = -rng.choice([1, 2**31 - 1])
        case["positions"] = p
    elif kind == "short_table" and case["positions"] is None and q.shape[2]:
        case["cos"] = case["cos"][:, : q.shape[2] - 1]
        case["sin"] = case["sin"][:, : q.shape[2] - 1]
    elif kind == "wrong_half":
        case["rotary_dim"] = case["rotary_dim"] + rng.choice([1, 2 * q.shape[3]])
    elif kind == "dtype":
        case["q_out"] = case["q_out"].to(torch.float64 if q.dtype != torch.float64 else torch.float32)
        return case, TypeError, kind
    elif kind == "out_is_k" and q.shape == k.shape and q.numel():
        case["q_out"] = k
    elif kind == "partial" and q.numel() > 1:
        base = (torch.randn(q.numel() + 1, dtype=torch.float64) * 2).to(q.dtype)
        case["q"], case["q_out"] = base[1:].view(q.shape), base[:-1].view(q.shape)  # one element apart
    elif kind == "expanded_out" and q.numel() > 1 and max(q.shape[:3]) > 1:
        dim = max(range(3), key=lambda i: q.shape[i])
        shape = list(q.shape)
        one = list(q.shape)
        one[dim] = 1
        case["q_out"] = torch.empty(one, dtype=q.dtype).expand(shape)
    else:
        return None
    return case, ValueError, kind


def run(
    kernel: Callable, n: int, seed: int, *, hostile: bool = True, range_errors: bool = True, ulps: float = 0.5
) -> Dict:
    """Drive ``kernel`` (the kernel-level interface) with ``n`` random valid cases and, with
    ``hostile``, as many refused ones. Returns counts and the first few failures, described.

    ``ulps``: the rounding allowed in the output format (Triton's interpreter rounds float32 to
    bfloat16 by truncation, one unit in the last place, where GPUs round to nearest)."""
    rng = random.Random(seed)
    tally = {"cases": 0, "correct": 0, "clear_errors": 0, "wrong": 0, "failures": []}

    def failed(what):
        tally["wrong"] += 1
        if len(tally["failures"]) < 5:
            tally["failures"].append(what)

    for i in range(n):
        case = random_case(rng)
        tally["cases"] += 1
        q, k, q_out, k_out = case["q"], case["k"], case["q_out"], case["k_out"]
        cos, sin, pos = case["cos"], case["sin"], case["positions"]
        if pos is not None:
            rows_b = torch.arange(max(cos.shape[0], pos.shape[0]))
            cb = rows_b if cos.shape[0] > 1 else torch.zeros_like(rows_b)
            pb = rows_b if pos.shape[0] > 1 else torch.zeros_like(rows_b)
            c_tok = cos[cb[:, None], pos[pb].long()]  # (B|1, S, r/2)
            s_tok = sin[cb[:, None], pos[pb].long()]
        else:
            c_tok, s_tok = cos[:, : q.shape[2]], sin[:, : q.shape[2]]
        want_q = oracle(q, c_tok, s_tok, case["rotary_dim"], case["interleaved"], case["inverse"])
        want_k = oracle(k, c_tok, s_tok, case["rotary_dim"], case["interleaved"], case["inverse"])
        q_in, k_in = q.clone(), k.clone()
        try:
            kernel(
                q,
                k,
                q_out,
                k_out,
                cos,
                sin,
                interleaved=case["interleaved"],
                rotary_dim=case["rotary_dim"],
                inverse=case["inverse"],
                positions=pos,
            )
        except Exception as exc:  # a valid case must not be refused
            failed(f"case {i}: refused a valid call: {type(exc).__name__}: {exc}")
            continue
        ok = within_rounding(q_out, q_in, want_q, case["rotary_dim"], case["interleaved"], ulps) and within_rounding(
            k_out, k_in, want_k, case["rotary_dim"], case["interleaved"], ulps
        )
        if q_out is not q:
            ok = ok and torch.equal(q, q_in)
        if k_out is not k:
            ok = ok and torch.equal(k, k_in)
        if ok:
            tally["correct"] += 1
        else:
            failed(
                f"case {i}: wrong values; q {tuple(q.shape)} {q.stride()} {q.dtype}, k {k.stride()}, "
                f"q_out {q_out.stride()}, cos {tuple(cos.shape)} {cos.stride()}, sin {sin.stride()}, "
                f"positions {None if pos is None else (tuple(pos.shape), pos.stride(), pos.dtype)}, "
                f"r {case['rotary_dim']}, interleaved {case['interleaved']}"
            )
    if hostile:
        made = 0
        while made < n:
            made_case = hostile_case(rng)
            if made_case is None:
                continue
            made += 1
            case, expected, kind = made_case
            if not range_errors and kind in ("bad_pos", "neg_pos"):
                continue
            tally["cases"] += 1
            outs = (case["q_out"], case["k_out"])
            before = [o.clone() for o in outs]
            try:
                kernel(
                    case["q"],
                    case["k"],
                    case["q_out"],
                    case["k_out"],
                    case["cos"],
                    case["sin"],
                    interleaved=case["interleaved"],
                    rotary_dim=case["rotary_dim"],
                    inverse=case["inverse"],
                    positions=case["positions"],
                )
            except expected as exc:
                untouched = all(torch.equal(o.nan_to_num(), b.nan_to_num()) for o, b in zip(outs, before))
                if str(exc) and untouched:
                    tally["clear_errors"] += 1
                else:
                    failed(f"hostile {kind}: refused, but wrote to an output first")
                continue
            except Exception as exc:
                failed(f"hostile {kind}: {type(exc).__name__} instead of {expected.__name__}: {exc}")
                continue
            failed(f"hostile {kind}: accepted")
    return tally


def triton_kernel_nan_positions(kernel: Callable, seed: int) -> Dict:
    """Out-of-range positions with no validation: the Triton kernel must give NaN rows, nothing else."""
    rng = random.Random(seed)
    tally = {"cases": 0, "nan_rows": 0, "wrong": 0}
    for _ in range(10):
        case = random_case(rng, positions_mode="always")
        q = case["q"]
        if not q.numel():
            continue
        pos = case["positions"].clone()
        pos[0, 0] = case["cos"].shape[1] + 5
        out_q, out_k = torch.empty(q.shape, dtype=q.dtype), torch.empty(case["k"].shape, dtype=q.dtype)
        kernel(
            q,
            case["k"],
            out_q,
            out_k,
            case["cos"],
            case["sin"],
            interleaved=case["interleaved"],
            rotary_dim=case["rotary_dim"],
            positions=pos,
        )
        tally["cases"] += 1
        if bool(out_q[0, :, 0, : case["rotary_dim"]].isnan().all()):
            tally["nan_rows"] += 1
        else:
            tally["wrong"] += 1
    return tally


def summary(tallies: List[Dict]) -> Dict:
    keys = ("cases", "correct", "clear_errors", "wrong")
    return {key: sum(t.get(key, 0) for t in tallies) for key in keys}


def addresses(t: torch.Tensor) -> List[int]:
    """Byte address of every element (brute force; for the small tensors of the tests)."""
    if t.numel() == 0:
        return []
    es = t.element_size()
    extent = t.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    index = torch.as_strided(torch.arange(extent), t.shape, t.stride(), t.storage_offset())
    base = t.untyped_storage().data_ptr()
    return [base + i * es for i in index.flatten().tolist()]


def shares_memory_within(t: torch.Tensor) -> bool:
    found = addresses(t)
    return len(set(found)) < len(found)


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether some byte belongs to an element of both (brute force)."""
    bytes_a = {x + i for x in addresses(a) for i in range(a.element_size())}
    return any(x + i in bytes_a for x in addresses(b) for i in range(b.element_size()))
