"""Per-architecture accuracy of posenc-patched ``transformers`` models, as one markdown table.

For every tiny model of :mod:`posenc.testing` (real rope fields, random weights):

* ``short``: max |logits patched - unpatched| at positions 0..15 (float32), next to ``noise``, the
  unpatched float32 model's own distance from the float64 run there;
* ``128k`` / ``1M``: position_ids = offset + 0..15; the unpatched float32 model's max logit error
  against the float64 run, divided by the patched model's (the improvement factor);
* the same factor in bfloat16, against a float64 run of the *bf16-rounded* weights (so that weight
  rounding, which patching cannot change, is not counted as error).

Run: ``PYTHONPATH=src python benchmarks/integration_accuracy.py [case ...]``.
"""

from __future__ import annotations

import copy
import math
import sys

import torch
import transformers

from posenc import testing as tiny
from posenc.integrations.transformers import patch

transformers.logging.set_verbosity_error()
SEQ = 16


def errors(model, ref, ids, offset):
    pos = (torch.arange(SEQ) + offset).unsqueeze(0).expand(ids.shape[0], -1)
    exact = tiny.logits(ref, ids, pos)
    try:
        unpatched = float((tiny.logits(model, ids, pos) - exact).abs().max())
    except IndexError:  # GPT-J's own table ends at n_positions
        unpatched = float("nan")
    with patch(model):
        patched_logits = tiny.logits(model, ids, pos)
    return unpatched, float((patched_logits - exact).abs().max()), patched_logits


def main(names):
    ids = torch.randint(1, tiny.VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))
    print(
        "| case | model type | short: patched vs unpatched | float32 noise | 128k ×better | 1M ×better | "
        "bf16 128k ×better | bf16 1M ×better |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        model = tiny.tiny_model(name)
        ref = tiny.float64_reference(model)
        pos0 = torch.arange(SEQ).unsqueeze(0).expand(2, -1)
        before = tiny.logits(model, ids, pos0)
        with patch(model):
            after = tiny.logits(model, ids, pos0)
        noise = float((before - tiny.logits(ref, ids, pos0)).abs().max())
        short = float((after - before).abs().max())
        cells = []
        for offset in (131072, 1048576):
            u, p, _ = errors(model, ref, ids, offset)
            cells.append("n/a (table ends)" if math.isnan(u) else f"{u / p:,.0f} ({u:.1e} → {p:.1e})")
        bf16 = copy.deepcopy(model).to(torch.bfloat16)
        ref_bf16 = tiny.float64_reference(bf16)
        for offset in (131072, 1048576):
            u, p, _ = errors(bf16, ref_bf16, ids, offset)
            cells.append("n/a (table ends)" if math.isnan(u) else f"{u / p:.2f} ({u:.1e} → {p:.1e})")
        print(
            f"| {name} | {model.config.model_type} | {short:.1e} | {noise:.1e} | " + " | ".join(cells) + " |",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:] or tiny.case_names())
