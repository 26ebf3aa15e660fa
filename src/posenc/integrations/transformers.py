"""posenc inside a Hugging Face ``transformers`` model, in one call.

:func:`patch` changes one model instance in two places:

1. **Its rotary embedding module(s)** (``model.model.rotary_emb`` and the like) are replaced by a
   :class:`PosencRotaryTables` that wraps a :class:`posenc.RotaryEmbedding` built from the model's
   config. Per forward it returns the half-width cos/sin rows for the call's ``position_ids``, asked
   of the :class:`~posenc.RotaryEmbedding` (its one cache policy and position rules): angles formed
   and reduced in float64, cos/sin taken in float64 and rounded once, to float32 (to float64 if the
   model runs in float64). They are *not* cast to the model's dtype: a bf16 model gets float32
   tables, and the rotation rounds its result to bf16 once.
2. **The rotary application in each attention layer.** The attention class's ``forward`` calls a
   module-level function (``apply_rotary_pos_emb`` and relatives). The patched layer gets its own
   ``forward``: the same code object as the class's, run with a copy of the module's globals in which
   that name points to posenc's :func:`posenc.apply_rotary` (the fused kernel on CPU and CUDA, out of
   place: q and k are views of projection outputs that a hook may hold). Decorators around
   ``forward`` are rebuilt around the new function, so they behave as before. The layer's
   ``forward`` is ``functools.partial(function, layer)`` with ``function`` registered by name in
   :data:`REBUILT_FORWARDS`, so a pickled patched model loads patched.

Scope: **one instance**. The class, the modeling module and every other instance of the same class are
untouched (nothing global is monkey-patched, unlike Liger-Kernel's ``apply_liger_kernel_to_*``).
:meth:`PosencPatch.undo` puts the original rotary modules back and deletes the per-instance
``forward`` attributes, which restores the model exactly; ``with patch(model): ...`` undoes on exit.

What keeps working: ``generate()`` with the KV cache (cached keys were rotated by the patched layers
too), left padding and packed sequences (``position_ids`` are honoured row by row), eager and SDPA
attention, ``torch.compile`` with ``fullgraph=True`` (no read-back, no branch on values: the rows are
formed in the graph; as many graphs as the unpatched model), autograd (with posenc's backward),
``torch.save``/``torch.load`` and ``copy.deepcopy`` of the patched model, casts (the replaced modules
are cast too, so :meth:`PosencPatch.undo` gives what the same casts give an unpatched model) and
``type(rotary_module)(config=...)``.

Frequencies that depend on the length (``dynamic`` NTK, LongRoPE) follow ``transformers``: LongRoPE by
each call's length, dynamic NTK by the largest length seen; ``freeze_frequencies=N`` uses the
frequencies for length ``N`` for every call instead, so keys in a KV cache and later queries agree
(see ``docs/transformers.md``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import re
import threading
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch
from torch import nn

from .._checks import as_positions, check_positions, is_compiling
from ..rope.apply import apply_rotary
from ..rope.embedding import RotaryEmbedding
from ..rope.hfconfig import ConfigFields, rotary_kwargs_from_hf, unused_rope_keys
from ..rope.layout import LAYOUTS
from ..rope.mrope import MROPE_HF_KEYS
from ..rope.tables import angles_from_limb_phases, cos_sin_of_angles, limb_phases, rope_cos_sin
from . import discovery
from .discovery import RotaryFunction, UnsupportedModelError


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
    # GPT-J's code: a (sin, cos) table module and f(x, sin, cos) on the rotated slice of the head
    "codegen": Architecture(
        "transformers.models.codegen.modeling_codegen",
        (("apply_rotary_pos_emb", "interleaved"),),
        style="single",
        sin_first=True,
    ),
}


def supported_model_types() -> List[str]:
    """The ``config.model_type`` values listed in :data:`ARCHITECTURES`, sorted.

    :func:`patch` also accepts other families, read from their own code by
    :mod:`posenc.integrations.discovery` (docs/transformers.md lists what it finds per model type).
    """
    return sorted(ARCHITECTURES)


# -- the tables ---------------------------------------------------------------------------------------
class PosencRotaryTables(nn.Module):
    """Stands in for a model's ``*RotaryEmbedding``: exact half-width cos/sin for ``position_ids``.

    Args:
        config: a ``transformers`` config, as the family's own module is built
            (``type(model.model.rotary_emb)(config)`` gives a working module, as code that rebuilds a
            model's rotary module expects; ``sin_first`` and ``complex_output`` then come from the
            family); or the :class:`posenc.RotaryEmbedding` built from the model's config (what
            :func:`patch` passes).
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
    arch = ARCHITECTURES.get(config.model_type)
    kwargs, _ = rotary_kwargs_in_code(config)
    if arch is not None:
        return RotaryEmbedding(**kwargs), arch.sin_first, arch.style == "complex"
    # a family found from its code: one complex freqs_cis when its rotary functions take that (Llama 4)
    module = discovery.rotary_causal_lm_module(config.model_type)
    functions = discovery.census_module(module).functions if module is not None else ()
    return RotaryEmbedding(**kwargs), False, bool(functions) and all(f.arity == "complex" for f in functions)


