"""How a ``transformers`` family applies RoPE, found from its own code rather than a table.

:func:`posenc.integrations.transformers.patch` needs two facts about a model family: which
module-level function its attention ``forward`` calls to rotate q and k, and which pair layout that
function implements for the cos/sin its rotary module returns. This module finds both from the
family's code and checks them numerically before anything is changed:

1. **The functions.** The attention modules are the model's modules (from the rotary module's
   modeling module) whose ``forward`` reads a global name bound to a function of that module. Each
   such function is called on a small probe (random q and k, random angles) and compared with
   :func:`posenc.rope.apply.rotate_reference` in both layouts (``"half"``: GPT-NeoX / Llama's
   ``rotate_half``; ``"interleaved"``: GPT-J / Meta pairs), for each form the rotary module could
   return its angles in (:data:`FORMS`). A function that rotates the first ``r`` features and passes
   the rest through (GLM's partial interleaved rotary) matches with ``rotary_dim=r``.
2. **The tables.** The model's own rotary module is called on positions ``0..15`` and its cos/sin
   are compared with posenc's tables for the model's config (:func:`check_tables`): base, scaling,
   attention factor and rotated width all have to agree, or the model is refused.

A family whose attention keeps the usual shape therefore works without a posenc release; a family
whose code matches nothing is refused with :class:`UnsupportedModelError` saying what did not match,
before the model is touched.

:func:`rotary_causal_lm_types` and :func:`census` enumerate the installed ``transformers``'
causal-LM model types whose modeling module defines a rotary embedding, and classify each module
without building a model; ``python -m posenc.integrations.discovery`` prints that census.

The few families whose call the probe cannot read (GPT-J's ``f(x, sin, cos)``) are told to it by
one line each in :data:`posenc.integrations.hints.HINTS`; the probe still finds their layout and form
and checks their tables.

This module says what a family's code does; it changes no model. posenc's tables in each family's
form are in :mod:`posenc.integrations.tables`, the patch that installs them and the stand-ins in
:mod:`posenc.integrations.transformers`; both build on this module, which imports neither.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import dis
import functools
import importlib
import inspect
import types
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

import torch
from torch import nn

from ..rope.apply import rotate_reference
from ..rope.embedding import RotaryEmbedding
from ..rope.hfconfig import rope_keys_beside_layer_types, rotary_kwargs_from_hf
from ..rope.mrope import select_streams
from ..rope.tables import rope_cos_sin
from .hints import HINTS, Hint

#: how a rotary module returns the half-width angles ``theta`` (batch, seq, r/2) as cos/sin:
#: ``"cat"`` (Llama: ``cat(theta, theta)``), ``"interleave"`` (Cohere: ``repeat_interleave(theta, 2)``),
#: ``"half"`` (gpt-oss: ``theta`` itself), ``"complex"`` (Llama 4, DeepSeek-V2: one complex tensor
#: ``freqs_cis = cos(theta) + i sin(theta)``, taken by a function ``f(xq, xk, freqs_cis)``)
FORMS = ("cat", "interleave", "half", "complex")
LAYOUT_NAMES = ("half", "interleaved")

#: the extra features the probe appends to check that a function passes them through unrotated
_PASS = 4
_PROBE_SEQ = 6
_TABLE_POSITIONS = 16


class UnsupportedModelError(ValueError):
    """The model's rotary code matches nothing posenc can stand in for (the message says what)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def on_the_cpu(fn: _F) -> _F:
    """Run ``fn`` with the CPU as the default device: its probe tensors and positions are made there
    even when it is called inside ``with torch.device("meta")`` (a model patched as it is built empty)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch.device("cpu"):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def expand(half: torch.Tensor, form: str) -> torch.Tensor:
    """A half-width table (..., r/2) in the rotary module's ``form`` (see :data:`FORMS`)."""
    if form == "cat":
        return torch.cat((half, half), dim=-1)
    if form == "interleave":
        return torch.repeat_interleave(half, 2, dim=-1)
    if form in ("half", "complex"):
        return half
    raise ValueError(f"form must be one of {FORMS}, got {form!r}")


