"""Property tests of the public rotation entry points: correct, or a clear typed error.

:func:`posenc.apply_rotary` and :func:`posenc.apply_rotary_at` get generated calls: shapes, dtypes,
layouts, partial rotary, table shapes and dtypes, random memory layouts of every tensor (transposed,
sliced, expanded, broadcast batch), in place or not, ``validate`` on or off, q and k sharing memory
(the same tensor, or partly), and deliberately broken arguments. Each call must either

* return what an independent float64 implementation (``kernel_layouts.oracle``: explicit pair
  indices, no ``rotate_half``/``cat``) gives, within one rounding of the output format, leaving
  inputs it does not own untouched; or
* raise ``ValueError`` or ``TypeError`` whose message names the offending argument, when the call
  is invalid, before anything is written.

Outcomes are counted; with ``POSENC_PROPERTY_TALLY=path`` the counts are written there as JSON, and
``POSENC_PROPERTY_EXAMPLES`` sets how many calls each slow-tier test generates (400 by default).
The fused kernels themselves are also driven by random cases under AddressSanitizer and in separate
processes (``test_kernel_safety.py``), where a crash fails a test instead of the run.
"""

from __future__ import annotations

import collections
import json
import os
import random
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc.rope.apply import apply_rotary, apply_rotary_at

sys.path.insert(0, str(Path(__file__).parent))
import kernel_layouts as layouts  # noqa: E402

