"""Memory safety of the fused rotation kernels: strides, bounds, aliasing, the cached library.

* regressions for the bugs this suite was written for: ``sin`` read with ``cos``'s strides (a
  segfault at scale, run in a subprocess so a crash fails the test instead of the run), in-place
  rotation of one tensor passed as both q and k (rotated twice), partial overlap of q and k;
* randomized layouts of all seven operands (q, k, q_out, k_out, cos, sin, positions) against an
  independent float64 oracle, with refused calls that must not touch an output: in-process, under
  AddressSanitizer (a subprocess with the ASan runtime preloaded, driving an instrumented build of
  the same C file), and for the Triton kernel in its interpreter;
* the overlap test of :mod:`posenc.rope.kernels.overlap` against brute-force address sets;
* a cached library that is truncated or corrupt is rebuilt; a failed build names the source file.

The random cases and the oracle live in ``kernel_layouts.py`` next to this file.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc.rope import kernels
from posenc.rope.apply import apply_rotary, apply_rotary_at, rotate_reference
from posenc.rope.kernels import cpu, overlap

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))
import kernel_layouts as layouts  # noqa: E402

SRC = str(Path(posenc.__file__).resolve().parents[1])


@pytest.fixture(scope="module")
def kernel():
    lib = cpu.library()
    if lib is None:
        pytest.skip(f"the fused CPU kernel cannot be built here: {cpu.unavailable_reason()}")
    return kernels.cpu_kernel()


def run_python(code: str, *, env=None, timeout=600) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (a crash there fails a test, not the test run)."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(TESTS)]), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full_env, timeout=timeout
    )


def result_of(proc: subprocess.CompletedProcess) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"subprocess failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return json.loads(lines[-1][len("RESULT ") :])


def reference(q, k, cos, sin, layout="half", r=None):
    if cos.dim() == 2:
        cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return (
        rotate_reference(q, c, s, layout=layout, rotary_dim=r),
        rotate_reference(k, c, s, layout=layout, rotary_dim=r),
    )


# -- regressions ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_sin_with_its_own_strides_at_scale():
    """The reproduction from the bug report: sin an expanded view, cos dense. The old kernel read sin
    with cos's strides, far past sin's one row: garbage, and at this size a segfault."""
    proc = run_python("""
        import json, torch, posenc
        S = 200_000
        q = k = torch.randn(1, 1, S, 8)
        cos = torch.ones(S, 4)
        sin = torch.zeros(1, 4).expand(S, 4)
        out_q, out_k = posenc.apply_rotary(q, k.clone(), cos, sin)
        print("RESULT " + json.dumps({"q": torch.equal(out_q, q), "k": torch.equal(out_k, k)}))
    """)
    assert result_of(proc) == {"q": True, "k": True}


@pytest.mark.parametrize("dtype", layouts.DTYPES, ids=str)
def test_cos_and_sin_with_different_layouts(kernel, dtype):
    """Small version in-process: every combination of dense, transposed copy and expanded tables."""
    gen = torch.Generator().manual_seed(3)
    S, half = 37, 8
    q = torch.randn(2, 3, S, 2 * half, generator=gen).to(dtype)
    k = torch.randn(2, 1, S, 2 * half, generator=gen).to(dtype)
    angles = torch.rand(S, half, generator=gen, dtype=torch.float64) * 6.3
    cos_dense, sin_dense = angles.cos(), angles.sin()
    if dtype != torch.float64:
        cos_dense, sin_dense = cos_dense.float(), sin_dense.float()
    forms = {
        "dense": lambda t: t,
        "transposed copy": lambda t: t.t().contiguous().t(),
        "expanded row": lambda t: t[:1].expand(S, half),
        "sliced": lambda t: torch.stack([t, t], -1)[..., 0],  # every other element
    }
    for cname, cform in forms.items():
        for sname, sform in forms.items():
            cos, sin = cform(cos_dense), sform(sin_dense)
            got = apply_rotary(q, k, cos, sin)
            want = reference(q, k, cos.contiguous(), sin.contiguous())
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (cname, sname)


def test_same_tensor_as_q_and_k_in_place_is_rotated_once(kernel):
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 4, 9, 16, generator=gen)
    cos, sin = torch.rand(9, 8, generator=gen), torch.rand(9, 8, generator=gen)
    want = reference(x, x, cos, sin)[0]
    for make in (lambda: x.clone(), lambda: x.clone().transpose(1, 2).contiguous().transpose(1, 2)):
        y = make()
        out_q, out_k = apply_rotary(y, y, cos, sin, inplace=True)
        assert torch.equal(y, want) and out_q is y and out_k is y
        y = make()
        out_q, out_k = apply_rotary(y, y.view(y.shape), cos, sin, inplace=True)  # another view, same memory
        assert torch.equal(y, want)
    # positions path
    y = x.clone()
    apply_rotary_at(y, y, cos, sin, torch.arange(9), inplace=True)
    assert torch.equal(y, want)


def test_same_tensor_in_place_under_autograd(kernel):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 2, 5, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    cos = torch.rand(5, 4, generator=gen, dtype=torch.float64)
    sin = torch.rand(5, 4, generator=gen, dtype=torch.float64)
    y = x * 1
    out_q, out_k = apply_rotary(y, y, cos, sin, inplace=True)
    want = reference(x.detach(), x.detach(), cos, sin)[0]
    torch.testing.assert_close(out_q.detach(), want, rtol=1e-12, atol=1e-12)
    assert out_k is out_q
    out_q.sum().backward()
    # d(sum R x)/dx = R^T 1, once
    ones = torch.ones_like(x)
    want_grad = reference(ones, ones, cos, -sin)[0]
    torch.testing.assert_close(x.grad, want_grad, rtol=1e-12, atol=1e-12)


def test_same_tensor_in_place_on_the_reference_path(kernel):
    """cos requiring grad sends the call to the reference: the same answer (rotated once)."""
    x = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    cos = torch.rand(5, 4, dtype=torch.float64, requires_grad=True)
    sin = torch.rand(5, 4, dtype=torch.float64)
    want = reference(x, x, cos.detach(), sin)[0]
    y = x.clone()
    apply_rotary(y, y, cos, sin, inplace=True)
    torch.testing.assert_close(y.detach(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("path", ["fused", "autograd", "reference"])
def test_partial_overlap_of_q_and_k_in_place_is_refused(kernel, path):
    base = torch.randn(1, 6, 5, 8, dtype=torch.float64)
    cos, sin = torch.rand(5, 4, dtype=torch.float64), torch.rand(5, 4, dtype=torch.float64)
    if path == "autograd":
        base = base.requires_grad_() * 1
    if path == "reference":
        cos = cos.requires_grad_()
    q, k = base[:, 0:4], base[:, 2:6]  # heads 2 and 3 shared
    before = base.detach().clone()
    with pytest.raises(ValueError, match="q and k share memory|k share memory"):
        apply_rotary(q, k, cos, sin, inplace=True)
    assert torch.equal(base.detach(), before), "refused, but wrote first"
    # out of place, overlapping inputs are fine (they are only read)
    got = apply_rotary(q, k, cos, sin)
    want = reference(q.detach(), k.detach(), cos.detach(), sin)
    torch.testing.assert_close(got[0].detach(), want[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got[1].detach(), want[1], rtol=1e-12, atol=1e-12)


def test_interleaved_views_of_one_projection_in_place(kernel):
    """q and k as disjoint, interleaved views of one qkv buffer: their address ranges intersect but no
    element is shared, so the exact overlap test lets the in-place call through."""
    qkv = torch.randn(2, 7, 3 * 4 * 16)  # (B, S, 3*H*D)
    q = qkv[..., :64].view(2, 7, 4, 16).transpose(1, 2)
    k = qkv[..., 64:128].view(2, 7, 4, 16).transpose(1, 2)
    cos, sin = torch.rand(7, 8), torch.rand(7, 8)
    want = reference(q, k, cos, sin)
    apply_rotary(q, k, cos, sin, inplace=True)
    assert torch.equal(q, want[0]) and torch.equal(k, want[1])


def test_expanded_tensor_in_place_is_refused_on_every_path(kernel):
    cos, sin = torch.rand(5, 4), torch.rand(5, 4)
    for table_grad in (False, True):
        c = cos.clone().requires_grad_(table_grad)
        q = torch.randn(1, 1, 5, 8).expand(1, 3, 5, 8)
        with pytest.raises(ValueError, match="share memory .*expanded"):
            apply_rotary(q, torch.randn(1, 1, 5, 8), c, sin, inplace=True)


def test_kernel_refuses_overlapping_outputs_before_writing(kernel):
    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    cos, sin = torch.rand(1, 4, 4), torch.rand(1, 4, 4)
    k_before = k.clone()
    with pytest.raises(ValueError, match=r"q_out and k share memory"):
        kernel(q, k, k, torch.empty_like(k), cos, sin, interleaved=False, rotary_dim=8)
    with pytest.raises(ValueError, match=r"q_out and k_out share memory"):
        out = torch.empty_like(q)
        kernel(q, k, out, out, cos, sin, interleaved=False, rotary_dim=8)
    with pytest.raises(ValueError, match=r"q_out and cos share memory"):
        buf = torch.empty(64)
        kernel(
            q,
            k,
            buf.view(1, 2, 4, 8),
            torch.empty_like(k),
            buf[:16].view(1, 4, 4),
            sin,
            interleaved=False,
            rotary_dim=8,
        )
    assert torch.equal(k, k_before)


def test_kernel_checks_positions_itself(kernel):
    """Without validate, the CPU kernel still refuses a position outside the table, first."""
    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 1, 4, 8)
    table = torch.rand(6, 4)
    out = q.clone()
    for bad, message in (
        (6, r"positions must be < 6 .* maximum of 6"),
        (-3, r"positions must be >= 0, got a minimum of -3"),
    ):
        pos = torch.tensor([0, 1, bad, 2])
        with pytest.raises(ValueError, match=message):
            apply_rotary_at(out, k.clone(), table, table, pos, inplace=True, validate=False)
        assert torch.equal(out, q)
    for dtype in (torch.int32, torch.int64, torch.int16, torch.uint8):
        pos = torch.tensor([5, 0, 3, 1], dtype=dtype)
        got = apply_rotary_at(q, k, table, table, pos, validate=False)
        want = reference(q, k, table[pos.long()], table[pos.long()])
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), dtype


def test_validate_false_gives_the_same_answers(kernel):
    gen = torch.Generator().manual_seed(6)
    q, k = torch.randn(2, 4, 3, 16, generator=gen), torch.randn(2, 2, 3, 16, generator=gen)
    cos, sin = torch.rand(1, 3, 6, generator=gen), torch.rand(1, 3, 6, generator=gen)
    for layout in ("half", "interleaved"):
        a = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=12)
        b = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=12, validate=False)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    # the kernel still refuses what does not fit, with or without validate
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rotary(q, k, cos, sin, rotary_dim=13, validate=False)
    with pytest.raises(ValueError, match="cos has shape"):
        apply_rotary(q, k, cos[:, :2], sin[:, :2], rotary_dim=12, validate=False)


def test_threads_with_strided_operands(kernel):
    """Large enough for several threads: transposed q/k, expanded sin, transposed-copy cos."""
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    try:
        gen = torch.Generator().manual_seed(9)
        S = 700
        q = torch.randn(1, S, 8, 64, generator=gen).transpose(1, 2)  # (1, 8, S, 64), strided
        k = torch.randn(1, S, 2, 64, generator=gen).transpose(1, 2)
        angles = torch.rand(S, 32, generator=gen) * 6.3
        cos = angles.cos().t().contiguous().t()
        sin = angles.sin()[5:6].expand(S, 32)
        want = reference(q, k, cos.contiguous(), sin.contiguous(), "interleaved")
        got = apply_rotary(q, k, cos, sin, layout="interleaved")
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        apply_rotary(q, k, cos, sin, layout="interleaved", inplace=True)
        assert torch.equal(q, want[0]) and torch.equal(k, want[1])
    finally:
        torch.set_num_threads(threads)


# -- randomized layouts --------------------------------------------------------------------------
def test_random_layouts_cpu_kernel(kernel):
    tally = layouts.run(kernel, 150, seed=11)
    assert tally["wrong"] == 0, tally["failures"]
    assert tally["correct"] == 150 and tally["clear_errors"] == 150


def test_random_layouts_through_apply_rotary(kernel):
    """The public entry point with random layouts of q, k, cos and sin, in and out of place."""
    rng = random.Random(12)
    for _ in range(60):
        case = layouts.random_case(rng, positions_mode="never")
        q, k, cos, sin, r = case["q"], case["k"], case["cos"], case["sin"], case["rotary_dim"]
        seq = q.shape[2]
        cos, sin = cos[:, :seq], sin[:, :seq]
        layout = "interleaved" if case["interleaved"] else "half"
        want_q = layouts.oracle(q, cos, sin, r, case["interleaved"], False)
        want_k = layouts.oracle(k, cos, sin, r, case["interleaved"], False)
        got = apply_rotary(q, k, cos, sin, layout=layout, rotary_dim=r)
        assert layouts.within_rounding(got[0], q, want_q, r, case["interleaved"])
        assert layouts.within_rounding(got[1], k, want_k, r, case["interleaved"])
        ref = reference(q, k, cos, sin, layout, r)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


ASAN_DRIVER = """
    import json, sys
    import torch
    import kernel_layouts as layouts
    from posenc.rope.kernels import cpu
    lib = cpu.load_or_rebuild(["-fsanitize=address", "-fno-omit-frame-pointer"])
    kernel = cpu.make_rotate(lib)
    if sys.argv[-1] == "control":
        # lie to the kernel about cos: 3 rows claimed, 2 in memory. Only the sanitizer can see this;
        # it proves the instrumented build and the preloaded runtime are really watching.
        args = cpu.RopeArgs()
        q, k = torch.randn(1, 1, 3, 4), torch.empty(1, 0, 3, 4)
        out, cos, sin = torch.empty(1, 1, 3, 4), torch.randn(1, 2, 2), torch.randn(1, 3, 2)
        def fill(field, t, shape):
            field.data, field.dtype = t.data_ptr(), cpu.DTYPE_CODES[t.dtype]
            for i, (n, s) in enumerate(zip(shape, t.stride())):
                field.shape[i], field.stride[i] = n, s
        fill(args.q, q, q.shape); fill(args.k, k, k.shape); fill(args.q_out, out, out.shape)
        fill(args.k_out, k, k.shape); fill(args.cos, cos, (1, 3, 2)); fill(args.sin, sin, sin.shape)
        args.rotary_dim, args.threads = 4, 1
        print("status", lib.posenc_rope(args))
    else:
        tally = layouts.run(kernel, int(sys.argv[-1]), seed=2024)
        print("RESULT " + json.dumps(tally))