# -- the rotation -------------------------------------------------------------------------------------
# Out of place, always. q and k arrive as views of the projection outputs (``k_proj``,
# ``query_key_value``), which a forward hook, an output recorder or a debugger may hold; rotating in
# place would change the tensor they see. The rotation's own output is the only fresh tensor here.
def _pair_function(layout: str) -> Callable:
    def posenc_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        """(B, H, S, D) q and k (or (B, S, H, D) with unsqueeze_dim=2), half-width cos/sin (B|1, S, r/2)."""
        if unsqueeze_dim == 2:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        elif unsqueeze_dim != 1:
            raise ValueError(f"unsqueeze_dim must be 1 (heads first) or 2 (seq first), got {unsqueeze_dim!r}")
        q, k = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=2 * cos.shape[-1])
        if unsqueeze_dim == 2:
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return q, k

    return posenc_apply_rotary_pos_emb


def _single_function(layout: str) -> Callable:
    def posenc_apply_rotary_pos_emb(x, sin, cos):
        """GPT-J's form: x (B, S, H, rotary_dim), half-width sin/cos (B|1, S, r/2)."""
        heads_first = x.transpose(1, 2)  # (B, H, S, r) view
        out, _ = apply_rotary(heads_first, heads_first[:, :0], cos, sin, layout=layout, rotary_dim=2 * cos.shape[-1])
        return out.transpose(1, 2)

    return posenc_apply_rotary_pos_emb


def _complex_function(layout: str) -> Callable:
    def posenc_apply_rotary_emb(xq, xk, freqs_cis):
        """DeepSeek-V2's form: xq, xk (B, H, S, r) in interleaved pairs; freqs_cis (B|1, S, r/2) complex."""
        freqs_cis = freqs_cis.to(xq.device)
        cos, sin = freqs_cis.real, freqs_cis.imag
        return apply_rotary(xq, xk, cos, sin, layout=layout, rotary_dim=2 * cos.shape[-1])

    return posenc_apply_rotary_emb


#: ``Architecture.style`` -> the function that stands in for the family's rotary function
STYLES: Dict[str, Callable[[str], Callable]] = {
    "pair": _pair_function,
    "single": _single_function,
    "complex": _complex_function,
}


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


