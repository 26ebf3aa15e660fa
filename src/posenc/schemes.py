"""The one interface every position scheme implements: where position enters attention.

A transformer can learn where a token sits at exactly three places, and every scheme in the field
uses one of them:

=====================  ==========================  ==============================================
place                  schemes                     hook
=====================  ==========================  ==============================================
the input vectors      sinusoidal, learned         ``embed(x, position_ids) -> x + p``
queries and keys       RoPE and its scalings       ``rotate(q, k, position_ids) -> (q', k')``
attention logits       ALiBi                       ``bias(q_positions, k_positions) -> (H, Lq, Lk)``
nowhere                NoPE                        (all three hooks are the identity)
=====================  ==========================  ==============================================

The reference model in :mod:`posenc.model` calls all three hooks on whatever scheme it is given, so
adding a scheme means overriding the one hook that matches where it acts. Everything else a model
reads from a scheme is declared on :class:`PositionScheme` with its neutral value
(``accepts_positions``, ``softmax_scale_factor``, ``max_positions``), so no caller guesses with
``getattr``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from ._checks import PositionsLike, as_positions, check_tensor, checked_positions


class PositionScheme(nn.Module):
    """Base class: every hook defaults to "no position information here"."""

    #: Short name used by the CLI, the lab and the explorer.
    name: str = "base"
    #: Largest number of positions the scheme can represent, ``None`` if unbounded.
    max_positions: Optional[int] = None
    #: Whether the hooks accept :class:`posenc._checks.Positions` (positions the model checked once,
    #: with a per-forward memo) in place of a tensor. A model passes plain tensors to schemes that
    #: leave this False, so a scheme written against the tensor interface keeps working.
    accepts_positions: bool = False
    #: What attention multiplies its ``1/sqrt(head_dim)`` softmax scale by for this scheme: 1 for
    #: every scheme but RoPE with DeepSeek-style YaRN, whose temperature lives here instead of in the
    #: cos/sin tables (:func:`posenc.rope.registry.softmax_scale`).
    softmax_scale_factor: float = 1.0

    def embed(self, x: torch.Tensor, position_ids: PositionsLike) -> torch.Tensor:
        """Add position information to token vectors.

        Args:
            x: token vectors, shape (batch, seq, d_model).
            position_ids: int64 positions, shape (batch or 1, seq), or
                :class:`posenc._checks.Positions` that the model checked once for all layers.
        """
        return x

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: PositionsLike
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Put position into queries and keys, shape (batch, heads, seq, head_dim). Never values.

        ``position_ids`` as in :meth:`embed`; a model calls this once per layer with the same
        :class:`posenc._checks.Positions`, so a scheme must not read positions back to the host here.
        """
        return q, k

    def bias(self, q_positions: PositionsLike, k_positions: PositionsLike) -> Optional[torch.Tensor]:
        """Additive attention-logit bias of shape (heads, Lq, Lk), or ``None``.

        Args:
            q_positions: positions of the queries, shape (Lq,).
            k_positions: positions of the keys, shape (Lk,).
        """
        return None


class AdditiveEncoding(PositionScheme):
    """Base of the schemes that add a position vector to each token vector (sinusoidal, learned).

    Subclasses set ``self.d_model`` and implement ``encodings(position_ids)``, returning the vectors
    of shape (*position_ids.shape, d_model).

    Shape:
        ``forward(x)``: x is (batch, seq, d_model) -> same shape, ``x + encodings(positions)``.
    """

    d_model: int

    def encodings(self, position_ids: PositionsLike) -> torch.Tensor:
        raise NotImplementedError

    def embed(self, x: torch.Tensor, position_ids: PositionsLike) -> torch.Tensor:
        check_tensor("x", x, ndim=3, floating=True)
        pos = as_positions("position_ids", position_ids)
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x has last dimension {x.shape[-1]} but this {self.name} encoding was built "
                f"for d_model={self.d_model}; they must be equal to be added"
            )
        return x + self.encodings(pos if self.accepts_positions else pos.ids).to(x.dtype)

    def forward(self, x: torch.Tensor, position_ids: Optional[torch.Tensor] = None, offset: int = 0) -> torch.Tensor:
        """Add position vectors at ``position_ids`` (batch, seq), or at ``offset + arange(seq)``."""
        check_tensor("x", x, ndim=3, floating=True)
        pos = checked_positions(x.shape[1], position_ids, offset, x.device, batch=x.shape[0])
        return self.embed(x, pos)


class NoPE(PositionScheme):
    """No positional encoding at all ("NoPE").

    Without a causal mask, self-attention is then permutation-equivariant: shuffling the input tokens
    shuffles the outputs the same way, so "the dog bit the man" and "the man bit the dog" give the same
    bag of vectors. A decoder's causal mask breaks that symmetry on its own (token t sees exactly t+1
    tokens), which is why causal NoPE language models can still learn some order (Kazemnejad et al.
    2023, "The Impact of Positional Encoding on Length Generalization in Transformers").
    """

    name = "nope"
    accepts_positions = True
