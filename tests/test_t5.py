"""T5's relative position bias: buckets and bias equal to transformers' T5 (and mT5, UMT5), a T5
checkpoint's table loads by its own key, the bias depends on k - q only, buckets grow with distance
and saturate at max_distance, and bad settings or positions are refused by name."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import ModelConfig, T5RelativeBias, TinyLM, t5_buckets
from posenc.t5 import check_t5_buckets, t5_bucket_thresholds

transformers = pytest.importorskip("transformers")
from transformers import T5Config  # noqa: E402
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

#: (num_buckets, max_distance) pairs: T5's defaults, odd and small counts, a max_distance just past
#: the exact range, and long ones
SETTINGS = [(32, 128), (16, 128), (64, 256), (7, 20), (5, 3), (4, 2), (2, 2), (3, 5), (128, 1000), (32, 4096)]


def relative_range(max_distance: int) -> torch.Tensor:
    return torch.arange(-3 * max_distance - 40, 3 * max_distance + 40)


def valid(num_buckets: int, max_distance: int, bidirectional: bool) -> bool:
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    return per_direction >= 2 and max_distance > per_direction // 2


def oracle(relative: torch.Tensor, num_buckets: int, max_distance: int, bidirectional: bool) -> torch.Tensor:
    return T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )


# -- parity with transformers ---------------------------------------------------------------------------
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", SETTINGS)
def test_buckets_equal_transformers_t5(num_buckets, max_distance, bidirectional):
    if not valid(num_buckets, max_distance, bidirectional):
        with pytest.raises(ValueError, match="num_buckets|max_distance"):
            T5RelativeBias(2, num_buckets, max_distance, bidirectional)
        return
    bias = T5RelativeBias(2, num_buckets, max_distance, bidirectional)
    relative = relative_range(max_distance)
    query = torch.tensor([10**7])
    got = bias.buckets(query, query + relative)[0]  # keys at query + r: relative position r
    assert torch.equal(got, oracle(relative, num_buckets, max_distance, bidirectional))


@given(
    num_buckets=st.integers(2, 300),
    max_distance=st.integers(2, 5000),
    bidirectional=st.booleans(),
    query=st.integers(0, 2**40),
)
def test_buckets_equal_transformers_t5_for_drawn_settings(num_buckets, max_distance, bidirectional, query):
    """Correct against transformers, or a ValueError naming the setting."""
    if not valid(num_buckets, max_distance, bidirectional):
        with pytest.raises(ValueError, match="num_buckets|max_distance"):
            T5RelativeBias(1, num_buckets, max_distance, bidirectional)
        return
    bias = T5RelativeBias(1, num_buckets, max_distance, bidirectional)
    relative = torch.arange(-2 * max_distance, 2 * max_distance + 1)
    relative = relative[query + relative >= 0]  # positions are never negative
    got = bias.buckets(torch.tensor([query]), query + relative)[0]
    assert torch.equal(got, oracle(relative, num_buckets, max_distance, bidirectional))


def tiny_t5_config(num_buckets: int, max_distance: int, is_decoder: bool) -> "T5Config":
    return T5Config(
        vocab_size=32,
        d_model=16,
        d_kv=4,
        d_ff=32,
        num_layers=1,
        num_heads=4,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        is_decoder=is_decoder,
    )


def loaded_from(attention: torch.nn.Module, config) -> T5RelativeBias:
    """Our bias with the attention's own table, loaded by T5's key (strict: no key missing or extra)."""
    ours = T5RelativeBias.from_hf_config(config)
    table = {k: v for k, v in attention.state_dict().items() if k.startswith("relative_attention_bias.")}
    assert set(table) == set(ours.state_dict()) == {"relative_attention_bias.weight"}
    ours.load_state_dict(table, strict=True)
    return ours


@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 20), (7, 9), (64, 50)])
def test_bias_equals_t5_attention_compute_bias(num_buckets, max_distance, is_decoder):
    torch.manual_seed(0)
    config = tiny_t5_config(num_buckets, max_distance, is_decoder)
    attention = T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()
    torch.nn.init.normal_(attention.relative_attention_bias.weight)
    ours = loaded_from(attention, config)
    assert ours.bidirectional is (not is_decoder)
    for q_len, k_len, past in ((5, 5, 0), (1, 300, 299), (40, 240, 200), (300, 300, 0)):
        want = attention.compute_bias(q_len, k_len, past_seen_tokens=past)[0]  # (H, q_len, k_len)
        assert torch.equal(ours(q_len, k_len, offset=past), want), (q_len, k_len, past)


def test_mt5_and_umt5_compute_the_same_bias():
    """mT5 is T5's code; UMT5 keeps a table in every layer and reads is_decoder itself."""
    from transformers import MT5Config, UMT5Config
    from transformers.models.mt5.modeling_mt5 import MT5Attention
    from transformers.models.umt5.modeling_umt5 import UMT5Attention

    for cls, attention_cls in ((MT5Config, MT5Attention), (UMT5Config, UMT5Attention)):
        for is_decoder in (False, True):
            torch.manual_seed(1)
            config = cls(
                vocab_size=32, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2, is_decoder=is_decoder,
                relative_attention_num_buckets=24, relative_attention_max_distance=64,
            )  # fmt: skip
            attention = attention_cls(config, has_relative_attention_bias=True, layer_idx=0).eval()
            torch.nn.init.normal_(attention.relative_attention_bias.weight)
            ours = loaded_from(attention, config)
            want = attention.compute_bias(70, 200, past_seen_tokens=130)[0]
            assert torch.equal(ours(70, 200, offset=130), want), (cls.__name__, is_decoder)


