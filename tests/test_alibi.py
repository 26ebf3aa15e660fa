"""ALiBi slopes against the paper's values, and the bias it adds."""

import pytest
import torch

from posenc import ALiBi, alibi_slopes


def test_slopes_for_8_heads_are_powers_of_one_half():
    assert alibi_slopes(8).tolist() == [2.0 ** -(i + 1) for i in range(8)]


def test_slopes_for_12_heads_follow_the_paper():
    # the 8 slopes of 8 heads, then every other slope of the 16-head sequence 2^(-0.5 i)
    want = [2.0 ** -(i + 1) for i in range(8)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(want, dtype=torch.float64))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 16, 20, 32])
def test_slopes_positive_distinct_and_below_one(n):
    s = alibi_slopes(n)
    assert s.shape == (n,) and (s > 0).all() and (s < 1.0).all()
    assert len(set(s.tolist())) == n
    p = 2 ** (n.bit_length() - 1)  # largest power of two <= n
    torch.testing.assert_close(s[:p], alibi_slopes(p))  # the first p slopes are those of p heads
    ratios = s[1:p] / s[: p - 1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, 2.0 ** (-8.0 / p)))  # geometric


def test_bias_is_linear_in_distance_and_causal():
    alibi = ALiBi(4)
    bias = alibi(6)  # (4, 6, 6)
    for h, m in enumerate(alibi.slopes.tolist()):
        for i in range(6):
            for j in range(6):
                if j > i:
                    assert bias[h, i, j] == float("-inf")
                else:
                    assert bias[h, i, j].item() == pytest.approx(-m * (i - j))


def test_bias_depends_only_on_distance():
    alibi = ALiBi(3)
    near = alibi.bias(torch.arange(0, 5), torch.arange(0, 5))
    far = alibi.bias(torch.arange(100, 105), torch.arange(100, 105))
    torch.testing.assert_close(near, far)


def test_slopes_stay_float32_under_cast():
    alibi = ALiBi(12).to(torch.bfloat16)
    assert alibi.slopes.dtype == torch.float32
    torch.testing.assert_close(alibi.slopes, alibi_slopes(12).float(), atol=0, rtol=0)


def test_bad_input():
    with pytest.raises(ValueError, match="num_heads"):
        ALiBi(0)
    with pytest.raises(ValueError, match="k_len"):
        ALiBi(2)(4, 3)
