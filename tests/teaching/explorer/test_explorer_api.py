"""The explorer's JSON API, in process: every workbench endpoint, its numbers against the library's, and
bad input.

The numbers are checked against posenc's public functions (or closed forms of them), never against the
explorer's own functions, so a view cannot drift from the library unnoticed."""

from __future__ import annotations

import math

import pytest
import torch
from explorer_client import get

from posenc.alibi import alibi_bias, alibi_slopes
from posenc.hf import rotary_kwargs_from_hf
from posenc.rope import RotaryEmbedding
from posenc.rope.scaling import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    NTKScaling,
    YaRNScaling,
    rope_frequencies,
)
from posenc.rope.tables import rope_cos_sin, rope_inv_freq
from posenc.sinusoidal import sinusoidal_frequencies, sinusoidal_table
from posenc.teaching.explorer.limits import LIMITS

TWO_PI = 2 * math.pi


def seeded(dim, seed):
    return torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_sinusoidal_table_is_the_library_table(client):
    d = get(client, "/api/sinusoidal", length=12, d_model=10, base=500.0)
    expected = sinusoidal_table(12, 10, 500.0)
    assert torch.equal(torch.tensor(d["table"], dtype=torch.float32), expected)
    assert d["frequencies"] == sinusoidal_frequencies(10, 500.0).tolist()
    assert d["wavelengths"] == pytest.approx([TWO_PI / f for f in d["frequencies"]])


def test_sinusoidal_cell_fills_the_formula_with_library_numbers(client):
    cell = get(client, "/api/sinusoidal/cell", pos=37, dim=7, d_model=16, base=10000.0)
    assert cell["function"] == "cos" and cell["pair"] == 3
    assert cell["value"] == float(sinusoidal_table(38, 16)[37, 7])
    assert cell["frequency"] == float(sinusoidal_frequencies(16)[3])
    assert cell["denominator"] == pytest.approx(10000 ** (6 / 16))
    assert math.cos(cell["angle"]) == pytest.approx(cell["value"], abs=1e-6)
    assert cell["angle"] == pytest.approx(37 / cell["denominator"])


def test_fingerprint_gives_each_word_its_seat_and_distances_depend_on_the_gap(client):
    d = get(client, "/api/fingerprint", text="the dog bites the man", d_model=16, base=10000.0)
    assert d["words"] == ["the", "dog", "bites", "the", "man"]
    assert torch.equal(torch.tensor(d["vectors"], dtype=torch.float32), sinusoidal_table(5, 16))
    dist = torch.tensor(d["distances"])
    for gap in range(1, 5):
        diagonal = torch.diagonal(dist, offset=gap)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-6)
        assert bool((diagonal > 0).all())


def test_dials_score_matches_rotary_embedding_and_ignores_a_common_shift(client):
    d = get(client, "/api/rope/dials", head_dim=8, base=10000.0, q_pos=7, k_pos=2, offset=1000, seed=3)
    q, k = seeded(8, 3), seeded(8, 10_003)
    rope = RotaryEmbedding(8, base=10000.0, max_position_embeddings=16)
    qf, kf = q.float().view(1, 1, 1, 8), k.float().view(1, 1, 1, 8)
    q_rot, _ = rope(qf, qf, position_ids=torch.tensor([[7]]))
    _, k_rot = rope(kf, kf, position_ids=torch.tensor([[2]]))
    assert d["score"] == pytest.approx(float((q_rot * k_rot).sum()), abs=1e-5)
    assert d["score_moved"] == pytest.approx(d["score"], abs=1e-10)
    assert d["theta"] == rope_inv_freq(8, 10000.0).tolist()
    assert d["relative_angle_deg"][1] == pytest.approx(math.degrees(5 * 0.1), abs=1e-9)  # theta_1 = 0.1
    assert sum(d["pair_scores"]) == pytest.approx(d["score"], abs=1e-12)


