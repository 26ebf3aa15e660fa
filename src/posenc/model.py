"""The reference transformer: one attention block and a small byte-level decoder LM.

The block knows nothing about any particular position scheme. It calls the scheme's three hooks
(:mod:`posenc.schemes`) at their places:

* ``scheme.embed``  on the token vectors, before the first layer (sinusoidal, learned);
* ``scheme.rotate`` on queries and keys inside every layer (RoPE);
* ``scheme.bias``   on the attention logits inside every layer (ALiBi).

The tour, the explorer and the lab all run this one model, so every demonstration exercises the
library's real code.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ._checks import (
    Positions,
    PositionsLike,
    as_positions,
    check_choice,
    check_float,
    check_int,
    check_tensor,
    checked_positions,
    is_compiling,
)
from .factory import ROTARY_SCHEMES, SCHEMES, make_scheme
from .rope.layout import LAYOUTS
from .schemes import PositionScheme


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention that lets a position scheme act on q/k and on the logits.

    Args:
        d_model: model width; must be divisible by ``n_heads``.
        n_heads: number of heads.
        bias: whether the projections have biases.

    Shape:
        ``forward(x, scheme, position_ids)``: x (batch, seq, d_model), position_ids (batch or 1, seq)
        -> (batch, seq, d_model). ``position_ids`` may be :class:`posenc._checks.Positions` checked
        once by the model, which every layer then shares without reading positions back again.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = False):
        super().__init__()
        check_int("d_model", d_model, minimum=1)
        check_int("n_heads", n_heads, minimum=1)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self, x: torch.Tensor, scheme: PositionScheme, position_ids: PositionsLike, causal: bool = True
    ) -> torch.Tensor:
        check_tensor("x", x, ndim=3, floating=True)
        positions = as_positions("position_ids", position_ids)
        B, S, D = x.shape
        if D != self.n_heads * self.head_dim:
            raise ValueError(
                f"x has last dimension {D}, this attention was built for d_model={self.n_heads * self.head_dim}"
            )
        q, k, v = self.qkv(x).split(D, dim=-1)  # 3 x (B, S, D)
        q, k, v = (t.view(B, S, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        given = positions if scheme.accepts_positions else positions.ids
        q, k = scheme.rotate(q, k, given)  # (B, H, S, hd), v untouched
        mask = self._logit_bias(scheme, positions, causal, x.dtype)
        # DeepSeek-style YaRN puts its temperature into the softmax scale instead of the cos/sin tables.
        scale = scheme.softmax_scale_factor / math.sqrt(self.head_dim)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)  # (B, H, S, hd)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        out: torch.Tensor = self.out(y.transpose(1, 2).reshape(B, S, D))
        return out

    @staticmethod
    def _logit_bias(
        scheme: PositionScheme, positions: Positions, causal: bool, dtype: torch.dtype
    ) -> Optional[torch.Tensor]:
        # the same matrix for every layer of a forward: built once, kept with the positions
        key = ("logit_bias", id(scheme), causal, dtype)
        if key not in positions.memo:
            positions.memo[key] = CausalSelfAttention._build_logit_bias(scheme, positions.ids, causal, dtype)
        bias: Optional[torch.Tensor] = positions.memo[key]
        return bias

    @staticmethod
    def _build_logit_bias(
        scheme: PositionScheme, position_ids: torch.Tensor, causal: bool, dtype: torch.dtype
    ) -> Optional[torch.Tensor]:
        # each row wrapped as checked positions: the scheme does not check (read back) them again
        if scheme.accepts_positions:
            rows = [scheme.bias(p, p) for p in (Positions(row, None) for row in position_ids)]
        else:
            rows = [scheme.bias(p, p) for p in position_ids]  # each (H, S, S) or None
        if rows[0] is None:
            return None
        # a scheme gives a bias for every row or for none, so here every row is a tensor
        bias = torch.stack(cast(List[torch.Tensor], rows))  # (B|1, H, S, S)
        if causal:
            # Causality goes by token order, never by position values: with packed documents or
            # padding, a later token may carry a smaller position and must still stay invisible.
            S = bias.shape[-1]
            future = torch.ones(S, S, dtype=torch.bool, device=bias.device).triu(1)
            bias = bias.masked_fill(future, float("-inf"))
        return bias.to(dtype)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int = 4, dropout: float = 0.0, bias: bool = False):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model, bias=bias)
        self.attn = CausalSelfAttention(d_model, n_heads, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, bias=bias)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model, bias=bias),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model, bias=bias),
        )
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, scheme: PositionScheme, position_ids: PositionsLike, causal: bool = True
    ) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), scheme, position_ids, causal))
        out: torch.Tensor = x + self.drop(self.mlp(self.norm2(x)))
        return out


@dataclass
class ModelConfig:
    """Hyper-parameters of :class:`TinyLM`; the position scheme is the only thing the lab varies."""

    scheme: str = "rope"  # one of posenc.factory.SCHEMES
    vocab_size: int = 256  # bytes
    d_model: int = 128  # residual width
    n_layers: int = 4
    n_heads: int = 4  # head_dim = d_model // n_heads
    mlp_ratio: int = 4  # MLP hidden width = mlp_ratio * d_model
    max_len: int = 1024  # rows of a learned table; initial cache size of the others
    rope_base: float = 10000.0  # rope_theta
    rotary_dim: Optional[int] = None  # partial rotary: features rotated per head (None = all)
    rope_layout: str = "half"  # "half" or "interleaved"
    dropout: float = 0.0
    bias: bool = False  # biases in linear layers and LayerNorms
    # Multiplier on the token embeddings before a position vector is added. None: sqrt(d_model) for
    # the fixed sinusoidal table (Vaswani et al. 2017, section 3.4; without it, small-init embeddings
    # are dwarfed by sine values of size ~0.7 and the model barely sees which token it reads), else 1.
    embed_scale: Optional[float] = None

    def validate(self) -> "ModelConfig":
        """Check every field; raise ``TypeError``/``ValueError`` naming the field, value and rule."""
        if not isinstance(self.scheme, str) or self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {list(SCHEMES)}, got {self.scheme!r}")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "mlp_ratio", "max_len"):
            check_int(name, getattr(self, name), minimum=1)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        check_float("rope_base", self.rope_base, greater_than=1.0)
        head_dim = self.d_model // self.n_heads
        if self.scheme in ROTARY_SCHEMES:
            # RoPE (and xPos, FoPE) rotates pairs: the head needs an even width, and rotary_dim fits inside it
            check_int("head_dim (d_model // n_heads)", head_dim, minimum=2, even=True)
        if self.rotary_dim is not None:
            check_int("rotary_dim", self.rotary_dim, minimum=2, maximum=head_dim, even=True)
        check_choice("rope_layout", self.rope_layout, set(LAYOUTS))
        check_float("dropout", self.dropout, minimum=0.0, maximum=1.0)
        if self.embed_scale is not None:
            check_float("embed_scale", self.embed_scale, greater_than=0.0)
        if not isinstance(self.bias, bool):
            raise TypeError(f"bias must be True or False, got {self.bias!r}")
        return self

    def resolved_embed_scale(self) -> float:
        if self.embed_scale is not None:
            return float(self.embed_scale)
        return math.sqrt(self.d_model) if self.scheme == "sinusoidal" else 1.0

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


#: The fields of a :class:`ModelConfig` that :func:`~posenc.factory.make_scheme` takes, by the same names.
SCHEME_FIELDS = ("d_model", "n_heads", "max_len", "rope_base", "rotary_dim", "rope_layout")


def scheme_of(config: ModelConfig) -> PositionScheme:
    """A new position scheme as ``config`` describes it: what :class:`TinyLM` builds when given none."""
    return make_scheme(config.scheme, **{name: getattr(config, name) for name in SCHEME_FIELDS})


class TinyLM(nn.Module):
    """A small decoder-only language model over bytes, with a pluggable position scheme.

    Shape:
        ``forward(idx)``: idx (batch, seq) int64 token ids -> logits (batch, seq, vocab_size).
    """

    def __init__(self, config: ModelConfig, scheme: Optional[PositionScheme] = None):
        super().__init__()
        self.config = config.validate()
        self.tok = nn.Embedding(config.vocab_size, config.d_model)
        self.scheme = scheme if scheme is not None else scheme_of(config)
        self.blocks = nn.ModuleList(
            Block(config.d_model, config.n_heads, config.mlp_ratio, config.dropout, config.bias)
            for _ in range(config.n_layers)
        )
        self.norm = nn.LayerNorm(config.d_model, bias=config.bias)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # weight tying (GPT-2)
        self.embed_scale = config.resolved_embed_scale()
        # The scheme initialises its own parameters (T5's bias table as T5 does), so its modules are
        # skipped; the order of the draws for the rest is the same for every scheme.
        own = {id(m) for m in self.scheme.modules()}
        self.apply(lambda m: None if id(m) in own else self._init(m))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            bias = getattr(module, "bias", None)
            if bias is not None:
                nn.init.zeros_(bias)

    def hidden_states(
        self, idx: torch.Tensor, position_ids: Optional[torch.Tensor] = None, offset: int = 0, causal: bool = True
    ) -> torch.Tensor:
        """Final normalised hidden states, shape (batch, seq, d_model)."""
        check_tensor("idx", idx, ndim=2)
        if idx.is_floating_point() or idx.dtype == torch.bool:
            raise TypeError(f"idx must hold integer token ids, got dtype {idx.dtype}")
        if idx.numel() and not is_compiling():
            low, high = torch.stack(torch.aminmax(idx)).tolist()  # one read-back for both
            if low < 0 or high >= self.config.vocab_size:
                raise ValueError(
                    f"idx must hold token ids in [0, {self.config.vocab_size}) (vocab_size), "
                    f"got values from {low} to {high}"
                )
        # positions are checked here once (at most one read-back), not again in every layer
        pos = checked_positions(idx.shape[1], position_ids, offset, idx.device, batch=idx.shape[0])
        given = pos if self.scheme.accepts_positions else pos.ids
        x = self.scheme.embed(self.tok(idx) * self.embed_scale, given)  # (B, S, D)
        for block in self.blocks:
            x = block(x, self.scheme, pos, causal)
        hidden: torch.Tensor = self.norm(x)
        return hidden

    def forward(self, idx: torch.Tensor, position_ids: Optional[torch.Tensor] = None, offset: int = 0) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.hidden_states(idx, position_ids, offset))  # (B, S, vocab)
        return logits

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class _DrawFrom(TorchDispatchMode):
    """Hands ``generator`` to every random operation that was given none (see :func:`local_random`)."""

    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Tuple[Any, ...] = (), kwargs: Optional[Dict[str, Any]] = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        if torch.Tag.nondeterministic_seeded in func.tags and kwargs.get("generator") is None:
            names = [a.name for a in func._schema.arguments]
            if "generator" not in names:
                # torch.randn(size) is aten.randn.default; its seeded form is the overload randn.generator
                name = func._overloadname
                seeded = getattr(func._overloadpacket, "generator" if name == "default" else f"{name}_generator", None)
                if seeded is not None:
                    func = seeded
                elif _draws_nothing(func, args, kwargs):
                    return func(*args, **kwargs)
                else:
                    raise RuntimeError(
                        f"{func} draws from torch's global generator and has no form that takes a generator; "
                        "local_random cannot keep it off the global random state"
                    )
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)


def _draws_nothing(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """Whether this call of ``func`` has a dropout probability of 0 (as the fused attention kernels
    have outside training): such a call draws no random number."""
    arguments = func._schema.arguments
    for i, argument in enumerate(arguments):
        if argument.name == "dropout_p":
            p = args[i] if i < len(args) else kwargs.get("dropout_p", argument.default_value)
            return bool(p == 0)
    return False


@contextlib.contextmanager
def local_random(seed: Union[int, torch.Generator]) -> Iterator[torch.Generator]:
    """Run a block whose random draws come from a CPU generator of its own, never from torch's global one.

    Inside the block, every random operation that is given no generator (the initialisation of a
    module's weights such as ``nn.Linear``'s ``kaiming_uniform_`` or :class:`TinyLM`'s normal draws,
    ``torch.randn(...)``, dropout masks) draws from ``torch.Generator().manual_seed(seed)``, or from the
    generator given. A CPU generator seeded with ``s`` yields the same stream as ``torch.manual_seed(s)``,
    so the block computes exactly what it computes after a global ``torch.manual_seed(s)``; but the
    global generator is never reseeded, read or advanced, and the redirection holds for this thread
    only (a torch dispatch mode, which is thread-local): other threads drawing or reseeding meanwhile
    neither disturb the block nor are disturbed by it. ``torch.random.fork_rng`` with
    ``torch.manual_seed`` reseeds the one global generator that every thread shares, so two threads
    building "seeded" models at once get each other's draws.

    Every operation inside the block goes through the mode, so keep the block to what draws (building
    a module, a random tensor) and run the rest outside. Draws must be on the CPU, the generator's device.

    Yields:
        the generator the block draws from.

    Raises:
        TypeError: ``seed`` is neither an int nor a ``torch.Generator``.
        ValueError: ``seed`` is negative or at least 2**64.
        RuntimeError: inside the block, an operation that draws at random has no form that takes a generator.

    Example::

        with local_random(0):
            model = TinyLM(config)  # the weights of torch.manual_seed(0); TinyLM(config)
    """
    if isinstance(seed, torch.Generator):
        generator = seed
    elif isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or a torch.Generator, got {seed!r} ({type(seed).__name__})")
    else:
        check_int("seed", seed, minimum=0, maximum=2**64 - 1)
        generator = torch.Generator().manual_seed(seed)
    with _DrawFrom(generator):
        yield generator
