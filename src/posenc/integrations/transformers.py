"""posenc inside a Hugging Face ``transformers`` model, in one call.

:func:`patch` changes one model instance in two places:

1. **Its rotary embedding module(s)** (``model.model.rotary_emb`` and the like) are replaced by a
   :class:`PosencRotaryTables` that wraps a :class:`posenc.RotaryEmbedding` built from the model's
   config. Per forward it returns the half-width cos/sin rows for the call's ``position_ids``:
   angles formed and reduced in float64, cos/sin taken in float64 and rounded once, to float32 (to
   float64 if the model runs in float64). They are *not* cast to the model's dtype: a bf16 model gets
   float32 tables, and the rotation rounds its result to bf16 once.
2. **The rotary application in each attention layer.** The attention class's ``forward`` calls a
   module-level function (``apply_rotary_pos_emb`` and relatives). The patched layer gets its own
   ``forward``: the same code object as the class's, run with a copy of the module's globals in which
   that name points to posenc's :func:`posenc.apply_rotary` (the fused kernel on CPU and CUDA,
   rotating in place when no autograd graph is being recorded: q and k are fresh projections there).
   Decorators around ``forward`` are rebuilt around the new function, so they behave as before.

Scope: **one instance**. The class, the modeling module and every other instance of the same class are
untouched (nothing global is monkey-patched, unlike Liger-Kernel's ``apply_liger_kernel_to_*``).
:meth:`PosencPatch.undo` puts the original rotary modules back and deletes the per-instance
``forward`` attributes, which restores the model exactly; ``with patch(model): ...`` undoes on exit.

What keeps working: ``generate()`` with the KV cache (cached keys were rotated by the patched layers
too), left padding and packed sequences (``position_ids`` are honoured row by row), eager and SDPA
attention, ``torch.compile`` (the table lookup reads ``max(position_ids)`` and costs one graph break;
the rotation itself is traced as plain torch ops) and autograd (out of place, with posenc's backward).

Frequencies that depend on the length (``dynamic`` NTK, LongRoPE) follow the length of each call, as
``transformers`` does; ``freeze_frequencies=N`` uses the frequencies for length ``N`` for every call
instead, so keys in a KV cache and later queries agree (see ``docs/transformers.md``).
"""

from __future__ import annotations

import copy
import functools
import importlib
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch
from torch import nn

from ..rope.apply import apply_rotary
from ..rope.embedding import RotaryEmbedding
from ..rope.hfconfig import ConfigFields, rotary_kwargs_from_hf, unused_rope_keys
from ..rope.layout import LAYOUTS
from ..rope.tables import rope_cos_sin
from . import discovery
from .discovery import UnsupportedModelError


@dataclass(frozen=True)
class Architecture:
    """How posenc enters one ``transformers`` model family.

    Attributes:
        module: the modeling module, ``transformers.models.<family>.modeling_<family>``.
        functions: global names the attention ``forward`` calls to rotate, each with the layout it
            implements (DeepSeek-V3 has one of each and picks by ``config.rope_interleave``).
        style: ``"pair"`` for ``f(q, k, cos, sin)`` returning both; ``"single"`` for GPT-J's
            ``f(x, sin, cos)`` on one (batch, seq, heads, rotary_dim) tensor; ``"complex"`` for
            DeepSeek-V2's ``f(q, k, freqs_cis)``, whose rotary module returns ``cos + i sin``.
        sin_first: the rotary module returns ``(sin, cos)`` rather than ``(cos, sin)`` (GPT-J).
    """

    module: str
    functions: Tuple[Tuple[str, str], ...]
    style: str = "pair"
    sin_first: bool = False


_HALF = (("apply_rotary_pos_emb", "half"),)

