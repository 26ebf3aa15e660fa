"""How a rotation reaches a fused kernel: the ``torch.library`` op (opcheck, backward, ``torch.compile``
without a graph break), the fallback to the reference when no kernel can be built or used (each says
why, once), the module's decode call on the one road, and argument checks paid once per layout.
"""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
import torch.utils._pytree as pytree
from kernel_cases import assert_close, make_inputs, reference
from torch.utils._python_dispatch import TorchDispatchMode

import posenc
from posenc import RotaryEmbedding
from posenc.rope import kernels
from posenc.rope.apply import apply_reference, apply_rotary, apply_rotary_at, fused_kernel
from posenc.rope.kernels import cpu


def test_compile_dispatcher_has_no_graph_break():
    q, k, cos, sin = make_inputs(torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: apply_rotary(a, b, cos, sin, layout="interleaved"), fullgraph=True)
    got = compiled(q, k)
    want = reference(q, k, cos, sin, "interleaved", None)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    compiled(qg, kg)[0].sum().backward()
    assert qg.grad is not None


def test_compile_tinylm():
    """torch.compile of a model using posenc: same logits; graph breaks come only from outside
    the rotation (reported in the failure message if the dispatcher ever causes one)."""
    torch.manual_seed(0)
    model = posenc.TinyLM(
        posenc.ModelConfig(scheme="rope", d_model=32, n_heads=2, n_layers=1, max_len=64, rotary_dim=8)
    )
    idx = torch.randint(0, 256, (2, 16))
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(idx)
    ours = [
        b
        for b in explanation.break_reasons
        if any("rope/apply.py" in f.filename or "rope/kernels" in f.filename for f in b.user_stack)
    ]
    assert not ours, [b.reason for b in ours]
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=False)
    logits = compiled(idx)
    torch.testing.assert_close(logits, model(idx), rtol=1e-5, atol=1e-5)
    logits.square().mean().backward()  # training through it works
    assert all(p.grad is not None for p in model.parameters())


def _op_case(name, dtype=torch.float32):
    """(q, k, cos, sin, positions, row_offset, rotary_dim, interleaved) for one layout."""
    gen = torch.Generator().manual_seed(3)
    tdt = torch.float64 if dtype == torch.float64 else torch.float32

    def rnd(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dt)

    table = rnd(1, 12, 8, dt=tdt)
    if name == "contiguous":
        return rnd(2, 4, 5, 16), rnd(2, 2, 5, 16), table[:, :5], table[:, 5:10], None, 0, 16, False
    if name == "transformers-layout":  # q/k transposes of (B, S, H, D) buffers
        q, k = rnd(2, 5, 4, 16).transpose(1, 2), rnd(2, 5, 2, 16).transpose(1, 2)
        return q, k, table[:, :5], table[:, 1:6], None, 0, 16, True
    if name == "one-projection":  # q and k interleaved views of one qkv buffer
        qkv = rnd(2, 5, 8, 16)
        q, k = qkv[:, :, :4].transpose(1, 2), qkv[:, :, 4:6].transpose(1, 2)
        return q, k, table[:, :5], table[:, :5], None, 0, 16, False
    if name == "partial-gqa-batch-tables":
        tables = rnd(2, 5, 4, dt=tdt)
        return rnd(2, 6, 5, 16), rnd(2, 1, 5, 16), tables, tables.flip(0), None, 0, 8, True
    if name == "positions":
        pos = torch.tensor([[0, 1, 2, 0, 1], [3, 4, 0, 1, 11]])
        return rnd(2, 4, 5, 16), rnd(2, 2, 5, 16), table, table.flip(1), pos, 0, 16, False
    if name == "row-offset":
        return rnd(1, 4, 1, 16), rnd(1, 2, 1, 16), table, table.flip(1), None, 9, 16, True
    if name == "strided-last-dim":
        return rnd(2, 4, 5, 32)[..., ::2], rnd(2, 2, 5, 32)[..., 1::2], table[:, :5], table[:, 5:10], None, 0, 16, False
    raise KeyError(name)


