"""posenc's exact RoPE tables in the form each ``transformers`` family's code calls them.

:func:`posenc.integrations.transformers.patch` replaces a model's rotary embedding module(s) with
modules from here:

* :class:`PosencRotaryTables`: one set of half-width cos/sin rows for ``position_ids``, from a
  :class:`posenc.RotaryEmbedding`, in the order or form the family returns them (``(cos, sin)``,
  GPT-J's ``(sin, cos)``, or one complex ``freqs_cis``); its arguments for a config come from
  :func:`rotary_kwargs_in_code`, the width the family's own rotary module
  (:func:`rotary_modules_from_config`) rotates.
* :class:`PerLayerTypeTables`: one such module per layer type (Gemma 2/3-style local and global
  attention), called as ``forward(x, position_ids, layer_type)``.
* :class:`StreamTables`: M-RoPE's three position streams, each rotation pair at its own.

:func:`wrap_tables` picks among them for what :mod:`posenc.integrations.discovery` found in the
family's code. Each is also built from a ``transformers`` config alone, as code that rebuilds a
model's rotary module by ``type(module)(config=...)`` expects.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import nn

from .._checks import as_positions, check_positions, is_compiling
from ..rope.embedding import RotaryEmbedding
from ..rope.hfconfig import ConfigFields, rotary_kwargs_from_hf
from ..rope.mrope import select_streams
from ..rope.tables import angles_from_limb_phases, cos_sin_of_angles, limb_phases, rope_cos_sin
from . import discovery
from .discovery import (
    Discovered,
    UnsupportedModelError,
    code_names,
    probe_mrope_streams,
    rebuilt_on_cpu,
    rotary_output_form,
)
from .hints import HINTS


# -- the tables ---------------------------------------------------------------------------------------
class PosencRotaryTables(nn.Module):
    """Stands in for a model's ``*RotaryEmbedding``: exact half-width cos/sin for ``position_ids``.

    Args:
        config: a ``transformers`` config, as the family's own module is built
            (``type(model.model.rotary_emb)(config)`` gives a working module, as code that rebuilds a
            model's rotary module expects; ``sin_first`` and ``complex_output`` then come from the
            family); or the :class:`posenc.RotaryEmbedding` built from the model's config (what
            :func:`~posenc.integrations.transformers.patch` passes).
        sin_first: return ``(sin, cos)`` (GPT-J's order) instead of ``(cos, sin)``.
        complex_output: return one complex tensor ``cos + i sin`` (DeepSeek-V2's and Llama 4's ``freqs_cis``).
        rope: the :class:`posenc.RotaryEmbedding`, by keyword, instead of ``config``.
        device: where to put the tables (the signature of ``transformers``' rotary modules).

    Shape:
        ``forward(x, position_ids)``: x is only used for its device; position_ids (batch, seq) or
        (seq,). Returns two (batch or 1, seq, rotary_dim // 2) tensors in the rope's table dtype
        (float32, or float64 after ``.double()``), whatever the dtype of x.

    Rows. Eager calls ask the rope for rows (:meth:`posenc.RotaryEmbedding.cos_sin`): its cache,
    bounded in memory, and exact rows computed for just the positions asked for past it, under the
    position rules of :mod:`posenc._checks` (integer, ``>= 0``) on every path. Under ``torch.compile``
    nothing is read back: the rows are formed in the graph from the frequencies' limb phases
    (:func:`posenc.rope.tables.angles_from_limb_phases`), float64 angles exact at any int64 position,
    with the same rules as assertions in the graph. LongRoPE picks its long or short set in the graph
    (``torch.where``, as ``transformers`` does); dynamic NTK changes its frequencies with the largest
    length seen, which needs a value on the host: that call leaves the graph, as ``transformers``' does.

    Length-dependent frequencies follow ``transformers``: LongRoPE by each call's length, dynamic NTK
    by the largest length seen so far (back to the trained frequencies when a call is shorter than the
    trained length). ``rope.freeze_frequencies(n)`` fixes one set for every call instead.
    """

    #: the frequency sets' limb phases, (sets, 3, rotary_dim // 2) float64 (see ``_refresh``)
    limb_phases: torch.Tensor

    def __init__(
        self,
        config: Union[RotaryEmbedding, object, None] = None,
        sin_first: bool = False,
        complex_output: bool = False,
        *,
        rope: Optional[RotaryEmbedding] = None,
        device: Union[torch.device, str, None] = None,
    ):
        super().__init__()
        # the first parameter is ``config``, as in the family's own module (transformers' tests find a
        # rotary class by that name); patch passes its RotaryEmbedding there, positionally
        if isinstance(config, RotaryEmbedding):
            if rope is not None:
                raise TypeError("give PosencRotaryTables either a RotaryEmbedding or a config, not both")
            config, rope = None, config
        if rope is None:
            if config is None:
                raise TypeError(
                    "PosencRotaryTables needs rope (a posenc RotaryEmbedding) or config (a transformers config)"
                )
            rope, sin_first, complex_output = _tables_arguments_from_config(config)
        elif config is not None:
            raise TypeError("give PosencRotaryTables either a RotaryEmbedding or a config, not both")
        elif not isinstance(rope, RotaryEmbedding):
            raise TypeError(f"rope must be a posenc RotaryEmbedding, got {type(rope).__name__}")
        self.rope = rope if device is None else rope.to(device=device)
        self.sin_first = sin_first
        self.complex_output = complex_output
        self.__dict__["_largest_length"] = None  # dynamic NTK: the largest length seen (transformers' rule)
        self.register_buffer("limb_phases", torch.zeros(0, dtype=torch.float64), persistent=False)
        self._refresh(self.rope.inv_freq.device)

    def _refresh(self, device: torch.device) -> None:
        """Limb phases of the frequency sets a compiled graph may pick, for the rope's current state."""
        rope = self.rope
        sets = [rope.frequencies()]
        threshold = _threshold(rope)
        if rope.is_dynamic and rope.frozen_seq_len is None and not _keeps_largest(rope) and threshold > 0:
            sets.append(rope.frequencies(threshold + 1))  # LongRoPE's long set
        phases = torch.stack([limb_phases(inv) for inv, _ in sets])  # (sets, 3, F)
        self.limb_phases = phases.to(device)
        self.__dict__["_phase_factors"] = tuple(float(factor) for _, factor in sets)
        self.__dict__["_phases_for"] = rope.frozen_seq_len

    def _apply(self, fn, *args, **kwargs):
        # the phases are float64 whatever the cast (a .half() would round them); the module this one
        # replaced is cast and moved too, so that undo() returns what the same casts give unpatched
        module = super()._apply(fn, *args, **kwargs)
        replaced = self.__dict__.get("_replaced")
        if replaced is not None:
            replaced._apply(fn, *args, **kwargs)
        if self.limb_phases.device.type != "meta":
            self._refresh(self.limb_phases.device)
        else:
            self.limb_phases = self.limb_phases.to(torch.float64)
        return module

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        if position_ids.dim() == 1:
            position_ids = position_ids.unsqueeze(0)
        if is_compiling() and self.__dict__.get("_phases_for") != self.rope.frozen_seq_len:
            _refresh_outside_the_graph(self)  # frozen or unfrozen since the last call
        if is_compiling() and not (_keeps_largest(self.rope) and self.rope.frozen_seq_len is None):
            cos, sin = self._rows_in_graph(position_ids)
        elif is_compiling():
            cos, sin = _rows_outside_the_graph(self, position_ids)
        else:
            cos, sin = self._rows(position_ids)
        if cos.device != x.device:
            cos, sin = cos.to(x.device), sin.to(x.device)
        if self.complex_output:
            return torch.complex(cos, sin)  # DeepSeek-V2's freqs_cis
        return (sin, cos) if self.sin_first else (cos, sin)

    def _rows(self, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Eager: checked once (one read-back), then the rope's rows, or dynamic NTK at the largest length."""
        rope = self.rope
        pos = as_positions("position_ids", position_ids)
        if self.__dict__.get("_phases_for", None) != rope.frozen_seq_len:
            self._refresh(self.limb_phases.device)
        if _keeps_largest(rope) and rope.frozen_seq_len is None and pos.length is not None:
            length = self._largest(pos.length)
            if length > _threshold(rope):
                inv_freq, attention_factor = rope.frequencies(length)
                ids = pos.ids if pos.ids.device.type in ("cpu", "cuda") else pos.ids.cpu()
                cos, sin = rope_cos_sin(ids, inv_freq, attention_factor, rope.table_dtype)
                return cos, sin
        return rope.cos_sin(pos)

    def _largest(self, length: int) -> int:
        """``transformers``' dynamic rule: grow to the largest length seen; reset below the trained one."""
        threshold = _threshold(self.rope)
        largest: int = self.__dict__["_largest_length"] or threshold
        if length > largest:
            largest = length
        if length < threshold < largest:
            largest = threshold
        self.__dict__["_largest_length"] = largest
        return largest

    def _rows_in_graph(self, position_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Traced: no read-back and no branch on values; exact float64 angles from the limb phases."""
        ids = check_positions("position_ids", position_ids)  # the rules, as assertions in the graph
        phases = self.limb_phases.to(ids.device)
        dtype = self.rope.table_dtype
        factors = self.__dict__["_phase_factors"]
        cos, sin = cos_sin_of_angles(angles_from_limb_phases(ids, phases[0]), factors[0], dtype)
        if len(factors) == 2:  # LongRoPE: the long set past the trained length, chosen in the graph
            long_cos, long_sin = cos_sin_of_angles(angles_from_limb_phases(ids, phases[1]), factors[1], dtype)
            past = (ids.max() + 1 > _threshold(self.rope)) if ids.numel() else torch.tensor(False)
            cos, sin = torch.where(past, long_cos, cos), torch.where(past, long_sin, sin)
        return cos, sin

    @property
    def inv_freq(self) -> torch.Tensor:
        """The rope's frequencies, (rotary_dim // 2,), as the family's own module exposes them."""
        return self.rope.inv_freq

    def extra_repr(self) -> str:
        return f"sin_first={self.sin_first}, complex_output={self.complex_output}"


def _keeps_largest(rope: RotaryEmbedding) -> bool:
    """Dynamic NTK keeps the largest length seen in ``transformers`` (its ``dynamic_rope_update``)."""
    return rope.is_dynamic and "dynamic" in getattr(rope.scaling, "rope_type", "")


def _threshold(rope: RotaryEmbedding) -> int:
    """The trained length up to which a length-dependent rope uses its length-free frequencies (0: none)."""
    return int(getattr(rope.scaling, "original_max_position_embeddings", 0) or 0)


@torch.compiler.disable
def _rows_outside_the_graph(tables: PosencRotaryTables, position_ids: torch.Tensor):
    # dynamic NTK's frequencies depend on a value read back: like transformers' module, leave the graph
    return tables._rows(position_ids)


@torch.compiler.disable
def _refresh_outside_the_graph(tables: PosencRotaryTables) -> None:
    tables._refresh(tables.limb_phases.device)


def _tables_arguments_from_config(config) -> Tuple[RotaryEmbedding, bool, bool]:
    """What ``PosencRotaryTables(config=...)`` is built from: the rope as the family's code runs it."""
    if not hasattr(config, "model_type"):
        raise TypeError(f"config must be a transformers config (with a model_type), got {type(config).__name__}")
    kwargs, _ = rotary_kwargs_in_code(config)
    # GPT-J's (sin, cos) from its hint; one complex freqs_cis when the family's rotary functions take
    # that (Llama 4, DeepSeek-V2)
    hint = HINTS.get(config.model_type)
    module = discovery.rotary_causal_lm_module(config.model_type)
    functions = discovery.census_module(module, hint).functions if module is not None else ()
    complex_output = bool(functions) and all(f.arity == "complex" for f in functions)
    return RotaryEmbedding(**kwargs), bool(hint is not None and hint.sin_first), complex_output


def carry_largest_length(tables: PosencRotaryTables, replaced: nn.Module) -> None:
    """Dynamic NTK: start from the largest length the replaced module has seen (its
    ``max_seq_len_cached``), so the next call uses the frequencies the unpatched model would."""
    seen = getattr(replaced, "max_seq_len_cached", None)  # an int, or a 0-d tensor once a call grew it
    if isinstance(seen, torch.Tensor) and seen.numel() == 1 and not seen.is_meta:
        seen = int(seen)
    if _keeps_largest(tables.rope) and isinstance(seen, int) and seen > _threshold(tables.rope):
        tables.__dict__["_largest_length"] = seen


def rotated_width_of(rotary_module: nn.Module, layer_type: Optional[str] = None) -> Optional[int]:
    """Features per head a ``transformers`` rotary module's own code rotates, or ``None`` if unknown.

    Two frequencies' worth of features per ``inv_freq`` entry (the Llama-style modules; for a module
    with one rope dict per layer type, ``<layer_type>_inv_freq``), or the width of GPT-J's sinusoid
    table. Every attention ``forward`` that runs applies exactly that many: the Llama family
    multiplies the whole head by ``cat(freqs, freqs)`` (so the entries must cover the head), the Phi
    family slices the head to the width its module was built for.
    """
    name = "inv_freq" if layer_type is None else f"{layer_type}_inv_freq"
    inv_freq = getattr(rotary_module, name, None)
    if isinstance(inv_freq, torch.Tensor) and inv_freq.dim() == 1:
        return 2 * inv_freq.numel()
    table = getattr(rotary_module, "embed_positions", None)
    if isinstance(table, torch.Tensor) and table.dim() == 2:
        return int(table.shape[-1])
    return None


def rotary_kwargs_in_code(
    config, rotary_modules: Optional[List[nn.Module]] = None, layer_type: Optional[str] = None
) -> Tuple[Dict, Optional[str]]:
    """:class:`posenc.RotaryEmbedding` arguments for ``config`` as the family's code runs it.

    The config's fields say what a rotation *could* mean; the family's rotary module says what its
    code does. They disagree for ``partial_rotary_factor`` with the default rope type in Llama, Qwen 2/3,
    Mistral, Gemma, Gemma 3, gpt-oss and Falcon: their default frequencies are computed over the whole
    head and their attention rotates the whole head, so the factor changes nothing. posenc follows the
    code.

    Args:
        config: the model's ``transformers`` config (or a ``config.json`` dict).
        rotary_modules: the model's own rotary embedding modules; ``None`` builds the family's
            module from ``config`` (on the meta device) when ``transformers`` knows the model type.
        layer_type: for configs with one rope dict per layer type: that type's dict and tables.

    Returns:
        ``(kwargs, note)``: the keyword arguments of :func:`posenc.hf.rotary_kwargs_from_hf` with
        ``rotary_dim`` as the code uses it, and a sentence saying why when it differs from the
        config's (``None`` when they agree, or when the code could not be consulted).

    Raises:
        UnsupportedModelError: the code's width cannot be matched: a scaled rope type whose module
            computes frequencies for a different width than the head it is applied to (the unpatched
            model fails on its first forward).
    """
    # unused keys: accepted, as transformers does
    kwargs = rotary_kwargs_from_hf(config, layer_type=layer_type, strict=False)
    if rotary_modules is None:
        rotary_modules = rotary_modules_from_config(config)
    widths = {rotated_width_of(m, layer_type) for m in rotary_modules}
    width = widths.pop() if len(widths) == 1 else None
    if width is None:
        return kwargs, None
    fields = ConfigFields(config)
    factor = _rope_value(fields, "partial_rotary_factor", layer_type)
    model_type = fields.get("model_type")
    said = f"partial_rotary_factor={factor!r}" if factor is not None else "the config"
    head_dim, config_width = kwargs["head_dim"], kwargs["rotary_dim"]
    whole_head = _default_width(rotary_modules[0], layer_type) == head_dim != config_width
    if width == config_width and not (whole_head and kwargs["scaling"] is not None):
        return kwargs, None
    if kwargs["scaling"] is not None or width > head_dim or width % 2:
        # A family whose default frequencies ignore the factor (Llama and its relatives) also applies
        # its tables to the whole head; scaled types compute them for the factor's width (transformers'
        # shared ROPE_INIT_FUNCTIONS), so that model fails on its first forward.
        raise UnsupportedModelError(
            f"{said} gives a rotated width of {config_width} of {head_dim} features; this {model_type!r} "
            f"model's rotary module computes frequencies for {width} features and its code applies them "
            f"to {'the whole head' if whole_head else 'a head they do not fit'}, so the unpatched model "
            "cannot run either and posenc has nothing to match"
        )
    note = (
        f"{said} would rotate {config_width} of {head_dim} features, but transformers' "
        f"{model_type!r} code computes the default frequencies over {width} features and rotates them "
        f"all; the width here is the code's ({width})"
    )
    return {**kwargs, "rotary_dim": width}, note


def _default_width(rotary_module: nn.Module, layer_type: Optional[str] = None) -> Optional[int]:
    """The width the family's own default frequencies cover for the module's config, or ``None``."""
    compute = getattr(type(rotary_module), "compute_default_rope_parameters", None)
    config = getattr(rotary_module, "config", None)
    if compute is None or config is None:
        return None
    try:
        with torch.device("meta"):
            inv_freq, _ = compute(config) if layer_type is None else compute(config, layer_type=layer_type)
    except Exception:  # a signature or config this version does not take: nothing to consult
        return None
    return 2 * inv_freq.numel() if isinstance(inv_freq, torch.Tensor) and inv_freq.dim() == 1 else None


def _rope_value(fields: ConfigFields, key: str, layer_type: Optional[str] = None):
    for name in ("rope_parameters", "rope_scaling"):
        rope = fields.get(name)
        if layer_type is not None and isinstance(rope, dict):
            rope = rope.get(layer_type)
        if isinstance(rope, dict) and rope.get(key) is not None:
            return rope[key]
    return fields.get(key)


def rotary_modules_from_config(config) -> List[nn.Module]:
    """The family's rotary module(s) built from ``config`` on the meta device; ``[]`` if that fails."""
    try:
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    except ImportError:
        return []
    fields = ConfigFields(config)
    model_type = fields.get("model_type")
    class_name = MODEL_MAPPING_NAMES.get(model_type) if isinstance(model_type, str) else None
    if not isinstance(class_name, str):
        return []
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        # transformers fills in rope dicts in place: it works on a copy, the caller's config stays as given
        if isinstance(config, dict):
            data = {k: v for k, v in copy.deepcopy(config).items() if k != "model_type"}
            config = transformers.AutoConfig.for_model(model_type, **data)
        else:
            config = copy.deepcopy(config)
        model_class = getattr(transformers, class_name)
        module = importlib.import_module(model_class.__module__)
        classes = [
            c
            for name, c in vars(module).items()
            if name.endswith("RotaryEmbedding") and isinstance(c, type) and c.__module__ == module.__name__
        ]
        if len(classes) > 1:  # a text rotary class beside a vision one: the one the model class builds
            built = code_names(model_class.__init__)
            classes = [c for c in classes if c.__name__ in built]
        if len(classes) != 1:
            return []
        with torch.device("meta"):
            return [classes[0](config=config)]
    except Exception:  # a config the family's code does not build from: nothing to consult
        return []
    finally:
        transformers.logging.set_verbosity(verbosity)


# -- the tables in each family's form ------------------------------------------------------------
class PerLayerTypeTables(nn.Module):
    """posenc's tables for a rotary module called as ``forward(x, position_ids, layer_type)``.

    One table module per layer type (Gemma 3: ``"sliding_attention"`` with base 10,000,
    ``"full_attention"`` with base 1,000,000), each exact for its own base and scaling.

    Args:
        config: a ``transformers`` config, as the family's own module is built
            (``type(model.model.rotary_emb)(config=config)`` gives a working module, as code that
            rebuilds a model's rotary module expects): one
            :class:`PosencRotaryTables` per layer type of
            ``config.layer_types`` whose rope dict is not ``None``, in sorted order as Gemma 3's
            module keeps them, each read from ``config.rope_parameters[layer_type]`` alone.
        device: where to put the tables (the signature of ``transformers``' rotary modules).
        tables: ``layer_type -> table module``, by keyword, instead of ``config`` (what
            :func:`wrap_tables` passes).

    ``<layer_type>_inv_freq`` is that layer type's frequencies, (rotary_dim // 2,), as Gemma 3's
    module names its buffers; ``layer_types`` and ``rope_type`` (``layer_type -> rope type``) are
    what the families' modules keep under those names, for model code that loops over them.
    """

    def __init__(
        self,
        config: Optional[Any] = None,
        device: Union[torch.device, str, None] = None,
        *,
        tables: Optional[Dict[str, nn.Module]] = None,
    ):
        super().__init__()
        if (config is None) == (tables is None):
            raise TypeError("PerLayerTypeTables needs config (a transformers config) or tables=, exactly one")
        if tables is None:
            tables = _layer_type_tables_from_config(config, device)
        elif device is not None:
            tables = {k: t.to(device=device) for k, t in tables.items()}
        self.tables = nn.ModuleDict(tables)
        self.layer_types = list(tables)  # the model's code may loop over them (LFM3)
        # ``layer_type -> rope type``, as the families' modules keep it (Ergo loops over its keys)
        self.rope_type = {k: _rope_type_of(t) for k, t in tables.items()}

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: Optional[str] = None):
        if layer_type is None or layer_type not in self.tables:
            raise ValueError(f"layer_type must be one of {sorted(self.tables)}, got {layer_type!r}")
        return self.tables[layer_type](x, position_ids)

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_inv_freq"):
            tables = self.__dict__.get("_modules", {}).get("tables")
            layer_type = name[: -len("_inv_freq")]
            if tables is not None and layer_type in tables:
                return tables[layer_type].inv_freq
        return super().__getattr__(name)


def _rope_type_of(tables: nn.Module) -> str:
    rope = getattr(tables, "rope", None)
    return str(getattr(getattr(rope, "scaling", None), "rope_type", "default"))


def _layer_type_tables_from_config(config: Any, device) -> Dict[str, nn.Module]:
    """``PerLayerTypeTables(config=...)``'s tables: one per layer type with a rope dict, sorted."""
    if not hasattr(config, "model_type"):
        raise TypeError(f"config must be a transformers config (with a model_type), got {type(config).__name__}")
    kinds = [k for k in getattr(config, "layer_types", None) or () if isinstance(k, str)]
    dicts = getattr(config, "rope_parameters", None)
    if not isinstance(dicts, dict):
        raise ValueError(f"config.rope_parameters must hold one rope dict per layer type, got {dicts!r}")
    kinds = sorted(k for k in set(kinds) if dicts.get(k) is not None)
    if not kinds:
        raise ValueError(
            f"config.layer_types {getattr(config, 'layer_types', None)!r} names no layer type with a rope dict "
            f"in config.rope_parameters (keys {sorted(dicts, key=str)})"
        )
    return {
        k: PosencRotaryTables(rope=RotaryEmbedding(**rotary_kwargs_in_code(config, layer_type=k)[0]), device=device)
        for k in kinds
    }


class StreamTables(nn.Module):
    """posenc's tables for an M-RoPE rotary module: three position streams, each pair at its own.

    M-RoPE (Qwen2-VL and later, :mod:`posenc.rope.mrope`) gives each rotation pair one of three
    position streams (temporal, height, width). Called with position ids of shape (3, batch, seq),
    as the model's ``get_rope_index`` makes them for images and videos, this looks all three streams
    up in one call of the exact tables (so a length-dependent scaling sees the largest position of
    any stream, as ``transformers``' module does) and keeps, for each pair, its stream's column
    (:func:`posenc.rope.mrope.select_streams`). Position ids of shape (batch, seq) are text: the three
    streams are equal and M-RoPE is 1-D RoPE. A leading 1, (1, batch, seq), is one stream broadcast to
    all three, as ``transformers``' module broadcasts it.

    Args:
        config: a ``transformers`` config, as the family's own module is built (``transformers``' tests
            rebuild a rotary module by ``type(module)(config=...)``): the tables from it, the streams
            probed from the family's own module built from it on the CPU. Or, positionally, the
            1-D tables (what :func:`wrap_tables` passes).
        streams: with the tables, the stream of each pair, as probed from the model's module
            (:func:`~posenc.integrations.discovery.probe_mrope_streams`), which
            :func:`~posenc.integrations.discovery.check_tables` has compared with posenc's.
        tables: the 1-D tables (:class:`PosencRotaryTables`), by keyword.
    """

    streams: torch.Tensor
    _streams: Tuple[int, ...]

    def __init__(
        self,
        config: Any = None,
        streams: Optional[Tuple[int, ...]] = None,
        *,
        tables: Optional[nn.Module] = None,
    ):
        super().__init__()
        if isinstance(config, nn.Module):  # StreamTables(tables, streams)
            if tables is not None:
                raise TypeError("give StreamTables its tables once, positionally or by keyword, not both")
            config, tables = None, config
        if config is not None:
            if streams is not None or tables is not None:
                raise TypeError("give StreamTables either a config or tables and streams, not both")
            tables, streams = _stream_tables_from_config(config)
        elif tables is None or streams is None:
            raise TypeError("StreamTables needs config (a transformers config) or tables and streams")
        self.tables = tables
        self.__dict__["_streams"] = tuple(int(s) for s in streams)
        self.register_buffer("streams", torch.tensor(streams, dtype=torch.long), persistent=False)

    def _apply(self, fn, *args, **kwargs):
        # the streams are constants: a move off the meta device (``to_empty``, which leaves memory
        # uninitialised, then ``init_weights``) or a cast gives them back as they were built
        module = super()._apply(fn, *args, **kwargs)
        if self.streams.device.type != "meta":
            self.streams = torch.tensor(self._streams, dtype=torch.long, device=self.streams.device)
        return module

    @property
    def inv_freq(self) -> torch.Tensor:
        """The tables' frequencies (``transformers``' modules keep ``inv_freq``)."""
        inv_freq = self.tables.inv_freq
        assert isinstance(inv_freq, torch.Tensor)
        return inv_freq

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, *args):
        if position_ids.dim() != 3:
            return self.tables(x, position_ids, *args)
        if position_ids.shape[0] == 1:  # one stream for all three, broadcast as transformers' module does
            position_ids = position_ids.expand(3, -1, -1)
        if position_ids.shape[0] != 3:
            raise ValueError(
                f"M-RoPE position_ids must have shape (3, batch, seq) (temporal, height, width) or "
                f"(1, batch, seq) (one stream for all three), got {tuple(position_ids.shape)}"
            )
        n, batch, seq = position_ids.shape
        cos, sin = self.tables(x, position_ids.reshape(n * batch, seq), *args)
        cos, sin = cos.reshape(n, batch, seq, -1), sin.reshape(n, batch, seq, -1)
        return select_streams(cos, self.streams), select_streams(sin, self.streams)


def _stream_tables_from_config(config: Any) -> Tuple[nn.Module, Tuple[int, ...]]:
    """``StreamTables(config=...)``'s tables and streams: the streams as the family's own module,
    built from ``config`` on the CPU, reads them."""
    if not hasattr(config, "model_type"):
        raise TypeError(f"config must be a transformers config (with a model_type), got {type(config).__name__}")
    originals = rotary_modules_from_config(config)
    if len(originals) != 1 or getattr(originals[0], "mrope_section", None) is None:
        raise ValueError(
            f"config of model_type {config.model_type!r} does not build one M-RoPE rotary module "
            "(with an mrope_section); StreamTables needs one"
        )
    rotary = rebuilt_on_cpu(originals[0])
    form, _ = rotary_output_form(rotary)
    return PosencRotaryTables(config=config), probe_mrope_streams(rotary, form)


def wrap_tables(
    found: Discovered,
    make: Callable,
    rope,
    ropes: Optional[Dict[str, RotaryEmbedding]] = None,
    original: Optional[nn.Module] = None,
) -> nn.Module:
    """posenc's tables as the model's code calls them, in place of ``original``.

    ``make(rope)`` builds one table module; ``ropes`` (from
    :func:`~posenc.integrations.discovery.layer_type_ropes`) gives one per layer type
    (:class:`PerLayerTypeTables`); M-RoPE models get :class:`StreamTables` around it. The original's
    ``config`` stays readable on the replacement (Granite-SWA keys its tables by
    ``rotary_emb.config.rope_parameters``); :func:`~posenc.integrations.discovery.check_tables` has
    checked that posenc's tables equal the original's.
    """
    tables = PerLayerTypeTables(tables={k: make(r) for k, r in ropes.items()}) if ropes else make(rope)
    if found.mrope:
        tables = StreamTables(tables, found.mrope_streams)
    config = getattr(original, "config", None)
    if config is not None and not hasattr(tables, "config"):
        tables.config = config
    return tables
