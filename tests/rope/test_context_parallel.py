"""Context-parallel positions: the splits, a shard's rotation equal bit for bit to the same rows of the
whole sequence's, the dynamic-scaling hazard, bad input; and under torchrun with gloo, against PyTorch's
own context_parallel sharding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc.rope import RotaryEmbedding, apply_rotary, rope_inv_freq, rope_table
from posenc.rope.context_parallel import (
    CP_SPLITS,
    context_parallel_positions,
    context_parallel_shard,
    context_parallel_unshard,
)
from posenc.rope.scaling import DynamicNTKScaling


def test_head_tail_gives_rank_r_chunks_r_and_2cp_minus_1_minus_r():
    # 16 tokens over 4 ranks: 8 chunks of 2
    assert [context_parallel_positions(16, 4, r).tolist() for r in range(4)] == [
        [0, 1, 14, 15],
        [2, 3, 12, 13],
        [4, 5, 10, 11],
        [6, 7, 8, 9],
    ]


def test_contiguous_and_round_robin():
    assert [context_parallel_positions(6, 2, r, "contiguous").tolist() for r in range(2)] == [[0, 1, 2], [3, 4, 5]]
    assert [context_parallel_positions(6, 3, r, "round_robin").tolist() for r in range(3)] == [[0, 3], [1, 4], [2, 5]]


@pytest.mark.parametrize("split", CP_SPLITS)
@pytest.mark.parametrize("cp_size", [1, 2, 3, 4, 8])
def test_the_ranks_cover_every_position_once(split, cp_size):
    seq_len = 48
    together = torch.cat([context_parallel_positions(seq_len, cp_size, r, split) for r in range(cp_size)])
    assert sorted(together.tolist()) == list(range(seq_len))


def causal_work(positions):
    return int((positions + 1).sum())  # keys a causal query at position p attends to: p + 1


def test_head_tail_balances_causal_work_where_contiguous_does_not():
    work = {s: [causal_work(context_parallel_positions(64, 4, r, s)) for r in range(4)] for s in CP_SPLITS}
    assert len(set(work["head_tail"])) == 1
    assert max(work["contiguous"]) > 3 * min(work["contiguous"])


@pytest.mark.parametrize("split", CP_SPLITS)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_a_shards_rotation_equals_the_same_rows_of_the_whole_bit_for_bit(split, layout):
    seq_len, cp = 48, 4
    rope = RotaryEmbedding(32, base=10000.0, layout=layout)
    q, k = torch.randn(2, 4, seq_len, 32), torch.randn(2, 2, seq_len, 32)
    whole_q, whole_k = rope(q, k)
    shards = []
    for rank in range(cp):
        positions = context_parallel_positions(seq_len, cp, rank, split)
        q_r, k_r = context_parallel_shard(q, cp, rank, split), context_parallel_shard(k, cp, rank, split)
        got_q, got_k = rope(q_r, k_r, position_ids=positions.unsqueeze(0))
        assert torch.equal(got_q, whole_q[:, :, positions]) and torch.equal(got_k, whole_k[:, :, positions])
        # the one fused entry, reading the table's rows by position, agrees too
        cos, sin = rope_table(seq_len, rope_inv_freq(32, 10000.0))
        fq, fk = apply_rotary(q_r, k_r, cos, sin, layout=layout, positions=positions)
        assert torch.equal(fq, whole_q[:, :, positions]) and torch.equal(fk, whole_k[:, :, positions])
        shards.append(got_q)
    assert torch.equal(context_parallel_unshard(torch.cat(shards, dim=2), cp, split), whole_q)


def test_a_shard_rotated_from_zero_is_wrong():
    # the silent bug this guards against: a rank's tokens rotated as if its shard began the sequence
    rope = RotaryEmbedding(16)
    q = torch.randn(1, 1, 16, 16)
    whole, _ = rope(q, q)
    positions = context_parallel_positions(16, 2, 1)
    local, _ = rope(context_parallel_shard(q, 2, 1), context_parallel_shard(q, 2, 1))
    assert not torch.allclose(local, whole[:, :, positions])


def test_dynamic_scaling_needs_frozen_frequencies_across_ranks():
    seq_len, cp = 64, 4
    scaling = DynamicNTKScaling(factor=2.0, original_max_position_embeddings=16)
    q = torch.randn(1, 2, seq_len, 16)
    whole, _ = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=16)(q, q)
    positions = context_parallel_positions(seq_len, cp, 0, "contiguous")  # 0..15: within the trained length
    shard = context_parallel_shard(q, cp, 0, "contiguous")
    loose, _ = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=16)(
        shard, shard, position_ids=positions.unsqueeze(0)
    )
    assert not torch.allclose(loose, whole[:, :, positions])  # rank 0 picked the frequencies of length 16
    frozen = RotaryEmbedding(16, scaling=scaling, max_position_embeddings=16).freeze_frequencies(seq_len)
    got, _ = frozen(shard, shard, position_ids=positions.unsqueeze(0))
    assert torch.equal(got, whole[:, :, positions])


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((16, 4, 4), ValueError, "cp_rank must be in \\[0, cp_size\\) = \\[0, 4\\), got 4"),
        ((16, 4, -1), ValueError, "cp_rank must be in \\[0, cp_size\\) = \\[0, 4\\), got -1"),
        ((12, 4, 0), ValueError, "seq_len 12 is not divisible by 8: the head_tail split needs 2 \\* cp_size = 8"),
        ((10, 4, 0, "contiguous"), ValueError, "seq_len 10 is not divisible by 4: the contiguous split needs"),
        ((16, 0, 0), ValueError, "cp_size must be >= 1"),
        ((16, 2, 0, "ring"), ValueError, "split must be one of"),
        ((16.0, 2, 0), TypeError, "seq_len must be an integer"),
        ((16, 2, True), TypeError, "cp_rank must be an integer"),
    ],
)
def test_bad_input_is_refused_by_name(args, error, match):
    with pytest.raises(error, match=match):
        context_parallel_positions(*args)


# -- under torchrun ------------------------------------------------------------------------------------
WORKER = Path(__file__).with_name("context_parallel_worker.py")


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 4])
def test_torchrun_gloo_shards_rotate_as_the_whole(processes, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={processes}",
        str(WORKER),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for rank in range(processes):
        assert f"rank {rank}/{processes}: shards equal the whole bit for bit" in done.stdout
        assert f"rank {rank}/{processes}: torch context_parallel shards as head_tail and contiguous" in done.stdout
