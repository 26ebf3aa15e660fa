"""One set of position rules on every path: fused, reference, compiled, meta device.

Rules (posenc._checks): integer dtypes only, bool refused by name; uint8 is positions, never a mask;
negative positions, and positions past a bounded table, raise with the offending value. Compiled
graphs assert the same rules instead of wrapping a negative index to the last row.
"""

import pytest
import torch

import posenc
from posenc import (
    ALiBi,
    LearnedPositionalEmbedding,
    ModelConfig,
    PositionOutOfRangeError,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    TinyLM,
)
from posenc._checks import check_positions, checked_positions
from posenc.rope import apply_rotary_at, rope_inv_freq, rope_table

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def rope_and_inputs(head_dim=8, seq=4):
    torch.manual_seed(0)
    rope = RotaryEmbedding(head_dim, max_position_embeddings=16)
    q, k = torch.randn(2, 2, seq, head_dim), torch.randn(2, 1, seq, head_dim)
    return rope, q, k


def non_contiguous(x):
    """The same values with a strided last dimension: the dispatcher sends these to the reference."""
    return x.transpose(-1, -2).contiguous().transpose(-1, -2)


# -- dtypes --------------------------------------------------------------------------------------
ENTRY_POINTS = {
    "rope.forward": lambda p: RotaryEmbedding(8)(torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8), position_ids=p),
    "rope.cos_sin": lambda p: RotaryEmbedding(8).cos_sin(p),
    "sinusoidal": lambda p: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8), position_ids=p),
    "learned": lambda p: LearnedPositionalEmbedding(16, 8)(torch.zeros(1, 3, 8), position_ids=p),
    "alibi.bias": lambda p: ALiBi(2).bias(p[0], p[0]),
    "tinylm": lambda p: TinyLM(ModelConfig(d_model=16, n_heads=2, n_layers=1))(
        torch.zeros(1, 3, dtype=torch.long), position_ids=p
    ),
    "apply_rotary_at": lambda p: apply_rotary_at(
        torch.randn(1, 1, 3, 8), torch.randn(1, 1, 3, 8), *rope_table(16, rope_inv_freq(8)), p
    ),
    "checked_positions": lambda p: checked_positions(3, p, 0, torch.device("cpu")),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_bool_positions_are_refused_by_name(entry):
    with pytest.raises(TypeError, match="torch.bool.*mask"):
        ENTRY_POINTS[entry](torch.tensor([[True, False, True]]))


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_floating_positions_are_refused(entry, dtype):
    with pytest.raises(TypeError, match="integer dtype"):
        ENTRY_POINTS[entry](torch.tensor([[0, 1, 2]], dtype=dtype))


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_non_tensor_positions_are_refused(entry):
    with pytest.raises(TypeError, match="position"):
        ENTRY_POINTS[entry]([[0, 1, 2]])


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("path", ["fused", "reference"])
def test_every_integer_dtype_gives_the_int64_answer(dtype, path):
    """Regression: uint8 positions were used as a boolean mask on the reference paths."""
    rope, q, k = rope_and_inputs()
    if path == "reference":
        q, k = non_contiguous(q), non_contiguous(k)
    pos = torch.tensor([[5, 1, 1, 0], [2, 3, 4, 5]])
    want = rope(q, k, position_ids=pos)
    got = rope(q, k, position_ids=pos.to(dtype))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    pe = SinusoidalPositionalEncoding(8)
    torch.testing.assert_close(pe.encodings(pos.to(dtype)), pe.encodings(pos), atol=0, rtol=0)
    learned = LearnedPositionalEmbedding(16, 8)
    torch.testing.assert_close(learned.encodings(pos.to(dtype)), learned.encodings(pos), atol=0, rtol=0)


def test_apply_rotary_at_reference_path_reads_uint8_as_positions():
    cos, sin = rope_table(8, rope_inv_freq(8))
    q = non_contiguous(torch.randn(1, 1, 3, 8))
    pos = torch.tensor([[5, 1, 2]])
    want = apply_rotary_at(q, q.clone(), cos, sin, pos)
    got = apply_rotary_at(q, q.clone(), cos, sin, pos.to(torch.uint8))
    torch.testing.assert_close(got[0], want[0], atol=0, rtol=0)


# -- values --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["fused", "reference", "meta module"])
def test_negative_positions_raise_the_same_error_on_every_path(path):
    rope, q, k = rope_and_inputs()
    if path == "reference":
        q, k = non_contiguous(q), non_contiguous(k)
    if path == "meta module":
        with torch.device("meta"):
            rope = RotaryEmbedding(8, max_position_embeddings=16)
        q, k = q.to("meta"), k.to("meta")
    pos = torch.tensor([[0, 1, -7, 3], [0, 1, 2, 3]])
    with pytest.raises(ValueError, match=r"position_ids must be >= 0, got -7 at index \(0, 2\)"):
        rope(q, k, position_ids=pos)
    with pytest.raises(ValueError, match=r"position_ids must be >= 0, got -7 at index \(0, 2\)"):
        rope.cos_sin(pos)


