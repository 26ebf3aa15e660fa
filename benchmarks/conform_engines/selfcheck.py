"""A plain check of one adapter against posenc's float64 tables, without ``posenc conform``.

``python benchmarks/conform_engines/selfcheck.py MODULE:FUNCTION CONFIG.json...`` prints, per config,
the adapter's largest q/k error (relative to the largest exact value), its score error, and the
factor its rotated q carries (``|q_rot| / |q|`` over the rotated slice) beside posenc's
``attention_factor``. It is the yardstick the adapters were written against; ``run.py`` uses the CLI.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from typing import Any, Callable, Dict, List, Tuple

import torch

from posenc.rope import RotaryEmbedding
from posenc.rope.apply import apply_rotary
from posenc.rope.hfconfig import rotary_kwargs_from_hf
from posenc.rope.tables import rope_cos_sin

MLA_FAMILIES = ("deepseek_v2", "deepseek_v3", "mistral4", "longcat_flash", "youtu", "axk1", "hy_v4")


def exact(config: Dict[str, Any], q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
    """posenc's float64 answer: (q_rot, k_rot, softmax scale, attention factor, rotary_dim)."""
    kwargs = rotary_kwargs_from_hf(config, strict=False)
    rope = RotaryEmbedding(**kwargs)
    inv, factor = rope.frequencies(int(positions.max()) + 1)
    cos, sin = rope_cos_sin(positions, inv, factor, torch.float64)  # (tokens, rotary_dim // 2)
    q4, k4 = q.double().transpose(0, 1)[None], k.double().transpose(0, 1)[None]  # (1, heads, tokens, d)
    qr, kr = apply_rotary(q4, k4, cos, sin, layout=rope.layout, rotary_dim=rope.rotary_dim)
    # transformers applies the YaRN temperature to the softmax scale only in the MLA families
    # (``yarn_apply_mscale`` in their attention); every other family keeps 1/sqrt(d)
    mla = config.get("model_type") in MLA_FAMILIES
    scale = (rope.softmax_scale_factor if mla else 1.0) / math.sqrt(kwargs["head_dim"])
    return qr[0].transpose(0, 1), kr[0].transpose(0, 1), scale, factor, rope.rotary_dim


def compare(rotate: Callable, config: Dict[str, Any], positions: List[int], heads: int = 2) -> Dict[str, Any]:
    head_dim = rotary_kwargs_from_hf(config, strict=False)["head_dim"]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(len(positions), heads, head_dim, generator=g)
    k = torch.randn(len(positions), heads, head_dim, generator=g)
    pos = torch.tensor(positions, dtype=torch.int64)
    qe, ke, scale, factor, rotary_dim = exact(config, q, k, pos)
    try:
        out: Tuple = rotate(config, q.clone(), k.clone(), pos)
    except NotImplementedError as error:
        return {"status": f"not supported: {error}"}
    qa, ka = out[0].double(), out[1].double()
    sa = (float(out[2]) if len(out) > 2 else 1.0) / math.sqrt(head_dim)  # a multiplier of 1/sqrt(d)
    got_factor = float(qa[..., :rotary_dim].norm() / q[..., :rotary_dim].double().norm())
    scores_e = torch.einsum("thd,shd->hts", qe, ke) * scale
    scores_a = torch.einsum("thd,shd->hts", qa, ka) * sa
    return {
        "q_err": float((qa - qe).abs().max() / qe.abs().max()),
        "k_err": float((ka - ke).abs().max() / ke.abs().max()),
        "score_err": float((scores_a - scores_e).abs().max() / scores_e.abs().max()),
        "factor": got_factor,
        "exact_factor": factor,
        "scale_ratio": sa / scale,
    }


def main(argv: List[str]) -> int:
    module, name = argv[0].split(":")
    rotate = getattr(importlib.import_module(module), name)
    for path in argv[1:]:
        config = json.load(open(path))
        top = config.get("max_position_embeddings", 2048)
        positions = sorted({p for p in (0, 1, 2, 3, 100, 4095, 8191, 16383, top - 1) if p < top})
        print(path.split("/")[-1], json.dumps(compare(rotate, config, positions)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