"""


def _asan_env(tmp_path):
    cc = shutil.which(os.environ.get("CC") or "gcc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the sanitizer variant")
    runtime = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not runtime or not os.path.isabs(runtime) or not os.path.exists(runtime):
        pytest.skip(f"{cc} has no AddressSanitizer runtime (libasan.so)")
    return {
        "LD_PRELOAD": runtime,
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1",
        "POSENC_CACHE_DIR": str(tmp_path),
        "CC": cc,
    }


def _run_asan_driver(tmp_path, argument):
    """ASAN_DRIVER with ``argument`` ("200" random layouts, or "control") in a subprocess with the
    ASan runtime preloaded and the sanitizer build cached under ``tmp_path``."""
    env = _asan_env(tmp_path)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(ASAN_DRIVER), argument],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(TESTS)]), "OMP_NUM_THREADS": "1", **env},
    )


@pytest.mark.slow
def test_random_layouts_under_address_sanitizer(tmp_path):
    """The C file built with -fsanitize=address, driven by random layouts (every operand in an
    exact-fit allocation) and by refused calls, in a subprocess with the ASan runtime preloaded."""
    proc = _run_asan_driver(tmp_path, "200")
    assert "AddressSanitizer" not in proc.stderr, proc.stderr[-5000:]
    tally = result_of(proc)
    print(f"ASan: {tally}")
    assert tally["wrong"] == 0, tally["failures"]
    assert tally["correct"] == 200 and tally["clear_errors"] == 200


@pytest.mark.slow
def test_address_sanitizer_catches_a_lying_caller(tmp_path):
    """Positive control for the test above: a struct that claims more table rows than exist."""
    proc = _run_asan_driver(tmp_path, "control")
    assert proc.returncode != 0 and "heap-buffer-overflow" in proc.stderr, (proc.stdout, proc.stderr[-3000:])


TRITON_DRIVER = """
    import json, os
    assert os.environ.get("TRITON_INTERPRET") == "1"
    import kernel_layouts as layouts
    from posenc.rope.kernels import triton_rope
    tally = layouts.run(triton_rope.rotate, 40, seed=7, range_errors=False, ulps=1.0)
    tally["nan_positions"] = layouts.triton_kernel_nan_positions(triton_rope.rotate, seed=8)
    print("RESULT " + json.dumps(tally))
