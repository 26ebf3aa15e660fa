"""One rank of the context-parallel test, run by ``torchrun`` (gloo, CPU) from test_context_parallel.py.

Every rank builds the same q and k, rotates its own shard at its global positions, and the shards,
gathered from all ranks and put back in order, must equal the rotation of the whole sequence bit for
bit. Then PyTorch's own ``context_parallel`` shards a buffer of positions and q: its shard must be the
one :func:`context_parallel_positions` names (head_tail when the length allows 2 * cp chunks,
contiguous otherwise). Its ring attention is not run: in torch 2.13 on CPU, SDPA under
``context_parallel`` raises "Operator aten._scaled_dot_product_flash_attention_for_cpu.default does
not have a sharding strategy registered".
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel

from posenc.rope import RotaryEmbedding
from posenc.rope.context_parallel import (
    CP_SPLITS,
    context_parallel_positions,
    context_parallel_shard,
    context_parallel_unshard,
)


def gathered(shard: torch.Tensor, world: int) -> torch.Tensor:
    parts = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(parts, shard.contiguous())
    return torch.cat(parts, dim=2)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    seq_len = 8 * world
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, seq_len, 32, generator=generator)
    k = torch.randn(2, 2, seq_len, 32, generator=generator)
    rope = RotaryEmbedding(32, base=10000.0)
    whole_q, whole_k = rope(q, k)
    for split in CP_SPLITS:
        positions = context_parallel_positions(seq_len, world, rank, split)
        got_q, got_k = rope(
            context_parallel_shard(q, world, rank, split),
            context_parallel_shard(k, world, rank, split),
            position_ids=positions.unsqueeze(0),
        )
        if not torch.equal(context_parallel_unshard(gathered(got_q, world), world, split), whole_q):
            raise SystemExit(f"rank {rank}: the {split} shards of q do not give the whole rotation")
        if not torch.equal(context_parallel_unshard(gathered(got_k, world), world, split), whole_k):
            raise SystemExit(f"rank {rank}: the {split} shards of k do not give the whole rotation")
    print(f"rank {rank}/{world}: shards equal the whole bit for bit", flush=True)

    mesh = init_device_mesh("cpu", (world,))
    # 3 * world tokens cannot be cut into 2 * world chunks, so torch falls back to the contiguous split
    for length, split in ((seq_len, "head_tail"), (3 * world, "contiguous")):
        ids, q_copy = torch.arange(length), torch.randn(1, 2, length, 4, generator=generator)
        expected_q = context_parallel_shard(q_copy, world, rank, split)
        with context_parallel(mesh, buffers=[ids, q_copy], buffer_seq_dims=[0, 2], no_restore_buffers={ids, q_copy}):
            if not torch.equal(ids, context_parallel_positions(length, world, rank, split)):
                raise SystemExit(f"rank {rank}: torch shards {ids.tolist()} for length {length}, not {split}")
            if not torch.equal(q_copy, expected_q):
                raise SystemExit(f"rank {rank}: torch's shard of q differs from context_parallel_shard ({split})")
    print(f"rank {rank}/{world}: torch context_parallel shards as head_tail and contiguous", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