class _RebuiltForwards:
    """The attention ``forward`` functions :func:`patch` builds, each importable by a name.

    A patched layer's ``forward`` is ``functools.partial(function, layer)``, and ``function`` is
    registered here as ``REBUILT_FORWARDS.<name>``, the name spelling out how it was made (the
    class, the rotary functions it overrides, their style and layout). Pickle stores a function by
    its module and qualified name, so ``torch.save`` of a patched model stores that name and
    ``torch.load`` rebuilds the same function: the loaded model is patched as the saved one was.
    (A bound method would pickle as ``getattr(layer, "forward")`` and load as the class's own.)
    """

    def __init__(self) -> None:
        self._built: Dict[str, Tuple[Callable, Callable]] = {}  # name -> (class forward, rebuilt)
        self._lock = threading.Lock()

    @staticmethod
    def name_for(cls: type, style: str, functions: Tuple[Tuple[str, ...], ...], method: str = "forward") -> str:
        overrides = "+".join(f"{entry[0]}={','.join(entry[1:])}" for entry in functions)
        parts = (cls.__module__.replace(".", ":"), cls.__qualname__.replace(".", ":"), style, overrides)
        return "|".join(parts if method == "forward" else (*parts, method))

    def __reduce__(self) -> str:
        return "REBUILT_FORWARDS"  # pickled by reference: the registry is module state

    def __getattr__(self, name: str) -> Callable:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            module_name, qualname, style, overrides, *method = name.split("|")
            functions = tuple(
                (fn, *rest.split(",")) for fn, rest in (item.split("=", 1) for item in overrides.split("+"))
            )
            owner: object = importlib.import_module(module_name.replace(":", "."))
            for part in qualname.split(":"):
                owner = getattr(owner, part)
            if style != PROBED and style not in STYLES:
                raise ValueError(f"unknown style {style!r}")
        except (ValueError, ImportError, AttributeError) as error:
            raise AttributeError(
                f"no posenc attention forward named {name!r} in this environment ({error}); the model was "
                "patched with another transformers version"
            ) from error
        return self.get(owner, style, functions, *method)  # type: ignore[arg-type]

    def get(self, cls: type, style: str, functions: Tuple[Tuple[str, ...], ...], method: str = "forward") -> Callable:
        """``cls.<method>`` (``forward``, or another method that calls the rotation, as Qwen4-Exp's
        indexer does from ``_select_tokens``) whose calls to each function named in ``functions`` go
        to posenc's rotation.

        ``style`` is a key of :data:`STYLES` with ``(name, layout)`` entries, or :data:`PROBED` with
        ``(name, arity, form, layout, sign, deinterleave[, flags])`` entries (what discovery found).
        """
        name = self.name_for(cls, style, functions, method)
        original = getattr(cls, method)
        with self._lock:
            built = self._built.get(name)
            if built is not None and built[0] is original:
                return built[1]
            function = instance_function_override(original, _stand_ins(cls, style, functions))
            function.__module__ = __name__
            function.__qualname__ = f"REBUILT_FORWARDS.{name}"
            self._built[name] = (original, function)
            return function


#: the style of the functions :mod:`posenc.integrations.discovery` found from a model's code
PROBED = "probed"


def _probed_entry(function: RotaryFunction, layout: Optional[str]) -> Tuple[str, ...]:
    """A found function as a registry entry (``layout`` forces a pair layout, as in :func:`patch`)."""
    if layout is not None:
        function = dataclasses.replace(function, layout=layout, deinterleave=False)
    f = function
    entry = (f.name, f.arity, f.form, f.layout, str(f.sign), "1" if f.deinterleave else "0")
    flags = ("s" if f.seq_first else "") + ("k" if f.optional_k else "")
    return entry + (flags,) if flags else entry


def _function_of_entry(entry: Tuple[str, ...]) -> RotaryFunction:
    """The inverse of :func:`_probed_entry`; a last field ``"1"`` is ``"s"`` (how 5.24 spelled it)."""
    name, arity, form, layout, sign, deinterleave, *rest = entry
    flags = "s" if rest == ["1"] else "".join(rest)
    return RotaryFunction(
        name, arity, form, layout, int(sign), deinterleave == "1", "s" in flags, optional_k="k" in flags
    )