def test_a_t5_models_encoder_and_decoder_tables_load_by_their_keys():
    """The first block of a T5 model holds the one table of each stack: ours loads it under that key."""
    from transformers import T5Model

    torch.manual_seed(0)
    config = tiny_t5_config(32, 128, is_decoder=False)
    model = T5Model(config).eval()
    for stack, decoder in (("encoder", False), ("decoder", True)):
        attention = getattr(model, stack).block[0].layer[0].SelfAttention
        prefix = f"{stack}.block.0.layer.0.SelfAttention."
        weights = {k[len(prefix) :]: v for k, v in model.state_dict().items() if k.startswith(prefix + "relative")}
        ours = T5RelativeBias.from_hf_config(model.config, is_decoder=decoder)
        ours.load_state_dict(weights, strict=True)
        assert ours.bidirectional is (not decoder)
        assert torch.equal(ours(9, 9), attention.compute_bias(9, 9)[0])


# -- the mathematics --------------------------------------------------------------------------------------
@given(
    shift=st.integers(0, 2**50),
    q=st.lists(st.integers(0, 500), min_size=1, max_size=12),
    k=st.lists(st.integers(0, 500), min_size=1, max_size=12),
    bidirectional=st.booleans(),
)
def test_bias_depends_only_on_key_minus_query(shift, q, k, bidirectional):
    torch.manual_seed(0)
    bias = T5RelativeBias(3, 32, 128, bidirectional)
    q, k = torch.tensor(q), torch.tensor(k)
    near = bias.bias(q, k)
    assert near.shape == (3, len(q), len(k))
    assert torch.equal(near, bias.bias(q + shift, k + shift))
    table = bias.relative_attention_bias.weight  # (buckets, heads)
    buckets = bias.buckets(q, k)
    assert torch.equal(near, table[buckets].permute(2, 0, 1))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (17, 40), (256, 10_000), (8, 5)])
