"""posenc: positional encodings for PyTorch transformers.

Every way the field tells a transformer where a token sits, behind one interface
(:class:`posenc.schemes.PositionScheme`): additive sinusoidal tables, learned tables, rotary
embeddings (RoPE) with their context-extension scalings, ALiBi, and none at all (NoPE).

The package from the ground up (``docs/architecture.md`` draws the order):

* core: :mod:`~posenc.schemes` (the one interface), :mod:`~posenc.sinusoidal`, :mod:`~posenc.learned`,
  :mod:`~posenc.alibi`, :mod:`~posenc.t5` (T5's relative bias) and :mod:`posenc.rope` (every RoPE table,
  scaling and kernel, xPos and FoPE), with the shared
  helpers ``_checks`` (input checks) and ``_buffers`` (tables that keep full precision); ``fixtures``
  holds the rope fields of real models' configs;
* model: :mod:`~posenc.model` (the reference attention block and ``TinyLM``) and
  :mod:`~posenc.factory` (any scheme by name);
* interop: :mod:`~posenc.hf` (``config.json`` rope fields), :mod:`posenc.integrations` (the
  transformers patch) and :mod:`~posenc.testing` (tiny random ``transformers`` models for tests);
* :mod:`posenc.runs`: the run files the apps write and read;
* apps: :mod:`posenc.teaching` (the lesson, ``posenc tour``, ``posenc explore``) and
  :mod:`posenc.measuring` (``posenc lab``, ``posenc eval``, ``posenc bench``);
* tools: :mod:`~posenc.cli` (the ``posenc`` command, also run as ``python -m posenc`` through
  ``__main__``), :mod:`~posenc.inspect` (``posenc inspect``) and :mod:`~posenc.conform` (``posenc
  conform``: an engine's RoPE against the exact answer).
"""

from .alibi import ALiBi, alibi_bias, alibi_slopes
from .factory import SCHEMES, make_scheme
from .learned import LearnedPositionalEmbedding, PositionOutOfRangeError
from .model import Block, CausalSelfAttention, ModelConfig, TinyLM
from .rope import RotaryEmbedding, apply_rotary, apply_rotary_at, permute_for_half_split, permute_for_interleaved
from .schemes import NoPE, PositionScheme
from .sinusoidal import SinusoidalPositionalEncoding, sinusoidal_frequencies, sinusoidal_table
from .t5 import T5RelativeBias, t5_buckets

__version__ = "0.1.0"

__all__ = [
    "ALiBi",
    "Block",
    "CausalSelfAttention",
    "LearnedPositionalEmbedding",
    "ModelConfig",
    "NoPE",
    "PositionOutOfRangeError",
    "PositionScheme",
    "RotaryEmbedding",
    "SCHEMES",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "TinyLM",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "apply_rotary_at",
    "make_scheme",
    "permute_for_half_split",
    "permute_for_interleaved",
    "sinusoidal_frequencies",
    "sinusoidal_table",
    "t5_buckets",
]