def _stand_ins(cls: type, style: str, functions: Tuple[Tuple[str, ...], ...]) -> Dict[str, Callable]:
    if style == PROBED:
        module = importlib.import_module(cls.__module__)
        return {entry[0]: discovery.stand_in(_function_of_entry(entry), vars(module)[entry[0]]) for entry in functions}
    make = STYLES[style]
    return {name: make(layout) for name, layout in functions}


#: the registry of rebuilt attention forwards (see :class:`_RebuiltForwards`)
REBUILT_FORWARDS = _RebuiltForwards()


def method_stand_in(entry: Tuple[str, ...], takes_position_ids: bool, *args: Any, **kwargs: Any) -> Any:
    """posenc's rotation in place of an attention class's rotary method (``self.<name>(...)``): set on
    the instance as ``functools.partial(method_stand_in, entry, takes_position_ids)``, which pickles
    by name and needs nothing of the class to be rebuilt."""
    return discovery.stand_in_of(_function_of_entry(entry), takes_position_ids)(*args, **kwargs)


# -- the patch ----------------------------------------------------------------------------------------
class PosencPatch:
    """What :func:`patch` changed in one model; :meth:`undo` (or leaving a ``with`` block) reverts it.

    Attributes:
        model: the patched model.
        rope: the :class:`posenc.RotaryEmbedding` that all replaced rotary modules share (a model with
            one rope dict per layer type: the first layer type's).
        ropes: every :class:`posenc.RotaryEmbedding` of the patch, one per layer type where the model
            has a rope dict per layer type (Gemma 3's local and global layers), else ``[rope]``.
        layout: the pair layout used for the rotation (``None``: each function's own, see
            :data:`ARCHITECTURES`).
        rotary_modules: names of the replaced rotary embedding modules.
        attention_modules: names of the attention modules given a posenc ``forward``.
    """

    def __init__(
        self,
        model: nn.Module,
        rope: RotaryEmbedding,
        layout: Optional[str],
        ropes: Optional[List[RotaryEmbedding]] = None,
    ):
        self.model = model
        self.rope = rope
        self.ropes = list(ropes) if ropes else [rope]
        self.layout = layout
        self._rotary: List[Tuple[nn.Module, str, nn.Module]] = []  # (parent, attribute, original)
        self._attention: List[Tuple[nn.Module, Callable]] = []  # (module, installed forward)
        self._methods: List[Tuple[nn.Module, str, Callable]] = []  # (module, method name, stand-in)
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
        """Use the frequencies for length ``seq_len`` in every call (dynamic NTK and LongRoPE only).

        Every layer type's tables are frozen (those whose frequencies never change are unaffected).
        """
        _check_freezable(self.ropes)
        for rope in self.ropes:
            rope.freeze_frequencies(seq_len)
        self._refresh_tables()
        return self

    def unfreeze_frequencies(self) -> "PosencPatch":
        """Back to choosing frequencies by each call's length, as ``transformers`` does."""
        for rope in self.ropes:
            rope.unfreeze_frequencies()
        self._refresh_tables()
        return self

    def _refresh_tables(self) -> None:
        for parent, attr, _ in self._rotary:
            for tables in getattr(parent, attr).modules():  # the tables, or a wrapper around them
                if isinstance(tables, PosencRotaryTables):
                    tables._refresh(tables.limb_phases.device)

    def undo(self) -> None:
        """Put back the original rotary modules and class ``forward`` methods. Idempotent."""
        if not self.active:
            return
        for module, installed in self._attention:
            if module.__dict__.get("forward") is installed:
                del module.forward
        for module, name, method in self._methods:
            if module.__dict__.get(name) is method:
                delattr(module, name)
        for parent, attr, original in self._rotary:
            setattr(parent, attr, original)
        self.model.__dict__.pop("_posenc_patch", None)
        self._attention, self._rotary, self._methods = [], [], []
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