def test_buckets_exact_near_logarithmic_far_and_saturated_from_max_distance(num_buckets, max_distance, bidirectional):
    distances = torch.arange(0, 4 * max_distance)
    n = num_buckets // 2 if bidirectional else num_buckets
    exact = n // 2
    for sign, offset in ((-1, 0), (1, n if bidirectional else None)):
        if offset is None:  # causal: keys after the query share bucket 0 (the mask hides them)
            got = t5_buckets(torch.tensor([0]), distances[1:], num_buckets, max_distance, bidirectional)[0]
            assert (got == 0).all()
            continue
        query = torch.tensor([4 * max_distance])
        got = t5_buckets(query, query + sign * distances, num_buckets, max_distance, bidirectional)[0] - offset
        if sign > 0:
            got, distances_used = got[1:], distances[1:]  # r = 0 is a "past" distance
        else:
            distances_used = distances
        assert ((got >= 0) & (got < n)).all()
        near = distances_used < exact
        assert torch.equal(got[near], distances_used[near])  # one bucket per distance below the exact range
        assert (got.diff() >= 0).all()  # never a nearer bucket for a farther key
        assert (got[distances_used >= max_distance] == n - 1).all()  # saturated from max_distance on
        # the logarithmic buckets: bucket e + j starts where (d / e) ** (n - e) reaches (max_distance / e) ** j
        for d, b in zip(distances_used.tolist(), got.tolist()):
            if exact <= d < max_distance:
                want = exact + math.floor(math.log(d / exact) / math.log(max_distance / exact) * (n - exact) + 1e-9)
                assert b == min(want, n - 1), (d, b, want)


def test_thresholds_of_t5_defaults_and_the_whole_number_boundary():
    """T5's encoder buckets 8..15 start at 8, 12, 16, 23, 32, 46, 64, 91: 64 = 8 * 16 ** (6/8) exactly,
    where a float64 product in another order (log(d / e) * ((n - e) / log(max_distance / e))) falls just
    short of 6 (an earlier version of posenc's thresholds put 64 in bucket 13)."""
    assert t5_bucket_thresholds(32, 128, True).tolist() == [12, 16, 23, 32, 46, 64, 91]
    assert math.floor(math.log(64 / 8) * (8 / math.log(16))) == 5  # the other order's rounding
    assert t5_buckets(torch.tensor([0]), torch.tensor([63, 64]), 32, 128)[0].tolist() == [16 + 13, 16 + 14]


def test_buckets_follow_t5s_float32_where_real_numbers_differ():
    """300 buckets, max_distance 1117: at distance 454 the formula is 49.9999989 in real numbers and
    50.0 in T5's float32; T5 (and a checkpoint trained with it) puts the key one bucket further.
    (Exact integer thresholds, an earlier version of posenc's, gave 274 here.)"""
    e, span = 75, 75
    assert 454**span * e**50 < 1117**50 * e**span  # in real numbers 454 has not reached step 50
    got = t5_buckets(torch.tensor([0]), torch.tensor([453, 454]), 300, 1117)[0]
    want = oracle(torch.tensor([453, 454]), 300, 1117, True)
    assert got.tolist() == want.tolist() == [150 + 75 + 49, 150 + 75 + 50]


def test_far_int64_positions_saturate():
    bias = T5RelativeBias(2)
    far = torch.tensor([0, 2**62, 2**63 - 1])
    buckets = bias.buckets(far, far)
    assert buckets.tolist() == [[0, 31, 31], [15, 0, 31], [15, 15, 0]]


# -- the reference model ------------------------------------------------------------------------------------
def test_t5_in_the_reference_model_is_causal_and_trains_its_table():
    config = ModelConfig(scheme="t5", d_model=16, n_layers=2, n_heads=2, max_len=32)
    model = TinyLM(config)
    assert isinstance(model.scheme, T5RelativeBias) and model.scheme.bidirectional is False
    idx = torch.randint(0, 256, (2, 20))
    logits = model(idx)
    changed = idx.clone()
    changed[:, 15:] = (changed[:, 15:] + 1) % 256
    torch.testing.assert_close(model(changed)[:, :15], logits[:, :15], rtol=0, atol=0)  # no look-ahead
    logits.sum().backward()
    grad = model.scheme.relative_attention_bias.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    assert "t5" in posenc.SCHEMES