#: ``config.model_type`` -> how to patch it
ARCHITECTURES: Dict[str, Architecture] = {
    "llama": Architecture("transformers.models.llama.modeling_llama", _HALF),
    "mistral": Architecture("transformers.models.mistral.modeling_mistral", _HALF),
    "qwen2": Architecture("transformers.models.qwen2.modeling_qwen2", _HALF),
    "qwen3": Architecture("transformers.models.qwen3.modeling_qwen3", _HALF),
    "phi3": Architecture("transformers.models.phi3.modeling_phi3", _HALF),
    "phi": Architecture("transformers.models.phi.modeling_phi", _HALF),
    "gemma": Architecture("transformers.models.gemma.modeling_gemma", _HALF),
    "gpt_neox": Architecture("transformers.models.gpt_neox.modeling_gpt_neox", _HALF),
    "gpt_oss": Architecture("transformers.models.gpt_oss.modeling_gpt_oss", _HALF),
    "falcon": Architecture("transformers.models.falcon.modeling_falcon", _HALF),
    "deepseek_v3": Architecture(
        "transformers.models.deepseek_v3.modeling_deepseek_v3",
        (("apply_rotary_pos_emb", "half"), ("apply_rotary_pos_emb_interleave", "interleaved")),
    ),
    "deepseek_v2": Architecture(
        "transformers.models.deepseek_v2.modeling_deepseek_v2", (("apply_rotary_emb", "interleaved"),), style="complex"
    ),
    "gptj": Architecture(
        "transformers.models.gptj.modeling_gptj",
        (("apply_rotary_pos_emb", "interleaved"),),
        style="single",
        sin_first=True,
    ),
}


def supported_model_types() -> List[str]:
    """The ``config.model_type`` values :func:`patch` accepts, sorted."""
    return sorted(ARCHITECTURES)


# -- the tables ---------------------------------------------------------------------------------------
class PosencRotaryTables(nn.Module):
    """Stands in for a model's ``*RotaryEmbedding``: exact half-width cos/sin for ``position_ids``.

    Args:
        rope: the :class:`posenc.RotaryEmbedding` built from the model's config.
        sin_first: return ``(sin, cos)`` (GPT-J's order) instead of ``(cos, sin)``.
        complex_output: return one complex tensor ``cos + i sin`` (DeepSeek-V2's ``freqs_cis``).

    Shape:
        ``forward(x, position_ids)``: x is only used for its device; position_ids (batch, seq) or
        (seq,). Returns two (batch or 1, seq, rotary_dim // 2) tensors in the rope's table dtype
        (float32, or float64 after ``.double()``), whatever the dtype of x.
    """

    def __init__(self, rope: RotaryEmbedding, sin_first: bool = False, complex_output: bool = False):
        super().__init__()
        self.rope = rope
        self.sin_first = sin_first
        self.complex_output = complex_output

    #: positions below this are served from the module's growing cache; rows past it are computed
    #: exactly for just the positions asked for (a 1M-position prompt must not build a 1M-row table)
    CACHE_LIMIT = 1 << 15

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        if position_ids.dim() == 1:
            position_ids = position_ids.unsqueeze(0)
        rope = self.rope
        length = int(position_ids.max()) + 1 if position_ids.numel() else 0  # one host read per forward
        if length <= max(rope.cached_length, min(rope.max_position_embeddings, self.CACHE_LIMIT)):
            cos, sin = rope.cos_sin(position_ids)  # (B, S, r/2), float64-derived
        else:
            inv_freq, attention_factor = rope.frequencies(length)  # float64, for this call's length
            cos, sin = rope_cos_sin(position_ids.to("cpu"), inv_freq, attention_factor, rope.table_dtype)
        if cos.device != x.device:
            cos, sin = cos.to(x.device), sin.to(x.device)
        if self.complex_output:
            return torch.complex(cos, sin)  # DeepSeek-V2's freqs_cis
        return (sin, cos) if self.sin_first else (cos, sin)


# -- the rotation -------------------------------------------------------------------------------------
def _in_place_is_safe(*tensors: torch.Tensor) -> bool:
    """In place only outside autograd and compilation: q and k are then fresh projection outputs.

    With a graph being recorded an op before the rotation may have saved q or k (or a view of the
    same projection) for its backward; under ``torch.compile`` functional code traces best.
    """
    if torch.compiler.is_compiling():
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


def _pair_function(layout: str) -> Callable:
    def posenc_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        """(B, H, S, D) q and k (or (B, S, H, D) with unsqueeze_dim=2), half-width cos/sin (B|1, S, r/2)."""
        if unsqueeze_dim == 2:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        elif unsqueeze_dim != 1:
            raise ValueError(f"unsqueeze_dim must be 1 (heads first) or 2 (seq first), got {unsqueeze_dim!r}")
        q, k = apply_rotary(
            q, k, cos, sin, layout=layout, rotary_dim=2 * cos.shape[-1], inplace=_in_place_is_safe(q, k)
        )
        if unsqueeze_dim == 2:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return q, k

    return posenc_apply_rotary_pos_emb


