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
import functools
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
#: The loader's state: ``"lib"`` (the loaded library, or ``None``), ``"kernel"`` (it bound, see
#: :func:`kernel`) and ``"reason"`` (why there is none); :func:`reset` clears it.
_state: Dict[str, Any] = {}


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
_NO_POSITIONS = (0, 0, 0, 0, 0, 0)


def kernel() -> Optional[Callable[..., None]]:
    """The kernel bound to the loaded library (:func:`make_rotate`), or ``None`` (after one warning)
    when it cannot be built here; kept with the library, so :func:`reset` forgets both."""
    bound: Optional[Callable[..., None]] = _state.get("kernel")
    if bound is None:
        lib = library()
        if lib is None:
            return None
        bound = _state["kernel"] = make_rotate(lib)
    return bound


def make_rotate(lib: ctypes.CDLL) -> Callable[..., None]:
    """:func:`rotate` with its library bound: the kernel of :data:`posenc.rope.kernels.Kernel`'s
    calling convention, ``kernel(q, k, q_out, k_out, cos, sin, *, interleaved, rotary_dim, ...)``."""
    return functools.partial(rotate, lib)


def rotate(
    lib: ctypes.CDLL,
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
    """Write the rotation of ``q``/``k`` into ``q_out``/``k_out`` (each may be its own input).

    Args:
        lib: the loaded kernel (:func:`library`).
        q, k, q_out, k_out: (B, Hq, S, D), (B, Hk, S, D), and the same shapes; one dtype among
            float32, bfloat16, float16, float64; any strides.
        cos, sin: (B or 1, rows, rotary_dim // 2) or (rows, rotary_dim // 2) in float32 (float64 when q
            is float64); any strides.
        interleaved: the pair layout; rotary_dim: rotated features per head; inverse: rotate by the
            negated angles (the backward).
        positions: (B or 1, S) int64 or int32 rows of the tables, or ``None`` for row
            ``row_offset + s`` at position ``s`` (then ``0 <= row_offset <= rows - S``): a decode
            step passes the whole cached table and the number of tokens already in the KV cache.

    One :class:`RopeArgs` is filled with one ``struct.pack_into`` (data pointer, dtype, shape and
    strides of every operand) and handed to the C side, which checks shapes, dtypes, strides,
    every position and memory overlap before it touches an element; a refusal raises
    ``ValueError``/``TypeError`` naming the operand, with nothing written. Inputs with PyTorch's
    lazy negation bit (``x.is_neg()``, e.g. ``z.conj().imag``) are read as their values (resolved
    first, a copy); an output with it is refused (``TypeError``): the kernel writes raw memory.
    """
    try:
        on_cpu = q.is_cpu and k.is_cpu and q_out.is_cpu and k_out.is_cpu and cos.is_cpu and sin.is_cpu
    except AttributeError as exc:
        raise TypeError(f"the fused kernel takes tensors ({exc})") from None
    if not on_cpu or (positions is not None and not positions.is_cpu):
        devices = [str(t.device) for t in (q, k, q_out, k_out, cos, sin, positions) if t is not None]
        raise ValueError(f"the fused CPU kernel needs CPU tensors, got devices {devices}")
    cos_rank, sin_rank = cos.dim(), sin.dim()
    if (q.dim(), k.dim(), q_out.dim(), k_out.dim()) != (4, 4, 4, 4) or cos_rank not in (2, 3) or sin_rank not in (2, 3):
        check_ranks(q, k, q_out, k_out, cos, sin)  # raises
    if q.dtype not in DATA_DTYPES:
        raise TypeError(f"q has dtype {q.dtype}; the fused kernel rotates float32, bfloat16, float16 or float64")
    if q.is_neg() or k.is_neg() or cos.is_neg() or sin.is_neg() or q_out.is_neg() or k_out.is_neg():
        q, k, cos, sin = resolve_lazy_inputs(q, k, cos, sin, q_out, k_out)
    if positions is None:
        pos: Sequence[int] = _NO_POSITIONS
    else:
        positions, pos = _position_slots(positions)
    codes, args = DTYPE_CODES, RopeArgs()
    _PACK.pack_into(  # the struct's slots in order (SLOTS): each operand's pointer, dtype, shape, strides
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
        codes.get(cos.dtype, -1),
        *((1, *cos.shape, 0, *cos.stride()) if cos_rank == 2 else (*cos.shape, *cos.stride())),  # (B|1, rows, r/2)
        sin.data_ptr(),
        codes.get(sin.dtype, -1),
        *((1, *sin.shape, 0, *sin.stride()) if sin_rank == 2 else (*sin.shape, *sin.stride())),
        *pos,
        row_offset,
        rotary_dim,
        interleaved,
        inverse,
        torch.get_num_threads() if (q.numel() + k.numel()) * q.element_size() >= PARALLEL_MIN_BYTES else 1,
    )
    status = lib.posenc_rope(args)
    if status:
        # positions come last, so leaving them out when absent keeps every index the kernel reports
        operands = [t for t in (q, k, q_out, k_out, cos, sin, positions) if t is not None]
        raise _refusal(status, args, operands, rotary_dim, positions is None)


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