def _check_freezable(ropes: List[RotaryEmbedding]) -> None:
    if not any(rope.is_dynamic for rope in ropes):
        rope_types = sorted({getattr(rope.scaling, "rope_type", "default") for rope in ropes})
        shown = f"type is {rope_types[0]!r}" if len(rope_types) == 1 else f"types are {rope_types}"
        raise ValueError(
            f"freeze_frequencies applies to the length-dependent rope types 'dynamic' and "
            f"'longrope'; this model's rope {shown}, whose frequencies never change"
        )


def _config_of(model: nn.Module):
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "model_type"):
        raise TypeError(f"model must be a transformers PreTrainedModel (with a .config), got {type(model).__name__}")
    return config


def patch(
    model: nn.Module,
    *,
    freeze_frequencies: Optional[int] = None,
    layout: Optional[str] = None,
    _check_tables: bool = True,
) -> PosencPatch:
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
        _check_tables: internal (``posenc eval``): ``False`` skips holding a listed family's tables
            to its rotary modules, for a scaling ``transformers`` has no code for.

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
    _check_patchable(model, config, layout)
    model_type = config.model_type
    arch, found, scope = ARCHITECTURES.get(model_type), None, model
    if arch is None:  # found from the model's own code, or refused with the reason, before any change
        scope = language_model_of(model)
        found = discovery.discover(scope)
        arch = Architecture(found.module, tuple((f.name, f.layout) for f in found.functions))
    rotary_slots, attention = _slots(model, scope, arch, model_type)
    if scope is not model:
        config = _config_of(scope)
    rope, ropes = _tables_of(scope, config, found, [c for _, _, c in rotary_slots], model_type, _check_tables)
    every = list(ropes.values()) if ropes else [rope]
    if freeze_frequencies is not None:
        _check_freezable(every)
        for r in every:
            r.freeze_frequencies(freeze_frequencies)

    def install() -> PosencPatch:
        handle = PosencPatch(model, rope, layout, every)
        try:
            _install(handle, arch, found, layout, attention, rotary_slots, rope, ropes)
        except Exception:
            handle.undo()
            raise
        model.__dict__["_posenc_patch"] = handle
        return handle

    handle = install()
    failure = _probe_failure(scope)
    if failure is not None:
        handle.undo()
        if _probe_failure(scope) is None:  # the model runs unpatched: the patch is what broke it
            family = found.module if found is not None else arch.module
            raise UnsupportedModelError(
                f"this {model_type!r} model ({type(model).__name__}, {family}) was patched, but the patched "
                f"model fails on a probe of {PROBE_TOKENS} tokens, so posenc put everything back: {failure}"
            ) from None
        handle = install()  # the probe cannot run this model even unpatched: it says nothing of the patch
    return handle


#: tokens in the probe forward :func:`patch` runs on the patched model before it returns
PROBE_TOKENS = 4


def _probe_failure(scope: nn.Module) -> Optional[str]:
    """Run ``scope``'s base model once on :data:`PROBE_TOKENS` tokens; ``None`` if it runs, else the error
    in one line. Nothing is kept: no gradients, no cache, the random state and the dynamic-NTK lengths
    seen are restored. A model on the meta device has nothing to run (``None``)."""
    target = getattr(scope, "base_model", scope)
    tensors = [*target.parameters(), *target.buffers()]
    if not tensors or any(t.is_meta for t in tensors):
        return None
    config: Any = getattr(target, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None)
    vocab = vocab if isinstance(vocab, int) and vocab > 1 else 2
    device = tensors[0].device
    ids = (torch.arange(PROBE_TOKENS, device=device) % (vocab - 1) + 1).unsqueeze(0)  # (1, PROBE_TOKENS)
    tables = [m for m in target.modules() if isinstance(m, PosencRotaryTables)]
    seen = [t.__dict__.get("_largest_length") for t in tables]
    cuda = sorted({t.device for t in tensors if t.device.type == "cuda"}, key=str)
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=cuda):
            target(input_ids=ids, use_cache=False)
    except Exception as exc:  # what the caller is told, in one line
        return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    finally:
        for t, length in zip(tables, seen):
            t.__dict__["_largest_length"] = length
    return None


