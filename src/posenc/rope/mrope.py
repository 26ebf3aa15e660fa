"""M-RoPE: multimodal rotary embedding with three position streams (Qwen2-VL and later).

A token of a vision-language model has three positions instead of one: temporal ``t``, height
``h`` and width ``w``. Text tokens have ``t = h = w`` (the running index); the patches of an image
share one ``t`` and take their row and column as ``h`` and ``w`` (offset by the text before them).
M-RoPE (Wang et al. 2024, "Qwen2-VL", section 2.1) keeps RoPE's frequencies
``theta_i = base ** (-2i / d)`` and gives each rotation pair ``i`` *one* of the three streams: pair
``i`` of a token at ``(t, h, w)`` is rotated by ``p_{s(i)} * theta_i`` with ``s(i)`` in
``{0: t, 1: h, 2: w}``. Which stream a pair reads is set by ``mrope_section = [n_t, n_h, n_w]``
(``n_t + n_h + n_w = d / 2``, the pairs per head) in one of two layouts:

* ``"chunked"`` (Qwen2-VL, Qwen2.5-VL): the first ``n_t`` pairs read ``t``, the next ``n_h`` read
  ``h``, the last ``n_w`` read ``w``. Every spatial stream then gets a contiguous band of frequencies,
  and the temporal stream all the fast ones.
* ``"interleaved"`` (Qwen3-VL, Qwen3.5; ``mrope_interleaved: true`` in their configs): pairs cycle
  ``t, h, w, t, h, w, ...``; pair ``i`` reads ``h`` if ``i % 3 == 1`` and ``i < 3 n_h``, ``w`` if
  ``i % 3 == 2`` and ``i < 3 n_w``, else ``t``. Each stream then spans fast to slow frequencies.

Where the three streams are equal (text), every pair reads the same position and M-RoPE *is* 1-D
RoPE; the streams only matter for image and video tokens. Since each pair is still a rotation by an
angle that is a position times a frequency, the score of a query/key pair depends on the three
position *differences* only.

posenc forms each stream's angles exactly as for 1-D RoPE (float64, reduced modulo ``2*pi``, from
the cached tables of a :class:`~posenc.rope.RotaryEmbedding`, every scaling included) and then
takes, for each pair, the column of its stream: no angle is ever formed in float32.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import torch

from .._checks import (
    PositionsLike,
    as_positions,
    check_choice,
    check_config_int,
    check_int,
    check_position_dtype,
    check_tensor,
)
from ..schemes import PositionScheme
from .apply import apply_rotary
from .embedding import RotaryEmbedding
from .tables import rope_angles

#: how ``mrope_section`` lays the three streams over the rotation pairs
SECTION_LAYOUTS = ("chunked", "interleaved")
#: the rope-dict keys of M-RoPE configs, read by :meth:`MRotaryEmbedding.from_hf_config`
MROPE_HF_KEYS = ("mrope_section", "mrope_interleaved")
#: the streams, in the order of ``mrope_section`` and of the leading dimension of the positions
STREAMS = ("temporal", "height", "width")
#: model types whose code interleaves the sections whatever their config says (Qwen3-VL, Qwen3.5)
INTERLEAVED_SECTION_MODEL_TYPES = frozenset(
    {
        "qwen3_vl",
        "qwen3_vl_text",
        "qwen3_vl_moe",
        "qwen3_vl_moe_text",
        "qwen3_5",
        "qwen3_5_text",
        "qwen3_5_moe",
        "qwen3_5_moe_text",
    }
)


def _checked_sections(mrope_section: object) -> Tuple[int, int, int]:
    if isinstance(mrope_section, (str, bytes)) or not isinstance(mrope_section, Sequence):
        raise TypeError(
            f"mrope_section must be a sequence of 3 ints (temporal, height, width pairs), got {mrope_section!r}"
        )
    if len(mrope_section) != len(STREAMS):
        raise ValueError(
            f"mrope_section must have {len(STREAMS)} entries (temporal, height, width pairs), "
            f"got {len(mrope_section)}: {list(mrope_section)!r}"
        )
    return tuple(  # type: ignore[return-value]
        check_config_int(f"config field mrope_section[{i}] ({STREAMS[i]})", n, minimum=0, whole_float=True)
        for i, n in enumerate(mrope_section)
    )


def mrope_streams(mrope_section: Sequence[int], pairs: int, section_layout: str = "chunked") -> torch.Tensor:
    """Which position stream each rotation pair reads: (pairs,) int64 of 0 (t), 1 (h) or 2 (w).

    Args:
        mrope_section: ``[n_t, n_h, n_w]``, pairs per stream; they must sum to ``pairs``.
        pairs: rotation pairs per head, ``rotary_dim // 2``.
        section_layout: ``"chunked"`` (Qwen2/2.5-VL) or ``"interleaved"`` (Qwen3-VL); see the module notes.

    Raises:
        ValueError: a section count other than 3, a negative entry, sections that do not sum to
            ``pairs``, or (interleaved) a height or width section too long to fit its every third
            pair (``3 n_h - 2 < pairs`` and ``3 n_w - 1 < pairs`` are needed).
    """
    check_choice("section_layout", section_layout, set(SECTION_LAYOUTS))
    n_t, n_h, n_w = _checked_sections(mrope_section)
    pairs = check_config_int("config field pairs", pairs, whole_float=True)
    if n_t + n_h + n_w != pairs:
        raise ValueError(
            f"mrope_section {[n_t, n_h, n_w]} sums to {n_t + n_h + n_w}, but the rotary width has {pairs} pairs "
            f"(rotary_dim // 2); the sections must sum to it"
        )
    if section_layout == "chunked":
        return torch.repeat_interleave(torch.arange(3), torch.tensor([n_t, n_h, n_w]))
    for stream, count, first in ((1, n_h, 1), (2, n_w, 2)):
        if count and first + 3 * (count - 1) >= pairs:
            raise ValueError(
                f"interleaved mrope_section {[n_t, n_h, n_w]}: the {STREAMS[stream]} section of {count} pairs "
                f"needs every third pair up to pair {first + 3 * (count - 1)}, but there are only {pairs} pairs"
            )
    streams = torch.zeros(pairs, dtype=torch.int64)
    streams[1 : 3 * n_h : 3] = 1
    streams[2 : 3 * n_w : 3] = 2
    return streams


def check_stream_positions(name: str, position_ids: object) -> torch.Tensor:
    """``position_ids`` of shape (3, batch, seq): integer, one row of positions per stream (t, h, w)."""
    ids = check_position_dtype(name, check_tensor(name, position_ids))
    if ids.dim() != 3 or ids.shape[0] != len(STREAMS):
        hint = (
            "; for text positions (batch, seq) use position_ids.expand(3, -1, -1), the three streams being equal"
            if ids.dim() == 2
            else ""
        )
        raise ValueError(
            f"{name} must have shape (3, batch, seq): one stream each for temporal, height and width "
            f"positions, got shape {tuple(ids.shape)}{hint}"
        )
    return ids


def select_streams(per_stream: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """Column ``i`` of stream ``streams[i]``: (3, *P, F) -> (*P, F).

    ``per_stream[s, ..., i]`` is the value (an angle, a cos or a sin) of pair ``i`` at stream ``s``'s
    positions; the result keeps, for each pair, its own stream's value.
    """
    index = streams.to(per_stream.device).expand(1, *per_stream.shape[1:])  # (1, *P, F)
    return per_stream.gather(0, index).squeeze(0)


def mrope_angles(position_ids: torch.Tensor, inv_freq: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """M-RoPE angles in float64, reduced to [0, 2*pi): (3, batch, seq) positions -> (batch, seq, F).

    The reference definition: pair ``i`` gets ``position_ids[streams[i]] * inv_freq[i]`` (exact, see
    :func:`posenc.rope.tables.rope_angles`).

    Args:
        position_ids: (3, batch, seq) integer positions, streams t, h, w.
        inv_freq: (F,) frequencies.
        streams: (F,) stream of each pair, from :func:`mrope_streams`.
    """
    ids = check_stream_positions("position_ids", position_ids)
    check_tensor("streams", streams, ndim=1)
    if streams.numel() != inv_freq.numel():
        raise ValueError(f"streams has {streams.numel()} entries but inv_freq has {inv_freq.numel()}")
    return select_streams(rope_angles(ids, inv_freq), streams)


class MRotaryEmbedding(PositionScheme):
    """Multimodal rotary embedding (M-RoPE) with three position streams; see the module notes.

    Args:
        head_dim: features per attention head (even).
        mrope_section: ``[n_t, n_h, n_w]``, rotation pairs per stream, summing to ``rotary_dim // 2``
            (Hugging Face: ``rope_parameters["mrope_section"]``; Qwen2-VL 7B: ``[16, 24, 24]``).
        base: ``rope_theta`` (Qwen2-VL: 1,000,000).
        rotary_dim: rotated features per head (``None``: all); Qwen3.5 rotates a quarter of the head.
        section_layout: ``"chunked"`` (Qwen2-VL, Qwen2.5-VL) or ``"interleaved"`` (Qwen3-VL, Qwen3.5).
        layout: rotation-pair convention, ``"half"`` (every Qwen checkpoint) or ``"interleaved"``.
        scaling: any scaling config of :mod:`posenc.rope.scaling`, applied to the shared frequencies.
        max_position_embeddings: as for :class:`~posenc.rope.RotaryEmbedding`.

    Shape:
        ``forward(q, k, position_ids)``: q (batch, q_heads, seq, head_dim), k (batch, kv_heads, seq,
        head_dim) (or (batch, seq, heads, head_dim) with ``heads_first=False``), position_ids
        (3, batch or 1, seq): temporal, height and width positions. Returns rotated ``(q, k)``.

    Attributes:
        rope: the :class:`~posenc.rope.RotaryEmbedding` whose exact tables every stream reads (its
            cache, scaling, frozen frequencies and dtype handling are M-RoPE's).
        streams: (rotary_dim // 2,) int64 buffer, the stream of each pair (:func:`mrope_streams`).
    """

    name = "mrope"
    streams: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        mrope_section: Sequence[int],
        base: float = 10000.0,
        rotary_dim: Optional[int] = None,
        section_layout: str = "chunked",
        layout: str = "half",
        scaling: Any = None,
        max_position_embeddings: int = 2048,
    ) -> None:
        super().__init__()
        self.rope = RotaryEmbedding(
            head_dim,
            base=base,
            rotary_dim=rotary_dim,
            layout=layout,
            scaling=scaling,
            max_position_embeddings=max_position_embeddings,
        )
        self.section_layout = check_choice("section_layout", section_layout, set(SECTION_LAYOUTS))
        self.mrope_section = list(_checked_sections(mrope_section))
        streams = mrope_streams(self.mrope_section, self.rope.rotary_dim // 2, section_layout)
        self.register_buffer("streams", streams.to(self.rope.inv_freq.device), persistent=False)
        self.softmax_scale_factor = self.rope.softmax_scale_factor

    @property
    def head_dim(self) -> int:
        return self.rope.head_dim

    @property
    def rotary_dim(self) -> int:
        return self.rope.rotary_dim

    @classmethod
    def from_hf_config(cls, config: Any, **kwargs: Any) -> "MRotaryEmbedding":
        """Build from a ``transformers`` config (object or ``config.json`` dict) of an M-RoPE model.

        Reads the usual rope fields (:func:`posenc.rope.hfconfig.rotary_kwargs_from_hf`, the text
        config of a vision-language config) and ``mrope_section`` from the rope dict. The section
        layout is ``"interleaved"`` where the dict says ``mrope_interleaved: true`` or the model type
        is one whose code always interleaves (:data:`INTERLEAVED_SECTION_MODEL_TYPES`), else
        ``"chunked"``. ``kwargs`` override what is read.

        Raises:
            ValueError: no ``mrope_section`` in the rope dict (and none in ``kwargs``), or any field
                the rope readers refuse.
        """
        from .hfconfig import ConfigFields, config_dict, rope_dicts, rotary_kwargs_from_hf

        fields = ConfigFields(config)
        data = dict(fields.data)
        for key in ("rope_parameters", "rope_scaling"):
            value = data.get(key)
            if isinstance(value, dict) and value.get("rope_type", value.get("type")) == "mrope":
                # Qwen2-VL's config.json: {"type": "mrope", ...}, read by transformers as the default type
                data[key] = {**{k: v for k, v in value.items() if k != "type"}, "rope_type": "default"}
        read = rotary_kwargs_from_hf(data, strict=False)  # mrope keys are M-RoPE's, not the scaling's
        rope = rope_dicts(data).get(None, {})
        section = rope.get("mrope_section")
        if section is None and "mrope_section" not in kwargs:
            raise ValueError(
                "the config's rope dict has no mrope_section; M-RoPE needs [n_t, n_h, n_w] "
                "(pass mrope_section= to MRotaryEmbedding.from_hf_config)"
            )
        flag = rope.get("mrope_interleaved")
        if flag is not None and not isinstance(flag, bool):
            raise ValueError(f"config field mrope_interleaved must be true or false, got {flag!r}")
        model_types = {fields.get("model_type"), config_dict(config).get("model_type")}
        interleaved = bool(flag) or bool(model_types & INTERLEAVED_SECTION_MODEL_TYPES)
        read.update(mrope_section=section, section_layout="interleaved" if interleaved else "chunked")
        return cls(**{**read, **kwargs})

    def cos_sin(self, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Half-width cos/sin: (3, batch, seq) positions -> two (batch, seq, rotary_dim // 2) tensors.

        All three streams are looked up in one call of the rope's tables (so a length-dependent
        scaling sees the largest position of any stream, as ``transformers``' does); then each pair
        keeps its own stream's column.
        """
        ids = check_stream_positions("position_ids", position_ids)
        streams, batch, seq = ids.shape
        pos = as_positions("position_ids", ids.reshape(streams * batch, seq))
        cos, sin = self.rope.cos_sin(pos)  # (3 * batch, seq, F)
        cos = cos.reshape(streams, batch, seq, -1)
        sin = sin.reshape(streams, batch, seq, -1)
        return select_streams(cos, self.streams), select_streams(sin, self.streams)

    def rotate(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: PositionsLike
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k, each (batch, heads, seq, head_dim), at (3, batch or 1, seq) positions."""
        if not isinstance(position_ids, torch.Tensor):
            raise TypeError(
                "MRotaryEmbedding.rotate takes position_ids as a (3, batch, seq) tensor, "
                f"got {type(position_ids).__name__}"
            )
        cos, sin = self.cos_sin(position_ids)
        return apply_rotary(q, k, cos, sin, layout=self.rope.layout, rotary_dim=self.rope.rotary_dim)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor, *, heads_first: bool = True
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Rotate q and k at the three position streams; see the class notes for shapes.

        Raises:
            ValueError: position_ids not of shape (3, batch or 1, seq), or not matching q's batch and seq.
        """
        check_tensor("q", q, ndim=4, floating=True)
        check_tensor("k", k, ndim=4, floating=True)
        if not isinstance(heads_first, bool):
            raise TypeError(f"heads_first must be True or False, got {heads_first!r}")
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, S, D) views
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} has head_dim {t.shape[-1]} but this MRotaryEmbedding was built for "
                    f"head_dim={self.head_dim}"
                )
        if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
            raise ValueError(
                f"q and k must agree in batch and seq, got q {tuple(q.shape)} and k {tuple(k.shape)} "
                "(as (batch, heads, seq, head_dim))"
            )
        ids = check_stream_positions("position_ids", position_ids)
        if ids.shape[2] != q.shape[2] or ids.shape[1] not in (1, q.shape[0]):
            raise ValueError(
                f"position_ids has shape {tuple(ids.shape)}; for q of batch {q.shape[0]} and seq {q.shape[2]} "
                f"it must be (3, {q.shape[0]} or 1, {q.shape[2]})"
            )
        q, k = self.rotate(q, k, ids)
        if not heads_first:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return q, k

    def extra_repr(self) -> str:
        return f"mrope_section={self.mrope_section}, section_layout={self.section_layout!r}"


