"""Positions are checked once per model forward: no host read-back in any layer.

A read-back (``.item()``, ``int(t)``, ``bool(t)``, ``.tolist()``) is a device synchronisation on a GPU.
Counted on CPU through a dispatch mode (every ``aten._local_scalar_dense``) plus ``Tensor.tolist``
and ``Tensor.numpy``, which bypass the dispatcher.
"""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc import ModelConfig, RotaryEmbedding, TinyLM


class CountReads(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.reads = 0
        self._patched = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.reads += 1
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        for name in ("tolist", "numpy"):
            original = getattr(torch.Tensor, name)
            self._patched[name] = original

            def counted(tensor, *args, _original=original, **kwargs):
                self.reads += 1
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, counted)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._patched.items():
            setattr(torch.Tensor, name, original)
        return super().__exit__(*exc)


def test_the_counter_sees_every_kind_of_read():
    t = torch.tensor([1, 2, 3])
    for read in (lambda: t.max().item(), lambda: int(t[0]), lambda: bool((t > 0).all()), lambda: t.tolist()):
        with CountReads() as counter:
            read()
        assert counter.reads == 1


def reads_per_forward(scheme, n_layers, **call):
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme=scheme, d_model=32, n_heads=4, n_layers=n_layers, max_len=64)).eval()
    idx = torch.randint(0, 256, (2, 8))
    with torch.no_grad():
        model(idx, **call)  # warm: caches grown, kernels loaded
        with CountReads() as counter:
            model(idx, **call)
    return counter.reads


CALLS = {
    "offset": dict(offset=5),
    "position_ids": dict(position_ids=torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11]])),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("scheme", posenc.SCHEMES)
def test_no_read_back_per_layer(scheme, call):
    one, four = reads_per_forward(scheme, 1, **CALLS[call]), reads_per_forward(scheme, 4, **CALLS[call])
    assert four == one, f"{four - one} reads in 3 extra layers"
    # per forward: the token ids' range (1 read), plus the positions' range when given explicitly
    assert one == (1 if call == "offset" else 2)


def test_module_decode_call_reads_nothing_back():
    rope = RotaryEmbedding(64, max_position_embeddings=16)
    q, k = torch.randn(1, 4, 1, 64), torch.randn(1, 2, 1, 64)
    rope(q, k, offset=5010)  # grows the cache once (a table build, not a per-call cost)
    with CountReads() as counter:
        for step in range(3):
            for _layer in range(4):
                rope(q, k, offset=5001 + step)
    assert counter.reads == 0