def test_dials_give_the_unturned_hands_and_each_turn_m_theta(client):
    d = get(client, "/api/rope/dials", head_dim=128, base=10000.0, q_pos=7, k_pos=2, offset=1000, seed=3)
    q, k = seeded(128, 3), seeded(128, 10_003)
    assert d["q_pairs_unrotated"] == torch.stack((q[:64], q[64:]), -1).tolist()
    assert d["k_pairs_unrotated"] == torch.stack((k[:64], k[64:]), -1).tolist()
    inv_freq = rope_inv_freq(128, 10000.0)
    for key, seat in (("q_turn_deg", 1007), ("k_turn_deg", 1002)):
        expected = torch.remainder(torch.rad2deg(seat * inv_freq), 360.0)
        assert d[key] == pytest.approx(expected.tolist(), abs=1e-9)
    # each drawn hand is its unturned pair turned counter-clockwise by exactly that angle
    for i in (0, 5, 63):
        (a, b), (x, y) = d["q_pairs_unrotated"][i], d["q_pairs_moved"][i]
        turn = math.degrees(math.atan2(y, x) - math.atan2(b, a)) % 360.0
        assert min(abs(turn - d["q_turn_deg"][i]), 360 - abs(turn - d["q_turn_deg"][i])) < 1e-9


def test_order_proof_flips_the_relative_angle_and_only_rope_tells_the_sentences_apart(client):
    d = get(
        client,
        "/api/rope/order",
        text_a="dog bites man",
        text_b="man bites dog",
        query_word="bites",
        key_word="dog",
        degrees=30.0,
    )
    a, b = d["sentences"]
    # counter-clockwise positive, query's turn minus key's: "bites" after "dog" is +30, as in posenc tour
    assert a["relative_angle_deg"] == pytest.approx(30.0) and b["relative_angle_deg"] == pytest.approx(-30.0)
    assert (a["query_minus_key_seats"], b["query_minus_key_seats"]) == (1, -1)
    assert a["score_nope"] == b["score_nope"]
    assert abs(a["score_rope"] - b["score_rope"]) > 1e-3
    # the same rotation through the library's tables
    inv_freq = torch.tensor([math.radians(30.0)], dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.tensor([1.0, 0.0]), inv_freq, dtype=torch.float64)
    q, k = torch.tensor(d["q"], dtype=torch.float64), torch.tensor(d["k"], dtype=torch.float64)
    q_rot = torch.stack((q[0] * cos[0, 0] - q[1] * sin[0, 0], q[0] * sin[0, 0] + q[1] * cos[0, 0]))
    k_rot = torch.stack((k[0] * cos[1, 0] - k[1] * sin[1, 0], k[0] * sin[1, 0] + k[1] * cos[1, 0]))
    assert a["score_rope"] == pytest.approx(float(q_rot @ k_rot), abs=1e-12)


def test_scores_follow_the_closed_forms(client):
    d = get(client, "/api/scores", head_dim=32, base=10000.0, d_model=24, sin_base=10000.0, heads=6, max_distance=300)
    dist = torch.arange(301, dtype=torch.float64)
    rope_expected = torch.cos(dist.unsqueeze(-1) * rope_inv_freq(32, 10000.0)).mean(-1)
    assert d["rope"] == pytest.approx(rope_expected.tolist(), abs=1e-12)
    table = sinusoidal_table(301, 24, dtype=torch.float64)
    assert d["sinusoidal"] == pytest.approx(((table @ table[0]) / 12).tolist(), abs=1e-12)
    slopes = alibi_slopes(6)
    assert d["alibi_slopes"] == slopes.tolist()
    assert d["alibi"][4][:5] == pytest.approx([-float(slopes[4]) * i for i in range(5)])
    assert d["rope"][0] == pytest.approx(1.0) and max(d["rope"][100:]) < 0.9
    assert d["rope_compare"] is None
    d2 = get(client, "/api/scores", head_dim=32, base=10000.0, max_distance=300, compare_base=500000.0)
    slow = torch.cos(dist.unsqueeze(-1) * rope_inv_freq(32, 500000.0)).mean(-1)
    assert d2["rope_compare"] == pytest.approx(slow.tolist(), abs=1e-12) and d2["rope"] == d["rope"]