OP_CASES = [
    "contiguous",
    "transformers-layout",
    "one-projection",
    "partial-gqa-batch-tables",
    "positions",
    "row-offset",
    "strided-last-dim",
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", OP_CASES)
def test_op_passes_opcheck_for_every_layout(fused_cpu, case, dtype):
    """torch.library.opcheck: schema, fake kernel (shapes, strides), autograd registration and
    AOT dispatch, on every layout the kernel takes; and the op equals the reference."""
    q, k, cos, sin, pos, offset, r, interleaved = _op_case(case, dtype)
    args = (q, k, cos, sin, pos, offset, r, interleaved, False)
    torch.library.opcheck(torch.ops.posenc.rotary.default, args)
    if dtype != torch.bfloat16:  # autograd checks want a floating type with gradients worth comparing
        grads = (q.clone().requires_grad_(), k.clone().requires_grad_(), cos, sin, pos, offset, r, interleaved, False)
        torch.library.opcheck(torch.ops.posenc.rotary.default, grads)
    got_q, got_k = torch.ops.posenc.rotary(*args)
    layout = "interleaved" if interleaved else "half"
    want = posenc.rope.apply.reference_rows(q, k, cos, sin, pos, offset, layout, r, False)
    assert_close(got_q, want[0])
    assert_close(got_k, want[1])


def test_op_backward_is_the_inverse_rotation(fused_cpu):
    """The op's gradient is the rotation by the negated angles: gradcheck in float64, and the
    backward of the op equals the forward op with ``inverse`` flipped."""
    q, k, cos, sin, pos, offset, r, il = _op_case("positions", torch.float64)
    q, k = q.requires_grad_(), k.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b: torch.ops.posenc.rotary(a, b, cos, sin, pos, offset, r, il, False), (q, k)
    )
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    torch.autograd.backward(torch.ops.posenc.rotary(q, k, cos, sin, pos, offset, r, il, False), (gq, gk))
    want_q, want_k = torch.ops.posenc.rotary(gq, gk, cos, sin, pos, offset, r, il, True)
    torch.testing.assert_close(q.grad, want_q, rtol=0, atol=0)
    torch.testing.assert_close(k.grad, want_k, rtol=0, atol=0)


