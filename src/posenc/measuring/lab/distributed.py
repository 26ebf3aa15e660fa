"""Running under ``torchrun``: one process per worker, PyTorch DDP for training.

``torchrun --nproc_per_node=N`` sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; without them the
lab runs as a single process. The backend is gloo on CPU and NCCL on CUDA. Every process computes
the same global batch offsets and takes its own rows, and DDP averages gradients, so the update is
the one a single process would make on the whole batch (up to float summation order).
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: Optional[str] = None  # "gloo" or "nccl" under torchrun; None for one process

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

    def describe(self) -> Dict[str, Any]:
        """What ``results.json`` records of the run's processes: ``{"world_size", "backend"}``."""
        return {"world_size": self.world, "backend": self.backend}


def setup(device: str) -> Dist:
    """Join the process group if launched by torchrun; return this process's place in it."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    else:
        # Share the cores instead of every process spawning one thread per core.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device == "cuda" else "gloo")
    return Dist(rank, world, local_rank, str(dist.get_backend()))


def data_parallel(model: nn.Module) -> DistributedDataParallel:
    """``model`` under DDP, its buffers not broadcast before each forward (every process builds the
    same position tables itself). torch 2.13 renamed ``broadcast_buffers`` to ``forward_sync_buffers``
    and warns (``FutureWarning``, once per process) on the old name; the new name is used where this
    torch has it. Unlike ``broadcast_buffers=False`` it still syncs the buffers once at wrapping,
    which changes nothing here: they are equal on every process."""
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters:
        return DistributedDataParallel(model, forward_sync_buffers=False)
    return DistributedDataParallel(model, broadcast_buffers=False)


def teardown(d: Dist) -> None:
    if d.active and dist.is_initialized():
        dist.destroy_process_group()


def barrier(d: Dist) -> None:
    if d.active:
        dist.barrier()


def all_reduce_sum(d: Dist, tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over processes (in place) and return it."""
    if d.active:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def broadcast_flag(d: Dist, value: bool) -> bool:
    """Rank 0's ``value`` on every process."""
    if not d.active:
        return value
    t = torch.tensor([1 if value else 0], dtype=torch.int64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.broadcast(t, src=0)
    return bool(t.item())
