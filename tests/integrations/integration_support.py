"""What the ``transformers`` integration tests share: inputs, a distance, and the check that a patch
changes nothing but the rounding (``test_integration_transformers.py``,
``test_integration_transformers_configs.py``, ``test_integration_more_families.py``,
``test_integration_llama4.py``)."""

from __future__ import annotations

import contextlib
import copy
from typing import Iterator

import torch

from posenc import testing as tiny

SEQ = 16


def ids_for(seed: int = 1, batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return torch.randint(1, tiny.VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def positions(offset: int, batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return (torch.arange(seq) + offset).unsqueeze(0).expand(batch, -1)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


@contextlib.contextmanager
def patched_exactly(model, ids: torch.Tensor, new_tokens: int = 6) -> Iterator[object]:
    """Patches ``model`` for the ``with`` block and yields the patch. On entry the patched logits of
    ``ids`` are within 4 times the model's own float32 noise (its float64 copy's distance) of the
    unpatched ones, and greedy decoding of ``new_tokens`` with the KV cache gives the unpatched
    tokens; on exit ``undo()`` gives the unpatched logits bit for bit."""
    from posenc.integrations.transformers import patch

    before = _logits(model, ids)
    noise = float((before.double() - _logits(copy.deepcopy(model).double(), ids).double()).abs().max())
    prompt = ids[:1, :6]
    settings = dict(max_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=0)
    with torch.no_grad():
        plain = model.generate(prompt, attention_mask=torch.ones_like(prompt), **settings)
    handle = patch(model)
    assert float((_logits(model, ids) - before).abs().max()) <= 4 * noise
    with torch.no_grad():
        assert torch.equal(model.generate(prompt, attention_mask=torch.ones_like(prompt), **settings), plain)
    yield handle
    handle.undo()
    assert torch.equal(_logits(model, ids), before)
