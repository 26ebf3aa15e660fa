"""The common mistakes, each run beside the right way: the one source of their numbers.

``posenc tour --section mistakes`` prints these numbers and the explorer's lesson (chapter "Common
mistakes") draws them, from the same calls, so the two cannot disagree:

1. :func:`table_drift`: the fixed sinusoidal table stored as a trainable ``nn.Parameter``
   (:class:`SinusoidalAsParameter`) drifts from its formula under Adam; posenc's buffer does not.
2. :func:`block_parameters`: gluing a ``d``-wide position onto a ``d``-wide word makes a block
   ``2d`` wide: a matrix that only reads the wider vector doubles, one that also writes it grows fourfold.
3. :func:`rotated_values_change`: RoPE turns queries and keys, never values. Moving a phrase leaves
   the real attention block's output unchanged (to rounding); turning the values too makes the output
   depend on where the phrase sits.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ..._checks import check_int
from ...model import Block, CausalSelfAttention, ModelConfig, TinyLM, local_random
from ...rope import RotaryEmbedding
from ...schemes import PositionScheme
from ...sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table

#: the sentence both copies of the model take their Adam steps on (bytes as tokens)
SENTENCE = b"the dog bit the man"
#: width and rows of the small model of mistake 1
DRIFT_D_MODEL = 32
DRIFT_ROWS = 32
DRIFT_HEADS = 4
#: heads of the block whose weights mistake 2 counts
CONCAT_HEADS = 8
#: the phrase of mistake 3: tokens, model width, heads, seed of its random token vectors
PHRASE_LEN = 6
PHRASE_D_MODEL = 32
PHRASE_HEADS = 4
PHRASE_SEED = 7
#: a change of an output at or under this (float64, outputs of size about 1) is rounding
ROUNDING_LEVEL = 1e-12


class SinusoidalAsParameter(PositionScheme):
    """The mistake: the fixed sinusoidal table stored as a trainable ``nn.Parameter``."""

    name = "sinusoidal-as-parameter"

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.pe = nn.Parameter(sinusoidal_table(max_len, d_model))  # (max_len, d_model)

    def embed(self, x, position_ids):
        return x + self.pe[position_ids].to(x.dtype)


def _drift_model(scheme: PositionScheme) -> TinyLM:
    config = ModelConfig(
        scheme="sinusoidal",
        vocab_size=256,
        d_model=DRIFT_D_MODEL,
        n_layers=1,
        n_heads=DRIFT_HEADS,
        max_len=DRIFT_ROWS,
    )
    with local_random(0):
        return TinyLM(config, scheme=scheme)


def adam_steps(params: list[torch.Tensor], loss_fn, steps: int, lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
    """``steps`` Adam updates of ``params`` on ``loss_fn()``, written out: the update of
    ``torch.optim.Adam`` with its defaults (no weight decay, no amsgrad). Written out so that a
    first call does not import ``torch._dynamo``, which ``torch.optim`` does and which takes
    seconds; a test holds it equal to ``torch.optim.Adam``."""
    b1, b2 = betas
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t in range(1, steps + 1):
        for p in params:
            p.grad = None
        loss_fn().backward()
        with torch.no_grad():
            for p, mp, vp in zip(params, m, v):
                if p.grad is None:
                    continue
                mp.mul_(b1).add_(p.grad, alpha=1 - b1)
                vp.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                denom = (vp / (1 - b2**t)).sqrt_().add_(eps)
                p.addcdiv_(mp, denom, value=-lr / (1 - b1**t))


def table_drift(steps: int, lr: float = 1e-2) -> dict:
    """``steps`` Adam steps of next-token prediction on :data:`SENTENCE`, once with the table as
    posenc's buffer and once as a Parameter, from the same initial weights.

    Returns, for ``"buffer"`` and ``"parameter"``: ``largest_change`` (largest distance of any table
    value from the formula), ``rows_changed`` (rows that no longer follow it), ``trainable`` (the
    table's trainable numbers); and ``rows_used`` (the seats the sentence uses).
    """
    check_int("steps", steps, minimum=1, maximum=100)
    tokens = torch.tensor([list(SENTENCE)])  # (1, 19) bytes
    exact = sinusoidal_table(DRIFT_ROWS, DRIFT_D_MODEL)  # (rows, d)
    out: dict = {"steps": steps, "rows_used": tokens.shape[1] - 1}
    schemes = {
        "buffer": SinusoidalPositionalEncoding(DRIFT_D_MODEL, max_len=DRIFT_ROWS),
        "parameter": SinusoidalAsParameter(DRIFT_D_MODEL, DRIFT_ROWS),
    }
    for label, scheme in schemes.items():
        model = _drift_model(scheme)

        def loss(model: TinyLM = model) -> torch.Tensor:
            logits = model(tokens[:, :-1])  # (1, 18, 256)
            return F.cross_entropy(logits.reshape(-1, 256), tokens[:, 1:].reshape(-1))

        adam_steps([p for p in model.parameters() if p.requires_grad], loss, steps, lr)
        table = scheme.get_buffer("pe") if label == "buffer" else scheme.get_parameter("pe")
        change = (table.detach()[:DRIFT_ROWS].float() - exact).abs()  # (rows, d)
        out[label] = {
            "largest_change": float(change.max()),
            "rows_changed": int((change.amax(-1) > 0).sum()),
            "trainable": sum(p.numel() for p in scheme.parameters() if p.requires_grad),
        }
    return out


def block_parameters(d_model: int, heads: int = CONCAT_HEADS) -> dict:
    """Weights of one posenc :class:`~posenc.model.Block` at width ``d_model`` (position added) and
    ``2 * d_model`` (position glued on), counted on the meta device (sizes only, no memory)."""
    check_int("d_model", d_model, minimum=heads, maximum=65_536)
    with torch.device("meta"):
        added = sum(p.numel() for p in Block(d_model, heads).parameters())
        glued = sum(p.numel() for p in Block(2 * d_model, heads).parameters())
    return {"d_model": d_model, "added": added, "concatenated": glued, "ratio": glued / added}


@contextmanager
def values_rotated(attention: CausalSelfAttention, rope: RotaryEmbedding, position_ids: torch.Tensor) -> Iterator[None]:
    """Inside this block, ``attention`` also rotates its values by their positions (the mistake).

    A forward hook on the fused q/k/v projection turns the value third of its output, so the real
    :class:`~posenc.model.CausalSelfAttention` forward runs unchanged around it.
    """
    heads, head_dim = attention.n_heads, attention.head_dim

    def hook(module, inputs, output):
        q, k, v = output.split(heads * head_dim, dim=-1)  # 3 x (B, S, D)
        B, S, D = v.shape
        v = v.view(B, S, heads, head_dim).transpose(1, 2)  # (B, H, S, hd)
        v, _ = rope.rotate(v, v, position_ids)
        return torch.cat((q, k, v.transpose(1, 2).reshape(B, S, D)), dim=-1)

    handle = attention.qkv.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def rotated_values_change(shift: int) -> dict:
    """The same :data:`PHRASE_LEN` random token vectors at seats ``0 ..`` and again ``shift`` seats
    later, through posenc's :class:`~posenc.model.CausalSelfAttention` with
    :class:`~posenc.rope.RotaryEmbedding` (float64): the largest change of any output with q and k
    turned (``qk_only``, rounding) and with v turned too (``with_v``); ``output_scale`` is the
    largest output entry, for scale."""
    check_int("shift", shift, minimum=1, maximum=1_000_000)
    with local_random(PHRASE_SEED) as generator:
        attention = CausalSelfAttention(PHRASE_D_MODEL, PHRASE_HEADS)
    attention = attention.double().eval()
    x = torch.randn(1, PHRASE_LEN, PHRASE_D_MODEL, dtype=torch.float64, generator=generator)  # (1, seq, d)
    rope = RotaryEmbedding(PHRASE_D_MODEL // PHRASE_HEADS).double()  # float64 tables: rounding is float64
    seats = torch.arange(PHRASE_LEN).unsqueeze(0)  # (1, seq)
    with torch.no_grad():
        right = [attention(x, rope, p) for p in (seats, seats + shift)]
        wrong = []
        for p in (seats, seats + shift):
            with values_rotated(attention, rope, p):
                wrong.append(attention(x, rope, p))
    qk_only = float((right[0] - right[1]).abs().max())
    with_v = float((wrong[0] - wrong[1]).abs().max())
    return {
        "shift": shift,
        "seq": PHRASE_LEN,
        "qk_only": qk_only,
        "with_v": with_v,
        "output_scale": float(right[0].abs().max()),
        "qk_only_rounding": qk_only <= ROUNDING_LEVEL,
        "with_v_rounding": with_v <= ROUNDING_LEVEL,
        "rounding_level": ROUNDING_LEVEL,
    }


__all__ = [
    "SinusoidalAsParameter",
    "adam_steps",
    "block_parameters",
    "rotated_values_change",
    "table_drift",
    "values_rotated",
]