class _GraphRecorder:
    """A torch.compile backend that records the ops of every graph it is given (and runs it)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append([node.target for node in gm.graph.nodes if node.op == "call_function"])
        return gm.forward


@pytest.mark.parametrize("mode", ["out", "row_offset", "positions"])
def test_compiled_op_is_one_node_without_a_graph_break(fused_cpu, mode):
    """torch.ops.posenc.rotary under torch.compile(fullgraph=True) is one graph holding the op;
    values equal eager; training through it works."""
    q, k, cos, sin = make_inputs(torch.float32, seq=6)
    table = torch.cat([cos, sin], dim=1)  # (1, 12, 16): rows for the offset/positions cases
    pos = torch.tensor([[5, 0, 11, 3, 3, 7]])

    def call(a, b):
        if mode == "row_offset":
            return torch.ops.posenc.rotary(a, b, table, table.flip(1), None, 4, 32, False, False)
        if mode == "positions":
            return torch.ops.posenc.rotary(a, b, table, table.flip(1), pos, 0, 32, True, False)
        return torch.ops.posenc.rotary(a, b, cos, sin, None, 0, 32, False, False)

    recorder = _GraphRecorder()
    torch._dynamo.reset()
    compiled = torch.compile(call, backend=recorder, fullgraph=True)
    got = compiled(q.clone(), k.clone())
    want = call(q.clone(), k.clone())
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    op = torch.ops.posenc.rotary
    assert len(recorder.graphs) == 1 and {op, op.default} & set(recorder.graphs[0]), recorder.graphs
    torch._dynamo.reset()
    trained = torch.compile(call, backend="aot_eager", fullgraph=True)
    qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
    trained(qg, kg)[0].square().sum().backward()
    qe, ke = q.clone().requires_grad_(), k.clone().requires_grad_()
    call(qe, ke)[0].square().sum().backward()
    torch.testing.assert_close(qg.grad, qe.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["out", "inplace", "row_offset", "positions"])
def test_compiled_entry_traces_the_reference_for_inductor(fused_cpu, mode):
    """apply_rotary under torch.compile(fullgraph=True) traces the reference (Inductor fuses it), not
    the op, in one graph, out of place, in place, by row offset and by positions; values equal
    eager."""
    q, k, cos, sin = make_inputs(torch.float32, seq=6)
    table = torch.cat([cos, sin], dim=1)  # (1, 12, 16)
    pos = torch.tensor([[5, 0, 11, 3, 3, 7]])

    def call(a, b):
        if mode == "row_offset":
            return apply_rotary(a, b, table, table.flip(1), row_offset=4)
        if mode == "positions":
            return apply_rotary_at(a, b, table[0], table[0].flip(0), pos)
        return apply_rotary(a, b, cos, sin, inplace=mode == "inplace")

    recorder = _GraphRecorder()
    torch._dynamo.reset()
    got = torch.compile(call, backend=recorder, fullgraph=True)(q.clone(), k.clone())
    want = call(q.clone(), k.clone())
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    op = torch.ops.posenc.rotary
    assert len(recorder.graphs) == 1 and not {op, op.default} & set(recorder.graphs[0]), recorder.graphs


def test_fallback_when_disabled_warns_once(monkeypatch, fresh_kernel_state):
    monkeypatch.setenv("POSENC_DISABLE_FUSED", "1")
    q, k, cos, sin = make_inputs(torch.bfloat16)
    want = reference(q, k, cos, sin, "half", None)
    with pytest.warns(RuntimeWarning, match=r"fused CPU RoPE kernel unavailable \(POSENC_DISABLE_FUSED"):
        got = apply_rotary(q, k, cos, sin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = apply_rotary(q, k, cos, sin, inplace=True)
    assert torch.equal(got[0], want[0]) and torch.equal(again[1], want[1])
    assert cpu.unavailable_reason() == "POSENC_DISABLE_FUSED is set"


def test_fallback_without_compiler(monkeypatch, tmp_path, fresh_kernel_state):
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))  # nothing cached there
    monkeypatch.setenv("CC", "no-such-compiler")
    monkeypatch.setenv("PATH", str(tmp_path))  # and none on PATH
    q, k, cos, sin = make_inputs(torch.float32)
    with pytest.warns(RuntimeWarning, match="no C compiler found") as record:
        got = apply_rotary(q, k, cos, sin, layout="interleaved")
    assert len(record) == 1 and "\n" not in str(record[0].message)
    want = reference(q, k, cos, sin, "interleaved", None)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_fallback_when_compiler_fails(broken_compiler, fresh_kernel_state):
    q, k, cos, sin = make_inputs(torch.float32)
    with pytest.warns(RuntimeWarning, match="broken on purpose"):
        got = apply_rotary(q, k, cos, sin)
    assert torch.equal(got[0], reference(q, k, cos, sin, "half", None)[0])


def test_build_from_scratch_into_empty_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    try:
        path = cpu.build()
    except cpu.FusedKernelUnavailable as exc:
        pytest.skip(f"no C compiler here: {exc}")
    assert path.exists() and path.parent.parent == tmp_path
    assert cpu.build() == path  # second call: from the cache


def test_build_retries_without_march_native(monkeypatch, tmp_path):
    """A compiler that rejects -march=native still gets the kernel (portable code)."""
    try:
        real = cpu._compiler()
    except cpu.FusedKernelUnavailable as exc:
        pytest.skip(f"no C compiler here: {exc}")
    picky = tmp_path / "picky-cc"
    picky.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = "-march=native" ] && '
        '{ echo "unknown flag -march=native" >&2; exit 1; }; done\n'
        f'exec "{real}" "$@"\n'
    )
    picky.chmod(0o755)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(picky))
    lib = cpu._load(cpu.build())
    q, k, cos, sin = make_inputs(torch.float32)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    cpu.rotate(lib, q, k, q_out, k_out, cos, sin, interleaved=False, rotary_dim=32)
    assert torch.equal(q_out, reference(q, k, cos, sin, "half", None)[0])


def test_triton_import_failure_warns_and_falls_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # "import triton" raises
    monkeypatch.delitem(sys.modules, "posenc.rope.kernels.triton_rope", raising=False)
    monkeypatch.delattr(kernels, "triton_rope", raising=False)  # else "from . import" finds it there
    monkeypatch.setattr(kernels, "_triton", {})
    with pytest.warns(RuntimeWarning, match="Triton RoPE kernel unavailable"):
        assert kernels.kernel_for(torch.device("cuda")) is None
    assert kernels.kernel_for(torch.device("meta")) is None


def test_vmap_uses_reference(count_fused):
    q, k, cos, sin = make_inputs(torch.float32, batch=3)
    got_q, got_k = torch.vmap(lambda a, b: apply_rotary(a, b, cos, sin))(q.unsqueeze(1), k.unsqueeze(1))
    want = reference(q, k, cos, sin, "half", None)
    assert not count_fused
    assert_close(got_q.squeeze(1), want[0])
    assert_close(got_k.squeeze(1), want[1])


def test_functorch_wrapper_probe_is_still_there():
    """apply.py asks a private PyTorch function whether a tensor is a vmap/grad wrapper (no public API
    says so). If PyTorch renames or changes it, this fails here rather than letting a wrapper reach a
    fused kernel."""
    probe = torch._C._functorch.is_functorch_wrapped_tensor
    x = torch.randn(3, 4)
    assert probe(x) is False
    seen = []
    torch.vmap(lambda row: seen.append(probe(row)) or row)(x)
    assert seen == [True]


def test_other_devices_use_reference():
    q = torch.empty(1, 2, 3, 8, device="meta")
    cos = torch.empty(3, 4, device="meta")
    assert fused_kernel(q, q, cos, cos) is None
    out_q, out_k = apply_rotary(q, q, cos, cos)
    assert out_q.shape == q.shape and out_q.device.type == "meta"


def test_bad_input_messages():
    q, k, cos, sin = make_inputs(torch.float32)
    with pytest.raises(ValueError, match="layout must be one of"):
        apply_rotary(q, k, cos, sin, layout="neox")
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        apply_rotary(q, k, cos, sin, rotary_dim=7)
    with pytest.raises(ValueError, match="last dimension rotary_dim // 2"):
        apply_rotary(q, k, cos, sin, rotary_dim=16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_module_decode_is_the_kernel_on_the_cached_table(fused_cpu, count_fused, dtype, layout):
    """rope(q, k, offset=n) on CPU is one kernel call on the cached table by row offset, for
    contiguous and transposed (B, S, H, D)-as-(B, H, S, D) inputs and partial rotation, bit for bit
    the reference rotation by rows n .. n + seq - 1; heads_first=False takes the same road."""
    rope = RotaryEmbedding(32, rotary_dim=24, layout=layout, max_position_embeddings=64)
    gen = torch.Generator().manual_seed(1)
    for seq, offset, transposed in ((1, 0, False), (1, 63, True), (3, 17, False), (2, 40, True)):
        shape_q, shape_k = (2, seq, 4, 32), (2, seq, 2, 32)
        q, k = (torch.randn(s, generator=gen, dtype=torch.float64).to(dtype) for s in (shape_q, shape_k))
        q, k = (
            (q.transpose(1, 2), k.transpose(1, 2))
            if transposed
            else (q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous())
        )
        before = len(count_fused)
        got_q, got_k = rope(q, k, offset=offset)
        assert len(count_fused) == before + 1  # one kernel call
        rows = slice(offset, offset + seq)
        cos, sin = rope.cos_cached[rows][None], rope.sin_cached[rows][None]  # (1, S, r/2)
        want_q, want_k = apply_reference(q, k, cos, sin, layout, 24, False)
        torch.testing.assert_close(got_q, want_q, rtol=0, atol=0)
        torch.testing.assert_close(got_k, want_k, rtol=0, atol=0)
        assert got_q.stride() == torch.empty_like(q).stride()  # the input's layout is kept
        seq_first = rope(q.transpose(1, 2), k.transpose(1, 2), offset=offset, heads_first=False)
        torch.testing.assert_close(seq_first[0], want_q.transpose(1, 2), rtol=0, atol=0)


def test_module_decode_reads_what_the_kernel_does_not_read(fused_cpu):
    """The module's decode call on a lazily negated q, mixed dtypes, rows past the cache (grown),
    and a negative offset: the same answers as the general path or its refusal, by name."""
    rope = RotaryEmbedding(8, max_position_embeddings=16)
    q, k = torch.randn(1, 2, 1, 8), torch.randn(1, 1, 1, 8)
    negated = torch.complex(torch.zeros_like(q), -q).conj().imag
    assert negated.is_neg()
    want = rope(q, k, position_ids=torch.tensor([[3]]))
    assert torch.equal(rope(negated, k, offset=3)[0], want[0])
    assert torch.equal(rope(q, k.double(), offset=3)[1], rope(q, k.double(), position_ids=torch.tensor([[3]]))[1])
    far = rope(q, k, offset=16)  # row 16 of 16: the cache grows
    assert rope.cached_length > 16 and torch.equal(far[0], rope(q, k, position_ids=torch.tensor([[16]]))[0])
    with pytest.raises(ValueError, match="offset"):
        rope(q, k, offset=-1)


def test_argument_checks_run_once_per_layout(monkeypatch):
    """apply_rotary's argument checks are a function of types, shapes, dtypes, layout name and
    rotary_dim: a seen combination is not checked again (a decode loop pays one lookup per layer),
    a new one is, and refused arguments are refused at every call, never remembered."""
    import posenc.rope.apply as apply_mod

    calls = []
    original = apply_mod._check_rotary_inputs

    def spy(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(apply_mod, "_check_rotary_inputs", spy)
    monkeypatch.setattr(apply_mod, "_ACCEPTED", {})
    for _ in range(10):
        q, k, cos, sin = make_inputs(torch.float32, seq=3)
        want = reference(q, k, cos, sin, "half", None)
        got = apply_rotary(q, k, cos, sin)
        assert_close(got[0], want[0])
    assert len(calls) == 1
    apply_rotary(q, k, cos, sin, layout="interleaved")
    apply_rotary(q.double(), k.double(), cos.double(), sin.double())
    assert len(calls) == 3
    for _ in range(3):
        with pytest.raises(ValueError, match="layout"):
            apply_rotary(q, k, cos, sin, layout="halves")
        with pytest.raises(ValueError, match="rotary_dim"):
            apply_rotary(q, k, cos, sin, rotary_dim=31)
    assert len(calls) == 9 and len(apply_mod._ACCEPTED) == 3


def test_one_entry_row_offset_and_positions(fused_cpu, count_fused):
    """apply_rotary(row_offset=n) equals the rows n.. of the table, apply_rotary(positions=p) the
    named rows, forward and backward, through the fused kernel; bad offsets are refused by name."""
    q, k, _, _ = make_inputs(torch.float32, seq=4)
    ang = torch.rand(1, 12, 16, dtype=torch.float64) * 6
    cos, sin = ang.cos().float(), ang.sin().float()
    got = apply_rotary(q, k, cos, sin, row_offset=7)
    assert_close(got[0], reference(q, k, cos[:, 7:11], sin[:, 7:11], "half", None)[0])
    pos = torch.tensor([[3, 0, 11, 3], [1, 2, 3, 4]])
    got = apply_rotary(q, k, cos[0], sin[0], positions=pos)
    want = apply_reference(q, k, cos[0][pos], sin[0][pos], "half", 32, False)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])
    assert count_fused
    qg = q.clone().requires_grad_()
    apply_rotary(qg, k, cos, sin, row_offset=8)[0].sum().backward()
    qr = q.clone().requires_grad_()
    reference(qr, k, cos[:, 8:12], sin[:, 8:12], "half", None)[0].sum().backward()
    assert_close(qg.grad, qr.grad)
    for bad, match in ((-1, "row_offset"), (9, "row_offset"), (True, "row_offset"), (1.5, "row_offset")):
        with pytest.raises((ValueError, TypeError), match=match):
            apply_rotary(q, k, cos, sin, row_offset=bad)


# -- the work done per call ------------------------------------------------------------------------
class RecordOps(TorchDispatchMode):
    """Record the name of every aten op run under it, and the allocations: the outputs whose storage
    is none of the inputs' (a view shares its input's storage and is not one)."""

    def __init__(self):
        super().__init__()
        self.ops, self.allocations = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        storages = {t.untyped_storage().data_ptr() for t in tensors}
        name = func.overloadpacket.__name__
        self.ops.append(name)
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in storages:
                self.allocations.append(name)
        return out


def test_decode_call_dispatches_only_its_two_outputs(fused_cpu):
    """A decode call with ready tables, 2-d or 3-d, by row offset, and the module's decode call,
    run no torch op but the two outputs' allocation (torch.empty_like, or on apply_rotary's planned
    layouts torch.empty_strided with the strides empty_like gives): no view of the tables, no slice
    for the row check, no copy."""
    q, k = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 1, 16)
    table = torch.rand(12, 8)
    cos, sin = table[5:6], table[6:7]  # (1, r/2): one position's row
    cos3, sin3 = cos[None], sin[None]  # (1, 1, r/2)
    rope = RotaryEmbedding(16, max_position_embeddings=12)
    calls = {
        "2-d tables": lambda: apply_rotary(q, k, cos, sin),
        "3-d tables": lambda: apply_rotary(q, k, cos3, sin3),
        "row offset": lambda: apply_rotary(q, k, table, table, row_offset=5),
        "validate=False": lambda: apply_rotary(q, k, cos, sin, validate=False),
        "module": lambda: rope(q, k, offset=5),
    }
    for name, call in calls.items():
        call()  # the layout's first call may check and cache
        with RecordOps() as record:
            out_q, out_k = call()
        assert record.ops in (["empty_like"] * 2, ["empty_strided"] * 2), (name, record.ops)
        assert out_q.shape == q.shape and out_k.shape == k.shape
        assert out_q.stride() == torch.empty_like(q).stride() and out_k.stride() == torch.empty_like(k).stride()
    want = reference(q, k, table[None, 5:6], table[None, 5:6], "half", None)
    assert_close(apply_rotary(q, k, table, table, row_offset=5)[0], want[0])


def test_decode_call_by_positions_reads_no_position_back(fused_cpu):
    """By positions with validate=True, the C kernel checks every position itself: the call runs no
    torch op but the two outputs' allocation (no aminmax, no read-back of the positions to the
    host), and a refused call still names the bad value as the Python check does, with nothing
    written."""
    q, k = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 1, 16)
    table = torch.rand(12, 8)
    for pos in (torch.tensor([[7]]), torch.tensor([7]), torch.tensor([[7]], dtype=torch.int32)):
        apply_rotary(q, k, table, table, positions=pos)  # the layout's first call may check and cache
        with RecordOps() as record:
            out_q, out_k = apply_rotary(q, k, table, table, positions=pos)
        view = ["unsqueeze"] if pos.dim() == 1 else []  # (S,) read as (1, S)
        assert record.ops in (view + ["empty_like"] * 2, view + ["empty_strided"] * 2), (pos, record.ops)
        want = reference(q, k, table[None, 7:8], table[None, 7:8], "half", None)
        assert torch.equal(out_q, want[0]) and torch.equal(out_k, want[1])
    x, y = q.clone(), k.clone()
    for bad, message in (
        ([[-2]], r"positions must be >= 0, got -2 at index \(0, 0\)"),
        ([-2], r"positions must be >= 0, got -2 at index \(0,\)"),
        ([[12]], r"positions must be < 12 \(the number of table rows\), got a maximum of 12"),
    ):
        with pytest.raises(ValueError, match=message):
            apply_rotary(x, y, table, table, positions=torch.tensor(bad), inplace=True)
        assert torch.equal(x, q) and torch.equal(y, k), "refused, but wrote first"
    with pytest.raises(ValueError, match=r"positions must be >= 0, got -1 at index \(0, 0\)"):
        apply_rotary(x, y[:, :, :0], table, table, positions=torch.tensor([[-1]]))  # values named first, as ever


def _backward_paths():
    """(name, forward) pairs: forward(a, b, cos, sin) -> (q', k') for leaves a, b."""
    return {
        "apply_rotary": lambda a, b, cos, sin: apply_rotary(a, b, cos, sin),
        "the op": lambda a, b, cos, sin: torch.ops.posenc.rotary(a, b, cos[None], sin[None], None, 0, 16, False, False),
        # clone's backward hands the gradient through untouched: what is recorded is the rotation's
        "in place": lambda a, b, cos, sin: apply_rotary(a.clone(), b.clone(), cos, sin, inplace=True),
    }


@pytest.mark.parametrize("path", list(_backward_paths()))
def test_backward_allocates_only_the_gradients(fused_cpu, path):
    """The backward of every fused path is the inverse rotation of the incoming gradients, written
    into the two gradients autograd asks for: two allocations, no copy, no op but those. Each
    layout's first step runs before recording: apply_rotary plans its gradients' layout there (the
    CPU plan asks torch.empty_like for the outputs' strides once), as it plans its forward's."""
    forward = _backward_paths()[path]
    q, k, cos, sin = make_inputs(torch.float64, seq=3, head_dim=16)
    cos, sin = cos[0], sin[0]  # (S, r/2)
    a, b = q.clone().requires_grad_(), k.clone().requires_grad_()
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    torch.autograd.grad(forward(a, b, cos, sin), (a, b), (gq, gk))  # the layout's first step
    torch.autograd.grad([t.sum() for t in forward(a, b, cos, sin)], (a, b))  # and with expanded gradients
    out = forward(a, b, cos, sin)
    with RecordOps() as record:
        grad_a, grad_b = torch.autograd.grad(out, (a, b), (gq, gk))
    assert len(record.allocations) == 2, record.ops
    assert not {"copy_", "clone", "contiguous", "_to_copy"} & set(record.ops), record.ops
    want = reference(gq, gk, cos, -sin, "half", None)  # R(-theta) g
    torch.testing.assert_close(grad_a, want[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad_b, want[1], rtol=1e-12, atol=1e-12)
    # an expanded gradient (of a sum) is read as it is
    out = forward(a, b, cos, sin)
    with RecordOps() as record:
        grad_a, _ = torch.autograd.grad((out[0].sum(), out[1].sum()), (a, b))
    assert not {"copy_", "clone", "contiguous", "_to_copy"} & set(record.ops), record.ops
    torch.testing.assert_close(grad_a, reference(torch.ones_like(q), gk, cos, -sin, "half", None)[0])


def test_layout_checks_run_once_per_layout_on_every_path(fused_cpu, monkeypatch):
    """Twenty steps of each path on fresh tensors of one layout: apply_rotary's argument checks, the
    in-place rules' overlap tests and the exact searches run in the first step only, forward and
    backward alike: (a) a decode call with ready tables, (b) the module's decode call, (c) forward
    and backward through torch.ops.posenc.rotary, (d) in place with autograd on q and k as views of
    one projection, whose byte ranges meet."""
    import posenc.rope.apply as apply_mod
    from posenc.rope.kernels import overlap, plans

    counts = {"argument checks": 0, "overlap tests": 0}

    def counted(name, fn):
        def spy(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return spy

    monkeypatch.setattr(apply_mod, "_ACCEPTED", {})
    monkeypatch.setattr(apply_mod, "_check_rotary_inputs", counted("argument checks", apply_mod._check_rotary_inputs))
    for fn in ("self_overlaps", "overlaps", "overlap_of", "check_outputs", "identical"):
        monkeypatch.setattr(overlap, fn, counted("overlap tests", getattr(overlap, fn)))
    plans.clear()
    rope = RotaryEmbedding(16, max_position_embeddings=64)
    cos, sin = torch.rand(1, 8), torch.rand(1, 8)
    table = torch.rand(1, 8, 8)
    weight = torch.randn(16, 4 * 16)

    def decode():
        apply_rotary(torch.randn(1, 4, 1, 16), torch.randn(1, 2, 1, 16), cos, sin)

    def module():
        rope(torch.randn(1, 4, 1, 16), torch.randn(1, 2, 1, 16), offset=7)

    def op_forward_backward():
        q, k = torch.randn(1, 4, 8, 16, requires_grad=True), torch.randn(1, 2, 8, 16, requires_grad=True)
        out = torch.ops.posenc.rotary(q, k, table, table, None, 0, 16, False, False)
        torch.autograd.backward(out, (torch.ones_like(out[0]), torch.ones_like(out[1])))

    def in_place_forward_backward():
        x = torch.randn(1, 8, 16, requires_grad=True)
        qk = x @ weight  # (B, S, (Hq + Hk) * D)
        q = qk[..., : 2 * 16].view(1, 8, 2, 16).transpose(1, 2)  # (B, Hq, S, D)
        k = qk[..., 2 * 16 :].view(1, 8, 2, 16).transpose(1, 2)  # interleaved with q: byte ranges meet
        q, k = apply_rotary(q, k, table[0], table[0], inplace=True)
        (q.sum() + k.sum()).backward()

    for step in (decode, module, op_forward_backward, in_place_forward_backward):
        step()
        first = dict(counts, **plans.STATS)
        for _ in range(20):
            step()
        assert dict(counts, **plans.STATS) == first, (step.__name__, first, counts, plans.STATS)
    assert counts["argument checks"] >= 1 and counts["overlap tests"] >= 1  # the spies were reached


def _seen_layout(q_heads=4, kv_heads=2, dim=16, dtype=torch.float32):
    """A decode layout apply_rotary has seen: q and k as (B, S, H, D) views of one projection."""
    buf = torch.randn(1, 1, q_heads + kv_heads, dim, dtype=dtype)
    q, k = buf[:, :, :q_heads].transpose(1, 2), buf[:, :, q_heads:].transpose(1, 2)
    table = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = torch.rand(1, dim // 2, dtype=table), torch.rand(1, dim // 2, dtype=table)
    apply_rotary(q, k, cos, sin)  # checks and remembers the layout
    return buf, q, k, cos, sin


def test_a_seen_layout_still_checks_what_changes(fused_cpu):
    """The remembered argument check covers types, shapes and dtypes only: operands of a seen
    layout whose storage overlaps, whose dtype or device differs, with a lazy negation bit, wanting
    gradients, or with a shape that does not fit are checked (and rotated or refused) as on a first
    call."""
    buf, q, k, cos, sin = _seen_layout()
    # k overlapping q, same strides: out of place reads both, in place is refused
    k_over = buf[:, :, 2:4].transpose(1, 2)
    assert k_over.stride() == k.stride()
    want = reference(q, k_over, cos, sin, "half", None)
    got = apply_rotary(q, k_over, cos, sin)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    with pytest.raises(ValueError, match="share memory"):
        apply_rotary(q, k_over, cos, sin, inplace=True)
    # another dtype of q with the same tables: converted or refused as before
    for dtype in (torch.float64, torch.bfloat16):
        q2, k2 = q.to(dtype), k.to(dtype)
        assert_close(apply_rotary(q2, k2, cos, sin)[0], reference(q2, k2, cos, sin, "half", None)[0])
    # another device, same shapes and strides: no kernel reads meta tensors
    meta = apply_rotary(q.to("meta"), k.to("meta"), cos.to("meta"), sin.to("meta"))
    assert meta[0].device.type == "meta" and meta[0].shape == q.shape
    # a lazily negated q of the same layout is read as its values
    q_neg = torch._neg_view(q)
    assert q_neg.is_neg() and q_neg.stride() == q.stride()
    assert torch.equal(apply_rotary(q_neg, k, cos, sin)[0], reference(-q, k, cos, sin, "half", None)[0])
    # gradients: the autograd path
    q_grad = q.detach().clone().requires_grad_()
    apply_rotary(q_grad, k, cos, sin)[0].sum().backward()
    assert q_grad.grad is not None
    # shapes that no longer fit, rows past the table, a bad rotary_dim: refused every time
    for _ in range(2):
        with pytest.raises(ValueError, match="cover 2 positions"):
            apply_rotary(q, k, torch.rand(2, 8), torch.rand(2, 8))
        with pytest.raises(ValueError, match="rotary_dim must be even"):
            apply_rotary(q, k, cos, sin, rotary_dim=7)
        table = torch.rand(4, 8)
        apply_rotary(q, k, table, table, row_offset=3)
        with pytest.raises(ValueError, match="row_offset"):
            apply_rotary(q, k, table, table, row_offset=4)
        with pytest.raises(ValueError, match="row_offset"):
            apply_rotary(q, k, table, table, row_offset=-1)


def test_the_kernel_follows_the_loader_state(fused_cpu, monkeypatch):
    """The kernel is the loaded library's: after kernels.cpu.reset() with the kernel disabled, a seen
    layout takes the reference (with the one warning); after a reset with it enabled, the new
    library's kernel runs the same layout, bit for bit."""
    _, q, k, cos, sin = _seen_layout()
    want = reference(q, k, cos, sin, "half", None)
    cpu.reset()
    monkeypatch.setenv("POSENC_DISABLE_FUSED", "1")
    try:
        with pytest.warns(RuntimeWarning, match="POSENC_DISABLE_FUSED"):
            got = apply_rotary(q, k, cos, sin)
        assert torch.equal(got[0], want[0]) and cpu.unavailable_reason() == "POSENC_DISABLE_FUSED is set"
        assert kernels.cpu_kernel() is None
    finally:
        cpu.reset()
    monkeypatch.delenv("POSENC_DISABLE_FUSED")
    assert kernels.cpu_kernel() is not None and cpu.library() is not None
    assert torch.equal(apply_rotary(q, k, cos, sin)[0], want[0])


def test_inplace_and_positions_calls_equal_the_reference(fused_cpu, count_fused):
    """In place and with per-token positions ((B, S) int64, (S,) int32, in place by positions),
    each call is one kernel call whose answer is the reference's; in place returns q and k
    themselves."""
    buf, q, k, cos, sin = _seen_layout()
    table = torch.rand(16, 8)  # (rows, r/2)
    rows = {"(B, S)": torch.tensor([[11]]), "(S,) int32": torch.tensor([3], dtype=torch.int32)}
    calls = {
        "in place": lambda: apply_rotary(q, k, cos, sin, inplace=True),
        **{f"positions {n}": (lambda p=p: apply_rotary(q, k, table, table, positions=p)) for n, p in rows.items()},
        "positions in place": lambda: apply_rotary(q, k, table, table, positions=rows["(B, S)"], inplace=True),
    }
    for name, call in calls.items():
        pos = rows["(S,) int32"].long()[None] if "(S,)" in name else rows["(B, S)"]
        c, s = (cos, sin) if name == "in place" else (table[pos[0]], table[pos[0]])
        want = reference(q.clone(), k.clone(), c, s, "half", None)
        for _ in range(2):
            before, fused = buf.clone(), len(count_fused)
            got = call()
            assert len(count_fused) == fused + 1, name
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), name
            if "in place" in name:
                assert got[0] is q and got[1] is k
            buf.copy_(before)


