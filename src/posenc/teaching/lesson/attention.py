"""Who attends to whom: the attention weights of posenc's own attention layer, by word.

:func:`attention_weights` computes the softmax weights :class:`~posenc.model.CausalSelfAttention`
uses inside its forward (the same projections, the scheme's turn of q and k, its logit bias, the
causal mask and the softmax scale), so a figure drawn from them is the layer's own. :func:`by_word`
folds token weights into word weights for a model that reads bytes, per byte, so that a long word does
not collect attention by its length alone. The explorer's lesson draws the
result for the learner's sentence under every scheme.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from ..._checks import Positions, as_positions, check_tensor
from ...model import CausalSelfAttention
from ...schemes import PositionScheme


def attention_weights(
    attention: CausalSelfAttention,
    x: torch.Tensor,
    scheme: PositionScheme,
    position_ids: torch.Tensor,
    causal: bool = True,
) -> torch.Tensor:
    """The attention weights of ``attention`` reading ``x``: (batch, heads, seq, seq), each row
    (a query) summing to 1 over the keys.

    Args:
        attention: the layer.
        x: (batch, seq, d_model) its input (after the block's normalisation).
        scheme: the position scheme the layer runs with.
        position_ids: (batch or 1, seq) positions.
        causal: whether a query sees only itself and the keys before it.
    """
    check_tensor("x", x, ndim=3, floating=True)
    positions = as_positions("position_ids", position_ids)
    B, S, D = x.shape
    H, hd = attention.n_heads, attention.head_dim
    q, k, _ = attention.qkv(x).split(D, dim=-1)  # 2 x (B, S, D)
    q, k = (t.view(B, S, H, hd).transpose(1, 2) for t in (q, k))  # (B, H, S, hd)
    given = positions if getattr(scheme, "accepts_positions", False) else positions.ids
    q, k = scheme.rotate(q, k, given)
    scale = getattr(scheme, "softmax_scale_factor", 1.0) / math.sqrt(hd)
    logits = (q @ k.transpose(-1, -2)) * scale  # (B, H, S, S)
    if getattr(scheme, "accepts_positions", False):
        rows = [scheme.bias(p, p) for p in (Positions(row, None) for row in positions.ids)]
    else:
        rows = [scheme.bias(p, p) for p in positions.ids]  # each (H, S, S) or None
    if rows[0] is not None:
        logits = logits + torch.stack([r for r in rows if r is not None]).to(x.dtype)  # (B|1, H, S, S)
    if causal:  # by token order, as the layer masks
        future = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
        logits = logits.masked_fill(future, float("-inf"))
    return torch.softmax(logits, dim=-1)


def by_word(weights: torch.Tensor, spans: Sequence[tuple[int, int]], causal: bool = True) -> torch.Tensor:
    """Token weights (seq, seq) folded into word weights (words, words), per token: how much a word's
    tokens attend to another word, as a share of the words they can see, whatever the words' lengths.

    For each query token and each word, the weight the token gives the word is divided by the number of
    the word's tokens it can see (all of them; under ``causal``, those at or before the query), which
    gives the word's weight per token; a query token's row of these is then scaled to sum to 1, and a
    word's row is the mean of its tokens' rows. A long word so collects no more attention than a short
    one that each of its tokens gets as much: if every token attends evenly to the tokens it sees, every
    word gets the same share of each row. Rows sum to 1 when the spans cover every token.

    Args:
        weights: (seq, seq) attention weights, rows the queries.
        spans: one ``(start, stop)`` token range per word, in order, covering the tokens in order.
        causal: whether a query token sees only the tokens at or before it (as ``weights`` were made).
    """
    check_tensor("weights", weights, ndim=2, floating=True)
    seq = weights.shape[0]
    word_of = torch.empty(seq, dtype=torch.int64)
    for w, (start, stop) in enumerate(spans):
        word_of[start:stop] = w
    keys = torch.nn.functional.one_hot(word_of, len(spans)).to(weights.dtype)  # (seq, words)
    seen = torch.ones(seq, seq, dtype=weights.dtype)
    if causal:
        seen = seen.tril()
    visible = seen @ keys  # (seq, words): how many tokens of each word a query token sees
    per_token = (weights @ keys) / visible.clamp(min=1)  # (seq, words): a word's weight per token it shows
    shares = per_token / per_token.sum(-1, keepdim=True)  # each query token's row sums to 1
    return torch.stack([shares[start:stop].mean(0) for start, stop in spans])  # (words, words)


__all__ = ["attention_weights", "by_word"]