def text_stream_positions(position_ids: Union[torch.Tensor, int], batch: int = 1) -> torch.Tensor:
    """Text positions as M-RoPE streams: (batch, seq) positions, or a length, -> (3, batch, seq).

    The three streams of a text token are equal; with them M-RoPE equals 1-D RoPE.
    """
    if isinstance(position_ids, int):
        position_ids = torch.arange(position_ids).expand(batch, -1)
    ids = check_position_dtype("position_ids", check_tensor("position_ids", position_ids, ndim=2))
    return ids.unsqueeze(0).expand(len(STREAMS), -1, -1)


def image_stream_positions(start: int, grid_t: int, grid_h: int, grid_w: int) -> torch.Tensor:
    """The streams of one image's (or video's) tokens after ``start`` text tokens: (3, t * h * w).

    Qwen2-VL's rule (``get_rope_index`` in ``transformers``): the token of frame ``f``, row ``r`` and
    column ``c`` (after spatial merging, row-major) has ``(t, h, w) = start + (f, r, c)``; the text after
    the image continues at ``start + max(grid_t, grid_h, grid_w)``. (Qwen2.5-VL scales ``f`` by the
    video's seconds per frame; Qwen3-VL gives every frame ``f = 0`` and separates frames by text.)
    """
    for name, value in (("grid_t", grid_t), ("grid_h", grid_h), ("grid_w", grid_w)):
        check_int(name, value, minimum=1)
    check_int("start", start, minimum=0)
    t = torch.arange(grid_t).view(-1, 1, 1).expand(grid_t, grid_h, grid_w)
    h = torch.arange(grid_h).view(1, -1, 1).expand(grid_t, grid_h, grid_w)
    w = torch.arange(grid_w).view(1, 1, -1).expand(grid_t, grid_h, grid_w)
    return start + torch.stack((t, h, w)).reshape(3, -1)