def test_inplace_and_positions_calls_still_check_what_changes(fused_cpu):
    """A seen in-place or positions layout is checked where a layout cannot say: q and k that now
    overlap are refused before anything is written; q and k one tensor is rotated once; a negative
    or too large position gets its message with its index, at every call; positions of another
    integer dtype are read as int64; an in-place call bumps the version counters, so autograd
    refuses a backward through a tensor it saved before."""
    buf, q, k, cos, sin = _seen_layout()
    table = torch.rand(16, 8)
    apply_rotary(q, k, cos, sin, inplace=True)
    k_over = buf[:, :, 2:4].transpose(1, 2)  # k's layout, sharing two heads with q
    before = buf.clone()
    with pytest.raises(ValueError, match="share memory"):
        apply_rotary(q, k_over, cos, sin, inplace=True)
    assert torch.equal(buf, before), "refused, but wrote first"
    x = torch.randn(1, 2, 1, 16)  # q and k one tensor: rotated once
    want = reference(x.clone(), x.clone(), cos, sin, "half", None)[0]
    for _ in range(2):
        y = x.clone()
        got = apply_rotary(y, y, cos, sin, inplace=True)
        assert torch.equal(got[0], want) and got[0] is y
    pos = torch.tensor([[4]])
    apply_rotary(q, k, table, table, positions=pos)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"positions must be >= 0, got -1 at index \(0, 0\)"):
            apply_rotary(q, k, table, table, positions=torch.tensor([[-1]]))
        with pytest.raises(ValueError, match="positions must be < 16"):
            apply_rotary(q, k, table, table, positions=torch.tensor([[16]]))
    small = torch.tensor([[4]], dtype=torch.int16)
    want = apply_rotary(q, k, table, table, positions=pos)[0]
    assert_close(apply_rotary(q, k, table, table, positions=small)[0], want)
    leaf = torch.randn(1, 1, 6, 16, requires_grad=True)
    saved = leaf * 1
    squared = saved * saved  # autograd saves `saved` for the backward
    qs, ks = saved.detach()[:, :, :4].transpose(1, 2), saved.detach()[:, :, 4:].transpose(1, 2)
    assert qs.stride() == q.stride()
    apply_rotary(qs, ks, cos, sin, inplace=True)  # the seen layout, on memory autograd saved
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        squared.sum().backward()
