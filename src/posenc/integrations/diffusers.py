"""FLUX-style ``diffusers`` transformers on posenc's exact axial RoPE tables, per instance, with undo.

A ``diffusers`` FLUX transformer (``FluxTransformer2DModel``, and every model that holds a
``FluxPosEmbed``) builds its rotary tables once per forward: ``pos_embed(ids)`` with ``ids`` the
``(seq, 3)`` coordinates of the text tokens ``(0, 0, 0)`` and of the image patches ``(0, row, col)``,
``theta = 10000`` and ``axes_dims_rope`` (FLUX.1: ``[16, 56, 56]``) per-axis widths. It returns full-width
``(cos, sin)`` of shape ``(seq, head_dim)``, each pair's value twice (interleaved pairs), float32, which
every attention layer then applies.

:func:`patch` replaces each ``FluxPosEmbed`` of one model instance by a :class:`FluxAxialTables` that
returns the same tables from :class:`posenc.rope.AxialRotaryEmbedding`: whole-number coordinates as
integers (exact at any coordinate), cos and sin taken in float64 and cast once. ``FluxPosEmbed`` reads
its ids through ``ids.float()`` first, so past ``2**24`` two neighbouring coordinates become one; the
posenc tables keep them apart. A resolution change (``scaling=``, a config of
:mod:`posenc.rope.axial_scaling`) changes the frequencies of each axis. The attention layers and their
rotation are left as they are. :meth:`DiffusersPatch.undo` puts the original modules back, which
restores the model exactly.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..rope.axial import AxialRotaryEmbedding


class FluxAxialTables(nn.Module):
    """Stand-in for ``FluxPosEmbed(theta, axes_dim)``: ``forward(ids) -> (cos, sin)``, each
    ``(seq, sum(axes_dim))`` float32 with every pair's value twice, from posenc's exact angles.

    Attributes:
        theta, axes_dim: as ``FluxPosEmbed`` has them.
        rope: the :class:`~posenc.rope.AxialRotaryEmbedding` whose angles the tables hold.
    """

    def __init__(self, theta: float, axes_dim: Sequence[int], scaling: Any = None) -> None:
        super().__init__()
        self.theta = theta
        self.axes_dim = list(axes_dim)
        self.rope = AxialRotaryEmbedding(
            sum(self.axes_dim), self.axes_dim, float(theta), layout="interleaved", scaling=scaling
        )

    def forward(self, ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        coords = ids
        if ids.is_floating_point() and ids.numel() and bool((ids == ids.round()).all()):
            coords = ids.to(torch.int64)  # whole numbers: the exact integer path of the tables
        angles = self.rope.angles(coords)  # (S, P) float64
        cos = angles.cos().repeat_interleave(2, dim=-1).float()
        sin = angles.sin().repeat_interleave(2, dim=-1).float()
        return cos.to(ids.device), sin.to(ids.device)


class DiffusersPatch:
    """What :func:`patch` changed in one model; :meth:`undo` (or leaving a ``with`` block) reverts it.

    Attributes:
        model: the patched model.
        tables: the :class:`FluxAxialTables` installed, one per ``FluxPosEmbed`` replaced.
        replaced: the dotted names of the replaced modules.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._swapped: List[Tuple[nn.Module, str, nn.Module, FluxAxialTables]] = []
        self.active = True

    @property
    def tables(self) -> List[FluxAxialTables]:
        return [new for _, _, _, new in self._swapped]

    @property
    def replaced(self) -> List[str]:
        names = {id(m): n for n, m in self.model.named_modules()}
        return [f"{names.get(id(parent), '?')}.{attr}".lstrip(".") for parent, attr, _, _ in self._swapped]

    def undo(self) -> None:
        """Put the original modules back. Idempotent."""
        if not self.active:
            return
        for parent, attr, original, _ in reversed(self._swapped):
            setattr(parent, attr, original)
        self.model.__dict__.pop("_posenc_diffusers_patch", None)
        self._swapped = []
        self.active = False

    def __enter__(self) -> "DiffusersPatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "active" if self.active else "undone"
        return f"DiffusersPatch({type(self.model).__name__}, {state}, {len(self._swapped)} position embeddings)"


def _flux_pos_embed_class() -> type:
    try:
        from diffusers.models.transformers.transformer_flux import FluxPosEmbed
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("posenc.integrations.diffusers needs diffusers (pip install 'posenc[diffusers]')") from error
    cls: type = FluxPosEmbed
    return cls


def patch(model: nn.Module, *, scaling: Any = None) -> DiffusersPatch:
    """Give every ``FluxPosEmbed`` of ``model`` posenc's exact axial tables (this instance only).

    Args:
        model: a ``diffusers`` model holding ``FluxPosEmbed`` modules (``FluxTransformer2DModel``,
            FLUX ControlNets, ...).
        scaling: ``None`` (the model's own frequencies) or a resolution-change config of
            :mod:`posenc.rope.axial_scaling`, one factor per axis
            (``axial_extension("ntk", (1, 64, 64), (1, 128, 128))``).

    Returns:
        A :class:`DiffusersPatch`; call ``.undo()`` or use it as a context manager.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.
        ValueError: ``model`` holds no ``FluxPosEmbed``, is already patched, or ``scaling`` does not fit
            its axes.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if model.__dict__.get("_posenc_diffusers_patch") is not None:
        raise ValueError(f"this {type(model).__name__} is already patched by posenc; call .undo() on that patch first")
    original_class = _flux_pos_embed_class()
    found: List[Tuple[nn.Module, str, Any]] = [
        (parent, attr, child)
        for parent in model.modules()
        for attr, child in parent.named_children()
        if isinstance(child, original_class)
    ]
    if not found:
        raise ValueError(
            f"{type(model).__name__} holds no diffusers FluxPosEmbed; posenc.integrations.diffusers patches "
            "FLUX-style transformers (FluxTransformer2DModel and the models that use its FluxPosEmbed)"
        )
    handle = DiffusersPatch(model)
    # built before anything is swapped: a scaling that does not fit the axes raises with the model unchanged
    built = [FluxAxialTables(child.theta, child.axes_dim, scaling) for _, _, child in found]
    for (parent, attr, child), tables in zip(found, built):
        setattr(parent, attr, tables)
        handle._swapped.append((parent, attr, child, tables))
    model.__dict__["_posenc_diffusers_patch"] = handle
    return handle


def patched(model: nn.Module) -> Optional[DiffusersPatch]:
    """The active :class:`DiffusersPatch` of ``model``, or ``None``."""
    handle = model.__dict__.get("_posenc_diffusers_patch")
    return handle if isinstance(handle, DiffusersPatch) else None
