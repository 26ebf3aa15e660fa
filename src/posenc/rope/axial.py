"""N-dimensional (axial) RoPE for image patches and video frames, and its mixed-frequency variant.

A patch of an image sits at a row and a column, a patch of a video also at a frame: one position
number is not enough. Axial RoPE gives each of the ``N`` axes its own share of the rotation pairs.
With per-axis rotary dimensions ``axes_dim = (d_0, ..., d_{N-1})`` (``sum(axes_dim) = rotary_dim``)
and per-axis bases ``b_a``, the pairs are listed axis after axis, and pair ``i`` of axis ``a`` of a
token at coordinates ``(x_0, ..., x_{N-1})`` is rotated by::

    x_a * theta_{a,i},   theta_{a,i} = b_a ** (-2i / d_a),   0 <= i < d_a / 2

Each pair is still a rotation by (coordinate) x (frequency), so the score of a query and a key depends
on the coordinate *differences* only, axis by axis. With one axis this is 1-D RoPE. Which two
features form a pair is the layout of :mod:`posenc.rope.layout`, applied to the whole list of pairs:
``"half"`` pairs ``(x[i], x[i + r/2])``, ``"interleaved"`` pairs ``(x[2i], x[2i+1])``.

How the models people run spell it (their code read, not copied; the differences are only these):

* **FLUX** (diffusers ``FluxPosEmbed(theta, axes_dim)``, ``get_1d_rotary_pos_embed``): three axes
  ``axes_dim = [16, 56, 56]`` of a 128-wide head, ``theta = 10000`` for all, each axis's table
  concatenated after the previous one, pairs interleaved (``repeat_interleave_real=True``). The
  coordinates are ``ids``: text tokens ``(0, 0, 0)``, image patches ``(0, row, col)``, formed in
  float64 on CPU. Here: ``AxialRotaryEmbedding(128, (16, 56, 56), 10000, layout="interleaved")``.
* **timm / EVA-02** (``RotaryEmbeddingCat``, ``in_pixels=False``): two axes of ``head_dim / 2``
  each, ``temperature`` the base, interleaved pairs (``repeat_interleave(2)``), the grid in ``'ij'``
  order (row, then column) from ``arange`` plus ``grid_offset``. A changed patch grid is handled by
  ``ref_feat_shape``: coordinates times ``ref / feat``, which is the ``"interpolate"`` method of
  :mod:`posenc.rope.axial_scaling` with ``factors = feat / ref``.
* **DINOv3** (``RopePositionEmbedding``): two axes of ``head_dim / 2``, ``base = 100``, pairs
  half-split over the whole head, and *float* coordinates: patch centres ``(i + 0.5) / size`` mapped
  to ``[-1, 1]`` (:func:`normalized_grid_coordinates`), rotated by ``2 * pi * x / period`` with
  ``period = base ** (2i / d_a)``: ``frequency_scale = 2 * pi`` here.

**Mixed frequencies** (RoPE-Mixed; Heo et al. 2024, "Rotary Position Embedding for Vision Transformer",
ECCV): each pair has a frequency *vector* ``f_{h,i}`` in ``R^N``, learned and different per head ``h``,
and turns by ``<x, f_{h,i}>``. A pair can then follow a diagonal of the image, which axial pairs
(frequency vectors along one axis) cannot. The score still depends on ``x_q - x_k`` only.
:class:`MixedRotaryEmbedding` holds the vectors as an ``nn.Parameter`` of shape ``(heads, pairs, N)``
initialised as the paper does for two axes (the axial magnitudes ``base ** (-2i / d_a)`` turned by a
random angle per head; ``base = 10`` in the paper).

Precision: axial angles are formed as for 1-D RoPE (:mod:`posenc.rope.tables`): integer coordinates
exactly at any int64 value, floating ones in float64, cos and sin in float64, cast once at the end.
Floating coordinates are refused past the range where their dtype still holds every integer (256 in
bfloat16, 2048 in float16, ``2**24`` in float32), where neighbouring patches would share a coordinate.
The mixed variant forms its angles in float64 from its (learned) vectors, exact to ~1e-16 relative.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from .._checks import check_choice, check_float, check_int, check_position_dtype, check_tensor, is_compiling
from ..schemes import PositionScheme
from .apply import apply_rotary
from .axial_scaling import axial_frequencies
from .layout import LAYOUTS
from .tables import cos_sin_of_angles, rope_angles, rope_inv_freq

#: how a mixed embedding's frequency vectors start: the paper's random turn per head, or along the axes
MIXED_INITS = ("random", "axial")
#: how :func:`normalized_grid_coordinates` divides each axis (DINOv3's ``normalize_coords``)
NORMALIZATIONS = ("separate", "min", "max")


def checked_axes_dim(axes_dim: object) -> Tuple[int, ...]:
    """``axes_dim`` as a tuple of even ints >= 2, one per axis, else ``ValueError``/``TypeError``."""
    if isinstance(axes_dim, (str, bytes)) or not isinstance(axes_dim, Sequence) or not axes_dim:
        raise TypeError(f"axes_dim must be a non-empty sequence of even ints (one per axis), got {axes_dim!r}")
    out = []
    for a, d in enumerate(axes_dim):
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"axes_dim[{a}] must be an int, got {d!r} ({type(d).__name__})")
        if d < 2 or d % 2:
            raise ValueError(
                f"axes_dim[{a}] must be an even int >= 2 (each axis rotates pairs of features), got {d} "
                f"in axes_dim={list(axes_dim)}"
            )
        out.append(d)
    return tuple(out)


def checked_bases(base: Union[float, Sequence[float]], n_axes: int) -> Tuple[float, ...]:
    """One base > 1 per axis: a number (shared) or a sequence of ``n_axes`` numbers."""
    if isinstance(base, Sequence) and not isinstance(base, (str, bytes)):
        if len(base) != n_axes:
            raise ValueError(f"base must be one number or {n_axes} numbers (one per axis), got {list(base)!r}")
        return tuple(check_float(f"base[{a}]", b, greater_than=1.0) for a, b in enumerate(base))
    return (check_float("base", base, greater_than=1.0),) * n_axes


def exact_integer_limit(dtype: torch.dtype) -> int:
    """The largest ``n`` such that ``dtype`` holds every integer in ``[-n, n]``: ``2 ** (mantissa + 1)``."""
    return round(2 / torch.finfo(dtype).eps)  # eps = 2 ** -mantissa


def check_coordinates(name: str, coords: object, n_axes: int) -> torch.Tensor:
    """``coords`` of shape ``(..., n_axes)``: integer (returned as int64), or floating within the range
    where its dtype holds every integer, finite. Raises ``TypeError``/``ValueError`` naming ``name``."""
    c = check_tensor(name, coords)
    if c.dim() == 0 or c.shape[-1] != n_axes:
        raise ValueError(
            f"{name} must have shape (..., {n_axes}): one coordinate per axis in the last dimension, "
            f"got shape {tuple(c.shape)}"
        )
    if not c.is_floating_point():
        return check_position_dtype(name, c)
    if c.numel() and c.device.type != "meta" and not is_compiling():
        if not bool(torch.isfinite(c).all()):
            raise ValueError(f"{name} must be finite, got a NaN or infinite coordinate")
        limit = exact_integer_limit(c.dtype)
        largest = float(c.abs().max())
        if largest > limit:
            raise ValueError(
                f"{name} holds {largest:g} in {c.dtype}, past {limit} = 2**{int(math.log2(limit))}, beyond which "
                f"{c.dtype} cannot hold every integer (neighbouring coordinates would be equal); "
                "give integer or float64 coordinates"
            )
    return c


def grid_coordinates(sizes: Sequence[int], offset: Union[int, Sequence[int]] = 0) -> torch.Tensor:
    """The integer coordinates of every cell of a grid, row-major (the last axis fastest).

    ``grid_coordinates((2, 3))`` is ``[[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]``: the order of
    patches in a flattened ``(height, width)`` image (timm's ``'ij'``, FLUX's image ids after their
    first axis). ``offset`` (one int, or one per axis) is added to every coordinate.

    Returns:
        int64 tensor of shape ``(prod(sizes), len(sizes))``.
    """
    sizes = checked_sizes("sizes", sizes)
    offsets = (offset,) * len(sizes) if isinstance(offset, int) else tuple(offset)
    if len(offsets) != len(sizes):
        raise ValueError(f"offset must be one int or {len(sizes)} ints (one per axis), got {offset!r}")
    for a, o in enumerate(offsets):
        check_int(f"offset[{a}]", o)
    axes = [torch.arange(s, dtype=torch.int64) + o for s, o in zip(sizes, offsets)]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(sizes))


def normalized_grid_coordinates(sizes: Sequence[int], normalize: str = "separate") -> torch.Tensor:
    """Cell centres of a grid mapped to ``[-1, 1]``, float64, row-major: DINOv3's coordinates.

    Cell ``i`` of an axis of size ``n`` sits at ``2 * (i + 0.5) / m - 1`` with ``m = n``
    (``"separate"``, each axis by its own size), or ``m`` the smallest (``"min"``) or largest
    (``"max"``) size of all axes (DINOv3's ``normalize_coords``).

    Returns:
        float64 tensor of shape ``(prod(sizes), len(sizes))``.
    """
    sizes = checked_sizes("sizes", sizes)
    check_choice("normalize", normalize, set(NORMALIZATIONS))
    denominators = {"separate": sizes, "min": (min(sizes),) * len(sizes), "max": (max(sizes),) * len(sizes)}
    axes = [
        2.0 * (torch.arange(s, dtype=torch.float64) + 0.5) / m - 1.0 for s, m in zip(sizes, denominators[normalize])
    ]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(sizes))


def checked_sizes(name: str, sizes: object) -> Tuple[int, ...]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise TypeError(f"{name} must be a non-empty sequence of ints (one size per axis), got {sizes!r}")
    return tuple(check_int(f"{name}[{a}]", s, minimum=1) for a, s in enumerate(sizes))


def axial_angles(coords: torch.Tensor, axis_freqs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Axial angles in float64, reduced to ``[0, 2*pi)``: ``(..., N)`` coordinates -> ``(..., pairs)``.

    The reference definition: axis ``a``'s pairs turn by ``coords[..., a] * axis_freqs[a]``, exact as
    :func:`posenc.rope.tables.rope_angles` is; the axes' pairs follow one another.
    """
    return torch.cat([rope_angles(coords[..., a], f) for a, f in enumerate(axis_freqs)], dim=-1)


def _table_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _heads_first(q: object, k: object, heads_first: object, head_dim: int, owner: str) -> Tuple[torch.Tensor, ...]:
    q = check_tensor("q", q, ndim=4, floating=True)
    k = check_tensor("k", k, ndim=4, floating=True)
    if not isinstance(heads_first, bool):
        raise TypeError(f"heads_first must be True or False, got {heads_first!r}")
    if not heads_first:
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, S, D) views
    for name, t in (("q", q), ("k", k)):
        if t.shape[-1] != head_dim:
            raise ValueError(f"{name} has head_dim {t.shape[-1]} but this {owner} was built for head_dim={head_dim}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ValueError(
            f"q and k must agree in batch and seq, got q {tuple(q.shape)} and k {tuple(k.shape)} "
            "(as (batch, heads, seq, head_dim))"
        )
    return q, k


def _token_coordinates(coords: object, n_axes: int, batch: int, seq: int) -> torch.Tensor:
    """Coordinates of ``(seq, N)`` or ``(batch or 1, seq, N)`` as ``(batch or 1, seq, N)``."""
    c = check_coordinates("coords", coords, n_axes)
    if c.dim() == 2:
        c = c.unsqueeze(0)
    if c.dim() != 3 or c.shape[1] != seq or c.shape[0] not in (1, batch):
        cells = math.prod(c.shape[:-1])
        hint = (
            f"; to give a grid of coordinates, flatten it row-major: coords.reshape(-1, {n_axes})"
            if c.dim() > 2 and cells == seq
            else ""
        )
        raise ValueError(
            f"coords must have shape ({seq}, {n_axes}) or ({batch} or 1, {seq}, {n_axes}) for q of batch {batch} "
            f"and seq {seq}, got {tuple(c.shape)}{hint}"
        )
    return c


class AxialRotaryEmbedding(PositionScheme):
    """Axial RoPE over ``N`` axes (see the module notes for the formula and the conventions).

    Args:
        head_dim: features per attention head (even).
        axes_dim: rotary features per axis, each even; they must sum to ``rotary_dim``
            (FLUX: ``(16, 56, 56)``; a 2-D ViT: ``(head_dim // 2, head_dim // 2)``).
        base: one base for every axis (FLUX's ``theta``, timm's ``temperature``) or one per axis.
        rotary_dim: rotated features per head (``None``: all); the rest pass through unchanged.
        layout: ``"half"`` or ``"interleaved"`` (FLUX, timm's EVA-02), over the whole list of pairs.
        scaling: ``None`` or a config of :mod:`posenc.rope.axial_scaling` (resolution change).
        frequency_scale: multiplies every frequency; ``2 * pi`` for DINOv3's ``2 * pi * x / period``.

    Shape:
        ``forward(q, k, coords)``: q (batch, q_heads, seq, head_dim), k (batch, kv_heads, seq, head_dim)
        (or (batch, seq, heads, head_dim) with ``heads_first=False``), coords (seq, N) or
        (batch or 1, seq, N), integer or floating. Returns rotated ``(q, k)``.

    Attributes:
        axis_freqs: per-axis float64 frequencies (scaled), axis ``a``'s of shape ``(axes_dim[a] // 2,)``.
    """

    name = "axial_rope"

    def __init__(
        self,
        head_dim: int,
        axes_dim: Sequence[int],
        base: Union[float, Sequence[float]] = 10000.0,
        *,
        rotary_dim: Optional[int] = None,
        layout: str = "half",
        scaling: Any = None,
        frequency_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2, even=True)
        self.rotary_dim = self.head_dim if rotary_dim is None else rotary_dim
        check_int("rotary_dim", self.rotary_dim, minimum=2, maximum=self.head_dim, even=True)
        self.axes_dim = checked_axes_dim(axes_dim)
        if sum(self.axes_dim) != self.rotary_dim:
            raise ValueError(
                f"axes_dim {list(self.axes_dim)} sums to {sum(self.axes_dim)}, but the rotary dimension is "
                f"{self.rotary_dim} ({'rotary_dim' if rotary_dim is not None else 'head_dim'}); the axes must sum to it"
            )
        self.bases = checked_bases(base, len(self.axes_dim))
        self.layout = check_choice("layout", layout, set(LAYOUTS))
        self.frequency_scale = check_float("frequency_scale", frequency_scale, greater_than=0.0)
        self.scaling = scaling
        freqs = axial_frequencies(scaling, self.axes_dim, self.bases)
        self.axis_freqs: Tuple[torch.Tensor, ...] = tuple(f * self.frequency_scale for f in freqs)

    @property
    def n_axes(self) -> int:
        return len(self.axes_dim)

    @property
    def inv_freq(self) -> torch.Tensor:
        """Every pair's frequency, the axes one after another: float64 (rotary_dim // 2,)."""
        return torch.cat(self.axis_freqs)

    @property
    def axis_of_pair(self) -> torch.Tensor:
        """Which axis each pair reads: int64 (rotary_dim // 2,)."""
        return torch.repeat_interleave(torch.arange(self.n_axes), torch.tensor(self.axes_dim) // 2)

    def angles(self, coords: torch.Tensor) -> torch.Tensor:
        """Float64 angles in ``[0, 2*pi)``: ``(..., N)`` coordinates -> ``(..., rotary_dim // 2)``."""
        return axial_angles(check_coordinates("coords", coords, self.n_axes), self.axis_freqs)

    def cos_sin(self, coords: torch.Tensor, dtype: torch.dtype = torch.float32) -> Tuple[torch.Tensor, torch.Tensor]:
        """Half-width cos/sin of :meth:`angles`, taken in float64 and cast once to ``dtype``."""
        return cos_sin_of_angles(self.angles(coords), 1.0, dtype)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor, *, heads_first: bool = True
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k (never values) at their tokens' coordinates; see the class notes for shapes.

        Raises:
            ValueError: coords whose last dimension is not ``N``, whose shape does not fit q, or
                floating coordinates past their dtype's exact range; q/k of another head_dim.
        """
        q, k = _heads_first(q, k, heads_first, self.head_dim, "AxialRotaryEmbedding")
        c = _token_coordinates(coords, self.n_axes, q.shape[0], q.shape[2])  # (B|1, S, N)
        cos, sin = cos_sin_of_angles(axial_angles(c, self.axis_freqs), 1.0, _table_dtype(q))  # (B|1, S, r/2)
        q, k = apply_rotary(q, k, cos.to(q.device), sin.to(q.device), layout=self.layout, rotary_dim=self.rotary_dim)
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return q, k

    def rotate(self, q: torch.Tensor, k: torch.Tensor, position_ids: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """The scheme hook: ``position_ids`` are the tokens' coordinates, (seq, N) or (batch or 1, seq, N)."""
        return self.forward(q, k, position_ids)

    def extra_repr(self) -> str:
        bases = self.bases[0] if len(set(self.bases)) == 1 else list(self.bases)
        return f"head_dim={self.head_dim}, axes_dim={list(self.axes_dim)}, base={bases}, layout={self.layout!r}"


# -- mixed frequencies ----------------------------------------------------------------------------------
def _random_rotation(n: int, generator: Optional[torch.Generator]) -> torch.Tensor:
    """A random rotation of ``R^n`` (det +1), float64: by a uniform angle for ``n = 2`` (the paper's
    draw), Haar-distributed from a QR decomposition otherwise."""
    if n == 1:
        return torch.ones(1, 1, dtype=torch.float64)
    if n == 2:
        phi = float(torch.rand((), generator=generator, dtype=torch.float64)) * 2 * math.pi
        return torch.tensor([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]], dtype=torch.float64)
    gauss = torch.randn(n, n, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(gauss)
    rotation: torch.Tensor = q * torch.sign(torch.diagonal(r))  # a unique, uniformly distributed orthogonal matrix
    if torch.linalg.det(rotation) < 0:
        rotation[:, 0] = -rotation[:, 0]
    return rotation


def mixed_initial_frequencies(
    num_heads: int,
    axes_dim: Sequence[int],
    base: float = 10.0,
    init: str = "random",
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    """RoPE-Mixed's starting frequency vectors: float64 ``(num_heads, pairs, N)``.

    Pair ``i`` of axis block ``a`` (``axes_dim`` as for axial RoPE) starts as ``m_{a,i} * R_h e_a`` with
    ``m_{a,i} = base ** (-2i / d_a)`` and ``R_h`` a rotation per head: the identity for
    ``init="axial"`` (which is then exactly :class:`AxialRotaryEmbedding`), a random one for
    ``"random"``. For two axes and ``axes_dim = (r/2, r/2)`` this is Heo et al.'s initialisation: each
    head's first block points at a random angle ``phi``, its second at ``phi + pi / 2``, with
    magnitudes ``base ** (-4i / r)``.
    """
    check_int("num_heads", num_heads, minimum=1)
    axes = checked_axes_dim(axes_dim)
    check_float("base", base, greater_than=1.0)
    check_choice("init", init, set(MIXED_INITS))
    n = len(axes)
    magnitude = torch.cat([rope_inv_freq(d, base) for d in axes])  # (P,)
    axis = torch.repeat_interleave(torch.arange(n), torch.tensor(axes) // 2)  # (P,)
    heads = []
    for _ in range(num_heads):
        rotation = torch.eye(n, dtype=torch.float64) if init == "axial" else _random_rotation(n, generator)
        heads.append(magnitude.unsqueeze(-1) * rotation[:, axis].T)  # (P, N): m * R e_a
    return torch.stack(heads)


def mixed_angles(coords: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Mixed angles ``<x, f_{h,i}>`` in float64, reduced to ``[0, 2*pi)``, differentiable in ``freqs``.

    Args:
        coords: ``(..., seq, N)`` coordinates.
        freqs: ``(heads, pairs, N)`` frequency vectors.

    Returns:
        float64 ``(..., heads, seq, pairs)``.
    """
    c = coords.to(torch.float64)
    return torch.remainder(torch.einsum("...sn,hpn->...hsp", c, freqs.to(torch.float64)), 2 * math.pi)


class MixedRotaryEmbedding(PositionScheme):
    """RoPE-Mixed: learned frequency vectors per head and pair (Heo et al. 2024; see the module notes).

    Args:
        head_dim: features per head (even).
        num_heads: heads of q and k (each has its own frequencies; k must have as many heads).
        n_axes: coordinate axes (2 for images).
        base: base of the starting magnitudes (the paper: 10).
        axes_dim: how the pairs start, per axis (``None``: ``rotary_dim`` split evenly over the axes).
        rotary_dim: rotated features per head (``None``: all).
        layout: ``"half"`` or ``"interleaved"`` (the paper's code and timm's ``RotaryEmbeddingMixed``).
        init: ``"random"`` (the paper) or ``"axial"`` (starts equal to :class:`AxialRotaryEmbedding`).
        generator: the random source of ``init="random"``.

    Shape:
        ``forward(q, k, coords)``: q and k (batch, num_heads, seq, head_dim), coords (seq, N) or
        (batch or 1, seq, N). Returns rotated ``(q, k)``; gradients reach :attr:`freqs`.

    Attributes:
        freqs: ``nn.Parameter`` of shape ``(num_heads, rotary_dim // 2, n_axes)``, float32, and float32
            still after the module is cast to bfloat16 or float16 (float64 after ``.double()``); a timm
            model keeps one per block: make one module per layer. Exclude it from weight decay as the
            paper does.
    """

    name = "mixed_rope"

    def __init__(
        self,
        head_dim: int,
        num_heads: int,
        n_axes: int = 2,
        base: float = 10.0,
        *,
        axes_dim: Optional[Sequence[int]] = None,
        rotary_dim: Optional[int] = None,
        layout: str = "half",
        init: str = "random",
        generator: Optional[torch.Generator] = None,
    ) -> None:
        super().__init__()
        self.head_dim = check_int("head_dim", head_dim, minimum=2, even=True)
        self.num_heads = check_int("num_heads", num_heads, minimum=1)
        n = check_int("n_axes", n_axes, minimum=1)
        self.rotary_dim = self.head_dim if rotary_dim is None else rotary_dim
        check_int("rotary_dim", self.rotary_dim, minimum=2, maximum=self.head_dim, even=True)
        if axes_dim is None:
            if self.rotary_dim % (2 * n):
                raise ValueError(
                    f"rotary_dim {self.rotary_dim} does not split evenly into {n} axes of even width; give axes_dim"
                )
            axes_dim = (self.rotary_dim // n,) * n
        self.axes_dim = checked_axes_dim(axes_dim)
        if len(self.axes_dim) != n or sum(self.axes_dim) != self.rotary_dim:
            raise ValueError(
                f"axes_dim {list(self.axes_dim)} must have n_axes={n} entries summing to the rotary "
                f"dimension {self.rotary_dim}"
            )
        self.n_axes = n
        self.base = check_float("base", base, greater_than=1.0)
        self.layout = check_choice("layout", layout, set(LAYOUTS))
        start = mixed_initial_frequencies(self.num_heads, self.axes_dim, self.base, init, generator)
        self.freqs = nn.Parameter(start.to(torch.float32))

    # ``nn.Module._apply`` is the one method every cast and move goes through (see posenc._buffers, which
    # overrides it for the same reason): a cast to bfloat16 or float16 would round the learned frequencies
    # to 8 or 11 bits, which turns a patch at coordinate 32 by ~0.1 rad. They keep at least float32.
    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], *args: Any, **kwargs: Any) -> "MixedRotaryEmbedding":
        kept = self.freqs.detach().clone()
        module: MixedRotaryEmbedding = super()._apply(fn, *args, **kwargs)
        if self.freqs.dtype in (torch.float16, torch.bfloat16):
            with torch.no_grad():
                self.freqs.data = kept.to(device=self.freqs.device, dtype=torch.float32)
        return module

    def angles(self, coords: torch.Tensor) -> torch.Tensor:
        """Float64 ``(..., heads, seq, pairs)`` angles of ``(..., seq, N)`` coordinates."""
        return mixed_angles(check_coordinates("coords", coords, self.n_axes), self.freqs)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor, *, heads_first: bool = True
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k by each head's own angles; see the class notes for shapes."""
        q, k = _heads_first(q, k, heads_first, self.head_dim, "MixedRotaryEmbedding")
        batch, heads, seq, dim = q.shape
        for name, t in (("q", q), ("k", k)):
            if t.shape[1] != self.num_heads:
                raise ValueError(
                    f"{name} has {t.shape[1]} heads but this MixedRotaryEmbedding has frequencies for "
                    f"num_heads={self.num_heads} (each head its own; no grouped k heads)"
                )
        c = _token_coordinates(coords, self.n_axes, batch, seq)  # (B|1, S, N)
        angles = mixed_angles(c.to(q.device), self.freqs)  # (B|1, H, S, P)
        cos, sin = cos_sin_of_angles(angles, 1.0, _table_dtype(q))
        pairs = cos.shape[-1]
        # every (batch, head) its own table: heads folded into the batch of the one fused entry
        cos = cos.expand(batch, heads, seq, pairs).reshape(batch * heads, seq, pairs)
        sin = sin.expand(batch, heads, seq, pairs).reshape(batch * heads, seq, pairs)
        q_rot, k_rot = apply_rotary(
            q.reshape(batch * heads, 1, seq, dim),
            k.reshape(batch * heads, 1, seq, dim),
            cos,
            sin,
            layout=self.layout,
            rotary_dim=self.rotary_dim,
        )
        q, k = q_rot.reshape(batch, heads, seq, dim), k_rot.reshape(batch, heads, seq, dim)
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return q, k

    def rotate(self, q: torch.Tensor, k: torch.Tensor, position_ids: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """The scheme hook: ``position_ids`` are the tokens' coordinates, (seq, N) or (batch or 1, seq, N)."""
        return self.forward(q, k, position_ids)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, num_heads={self.num_heads}, axes_dim={list(self.axes_dim)}, "
            f"layout={self.layout!r}"
        )
