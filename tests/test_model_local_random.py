"""posenc.model.local_random: a block's random draws come from a generator of its own, exactly those
of a global ``torch.manual_seed``, without reading, advancing or reseeding the global generator, and
without reaching other threads."""

from __future__ import annotations

import threading

import pytest
import torch

from posenc import SCHEMES
from posenc.model import Block, CausalSelfAttention, ModelConfig, TinyLM, local_random


def _same_tensors(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("seed", [0, 7])
def test_a_model_built_inside_has_the_weights_of_a_global_seed(scheme, seed):
    config = ModelConfig(scheme=scheme, vocab_size=11, d_model=16, n_layers=2, n_heads=2, max_len=12)
    torch.manual_seed(seed)
    expected = TinyLM(config).state_dict()
    torch.manual_seed(12345)
    before = torch.get_rng_state()
    with local_random(seed):
        got = TinyLM(config).state_dict()
    assert _same_tensors(got, expected)
    assert torch.equal(torch.get_rng_state(), before)  # neither read-and-advanced nor reseeded


def _draws() -> list:
    """Modules built and tensors drawn from the default generator, in one fixed order."""
    return [
        Block(8, 2).state_dict(),
        CausalSelfAttention(8, 2).state_dict(),
        torch.randn(5),
        torch.rand(2, 3, dtype=torch.float64),
        torch.randint(0, 9, (6,)),
        torch.randint(9, (4,)),
        torch.randperm(7),
        torch.empty(4).normal_(),
        torch.nn.functional.dropout(torch.ones(8), 0.5, training=True),
    ]


def test_blocks_and_tensors_follow_the_global_stream_draw_for_draw():
    torch.manual_seed(3)
    expected = _draws()
    with local_random(3):
        got = _draws()
    assert _same_tensors(got[0], expected[0]) and _same_tensors(got[1], expected[1])
    for g, e in zip(got[2:], expected[2:]):
        assert torch.equal(g, e)


def test_a_generator_given_is_the_one_drawn_from_and_an_explicit_one_is_respected():
    mine = torch.Generator().manual_seed(5)
    with local_random(mine) as used:
        assert used is mine
        a = torch.randn(3)
        b = torch.randn(3, generator=torch.Generator().manual_seed(9))  # named generators are left alone
    assert torch.equal(a, torch.randn(3, generator=torch.Generator().manual_seed(5)))
    assert torch.equal(b, torch.randn(3, generator=torch.Generator().manual_seed(9)))
    assert not torch.equal(mine.get_state(), torch.Generator().manual_seed(5).get_state())  # it advanced


def test_other_threads_keep_drawing_from_the_global_generator():
    inside, drawn = threading.Event(), {}

    def other_thread():
        inside.wait()
        torch.manual_seed(21)
        drawn["x"] = torch.randn(4)

    thread = threading.Thread(target=other_thread)
    thread.start()
    with local_random(0):
        inside.set()
        thread.join()
        mine = torch.randn(4)
    torch.manual_seed(21)
    assert torch.equal(drawn["x"], torch.randn(4))  # the other thread's draws were the global stream's
    assert torch.equal(mine, torch.randn(4, generator=torch.Generator().manual_seed(0)))


def test_a_fused_attention_call_without_dropout_passes_and_one_with_dropout_is_refused():
    q = torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(1))
    fused = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    with local_random(0):
        out = fused(q, q, q, 0.0)[0]
        with pytest.raises(RuntimeError, match="_scaled_dot_product_flash_attention_for_cpu.*no form that takes"):
            fused(q, q, q, 0.5)
    assert torch.equal(out, fused(q, q, q, 0.0)[0])


def test_meta_tensors_pass_through():
    with local_random(0):
        layer = torch.nn.Linear(4, 4, device="meta")
    assert layer.weight.is_meta


@pytest.mark.parametrize(
    "seed, error, message",
    [
        ("0", TypeError, "seed must be an int or a torch.Generator, got '0' \\(str\\)"),
        (1.0, TypeError, "seed must be an int or a torch.Generator, got 1.0 \\(float\\)"),
        (True, TypeError, "got True \\(bool\\)"),
        (None, TypeError, "got None"),
        (-1, ValueError, "seed must be >= 0, got -1"),
        (2**64, ValueError, f"seed must be <= {2**64 - 1}, got {2**64}"),
    ],
)
def test_bad_seeds_are_refused_by_name(seed, error, message):
    with pytest.raises(error, match=message):
        with local_random(seed):
            pass
