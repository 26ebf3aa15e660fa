"""Inputs and a distance that the ``transformers`` integration tests share
(``test_integration_transformers.py``, ``test_integration_transformers_configs.py``)."""

from __future__ import annotations

import torch

from posenc import testing as tiny

SEQ = 16


def ids_for(seed: int = 1, batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return torch.randint(1, tiny.VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def positions(offset: int, batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return (torch.arange(seq) + offset).unsqueeze(0).expand(batch, -1)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())