@pytest.mark.parametrize("scheme", posenc.SCHEMES)
def test_every_scheme_in_the_model_refuses_negative_positions_with_the_value(scheme):
    model = TinyLM(ModelConfig(scheme=scheme, d_model=16, n_heads=2, n_layers=1, max_len=8))
    with pytest.raises(ValueError, match=r"got -2 at index \(0, 1\)"):
        model(torch.zeros(1, 3, dtype=torch.long), position_ids=torch.tensor([[0, -2, 1]]))


def test_out_of_range_is_named_with_the_value():
    with pytest.raises(ValueError, match=r"must be < 10, got 12 at index \(1,\)"):
        check_positions("p", torch.tensor([3, 12, 11]), upper=10)
    learned = LearnedPositionalEmbedding(4, 8)
    with pytest.raises(PositionOutOfRangeError, match="position 4 .*up to 6"):
        learned.encodings(torch.tensor([[0, 6, 4]]))
    with pytest.raises(ValueError, match="must be < 16"):
        apply_rotary_at(
            torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8), *rope_table(16, rope_inv_freq(8)), torch.tensor([[0, 16]])
        )


def test_meta_positions_follow_the_dtype_and_shape_rules():
    with pytest.raises(TypeError, match="torch.bool"):
        checked_positions(3, torch.zeros(1, 3, dtype=torch.bool, device="meta"), 0, torch.device("meta"))
    with pytest.raises(ValueError, match=r"shape \(batch, 3\)"):
        checked_positions(3, torch.zeros(1, 4, dtype=torch.long, device="meta"), 0, torch.device("meta"))
    pos = checked_positions(3, torch.zeros(1, 3, dtype=torch.int32, device="meta"), 0, torch.device("meta"))
    assert pos.ids.dtype == torch.int64 and pos.length is None


# -- torch.compile -------------------------------------------------------------------------------------
def compiled_rope(backend):
    torch._dynamo.reset()
    rope, q, k = rope_and_inputs()
    return rope, torch.compile(rope, backend=backend, fullgraph=True), q, k


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_rope_refuses_negative_positions_instead_of_wrapping(backend):
    """Regression: inside torch.compile a negative position silently read the last cached row."""
    rope, compiled, q, k = compiled_rope(backend)
    good = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    for a, b in zip(compiled(q, k, position_ids=good), rope(q, k, position_ids=good)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="position_ids must be >= 0"):
        compiled(q, k, position_ids=torch.tensor([[0, 1, -1, 3], [4, 5, 6, 7]]))
    with pytest.raises(RuntimeError, match="position_ids must be < 16"):
        compiled(q, k, position_ids=torch.tensor([[0, 1, 2, 3], [4, 5, 6, 99]]))


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned"])
def test_compiled_additive_schemes_refuse_bad_positions(scheme):
    torch._dynamo.reset()
    if scheme == "sinusoidal":
        module = SinusoidalPositionalEncoding(8, max_len=16)
    else:
        module = LearnedPositionalEmbedding(16, 8)
    compiled = torch.compile(module, backend="eager", fullgraph=True)
    x = torch.zeros(1, 3, 8)
    good = torch.tensor([[0, 5, 15]])
    torch.testing.assert_close(compiled(x, position_ids=good), module(x, position_ids=good), atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="must be >= 0"):
        compiled(x, position_ids=torch.tensor([[0, -1, 2]]))
    with pytest.raises(RuntimeError, match="must be < 16"):
        compiled(x, position_ids=torch.tensor([[0, 16, 2]]))


@pytest.mark.slow
def test_compiled_rope_with_inductor_refuses_negative_positions():
    rope, compiled, q, k = compiled_rope("inductor")
    good = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    for a, b in zip(compiled(q, k, position_ids=good), rope(q, k, position_ids=good)):
        torch.testing.assert_close(a, b)
    with pytest.raises(RuntimeError, match="position_ids must be >= 0"):
        compiled(q, k, position_ids=torch.tensor([[0, 1, -1, 3], [4, 5, 6, 7]]))


@pytest.mark.slow
@pytest.mark.parametrize("scheme", posenc.SCHEMES)
def test_compiled_model_is_one_graph_and_refuses_negative_positions(scheme):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=scheme, d_model=16, n_heads=2, n_layers=2, max_len=32)).eval()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    idx, pos = torch.randint(0, 256, (2, 5)), torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])
    with torch.no_grad():
        torch.testing.assert_close(compiled(idx, position_ids=pos), model(idx, position_ids=pos), atol=0, rtol=0)
        with pytest.raises(RuntimeError, match="position_ids must be >= 0"):
            compiled(idx, position_ids=-pos)