def _check_patchable(model: nn.Module, config: Any, layout: Optional[str]) -> None:
    """Refuse what :func:`patch` never changes: an old ``transformers``, ALiBi Falcon, a second patch,
    an unknown layout."""
    _check_transformers_version()
    if config.model_type == "falcon" and getattr(config, "alibi", False):
        raise UnsupportedModelError(
            "this Falcon config uses ALiBi (alibi=True), not rotary embeddings; "
            "patch supports rotary Falcon models only"
        )
    if model.__dict__.get("_posenc_patch") is not None:
        raise ValueError(
            f"this {type(model).__name__} is already patched by posenc; call .undo() on the existing patch first"
        )
    part = _patched_part(model)
    if part is not None:
        raise ValueError(
            f"this {type(model).__name__} is already patched by posenc in its part {part!r} (patched on its own, "
            "or as part of a model that holds it); call .undo() on that patch first"
        )
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)} or None, got {layout!r}")


def _patched_part(model: nn.Module) -> Optional[str]:
    """The name of a part of ``model`` that a posenc patch has changed (a patched submodule, posenc's
    tables, an attention module given a posenc ``forward``), or ``None``."""
    for name, m in model.named_modules():
        installed = m.__dict__.get("forward")
        rebuilt = isinstance(installed, functools.partial) and getattr(installed.func, "__module__", None) == __name__
        if rebuilt or m.__dict__.get("_posenc_patch") is not None or isinstance(m, PosencRotaryTables):
            return name or type(model).__name__
    return None


def _slots(
    model: nn.Module, scope: nn.Module, arch: Architecture, model_type: str
) -> Tuple[List[Tuple[nn.Module, str, nn.Module]], List[nn.Module]]:
    """The rotary modules of ``arch``'s code in ``scope`` (with their parent and attribute name), and
    the attention modules whose ``forward`` calls one of its rotary functions; refused if either is
    missing."""
    module = importlib.import_module(arch.module)
    rotary_class_names = {n for n in dir(module) if n.endswith("RotaryEmbedding")}
    rotary_slots = [
        (parent, attr, child)
        for parent in scope.modules()
        for attr, child in parent.named_children()
        if type(child).__name__ in rotary_class_names and type(child).__module__ == module.__name__
    ]
    names = {name for name, _ in arch.functions}
    attention = [
        m for m in scope.modules() if type(m).__module__ == module.__name__ and names & _code_names(type(m).forward)
    ]
    if not rotary_slots or not attention:
        raise UnsupportedModelError(
            f"found {len(rotary_slots)} rotary embedding modules and {len(attention)} attention modules "
            f"calling {sorted(names)} in this {type(model).__name__}; this transformers version "
            f"({_transformers_version()}) lays out {model_type!r} differently from what posenc expects"
        )
    return rotary_slots, attention


