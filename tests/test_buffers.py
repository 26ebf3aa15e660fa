"""Precise tables survive every cast and move, and the private PyTorch hook they rely on is intact.

:class:`posenc._buffers.PreciseTables` overrides ``nn.Module._apply`` (no public post-conversion hook
exists). The first test fails loudly if PyTorch changes that method's signature or stops routing a
parent's casts through it; the others check the behaviour end to end for every table-holding module.
"""

import copy
import inspect
import pickle

import pytest
import torch
from torch import nn

from posenc import ALiBi, RotaryEmbedding, SinusoidalPositionalEncoding
from posenc._buffers import PreciseTables

MODULES = {
    "rope": lambda: RotaryEmbedding(16, max_position_embeddings=32),
    "sinusoidal": lambda: SinusoidalPositionalEncoding(16, max_len=32),
    "alibi": lambda: ALiBi(6),
}


def test_nn_module_apply_is_still_the_hook_every_cast_goes_through():
    params = list(inspect.signature(nn.Module._apply).parameters)
    assert params[:2] == ["self", "fn"], (
        f"torch changed nn.Module._apply's signature to {params}; posenc._buffers.PreciseTables "
        "overrides it and must be updated"
    )
    seen = []

    class Probe(nn.Module):
        def _apply(self, fn, *args, **kwargs):
            seen.append(fn)
            return super()._apply(fn, *args, **kwargs)

    parent = nn.Sequential(nn.Sequential(Probe()))
    parent.to(torch.float16)
    parent.to("meta")
    parent.to_empty(device="cpu")
    parent.half()
    assert len(seen) == 4, (
        "a parent's .to()/.half()/.to_empty() no longer reaches its children's "
        "_apply; PreciseTables would stop rebuilding its tables"
    )


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("cast", ["bf16", "half", "to_fp16_nested", "meta_then_empty"])
def test_tables_keep_full_precision_through_casts(name, cast):
    module = MODULES[name]()
    before = {n: b.clone() for n, b in module.named_buffers()}
    if cast == "bf16":
        module = module.to(torch.bfloat16)
    elif cast == "half":
        module = module.half()
    elif cast == "to_fp16_nested":
        module = nn.ModuleList([nn.Sequential(module)]).to(torch.float16)[0][0]
    else:
        module = module.to("meta").to_empty(device="cpu")
    for n, b in module.named_buffers():
        assert b.dtype == torch.float32, n
        torch.testing.assert_close(b, before[n], atol=0, rtol=0)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_copies_and_pickles_keep_working_tables_and_a_lock(name):
    module = MODULES[name]()
    for clone in (copy.deepcopy(module), pickle.loads(pickle.dumps(module))):
        assert clone._table_lock is not module._table_lock
        for (_, a), (_, b) in zip(module.named_buffers(), clone.named_buffers()):
            torch.testing.assert_close(a, b, atol=0, rtol=0)
    rope = RotaryEmbedding(8, max_position_embeddings=4)
    twin = copy.deepcopy(rope)
    twin.extend(100)
    assert rope.cached_length == 4 and twin.cached_length >= 100
    q = torch.randn(1, 1, 3, 8)
    for a, b in zip(rope(q, q, offset=50), twin(q, q, offset=50)):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_published_tables_follow_a_cast():
    rope = RotaryEmbedding(8, max_position_embeddings=8).double()
    assert rope._state.cos is rope.cos_cached and rope.cos_cached.dtype == torch.float64
    pe = SinusoidalPositionalEncoding(8, max_len=8).double()
    assert pe._table is pe.pe and pe.pe.dtype == torch.float64
    assert issubclass(RotaryEmbedding, PreciseTables)