def _single_function(layout: str) -> Callable:
    def posenc_apply_rotary_pos_emb(x, sin, cos):
        """GPT-J's form: x (B, S, H, rotary_dim), half-width sin/cos (B|1, S, r/2)."""
        heads_first = x.transpose(1, 2)  # (B, H, S, r) view
        out, _ = apply_rotary(
            heads_first,
            heads_first[:, :0],
            cos,
            sin,
            layout=layout,
            rotary_dim=2 * cos.shape[-1],
            inplace=_in_place_is_safe(x),
        )
        return out.transpose(1, 2)

    return posenc_apply_rotary_pos_emb


def _complex_function(layout: str) -> Callable:
    def posenc_apply_rotary_emb(xq, xk, freqs_cis):
        """DeepSeek-V2's form: xq, xk (B, H, S, r) in interleaved pairs; freqs_cis (B|1, S, r/2) complex."""
        freqs_cis = freqs_cis.to(xq.device)
        cos, sin = freqs_cis.real, freqs_cis.imag
        return apply_rotary(
            xq, xk, cos, sin, layout=layout, rotary_dim=2 * cos.shape[-1], inplace=_in_place_is_safe(xq, xk)
        )

    return posenc_apply_rotary_emb


def instance_function_override(fn: Callable, overrides: Mapping[str, object]) -> Callable:
    """A copy of ``fn`` whose global name lookups see ``overrides`` first.

    ``fn`` may be wrapped by decorators that keep the wrapped function in a closure cell and in
    ``__wrapped__`` (``functools.wraps``); each wrapper is rebuilt around the new inner function.
    The module's globals are copied once, here: later changes to the module are not seen.
    """
    inner = getattr(fn, "__wrapped__", None)
    if inner is None:
        namespace = dict(fn.__globals__)
        namespace.update(overrides)
        # Without ``__name__`` torch.compile guards on this dict itself; with it, Dynamo would look the
        # names up in the original module and guard on the class-wide functions instead.
        namespace.pop("__name__", None)
        new = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
        new.__kwdefaults__ = fn.__kwdefaults__
        new.__dict__.update(fn.__dict__)
        new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        return new
    new_inner = instance_function_override(inner, overrides)
    cells = fn.__closure__ or ()
    if not any(_cell_holds(c, inner) for c in cells):
        raise UnsupportedModelError(
            f"cannot rebuild the decorator around {fn.__qualname__}: its wrapped function is not held in a closure cell"
        )
    closure = tuple(types.CellType(new_inner) if _cell_holds(c, inner) else c for c in cells)
    new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    functools.update_wrapper(new, new_inner)
    return new


def _cell_holds(cell, value) -> bool:
    try:
        return cell.cell_contents is value
    except ValueError:  # an empty cell
        return False


def _code_names(fn: Callable) -> set:
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return set(getattr(getattr(fn, "__code__", None), "co_names", ()))


def global_seen_by(fn: Callable, name: str) -> Any:
    """What ``fn`` (through its ``functools.wraps`` decorators) calls under the global ``name``: the
    module's function, or the override an :func:`instance_function_override` copy holds instead."""
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn.__globals__[name]


