"""Inputs that look valid to torch but are not what they seem: each gets the right answer or one
clear typed error that names the argument, the value and what is allowed.

* tensors with PyTorch's lazy negation bit (``z.conj().imag``): torch reads them negated, raw memory
  does not, so a kernel must resolve them (inputs) or refuse them (outputs);
* complex tensors with the lazy conjugation bit: refused by dtype on every entry point;
* KV-cache offsets near ``2**63``, as ints, as tensors, and as meta tensors: checked in exact integer
  arithmetic on the one offset path.
"""

from __future__ import annotations

import pytest
import torch

from posenc import RotaryEmbedding
from posenc.rope import apply_rotary, apply_rotary_at, kernels
from posenc.rope.apply import rotate_reference
from posenc.rope.positions import position_ids_from_offsets

INT64_MAX = 2**63 - 1


def negated_view(x: torch.Tensor) -> torch.Tensor:
    """A tensor equal to ``x`` whose memory holds ``-x`` (PyTorch's lazy negation bit set)."""
    view = torch.complex(torch.zeros_like(x), -x).conj().imag  # imag of conj(-i x) = x, stored as -x
    assert view.is_neg() and torch.equal(view, x)
    return view


def reference(q, k, cos, sin):
    cos, sin = cos[:, None], sin[:, None]  # (1, 1, S, r/2)
    return rotate_reference(q, cos, sin), rotate_reference(k, cos, sin)


@pytest.fixture
def case():
    torch.manual_seed(0)
    rope = RotaryEmbedding(8)
    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 1, 4, 8)
    cos, sin = rope.cos_cached[None, 5:9], rope.sin_cached[None, 5:9]  # (1, 4, 4)
    return rope, q, k, cos, sin


# -- the lazy negation bit ---------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["q", "k", "cos", "sin"])
def test_apply_rotary_reads_negated_views_as_their_values(case, which):
    _, q, k, cos, sin = case
    expected = reference(q, k, cos, sin)
    args = {"q": q, "k": k, "cos": cos, "sin": sin}
    args[which] = negated_view(args[which])
    got = apply_rotary(args["q"], args["k"], args["cos"], args["sin"])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("offset", [5, 5000, 2**40])  # decode fast path, cache growth, per-call rows
@pytest.mark.parametrize("heads_first", [True, False])
def test_module_reads_negated_views_as_their_values(case, offset, heads_first):
    rope, q, k, _, _ = case
    if not heads_first:
        q, k = q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous()
    expected = rope(q, k, offset=offset, heads_first=heads_first)
    got = rope(negated_view(q), negated_view(k), offset=offset, heads_first=heads_first)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    ids = torch.arange(4)[None] + offset
    got = rope(negated_view(q), negated_view(k), position_ids=ids, heads_first=heads_first)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_apply_rotary_at_reads_negated_views_and_positions(case):
    rope, q, k, _, _ = case
    positions = torch.tensor([[3, 0, 7, 1]])
    expected = apply_rotary_at(q, k, rope.cos_cached, rope.sin_cached, positions)
    negated_positions = torch._neg_view(-positions)
    assert negated_positions.is_neg() and torch.equal(negated_positions, positions)
    got = apply_rotary_at(negated_view(q), k, rope.cos_cached, negated_view(rope.sin_cached), negated_positions)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_in_place_into_negated_views_writes_the_right_values(case):
    _, q, k, cos, sin = case
    expected = reference(q, k, cos, sin)
    qn, kn = negated_view(q.clone()), negated_view(k.clone())
    out = apply_rotary(qn, kn, cos, sin, inplace=True)
    assert out[0] is qn and out[1] is kn
    torch.testing.assert_close((qn, kn), expected, rtol=0, atol=1e-6)


def test_autograd_through_negated_views(case):
    _, q, k, cos, sin = case
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    expected = reference(qg, kg, cos, sin)
    torch.autograd.grad(sum(t.sum() for t in expected), (qg, kg))
    qn = negated_view(q).requires_grad_()
    got = apply_rotary(qn, k, cos, sin)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_the_cpu_kernel_resolves_negated_inputs_and_refuses_negated_outputs(case):
    _, q, k, cos, sin = case
    kernel = kernels.cpu_kernel()
    if kernel is None:
        pytest.skip("no fused CPU kernel here")
    expected = reference(q, k, cos, sin)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    kernel(negated_view(q), k, q_out, k_out, cos, negated_view(sin), interleaved=False, rotary_dim=8)
    torch.testing.assert_close((q_out, k_out), expected, rtol=0, atol=1e-6)
    with pytest.raises(TypeError, match="q_out has PyTorch's lazy negation bit"):
        kernel(q, k, negated_view(q_out), k_out, cos, sin, interleaved=False, rotary_dim=8)


def test_complex_inputs_with_the_conjugation_bit_are_refused_by_dtype(case):
    rope, q, k, cos, sin = case
    z = torch.complex(q, q).conj()
    assert z.is_conj()
    with pytest.raises(TypeError, match="q must be a floating-point tensor, got dtype torch.complex64"):
        apply_rotary(z, k, cos, sin)
    with pytest.raises(TypeError, match="q must be a floating-point tensor, got dtype torch.complex64"):
        rope(z, z, offset=3)
    with pytest.raises(TypeError, match="cos must be a floating-point tensor"):
        apply_rotary(q, k, torch.complex(cos, cos).conj(), sin)


