"""One module shared by several threads: caches grow atomically and every answer stays exact.

Each thread asks for positions that keep moving past the cache, so the cache grows while other
threads read it. Every result is compared with a fresh single-threaded module's.
"""

import sys
import threading

import pytest
import torch

from posenc import (
    LearnedPositionalEmbedding,
    ModelConfig,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    TinyLM,
)
from posenc.rope import DynamicNTKScaling

THREADS = 6
STEPS = 12
ROUNDS = 8


@pytest.fixture(autouse=True)
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    yield
    sys.setswitchinterval(old)


def hammer(work, n_threads=THREADS):
    """Run ``work(thread_index)`` on ``n_threads`` threads at once; re-raise the first failure."""
    errors = []
    start = threading.Barrier(n_threads)

    def run(i):
        try:
            start.wait()
            work(i)
        except BaseException as exc:
            errors.append((i, exc))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError(f"{len(errors)} thread(s) failed, first: thread {errors[0][0]}") from errors[0][1]


def offsets_for(i):
    # interleaved and growing, so growth happens while other threads read
    return [3 + 29 * (s * THREADS + i) for s in range(STEPS)]


@pytest.mark.parametrize(
    "scaling", [None, pytest.param(DynamicNTKScaling(2.0, 64), marks=pytest.mark.slow)], ids=["default", "dynamic"]
)
def test_rotary_shared_by_threads_equals_a_fresh_module(scaling):
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 5, 16), torch.randn(1, 1, 5, 16)
    packed = torch.tensor([[0, 1, 0, 1, 2]])
    fresh_module = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=2)
    for _ in range(ROUNDS):  # every round starts small, so every round grows
        shared = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=2)
        results = {}

        def work(i, shared=shared, results=results):
            for off in offsets_for(i):
                results[(i, off, "offset")] = shared(q, k, offset=off)
                results[(i, off, "ids")] = shared(q, k, position_ids=packed * 7 + off)

        hammer(work)
        for (_, off, kind), (rq, rk) in results.items():
            if kind == "offset":
                want_q, want_k = fresh_module(q, k, offset=off)
            else:
                want_q, want_k = fresh_module(q, k, position_ids=packed * 7 + off)
            torch.testing.assert_close(rq, want_q, atol=0, rtol=0)
            torch.testing.assert_close(rk, want_k, atol=0, rtol=0)
        # the shared cache itself is intact: equal to a fresh table of the same length
        rows = shared.cached_length
        assert shared.cos_cached.shape == shared.sin_cached.shape
        fresh_module.extend(rows)
        torch.testing.assert_close(shared.cos_cached, fresh_module.cos_cached[:rows], atol=0, rtol=0)
        torch.testing.assert_close(shared.sin_cached, fresh_module.sin_cached[:rows], atol=0, rtol=0)


def test_sinusoidal_shared_by_threads_equals_a_fresh_module():
    x = torch.zeros(2, 4, 24)
    fresh = SinusoidalPositionalEncoding(24, max_len=2)
    for _ in range(ROUNDS):
        shared = SinusoidalPositionalEncoding(24, max_len=2)
        results = {}

        def work(i, shared=shared, results=results):
            for off in offsets_for(i):
                results[(i, off)] = shared(x, offset=off)

        hammer(work)
        for (_, off), out in results.items():
            torch.testing.assert_close(out, fresh(x, offset=off), atol=0, rtol=0)
        rows = shared.pe.shape[0]
        fresh.extend(rows)
        torch.testing.assert_close(shared.pe, fresh.pe[:rows], atol=0, rtol=0)


def test_learned_and_a_whole_model_shared_by_threads():
    torch.manual_seed(0)
    model = TinyLM(ModelConfig(scheme="rope", d_model=16, n_heads=2, n_layers=2, max_len=2)).eval()
    learned = LearnedPositionalEmbedding(64, 8)
    ids = torch.randint(0, 256, (1, 3))
    x = torch.randn(1, 3, 8)
    results = {}

    def work(i):
        with torch.no_grad():
            for off in offsets_for(i)[:10]:
                results[(i, off)] = (model(ids, offset=off), learned(x, offset=off % 60))

    hammer(work)
    fresh = TinyLM(ModelConfig(scheme="rope", d_model=16, n_heads=2, n_layers=2, max_len=2)).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        for (_, off), (logits, added) in results.items():
            torch.testing.assert_close(logits, fresh(ids, offset=off), atol=0, rtol=0)
            torch.testing.assert_close(added, learned(x, offset=off % 60), atol=0, rtol=0)


def test_layout_caches_shared_by_threads(monkeypatch):
    """The Triton path's plan cache and apply_rotary's accepted-arguments cache, both bounded and
    small here so that threads evict each other's entries: every thread gets the plan of its own
    layout and the right aliasing answer, and every rotation stays exact."""
    import posenc.rope.apply as apply_mod
    from posenc.rope.kernels import overlap, plans

    monkeypatch.setattr(plans, "MAX_PLANS", 4)
    monkeypatch.setattr(apply_mod, "_ACCEPTED_MAX", 3)
    plans.clear()

    def work(i):
        for step in range(STEPS):
            seq = 1 + (i + step) % 5
            buf = torch.randn(1, seq, 6, 8)
            q, k = buf[:, :, :4].transpose(1, 2), buf[:, :, 4:].transpose(1, 2)
            k_bad = buf[:, :, 3:5].transpose(1, 2)  # shares a head with q
            cos = torch.rand(1, seq, 4)
            for other, should_clash in ((k, False), (k_bad, True)):
                operands = (q, other, q, other, cos, cos, None)
                key = plans.layout_key(operands, ("threads", i % 3))

                def check(q=q, other=other):
                    overlap.check_outputs([("q", q), ("k", other)], [("q_out", q), ("k_out", other)])

                try:
                    plan = plans.plan_for(key, operands, check, lambda seq=seq: seq)
                except ValueError:
                    assert should_clash
                    continue
                assert plan.key == key and plan.launch == seq
                ptrs = [t.data_ptr() if t is not None else 0 for t in operands]
                assert plans.disjoint(plan, ptrs) == (not should_clash)
            layout = ("half", "interleaved")[step % 2]
            want = apply_mod.apply_reference(q, k, cos, cos, layout, 8, False)
            got = apply_mod.apply_rotary(q, k, cos, cos, layout=layout)
            torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)

    for _ in range(ROUNDS):
        hammer(work)
    assert len(plans._plans) <= 4 and len(apply_mod._ACCEPTED) <= 3


def test_a_cache_filled_past_a_lowered_bound_shrinks_to_it(monkeypatch):
    """apply_rotary's accepted-arguments cache evicted one entry per insert, so a cache already larger
    than a bound lowered at run time stayed larger (found when a full run filled it before the test above
    lowered the bound to 3)."""
    import posenc.rope.apply as apply_mod

    monkeypatch.setattr(apply_mod, "_ACCEPTED", {("filler", i): 8 for i in range(10)})
    monkeypatch.setattr(apply_mod, "_ACCEPTED_MAX", 3)
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    cos = torch.rand(1, 3, 4)
    apply_mod.apply_rotary(q, k, cos, cos)
    assert len(apply_mod._ACCEPTED) <= 3