# -- the patch ----------------------------------------------------------------------------------------
class PosencPatch:
    """What :func:`patch` changed in one model; :meth:`undo` (or leaving a ``with`` block) reverts it.

    Attributes:
        model: the patched model.
        rope: the :class:`posenc.RotaryEmbedding` that all replaced rotary modules share.
        layout: the pair layout used for the rotation (``None``: each function's own, see
            :data:`ARCHITECTURES`).
        rotary_modules: names of the replaced rotary embedding modules.
        attention_modules: names of the attention modules given a posenc ``forward``.
    """

    def __init__(self, model: nn.Module, rope: RotaryEmbedding, layout: Optional[str]):
        self.model = model
        self.rope = rope
        self.layout = layout
        self._rotary: List[Tuple[nn.Module, str, nn.Module]] = []  # (parent, attribute, original)
        self._attention: List[Tuple[nn.Module, Callable]] = []  # (module, installed forward)
        self.active = True

    @property
    def rotary_modules(self) -> List[str]:
        return [self._name_of(parent, attr) for parent, attr, _ in self._rotary]

    @property
    def attention_modules(self) -> List[str]:
        return [self._name_of(module) for module, _ in self._attention]

    def _name_of(self, module: nn.Module, attr: Optional[str] = None) -> str:
        for name, m in self.model.named_modules():
            if m is module:
                return f"{name}.{attr}" if attr and name else (attr or name)
        return attr or "?"

    def freeze_frequencies(self, seq_len: int) -> "PosencPatch":
        """Use the frequencies for length ``seq_len`` in every call (dynamic NTK and LongRoPE only)."""
        _check_freezable(self.rope)
        self.rope.freeze_frequencies(seq_len)
        return self

    def unfreeze_frequencies(self) -> "PosencPatch":
        """Back to choosing frequencies by each call's length, as ``transformers`` does."""
        self.rope.unfreeze_frequencies()
        return self

    def undo(self) -> None:
        """Put back the original rotary modules and class ``forward`` methods. Idempotent."""
        if not self.active:
            return
        for module, installed in self._attention:
            if module.__dict__.get("forward") is installed:
                del module.forward
        for parent, attr, original in self._rotary:
            setattr(parent, attr, original)
        self.model.__dict__.pop("_posenc_patch", None)
        self._attention, self._rotary = [], []
        self.active = False

    def __enter__(self) -> "PosencPatch":
        return self

    def __exit__(self, *exc) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "active" if self.active else "undone"
        return (
            f"PosencPatch({type(self.model).__name__}, {state}, {len(self._attention)} attention layers, "
            f"rope={self.rope.extra_repr()})"
        )


def _check_freezable(rope: RotaryEmbedding) -> None:
    if not rope.is_dynamic:
        rope_type = getattr(rope.scaling, "rope_type", "default")
        raise ValueError(
            f"freeze_frequencies applies to the length-dependent rope types 'dynamic' and "
            f"'longrope'; this model's rope type is {rope_type!r}, whose frequencies never change"
        )


def _config_of(model: nn.Module):
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "model_type"):
        raise TypeError(f"model must be a transformers PreTrainedModel (with a .config), got {type(model).__name__}")
    return config


