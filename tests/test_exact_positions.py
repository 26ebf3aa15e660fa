"""Exact cos/sin at any position, in bounded memory (RotaryEmbedding and the sinusoidal table).

The reference is independent of the library: mpmath at 60 digits when installed, else Python's
``fractions`` with pi to 70 digits and Taylor series, both far beyond float64.
"""

import math
from fractions import Fraction

import pytest
import torch

from posenc import RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from posenc.rope import LinearScaling, rope_cos_sin, rope_inv_freq, rotate_reference
from posenc.rope.tables import angles_mod_2pi
from posenc.sinusoidal import sinusoidal_at, sinusoidal_frequencies

try:
    import mpmath
except ImportError:  # pragma: no cover - mpmath ships with sympy, a torch dependency
    mpmath = None

FAR = [2**21 - 1, 2**21, 2**31, 2**31 + 12345, 2**40, 2**40 + 987654321, 3 * 2**40 + 1, 2**53 + 1, 2**62 + 7, 2**63 - 1]
PI = Fraction("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899")


def exact_cos_sin(position: int, freq: float):
    """cos and sin of ``position * freq`` (freq read exactly as the float64 it is)."""
    if mpmath is not None:
        with mpmath.workdps(60):
            angle = mpmath.mpf(position) * mpmath.mpf(freq)
            return float(mpmath.cos(angle)), float(mpmath.sin(angle))
    x = Fraction(position) * Fraction(freq)
    x -= 2 * PI * math.floor(x / (2 * PI))
    term, cos_sum, sin_sum, n = Fraction(1), Fraction(0), Fraction(0), 0
    while n < 80:  # |x| < 2 pi: 80 terms are exact far past float64
        if n % 4 == 0:
            cos_sum += term
        elif n % 4 == 1:
            sin_sum += term
        elif n % 4 == 2:
            cos_sum -= term
        else:
            sin_sum -= term
        n += 1
        term = term * x / n
    return float(cos_sum), float(sin_sum)


def reference_rows(positions, freqs, factor=1.0):
    cos = torch.tensor([[exact_cos_sin(p, f)[0] * factor for f in freqs] for p in positions], dtype=torch.float64)
    sin = torch.tensor([[exact_cos_sin(p, f)[1] * factor for f in freqs] for p in positions], dtype=torch.float64)
    return cos, sin


def test_the_reference_itself_agrees_with_float64_near_zero():
    for p, f in [(3, 0.5), (1000, 1.0), (12, 1e-4)]:
        c, s = exact_cos_sin(p, f)
        assert abs(c - math.cos(p * f)) < 1e-12 and abs(s - math.sin(p * f)) < 1e-12


def test_float64_angles_are_exact_to_1e_8_radians_at_any_position():
    freqs = rope_inv_freq(128)
    angles = angles_mod_2pi(torch.tensor(FAR), freqs)  # (P, 64)
    cos_ref, sin_ref = reference_rows(FAR, freqs.tolist())
    assert (angles.cos() - cos_ref).abs().max() < 1e-8
    assert (angles.sin() - sin_ref).abs().max() < 1e-8
    # the plain float64 product, the usual "precise" recipe, is not enough out there
    naive = torch.tensor(FAR, dtype=torch.float64).unsqueeze(-1) * freqs
    assert (naive.cos() - cos_ref).abs().max() > 1e-5


def test_small_positions_are_the_plain_float64_product_bit_for_bit():
    freqs = rope_inv_freq(64, 500000.0)
    pos = torch.arange(0, 2**21, 4099)
    plain = torch.remainder(pos.to(torch.float64).unsqueeze(-1) * freqs, 2 * math.pi)
    torch.testing.assert_close(angles_mod_2pi(pos, freqs), plain, atol=0, rtol=0)


def test_negative_offsets_are_the_mirror_angle():
    freqs = rope_inv_freq(16)
    pos = torch.tensor([5, 2**40 + 3])
    a, b = angles_mod_2pi(pos, freqs), angles_mod_2pi(-pos, freqs)
    torch.testing.assert_close(torch.remainder(a + b, 2 * math.pi).cos(), torch.ones_like(a), atol=1e-12, rtol=0)


@pytest.mark.parametrize("position", [2**31, 2**40, 2**40 + 987654321, 2**62 + 7])
def test_module_decode_far_out_is_exact_and_builds_no_table(position):
    rope = RotaryEmbedding(128, max_position_embeddings=64)
    rows_before = rope.cached_length
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 1, 128), torch.randn(1, 2, 1, 128)
    rq, rk = rope(q, k, offset=position)
    assert rope.cached_length == rows_before  # no table was built or grown
    cos, sin = reference_rows([position], rope_inv_freq(128).tolist())
    want_q = rotate_reference(q.double(), cos.unsqueeze(0), sin.unsqueeze(0))
    want_k = rotate_reference(k.double(), cos.unsqueeze(0), sin.unsqueeze(0))
    # float32 inputs: the output error is float32 rounding of values of size ~|q|, not the angle
    assert (rq.double() - want_q).abs().max() < 2e-6
    assert (rk.double() - want_k).abs().max() < 2e-6
    # the table rows themselves are within 1e-6 of exact (float32 rounding, ~6e-8)
    got_cos, got_sin = rope.cos_sin(torch.tensor([[position]]))
    assert (got_cos[0].double() - cos).abs().max() < 1e-6
    assert (got_sin[0].double() - sin).abs().max() < 1e-6
    assert rope.cached_length == rows_before


