"""The fused CPU rotation: a small C kernel compiled on first use and called through ``ctypes``.

Why this and not the alternatives (measured in ``benchmarks/cpu_candidates.py``, see
``docs/kernels.md``): the rotation is pure memory traffic, and only a loop that reads each element
of q and k once and writes it once reaches the in-place memory pass. torch ops, even chunked to stay
in cache, pay a dispatch per op per chunk; Inductor compiles per shape and dtype and re-checks guards
on every eager call; a ``torch.utils.cpp_extension`` build needs ninja and a minute of compiling
against the torch headers. The C file has no dependency beyond libc and POSIX threads, builds in
about a second with the system compiler, and is cached per source, compiler and CPU.

When no compiler is found, the build fails, or ``POSENC_DISABLE_FUSED=1`` is set, :func:`library`
returns ``None`` after one warning and the caller uses the PyTorch reference.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Optional

import torch

from ._cpu_source import SOURCE

#: dtype -> code understood by the C kernel
DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.float64: 3}

#: Below this many bytes of q and k together a single thread is faster than starting more.
PARALLEL_MIN_BYTES = 1 << 18

_FLAGS = ["-O3", "-ffp-contract=off", "-fno-tree-slp-vectorize", "-fPIC", "-shared", "-pthread"]
_lock = threading.Lock()
_state: dict = {}


class FusedKernelUnavailable(RuntimeError):
    """The fused CPU kernel could not be built or loaded; the message says why."""


def _compiler() -> str:
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise FusedKernelUnavailable("no C compiler found (looked for $CC, cc, gcc, clang)")


def _cache_dir() -> Path:
    root = os.environ.get("POSENC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "posenc")
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


def build(extra_flags=()) -> Path:
    """Compile the kernel (or find it in the cache) and return the shared library's path.

    ``-march=native`` lets the compiler use every vector instruction of this CPU; a compiler that
    does not know the flag gets a second try without it.
    """
    if sys.platform == "win32":
        raise FusedKernelUnavailable("the fused CPU kernel is built for POSIX systems only")
    cc = _compiler()
    version = _compiler_version(cc)
    directory = _cache_dir()
    error = None
    for native in (True, False):
        flags = _FLAGS + (["-march=native"] if native else []) + list(extra_flags)
        key = hashlib.sha256("\0".join([SOURCE, cc, version, " ".join(flags),
                                        _cpu_fingerprint()]).encode()).hexdigest()[:20]
        target = directory / f"posenc_rope_{key}.so"
        if target.exists():
            return target
        try:
            _compile(cc, flags, directory, target)
            return target
        except FusedKernelUnavailable as exc:
            error = error or exc
    raise error


def _compile(cc: str, flags, directory: Path, target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        src = Path(tmp) / "posenc_rope.c"
        src.write_text(SOURCE)
        out = Path(tmp) / target.name
        try:
            result = subprocess.run([cc, *flags, str(src), "-o", str(out)], capture_output=True,
                                    text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise FusedKernelUnavailable(f"compiling with {cc} failed ({exc})") from exc
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()
            raise FusedKernelUnavailable(f"compiling with {cc} failed: {detail[0] if detail else 'no output'}")
        os.replace(out, target)          # atomic: concurrent builders never see a partial file


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.posenc_rope.argtypes = [ctypes.c_void_p]          # one packed int64 array, see the C source
    lib.posenc_rope.restype = ctypes.c_int
    return lib


def disabled_by_environment() -> bool:
    return os.environ.get("POSENC_DISABLE_FUSED", "").strip().lower() not in ("", "0", "false", "no")


def library() -> Optional[ctypes.CDLL]:
    """The loaded kernel, or ``None`` (with one warning per process) when it cannot be used."""
    if "lib" in _state:
        return _state["lib"]
    with _lock:
        if "lib" not in _state:
            lib, reason = None, None
            if disabled_by_environment():
                reason = "POSENC_DISABLE_FUSED is set"
            else:
                try:
                    lib = _load(build())
                except (FusedKernelUnavailable, OSError) as exc:
                    reason = str(exc)
            if lib is None:
                _state["reason"] = reason
                warnings.warn(f"posenc: fused CPU RoPE kernel unavailable ({reason}); using the "
                              "PyTorch reference", RuntimeWarning, stacklevel=3)
            _state["lib"] = lib
    return _state["lib"]


def unavailable_reason() -> Optional[str]:
    """Why :func:`library` returned ``None``, or ``None`` if it has not, or has not been asked yet."""
    return _state.get("reason")


def reset() -> None:
    """Forget the loaded kernel so the next call builds or refuses again (used by tests)."""
    with _lock:
        _state.clear()


_ARGS = ctypes.c_int64 * 33

def rotate(lib: ctypes.CDLL, q: torch.Tensor, k: torch.Tensor, q_out: torch.Tensor, k_out: torch.Tensor,
           cos: torch.Tensor, sin: torch.Tensor, *, interleaved: bool, rotary_dim: int,
           inverse: bool = False, positions: Optional[torch.Tensor] = None) -> None:
    """Write the rotation of ``q``/``k`` into ``q_out``/``k_out`` (which may be ``q``/``k``).

    The caller guarantees: 4-d CPU tensors of one dtype in :data:`DTYPE_CODES` with a contiguous last
    dimension; ``cos``/``sin`` of shape (B|1, rows, rotary_dim // 2) in float32 (float64 when q is
    float64) with a contiguous last dimension; ``positions`` (B|1, seq) int64 indexing ``rows``, or
    ``None`` to use row ``s`` for position ``s``.
    """
    batch, q_heads, seq, d = q.shape
    nbytes = (q.numel() + k.numel()) * q.element_size()
    threads = torch.get_num_threads() if nbytes >= PARALLEL_MIN_BYTES else 1
    if positions is None:
        pos_ptr, ps_b, ps_s = 0, 0, 0
    else:
        pos_ptr, ps_s = positions.data_ptr(), positions.stride(1)
        ps_b = positions.stride(0) if positions.shape[0] > 1 else 0
    qs, qos, ks, kos = q.stride(), q_out.stride(), k.stride(), k_out.stride()
    args = _ARGS(q.data_ptr(), q_out.data_ptr(), q_heads, qs[0], qs[1], qs[2], qos[0], qos[1], qos[2],
                 k.data_ptr(), k_out.data_ptr(), k.shape[1], ks[0], ks[1], ks[2], kos[0], kos[1], kos[2],
                 cos.data_ptr(), sin.data_ptr(), cos.stride(0) if cos.shape[0] > 1 else 0, cos.stride(1),
                 pos_ptr, ps_b, ps_s, batch, seq, d, rotary_dim, int(interleaved), DTYPE_CODES[q.dtype],
                 int(inverse), threads)
    lib.posenc_rope(ctypes.addressof(args))
