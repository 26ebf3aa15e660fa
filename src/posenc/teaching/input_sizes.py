"""How long a word vector and a position vector are when they meet at a model's input.

"Don't drown the meaning" is a claim about two lengths: the token embedding a model feeds in, and the
position vector added to it. Both depend on a choice of scale, so the teaching layer (``posenc tour``
and the explorer's knowledge checks) states one and computes it here, from :class:`posenc.TinyLM`'s
own embedding table:

* word vectors: rows of ``TinyLM.tok`` (initialised N(0, 0.02^2), as GPT-2 and BERT do) multiplied by
  ``TinyLM.embed_scale``, which is sqrt(d_model) for the sinusoidal scheme (Vaswani et al. 2017,
  section 3.4), so each entry has standard deviation 0.02 * sqrt(d_model);
* position vectors: rows of :class:`posenc.SinusoidalPositionalEncoding`, whose length is
  sqrt(d_model / 2) at every seat.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_int
from ..model import ModelConfig, TinyLM, local_random
from ..sinusoidal import SinusoidalPositionalEncoding

#: The width the tour and the knowledge checks use: the 2017 Transformer's (and the lesson's) 512.
D_MODEL = 512
#: Rows of the embedding table the lengths are averaged over (TinyLM's byte vocabulary).
VOCAB = 256


def tinylm_word_vectors(d_model: int = D_MODEL, seed: int = 0) -> torch.Tensor:
    """TinyLM's scaled input word vectors, ``tok.weight * embed_scale``: float64, shape (VOCAB, d_model).

    Built by a one-layer sinusoidal :class:`~posenc.TinyLM` whose weights are those of
    ``torch.manual_seed(seed)``, drawn from a generator of its own (:func:`posenc.model.local_random`):
    torch's global random state is neither read nor changed, so concurrent callers agree.
    """
    check_int("d_model", d_model, minimum=2, even=True)
    check_int("seed", seed, minimum=0)
    with local_random(seed):
        model = TinyLM(
            ModelConfig(
                scheme="sinusoidal", vocab_size=VOCAB, d_model=d_model, n_layers=1, n_heads=1, mlp_ratio=1, max_len=8
            )
        )
    return model.tok.weight.detach().to(torch.float64) * model.embed_scale  # (VOCAB, d_model)


def position_word_lengths(d_model: int = D_MODEL, seed: int = 0, positions=(0, 1, 500, 1000)) -> dict:
    """Mean word-vector length, position-vector lengths, and their ratio, at TinyLM's stated scale.

    Returns a dict of plain numbers: ``d_model``, ``embedding_std`` (0.02), ``embed_scale``
    (sqrt(d_model)), ``word_norm`` (mean length of :func:`tinylm_word_vectors`), ``position_norm`` (the
    largest sinusoidal row length over ``positions``; every row has the same length), ``ratio``
    (position over word) and ``raw_ratio`` (seat -> length of the raw-integer code ``seat * ones``
    over the word length, the "bad idea" for comparison).
    """
    words = tinylm_word_vectors(d_model, seed)
    word_norm = float(words.norm(dim=-1).mean())
    pe = SinusoidalPositionalEncoding(d_model, max_len=8)
    rows = pe.encodings(torch.tensor(list(positions))).to(torch.float64)  # (P, d_model)
    position_norm = float(rows.norm(dim=-1).max())
    return {
        "d_model": d_model,
        "embedding_std": 0.02,
        "embed_scale": math.sqrt(d_model),
        "word_norm": word_norm,
        "position_norm": position_norm,
        "ratio": position_norm / word_norm,
        "raw_ratio": {int(p): p * math.sqrt(d_model) / word_norm for p in positions},
    }