TALLY = collections.Counter()
#: Generated calls per test: a short search in the fast tier, a longer one in the slow tier;
#: POSENC_PROPERTY_EXAMPLES overrides the longer one.
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(
    max_examples=int(os.environ.get("POSENC_PROPERTY_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def report_tally():
    yield
    path = os.environ.get("POSENC_PROPERTY_TALLY")
    if path:
        Path(path).write_text(json.dumps(dict(TALLY), indent=1))


BROKEN = [
    "odd rotary_dim",
    "rotary_dim > head_dim",
    "table width",
    "table seq",
    "table batch",
    "layout name",
    "integer q",
    "k head_dim",
    "k seq",
    "cos/sin shapes differ",
    "not a tensor",
]


@st.composite
def calls(draw, at: bool):
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(layouts.DTYPES))
    batch, hq, hk, seq = (
        draw(st.integers(1, 3)),
        draw(st.integers(1, 4)),
        draw(st.integers(1, 3)),
        draw(st.integers(0, 9)),
    )
    d = 2 * draw(st.integers(1, 8))
    r = draw(st.one_of(st.none(), st.integers(1, d // 2).map(lambda h: 2 * h)))
    rr = d if r is None else r
    layout = draw(st.sampled_from(["half", "interleaved"]))
    table_dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]))
    call = dict(
        dtype=dtype,
        layout=layout,
        rotary_dim=r,
        r=rr,
        inplace=draw(st.booleans()),
        validate=draw(st.booleans()),
        alias=draw(st.sampled_from(["none"] * 4 + ["same", "partial", "expanded"])),
        broken=None,
    )
    q = layouts.strided((batch, hq, seq, d), dtype, rng)
    k = layouts.strided((batch, hk, seq, d), dtype, rng)
    if call["alias"] == "same":
        k = q
    elif call["alias"] == "partial":
        heads = hq + 1
        base = layouts.strided((batch, heads, seq, d), dtype, rng, expand=False)
        q, k = base[:, :hq], base[:, 1:heads]  # share heads 1 .. hq-1
    elif call["alias"] == "expanded" and seq > 0:
        q = layouts.strided((batch, 1, seq, d), dtype, rng).expand(batch, max(hq, 2), seq, d)
    call.update(q=q, k=k)
    if at:
        rows = draw(st.integers(1, 40))
        call["cos"] = layouts.strided((rows, rr // 2), table_dtype, rng, scale=1.0)
        call["sin"] = layouts.strided((rows, rr // 2), table_dtype, rng, scale=1.0)
        pdtype = draw(st.sampled_from([torch.int64, torch.int32, torch.int16, torch.uint8]))
        if pdtype == torch.uint8:
            rows_ok = min(rows, 256)
        else:
            rows_ok = rows
        shape = draw(st.sampled_from([(seq,), (1, seq), (batch, seq)]))
        call["positions"] = layouts.strided(shape, pdtype, rng, integers=rows_ok)
        call["bad_positions"] = draw(st.sampled_from([None] * 6 + ["too big", "negative", "float", "bool"]))
    else:
        form = draw(st.sampled_from(["2d", "shared", "per-sample"]))
        shape = {"2d": (seq, rr // 2), "shared": (1, seq, rr // 2), "per-sample": (batch, seq, rr // 2)}[form]
        call["cos"] = layouts.strided(shape, table_dtype, rng, scale=1.0)
        call["sin"] = layouts.strided(shape, table_dtype, rng, scale=1.0)
    if call["validate"] and draw(st.integers(0, 3)) == 0:
        call["broken"] = draw(st.sampled_from(BROKEN))
    return call


def break_call(call, at: bool):
    """Apply ``call["broken"]``; return (kwargs changes, expected exception, words the message names)."""
    kind, q, k = call["broken"], call["q"], call["k"]
    d, r = q.shape[-1], call["r"]
    if kind == "odd rotary_dim":
        call["rotary_dim"] = r - 1
        return ValueError, "rotary_dim"
    if kind == "rotary_dim > head_dim":
        call["rotary_dim"] = d + 2
        return ValueError, "rotary_dim"
    if kind == "table width":
        call["cos"] = call["sin"] = torch.cat([call["cos"], call["cos"]], dim=-1)
        return ValueError, "cos" if not at else "rotary_dim"
    if kind == "table seq" and not at:
        c = call["cos"]
        call["cos"] = call["sin"] = torch.cat([c, torch.zeros(*c.shape[:-2], 1, c.shape[-1], dtype=c.dtype)], dim=-2)
        return ValueError, "seq"
    if kind == "table batch" and not at:
        c = call["cos"] if call["cos"].dim() == 3 else call["cos"].unsqueeze(0)
        call["cos"] = call["sin"] = c[:1].expand(q.shape[0] + 1, *c.shape[1:])
        return ValueError, "batch"
    if kind == "layout name":
        call["layout"] = "neox"
        return ValueError, "layout"
    if kind == "integer q":
        call["q"] = torch.zeros(q.shape, dtype=torch.int32)
        return TypeError, "q"
    if kind == "k head_dim":
        call["k"] = torch.zeros(*k.shape[:-1], d + 2, dtype=k.dtype)
        return ValueError, "head_dim"
    if kind == "k seq":
        call["k"] = torch.zeros(k.shape[0], k.shape[1], k.shape[2] + 1, d, dtype=k.dtype)
        return ValueError, "seq"
    if kind == "cos/sin shapes differ":
        sn = call["sin"]
        call["sin"] = torch.cat([sn, torch.zeros(*sn.shape[:-2], 1, sn.shape[-1], dtype=sn.dtype)], dim=-2)
        return ValueError, "sin"
    if kind == "not a tensor":
        call["cos"] = call["cos"].tolist()
        return TypeError, "cos"
    return None, None


def expected_outputs(call, at: bool):
    q, k, cos, sin, r = call["q"], call["k"], call["cos"], call["sin"], call["r"]
    if at:
        pos = call["positions"].long()
        pos = pos.unsqueeze(0) if pos.dim() == 1 else pos
        cos, sin = cos[pos], sin[pos]  # (B|1, S, r/2)
    elif cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    inter = call["layout"] == "interleaved"
    return layouts.oracle(q, cos, sin, r, inter, False), layouts.oracle(k, cos, sin, r, inter, False)


def unchanged(now: torch.Tensor, before: torch.Tensor) -> bool:
    return torch.equal(now.nan_to_num(), before.nan_to_num())


def check_call(call, at: bool):
    TALLY["cases"] += 1
    expected_error, words = (None, None)
    if call["broken"]:
        expected_error, words = break_call(call, at)
        if expected_error is None:
            call["broken"] = None
    if at and call["bad_positions"] and call["q"].shape[2] and expected_error is None:
        pos = call["positions"].clone()
        kind = call["bad_positions"]
        if kind == "too big":
            pos = pos.long()
            pos[(0,) * pos.dim()] = call["cos"].shape[0]
            expected_error, words = ValueError, "positions must be <"
        elif kind == "negative":
            pos = pos.long()
            pos[(0,) * pos.dim()] = -1
            expected_error, words = ValueError, "positions must be >= 0"
        elif kind == "float" and call["validate"]:
            pos = pos.float()
            expected_error, words = TypeError, "positions"
        elif kind == "bool" and call["validate"]:
            pos = pos > 0
            expected_error, words = TypeError, "positions"
        call["positions"] = pos
        if at and not call["validate"] and expected_error is ValueError and not call["q"].is_cpu:
            expected_error = None
    q, k = call["q"], call["k"]
    writes = call["inplace"]
    if expected_error is None and writes:
        same = q.data_ptr() == k.data_ptr() and q.shape == k.shape and q.stride() == k.stride()
        if (
            layouts.shares_memory_within(q)
            or layouts.shares_memory_within(k)
            or (not same and layouts.shares_memory(q, k))
        ):
            expected_error, words = ValueError, "share memory"
    q_before, k_before = q.clone() if isinstance(q, torch.Tensor) else q, k.clone()
    kwargs = dict(
        layout=call["layout"], rotary_dim=call["rotary_dim"], inplace=call["inplace"], validate=call["validate"]
    )
    try:
        if at:
            out = apply_rotary_at(q, k, call["cos"], call["sin"], call["positions"], **kwargs)
        else:
            out = apply_rotary(q, k, call["cos"], call["sin"], **kwargs)
    except (ValueError, TypeError) as exc:
        if expected_error is None:
            TALLY["wrong"] += 1
            raise AssertionError(f"valid call refused: {type(exc).__name__}: {exc}") from exc
        if not isinstance(exc, expected_error) or words.split()[0] not in str(exc):
            TALLY["wrong"] += 1
            raise AssertionError(
                f"expected {expected_error.__name__} naming {words!r}, got {type(exc).__name__}: {exc}"
            ) from exc
        if not (unchanged(q, q_before) and unchanged(k, k_before)):
            TALLY["wrong"] += 1
            raise AssertionError(f"refused ({exc}), but modified q or k first") from exc
        TALLY["clear_errors"] += 1
        return
    if expected_error is not None:
        TALLY["wrong"] += 1
        raise AssertionError(f"expected {expected_error.__name__} ({words}); the call returned")
    call["q"], call["k"] = q_before, k_before  # the oracle reads the inputs
    want_q, want_k = expected_outputs(call, at)
    inter = call["layout"] == "interleaved"
    ok = (
        layouts.within_rounding(out[0], q_before, want_q, call["r"], inter)
        and layouts.within_rounding(out[1], k_before, want_k, call["r"], inter)
        and out[0].dtype == q.dtype
        and out[1].dtype == k.dtype
    )
    if call["inplace"]:
        ok = ok and out[0] is q and (out[1] is k or call["alias"] == "same")
    else:
        ok = ok and unchanged(q, q_before) and unchanged(k, k_before)
    if not ok:
        TALLY["wrong"] += 1
        raise AssertionError(
            f"wrong answer: q {tuple(q.shape)} {q.stride()} {q.dtype}, k {k.stride()}, "
            f"alias {call['alias']}, inplace {call['inplace']}, layout {call['layout']}, "
            f"r {call['r']}"
        )
    TALLY["correct"] += 1


@FAST
@given(calls(at=False))
def test_apply_rotary_is_correct_or_refuses_clearly(call):
    check_call(call, at=False)


@FAST
@given(calls(at=True))
def test_apply_rotary_at_is_correct_or_refuses_clearly(call):
    check_call(call, at=True)


@pytest.mark.slow
@LONG
@given(calls(at=False))
def test_apply_rotary_long_search(call):
    check_call(call, at=False)


@pytest.mark.slow
@LONG
@given(calls(at=True))
def test_apply_rotary_at_long_search(call):
    check_call(call, at=True)