"""


@pytest.mark.slow
def test_random_layouts_triton_interpreter():
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    tally = result_of(run_python(TRITON_DRIVER, env={"TRITON_INTERPRET": "1"}, timeout=1200))
    print(f"Triton interpreter: {tally}")
    assert tally["wrong"] == 0, tally["failures"]
    assert tally["correct"] == 40 and tally["clear_errors"] > 0
    nan = tally["nan_positions"]
    assert nan["wrong"] == 0 and nan["nan_rows"] == nan["cases"] > 0


# -- the overlap test itself ---------------------------------------------------------------------
@st.composite
def views_of_one_storage(draw):
    size = draw(st.integers(1, 60))
    base = torch.arange(size, dtype=torch.float32)

    def view():
        ndim = draw(st.integers(1, 3))
        shape = [draw(st.integers(0, 4)) for _ in range(ndim)]
        strides = [draw(st.integers(0, 12)) for _ in range(ndim)]
        span = sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        if span >= size:
            return None
        offset = draw(st.integers(0, size - 1 - span))
        return torch.as_strided(base, shape, strides, offset)

    return view(), view()


def addresses(t):
    if t.numel() == 0:
        return set()
    idx = torch.as_strided(torch.arange(t.untyped_storage().nbytes() // 4), t.shape, t.stride(), t.storage_offset())
    return set(idx.flatten().tolist())


@settings(max_examples=200, deadline=None)
@given(views_of_one_storage())
def test_overlap_matches_brute_force(pair):
    x, y = pair
    if x is None or y is None:
        return
    brute = bool(addresses(x) & addresses(y))
    assert overlap.overlaps(x, y) == int(brute)
    assert overlap.overlaps(y, x) == int(brute)
    if not overlap.self_overlaps(x):
        assert len(addresses(x)) == x.numel(), "self_overlaps said no, but two elements share an address"


@settings(max_examples=150, deadline=None)
@given(views_of_one_storage(), st.booleans())
def test_c_overlap_check_matches_brute_force(kernel, pair, swap):
    """The C kernel's own overlap check: an input view and an output view of one storage."""
    x, y = pair
    if x is None or y is None:
        return
    if x.dim() != 3 or y.dim() != 3 or x.shape != y.shape or x.shape[-1] % 2 or not x.numel():
        return
    inp, out = (y, x) if swap else (x, y)
    q, q_out = inp.unsqueeze(0), out.unsqueeze(0)  # (1, H, S, D)
    seq, d = q.shape[2], q.shape[3]
    cos, sin = torch.ones(1, seq, d // 2), torch.zeros(1, seq, d // 2)
    none = torch.empty(1, 0, seq, d)
    shared = bool(addresses(inp) & addresses(out))
    identical = overlap.identical(inp, out)
    if overlap.self_overlaps(out):
        with pytest.raises(ValueError, match="share memory"):
            kernel(q, none, q_out, none, cos, sin, interleaved=False, rotary_dim=d)
    elif shared and not identical:
        with pytest.raises(ValueError, match="q_out and q share memory"):
            kernel(q, none, q_out, none, cos, sin, interleaved=False, rotary_dim=d)
    else:
        want = q.clone()
        kernel(q, none, q_out, none, cos, sin, interleaved=False, rotary_dim=d)
        assert torch.equal(q_out, want)


# -- the cached library --------------------------------------------------------------------------
def _built(tmp_path, monkeypatch):
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    try:
        return cpu.build()
    except cpu.FusedKernelUnavailable as exc:
        pytest.skip(f"no C compiler here: {exc}")


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "garbage", "garbage with a matching hash", "hash missing"])
def test_damaged_cached_library_is_rebuilt(tmp_path, monkeypatch, fresh_kernel_state, damage):
    path = _built(tmp_path, monkeypatch)
    good = path.read_bytes()
    sidecar = path.with_suffix(".sha256")
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 3])
    elif damage == "garbage":
        path.write_bytes(b"\x7fELF" + os.urandom(len(good) - 4))
    elif damage == "garbage with a matching hash":
        import hashlib

        path.write_bytes(b"not a library at all")
        sidecar.write_text(hashlib.sha256(b"not a library at all").hexdigest())
    else:
        sidecar.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt, not disabled with a warning
        lib = cpu.library()
    assert lib is not None
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8)
    cos, sin = torch.rand(3, 4), torch.rand(3, 4)
    got = apply_rotary(q, k, cos, sin)
    assert torch.equal(got[0], reference(q, k, cos, sin)[0])
    assert path.read_bytes() != b"not a library at all" and cpu._intact(path)


