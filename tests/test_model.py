"""The reference model: each scheme's hook acts at its place; NoPE without a mask is order-blind."""

import pytest
import torch

from posenc import SCHEMES, CausalSelfAttention, ModelConfig, TinyLM, make_scheme

D, H = 32, 4


def _attn_and_scheme(name):
    torch.manual_seed(0)
    return CausalSelfAttention(D, H), make_scheme(name, d_model=D, n_heads=H, max_len=64)


def test_nope_without_mask_is_permutation_equivariant():
    attn, scheme = _attn_and_scheme("nope")
    x = torch.randn(1, 7, D)
    perm = torch.randperm(7)
    pos = torch.arange(7).unsqueeze(0)
    y = attn(x, scheme, pos, causal=False)
    y_perm = attn(x[:, perm], scheme, pos, causal=False)
    torch.testing.assert_close(y_perm, y[:, perm], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", [s for s in SCHEMES if s != "nope"])
def test_every_scheme_breaks_the_symmetry(name):
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=name, d_model=D, n_heads=H, n_layers=1, max_len=64))
    ids = torch.tensor([[1, 2, 3, 1, 4]])
    swapped = torch.tensor([[1, 4, 3, 1, 2]])  # swap tokens at positions 1 and 4
    a = model.hidden_states(ids, causal=False).sum(1)
    b = model.hidden_states(swapped, causal=False).sum(1)
    assert (a - b).abs().max() > 1e-4


def test_nope_model_pools_to_the_same_vector_without_mask():
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme="nope", d_model=D, n_heads=H, n_layers=2))
    a = model.hidden_states(torch.tensor([[1, 2, 3, 1, 4]]), causal=False).sum(1)
    b = model.hidden_states(torch.tensor([[1, 4, 3, 1, 2]]), causal=False).sum(1)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", SCHEMES)
def test_causal_model_never_looks_ahead(name):
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=name, d_model=D, n_heads=H, n_layers=2, max_len=64))
    ids = torch.randint(0, 256, (2, 12))
    changed = ids.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 256
    torch.testing.assert_close(model(ids)[:, :8], model(changed)[:, :8])


def test_rope_model_is_shift_invariant_and_alibi_too():
    for name in ("rope", "alibi"):
        torch.manual_seed(0)
        model = TinyLM(ModelConfig(scheme=name, d_model=D, n_heads=H, n_layers=2)).double()
        ids = torch.randint(0, 256, (1, 10))
        torch.testing.assert_close(model(ids), model(ids, offset=500))


def test_absolute_schemes_are_not_shift_invariant():
    for name in ("sinusoidal", "learned"):
        torch.manual_seed(0)
        model = TinyLM(ModelConfig(scheme=name, d_model=D, n_heads=H, n_layers=1, max_len=600))
        ids = torch.randint(0, 256, (1, 10))
        assert (model(ids) - model(ids, offset=500)).abs().max() > 1e-4


def test_learned_model_refuses_positions_past_its_table():
    model = TinyLM(ModelConfig(scheme="learned", d_model=D, n_heads=H, n_layers=1, max_len=16))
    model(torch.zeros(1, 16, dtype=torch.long))
    with pytest.raises(IndexError, match="position 16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_model_cast_to_bf16_keeps_position_tables():
    model = TinyLM(ModelConfig(scheme="rope", d_model=D, n_heads=H, n_layers=1)).to(torch.bfloat16)
    assert model.scheme.cos_cached.dtype == torch.float32
    assert model(torch.randint(0, 256, (1, 9))).dtype == torch.bfloat16


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="scheme"):
        TinyLM(ModelConfig(scheme="relative"))
    with pytest.raises(ValueError, match="divisible"):
        TinyLM(ModelConfig(d_model=30, n_heads=4))
    with pytest.raises(TypeError, match="integer token ids"):
        TinyLM(ModelConfig(d_model=D, n_heads=H, n_layers=1))(torch.zeros(1, 3))