def patch(model: nn.Module, *, freeze_frequencies: Optional[int] = None, layout: Optional[str] = None) -> PosencPatch:
    """Make one ``transformers`` model use posenc's exact tables and fused rotation.

    Args:
        model: a ``transformers`` model whose attention calls a rotary function (listed in
            :data:`ARCHITECTURES`, or found from the model's code), e.g. ``LlamaForCausalLM`` or
            ``LlamaModel``, on any device, in any dtype.
        freeze_frequencies: for ``dynamic`` NTK and LongRoPE configs only: use the frequencies for
            this length (e.g. prompt + new tokens) in every call, so cached keys and new queries are
            rotated alike. ``None`` (default) follows each call's length as ``transformers`` does.
        layout: force the pair layout (``"half"`` or ``"interleaved"``) instead of the one the
            architecture's code implements; for checkpoints whose q/k rows were permuted. A wrong
            value gives a different (wrong) model, which the tests use as a negative control.

    Returns:
        A :class:`PosencPatch`; call ``.undo()`` or use it as a context manager.

    Raises:
        UnsupportedModelError: the model's rotary code matches nothing posenc can stand in for (the
            message says what; families outside :data:`ARCHITECTURES` are read from their own code by
            :mod:`posenc.integrations.discovery`), or an ALiBi configuration of a family that is
            listed. Nothing in the model is changed then.
        ValueError: the model is already patched, or ``freeze_frequencies`` is given for a rope type
            whose frequencies do not depend on the length.
    """
    config = _config_of(model)
    model_type = config.model_type
    if model_type == "falcon" and getattr(config, "alibi", False):
        raise UnsupportedModelError(
            "this Falcon config uses ALiBi (alibi=True), not rotary embeddings; "
            "patch supports rotary Falcon models only"
        )
    if model.__dict__.get("_posenc_patch") is not None:
        raise ValueError(
            f"this {type(model).__name__} is already patched by posenc; call .undo() on the existing patch first"
        )
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)} or None, got {layout!r}")
    arch, found = ARCHITECTURES.get(model_type), None
    if arch is None:  # found from the model's own code, or refused with the reason, before any change
        found = discovery.discover(model)
        arch = Architecture(found.module, tuple((f.name, f.layout) for f in found.functions))
    module = importlib.import_module(arch.module)

    rotary_class_names = {n for n in dir(module) if n.endswith("RotaryEmbedding")}
    rotary_slots = [
        (parent, attr, child)
        for parent in model.modules()
        for attr, child in parent.named_children()
        if type(child).__name__ in rotary_class_names and type(child).__module__ == module.__name__
    ]
    names = {name for name, _ in arch.functions}
    attention = [
        m for m in model.modules() if type(m).__module__ == module.__name__ and names & _code_names(type(m).forward)
    ]
    if not rotary_slots or not attention:
        raise UnsupportedModelError(
            f"found {len(rotary_slots)} rotary embedding modules and {len(attention)} attention modules "
            f"calling {sorted(names)} in this {type(model).__name__}; this transformers version "
            f"({_transformers_version()}) lays out {model_type!r} differently from what posenc expects"
        )

    rope = _rope_for(model, config, [child for _, _, child in rotary_slots])
    if found is not None:
        discovery.check_tables(model, rope, found)
    if freeze_frequencies is not None:
        _check_freezable(rope)
        rope.freeze_frequencies(freeze_frequencies)

    handle = PosencPatch(model, rope, layout)
    make = {"pair": _pair_function, "single": _single_function, "complex": _complex_function}[arch.style]
    overrides = {name: make(layout or own) for name, own in arch.functions}
    if found is not None:
        overrides = discovery.stand_ins(found, layout)
    rebuilt: Dict[Callable, Callable] = {}
    try:
        for m in attention:
            original = type(m).forward
            if original not in rebuilt:
                rebuilt[original] = instance_function_override(original, overrides)
            installed = types.MethodType(rebuilt[original], m)
            m.forward = installed
            handle._attention.append((m, installed))
        for parent, attr, child in rotary_slots:
            tables = PosencRotaryTables(rope, sin_first=arch.sin_first, complex_output=arch.style == "complex")
            setattr(parent, attr, tables if found is None else discovery.wrap_tables(found, tables))
            handle._rotary.append((parent, attr, child))
    except Exception:
        handle.undo()
        raise
    model.__dict__["_posenc_patch"] = handle
    return handle


def rotated_width_of(rotary_module: nn.Module) -> Optional[int]:
    """Features per head a ``transformers`` rotary module's own code rotates, or ``None`` if unknown.

    Two frequencies' worth of features per ``inv_freq`` entry (the Llama-style modules), or the width
    of GPT-J's sinusoid table. Every attention ``forward`` that runs applies exactly that many: the
    Llama family multiplies the whole head by ``cat(freqs, freqs)`` (so the entries must cover the
    head), the Phi family slices the head to the width its module was built for.
    """
    inv_freq = getattr(rotary_module, "inv_freq", None)
    if isinstance(inv_freq, torch.Tensor) and inv_freq.dim() == 1:
        return 2 * inv_freq.numel()
    table = getattr(rotary_module, "embed_positions", None)
    if isinstance(table, torch.Tensor) and table.dim() == 2:
        return int(table.shape[-1])
    return None