def test_failed_build_names_the_source_file(broken_compiler, fresh_kernel_state):
    with pytest.raises(cpu.FusedKernelUnavailable, match=r"compiling .*rope_kernel\.c with .*cc failed: cc: fatal"):
        cpu.build()


def test_build_uses_warnings_as_errors_and_one_command():
    assert {"-Wall", "-Wextra", "-Werror"} <= set(cpu.FLAGS)
    command = cpu.build_command("cc", cpu.FLAGS, Path("out.so"))
    assert command[0] == "cc" and str(cpu.SOURCE_PATH) in command and command[-2:] == ["-o", "out.so"]
    assert cpu.SOURCE_PATH.suffix == ".c" and cpu.SOURCE_PATH.exists()
    pyproject = TESTS.parent / "pyproject.toml"
    if pyproject.exists():  # a source checkout: ships the .c
        import tomllib

        data = tomllib.loads(pyproject.read_text())
        assert "**/*.c" in data["tool"]["setuptools"]["package-data"]["posenc"]


@pytest.mark.slow
@pytest.mark.parametrize("compiler", ["gcc", "clang"])
@pytest.mark.parametrize("extra", [[], ["-DPOSENC_NO_FLOAT16"], ["-O0"]])
def test_source_compiles_without_warnings(tmp_path, compiler, extra):
    cc = shutil.which(compiler)
    if cc is None:
        pytest.skip(f"{compiler} is not installed")
    proc = subprocess.run(
        cpu.build_command(cc, [*cpu.FLAGS, *extra], tmp_path / "k.so"), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr


def test_struct_mirrors_the_c_struct(kernel):
    """The ctypes struct and the C struct have one size (the library reports its own)."""
    lib = cpu.library()
    assert lib.posenc_rope_abi() == cpu.ABI
    assert len(cpu.SLOTS) * 8 == __import__("ctypes").sizeof(cpu.RopeArgs)
    assert cpu.SLOTS[:3] == ["q.data", "q.dtype", "q.shape[0]"] and cpu.SLOTS[-1] == "threads_failed"


# -- checks paid once per layout (the Triton path's plan cache) -----------------------------------
def _plan_of(operands):
    from posenc.rope.kernels import plans

    def check():
        overlap.check_outputs(
            [(n, t) for n, t in zip(("q", "k", "cos", "sin"), (operands[0], operands[1], operands[4], operands[5]))],
            [("q_out", operands[2]), ("k_out", operands[3])],
        )

    return plans.plan_for(plans.layout_key(operands, "test"), operands, check, lambda: None)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 90), st.integers(0, 90), st.sampled_from([(1, 0), (0, 1), (1, 1)]))