def test_the_bias_is_built_once_per_forward_for_all_layers():
    model = TinyLM(ModelConfig(scheme="t5", d_model=16, n_layers=3, n_heads=2))
    calls = []
    original = model.scheme.bias
    model.scheme.bias = lambda q, k: calls.append(1) or original(q, k)  # type: ignore[method-assign]
    model(torch.randint(0, 256, (1, 10)))
    assert len(calls) == 1  # one row of positions, one bias, shared by three layers


# -- bad input ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(num_buckets=0), ValueError, "num_buckets must be >= 4 with bidirectional=True"),
        (dict(num_buckets=3), ValueError, "num_buckets must be >= 4"),
        (dict(num_buckets=1, bidirectional=False), ValueError, "num_buckets must be >= 2 with bidirectional=False"),
        (dict(num_buckets=32, max_distance=8), ValueError, "max_distance must be > 8, the exact buckets"),
        (dict(num_buckets=32, max_distance=16, bidirectional=False), ValueError, "max_distance must be > 16"),
        (dict(max_distance=-5), ValueError, "max_distance must be > 8"),
        (dict(max_distance=2**20 + 1), ValueError, r"max_distance must be <= 2\*\*20"),
        (dict(num_buckets=32.0), TypeError, "num_buckets must be an integer"),
        (dict(max_distance=True), TypeError, "max_distance must be an integer"),
        (dict(bidirectional=1), TypeError, "bidirectional must be True or False"),
        (dict(num_heads=0), ValueError, "num_heads must be >= 1"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs, error, match):
    args = {"num_heads": 2, **kwargs}
    with pytest.raises(error, match=match):
        T5RelativeBias(**args)


def test_bad_positions_are_refused_by_name():
    bias = T5RelativeBias(2)
    with pytest.raises(TypeError, match="q_positions must have an integer dtype"):
        bias.bias(torch.tensor([0.0, 1.0]), torch.arange(2))
    with pytest.raises(TypeError, match="k_positions must have an integer dtype, got torch.bool"):
        bias.bias(torch.arange(2), torch.tensor([True, False]))
    with pytest.raises(ValueError, match="k_positions must be >= 0"):
        bias.bias(torch.arange(2), torch.tensor([0, -1]))
    with pytest.raises(ValueError, match=r"q_positions must have shape \(L,\)"):
        bias.bias(torch.zeros(2, 2, dtype=torch.long), torch.arange(2))
    with pytest.raises(ValueError, match="offset must be >= 0"):
        bias(3, 3, offset=-1)
    with pytest.raises(TypeError, match="q_positions must be a torch.Tensor"):
        t5_buckets([0, 1], torch.arange(2))  # type: ignore[arg-type]


def test_gradients_reach_exactly_the_buckets_used():
    """The bias is a lookup: gradcheck in float64, and a bucket no pair reads gets no gradient."""
    bias = T5RelativeBias(2, 16, 20).double()
    table = bias.relative_attention_bias.weight.detach().clone().requires_grad_(True)

    def run(weight):  # queries 0..2 over keys 0..5, with ``weight`` as the table
        return torch.func.functional_call(bias, {"relative_attention_bias.weight": weight}, (3, 6))

    assert torch.autograd.gradcheck(run, (table,))
    run(table).sum().backward()
    used = set(bias.buckets(torch.arange(3), torch.arange(6)).flatten().tolist())
    assert {b for b in range(16) if table.grad[b].abs().sum() > 0} == used


def test_from_hf_config_names_what_is_missing():
    with pytest.raises(ValueError, match="the config has no num_heads"):
        T5RelativeBias.from_hf_config({"relative_attention_num_buckets": 32})
    made = T5RelativeBias.from_hf_config({"num_heads": 3, "relative_attention_max_distance": 64, "is_decoder": True})
    assert (made.num_heads, made.num_buckets, made.max_distance, made.bidirectional) == (3, 32, 64, False)


def test_check_returns_the_settings():
    assert check_t5_buckets(32, 128, True) == (32, 128, True)
