"""The 2017 sinusoidal table: boundedness, the fixed-offset rotation, uniqueness, buffer behaviour."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table


def test_matches_the_formula_elementwise():
    d, base = 16, 10000.0
    table = sinusoidal_table(50, d, base, dtype=torch.float64)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / base ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_values_bounded_in_unit_interval():
    table = sinusoidal_table(20000, 64)
    assert table.abs().max() <= 1.0


@settings(max_examples=25, deadline=None)
@given(pos=st.integers(0, 5000), k=st.integers(0, 300), half=st.integers(1, 16))
def test_offset_is_a_fixed_block_rotation(pos, k, half):
    """PE[pos + k] = R_k PE[pos], with R_k built from k and the frequencies only (not from pos)."""
    d = 2 * half
    freqs = sinusoidal_frequencies(d)
    rot = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(freqs.tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        # (sin, cos) pair: sin(a + b) = sin a cos b + cos a sin b ; cos(a + b) = cos a cos b - sin a sin b
        rot[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    table = sinusoidal_table(pos + k + 1, d, dtype=torch.float64)
    torch.testing.assert_close(rot @ table[pos], table[pos + k], atol=1e-9, rtol=0)


def test_every_position_is_distinct():
    table = sinusoidal_table(4096, 64, dtype=torch.float64)
    dist = torch.cdist(table, table)
    dist.fill_diagonal_(float("inf"))
    assert dist.min() > 1e-2


def test_odd_d_model_drops_last_cosine():
    t5 = sinusoidal_table(10, 5, dtype=torch.float64)
    t6 = sinusoidal_table(10, 6, dtype=torch.float64)
    assert t5.shape == (10, 5)
    # frequencies depend on d_model, so compare to the formula instead of to t6
    assert t5[3, 4].item() == pytest.approx(math.sin(3 / 10000 ** (4 / 5)))
    assert t6.shape == (10, 6)


def test_exact_at_long_positions():
    pos = 1_048_575
    table = sinusoidal_table(1, 128, start=pos)
    freqs = sinusoidal_frequencies(128).tolist()
    want = [f(pos * w) for w in freqs for f in (math.sin, math.cos)]
    assert (table[0].double() - torch.tensor(want, dtype=torch.float64)).abs().max() < 1e-6


def test_module_adds_table_and_grows_on_demand():
    pe = SinusoidalPositionalEncoding(8, max_len=4)
    x = torch.zeros(2, 10, 8)
    out = pe(x)
    torch.testing.assert_close(out[0], sinusoidal_table(10, 8))
    assert pe.pe.shape[0] >= 10
    out = pe(torch.zeros(1, 3, 8), offset=20)
    torch.testing.assert_close(out[0], sinusoidal_table(3, 8, start=20))


def test_buffer_not_parameter_and_not_saved():
    pe = SinusoidalPositionalEncoding(8)
    assert list(pe.parameters()) == []
    assert "pe" not in pe.state_dict()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_keeps_float32_when_cast(dtype):
    pe = SinusoidalPositionalEncoding(16, max_len=100).to(dtype)
    assert pe.pe.dtype == torch.float32
    torch.testing.assert_close(pe.pe, sinusoidal_table(100, 16), atol=0, rtol=0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="d_model"):
        SinusoidalPositionalEncoding(0)
    with pytest.raises(ValueError, match="base"):
        SinusoidalPositionalEncoding(8, base=1.0)
    pe = SinusoidalPositionalEncoding(8)
    with pytest.raises(ValueError, match="d_model=8"):
        pe(torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match=">= 0"):
        pe(torch.zeros(1, 3, 8), position_ids=torch.tensor([[0, -1, 2]]))
    with pytest.raises(TypeError, match="integer dtype"):
        pe(torch.zeros(1, 3, 8), position_ids=torch.tensor([[0.0, 1.0, 2.0]]))
    with pytest.raises(ValueError, match="shape"):
        pe(torch.zeros(1, 3, 8), position_ids=torch.tensor([[0, 1]]))
