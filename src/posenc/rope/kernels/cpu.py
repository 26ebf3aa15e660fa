"""The fused CPU rotation: ``rope_kernel.c``, compiled on first use and called through ``ctypes``.

Why this and not the alternatives (measured in ``benchmarks/cpu_candidates.py``, see
``docs/kernels.md``): the rotation is pure memory traffic, and only a loop that reads each element
of q and k once and writes it once reaches the in-place memory pass. torch ops, even chunked to stay
in cache, pay a dispatch per op per chunk; Inductor compiles per shape and dtype and re-checks guards
on every eager call; a ``torch.utils.cpp_extension`` build needs ninja and a minute of compiling
against the torch headers. The C file has no dependency beyond libc and POSIX threads, builds in
about a second with the system compiler, and is cached per source, compiler, flags and CPU.

The call passes one :class:`RopeArgs` struct, which mirrors ``posenc_rope_args`` in the C file: the
data pointer, dtype, shape and strides of every operand. The C side checks shapes, dtypes,
positions and memory overlap before it touches an element (see "Memory safety" in
``docs/kernels.md``), and :func:`rotate` turns a refusal into a ``ValueError`` or ``TypeError``.

When no compiler is found, the build fails, or ``POSENC_DISABLE_FUSED=1`` is set, :func:`library`
returns ``None`` after one warning and the caller uses the PyTorch reference. A cached library that
is corrupt or truncated is detected (by its recorded hash) and rebuilt.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .contract import DATA_DTYPES, check_ranks
from .overlap import resolve_lazy_inputs

#: The kernel's C source, shipped inside the package.
SOURCE_PATH = Path(__file__).with_name("rope_kernel.c")

#: dtype -> code understood by the C kernel (``DT_*`` in the C file); any other dtype is refused.
DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.float64: 3, torch.int64: 4, torch.int32: 5}

#: Below this many bytes of q and k together a single thread is faster than starting more.
PARALLEL_MIN_BYTES = 1 << 18

#: The one build command's flags. ``-ffp-contract=off -fno-tree-slp-vectorize``: no fused
#: multiply-adds, so results match the reference bit for bit; ``-Werror``: a warning is a bug here,
#: and a kernel that does not build leaves the reference in charge.
FLAGS = (
    "-std=gnu11",
    "-O3",
    "-ffp-contract=off",
    "-fno-tree-slp-vectorize",
    "-fPIC",
    "-shared",
    "-pthread",
    "-Wall",
    "-Wextra",
    "-Werror",
)
#: Tried first, dropped for compilers that do not know it.
NATIVE_FLAGS = ("-march=native",)

_lock = threading.Lock()
_state: Dict[str, Any] = {}
#: The loader's state, read by planned calls: ``STATE["lib"]`` is the loaded kernel once
#: :func:`library` has run; :func:`reset` clears it (the dict itself is never replaced).
STATE = _state


class FusedKernelUnavailable(RuntimeError):
    """The fused CPU kernel could not be built or loaded; the message says why."""


# -- the argument struct -----------------------------------------------------------------------------
def _strided(name: str, ndim: int, doc: str) -> Any:
    """A ctypes struct for one strided operand: data pointer, dtype code, ``ndim`` sizes and strides."""
    fields = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int64),
        ("shape", ctypes.c_int64 * ndim),
        ("stride", ctypes.c_int64 * ndim),
    ]
    return type(name, (ctypes.Structure,), {"__doc__": doc, "_fields_": fields})


Operand = _strided("Operand", 4, "A 4-d tensor: q, k, q_out or k_out, shape (batch, heads, seq, head_dim).")
Table = _strided("Table", 3, "cos or sin, shape (batch or 1, rows, rotary_dim // 2).")
Index = _strided("Index", 2, "positions, shape (batch or 1, seq); ``data`` NULL when absent (row s at position s).")


class RopeArgs(ctypes.Structure):
    """Mirror of ``posenc_rope_args`` in ``rope_kernel.c`` (shapes and strides in elements)."""

    _fields_ = [
        ("q", Operand),
        ("k", Operand),
        ("q_out", Operand),
        ("k_out", Operand),
        ("cos", Table),
        ("sin", Table),
        ("positions", Index),
        ("row_offset", ctypes.c_int64),
        ("rotary_dim", ctypes.c_int64),
        ("interleaved", ctypes.c_int64),
        ("inverse", ctypes.c_int64),
        ("threads", ctypes.c_int64),
        # written by the kernel
        ("error_a", ctypes.c_int64),
        ("error_b", ctypes.c_int64),
        ("error_value", ctypes.c_int64),
        ("threads_failed", ctypes.c_int64),
    ]


def _slots(structure: Any, prefix: str = "") -> List[str]:
    """Flattened names of the struct's 64-bit slots, in memory order."""
    names = []
    for name, kind in structure._fields_:
        if isinstance(kind, type) and issubclass(kind, ctypes.Structure):
            names += _slots(kind, f"{prefix}{name}.")
        elif isinstance(kind, type) and issubclass(kind, ctypes.Array):
            names += [f"{prefix}{name}[{i}]" for i in range(ctypes.sizeof(kind) // 8)]  # int64 items
        else:
            names.append(prefix + name)
    return names


#: Every field is 64 bits wide, so one ``struct.pack_into`` fills the struct (filling fields one
#: by one through ctypes costs several microseconds, which is most of a decode step).
SLOTS = _slots(RopeArgs)
_PACK = struct.Struct(f"={len(SLOTS) - 4}q")  # everything but the four result slots
if ctypes.sizeof(RopeArgs) != 8 * len(SLOTS):
    raise ImportError("posenc: RopeArgs has padding; it no longer mirrors posenc_rope_args")
#: What ``posenc_rope_abi()`` must return: the layout version and ``sizeof(posenc_rope_args)``.
ABI = 3 * 1000000 + ctypes.sizeof(RopeArgs)


# -- building ------------------------------------------------------------------------------------
def _compiler() -> str:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    raise FusedKernelUnavailable("no C compiler found (looked for $CC, cc, gcc, clang)")


def _cache_dir() -> Path:
    root = os.environ.get("POSENC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "posenc"
    )
    path = Path(root) / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, delete=True)
        probe.close()
    except OSError:
        path = Path(tempfile.gettempdir()) / f"posenc-kernels-{os.getuid() if hasattr(os, 'getuid') else 0}"
        path.mkdir(parents=True, exist_ok=True)
    return path


def _cpu_fingerprint() -> str:
    """Something that changes when ``-march=native`` would produce different code."""
    parts = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo") as f:
            parts += [line for line in f if line.startswith(("flags", "model name"))][:2]
    except OSError:
        pass
    return "|".join(parts)


def _compiler_version(cc: str) -> str:
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise FusedKernelUnavailable(f"the C compiler {cc} does not run ({exc})") from exc


def source() -> str:
    """The C source text."""
    try:
        return SOURCE_PATH.read_text()
    except OSError as exc:
        raise FusedKernelUnavailable(f"cannot read the kernel source {SOURCE_PATH} ({exc}); reinstall posenc") from exc


def build_command(cc: str, flags: Sequence[str], output: Path) -> List[str]:
    """The one command that builds the kernel (the tests build the sanitizer variant with it)."""
    return [cc, *flags, str(SOURCE_PATH), "-o", str(output)]


def _digest(path: Path) -> Optional[str]:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _intact(target: Path) -> bool:
    """The cached library exists and still has the hash recorded when it was built."""
    try:
        recorded = target.with_suffix(".sha256").read_text().strip()
    except OSError:
        return False
    return recorded == _digest(target)


def build(extra_flags: Sequence[str] = ()) -> Path:
    """Compile the kernel (or find it in the cache) and return the shared library's path.

    ``-march=native`` lets the compiler use every vector instruction of this CPU; a compiler that
    does not know the flag gets a second try without it. A cached library whose bytes no longer
    match the hash recorded at build time (truncated, corrupted) is built again.
    """
    if sys.platform == "win32":
        raise FusedKernelUnavailable("the fused CPU kernel is built for POSIX systems only")
    cc = _compiler()
    version = _compiler_version(cc)
    text = source()
    directory = _cache_dir()
    error: Optional[FusedKernelUnavailable] = None
    for native in (True, False):
        flags = [*FLAGS, *(NATIVE_FLAGS if native else ()), *extra_flags]
        key = hashlib.sha256("\0".join([text, cc, version, " ".join(flags), _cpu_fingerprint()]).encode()).hexdigest()[
            :20
        ]
        target = directory / f"posenc_rope_{key}.so"
        if _intact(target):
            return target
        try:
            _compile(cc, flags, directory, target)
            return target
        except FusedKernelUnavailable as exc:
            error = error or exc
    raise error or FusedKernelUnavailable("no build was attempted")


def _compile(cc: str, flags: Sequence[str], directory: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        out = Path(tmp) / target.name
        try:
            result = subprocess.run(build_command(cc, flags, out), capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise FusedKernelUnavailable(f"compiling {SOURCE_PATH} with {cc} failed ({exc})") from exc
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise FusedKernelUnavailable(
                f"compiling {SOURCE_PATH} with {cc} failed: {detail[0] if detail else 'no output'}"
            )
        digest = _digest(out)
        # atomic renames: concurrent builders never see a partial file; the hash goes last, so a
        # library without its hash is simply built again
        os.replace(out, target)
        sidecar = Path(tmp) / "digest"
        sidecar.write_text(f"{digest}\n")
        os.replace(sidecar, target.with_suffix(".sha256"))


def _load(path: Path) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(str(path))
        abi = lib.posenc_rope_abi
    except (OSError, AttributeError) as exc:
        raise FusedKernelUnavailable(f"cannot load the cached kernel {path} ({exc})") from exc
    abi.restype = ctypes.c_int64
    abi.argtypes = []
    if abi() != ABI:
        raise FusedKernelUnavailable(f"the cached kernel {path} has argument layout {abi()}, this posenc needs {ABI}")
    lib.posenc_rope.argtypes = [ctypes.POINTER(RopeArgs)]
    lib.posenc_rope.restype = ctypes.c_int
    return lib


def _discard(path: Path) -> None:
    for victim in (path, path.with_suffix(".sha256")):
        try:
            victim.unlink()
        except OSError:
            pass


def load_or_rebuild(extra_flags: Sequence[str] = ()) -> ctypes.CDLL:
    """Build (or find) and load the kernel; a cached library that will not load is rebuilt once."""
    path = build(extra_flags)
    try:
        return _load(path)
    except FusedKernelUnavailable:
        _discard(path)
    path = build(extra_flags)
    try:
        return _load(path)
    except FusedKernelUnavailable as exc:
        raise FusedKernelUnavailable(f"{exc}; it was rebuilt once and still does not load") from exc


def disabled_by_environment() -> bool:
    return os.environ.get("POSENC_DISABLE_FUSED", "").strip().lower() not in ("", "0", "false", "no")


def library() -> Optional[ctypes.CDLL]:
    """The loaded kernel, or ``None`` (with one warning per process) when it cannot be used."""
    if "lib" in _state:
        cached: Optional[ctypes.CDLL] = _state["lib"]
        return cached
    with _lock:
        if "lib" not in _state:
            lib, reason = None, None
            if disabled_by_environment():
                reason = "POSENC_DISABLE_FUSED is set"
            else:
                try:
                    lib = load_or_rebuild()
                except FusedKernelUnavailable as exc:
                    reason = str(exc)
            if lib is None:
                _state["reason"] = reason
                warnings.warn(
                    f"posenc: fused CPU RoPE kernel unavailable ({reason}); using the PyTorch reference",
                    RuntimeWarning,
                    stacklevel=3,
                )
            _state["lib"] = lib
    loaded: Optional[ctypes.CDLL] = _state["lib"]
    return loaded


def unavailable_reason() -> Optional[str]:
    """Why :func:`library` returned ``None``, or ``None`` if it has not, or has not been asked yet."""
    return _state.get("reason")


def reset() -> None:
    """Forget the loaded kernel so the next call builds or refuses again (used by tests)."""
    with _lock:
        _state.clear()


# -- calling -------------------------------------------------------------------------------------
_NAMES = ("q", "k", "q_out", "k_out", "cos", "sin", "positions")
_ERR_DTYPE, _ERR_SHAPE, _ERR_ROTARY_DIM, _ERR_STRIDE = 1, 2, 3, 4
_ERR_POS_NEGATIVE, _ERR_POS_RANGE, _ERR_OVERLAP, _ERR_SELF_OVERLAP = 5, 6, 7, 8


#: ``call(q, k, q_out, k_out, cos, cos_fields, sin, sin_fields, positions_fields, row_offset,
#: rotary_dim, interleaved, inverse) -> (status, args)``: see :func:`make_call`.
Call = Callable[..., Tuple[int, RopeArgs]]


def make_call(lib: ctypes.CDLL) -> Call:
    """The one ctypes packer: fill a :class:`RopeArgs` in one ``struct.pack_into`` and call the
    kernel. q, k, q_out, k_out are 4-d tensors (their dtype code, shape and strides are read here);
    the tables come as a tensor (for its data pointer) and its fields (dtype code, 3 sizes, 3
    strides: :func:`table_fields`, or computed per call); positions as its 6 fields (zeros when
    absent). Returns the kernel's status (0: done) and the struct, whose error slots explain a
    refusal. Both :func:`make_rotate` and :func:`make_decode` call through it."""
    fn = lib.posenc_rope
    codes = DTYPE_CODES
    pack = _PACK.pack_into
    new_args = RopeArgs
    threads_of = torch.get_num_threads

    def call(
        q: torch.Tensor,
        k: torch.Tensor,
        q_out: torch.Tensor,
        k_out: torch.Tensor,
        cos: torch.Tensor,
        cos_fields: Sequence[int],
        sin: torch.Tensor,
        sin_fields: Sequence[int],
        pos_fields: Sequence[int],
        row_offset: int,
        rotary_dim: int,
        interleaved: bool,
        inverse: bool,
    ) -> Tuple[int, RopeArgs]:
        nbytes = (q.numel() + k.numel()) * q.element_size()
        args = new_args()
        pack(
            args,
            0,
            q.data_ptr(),
            codes.get(q.dtype, -1),
            *q.shape,
            *q.stride(),
            k.data_ptr(),
            codes.get(k.dtype, -1),
            *k.shape,
            *k.stride(),
            q_out.data_ptr(),
            codes.get(q_out.dtype, -1),
            *q_out.shape,
            *q_out.stride(),
            k_out.data_ptr(),
            codes.get(k_out.dtype, -1),
            *k_out.shape,
            *k_out.stride(),
            cos.data_ptr(),
            *cos_fields,
            sin.data_ptr(),
            *sin_fields,
            *pos_fields,
            row_offset,
            rotary_dim,
            interleaved,
            inverse,
            threads_of() if nbytes >= PARALLEL_MIN_BYTES else 1,
        )
        return fn(args), args

    return call


def table_slots(t: torch.Tensor) -> Tuple[int, ...]:
    """A 2-d or 3-d table's slots after its data pointer: dtype code, 3 sizes, 3 strides (a 2-d
    table is one batch row of stride 0: no view of it is made)."""
    # spelled out rather than through table_geometry: this runs twice in every call
    if t.dim() == 2:
        return (DTYPE_CODES.get(t.dtype, -1), 1, *t.shape, 0, *t.stride())
    return (DTYPE_CODES.get(t.dtype, -1), *t.shape, *t.stride())


def make_rotate(lib: ctypes.CDLL) -> Callable[..., None]:
    """:func:`rotate` bound to ``lib`` (through the one packer, :func:`make_call`)."""
    call = make_call(lib)
    codes = DTYPE_CODES
    data_dtypes = DATA_DTYPES
    no_positions = (0, 0, 0, 0, 0, 0)

    def rotate_bound(
        q: torch.Tensor,
        k: torch.Tensor,
        q_out: torch.Tensor,
        k_out: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        *,
        interleaved: bool,
        rotary_dim: int,
        inverse: bool = False,
        positions: Optional[torch.Tensor] = None,
        row_offset: int = 0,
    ) -> None:
        try:
            on_cpu = (
                q.is_cpu
                and k.is_cpu
                and q_out.is_cpu
                and k_out.is_cpu
                and cos.is_cpu
                and sin.is_cpu
                and (positions is None or positions.is_cpu)
            )
        except AttributeError as exc:
            raise TypeError(f"the fused kernel takes tensors ({exc})") from None
        if not on_cpu:
            raise _not_on_cpu(q, k, q_out, k_out, cos, sin, positions)
        cos_rank, sin_rank = cos.dim(), sin.dim()
        if q.dim() != 4 or k.dim() != 4 or q_out.dim() != 4 or k_out.dim() != 4:
            check_ranks(q, k, q_out, k_out, cos, sin)  # raises
        if cos_rank not in (2, 3) or sin_rank not in (2, 3):
            check_ranks(q, k, q_out, k_out, cos, sin)  # raises
        if q.dtype not in data_dtypes:
            raise TypeError(f"q has dtype {q.dtype}; the fused kernel rotates float32, bfloat16, float16 or float64")
        if q.is_neg() or k.is_neg() or cos.is_neg() or sin.is_neg() or q_out.is_neg() or k_out.is_neg():
            q, k, cos, sin = resolve_lazy_inputs(q, k, cos, sin, q_out, k_out)
        if positions is None:
            pos: Sequence[int] = no_positions
        else:
            positions, pos = _position_slots(positions)
        status, args = call(
            q,
            k,
            q_out,
            k_out,
            cos,
            # a table's slots (table_slots, spelled out: this is every call's work)
            (codes.get(cos.dtype, -1), 1, *cos.shape, 0, *cos.stride())
            if cos_rank == 2
            else (codes.get(cos.dtype, -1), *cos.shape, *cos.stride()),
            sin,
            (codes.get(sin.dtype, -1), 1, *sin.shape, 0, *sin.stride())
            if sin_rank == 2
            else (codes.get(sin.dtype, -1), *sin.shape, *sin.stride()),
            pos,
            row_offset,
            rotary_dim,
            interleaved,
            inverse,
        )
        if status:
            # positions come last, so leaving them out when absent keeps every index the kernel reports
            operands = [t for t in (q, k, q_out, k_out, cos, sin, positions) if t is not None]
            raise _refusal(status, args, operands, rotary_dim, positions is None)

    return rotate_bound


def _not_on_cpu(*operands: Optional[torch.Tensor]) -> ValueError:
    """The refusal of operands not all on the CPU, naming every operand's device."""
    devices = [str(t.device) for t in operands if t is not None]
    return ValueError(f"the fused CPU kernel needs CPU tensors, got devices {devices}")


def _position_slots(positions: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, ...]]:
    """Positions as the kernel reads them (a lazy negation resolved) and their six slots: data
    pointer, dtype code, 2 sizes, 2 strides; raises ``ValueError`` unless they are 2-d."""
    if positions.dim() != 2:
        raise ValueError(f"positions must be 2-d (batch or 1, seq) here, got shape {tuple(positions.shape)}")
    if positions.is_neg():
        positions = positions.resolve_neg()
    return positions, (
        positions.data_ptr(),
        DTYPE_CODES.get(positions.dtype, -1),
        *positions.shape,
        *positions.stride(),
    )


#: (dtype code, 3 sizes, 3 strides) of cos, then of sin
TableFields = Tuple[Tuple[int, ...], Tuple[int, ...]]


def table_fields(cos: torch.Tensor, sin: torch.Tensor) -> Optional[TableFields]:
    """What :func:`make_decode`'s ``decode`` packs for ``cos`` and ``sin`` besides their data
    pointers: dtype code, shape and strides of each, or ``None`` when the kernel cannot read them
    (not plain 3-d CPU tensors, a lazy negation bit, a dtype it does not know).

    Computed once for tables whose metadata cannot change: a module's own views of its cache,
    which it never hands out. The data pointers are not in here; ``decode`` reads them every call.
    """
    for t in (cos, sin):
        if type(t) is not torch.Tensor or t.device.type != "cpu" or t.dim() != 3 or t.is_neg():
            return None
        if t.dtype not in (torch.float32, torch.float64):
            return None
    return (table_slots(cos), table_slots(sin))


#: ``decode(q, k, cos, sin, fields, offset, interleaved, rotary_dim) -> (q_out, k_out) or None``
Decode = Callable[..., Optional[Tuple[torch.Tensor, torch.Tensor]]]


def make_decode(lib: ctypes.CDLL) -> Decode:
    """The decode step's call, bound to ``lib``: rotate ``q``/``k`` by rows ``offset ..
    offset + seq - 1`` of whole cached tables into new outputs, with the least Python per call.

    ``decode(q, k, cos, sin, fields, offset, interleaved, rotary_dim)`` returns ``(q_out, k_out)``,
    or ``None`` for inputs it leaves to :func:`rotate` (which then explains any refusal): q or k
    not 4-d CPU tensors, or with a lazy negation bit, or anything the C side refuses. ``fields``
    is :func:`table_fields` of ``cos`` and ``sin``, computed once. The caller has ruled out what
    no kernel reads (tensor subclasses, functorch wrappers, ``torch.compile``) and autograd.

    Nothing is checked less than in :func:`rotate`: the C side checks dtypes, shapes, strides,
    the row bounds and memory overlap before it touches an element, and the checks done here in
    Python (device, rank, negation bit) are the ones :func:`rotate` does, with the tables' share
    done once by :func:`table_fields`.
    """
    call = make_call(lib)
    empty_like = torch.empty_like
    no_positions = (0, 0, 0, 0, 0, 0)

    def decode(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        fields: TableFields,
        offset: int,
        interleaved: bool,
        rotary_dim: int,
    ) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        if not (q.is_cpu and k.is_cpu) or q.dim() != 4 or k.dim() != 4 or q.is_neg() or k.is_neg():
            return None
        q_out, k_out = empty_like(q), empty_like(k)  # same shape, dtype and device as q, k
        status, _ = call(
            q, k, q_out, k_out, cos, fields[0], sin, fields[1], no_positions, offset, rotary_dim, interleaved, False
        )
        if status:
            return None  # refused before any element was touched
        return q_out, k_out

    return decode


def index_slots(positions: torch.Tensor) -> Tuple[int, ...]:
    """(B|1, S) or (S,) positions' slots after their data pointer: dtype code, 2 sizes, 2 strides
    (a 1-d tensor is one row of stride 0: no view of it is made)."""
    if positions.dim() == 2:
        return (DTYPE_CODES.get(positions.dtype, -1), *positions.shape, *positions.stride())
    return (DTYPE_CODES.get(positions.dtype, -1), 1, *positions.shape, 0, *positions.stride())


#: ``run(q, k, cos, sin, row_offset, positions) -> (q_out, k_out) or None``: see :func:`make_planned`.
Planned = Callable[..., Optional[Tuple[torch.Tensor, torch.Tensor]]]


def make_planned(
    lib: ctypes.CDLL,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    rotary_dim: int,
    interleaved: bool,
    *,
    inplace: bool = False,
    positions: Optional[torch.Tensor] = None,
    inverse: bool = False,
) -> Planned:
    """A call bound to one layout: the dtypes, shapes and strides of ``q``, ``k``, ``cos`` and
    ``sin`` (2-d or 3-d tables), and of ``positions`` ((B|1, S) or (S,), int64/int32) when rows are
    named by them, packed once here; ``run`` reads only the data pointers.

    ``run(q, k, cos, sin, row_offset, positions)`` is for operands of exactly this layout on the CPU,
    without a lazy negation bit (the caller keys its cache by that layout and checks the rest per
    call). Out of place it allocates the outputs with the strides ``torch.empty_like`` gives this
    layout, so the strides packed for them are theirs by construction; in place q and k are their
    own outputs, and autograd's version counters are bumped as any in-place op does. It returns
    ``(q_out, k_out)``, or ``None`` when the C side refuses the call (it still checks shapes,
    dtypes, strides, row bounds, every position and overlap, q and k one tensor in place included,
    before it touches an element), so that the general call can raise the explanation or take the
    path that rotates a shared tensor once. ``inverse``: the rotation by the negated angles.
    """
    fn = lib.posenc_rope
    pack = _PACK.pack_into
    new_args = RopeArgs
    threads_of = torch.get_num_threads
    empty_strided = torch.empty_strided
    bump = torch.autograd.graph.increment_version
    dtype = q.dtype
    code = DTYPE_CODES[dtype]
    q_shape, k_shape = tuple(q.shape), tuple(k.shape)
    if inplace:
        q_out_stride, k_out_stride = q.stride(), k.stride()
    else:
        q_out_stride, k_out_stride = torch.empty_like(q).stride(), torch.empty_like(k).stride()
    q_fields = (code, *q_shape, *q.stride())
    k_fields = (code, *k_shape, *k.stride())
    q_out_fields = (code, *q_shape, *q_out_stride)
    k_out_fields = (code, *k_shape, *k_out_stride)
    cos_fields, sin_fields = table_slots(cos), table_slots(sin)
    pos_fields = (0, 0, 0, 0, 0) if positions is None else index_slots(positions)
    parallel = (q.numel() + k.numel()) * q.element_size() >= PARALLEL_MIN_BYTES
    turn = int(bool(inverse))  # 1: the rotation by the negated angles (a backward's)

    def run(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        row_offset: int,
        positions: Optional[torch.Tensor] = None,
    ) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        if inplace:
            q_out, k_out = q, k
        else:
            q_out = empty_strided(q_shape, q_out_stride, dtype=dtype)
            k_out = empty_strided(k_shape, k_out_stride, dtype=dtype)
        args = new_args()
        pack(
            args,
            0,
            q.data_ptr(),
            *q_fields,
            k.data_ptr(),
            *k_fields,
            q_out.data_ptr(),
            *q_out_fields,
            k_out.data_ptr(),
            *k_out_fields,
            cos.data_ptr(),
            *cos_fields,
            sin.data_ptr(),
            *sin_fields,
            0 if positions is None else positions.data_ptr(),
            *pos_fields,
            row_offset,
            rotary_dim,
            interleaved,
            turn,
            threads_of() if parallel else 1,
        )
        if fn(args):
            return None
        if inplace:
            bump((q, k))  # as any in-place torch op does, so autograd notices if q or k was saved
        return q_out, k_out

    return run


def rotate(lib: ctypes.CDLL, *operands: torch.Tensor, **options: Any) -> None:
    """``make_rotate(lib)(q, k, q_out, k_out, cos, sin, *, interleaved, rotary_dim, inverse=False,
    positions=None, row_offset=0)``: write the rotation of ``q``/``k`` into ``q_out``/``k_out`` (each
    may be its own input). The signature is the bound kernel's (:func:`make_rotate`), which both
    fused kernels share (:data:`posenc.rope.kernels.Kernel`).

    Args:
        q, k, q_out, k_out: (B, Hq, S, D), (B, Hk, S, D), and the same shapes; one dtype among
            float32, bfloat16, float16, float64; any strides.
        cos, sin: (B or 1, rows, rotary_dim // 2) or (rows, rotary_dim // 2) in float32 (float64 when q
            is float64); any strides.
        positions: (B or 1, S) int64 or int32 rows of the tables, or ``None`` for row
            ``row_offset + s`` at position ``s`` (then ``0 <= row_offset <= rows - S``): a decode
            step passes the whole cached table and the number of tokens already in the KV cache.

    Inputs with PyTorch's lazy negation bit (``x.is_neg()``, e.g. ``z.conj().imag``) are read as
    their values (resolved first, a copy); an output with it is refused (``TypeError``), because the
    kernel writes raw memory.

    Anything else, an output that shares memory with another operand (other than being exactly its
    own input), or a position outside ``[0, rows)`` raises ``ValueError``/``TypeError`` before any
    element is read or written.
    """
    make_rotate(lib)(*operands, **options)


def _refusal(
    status: int, args: RopeArgs, tensors: Sequence[torch.Tensor], rotary_dim: int, by_offset: bool = False
) -> Exception:
    """The exception for a refused call: what was wrong, with the values, and what is allowed."""
    q, k, q_out, k_out = tensors[:4]

    def name(i: int) -> str:
        if i in (2, 3):
            source_ = tensors[i - 2]
            out = tensors[i]
            if out.data_ptr() == source_.data_ptr() and out.stride() == source_.stride():
                return f"{_NAMES[i - 2]} (written in place)"
        return _NAMES[i]

    a, b, value = args.error_a, args.error_b, args.error_value
    if status == _ERR_DTYPE:
        return TypeError(
            f"{name(a)} has dtype {tensors[a].dtype}; the fused kernel needs q, k, q_out "
            "and k_out of one dtype (float32, bfloat16, float16 or float64), cos and sin "
            "in float32 (float64 for float64 q), positions int32 or int64"
        )
    if status == _ERR_SHAPE:
        if a in (4, 5) and tensors[a].dim() == 2:
            b -= 1  # the kernel counts the dims of a 2-d table as those of a (1, rows, half) one
        return ValueError(
            f"{name(a)} has shape {tuple(tensors[a].shape)} (dim {b} is {value}), which "
            f"does not fit q {tuple(q.shape)}: allowed are k (B, Hk, S, D) with q's B, S, "
            "D; q_out and k_out of the shapes of q and k; cos and sin of one shape "
            f"(B or 1, rows, rotary_dim // 2 = {rotary_dim // 2}) with rows >= S when no "
            "positions are given; positions (B or 1, S)"
        )
    if status == _ERR_ROTARY_DIM:
        return ValueError(f"rotary_dim must be even and in [2, head_dim={q.shape[-1]}], got {value}")
    if status == _ERR_STRIDE:
        return ValueError(f"{name(a)} has a negative stride {value} in dim {b}; strides must be >= 0")
    if status == _ERR_POS_NEGATIVE and by_offset:
        return ValueError(f"row_offset must be >= 0, got {value}")
    if status == _ERR_POS_RANGE and by_offset:
        return ValueError(
            f"row_offset + seq - 1 must be < {b} (the number of table rows), got {value}; grow the "
            "table first (RotaryEmbedding.extend)"
        )
    if status == _ERR_POS_NEGATIVE:
        return ValueError(f"positions must be >= 0, got a minimum of {value}")
    if status == _ERR_POS_RANGE:
        return ValueError(
            f"positions must be < {b} (the number of table rows), got a maximum of "
            f"{value}; grow the table first (RotaryEmbedding.extend)"
        )
    if status == _ERR_OVERLAP:
        how = "may share memory (an overlap could not be ruled out)" if value else "share memory"
        return ValueError(
            f"{name(a)} and {name(b)} {how}: an output must not overlap any other "
            "operand, except that it may be exactly its own input (in place); pass "
            "separate tensors, or .clone() one of them"
        )
    if status == _ERR_SELF_OVERLAP:
        return ValueError(
            f"{name(a)} has elements that share memory (an expanded or otherwise "
            f"overlapping view, strides {tuple(tensors[a].stride())}), so writing it is "
            "ambiguous; pass a .contiguous() or .clone() copy"
        )
    return RuntimeError(f"the fused kernel refused the call with unknown status {status}")