def test_attention_uses_the_schemes_softmax_scale_factor():
    """A scheme's softmax_scale_factor multiplies 1/sqrt(head_dim), like scaling q by it."""
    attn, scheme = _attn_and_scheme("rope")
    x = torch.randn(1, 6, D)
    pos = torch.arange(6).unsqueeze(0)
    base = attn(x, scheme, pos)
    scheme.softmax_scale_factor = 1.7
    scaled = attn(x, scheme, pos)
    assert (scaled - base).abs().max() > 1e-4
    with torch.no_grad():  # same as scaling the q rows of qkv by 1.7
        attn.qkv.weight[:D] *= 1.7
    scheme.softmax_scale_factor = 1.0
    torch.testing.assert_close(attn(x, scheme, pos), scaled, atol=1e-5, rtol=1e-5)


def test_every_attribute_the_model_reads_from_a_scheme_is_declared_on_position_scheme():
    """The model reads a scheme only through what PositionScheme declares, never by guessing with
    getattr: a hook a scheme can have is one place in the base class."""
    import ast
    import inspect

    import posenc.model
    from posenc import PositionScheme

    tree = ast.parse(inspect.getsource(posenc.model))

    def is_scheme(node):
        return (isinstance(node, ast.Name) and node.id == "scheme") or (
            isinstance(node, ast.Attribute) and node.attr == "scheme"
        )

    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and is_scheme(n.value)}
    guessed = [
        ast.unparse(n)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "getattr" and n.args and is_scheme(n.args[0])
    ]
    assert {"rotate", "accepts_positions", "softmax_scale_factor"} <= read
    assert all(hasattr(PositionScheme, name) for name in read), read
    assert guessed == []
    assert PositionScheme().softmax_scale_factor == 1.0


@pytest.mark.parametrize("name", ["rope", "alibi", "sinusoidal", "learned"])
def test_model_compiles_without_graph_breaks(name):
    import torch._dynamo as dynamo

    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=name, d_model=D, n_heads=H, n_layers=1))
    ids = torch.randint(0, 256, (2, 16))
    explained = dynamo.explain(model)(ids)
    assert explained.graph_break_count == 0, [b.reason for b in explained.break_reasons]


def test_token_embeddings_are_scaled_by_sqrt_d_model_only_under_the_fixed_sine_table():
    for name, want in (("sinusoidal", D**0.5), ("learned", 1.0), ("rope", 1.0), ("nope", 1.0)):
        model = TinyLM(ModelConfig(scheme=name, d_model=D, n_heads=H, n_layers=1, max_len=32))
        assert model.embed_scale == pytest.approx(want)
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme="sinusoidal", d_model=D, n_heads=H, n_layers=1, embed_scale=3.0))
    ids = torch.randint(0, 256, (1, 5))
    seen = {}
    model.blocks[0].register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
    model(ids)
    want = model.tok(ids) * 3.0 + model.scheme.encodings(torch.arange(5)[None])
    torch.testing.assert_close(seen["x"], want)
    with pytest.raises(ValueError, match="embed_scale"):
        TinyLM(ModelConfig(embed_scale=0.0))


def test_a_scheme_written_against_tensors_gets_tensors():
    """Schemes from outside posenc see plain position tensors in every hook, as before."""
    from posenc import PositionScheme

    seen = []

    class TensorOnly(PositionScheme):
        def embed(self, x, position_ids):
            seen.append(type(position_ids))
            return x + position_ids.unsqueeze(-1).to(x.dtype) * 0.0

        def rotate(self, q, k, position_ids):
            seen.append(type(position_ids))
            return q, k

        def bias(self, q_positions, k_positions):
            seen.append(type(q_positions))
            return None

    model = TinyLM(ModelConfig(d_model=16, n_heads=2, n_layers=2), scheme=TensorOnly())
    model(torch.zeros(1, 4, dtype=torch.long), position_ids=torch.tensor([[0, 1, 0, 1]]))
    model(torch.zeros(1, 4, dtype=torch.long), offset=3)
    assert seen and all(t is torch.Tensor for t in seen)