def _tables_of(
    scope: nn.Module,
    config: Any,
    found: Optional[Any],
    rotaries: List[nn.Module],
    model_type: str,
    check: bool = True,
) -> Tuple[RotaryEmbedding, Dict[Any, RotaryEmbedding]]:
    """posenc's tables for ``scope``: one :class:`RotaryEmbedding`, and one per layer type where the
    family's rotary module takes a layer type. Every family, listed or found, is checked against its
    own rotary modules here (:func:`posenc.integrations.discovery.check_rotary_tables`: what they
    compute now, not what the config says they should), and refused before anything changes."""
    ropes: Dict[Any, RotaryEmbedding] = {}
    if found is not None and found.layer_types:

        def kwargs_for(layer_type: str) -> Dict[str, Any]:
            kwargs, _ = rotary_kwargs_in_code(config, rotaries, layer_type=layer_type)
            _warn_unused_keys(config, kwargs, rotaries, layer_type, stacklevel=6)
            return kwargs

        ropes = dict(discovery.layer_type_ropes(scope, config, found, kwargs_for))
    try:
        rope = next(iter(ropes.values())) if ropes else _rope_for(scope, config, rotaries)
    except ValueError as exc:  # a found family: refused, before anything changes
        if found is None or isinstance(exc, UnsupportedModelError):
            raise
        raise UnsupportedModelError(f"posenc cannot build this {model_type!r} config's tables: {exc}") from None
    if found is not None:
        discovery.check_tables(scope, ropes or rope, found)
    elif check:  # a listed family: its tables are built from the config, and held to what its modules compute
        arch = ARCHITECTURES[model_type]
        # a module on the meta device is checked as its class rebuilds it from its config; GPT-J's
        # table module keeps no config: its table is the config's, made when the weights are
        checkable = [r for r in rotaries if getattr(r, "config", None) is not None or not _on_meta(r)]
        discovery.check_rotary_tables(checkable, rope, sin_first=arch.sin_first)
    return rope, ropes


def _on_meta(module: nn.Module) -> bool:
    return any(t.is_meta for t in module.buffers())


def _install(
    handle: PosencPatch,
    arch: Architecture,
    found: Optional[Any],
    layout: Optional[str],
    attention: List[nn.Module],
    rotary_slots: List[Tuple[nn.Module, str, nn.Module]],
    rope: RotaryEmbedding,
    ropes: Dict[Any, RotaryEmbedding],
) -> None:
    """Re-bind every attention ``forward`` and replace every rotary module, recording each change on
    ``handle`` as it is made (so :meth:`PosencPatch.undo` reverts a partial install)."""
    complex_output = arch.style == "complex" or (found is not None and found.form == "complex")

    def tables_for(r: RotaryEmbedding) -> PosencRotaryTables:
        return PosencRotaryTables(r, sin_first=arch.sin_first, complex_output=complex_output)

    functions: Tuple[Tuple[str, ...], ...]
    methods: List[RotaryFunction] = []
    if found is None:
        style, functions = arch.style, tuple((name, layout or own) for name, own in arch.functions)
    else:
        style, functions = PROBED, tuple(_probed_entry(f, layout) for f in found.functions if not f.method)
        methods = [f for f in found.functions if f.method]
    for m in attention:
        if functions:
            installed = functools.partial(REBUILT_FORWARDS.get(type(m), style, functions), m)
            m.forward = installed
            handle._attention.append((m, installed))
            cls: Any = type(m)
            for name in discovery.methods_reading(cls, frozenset(entry[0] for entry in functions)):
                if name != "forward":  # another method that calls the rotation (Qwen4-Exp's _select_tokens)
                    rebound = functools.partial(REBUILT_FORWARDS.get(type(m), style, functions, name), m)
                    setattr(m, name, rebound)
                    handle._methods.append((m, name, rebound))
        for f in methods:
            if inspect.getattr_static(type(m), f.name, None) is not None:
                takes_position_ids = "position_ids" in discovery.signature_of(getattr(m, f.name)).parameters
                method = functools.partial(method_stand_in, _probed_entry(f, layout), takes_position_ids)
                setattr(m, f.name, method)
                handle._methods.append((m, f.name, method))
    for parent, attr, child in rotary_slots:
        tables = tables_for(rope) if found is None else discovery.wrap_tables(found, tables_for, rope, ropes, child)
        first = next(m for m in tables.modules() if isinstance(m, PosencRotaryTables))
        first.__dict__["_replaced"] = child  # cast and moved with the model, for undo()
        _carry_largest_length(first, child)
        setattr(parent, attr, tables)
        handle._rotary.append((parent, attr, child))