# -- offsets in exact integer arithmetic -------------------------------------------------------------
def test_an_offset_whose_positions_fit_int64_is_used_exactly(case):
    rope, q, k, _, _ = case
    big = INT64_MAX - 3  # positions big .. big + 3 = 2**63 - 1: all valid int64
    ids = (torch.arange(4) + big)[None]
    expected = rope(q, k, position_ids=ids)
    torch.testing.assert_close(rope(q, k, offset=big), expected, rtol=0, atol=0)
    torch.testing.assert_close(rope(q, k, offset=torch.tensor([big, big])), expected, rtol=0, atol=0)
    assert torch.equal(position_ids_from_offsets(big, 4), ids)


@pytest.mark.parametrize("as_tensor", [False, True])
def test_an_offset_past_int64_is_refused_by_name_not_wrapped(case, as_tensor):
    rope, q, k, _, _ = case
    offset = INT64_MAX - 2  # the fourth position would be 2**63
    given = torch.tensor([0, offset]) if as_tensor else offset
    with pytest.raises(ValueError, match=rf"offset \+ seq_len - 1 must be <= 2\*\*63 - 1.*got offset {offset}"):
        rope(q, k, offset=given)
    with pytest.raises(ValueError, match=rf"got offsets {offset}"):
        position_ids_from_offsets(given, 4)


def test_a_meta_offset_is_refused_for_real_inputs_and_shaped_for_meta_ones(case):
    rope, q, k, _, _ = case
    with pytest.raises(ValueError, match="offset is a meta tensor, which has no values, but the input is on cpu"):
        rope(q, k, offset=torch.tensor([3, 4], device="meta"))
    with torch.device("meta"):
        meta_rope = RotaryEmbedding(8)
    qm, km = q.to("meta"), k.to("meta")
    out = meta_rope(qm, km, offset=torch.tensor([3, 4], device="meta"))
    assert out[0].shape == q.shape and out[0].device.type == "meta"


@pytest.mark.parametrize("offset", [-1, torch.tensor([0, -1])])
def test_negative_offsets_are_refused_with_the_value(case, offset):
    rope, q, k, _, _ = case
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        rope(q, k, offset=offset)


def test_offset_tensor_of_the_wrong_batch_is_refused(case):
    rope, q, k, _, _ = case
    with pytest.raises(ValueError, match=r"offset must be an int or a \(batch,\) tensor.*got shape \(3,\)"):
        rope(q, k, offset=torch.tensor([1, 2, 3]))


# -- finite but extreme Hugging Face config values ---------------------------------------------------
def hf_config(rope: dict) -> dict:
    return {"head_dim": 64, "max_position_embeddings": 4096, "rope_parameters": rope}


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
LONGROPE = {"rope_type": "longrope", "original_max_position_embeddings": 1024, "short_factor": [1.0] * 32}


@pytest.mark.parametrize(
    "rope, field",
    [
        ({**YARN, "attention_factor": 1e39}, "attention_factor"),
        ({**YARN, "mscale": 1e39, "mscale_all_dim": 1.0}, "mscale"),
        ({**YARN, "mscale": 1.0, "mscale_all_dim": 1.7e308}, "mscale_all_dim"),
        ({**LONGROPE, "long_factor": [1.0] * 32, "attention_factor": 1e39}, "attention_factor"),
        ({**LONGROPE, "long_factor": [1e-320] * 32}, r"long_factor\[0\]"),
        ({**LONGROPE, "long_factor": [1.0] * 32, "factor": 1e-320}, "factor"),
    ],
    ids=["yarn-attention", "yarn-mscale", "yarn-mscale-all-dim", "longrope-attention", "longrope-pair", "longrope"],
)
def test_hf_fields_that_would_make_tables_infinite_are_refused_by_name(rope, field):
    with pytest.raises(ValueError, match=rf"scaling: {field} must be .*, got"):
        RotaryEmbedding.from_hf_config(hf_config(rope))


@pytest.mark.parametrize("beta", [5e-324, 1e-300])
def test_yarn_with_a_tiny_beta_slow_is_computed_not_overflowed(beta):
    rope = RotaryEmbedding.from_hf_config(hf_config({**YARN, "beta_slow": beta}))
    q = torch.randn(1, 1, 2, 64)
    out = rope(q, q, offset=4000)
    assert torch.isfinite(rope.cos_cached).all() and torch.isfinite(out[0]).all()
    # a tiny beta_slow only moves the ramp's end past the last pair, as any beta_slow below ~2e-6 does here
    reference = RotaryEmbedding.from_hf_config(hf_config({**YARN, "beta_slow": 1e-10}))
    torch.testing.assert_close(rope.frequencies()[0], reference.frequencies()[0], rtol=0, atol=0)


@pytest.mark.parametrize("model_type", [[1], {"a": 1}, 3])
def test_a_model_type_that_is_not_a_string_is_refused_by_name(model_type):
    # a list reached a set lookup and raised "unhashable type: 'list'", naming no field
    with pytest.raises(ValueError, match=r"config field model_type must be a string, got "):
        RotaryEmbedding.from_hf_config({**hf_config(YARN), "model_type": model_type})


def test_an_integer_field_past_its_range_is_quoted_as_given():
    # 1e300 is a whole float: the message quotes it so, not as the 301 digits of int(1e300)
    with pytest.raises(ValueError, match=r"original_max_position_embeddings .*<= 2\*\*53, got 1e\+300$"):
        RotaryEmbedding.from_hf_config(hf_config({**YARN, "original_max_position_embeddings": 1e300}))
