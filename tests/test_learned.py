"""Learned tables: lookup, the hard limit at max_len, and the two extensions."""

import pytest
import torch

from posenc import LearnedPositionalEmbedding, PositionOutOfRangeError


def test_adds_rows_by_position():
    emb = LearnedPositionalEmbedding(16, 4)
    x = torch.randn(2, 5, 4)
    pos = torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])
    out = emb(x, position_ids=pos)
    torch.testing.assert_close(out, x + emb.weight[pos])


def test_position_at_max_len_raises_clear_error():
    emb = LearnedPositionalEmbedding(512, 8)
    emb(torch.zeros(1, 512, 8))  # positions 0..511 are fine
    with pytest.raises(PositionOutOfRangeError) as info:
        emb(torch.zeros(1, 513, 8))
    msg = str(info.value)
    assert "position 512" in msg and "512 rows" in msg and "truncate" in msg and "extend" in msg
    assert isinstance(info.value, IndexError)
    assert info.value.position == 512 and info.value.max_len == 512
    with pytest.raises(PositionOutOfRangeError, match=r"position 512 .*positions up to 599") as info:
        emb(torch.zeros(1, 600, 8))  # a 600-token paragraph into a 512-row table
    assert (info.value.position, info.value.largest) == (512, 599)


def test_interpolated_extension_keeps_end_rows_and_is_linear_between():
    emb = LearnedPositionalEmbedding(5, 3)
    old = emb.weight.detach().clone()
    emb.extend(9)
    new = emb.weight.detach()
    assert new.shape == (9, 3) and emb.max_len == 9
    # align_corners: new row j sits at old position j * 4 / 8 = j / 2
    torch.testing.assert_close(new[::2], old)
    torch.testing.assert_close(new[1::2], (old[:-1] + old[1:]) / 2)
    emb(torch.zeros(1, 9, 3))  # now readable
    assert isinstance(emb.weight, torch.nn.Parameter) and emb.weight.requires_grad


def test_repeat_last_extension():
    emb = LearnedPositionalEmbedding(4, 2)
    old = emb.weight.detach().clone()
    emb.extend(6, method="repeat_last")
    torch.testing.assert_close(emb.weight[:4], old)
    torch.testing.assert_close(emb.weight[4:], old[-1:].expand(2, 2))


def test_bad_input_is_named():
    emb = LearnedPositionalEmbedding(4, 2)
    with pytest.raises(ValueError, match="new_max_len"):
        emb.extend(3)
    with pytest.raises(ValueError, match="method"):
        emb.extend(8, method="cubic")
    with pytest.raises(ValueError, match="d_model=2"):
        emb(torch.zeros(1, 2, 3))
    with pytest.raises(ValueError, match="max_len"):
        LearnedPositionalEmbedding(0, 2)