def test_score_defaults_show_the_decay(client):
    defaults = {name: LIMITS[name].default for name in ("head_dim", "base", "d_model", "heads", "max_distance")}
    d = get(client, "/api/scores", sin_base=10000.0, **defaults)
    far = [r for dist, r in zip(d["distances"], d["rope"]) if dist >= defaults["max_distance"] // 2]
    near = [r for dist, r in zip(d["distances"], d["rope"]) if 1 <= dist <= 16]
    assert d["rope"][0] == pytest.approx(1.0)
    assert d["rope"][0] - sum(far) / len(far) > 0.5  # well below 1 far away
    assert sum(near) / len(near) > sum(far) / len(far) + 0.3  # and falling on the way
    # the octave-averaged curve, recomputed from the closed form, falls steadily
    inv_freq = rope_inv_freq(defaults["head_dim"], defaults["base"])
    exact = torch.cos(torch.arange(defaults["max_distance"] + 1, dtype=torch.float64).unsqueeze(-1) * inv_freq).mean(-1)
    trend = dict(zip(d["distances"], d["rope_trend"]))
    for dist in (1, 16, 100, 2048):
        lo, hi = math.ceil(dist / math.sqrt(2)), min(math.floor(dist * math.sqrt(2)), defaults["max_distance"])
        assert trend[dist] == pytest.approx(float(exact[lo : hi + 1].mean()), abs=1e-12)
    assert trend[1] > trend[16] > trend[100] > trend[1024] and trend[1024] < 0.25


def test_long_ranges_keep_every_near_distance():
    from posenc.teaching.explorer.views import DENSE_DISTANCES, score_distances

    d = score_distances(2048)
    assert d[: DENSE_DISTANCES + 1] == list(range(DENSE_DISTANCES + 1)) and d[-1] == 2048
    gaps = [b / a for a, b in zip(d[DENSE_DISTANCES:], d[DENSE_DISTANCES + 1 :])]
    assert max(gaps) < 1.02  # evenly spread on a log axis


def test_long_score_ranges_are_sampled_and_exact_where_sampled(client):
    from posenc.teaching.explorer.limits import MAX_SCORE_POINTS

    top = int(LIMITS["max_distance"].maximum)
    d = get(
        client, "/api/scores", head_dim=32, base=10000.0, d_model=24, heads=4, max_distance=top, compare_base=500000.0
    )
    dist = d["distances"]
    assert len(dist) <= MAX_SCORE_POINTS and dist[0] == 0 and dist[-1] == top and dist == sorted(set(dist))
    assert len(d["rope"]) == len(d["sinusoidal"]) == len(d["rope_compare"]) == len(d["alibi"][0]) == len(dist)
    at = torch.tensor(dist, dtype=torch.float64)
    rope_expected = torch.cos(at.unsqueeze(-1) * rope_inv_freq(32, 10000.0)).mean(-1)
    assert d["rope"] == pytest.approx(rope_expected.tolist(), abs=1e-12)
    table = sinusoidal_table(top + 1, 24, dtype=torch.float64)
    assert d["sinusoidal"] == pytest.approx(((table[at.long()] @ table[0]) / 12).tolist(), abs=1e-12)
    assert d["alibi"][3] == pytest.approx([-float(alibi_slopes(4)[3]) * x for x in dist])


def test_alibi_matrix_is_the_library_bias_and_rope_matrix_depends_on_distance_only(client):
    d = get(client, "/api/alibi", heads=12, head=5, matrix_len=9, head_dim=16, base=10000.0, seed=4)
    pos = torch.arange(9)
    bias = alibi_bias(alibi_slopes(12), pos, pos)[5]
    for i in range(9):
        for j in range(9):
            got = d["bias"][i][j]
            assert (got is None) if j > i else got == float(bias[i, j])
            assert (d["rope_scores"][i][j] is None) == (j > i)
    scores = d["rope_scores"]
    for gap in range(0, 9):
        values = [scores[i][i - gap] for i in range(gap, 9)]
        assert values == pytest.approx([values[0]] * len(values), abs=1e-9)
    assert d["slopes"] == alibi_slopes(12).tolist()


def test_precision_errors_per_dtype(client):
    d = get(client, "/api/precision", head_dim=64, base=10000.0, max_position=2**20, pos=1_000_000)
    assert d["positions"] == sorted(d["positions"]) and d["positions"][-1] == 2**20
    inv_freq = rope_inv_freq(64, 10000.0)
    exact = 1_000_000 * inv_freq
    naive = (torch.tensor(1_000_000.0) * inv_freq.float()).double()
    table_angle = torch.atan2(naive.sin().float().double(), naive.cos().float().double())
    err32 = torch.remainder(table_angle - exact + math.pi, TWO_PI) - math.pi
    assert d["at_pos"]["float32"] == pytest.approx(err32.abs().tolist(), abs=1e-12)
    assert max(d["at_pos"]["float32"]) > 1e-3
    assert max(d["at_pos"]["posenc"]) < 1e-6
    assert d["at_pos"]["float16"] == [None] * 32  # 1e6 is past float16's range
    beyond = [i for i, p in enumerate(d["positions"]) if p > 65520]
    assert all(d["max_error"]["float16"][i] is None for i in beyond)
    assert all(v < 1e-6 for v in d["max_error"]["posenc"])


def test_wavelength_overlays_are_the_library_frequencies(client):
    d = get(
        client,
        "/api/wavelengths",
        rotary_dim=64,
        base=500000.0,
        train_len=8192,
        methods="linear,ntk,dynamic,yarn,llama3",
        factor=8.0,
        seq_len=20000,
        beta_fast=32.0,
        beta_slow=1.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
    )
    configs = {
        "linear": (LinearScaling(8.0), None),
        "ntk": (NTKScaling(8.0), None),
        "dynamic": (DynamicNTKScaling(8.0, 8192), 20000),
        "yarn": (YaRNScaling(8.0, 8192, beta_fast=32.0, beta_slow=1.0), None),
        "llama3": (Llama3Scaling(8.0, 1.0, 4.0, 8192), None),
    }
    default = rope_inv_freq(64, 500000.0)
    assert d["default"]["wavelength"] == pytest.approx((TWO_PI / default).tolist())
    for name, (cfg, seq_len) in configs.items():
        inv_freq, factor = rope_frequencies(cfg, 64, 500000.0, seq_len)
        entry = d["methods"][name]
        assert entry["inv_freq"] == inv_freq.tolist(), name
        assert entry["attention_factor"] == factor
        slow = (default / inv_freq).tolist()
        assert entry["slowdown"] == pytest.approx([min(slow), max(slow)], rel=1e-12)
        if name in ("yarn", "llama3"):  # the ramp methods, split three ways
            assert entry["split"] and entry["kept"] + entry["blended"] + entry["divided"] == 32
        else:  # no ramp: no kept/blended/divided
            assert not entry["split"] and entry["kept"] is entry["blended"] is entry["divided"] is None
    assert d["methods"]["linear"]["slowdown"] == pytest.approx([8.0, 8.0])
    assert d["methods"]["ntk"]["slowdown"] == pytest.approx([1.0, 8.0])
    llama = d["methods"]["llama3"]
    wavelengths = (TWO_PI / default).tolist()
    assert llama["kept"] == sum(w < 8192 / 4 for w in wavelengths)
    assert llama["divided"] == sum(w > 8192 / 1 for w in wavelengths)
    assert d["thresholds"]["llama3"] == [2048.0, 8192.0]


def test_fixtures_load_real_configs_through_posenc_hf(client):
    listed = get(client, "/api/fixtures")["fixtures"]
    names = [f["name"] for f in listed if "error" not in f]
    assert "llama-3.1-8b" in names
    d = get(client, "/api/fixture", name="llama-3.1-8b")
    assert d["rope_type"] == "llama3" and d["base"] == 500000.0 and d["train_len"] == 8192
    from posenc.teaching.explorer.scaling_view import fixtures

    kw = rotary_kwargs_from_hf(fixtures()["llama-3.1-8b"][0])
    expected, _ = rope_frequencies(kw["scaling"], kw["rotary_dim"], kw["base"])
    assert d["curves"]["configured"]["inv_freq"] == expected.tolist()
    for name in names:  # every shipped fixture draws
        assert client.get("/api/fixture", params={"name": name}).status_code == 200, name


def test_longrope_fixture_shows_its_two_factor_lists_and_no_invented_factor(client):
    d = get(client, "/api/fixture", name="phi-3.5-mini-instruct")
    from posenc.fixtures import load_fixture

    config = load_fixture("phi-3.5-mini-instruct")
    assert "factor" not in config["rope_scaling"] and d["factor"] is None
    listed = {f["name"]: f for f in get(client, "/api/fixtures")["fixtures"]}
    assert listed["phi-3.5-mini-instruct"]["factor"] is None
    assert listed["llama-3.1-8b"]["factor"] == 8.0
    assert set(d["curves"]) == {"short", "long"}
    default = torch.tensor(d["default"]["inv_freq"], dtype=torch.float64)
    for key in ("short", "long"):
        curve = d["curves"][key]
        assert curve["split"] is False and curve["kept"] is None  # LongRoPE has no ramp
        factors = torch.tensor(config["rope_scaling"][f"{key}_factor"], dtype=torch.float64)
        torch.testing.assert_close(
            torch.tensor(curve["inv_freq"], dtype=torch.float64), default / factors, rtol=1e-12, atol=0
        )
        assert curve["slowdown"] == pytest.approx([float(factors.min()), float(factors.max())], rel=1e-9)


#: what each exported method is meant to be, as posenc configs (head_dim 64, rotary_dim 32, base 500000)
REQUESTED = {
    "default": None,
    "linear": LinearScaling(8.0),
    "ntk": NTKScaling(8.0),
    "dynamic": DynamicNTKScaling(8.0, 8192),
    "yarn": YaRNScaling(8.0, 8192, beta_fast=32.0, beta_slow=1.0),
    "llama3": Llama3Scaling(8.0, 1.0, 4.0, 8192),
}


def reference_frequencies(hf: dict, seq_len=None):
    """``(inv_freq, attention_factor)`` as ``transformers`` computes them from an exported config dict."""
    import transformers
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    transformers.logging.set_verbosity_error()
    config = LlamaConfig(**hf, hidden_size=2 * hf["head_dim"], num_attention_heads=2)
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":  # the reference with partial rotary support
        inv_freq, factor = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)
    return inv_freq.double(), float(factor)