def test_cached_layout_checks_aliasing_at_every_call(q_at, out_at, transposed):
    """One layout, many placements in one storage: the plan built for the first (disjoint) call
    answers every later placement exactly as brute-force address sets do; an overlapping placement
    of a cached layout is refused, never waved through because its layout was seen."""
    from posenc.rope.kernels import plans

    storage = torch.zeros(200)

    def place(at, shape, t):
        strides = (shape[2] * shape[1] * shape[3], shape[3], shape[1] * shape[3], 1) if t else None
        strides = strides or (shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1)
        return torch.as_strided(storage, shape, strides, at)

    q_shape, k_shape = (1, 2, 3, 4), (1, 1, 3, 4)
    cos = torch.zeros(1, 3, 2)
    q_t, out_t = transposed
    plans.clear()
    first = (place(0, q_shape, q_t), place(30, k_shape, q_t), place(50, q_shape, out_t), place(80, k_shape, out_t))
    plan = _plan_of((*first, cos, cos, None))
    ops = (place(q_at, q_shape, q_t), place(30, k_shape, q_t), place(out_at, q_shape, out_t), place(80, k_shape, out_t))
    operands = (*ops, cos, cos, None)
    assert plans.layout_key(operands, "test") == plan.key  # the same layout: the cached plan
    ptrs = [0 if t is None else t.data_ptr() for t in operands]
    q, k, q_out, k_out = (addresses(t) for t in ops)
    in_place = q_at == out_at and q_t == out_t  # q_out exactly q: allowed
    clash = bool(q_out & (k | k_out)) or (bool(q_out & q) and not in_place) or bool(k_out & (q | k))
    assert plans.disjoint(plan, ptrs) == (not clash), (q_at, out_at, transposed)


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.booleans(), st.booleans())
def test_cached_inplace_pair_checks_aliasing_at_every_call(q_at, k_at, q_transposed, k_transposed):
    """inplace=True with autograd rotates q and k in separate calls, so apply_rotary applies the
    in-place rules itself; what depends on the two layouts is worked out once per pair of layouts
    (kernels/plans.py), where they lie at every call. One pair of layouts, many placements in one
    storage: each call is refused exactly when brute-force address sets say q and k share memory
    without being one view; a placement that overlaps is refused although its layouts were seen."""
    from posenc.rope.kernels import plans

    def place(storage, at, shape, transposed):
        b, h, s, d = shape  # (B, H, S, D), or a transpose of a (B, S, H, D) buffer
        strides = (s * h * d, d, h * d, 1) if transposed else (h * s * d, s * d, d, 1)
        return torch.as_strided(storage, shape, strides, at)

    shape = (1, 2, 3, 4)
    cos, sin = torch.rand(3, 2, dtype=torch.float64), torch.rand(3, 2, dtype=torch.float64)
    leaf = torch.randn(100, dtype=torch.float64, requires_grad=True)

    def call(qa, ka):
        storage = leaf * 1  # a fresh non-leaf storage: in place is allowed, autograd records it
        q, k = place(storage, qa, shape, q_transposed), place(storage, ka, shape, k_transposed)
        before = storage.detach().clone()
        return q, k, storage, before

    q, k, _, _ = call(0, 50)  # a disjoint first placement builds the pair's plan
    apply_rotary(q, k, cos, sin, inplace=True)
    pairs = plans.STATS["pairs"]
    q, k, storage, before = call(q_at, k_at)
    same = layouts.addresses(q) == layouts.addresses(k)
    clash = layouts.shares_memory(q, k) and not same
    q0, k0 = q.detach().clone(), k.detach().clone()
    if clash:
        with pytest.raises(ValueError, match="q and k share memory"):
            apply_rotary(q, k, cos, sin, inplace=True)
        assert torch.equal(storage.detach(), before), "refused, but wrote first"
    else:
        out_q, out_k = apply_rotary(q, k, cos, sin, inplace=True)
        want_q, want_k = reference(q0, k0, cos, sin)
        torch.testing.assert_close(out_q.detach(), want_q, rtol=1e-12, atol=1e-12)  # rotated once
        if not same:
            torch.testing.assert_close(out_k.detach(), want_k, rtol=1e-12, atol=1e-12)
    assert plans.STATS["pairs"] == pairs, "the pair of layouts was checked in full again"