def _carry_largest_length(tables: PosencRotaryTables, replaced: nn.Module) -> None:
    """Dynamic NTK: start from the largest length the replaced module has seen (its
    ``max_seq_len_cached``), so the next call uses the frequencies the unpatched model would."""
    seen = getattr(replaced, "max_seq_len_cached", None)  # an int, or a 0-d tensor once a call grew it
    if isinstance(seen, torch.Tensor) and seen.numel() == 1 and not seen.is_meta:
        seen = int(seen)
    if _keeps_largest(tables.rope) and isinstance(seen, int) and seen > _threshold(tables.rope):
        tables.__dict__["_largest_length"] = seen


def language_model_of(model: nn.Module) -> nn.Module:
    """The part of ``model`` that :func:`patch` reads and changes: the model itself, or for a
    vision-language model (a config with a ``vision_config``) its language model.

    The vision tower keeps its own rotary code (2-D patch positions, a rotation posenc does not
    stand in for) and is left as it is; the language model gets the position ids the model's
    ``get_rope_index`` makes for its images and videos (M-RoPE's three streams,
    :class:`posenc.integrations.discovery.StreamTables`).
    """
    config = getattr(model, "config", None)
    if getattr(config, "vision_config", None) is None:
        return model
    found = [
        (name.count("."), name, m)
        for name, m in model.named_modules()
        if name.split(".")[-1] == "language_model" and hasattr(getattr(m, "config", None), "model_type")
    ]
    return min(found, key=lambda t: t[:2])[2] if found else model


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
            built = _code_names(model_class.__init__)
            classes = [c for c in classes if c.__name__ in built]
        if len(classes) != 1:
            return []
        with torch.device("meta"):
            return [classes[0](config=config)]
    except Exception:  # a config the family's code does not build from: nothing to consult
        return []
    finally:
        transformers.logging.set_verbosity(verbosity)


def _warn_unused_keys(
    config,
    kwargs: Dict[str, Any],
    rotary_modules: List[nn.Module],
    layer_type: Optional[str] = None,
    stacklevel: int = 5,
) -> None:
    """Warn (as transformers does) about keys of the rope dict its type does not use."""
    unused = unused_rope_keys(config, layer_type)
    if any(getattr(m, "mrope_section", None) is not None for m in rotary_modules):
        unused = [k for k in unused if k not in MROPE_HF_KEYS]  # M-RoPE's own keys, used by its tables
    if unused:
        rope_type = getattr(kwargs["scaling"], "rope_type", "default")
        which = "" if layer_type is None else f" for {layer_type!r} layers"
        warnings.warn(
            f"this {config.model_type!r} config's {rope_type!r} rope dict{which} has keys the type does not use: "
            f"{unused}; they change nothing, in posenc as in transformers (which warns too)",
            UserWarning,
            stacklevel=stacklevel,  # the caller of patch
        )


def _rope_for(model: nn.Module, config, rotary_modules: List[nn.Module]) -> RotaryEmbedding:
    kwargs, _ = rotary_kwargs_in_code(config, rotary_modules)
    _warn_unused_keys(config, kwargs, rotary_modules)
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


#: the oldest ``transformers`` release :func:`patch` is tested with (``benchmarks/transformers_versions.py``
#: under it, a middle one and the newest; docs/transformers.md lists what each printed). Older ones lay
#: out several families differently: 4.45.2 gives silently different YaRN logits and fails on others.
OLDEST_TESTED_TRANSFORMERS = (4, 57, 6)


def _check_transformers_version() -> None:
    version = _transformers_version()
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if match is None:
        return  # a source build without a plain version: nothing to compare
    found = tuple(int(part or 0) for part in match.groups())
    if found < OLDEST_TESTED_TRANSFORMERS:
        oldest = ".".join(map(str, OLDEST_TESTED_TRANSFORMERS))
        raise UnsupportedModelError(
            f"posenc's transformers patch is tested with transformers {oldest} and later; this is {version}, "
            "whose rotary code differs in several families (posenc could rotate them differently from the "
            f"model without an error): upgrade transformers to >= {oldest}"
        )


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