def test_packed_positions_past_the_cache_mix_with_cached_ones():
    rope = RotaryEmbedding(32, scaling=LinearScaling(2.0), max_position_embeddings=16)
    rope.cache_limit_bytes = 64 * rope.rotary_dim * 4 // 2 * 2  # 64 rows at most
    assert rope.cache_limit == 64
    pos = torch.tensor([[3, 2**40, 63, 64, 2**31, 0]])
    cos, sin = rope.cos_sin(pos)
    assert rope.cached_length <= 64
    inv_freq, factor = rope.frequencies()
    ref_cos, ref_sin = reference_rows(pos[0].tolist(), inv_freq.tolist(), factor)
    assert (cos[0].double() - ref_cos).abs().max() < 1e-6
    assert (sin[0].double() - ref_sin).abs().max() < 1e-6


def test_cache_stops_at_its_limit_and_rows_past_it_equal_a_fresh_table():
    rope = RotaryEmbedding(16, max_position_embeddings=8)
    rope.cache_limit_bytes = 100 * 16 * 4  # 100 rows of 2 x 8 floats
    assert rope.cache_limit == 100
    q = torch.randn(1, 2, 300, 16)
    rq, _ = rope(q, q)
    assert rope.cached_length <= 100
    cos, sin = rope_cos_sin(torch.arange(300), rope_inv_freq(16))
    want = rotate_reference(q, cos, sin)
    torch.testing.assert_close(rq, want, atol=0, rtol=0)
    rope.extend(10**6)
    assert rope.cached_length == 100
    rq2, _ = rope(q, q)
    torch.testing.assert_close(rq2, want, atol=0, rtol=0)


def test_default_cache_limit_covers_a_128k_context_at_head_dim_128():
    rope = RotaryEmbedding(128)
    assert rope.cache_limit == 131072
    assert rope.cache_limit * 128 * 4 <= rope.cache_limit_bytes


@pytest.mark.parametrize("position", [2**31, 2**40 + 5])
def test_sinusoidal_far_out_is_exact_without_a_table(position):
    pe = SinusoidalPositionalEncoding(32, max_len=16)
    x = torch.zeros(1, 1, 32)
    out = pe(x, offset=position)
    assert pe.pe.shape[0] == 16
    freqs = sinusoidal_frequencies(32).tolist()
    want = torch.tensor([v for f in freqs for v in reversed(exact_cos_sin(position, f))], dtype=torch.float64)
    assert (out[0, 0].double() - want).abs().max() < 1e-6


def test_sinusoidal_rows_equal_the_table_and_the_cache_is_capped():
    pe = SinusoidalPositionalEncoding(8, max_len=4)
    pe.cache_limit_bytes = 50 * 8 * 4
    pos = torch.tensor([[0, 49, 50, 70, 3]])
    out = pe.encodings(pos)
    assert pe.pe.shape[0] <= 50
    table = sinusoidal_table(71, 8)
    torch.testing.assert_close(out, table[pos], atol=0, rtol=0)
    torch.testing.assert_close(sinusoidal_at(pos, 8), table[pos], atol=0, rtol=0)


def test_most_negative_int64_position_is_computed_not_zero():
    """Regression: ``-2**63`` has no int64 negation; its angle came out as 0 (cos 1, sin 0) because
    the 63 bits the limbs read are all zero. It is ``-(2**63 * f) mod 2*pi`` like any other negative
    position: against the independent reference, and against the two relations that tie it to its
    neighbours, ``angle(-2**63) = -2 angle(2**62)`` and ``= angle(-(2**63 - 1)) - f``."""
    inv_freq = rope_inv_freq(16, base=10000.0)
    cos, sin = rope_cos_sin(torch.tensor([-(2**63)]), inv_freq, dtype=torch.float64)
    for i, f in enumerate(inv_freq.double().tolist()):
        want_cos, want_sin = exact_cos_sin(2**63, f)  # cos(-x) = cos(x), sin(-x) = -sin(x)
        assert abs(cos[0, i].item() - want_cos) < 1e-7 and abs(sin[0, i].item() + want_sin) < 1e-7, (i, f)
    angles = angles_mod_2pi(torch.tensor([-(2**63), 2**62, -(2**63 - 1)]), inv_freq)
    two_pi = 2 * math.pi
    torch.testing.assert_close(angles[0], torch.remainder(-2 * angles[1], two_pi), rtol=0, atol=1e-8)
    torch.testing.assert_close(angles[0], torch.remainder(angles[2] - inv_freq.double(), two_pi), rtol=0, atol=1e-8)
    assert not torch.all(cos == 1), "the angle of -2**63 must not collapse to 0"
