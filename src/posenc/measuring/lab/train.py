"""Training: the same model, data order, initialisation and schedule for every position scheme.

* **Data order.** The batch of step ``s`` is a pure function of ``(seed, s)``: random offsets into the
  training byte stream from a generator seeded with both. Every scheme sees exactly the same bytes
  in the same order, and a resumed run sees the batches it would have seen without interruption.
* **Initialisation.** The scheme is built under its own seed and passed into :class:`TinyLM`, so
  every weight the schemes share starts identical (a learned table does not shift the RNG stream).
* **Optimiser.** AdamW (betas 0.9/0.95), weight decay on matrices only, gradient clipping, linear
  warmup then cosine decay to ``lr * min_lr_ratio``.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

from ...model import ModelConfig, TinyLM, scheme_of
from ...runs.lab_run import lab_model_config
from .config import LabConfig
from .distributed import Dist, all_reduce_sum, data_parallel
from .passkey import answer_loss, is_retrieval_step, training_rows


def model_config(cfg: LabConfig, scheme: str) -> ModelConfig:
    """The :class:`ModelConfig` of ``scheme``'s model; a learned table has ``train_len`` rows
    (:func:`posenc.runs.lab_run.lab_model_config`, which reads a run folder's model back too)."""
    return lab_model_config(vars(cfg), scheme)


def build_model(cfg: LabConfig, scheme: str) -> TinyLM:
    """A freshly initialised model; shared weights are identical across schemes for one seed."""
    mc = model_config(cfg, scheme)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + 1)
        position = scheme_of(mc)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return TinyLM(mc, scheme=position)


def lr_at(step: int, *, lr: float, warmup: int, total: int, min_ratio: float) -> float:
    """Learning rate of step ``step`` (0-based): linear warmup to ``lr``, then cosine decay to
    ``lr * min_ratio`` at the last step."""
    if warmup and step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, total - warmup - 1)
    progress = min(1.0, (step - warmup) / span)
    return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    other = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
    )


def batch_offsets(n_bytes: int, length: int, batch: int, seed: int, step: int) -> np.ndarray:
    """Start offsets of step ``step``'s global batch: shape (batch,), a pure function of the args."""
    if n_bytes < length + 2:
        raise ValueError(
            f"the training text has {n_bytes} bytes, fewer than one sequence of "
            f"{length + 1}; use more data or a shorter train_len"
        )
    rng = np.random.default_rng([seed, step])
    return rng.integers(0, n_bytes - length - 1, size=batch)


def get_batch(data: np.ndarray, offsets: np.ndarray, length: int, device) -> tuple:
    """Inputs and next-byte targets, each (len(offsets), length) int64."""
    rows = np.stack([data[o : o + length + 1] for o in offsets]).astype(np.int64)  # (B, L+1)
    t = torch.from_numpy(rows).to(device)
    return t[:, :-1], t[:, 1:]


def run_kwargs(cfg: LabConfig) -> dict:
    """The :func:`train_steps` arguments a lab run takes from its config (all but the model, the
    optimizer, the data, the step range, the peak rate, the warmup and the device)."""
    return dict(
        length=cfg.train_len,
        batch=cfg.batch_size,
        min_ratio=cfg.min_lr_ratio,
        grad_clip=cfg.grad_clip,
        seed=cfg.seed,
        retrieval_share=cfg.retrieval_share,
        answer_weight=cfg.retrieval_answer_weight,
    )


class TrainingDiverged(ArithmeticError):
    """The next-byte loss of a training step was not finite (the model's weights are then unusable)."""

    def __init__(self, step: int, loss: float):
        self.step, self.loss = step, loss
        super().__init__(f"training diverged at step {step + 1}: the loss was {loss}")


def train_steps(
    model: TinyLM,
    optimizer: torch.optim.Optimizer,
    data: np.ndarray,
    *,
    start: int,
    total: int,
    length: int,
    batch: int,
    lr: float,
    warmup: int,
    min_ratio: float,
    grad_clip: float,
    seed: int,
    device,
    d: Dist,
    on_step: Optional[Callable[[int, float], None]] = None,
    retrieval_share: float = 0.0,
    answer_weight: float = 1.0,
    stop: Optional[int] = None,
) -> None:
    """Run steps ``start .. total - 1`` of a ``total``-step schedule (or only up to ``stop - 1``, to
    look at the model part way); ``on_step(step, loss)`` after each (loss averaged over the global
    batch). Under torchrun each process takes rows ``rank::world`` of the global batch. A step whose
    loss is not finite raises :class:`TrainingDiverged` before ``on_step`` (so no checkpoint of the
    broken weights is written).

    The steps picked by :func:`~posenc.measuring.lab.passkey.is_retrieval_step` (``retrieval_share`` of them)
    read passkey sequences built on the same filler offsets, and add ``answer_weight`` times the mean
    loss on the five answer bytes to the next-byte loss; ``on_step`` reports the next-byte loss
    alone, so the training curve stays comparable."""
    if batch % d.world:
        raise ValueError(
            f"batch size {batch} must be divisible by the number of processes "
            f"{d.world} so every process gets an equal share"
        )
    end = total if stop is None else stop
    if not start <= end <= total:
        raise ValueError(f"stop must be in [start, total] = [{start}, {total}], got {stop}")
    net = data_parallel(model) if d.active else model
    model.train()
    for step in range(start, end):
        offsets = batch_offsets(data.size, length, batch, seed, step)
        passkey = is_retrieval_step(step, retrieval_share)
        if passkey:
            rows = training_rows(data, offsets, length, seed, step)[d.rank :: d.world]
            t = torch.from_numpy(rows.astype(np.int64)).to(device)  # (b, L+1)
            x, y = t[:, :-1], t[:, 1:]
        else:
            x, y = get_batch(data, offsets[d.rank :: d.world], length, device)
        rate = lr_at(step, lr=lr, warmup=warmup, total=total, min_ratio=min_ratio)
        for group in optimizer.param_groups:
            group["lr"] = rate
        logits = net(x)  # (b, L, 256)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        objective = loss + answer_weight * answer_loss(logits, y) if passkey and answer_weight else loss
        optimizer.zero_grad(set_to_none=True)
        objective.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        value = all_reduce_sum(d, loss.detach().clone().reshape(1)).item() / d.world
        if not math.isfinite(value):  # the same global value on every process, so all raise together
            raise TrainingDiverged(step, value)
        if on_step is not None:
            on_step(step, value)
    model.eval()