@pytest.mark.parametrize("method", list(REQUESTED))
def test_config_loads_in_transformers_as_the_requested_rope(client, method):
    d = get(
        client,
        "/api/config",
        head_dim=64,
        rotary_dim=32,
        base=500000.0,
        layout="half",
        method=method,
        max_position_embeddings=131072,
        factor=8.0,
        original_max_position_embeddings=8192,
    )
    cfg = d["posenc"]
    assert cfg["rotary_dim"] == 32 and cfg["base"] == 500000.0
    requested = REQUESTED[method]
    # dynamic NTK adapts to the length: compare at the trained length and well past it
    lengths = [None, 8192 * 5] if method == "dynamic" else [None]
    for style in ("hf_rope_parameters", "hf_rope_scaling"):
        hf = d[style]
        assert hf["max_position_embeddings"] == (8192 if method == "dynamic" else 131072)
        rope = hf["rope_parameters"] if style == "hf_rope_parameters" else (hf["rope_scaling"] or {})
        assert rope.get("rope_type", "default") == ("default" if method == "ntk" else method)
        for seq_len in lengths:
            expected, expected_factor = rope_frequencies(requested, 32, 500000.0, seq_len)
            reference, reference_factor = reference_frequencies(hf, seq_len)
            torch.testing.assert_close(reference, expected, rtol=1e-6, atol=0)
            assert reference_factor == pytest.approx(expected_factor, rel=1e-12)
        rebuilt = rotary_kwargs_from_hf(hf)  # posenc reads its own export back
        assert rebuilt["rotary_dim"] == 32
        torch.testing.assert_close(
            rope_frequencies(rebuilt["scaling"], 32, rebuilt["base"])[0],
            rope_frequencies(requested, 32, 500000.0)[0],
            rtol=1e-12,
            atol=0,
        )
    assert (d["hf_note"] is not None) == (method == "ntk")
    namespace = {}
    exec(d["python"], namespace)  # the snippet builds the requested module
    assert namespace["rope"].rotary_dim == 32
    assert namespace["rope"].scaling == requested
    assert namespace["rope"].attention_factor == d["attention_factor"]