def rotary_kwargs_in_code(config, rotary_modules: Optional[List[nn.Module]] = None) -> Tuple[Dict, Optional[str]]:
    """:class:`posenc.RotaryEmbedding` arguments for ``config`` as the family's code runs it.

    The config's fields say what a rotation *could* mean; the family's rotary module says what its
    code does. They disagree for ``partial_rotary_factor`` with the default rope type in Llama, Qwen 2/3,
    Mistral, Gemma, gpt-oss and Falcon: their default frequencies are computed over the whole head
    and their attention rotates the whole head, so the factor changes nothing. posenc follows the code.

    Args:
        config: the model's ``transformers`` config (or a ``config.json`` dict).
        rotary_modules: the model's own rotary embedding modules; ``None`` builds the family's
            module from ``config`` (on the meta device) when ``transformers`` knows the model type.

    Returns:
        ``(kwargs, note)``: the keyword arguments of :func:`posenc.hf.rotary_kwargs_from_hf` with
        ``rotary_dim`` as the code uses it, and a sentence saying why when it differs from the
        config's (``None`` when they agree, or when the code could not be consulted).

    Raises:
        UnsupportedModelError: the code's width cannot be matched: a scaled rope type whose module
            computes frequencies for a different width than the head it is applied to (the unpatched
            model fails on its first forward).
    """
    kwargs = rotary_kwargs_from_hf(config, strict=False)  # unused keys: accepted, as transformers does
    if rotary_modules is None:
        rotary_modules = _rotary_modules_from_config(config)
    widths = {rotated_width_of(m) for m in rotary_modules}
    width = widths.pop() if len(widths) == 1 else None
    if width is None:
        return kwargs, None
    fields = ConfigFields(config)
    factor = _rope_value(fields, "partial_rotary_factor")
    model_type = fields.get("model_type")
    said = f"partial_rotary_factor={factor!r}" if factor is not None else "the config"
    head_dim, config_width = kwargs["head_dim"], kwargs["rotary_dim"]
    whole_head = _default_width(rotary_modules[0]) == head_dim != config_width
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


def _default_width(rotary_module: nn.Module) -> Optional[int]:
    """The width the family's own default frequencies cover for the module's config, or ``None``."""
    compute = getattr(type(rotary_module), "compute_default_rope_parameters", None)
    config = getattr(rotary_module, "config", None)
    if compute is None or config is None:
        return None
    try:
        with torch.device("meta"):
            inv_freq, _ = compute(config)
    except Exception:  # a signature or config this version does not take: nothing to consult
        return None
    return 2 * inv_freq.numel() if isinstance(inv_freq, torch.Tensor) and inv_freq.dim() == 1 else None


def _rope_value(fields: ConfigFields, key: str):
    for name in ("rope_parameters", "rope_scaling"):
        rope = fields.get(name)
        if isinstance(rope, dict) and rope.get(key) is not None:
            return rope[key]
    return fields.get(key)


def _rotary_modules_from_config(config) -> List[nn.Module]:
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
        module = importlib.import_module(getattr(transformers, class_name).__module__)
        classes = [
            c
            for name, c in vars(module).items()
            if name.endswith("RotaryEmbedding") and isinstance(c, type) and c.__module__ == module.__name__
        ]
        if len(classes) != 1:
            return []
        with torch.device("meta"):
            return [classes[0](config=config)]
    except Exception:  # a config the family's code does not build from: nothing to consult
        return []
    finally:
        transformers.logging.set_verbosity(verbosity)


def _rope_for(model: nn.Module, config, rotary_modules: List[nn.Module]) -> RotaryEmbedding:
    kwargs, _ = rotary_kwargs_in_code(config, rotary_modules)
    unused = unused_rope_keys(config)
    if unused:
        rope_type = getattr(kwargs["scaling"], "rope_type", "default")
        warnings.warn(
            f"this {config.model_type!r} config's {rope_type!r} rope dict has keys the type does not use: "
            f"{unused}; they change nothing, in posenc as in transformers (which warns too)",
            UserWarning,
            stacklevel=3,
        )
    rope = RotaryEmbedding(**kwargs)
    try:
        reference = next(model.parameters())
    except StopIteration:
        reference = None
    if reference is not None:
        rope = rope.to(device=reference.device)
        if reference.dtype == torch.float64:
            rope = rope.double()  # tables follow a float64 model up to float64, never down
    return rope


def _transformers_version() -> str:
    try:
        import transformers

        return transformers.__version__
    except ImportError:  # pragma: no cover - patch needs a transformers model anyway
        return "not installed"


def unpatch(model: nn.Module) -> None:
    """Undo the posenc patch on ``model`` if there is one (see :meth:`PosencPatch.undo`)."""
    handle = model.__dict__.get("_posenc_patch")
    if handle is not None:
        handle.undo()


def patch_of(model: nn.Module) -> Optional[PosencPatch]:
    """The active :class:`PosencPatch` of ``model``, or ``None``."""
    return model.__dict__.get("_posenc_patch")
