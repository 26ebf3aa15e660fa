"""posenc inside a Hugging Face ``transformers`` model, in one call.

:func:`patch` changes one model instance in two places:

1. **Its rotary embedding module(s)** (``model.model.rotary_emb`` and the like) are replaced by a
   :class:`~posenc.integrations.tables.PosencRotaryTables` that wraps a
   :class:`posenc.RotaryEmbedding` built from the model's config. Per forward it returns the
   half-width cos/sin rows for the call's ``position_ids``, asked of the
   :class:`~posenc.RotaryEmbedding` (its one cache policy and position rules): angles formed and
   reduced in float64, cos/sin taken in float64 and rounded once, to float32 (to float64 if the
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

This module is the install (:func:`patch`, :class:`PosencPatch` and its undo, posenc's stand-ins
for the family's rotary functions, the rebuilt forwards); what it installs for a family is found by
:mod:`posenc.integrations.discovery` (told by :mod:`posenc.integrations.hints` what it cannot read)
and built by :mod:`posenc.integrations.tables`. Their names this module has always offered
(:class:`PosencRotaryTables`, :class:`~posenc.integrations.tables.PerLayerTypeTables`,
:class:`~posenc.integrations.tables.StreamTables`, :func:`rotary_kwargs_in_code`,
:func:`supported_model_types`, ...) are still importable from it, and pickles that name them here load.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
import threading
import types
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import torch
from torch import nn

from ..rope.apply import apply_rotary, rotate_reference
from ..rope.embedding import RotaryEmbedding
from ..rope.hfconfig import unused_rope_keys
from ..rope.layout import LAYOUTS
from ..rope.mrope import MROPE_HF_KEYS

# the names imported "as" themselves are re-exported: they were defined here, and importing them from
# this module keeps working
from . import discovery
from .discovery import (
    RotaryFunction,
    UnsupportedModelError,
    code_names,
)
from .discovery import supported_model_types as supported_model_types
from .hints import HINTS as HINTS

# defined here before the tables had a module of their own: pickles made then name them here
from .tables import PerLayerTypeTables as PerLayerTypeTables
from .tables import (
    PosencRotaryTables,
    carry_largest_length,
    rotary_kwargs_in_code,
    wrap_tables,
)
from .tables import StreamTables as StreamTables
from .tables import rotary_modules_from_config as rotary_modules_from_config
from .tables import rotated_width_of as rotated_width_of


# -- the rotation -------------------------------------------------------------------------------------
# Out of place, always. q and k arrive as views of the projection outputs (``k_proj``,
# ``query_key_value``), which a forward hook, an output recorder or a debugger may hold; rotating in
# place would change the tensor they see. The rotation's own output is the only fresh tensor here.
def _rotate_broadcast(x: torch.Tensor, cos, sin, unsqueeze_dim: int, function: RotaryFunction) -> torch.Tensor:
    """The rotation for any other shape, broadcast as the family's code broadcasts it: cos/sin
    unsqueezed at ``unsqueeze_dim`` (Qwen4-Exp's indexer rotates (n, 1, head_dim) keys by (n, r/2)
    tables). Plain torch, in float32 for half-precision inputs, out of place."""
    width = 2 * cos.shape[-1]
    if function.deinterleave:
        x = discovery.deinterleaved(x, width)
    c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return rotate_reference(x, c, function.sign * s, layout=function.layout, rotary_dim=width)


def _rotate(q, k, cos, sin, unsqueeze_dim, function: RotaryFunction):
    if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3:  # not (B, H, S, D) with (B, S, r/2) tables
        return (
            _rotate_broadcast(q, cos, sin, unsqueeze_dim, function),
            _rotate_broadcast(k, cos, sin, unsqueeze_dim, function),
        )
    if unsqueeze_dim == 2:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    elif unsqueeze_dim != 1:
        raise ValueError(f"unsqueeze_dim must be 1 (heads first) or 2 (seq first), got {unsqueeze_dim!r}")
    width = 2 * cos.shape[-1]
    if function.deinterleave:
        q, k = discovery.deinterleaved(q, width), discovery.deinterleaved(k, width)
    if function.sign < 0:
        sin = -sin
    q, k = apply_rotary(q, k, cos, sin, layout=function.layout, rotary_dim=width)
    if unsqueeze_dim == 2:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    return q, k


def stand_in(function: RotaryFunction, original: Callable, layout: Optional[str] = None) -> Callable:
    """posenc's stand-in for a family's rotary function: the same signature, half-width cos/sin.

    Out of place (the stand-in cannot know what else holds q and k). ``layout`` forces a pair
    layout (the negative control of :func:`posenc.integrations.transformers.patch`).
    """
    if layout is not None:
        function = dataclasses.replace(function, layout=layout, deinterleave=False)
    return stand_in_of(function, "position_ids" in discovery.signature_of(original).parameters)


@functools.lru_cache(maxsize=None)
def stand_in_of(function: RotaryFunction, takes_position_ids: bool) -> Callable:
    """posenc's stand-in for ``function`` (see :func:`stand_in`), from what the probe found alone:
    ``takes_position_ids`` says whether the original has that (ignored) parameter."""
    if function.arity == "complex":
        unsqueeze = 2 if function.seq_first else 1

        def posenc_rotate_complex(xq, xk, freqs_cis):
            freqs_cis = freqs_cis.to(xq.device)  # cos + i sin, (batch or 1, seq, rotary_dim // 2)
            return _rotate(xq, xk, freqs_cis.real, freqs_cis.imag, unsqueeze, function)

        return posenc_rotate_complex
    if function.arity == "single" and (function.sin_first or function.seq_first):  # a call told by a hint
        unsqueeze = 2 if function.seq_first else 1

        def posenc_rotate_one_as_hinted(x, first, second):
            cos, sin = (second, first) if function.sin_first else (first, second)  # GPT-J: f(x, sin, cos)
            none = x[:, :0] if unsqueeze == 1 else x[:, :, :0]
            return _rotate(x, none, cos, sin, unsqueeze, function)[0]

        return posenc_rotate_one_as_hinted
    if function.arity == "single":

        def posenc_rotate_one(x, cos, sin, unsqueeze_dim=1):
            return _rotate(x, x[:, :0] if unsqueeze_dim == 1 else x[:, :, :0], cos, sin, unsqueeze_dim, function)[0]

        return posenc_rotate_one
    if function.optional_k:

        def posenc_rotate_pair_or_one(q, k=None, cos=None, sin=None, unsqueeze_dim=1):
            if k is None:
                if q.dim() != 4 or cos.dim() != 3:
                    return _rotate_broadcast(q, cos, sin, unsqueeze_dim, function)
                none = q[:, :0] if unsqueeze_dim == 1 else q[:, :, :0]
                return _rotate(q, none, cos, sin, unsqueeze_dim, function)[0]
            return _rotate(q, k, cos, sin, unsqueeze_dim, function)

        return posenc_rotate_pair_or_one
    if takes_position_ids:

        def posenc_rotate_pair_p(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
            return _rotate(q, k, cos, sin, unsqueeze_dim, function)

        return posenc_rotate_pair_p

    def posenc_rotate_pair(q, k, cos, sin, unsqueeze_dim=1):
        return _rotate(q, k, cos, sin, unsqueeze_dim, function)

    return posenc_rotate_pair


def stand_ins(found: discovery.Discovered, layout: Optional[str] = None) -> Dict[str, Callable]:
    """``global name -> stand-in`` for every rotary function :func:`discover` found."""
    module = importlib.import_module(found.module)
    return {f.name: stand_in(f, vars(module)[f.name], layout) for f in found.functions if not f.method}


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
            if style in _LISTED_STYLES:  # a pickle made when some families were listed by hand
                arity, form, flags = _LISTED_STYLES[style]
                functions = tuple(
                    (fn, arity, form, layout, "1", "0", flags)[: 7 if flags else 6] for fn, layout in functions
                )
                style = PROBED
            if style != PROBED:
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

        ``style`` is :data:`PROBED`, with ``(name, arity, form, layout, sign, deinterleave[, flags])``
        entries (what discovery found).
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

#: the styles of the families once listed by hand, as pickles made then name their forwards: style ->
#: the probed entry's ``(arity, form, flags)`` for their ``(name, layout)`` entries
_LISTED_STYLES = {
    "pair": ("pair", "cat", ""),
    "complex": ("complex", "complex", ""),
    "single": ("single", "half", "sr"),
}


def _probed_entry(function: RotaryFunction, layout: Optional[str]) -> Tuple[str, ...]:
    """A found function as a registry entry (``layout`` forces a pair layout, as in :func:`patch`)."""
    if layout is not None:
        function = dataclasses.replace(function, layout=layout, deinterleave=False)
    f = function
    entry = (f.name, f.arity, f.form, f.layout, str(f.sign), "1" if f.deinterleave else "0")
    flags = ("s" if f.seq_first else "") + ("k" if f.optional_k else "") + ("r" if f.sin_first else "")
    return entry + (flags,) if flags else entry


def _function_of_entry(entry: Tuple[str, ...]) -> RotaryFunction:
    """The inverse of :func:`_probed_entry`; a last field ``"1"`` is ``"s"`` (how 5.24 spelled it)."""
    name, arity, form, layout, sign, deinterleave, *rest = entry
    flags = "s" if rest == ["1"] else "".join(rest)
    return RotaryFunction(
        name,
        arity,
        form,
        layout,
        int(sign),
        deinterleave == "1",
        "s" in flags,
        optional_k="k" in flags,
        sin_first="r" in flags,
    )


def _stand_ins(cls: type, style: str, functions: Tuple[Tuple[str, ...], ...]) -> Dict[str, Callable]:
    module = importlib.import_module(cls.__module__)
    return {entry[0]: stand_in(_function_of_entry(entry), vars(module)[entry[0]]) for entry in functions}


#: the registry of rebuilt attention forwards (see :class:`_RebuiltForwards`)
REBUILT_FORWARDS = _RebuiltForwards()


def method_stand_in(entry: Tuple[str, ...], takes_position_ids: bool, *args: Any, **kwargs: Any) -> Any:
    """posenc's rotation in place of an attention class's rotary method (``self.<name>(...)``): set on
    the instance as ``functools.partial(method_stand_in, entry, takes_position_ids)``, which pickles
    by name and needs nothing of the class to be rebuilt."""
    return stand_in_of(_function_of_entry(entry), takes_position_ids)(*args, **kwargs)


# -- the patch ----------------------------------------------------------------------------------------
class PosencPatch:
    """What :func:`patch` changed in one model; :meth:`undo` (or leaving a ``with`` block) reverts it.

    Attributes:
        model: the patched model.
        rope: the :class:`posenc.RotaryEmbedding` that all replaced rotary modules share (a model with
            one rope dict per layer type: the first layer type's).
        ropes: every :class:`posenc.RotaryEmbedding` of the patch, one per layer type where the model
            has a rope dict per layer type (Gemma 3's local and global layers), else ``[rope]``.
        layout: the pair layout used for the rotation (``None``: each function's own, as
            :mod:`posenc.integrations.discovery` found it).
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
        model: a ``transformers`` model whose attention calls a rotary function (found from the
            model's code), e.g. ``LlamaForCausalLM`` or ``LlamaModel``, on any device, in any dtype.
        freeze_frequencies: for ``dynamic`` NTK and LongRoPE configs only: use the frequencies for
            this length (e.g. prompt + new tokens) in every call, so cached keys and new queries are
            rotated alike. ``None`` (default) follows each call's length as ``transformers`` does.
        layout: force the pair layout (``"half"`` or ``"interleaved"``) instead of the one the
            architecture's code implements; for checkpoints whose q/k rows were permuted. A wrong
            value gives a different (wrong) model, which the tests use as a negative control.
        _check_tables: internal (``posenc eval``): ``False`` skips holding posenc's tables to the
            family's rotary modules, for a scaling ``transformers`` has no code for.

    Returns:
        A :class:`PosencPatch`; call ``.undo()`` or use it as a context manager.

    Raises:
        UnsupportedModelError: the model's rotary code matches nothing posenc can stand in for (the
            message says what :mod:`posenc.integrations.discovery` found), its tables differ from
            posenc's for its config, the patched model fails a probe forward, or an ALiBi Falcon
            config. Nothing in the model is changed then.
        ValueError: the model is already patched, or ``freeze_frequencies`` is given for a rope type
            whose frequencies do not depend on the length.
    """
    config = _config_of(model)
    _check_patchable(model, config, layout)
    model_type = config.model_type
    scope = language_model_of(model)
    found = discovery.discover(scope)  # from the model's own code, or refused with the reason, before any change
    rotary_slots, attention = _slots(model, scope, found, model_type)
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
            _install(handle, found, layout, attention, rotary_slots, rope, ropes)
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
            raise UnsupportedModelError(
                f"this {model_type!r} model ({type(model).__name__}, {found.module}) was patched, but the patched "
                f"model fails on a probe of {PROBE_TOKENS} tokens, so posenc put everything back: {failure}"
            ) from None
        handle = install()  # the probe cannot run this model even unpatched: it says nothing of the patch
    return handle


#: tokens in the probe forward :func:`patch` runs on the patched model before it returns
PROBE_TOKENS = 4


def _probe_failure(scope: nn.Module) -> Optional[str]:
    """Run ``scope``'s base model once on :data:`PROBE_TOKENS` tokens; ``None`` if it runs, else the error
    in one line. Nothing is kept: no gradients, no cache, the random state and the dynamic-NTK lengths
    seen are restored, and no forward hook of the user's fires (:func:`discovery.hooks_suspended`). A
    model on the meta device has nothing to run (``None``)."""
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
        with torch.no_grad(), torch.random.fork_rng(devices=cuda), discovery.hooks_suspended(target):
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
    model: nn.Module, scope: nn.Module, found: discovery.Discovered, model_type: str
) -> Tuple[List[Tuple[nn.Module, str, nn.Module]], List[nn.Module]]:
    """The rotary modules of ``found``'s modeling module in ``scope`` (with their parent and attribute name), and
    the attention modules whose ``forward`` calls one of its rotary functions; refused if either is
    missing."""
    module = importlib.import_module(found.module)
    rotary_class_names = {n for n in dir(module) if n.endswith("RotaryEmbedding")}
    rotary_slots = [
        (parent, attr, child)
        for parent in scope.modules()
        for attr, child in parent.named_children()
        if type(child).__name__ in rotary_class_names and type(child).__module__ == module.__name__
    ]
    names = {f.name for f in found.functions}
    attention = [
        m for m in scope.modules() if type(m).__module__ == module.__name__ and names & code_names(type(m).forward)
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
    found: discovery.Discovered,
    rotaries: List[nn.Module],
    model_type: str,
    check: bool = True,
) -> Tuple[RotaryEmbedding, Dict[Any, RotaryEmbedding]]:
    """posenc's tables for ``scope``: one :class:`RotaryEmbedding`, and one per layer type where the
    family's rotary module takes a layer type. They are checked against the family's own rotary
    modules here (:func:`posenc.integrations.discovery.check_tables`: what they compute now, not what
    the config says they should), and refused before anything changes."""
    ropes: Dict[Any, RotaryEmbedding] = {}
    if found.layer_types:

        def kwargs_for(layer_type: str) -> Dict[str, Any]:
            kwargs, _ = rotary_kwargs_in_code(config, rotaries, layer_type=layer_type)
            _warn_unused_keys(config, kwargs, rotaries, layer_type, stacklevel=6)
            return kwargs

        ropes = dict(discovery.layer_type_ropes(scope, config, found, kwargs_for))
    try:
        rope = next(iter(ropes.values())) if ropes else _rope_for(scope, config, rotaries)
    except ValueError as exc:  # refused, before anything changes
        if isinstance(exc, UnsupportedModelError):
            raise
        raise UnsupportedModelError(f"posenc cannot build this {model_type!r} config's tables: {exc}") from None
    if check:
        discovery.check_tables(scope, ropes or rope, found)
    return rope, ropes


def _install(
    handle: PosencPatch,
    found: discovery.Discovered,
    layout: Optional[str],
    attention: List[nn.Module],
    rotary_slots: List[Tuple[nn.Module, str, nn.Module]],
    rope: RotaryEmbedding,
    ropes: Dict[Any, RotaryEmbedding],
) -> None:
    """Re-bind every attention ``forward`` and replace every rotary module, recording each change on
    ``handle`` as it is made (so :meth:`PosencPatch.undo` reverts a partial install)."""

    def tables_for(r: RotaryEmbedding) -> PosencRotaryTables:
        return PosencRotaryTables(r, sin_first=found.sin_first, complex_output=found.form == "complex")

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
        tables = wrap_tables(found, tables_for, rope, ropes, child)
        first = next(m for m in tables.modules() if isinstance(m, PosencRotaryTables))
        first.__dict__["_replaced"] = child  # cast and moved with the model, for undo()
        carry_largest_length(first, child)
        setattr(parent, attr, tables)
        handle._rotary.append((parent, attr, child))


def language_model_of(model: nn.Module) -> nn.Module:
    """The part of ``model`` that :func:`patch` reads and changes: the model itself, or for a
    vision-language model (a config with a ``vision_config``) its language model.

    The vision tower keeps its own rotary code (2-D patch positions, a rotation posenc does not
    stand in for) and is left as it is; the language model gets the position ids the model's
    ``get_rope_index`` makes for its images and videos (M-RoPE's three streams,
    :class:`posenc.integrations.tables.StreamTables`).
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