def halve(full: torch.Tensor, form: str) -> torch.Tensor:
    """The half-width table inside a rotary module's output of ``form`` (inverse of :func:`expand`)."""
    if form == "cat":
        return full[..., : full.shape[-1] // 2]
    if form == "interleave":
        return full[..., 0::2]
    if form in ("half", "complex"):
        return full
    raise ValueError(f"form must be one of {FORMS}, got {form!r}")


# -- the functions ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RotaryFunction:
    """A family's rotary function as the probe found it.

    Attributes:
        name: its global name in the modeling module.
        arity: ``"pair"`` for ``f(q, k, cos, sin, ...) -> (q, k)``; ``"single"`` for
            ``f(x, cos, sin, unsqueeze_dim=1) -> x`` (Gemma 3n/4, DeepSeek-V4); ``"complex"`` for
            ``f(xq, xk, freqs_cis) -> (xq, xk)`` with one complex tensor ``cos + i sin`` (Llama 4,
            DeepSeek-V2: the pairs are multiplied as complex numbers).
        form: the cos/sin form it takes (:data:`FORMS`).
        layout: the pair layout it rotates in (``"half"`` or ``"interleaved"``).
        sign: ``1``, or ``-1`` for code that rotates by minus the angle (nanochat's ``rotate_half``).
        deinterleave: the function takes interleaved pairs and returns them in half-split order
            (DeepSeek-V3's ``apply_rotary_pos_emb_interleave``): posenc's stand-in reorders the
            rotated features the same way before a half-split rotation.
        seq_first: a ``"complex"`` function that takes (batch, seq, heads, head_dim) tensors and
            broadcasts ``freqs_cis`` over the heads (Llama 4's ``freqs_cis[:, :, None, :]``), rather
            than (batch, heads, seq, head_dim) (DeepSeek-V2's ``freqs_cis.unsqueeze(1)``); or a
            ``"single"`` function with no ``unsqueeze_dim`` that takes (batch, seq, heads, rotary_dim)
            (GPT-J's, from its :class:`~posenc.integrations.hints.Hint`).
        method: a method of the attention class, called as ``self.<name>(...)`` (posenc's stand-in is
            set on the attention instance), rather than a global of the modeling module.
        optional_k: a pair function ``f(q, k=None, cos=None, sin=None, ...)`` that rotates and returns
            q alone when k is None (Qwen4-Exp's indexer calls it so).
        sin_first: a ``"single"`` function called ``f(x, sin, cos)`` (GPT-J's order, from its hint).
    """

    name: str
    arity: str
    form: str
    layout: str
    sign: int = 1
    deinterleave: bool = False
    seq_first: bool = False
    method: bool = False
    optional_k: bool = False
    sin_first: bool = False

    def describe(self) -> str:
        parts = [self.layout]
        if self.deinterleave:
            parts = ["interleaved pairs returned half-split"]
        if self.sign < 0:
            parts.append("by minus the angle")
        if self.arity == "complex":
            parts.append("(complex freqs_cis, " + ("seq first)" if self.seq_first else "heads first)"))
        elif self.seq_first:
            parts.append("(seq first)")
        if self.sin_first:
            parts.append("(called with sin before cos)")
        if self.method:
            parts.append("(a method of the attention class)")
        return " ".join(parts)


#: what a rotary function may do, tried in this order: (layout, sign, deinterleave)
ROTATIONS = (
    ("half", 1, False),
    ("interleaved", 1, False),
    ("half", 1, True),
    ("half", -1, False),
    ("interleaved", -1, False),
)

#: parameters a function may have after its tensors and cos/sin; posenc's stand-in takes the same
_EXTRA = {"position_ids": None, "unsqueeze_dim": 1}


def signature_of(fn: Any) -> inspect.Signature:
    """The signature a rotary callable is called with, through its wrappers: a plain function, a
    ``functools.wraps`` wrapper (its ``__wrapped__``), a ``functools.partial`` (what is left to pass),
    or an ``nn.Module`` whose ``forward`` is the function (``kernels``' ``Func`` modules, which
    ``transformers`` 5.25 makes of ``apply_rotary_pos_emb`` with ``@use_kernel_forward_from_hub``).

    Raises:
        TypeError, ValueError: the signature cannot be read.
    """
    if isinstance(fn, nn.Module):
        return inspect.signature(fn.forward)
    return inspect.signature(fn)


def kernels_function_of(fn: Any) -> Optional[Callable]:
    """The plain function inside a ``kernels`` ``Func`` module (``@use_kernel_forward_from_hub`` on a
    function), or ``None`` when ``fn`` is not one. Read from the module's ``forward`` closure."""
    if not (isinstance(fn, nn.Module) and hasattr(fn, "kernel_layer_name")):
        return None
    forward = getattr(type(fn), "forward", None)
    for cell in getattr(forward, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if inspect.isfunction(inner):
            return inner
    return None


def describe_callable(fn: Any) -> str:
    """What a rotary global is, in words, through its wrappers (said in a refusal)."""
    if isinstance(fn, functools.partial):
        bound = [*map(repr, fn.args), *(f"{k}={v!r}" for k, v in fn.keywords.items())]
        return f"functools.partial({describe_callable(fn.func)}, {', '.join(bound)})"
    inner = kernels_function_of(fn)
    if inner is not None:
        layer = getattr(fn, "kernel_layer_name", "?")
        return f"a kernels Func module (hub layer {layer!r}) around the function {inner.__qualname__}"
    if isinstance(fn, nn.Module):
        return f"an nn.Module {type(fn).__qualname__}"
    if inspect.isfunction(fn) and hasattr(fn, "__wrapped__"):
        return f"the function {fn.__qualname__}, wrapping {describe_callable(fn.__wrapped__)}"
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        return f"the function {fn.__qualname__}"
    return f"a {type(fn).__qualname__} object"


def _signature_problem(fn: Callable) -> Tuple[Optional[str], str]:
    """``(problem or None, arity)``: whether ``fn`` has a signature posenc's stand-in can copy."""
    try:
        params = list(signature_of(fn).parameters.values())
    except (TypeError, ValueError):
        return "its signature cannot be read", ""
    names = [p.name for p in params]
    if len(params) >= 4 and names[2:4] == ["cos", "sin"]:
        arity, fixed = "pair", 4
    elif len(params) >= 3 and names[1:3] == ["cos", "sin"]:
        arity, fixed = "single", 3
    elif len(params) == 3 and names[2].startswith("freqs"):
        arity, fixed = "complex", 3
    else:
        return f"it takes ({', '.join(names)}), not (q, k, cos, sin), (x, cos, sin) or (xq, xk, freqs_cis)", ""
    # a pair function may take k=None (and then cos and sin by keyword) to rotate q alone (Qwen4-Exp)
    optional = {1, 2, 3} if arity == "pair" and _optional_k(params) else set()
    if any(p.kind != p.POSITIONAL_OR_KEYWORD for p in params[:fixed]) or any(
        p.default is not p.empty for i, p in enumerate(params[:fixed]) if i not in optional
    ):
        return "its tensors and cos/sin are not plain required arguments", arity
    for p in params[fixed:]:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            return f"it takes *{p.name} or **{p.name}, which posenc's stand-in cannot pass on", arity
        if p.name not in _EXTRA or p.default != _EXTRA[p.name]:
            return f"its parameter {p.name}={p.default!r} is not one posenc's stand-in takes", arity
    return None, arity


def _optional_k(params: List[inspect.Parameter]) -> bool:
    """``f(q, k=None, cos=None, sin=None, ...)``: a pair function that rotates q alone when k is None."""
    return len(params) >= 4 and params[0].default is params[0].empty and all(p.default is None for p in params[1:4])


def _rotates_q_alone(fn: Callable, form: str, rotation, width: int) -> bool:
    """A function with an optional k, called without it, returns q rotated as with it."""
    q, _, cos, sin = _probe_tensors(width, 0, False)
    try:
        with torch.no_grad():
            out = fn(q.clone(), cos=expand(cos, form), sin=expand(sin, form))
    except Exception:  # it does not rotate q alone after all
        return False
    return isinstance(out, torch.Tensor) and _close(out, _reference(q, cos, sin, rotation, width))


def _probe_tensors(width: int, extra: int, seq_first: bool, seed: int = 0):
    # float32 whatever torch's default dtype: a model built under a float16 default (transformers'
    # dtype= does that while a model is made) must not see its rotation judged by float16 rounding
    gen = torch.Generator().manual_seed(seed)
    shape = (1, _PROBE_SEQ, 3, width + extra) if seq_first else (1, 3, _PROBE_SEQ, width + extra)
    q = torch.randn(shape, generator=gen, dtype=torch.float32)
    k = torch.randn(shape, generator=gen, dtype=torch.float32)
    angles = torch.rand(1, _PROBE_SEQ, width // 2, generator=gen, dtype=torch.float32) * 6.0 - 3.0
    return q, k, angles.cos(), angles.sin()


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(((a.double() - b.double()).abs() <= tol * (1 + b.double().abs())).all())


def deinterleaved(x: torch.Tensor, width: int) -> torch.Tensor:
    """``x`` with its first ``width`` features reordered from interleaved pairs to half-split."""
    return torch.cat((x[..., 0:width:2], x[..., 1:width:2], x[..., width:]), dim=-1)


def _reference(x: torch.Tensor, cos, sin, rotation: Tuple[str, int, bool], width: int) -> torch.Tensor:
    layout, sign, deinterleave = rotation
    if deinterleave:
        x = deinterleaved(x, width)
    return rotate_reference(x, cos, sign * sin, layout=layout, rotary_dim=width)


def _matches(
    fn: Callable, arity: str, form: str, rotation, width: int, takes_unsqueeze: bool, complex_seq_first: bool = False
) -> bool:
    # (seq first, extra features, must succeed): the extra features must pass through unchanged if
    # fn takes them at all; seq-first tensors with unsqueeze_dim=2 if fn has that parameter. A complex
    # function has no unsqueeze_dim: it is probed in the one orientation asked for
    if arity == "complex":
        cases = [(complex_seq_first, 0, True), (complex_seq_first, _PASS, False)]
    else:
        cases = [(False, 0, True), (False, _PASS, False)] + ([(True, 0, True)] if takes_unsqueeze else [])
    for seq_first, extra, required in cases:
        q, k, cos, sin = _probe_tensors(width, extra, seq_first)
        kwargs = {"unsqueeze_dim": 2} if seq_first and arity != "complex" else {}
        tensors = (q,) if arity == "single" else (q, k)
        angles = (torch.complex(cos, sin),) if arity == "complex" else (expand(cos, form), expand(sin, form))
        try:
            with torch.no_grad():
                out = fn(*(t.clone() for t in tensors), *angles, **kwargs)
        except Exception:  # a shape this function does not take: the model never calls it so
            if required:
                return False
            continue
        if arity == "single":
            out = (out,)
        if not (isinstance(out, tuple) and len(out) == len(tensors) and all(isinstance(t, torch.Tensor) for t in out)):
            return False
        t = (lambda x: x.transpose(1, 2)) if seq_first else (lambda x: x)
        want = [t(_reference(t(x), cos, sin, rotation, width)) for x in tensors]
        if not all(_close(got, w) for got, w in zip(out, want)):
            return False
    return True


@on_the_cpu
def classify_function(
    fn: Callable, forms: Tuple[str, ...] = FORMS, width: int = 8, name: Optional[str] = None
) -> Tuple[Optional[RotaryFunction], str]:
    """``(RotaryFunction, "")`` for a rotary function posenc can stand in for, or ``(None, why not)``.

    The probe rotates heads-first tensors of ``width`` features (and, if ``fn`` accepts them,
    ``width + 4`` features whose last 4 must come back unchanged; and seq-first tensors with
    ``unsqueeze_dim=2`` if ``fn`` has that parameter) and compares with the reference rotation for
    each of :data:`ROTATIONS`, with cos/sin in each of ``forms``.
    """
    if name is None:
        name = str(getattr(fn, "__name__", None) or getattr(kernels_function_of(fn), "__name__", type(fn).__name__))
    problem, arity = _signature_problem(fn)
    if problem is not None:
        return None, problem
    takes_unsqueeze = "unsqueeze_dim" in signature_of(fn).parameters
    # a complex function takes the complex form only; a cos/sin function every other form
    usable = tuple(f for f in forms if (f == "complex") == (arity == "complex"))
    if not usable:
        if arity == "complex":
            return None, "it takes one complex freqs_cis, but the rotary module returns a (cos, sin) pair"
        return None, "it takes cos and sin, but the rotary module returns one complex tensor"
    orientations = (False, True) if arity == "complex" else (False,)
    for form in usable:
        for rotation in ROTATIONS:
            for seq_first in orientations:
                if _matches(fn, arity, form, rotation, width, takes_unsqueeze, seq_first):
                    layout, sign, deinterleave = rotation
                    optional_k = arity == "pair" and _optional_k(list(signature_of(fn).parameters.values()))
                    if optional_k and not _rotates_q_alone(fn, form, rotation, width):
                        return None, "it takes k=None, but called without k it does not return q rotated"
                    found = RotaryFunction(
                        name, arity, form, layout, sign, deinterleave, seq_first, optional_k=optional_k
                    )
                    return found, ""
    said = " or ".join(repr(f) for f in usable)
    trailing = _trailing_rotation(fn, arity, usable, width)
    if trailing is not None:
        return None, (
            f"it rotates the last features of the head ({trailing} pairs, after the features it passes "
            "through), and posenc's rotation rotates the first ones"
        )
    return None, f"on a probe with cos/sin in the {said} form it matches no rotation posenc has"


def classify_called(
    fn: Callable, name: str, forms: Tuple[str, ...] = FORMS, hint: Optional[Hint] = None
) -> Tuple[Optional[RotaryFunction], str]:
    """:func:`classify_function` for a global the attention calls, told what ``hint`` says when it
    names this global (GPT-J's ``f(x, sin, cos)`` on seq-first tensors is probed as the
    ``f(x, cos, sin)`` on heads-first ones it amounts to)."""
    if hint is None or name != hint.function:
        return classify_function(fn, forms=forms, name=name)
    found, why = classify_function(_as_probed(fn, hint), forms=forms, name=name)
    if found is None:
        return None, f"told by its hint ({hint}), {why}"
    return dataclasses.replace(found, seq_first=hint.seq_first, sin_first=hint.sin_first), ""


def _as_probed(fn: Callable, hint: Hint) -> Callable:
    """``fn`` as the probe calls a one-tensor function: ``f(x, cos, sin)``, x (batch, heads, seq, width)."""

    def hinted(x, cos, sin):
        if hint.seq_first:
            x = x.transpose(1, 2)  # (batch, seq, heads, width)
        out = fn(x, sin, cos) if hint.sin_first else fn(x, cos, sin)
        return out.transpose(1, 2) if hint.seq_first and isinstance(out, torch.Tensor) else out

    return hinted


def _trailing_rotation(fn: Callable, arity: str, forms: Tuple[str, ...], width: int) -> Optional[str]:
    """The layout in which ``fn`` rotates the *last* ``width`` features of a wider head (DeepSeek-V4's
    ``[nope | rope]`` heads), or ``None``: said in a refusal, which posenc's stand-in cannot do."""
    if arity == "complex":
        return None
    q, k, cos, sin = _probe_tensors(width, _PASS, False)
    tensors = (q,) if arity == "single" else (q, k)
    for form in forms:
        try:
            with torch.no_grad():
                out = fn(*(t.clone() for t in tensors), expand(cos, form), expand(sin, form))
        except Exception:  # a shape it does not take
            continue
        out = (out,) if arity == "single" else out
        if not (isinstance(out, tuple) and all(isinstance(t, torch.Tensor) for t in out)):
            continue
        for layout, sign, deinterleave in ROTATIONS:
            if deinterleave:
                continue
            want = [
                torch.cat((x[..., :_PASS], rotate_reference(x[..., _PASS:], cos, sign * sin, layout=layout)), dim=-1)
                for x in tensors
            ]
            if all(_close(got, w) for got, w in zip(out, want)):
                return layout
    return None


def _unwrapped(fn: Callable) -> Callable:
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def code_names(fn: Callable) -> set:
    """The global and attribute names ``fn``'s code reads (through its ``functools.wraps`` decorators)."""
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return set(getattr(getattr(fn, "__code__", None), "co_names", ()))


def _loaded_names(fn: Callable) -> Tuple[frozenset, frozenset]:
    """``(globals, attributes)`` that ``fn``'s code (through ``functools.wraps`` wrappers, and the code
    nested in it) loads: a global name is read by ``LOAD_GLOBAL``, an attribute by ``LOAD_ATTR`` or
    ``LOAD_METHOD``."""
    code = getattr(_unwrapped(fn), "__code__", None)
    return _names_loaded_by(code) if code is not None else (frozenset(), frozenset())


@functools.lru_cache(maxsize=4096)
def _names_loaded_by(code: types.CodeType) -> Tuple[frozenset, frozenset]:
    # code objects are immutable: what one loads is read once per process (patch reads every method
    # of every class of the model on each call)
    globals_: set = set()
    attributes: set = set()
    todo = [code]
    while todo:
        code = todo.pop()
        for ins in dis.get_instructions(code):
            if ins.opname == "LOAD_GLOBAL":
                globals_.add(ins.argval)
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attributes.add(ins.argval)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return frozenset(globals_), frozenset(attributes)


@functools.lru_cache(maxsize=None)
def methods_reading(cls: Any, names: frozenset) -> Tuple[str, ...]:
    """Names of ``cls``'s plain methods, written in its modeling module, whose code reads one of
    ``names`` as a global: ``forward``, and any helper it calls that rotates too."""
    out = []
    for attr in dir(cls):
        fn = inspect.getattr_static(cls, attr, None)
        if inspect.isfunction(fn) and _unwrapped(fn).__module__ == cls.__module__:
            if _loaded_names(fn)[0] & names:
                out.append(attr)
    return tuple(sorted(out))


def _class_globals(cls: type) -> set:
    """The globals that ``cls``'s methods written in its modeling module read (``forward`` through its
    wrappers, and the helpers beside it)."""
    names: set = set()
    for attr in dir(cls):
        fn = inspect.getattr_static(cls, attr, None)
        if inspect.isfunction(fn) and (attr == "forward" or _unwrapped(fn).__module__ == cls.__module__):
            names |= _loaded_names(fn)[0]
    return names


def looks_rotary(name: str) -> bool:
    """A name the probe considers: one that says it rotates (``apply_rotary_pos_emb``, ``apply_rope``)."""
    return "rot" in name or "rope" in name


def rotary_functions_called(module: types.ModuleType, cls: type) -> List[str]:
    """Global names of ``module`` that ``cls.forward`` (or another method of ``cls`` written beside it)
    reads, that look rotary and are callables it could call: a function, a ``functools`` wrapper or
    partial, or a ``kernels`` ``Func`` module (``transformers`` 5.25's ``apply_rotary_pos_emb``). What
    each does is the probe's to say."""
    if getattr(cls, "forward", None) is None:
        return []
    found = []
    for name in sorted(_class_globals(cls)):
        fn = vars(module).get(name)
        if looks_rotary(name) and callable(fn) and not isinstance(fn, type):
            found.append(name)
    return found


def rotary_methods_called(cls: type) -> List[str]:
    """Names of ``cls``'s own methods (plain or static) that ``cls.forward`` calls on ``self`` and that
    look rotary (an attention class that keeps its rotation as ``self.apply_rope(q, k, cos, sin)``)."""
    forward = getattr(cls, "forward", None)
    if forward is None:
        return []
    _, attributes = _loaded_names(forward)
    found = []
    for name in sorted(attributes):
        static = inspect.getattr_static(cls, name, None)
        if (
            looks_rotary(name)
            and name != "forward"
            and (isinstance(static, staticmethod) or inspect.isfunction(static))
        ):
            found.append(name)
    return found


def rotary_globals_read(module: types.ModuleType, cls: type) -> Dict[str, str]:
    """``name -> what it is`` for every global that ``cls.forward`` reads and that looks rotary,
    callable or not (what a refusal names)."""
    names = _class_globals(cls) if getattr(cls, "forward", None) is not None else set()
    return {n: describe_callable(vars(module)[n]) for n in sorted(names) if looks_rotary(n) and n in vars(module)}


# -- the census ------------------------------------------------------------------------------------------
def _rotary_classes(module: types.ModuleType) -> List[type]:
    return [
        c
        for name, c in vars(module).items()
        if name.endswith("RotaryEmbedding") and isinstance(c, type) and c.__module__ == module.__name__
    ]


def rotary_causal_lm_types() -> Dict[str, str]:
    """``model_type -> modeling module name`` for every causal-LM model type of the installed
    ``transformers`` whose modeling module defines a ``*RotaryEmbedding`` class, sorted by type.

    The causal-LM types are ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``; a type's modeling module is that
    of its causal-LM class (several types share one, e.g. ``exaone`` runs ``LlamaForCausalLM``).
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out: Dict[str, str] = {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        name = rotary_causal_lm_module(model_type)
        if name is not None:
            out[model_type] = name
    return out


def rotary_causal_lm_module(model_type: str) -> Optional[str]:
    """The modeling module name of ``model_type`` if it is one of :func:`rotary_causal_lm_types`
    (a causal-LM type whose modeling module defines a ``*RotaryEmbedding`` class), else ``None``;
    imports only that type's module."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    class_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if not isinstance(class_name, str):
        return None
    try:
        module = importlib.import_module(getattr(transformers, class_name).__module__)
    except Exception:  # a model whose optional dependencies are missing: not importable here
        return None
    return module.__name__ if _rotary_classes(module) else None


@dataclass(frozen=True)
class ModuleCensus:
    """What the probe finds in one modeling module, without building a model.

    Attributes:
        module: the modeling module's name.
        functions: the llama-style rotary functions its attention classes call.
        refused: ``(name, why)`` for functions the attention calls that match no rotation.
    """

    module: str
    functions: Tuple[RotaryFunction, ...]
    refused: Tuple[Tuple[str, str], ...]

    @property
    def kind(self) -> str:
        """``"llama-style"``, ``"other"`` (calls only functions that match nothing) or ``"none found"``."""
        if self.functions and not self.refused:
            return "llama-style"
        if self.functions or self.refused:
            return "mixed" if self.functions else "other"
        return "none found"


def _method_probe(cls: type, name: str) -> Callable:
    """A class's rotary method as the probe calls it without an instance: a static method itself, a
    plain one with ``self=None`` (one that reads its instance fails the probe, and is refused)."""
    static = inspect.getattr_static(cls, name)
    if isinstance(static, staticmethod):
        return static.__func__
    bound = functools.partial(static, None)
    functools.update_wrapper(bound, static)  # its name and signature, less self
    return bound


def census_module(module_name: str, hint: Optional[Hint] = None) -> ModuleCensus:
    """Classify the rotary functions that the attention classes of ``module_name`` call: the module's
    globals they read and their own rotary methods (``hint``: what :data:`~posenc.integrations.hints.HINTS`
    says of the family)."""
    module = importlib.import_module(module_name)
    called: Dict[Tuple[str, bool], Callable] = {}
    for cls in vars(module).values():
        if isinstance(cls, type) and cls.__module__ == module.__name__ and issubclass(cls, nn.Module):
            for name in rotary_functions_called(module, cls):
                called[(name, False)] = vars(module)[name]
            for name in rotary_methods_called(cls):
                called.setdefault((name, True), _method_probe(cls, name))
    found, refused = [], []
    for (name, method), fn in sorted(called.items()):
        pair, why = classify_function(fn, name=name) if method else classify_called(fn, name, hint=hint)
        if pair is not None:
            found.append(dataclasses.replace(pair, method=method))
        else:
            refused.append((name, f"{describe_callable(fn)}: {why}"))
    return ModuleCensus(module_name, tuple(found), tuple(refused))


def census() -> Dict[str, ModuleCensus]:
    """``model_type -> ModuleCensus`` for :func:`rotary_causal_lm_types`."""
    cache: Dict[Tuple[str, Optional[Hint]], ModuleCensus] = {}
    out = {}
    for model_type, module_name in rotary_causal_lm_types().items():
        key = (module_name, HINTS.get(model_type))
        if key not in cache:
            cache[key] = census_module(*key)
        out[model_type] = cache[key]
    return out


def supported_model_types() -> List[str]:
    """The causal-LM model types of the installed ``transformers`` whose rotary code the probe reads
    (their :func:`census` finds a rotation for every function their attention calls), sorted.

    :func:`posenc.integrations.transformers.patch` reads a model of any type from its own code, and
    may still refuse one of these for its configuration (tables its config does not describe, ALiBi
    Falcon, a rotation that breaks the probe forward); docs/transformers.md lists every type's result.
    """
    return sorted(t for t, c in census().items() if c.kind == "llama-style")


# -- one model ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Discovered:
    """What :func:`discover` found in one model.

    Attributes:
        module: its modeling module (the one its rotary modules are defined in).
        functions: the rotary functions its attention modules call, each with the form and layout
            the probe found.
        form: the form the model's rotary modules return cos/sin in.
        mrope: the rotary module is M-RoPE's (``mrope_section``): three position streams
            (temporal, height, width); see :class:`posenc.integrations.tables.StreamTables`.
        mrope_streams: for M-RoPE, the stream (0 t, 1 h, 2 w) each rotation pair reads, as the
            module's own output shows it (:func:`probe_mrope_streams`).
        layer_types: the layer types the rotary module computes tables for, one rope dict each
            (Gemma 3's local and global bases: ``forward(x, position_ids, layer_type)``); empty for
            a module with one set of tables.
        sin_first: the rotary modules return ``(sin, cos)`` (GPT-J's order, from its hint).
    """

    module: str
    functions: Tuple[RotaryFunction, ...]
    form: str
    mrope: bool = False
    layer_types: Tuple[str, ...] = ()
    mrope_streams: Tuple[int, ...] = ()
    sin_first: bool = False


def _rotary_children(model: nn.Module) -> List[nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]


@on_the_cpu
def discover(model: nn.Module) -> Discovered:
    """Find how ``model``'s code applies RoPE; see the module docstring.

    Raises:
        UnsupportedModelError: no rotary module, rotary modules from more than one modeling module,
            no attention module calling a function of that module, a called rotary function that
            matches no rotation, or a rotary module that cannot be called as ``(x, position_ids)``.
    """
    name = type(model).__name__
    rotary = _rotary_children(model)
    if not rotary:
        raise UnsupportedModelError(
            f"found no rotary embedding module (a *RotaryEmbedding) in this {name}" + _why_none(model)
        )
    module_names = sorted({type(m).__module__ for m in rotary})
    if len(module_names) != 1:
        raise UnsupportedModelError(
            f"this {name} has rotary embedding modules from {len(module_names)} modeling modules "
            f"({module_names}); posenc patches models whose rotary code lives in one"
        )
    module = importlib.import_module(module_names[0])
    called: Dict[Tuple[str, bool], Callable] = {}
    read: Dict[str, str] = {}
    for m in model.modules():
        if type(m).__module__ == module.__name__:
            for fname in rotary_functions_called(module, type(m)):
                called[(fname, False)] = vars(module)[fname]
            for fname in rotary_methods_called(type(m)):
                called.setdefault((fname, True), getattr(m, fname))  # bound: probed with its instance
            read.update(rotary_globals_read(module, type(m)))
    if not called:
        seen = "; ".join(f"{n}: {what}" for n, what in read.items())
        raise UnsupportedModelError(
            f"no attention module of this {name} calls a rotary function of {module.__name__} (a global or a "
            "method whose name says it rotates)"
            + (f"; it reads {seen}, none of which posenc can call" if seen else "")
            + "; its rotary code is inside the attention forward itself, where posenc cannot stand in for it"
        )
    config = getattr(model, "config", None)
    hint = HINTS.get(getattr(config, "model_type", None))  # type: ignore[arg-type]
    layer_types = rotary_layer_types(rotary[0], config)
    form, outputs = rotary_output_form(probe_copy(rotary[0]), layer_types[0] if layer_types else None, config=config)
    functions = []
    for (fname, method), fn in sorted(called.items()):
        if method:
            function, why = classify_function(fn, forms=(form,), name=fname)
        else:
            function, why = classify_called(fn, fname, forms=(form,), hint=hint)
        if function is None:
            where = f"self.{fname}" if method else f"{module.__name__}.{fname}"
            raise UnsupportedModelError(
                f"this {name}'s attention calls {where}, {describe_callable(fn)}, which is not a rotation "
                f"posenc can stand in for: {why}"
            )
        functions.append(dataclasses.replace(function, method=method))
    mrope = any(getattr(m, "mrope_section", None) is not None for m in rotary)
    streams: Tuple[int, ...] = ()
    if mrope:
        probed = {probe_mrope_streams(probe_copy(m), form) for m in rotary}
        if len(probed) != 1:
            raise UnsupportedModelError(f"this {name}'s M-RoPE modules give their pairs different streams")
        streams = probed.pop()
    sin_first = any(f.sin_first for f in functions)
    return Discovered(module.__name__, tuple(functions), form, mrope, layer_types, streams, sin_first)


def probe_mrope_streams(rotary: nn.Module, form: str) -> Tuple[int, ...]:
    """The position stream each rotation pair of an M-RoPE module reads, from its own output.

    Three calls, each with one stream at positions ``1..16`` and the other two at 0: a pair whose sin
    is non-zero in call ``s`` reads stream ``s`` (sin of a zero angle is exactly zero, whatever the
    scaling). Every pair must read exactly one stream.

    Raises:
        UnsupportedModelError: the module cannot be called with (3, 1, seq) positions, or a pair reads
            no stream or several.
    """
    reads = []
    for stream in range(3):
        positions = torch.zeros(3, 1, _TABLE_POSITIONS, dtype=torch.long)
        positions[stream, 0] = torch.arange(1, _TABLE_POSITIONS + 1)
        try:
            _, sin, _ = _call_rotary(rotary, positions)
        except UnsupportedModelError:
            raise
        except Exception as exc:
            raise UnsupportedModelError(
                f"{type(rotary).__name__} cannot be called with M-RoPE position ids (3, batch, seq): "
                f"{type(exc).__name__}: {exc}"
            ) from None
        sin = halve(sin, form)
        reads.append((sin != 0).reshape(-1, sin.shape[-1]).any(0))
    table = torch.stack(reads)  # (3, pairs)
    wrong = (table.sum(0) != 1).nonzero().flatten().tolist()
    if wrong:
        how = "several" if table[:, wrong[0]].any() else "no"
        raise UnsupportedModelError(
            f"{type(rotary).__name__}'s M-RoPE pairs {wrong[:8]} read {how} position streams; posenc gives "
            "each pair one of temporal, height and width"
        )
    return tuple(int(s) for s in table.int().argmax(0).tolist())


def _why_none(model: nn.Module) -> str:
    """Why a model of a rotary family has no rotary module: the config flags that switch it off."""
    module = inspect.getmodule(type(model))
    defined = sorted(c.__name__ for c in _rotary_classes(module)) if module is not None else []
    if not defined:
        return ""
    config = getattr(model, "config", None)
    fields = vars(config) if config is not None else {}
    off = sorted(k for k, v in fields.items() if v is False and ("rope" in k or "rotary" in k))
    flags = f" ({', '.join(f'{k}=False' for k in off)})" if off else ""
    return (
        f"; its modeling module defines {', '.join(defined)}, but this config builds the model without "
        f"one{flags}: the model uses no rotary positions, so there is nothing to patch"
    )


def rotary_layer_types(rotary: nn.Module, config) -> Tuple[str, ...]:
    """The layer types a rotary module keeps tables for, if its ``forward`` takes ``layer_type``."""
    try:
        takes = "layer_type" in inspect.signature(rotary.forward).parameters
    except (TypeError, ValueError):
        takes = False
    if not takes:
        return ()
    kinds = getattr(rotary, "layer_types", None) or getattr(config, "layer_types", None) or ()
    kinds = [k for k in dict.fromkeys(kinds) if isinstance(k, str)]
    rope_dicts = getattr(getattr(rotary, "config", config), "rope_parameters", None)
    if isinstance(rope_dicts, dict):
        kinds = [k for k in kinds if rope_dicts.get(k) is not None]  # a type without rope: NoPE layers
    if not kinds:
        raise UnsupportedModelError(
            f"{type(rotary).__name__} takes a layer_type, but neither it nor the config names the layer types"
        )
    return tuple(kinds)


def _call_rotary(
    rotary: nn.Module, positions: torch.Tensor, layer_type: Optional[str] = None, config: Any = None
) -> Tuple[torch.Tensor, torch.Tensor, bool]:
    """``(cos, sin, complex)`` of a rotary module at ``positions``, float64 on the CPU; ``complex``
    says the module returned one complex tensor ``cos + i sin``.

    A module on the meta device has no values to read: it is checked as the family's code builds it
    from its config (its own, else the model's ``config``) on the CPU, which is what ``to_empty()`` +
    ``init_weights()`` give it back.
    """
    if any(t.is_meta for t in rotary.buffers()):
        rotary = rebuilt_on_cpu(rotary, config)
    buffers = [b for b in rotary.buffers() if b.is_floating_point()]
    device = buffers[0].device if buffers else torch.device("cpu")
    x = torch.zeros(1, positions.shape[-1], 1, dtype=torch.float32, device=device)
    with torch.no_grad(), hooks_suspended(rotary):
        extra = () if layer_type is None else (layer_type,)
        out = rotary(x, positions.to(device), *extra)
    is_complex = isinstance(out, torch.Tensor) and out.is_complex()
    if is_complex:  # freqs_cis = cos + i sin (Llama 4)
        out = (out.real, out.imag)
    if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        raise UnsupportedModelError(
            f"{type(rotary).__name__}(x, position_ids) returns {type(out).__name__}, not the (cos, sin) pair "
            "or the complex cos + i sin posenc stands in for"
        )
    return out[0].detach().to("cpu", torch.float64), out[1].detach().to("cpu", torch.float64), is_complex


#: the hook tables of a module that a probe's call suspends: what ``register_forward_hook`` and
#: ``register_forward_pre_hook`` fill (a probe runs under ``no_grad``, so no backward hook fires)
_FORWARD_HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks")


@contextlib.contextmanager
def hooks_suspended(module: nn.Module) -> Iterator[None]:
    """``module`` and every module inside it with their forward hooks and pre-hooks set aside while a
    probe calls them, and put back after, however the call ends: a probe is posenc reading the model,
    not a forward of the user's, so a hook that records activations, counts calls or changes outputs
    sees nothing of it. A hook registered during the call (and removed by its handle) goes with the
    set-aside table."""
    saved = []
    for m in module.modules():
        for name in _FORWARD_HOOK_TABLES:
            table = m.__dict__.get(name)
            if table:
                saved.append((m, name, table))
                m.__dict__[name] = type(table)()
    try:
        yield
    finally:
        for m, name, table in reversed(saved):
            m.__dict__[name] = table


def probe_copy(rotary: nn.Module) -> nn.Module:
    """A copy of a rotary module to call in a probe: calling the model's own would change what a
    length-dependent module caches (dynamic NTK's frequencies for the longest call, the LongRoPE
    frequencies transformers' Phi-3 module sets on its first call). A module on the meta device
    holds nothing to change (it is rebuilt on the CPU when called)."""
    return rotary if any(t.is_meta for t in rotary.buffers()) else copy.deepcopy(rotary)


def rebuilt_on_cpu(rotary: nn.Module, config: Any = None) -> nn.Module:
    """A fresh copy of a rotary module, built by its own class on the CPU from its ``config`` (else from
    the ``config`` given: the model's, for a module that keeps none, as GPT-J's)."""
    config = getattr(rotary, "config", None) or config
    if config is None:
        raise UnsupportedModelError(
            f"{type(rotary).__name__} is on the meta device and has no config to rebuild it from, so its "
            "tables cannot be checked; patch the model once its weights are materialised"
        )
    try:
        with torch.device("cpu"):
            return type(rotary)(config=config)
    except Exception as exc:
        raise UnsupportedModelError(
            f"{type(rotary).__name__} is on the meta device and cannot be rebuilt from its config on the CPU "
            f"to check its tables: {type(exc).__name__}: {exc}"
        ) from None


def rotary_output_form(
    rotary: nn.Module, layer_type: Optional[str] = None, positions: Optional[torch.Tensor] = None, config: Any = None
) -> Tuple[str, Tuple[torch.Tensor, torch.Tensor]]:
    """``(form, (cos, sin))``: the form of a rotary module's output at ``positions`` (float64;
    default: positions 0..15, shape (1, 16)).

    The form is read from the output itself: ``complex`` for one complex tensor ``cos + i sin``,
    ``cat`` if its two halves agree, ``interleave`` if its even and odd features do, else ``half``
    (a module that returns one entry per frequency). ``config``: the model's, to rebuild a module on
    the meta device that keeps none.
    """
    if positions is None:
        positions = torch.arange(_TABLE_POSITIONS).unsqueeze(0)
    try:
        cos, sin, is_complex = _call_rotary(rotary, positions, layer_type, config)
    except UnsupportedModelError:
        raise
    except Exception as exc:
        raise UnsupportedModelError(
            f"{type(rotary).__name__} cannot be called as (x, position_ids): {type(exc).__name__}: {exc}"
        ) from None
    if is_complex:
        return "complex", (cos, sin)
    width = cos.shape[-1]
    if width % 2 == 0 and width >= 4:
        if torch.equal(cos[..., : width // 2], cos[..., width // 2 :]) and torch.equal(
            sin[..., : width // 2], sin[..., width // 2 :]
        ):
            return "cat", (cos, sin)
        if torch.equal(cos[..., 0::2], cos[..., 1::2]) and torch.equal(sin[..., 0::2], sin[..., 1::2]):
            return "interleave", (cos, sin)
    return "half", (cos, sin)


@on_the_cpu
def check_tables(model: nn.Module, rope, found: Discovered) -> None:
    """Refuse unless posenc's tables for ``rope`` equal every rotary module's own (see
    :func:`check_rotary_tables`), each in the form :func:`discover` found.

    ``rope`` is the :class:`posenc.RotaryEmbedding` built from the model's config, or for a module
    with :attr:`Discovered.layer_types` a dict ``layer_type -> RotaryEmbedding``.
    """
    check_rotary_tables(
        _rotary_children(model),
        rope,
        form=found.form,
        sin_first=found.sin_first,
        mrope_streams=found.mrope_streams,
        config=getattr(model, "config", None),
    )


@on_the_cpu
def check_rotary_tables(
    rotaries: List[nn.Module],
    rope,
    *,
    form: Optional[str] = None,
    sin_first: bool = False,
    mrope_streams: Tuple[int, ...] = (),
    config: Any = None,
) -> None:
    """Refuse unless posenc's tables for ``rope`` equal what each of ``rotaries`` computes now.

    Each module is called on positions ``0..15``; for a rope whose frequencies depend on the length
    (dynamic NTK, LongRoPE) also on positions ``0..15`` plus ``2 * original_max_position_embeddings - 1``,
    a call whose length switches ``transformers`` to its scaled frequencies (``max(position_ids) + 1``
    decides there), compared with posenc's frequencies for that length. The modules are probed as
    copies, so a length-dependent module's state (its cached frequencies) is not changed. The
    tolerance is float32 rounding of the angles (the family's module computes in float32, or in the
    dtype its ``inv_freq`` buffer was cast to).

    Args:
        rotaries: the model's own rotary embedding modules.
        rope: a :class:`posenc.RotaryEmbedding`, or a dict ``layer_type -> RotaryEmbedding`` for
            modules called as ``forward(x, position_ids, layer_type)``.
        form: the form every module must return cos/sin in (:data:`FORMS`); ``None`` takes each
            module's own.
        sin_first: the modules return ``(sin, cos)`` (GPT-J's order).
        mrope_streams: for M-RoPE, the stream each pair reads (see :func:`probe_mrope_streams`).
        config: the model's, to rebuild a module on the meta device that keeps none (GPT-J's).

    Raises:
        UnsupportedModelError: a module's width, frequencies, scale or form differ from posenc's.
    """
    ropes = rope if isinstance(rope, dict) else {None: rope}
    for rotary in rotaries:
        for layer_type, one in ropes.items():
            _check_one_table(rotary, one, form, layer_type, sin_first, mrope_streams, config)


def _probe_calls(rope: RotaryEmbedding) -> List[Tuple[torch.Tensor, Optional[int]]]:
    """The probe calls a rope's tables are checked with: ``(positions (1, n), length)``, ``length``
    ``None`` for a call posenc answers with its length-free tables.

    Positions 0..15; for a length-dependent rope, first a call shorter than its trained length (which
    puts ``transformers``' dynamic NTK back on its trained frequencies, whatever lengths it saw
    before), then positions 0..15 plus ``2 * original_max_position_embeddings - 1`` (a call of that
    length: ``max(position_ids) + 1`` decides there), where its frequencies change.
    """
    trained = int(getattr(rope.scaling, "original_max_position_embeddings", 0) or 0)
    if not rope.is_dynamic or rope.frozen_seq_len is not None or trained <= 1:
        return [(torch.arange(_TABLE_POSITIONS).unsqueeze(0), None)]
    length = 2 * max(trained, _TABLE_POSITIONS)
    short = torch.arange(min(_TABLE_POSITIONS, trained - 1)).unsqueeze(0)
    far = torch.cat((torch.arange(_TABLE_POSITIONS), torch.tensor([length - 1]))).unsqueeze(0)
    return [(short, None), (far, length)]


def _check_one_table(
    rotary: nn.Module,
    rope,
    form: Optional[str],
    layer_type: Optional[str],
    sin_first: bool = False,
    mrope_streams: Tuple[int, ...] = (),
    config: Any = None,
) -> None:
    if any(t.is_meta for t in rope.buffers()):  # a model on the meta device: the tables it will have
        rope = copy.deepcopy(rope).to_empty(device="cpu")
    name = type(rotary).__name__ + ("" if layer_type is None else f" ({layer_type!r} layers)")
    calls = _probe_calls(rope)
    rotary = probe_copy(rotary)
    buffers = [b for b in rotary.buffers() if b.is_floating_point()]
    eps = torch.finfo(buffers[0].dtype if buffers else torch.float32).eps
    tol = max(64 * eps * _TABLE_POSITIONS, 1e-5)
    for positions, length in calls:
        seen, (cos, sin) = rotary_output_form(rotary, layer_type, positions, config)
        if sin_first:
            cos, sin = sin, cos
        if form is not None and seen != form:
            raise UnsupportedModelError(
                f"{name} returns cos/sin in the {seen!r} form, another rotary module in {form!r}"
            )
        cos, sin = halve(cos, seen), halve(sin, seen)
        with torch.no_grad():
            if length is None:
                cos_p, sin_p = rope.cos_sin(positions)
            else:
                inv_freq, factor = rope.frequencies(length)
                cos_p, sin_p = rope_cos_sin(positions.to(inv_freq.device), inv_freq, factor, torch.float64)
        cos_p, sin_p = cos_p.to("cpu", torch.float64), sin_p.to("cpu", torch.float64)
        if cos.shape[-1] != cos_p.shape[-1]:
            raise UnsupportedModelError(
                f"{name} rotates {2 * cos.shape[-1]} features per head; posenc reads {2 * cos_p.shape[-1]} from "
                f"the config ({rope.extra_repr()})"
            )
        # rows 0..15 carry the frequencies and scale; the far row only sets the call's length (its
        # angle, near 2 * original_max_position_embeddings radians, is compared at its own rounding:
        # float32 at least, as the families form angles in float32 whatever their buffers' dtype)
        rows = torch.full((positions.shape[-1], 1), tol, dtype=torch.float64)
        if length is not None:
            rows[-1] = max(64 * max(eps, torch.finfo(torch.float32).eps) * length, tol)
        diff = torch.maximum((cos - cos_p).abs(), (sin - sin_p).abs()).reshape(-1, positions.shape[-1], cos.shape[-1])
        over = (diff.amax(0) - rows).amax()
        if not float(over) <= 0:
            err = float(diff.max())
            at = f"positions 0..{min(_TABLE_POSITIONS, positions.shape[-1]) - 1}" + (
                "" if length is None else f" and {length - 1}"
            )
            raise UnsupportedModelError(
                f"{name}'s cos/sin differ from posenc's tables for this config ({rope.extra_repr()}) by {err:.3g} "
                f"at {at} (allowed {tol:.1g}): its frequencies or scale come from something the config does not "
                "say (a config edited after the model was built, or code that reads other fields); posenc "
                "would rotate differently from the model, so it changes nothing"
            )
    if mrope_streams:
        _check_streams(rotary, rope, mrope_streams, seen, name, tol)


def _check_streams(rotary: nn.Module, rope, mrope_streams: Tuple[int, ...], form: str, name: str, tol: float) -> None:
    """M-RoPE: posenc's tables, each pair at its stream, equal the module's own on an image's streams."""
    t = torch.arange(_TABLE_POSITIONS)
    positions = torch.stack((t // 8, t % 5, (3 * t) % 7)) + 2  # (3, seq): three streams that differ
    with torch.no_grad():
        cos_p, sin_p = rope.cos_sin(positions)  # (3, seq, F): every stream's own table
    streams = torch.tensor(mrope_streams)
    cos_p = select_streams(cos_p.to("cpu", torch.float64), streams)
    sin_p = select_streams(sin_p.to("cpu", torch.float64), streams)
    cos, sin, _ = _call_rotary(rotary, positions.unsqueeze(1))
    cos, sin = halve(cos, form)[0], halve(sin, form)[0]
    err = max(float((cos - cos_p).abs().max()), float((sin - sin_p).abs().max()))
    if not err <= tol:
        raise UnsupportedModelError(
            f"{name}'s cos/sin on three differing M-RoPE streams differ from posenc's by {err:.3g} "
            f"(allowed {tol:.1g}): its streams are combined in a way posenc does not know"
        )


def layer_type_ropes(
    model: nn.Module,
    config,
    found: Discovered,
    kwargs_for: Optional[Callable[[str], Dict[str, Any]]] = None,
) -> Dict[str, RotaryEmbedding]:
    """``layer_type -> posenc.RotaryEmbedding`` from the config's rope dict for each layer type.

    Gemma 2/3-style local and global attention: one base (and scaling) per layer type, each its own
    exact tables. On the model's device; float64 tables for a float64 model, as for one set.
    ``kwargs_for(layer_type)`` gives the :class:`posenc.RotaryEmbedding` arguments (default: the
    config's, :func:`posenc.hf.rotary_kwargs_from_hf`; :func:`posenc.integrations.transformers.patch`
    passes the width the family's code rotates).
    """
    beside = rope_keys_beside_layer_types(config)
    if beside:
        warnings.warn(
            f"this {getattr(config, 'model_type', None)!r} config's rope dict has plain keys {beside} beside its "
            f"per-layer-type dicts; each layer type reads its own dict, so they change nothing, in posenc as "
            "in transformers",
            UserWarning,
            stacklevel=3,
        )
    ropes: Dict[str, RotaryEmbedding] = {}
    for layer_type in found.layer_types:
        try:
            if kwargs_for is None:
                kwargs = rotary_kwargs_from_hf(config, layer_type=layer_type, strict=False)
            else:
                kwargs = kwargs_for(layer_type)
            rope = RotaryEmbedding(**kwargs)
        except ValueError as exc:
            raise UnsupportedModelError(f"the rope dict of {layer_type!r} layers: {exc}") from None
        reference = next(model.parameters(), None)
        if reference is not None:
            rope = rope.to(device=reference.device)
            if reference.dtype == torch.float64:
                rope = rope.double()
        ropes[layer_type] = rope
    return ropes


def main() -> None:  # pragma: no cover - a report printer
    rows = census()
    kinds: Dict[str, int] = {}
    for model_type, c in rows.items():
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
        fns = ", ".join(f"{p.name}[{p.arity}, {p.form} -> {p.describe()}]" for p in c.functions)
        bad = "; ".join(f"{n}: {why}" for n, why in c.refused)
        print(f"{model_type:28s} {c.kind:11s} {fns} {bad}")
    print(f"{len(rows)} causal-LM model types with a rotary embedding: {kinds}")


if __name__ == "__main__":  # pragma: no cover
    main()