def test_ntk_exports_the_equivalent_base():
    d = 32
    theta = 500000.0 * 8.0 ** (d / (d - 2))
    from posenc.teaching.explorer.scaling_view import config_view

    out = config_view(
        64,
        d,
        500000.0,
        "half",
        "ntk",
        max_position_embeddings=131072,
        original=8192,
        settings={"factor": 8.0},
    )
    assert out["hf_rope_parameters"]["rope_parameters"]["rope_theta"] == pytest.approx(theta, rel=1e-15)
    assert out["hf_rope_scaling"]["rope_theta"] == pytest.approx(theta, rel=1e-15)
    assert out["hf_rope_scaling"]["rope_scaling"] is None
    assert "rope_theta" in out["hf_note"] and out["posenc"]["scaling"] == {"rope_type": "ntk", "factor": 8.0}


BAD = [
    ("/api/sinusoidal", {"d_model": 100000}),
    ("/api/sinusoidal", {"length": 0}),
    ("/api/sinusoidal", {"base": "nan"}),
    ("/api/sinusoidal", {"base": "inf"}),
    ("/api/sinusoidal", {"base": 1}),
    ("/api/sinusoidal", {"length": "abc"}),
    ("/api/sinusoidal", {"length": 10**30}),
    ("/api/sinusoidal/cell", {"dim": 70, "d_model": 64}),
    ("/api/sinusoidal/cell", {"pos": -1}),
    ("/api/sinusoidal/cell", {"pos": 10**7}),
    ("/api/fingerprint", {"text": ""}),
    ("/api/fingerprint", {"text": "   "}),
    ("/api/fingerprint", {"text": "a " * 30}),
    ("/api/fingerprint", {"text": "x" * 301}),
    ("/api/fingerprint", {"text": "y" * 40}),
    ("/api/rope/dials", {"head_dim": 7}),
    ("/api/rope/dials", {"head_dim": 1024}),
    ("/api/rope/dials", {"q_pos": -3}),
    ("/api/rope/dials", {"offset": 10**9}),
    ("/api/rope/dials", {"seed": -1}),
    ("/api/rope/order", {"key_word": "cat"}),
    ("/api/rope/order", {"degrees": 0}),
    ("/api/rope/order", {"degrees": 720}),
    ("/api/rope/order", {"text_a": ""}),
    ("/api/scores", {"max_distance": 100000}),
    ("/api/scores", {"heads": 0}),
    ("/api/scores", {"head_dim": 9}),
    ("/api/scores", {"sin_base": "-inf"}),
    ("/api/scores", {"compare_base": 1}),
    ("/api/scores", {"compare_base": "nan"}),
    ("/api/alibi", {"heads": 4, "head": 5}),
    ("/api/alibi", {"matrix_len": 1000}),
    ("/api/alibi", {"head_dim": 3}),
    ("/api/precision", {"max_position": 2**40}),
    ("/api/precision", {"pos": -1}),
    ("/api/precision", {"head_dim": 5}),
    ("/api/wavelengths", {"methods": "yarn,foo"}),
    ("/api/wavelengths", {"methods": "yarn,yarn"}),
    ("/api/wavelengths", {"methods": "yarn", "beta_fast": 0.5}),
    ("/api/wavelengths", {"methods": "llama3", "high_freq_factor": 0.5}),
    ("/api/wavelengths", {"factor": 0.5}),
    ("/api/wavelengths", {"factor": 65}),
    ("/api/wavelengths", {"factor": "inf"}),
    ("/api/wavelengths", {"factor": "eight"}),
    ("/api/wavelengths", {"fctor": 8}),
    ("/api/wavelengths", [("factor", 2), ("factor", 4)]),
    ("/api/wavelengths", {"rotary_dim": 3}),
    ("/api/wavelengths", {"methods": "x" * 101}),
    ("/api/fixture", {"name": "../../etc/passwd"}),
    ("/api/fixture", {"name": "no-such-model"}),
    ("/api/fixture", {}),
    ("/api/config", {"rotary_dim": 300}),
    ("/api/config", {"head_dim": 16, "rotary_dim": 32}),
    ("/api/config", {"layout": "diagonal"}),
    ("/api/config", {"method": "longrope"}),
    ("/api/config", {"method": "llama3", "high_freq_factor": 0.5}),
    ("/api/config", {"max_position_embeddings": 0}),
    ("/api/lab", {"points": 1000}),
    ("/api/lab", {"points": "many"}),
    ("/api/quiz/nope/answer", {"choice": 0}),
    ("/api/quiz/relative/answer", {"choice": 5}),
    ("/api/quiz/relative/answer", {"choice": -1}),
    ("/api/quiz/relative/answer", {}),
]


@pytest.mark.parametrize("url,params", BAD, ids=[f"{u}?{p}"[:70] for u, p in BAD])
def test_bad_input_is_a_422_with_a_message(client, url, params):
    response = client.get(url, params=params)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and len(detail) > 10
