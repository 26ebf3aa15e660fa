"""The transformers patch under the installed ``transformers`` version, one line per tiny model.

What ``pyproject.toml`` and docs/transformers.md claim about ``transformers`` versions is what this
script printed under each of them. For every tiny model of :mod:`posenc.testing` (real rope fields,
random weights) it checks, with the unpatched model of the same version as the oracle:

* ``logits``: patched within 4x the unpatched float32 model's own distance from its float64 run;
* ``generate``: the same greedy tokens with the KV cache (8 new tokens);
* ``undo``: logits bit-identical to before the patch after ``undo()``;
* ``pickle``: ``torch.save``/``torch.load`` of the patched model gives the same logits.

A model the version cannot build, or that ``patch`` refuses, is reported as such (a refusal is not a
failure). The exit status is 1 when any check fails.

Run under another version without touching the environment (transformers has no compiled parts)::

    pip install --target /tmp/tf-4.57.6 transformers==4.57.6
    PYTHONPATH=/tmp/tf-4.57.6:src python benchmarks/transformers_versions.py
"""

from __future__ import annotations

import io
import sys

import torch
import transformers

from posenc import testing as tiny
from posenc.integrations.transformers import UnsupportedModelError, patch

transformers.logging.set_verbosity_error()


def check(name: str) -> str:
    ids = torch.randint(1, tiny.VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    try:
        model = tiny.tiny_model(name)
    except Exception as error:  # a family or config field this version does not have
        return f"not built by this version ({type(error).__name__}: {str(error)[:80]})"
    try:
        exact = tiny.logits(tiny.float64_reference(model), ids)
    except ValueError as error:  # no rotary module to make exact (GPT-J before 5.0): patch must refuse
        try:
            patch(model).undo()
        except UnsupportedModelError as refusal:
            return f"refused: {str(refusal)[:100]}"
        return f"FAILED patched a model without a rotary module ({error})"
    before = tiny.logits(model, ids)
    noise = float((before - exact).abs().max())
    with torch.no_grad():
        tokens = model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
    try:
        handle = patch(model)
    except UnsupportedModelError as error:
        return f"refused: {str(error)[:100]}"
    failures = []
    try:
        after = tiny.logits(model, ids)
        diff = float((after - before).abs().max())
        if not diff <= 4 * noise:
            failures.append(f"logits {diff:.2e} > 4 x noise {noise:.2e}")
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
        if not torch.equal(got, tokens):
            failures.append("generate differs")
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        if not torch.equal(tiny.logits(torch.load(buffer, weights_only=False), ids), after):
            failures.append("pickle differs")
    except Exception as error:
        failures.append(f"{type(error).__name__}: {str(error)[:100]}")
    finally:
        handle.undo()
    if not torch.equal(tiny.logits(model, ids), before):
        failures.append("undo not bit-identical")
    return "FAILED " + "; ".join(failures) if failures else f"ok (logits {diff:.1e}, noise {noise:.1e})"


def main() -> int:
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = 0
    for name in sys.argv[1:] or tiny.case_names():
        result = check(name)
        failed += result.startswith("FAILED")
        print(f"  {name:28s} {result}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
