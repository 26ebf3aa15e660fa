"""The rotation under ``torch.compile(fullgraph=True)`` as a process's first rotation, in fresh
interpreters (no kernel loaded, nothing warmed up, as a user's script starts):

* the module compiled before any eager call (loading the C kernel takes a lock, which Dynamo cannot
  trace: the compile check must come first);
* ``apply_rotary(..., inplace=True)`` traced whole (the in-place rules read no pointers while
  tracing), with q and k written as eager writes them;
* a patched ``transformers`` model compiled with ``fullgraph=True`` as its first call.

Each compares the compiled values with the same call run eagerly afterwards, in that process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import posenc

SRC = str(Path(posenc.__file__).resolve().parents[1])


def fresh_result(code: str, timeout: int = 600) -> dict:
    """Run ``code`` in a fresh interpreter with this posenc first on the path; return the dict it
    prints after ``RESULT ``, or fail with its output."""
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=timeout
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


def test_compiled_module_as_the_first_rotation_of_a_process():
    """torch.compile(rope, fullgraph=True) before any eager rotation traces (decode by an int
    offset and a prefill by position ids), and equals the eager module afterwards."""
    out = fresh_result("""
        import json, torch
        from posenc import RotaryEmbedding
        rope = RotaryEmbedding(32, rotary_dim=24, max_position_embeddings=64)
        q, k = torch.randn(2, 4, 3, 32), torch.randn(2, 2, 3, 32)
        compiled = torch.compile(rope, fullgraph=True)
        decode = compiled(q, k, offset=5)
        prefill = compiled(q, k, position_ids=torch.tensor([[0, 1, 2], [7, 8, 9]]))
        eager_decode = rope(q, k, offset=5)
        eager_prefill = rope(q, k, position_ids=torch.tensor([[0, 1, 2], [7, 8, 9]]))
        diff = max((a - b).abs().max().item() for a, b in zip(decode + prefill, eager_decode + eager_prefill))
        print("RESULT " + json.dumps({"diff": diff}))
    """)
    assert out["diff"] <= 1e-6, out


def test_compiled_inplace_rotation_traces_whole():
    """apply_rotary(..., inplace=True) under fullgraph=True traces in one graph and writes q and k
    as the eager call does (views of one projection, as attention makes them)."""
    out = fresh_result("""
        import json, torch
        from posenc import apply_rotary
        cos, sin = torch.rand(3, 16), torch.rand(3, 16)

        def step(x):
            q, k = x[:, :, :4].transpose(1, 2), x[:, :, 4:].transpose(1, 2)  # (B, H, S, D) views
            q, k = apply_rotary(q, k, cos, sin, inplace=True)
            return q.sum() + k.sum()

        x = torch.randn(2, 3, 6, 32)
        compiled_x, eager_x = x.clone(), x.clone()
        total = torch.compile(step, fullgraph=True)(compiled_x)
        want = step(eager_x)
        print("RESULT " + json.dumps({
            "written": (compiled_x - eager_x).abs().max().item(),
            "changed": (compiled_x - x).abs().max().item(),
            "total": abs(total.item() - want.item()),
        }))
    """)
    assert out["written"] <= 1e-6 and out["total"] <= 1e-4, out
    assert out["changed"] > 0.1, out  # the compiled call did write in place


def test_patched_model_compiled_with_fullgraph_as_its_first_call():
    """A tiny Llama patched by posenc, compiled with fullgraph=True before any eager forward, gives
    the eager patched model's logits."""
    pytest.importorskip("transformers")
    out = fresh_result("""
        import json, torch
        from posenc import testing as tiny
        from posenc.integrations.transformers import patch
        model = tiny.tiny_model("llama-3.1-8b")
        ids = torch.randint(0, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
        with patch(model), torch.no_grad():
            compiled = torch.compile(model, fullgraph=True)(ids).logits
            eager = model(ids).logits
        print("RESULT " + json.dumps({"diff": (compiled - eager).abs().max().item()}))
    """)
    assert out["diff"] <= 1e-4, out
