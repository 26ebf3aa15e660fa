"""Hostile inputs found on the rotation's road, each refused with a clear, typed error naming the
argument: tensors that are not dense strided memory (sparse, mkldnn, nested), a ``row_offset``
that is not an offset or sits beside ``positions``, and an in-place write to an inference tensor
outside inference mode (which torch itself refuses)."""

from __future__ import annotations

import pytest
import torch

from posenc import RotaryEmbedding
from posenc.rope import apply_rotary, apply_rotary_at, kernels


def _inputs():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 4, 3, 32, generator=gen), torch.randn(1, 2, 3, 32, generator=gen)
    cos, sin = torch.rand(3, 16, generator=gen), torch.rand(3, 16, generator=gen)
    return q, k, cos, sin


def _not_strided(q):
    return {
        "sparse": q.to_sparse(),
        "mkldnn": q.to_mkldnn(),
        "nested": torch.nested.nested_tensor([q[0], q[0]]),
    }


@pytest.mark.parametrize("kind", ["sparse", "mkldnn", "nested"])
def test_a_tensor_that_is_not_dense_strided_is_refused_by_name(kind):
    """A sparse, mkldnn or nested q (or k) gets a TypeError naming it and saying that a dense
    strided tensor is needed, from apply_rotary, apply_rotary_at and the module alike, at every call
    (a layout seen dense before does not let it through)."""
    q, k, cos, sin = _inputs()
    apply_rotary(q, k, cos, sin)  # the dense layout of the same shapes is seen first
    bad = _not_strided(q)[kind]
    rope = RotaryEmbedding(32)
    calls = {
        "apply_rotary q": lambda: apply_rotary(bad, k, cos, sin),
        "apply_rotary k": lambda: apply_rotary(q, bad, cos, sin),
        "in place": lambda: apply_rotary(bad, k, cos, sin, inplace=True),
        "row offset": lambda: apply_rotary(bad, k, cos, sin, row_offset=0),
        "positions": lambda: apply_rotary_at(bad, k, cos, sin, torch.tensor([0, 1, 2])),
        "module": lambda: rope(bad, k),
        "module decode": lambda: rope(bad, k, offset=4),
    }
    for name, call in calls.items():
        for _ in range(2):
            with pytest.raises(TypeError, match=r"^(q|k) must be a dense strided tensor, got a") as info:
                call()
            assert kind in str(info.value), (name, str(info.value))


@pytest.mark.parametrize(
    "offset, error, match",
    [
        (-5, ValueError, r"row_offset must be >= 0, got -5"),
        ("abc", TypeError, r"row_offset must be an integer, got 'abc'"),
        (3.7, TypeError, r"row_offset must be an integer, got 3.7"),
        (True, TypeError, r"row_offset must be an integer, got True"),
        (2, ValueError, r"row_offset must be 0 or None when positions are given"),
    ],
)
def test_row_offset_beside_positions_is_validated(offset, error, match):
    """apply_rotary(..., positions=P, row_offset=X) checks X: not an int >= 0 is refused by name,
    and a non-zero offset beside positions (which already name every token's row) is refused."""
    q, k, cos, sin = _inputs()
    table = torch.rand(8, 16)
    positions = torch.tensor([[5, 0, 7]])
    for validate in (True, False):
        with pytest.raises(error, match=match):
            apply_rotary(q, k, table, table, positions=positions, row_offset=offset, validate=validate)
    with pytest.raises(error if offset != 2 else ValueError, match="row_offset"):
        apply_rotary(q, k, cos, sin, row_offset=offset if offset != 2 else 1)  # without positions too
    for fine in (0, None):
        got = apply_rotary(q, k, table, table, positions=positions, row_offset=fine)
        want = apply_rotary(q, k, table[positions[0]], table[positions[0]])
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_an_inference_tensor_is_not_rotated_in_place_outside_inference_mode(monkeypatch):
    """As torch refuses q.mul_(2) on a tensor made under inference_mode once outside it, so do
    apply_rotary(..., inplace=True) on every path, leaving q and k as they were; inside inference
    mode, and out of place anywhere, the rotation runs."""
    q, k, cos, sin = _inputs()
    with torch.inference_mode():
        qi, ki, other = q.clone(), k.clone(), q.clone()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        other.mul_(2)  # torch's own rule
    want = apply_rotary(q, k, cos, sin)
    for tables in ((cos, sin), (cos.double(), sin.double())):  # fused, and the table conversion
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            apply_rotary(qi, ki, *tables, inplace=True)
        assert torch.equal(qi, q) and torch.equal(ki, k)
    with monkeypatch.context() as m:
        m.setattr(kernels, "kernel_for", lambda device: None)  # no fused kernel: the reference's torch ops
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            apply_rotary(qi, ki, cos, sin, inplace=True)
    assert torch.equal(qi, q) and torch.equal(ki, k)
    got = apply_rotary(qi, ki, cos, sin)
    assert torch.equal(got[0], want[0])
    with torch.inference_mode():
        done = apply_rotary(qi, ki, cos, sin, inplace=True)
    assert done[0] is qi and torch.equal(qi, want[0])