def test_triton_layout_checks_run_once_per_layout_and_aliasing_every_call():
    """In Triton's interpreter: 30 calls of one layout on fresh tensors run the full checks once;
    a new layout runs them once more; a cached in-place layout whose q and k now overlap is refused
    with the full check's message; q and k as interleaved views of one projection (byte ranges that
    meet, elements that do not) pay the exact search in the first call only (cached per pointer
    difference)."""
    pytest.importorskip("triton", reason="triton is a test dependency: pip install triton")
    code = """
    import json, os
    assert os.environ.get("TRITON_INTERPRET") == "1"
    import torch
    from posenc.rope.kernels import plans, triton_rope
    calls = []
    original = triton_rope.check_operands
    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)
    triton_rope.check_operands = spy
    cos = torch.rand(1, 3, 4)
    out = {}
    for _ in range(30):
        q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8)
        triton_rope.rotate(q, k, torch.empty_like(q), torch.empty_like(k), cos, cos, interleaved=False, rotary_dim=8)
    out["checks_after_30_calls"] = len(calls)
    q = torch.randn(1, 3, 3, 8)
    k = q[:, :1]
    triton_rope.rotate(q, k, torch.empty_like(q), torch.empty_like(k), cos, cos, interleaved=False, rotary_dim=8)
    out["checks_after_new_layout"] = len(calls)
    buf, other = torch.randn(1, 3, 4, 8), torch.randn(1, 3, 4, 8)
    q, k = buf[:, :, :2].transpose(1, 2), other[:, :, :2].transpose(1, 2)  # separate buffers
    triton_rope.rotate(q, k, q, k, cos, cos, interleaved=False, rotary_dim=8)
    out["checks_in_place"] = len(calls)
    q, k = buf[:, :, :2].transpose(1, 2), buf[:, :, 1:3].transpose(1, 2)  # same layout, shared head
    try:
        triton_rope.rotate(q, k, q, k, cos, cos, interleaved=False, rotary_dim=8)
        out["refused"] = None
    except ValueError as exc:
        out["refused"] = str(exc)
    qkv = torch.randn(1, 3, 6, 8)
    exact = [plans.STATS["exact"]]
    for _ in range(10):
        q, k = qkv[:, :, :4].transpose(1, 2), qkv[:, :, 4:].transpose(1, 2)
        triton_rope.rotate(q, k, q, k, cos, cos, interleaved=False, rotary_dim=8)
        exact.append(plans.STATS["exact"])
    out["exact_searches"] = [n - exact[0] for n in exact[1:]]
    from posenc.rope.apply import FusedRotary
    checks = [len(calls)]
    for _ in range(10):  # forward and backward of the 30 calls' layout on fresh tensors
        a, b = torch.randn(1, 2, 3, 8, requires_grad=True), torch.randn(1, 1, 3, 8, requires_grad=True)
        rotated = FusedRotary.apply(a, b, cos, cos, None, 0, triton_rope.rotate, False, 8, False)
        torch.autograd.backward(rotated, (torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8)))
        checks.append(len(calls))
    out["checks_forward_backward"] = [n - checks[0] for n in checks[1:]]
    print("RESULT " + json.dumps(out))
    """
    out = result_of(run_python(code, env={"TRITON_INTERPRET": "1"}, timeout=600))
    assert out["checks_after_30_calls"] == 1, out
    assert out["checks_after_new_layout"] == 2, out
    assert out["checks_in_place"] == 3, out
    assert out["refused"] and "share memory" in out["refused"], out
    # one search per pair of byte ranges that meet (q_out-k, k_out-q, k_out-q_out), all in the first call
    first, *later = out["exact_searches"]
    assert first > 0 and all(n == first for n in later), out
    # the forward's layout was seen; the backward's (the inverse rotation) is checked once, in step 1
    assert out["checks_forward_backward"] == [1] * 10, out
