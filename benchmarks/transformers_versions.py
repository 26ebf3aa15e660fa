"""The transformers patch under the installed ``transformers`` version, one line per tiny model.

What ``pyproject.toml`` and docs/transformers.md claim about ``transformers`` versions is what this
script printed under each of them. For every tiny model of :mod:`posenc.testing` (real rope fields,
random weights) it checks, with the unpatched model of the same version as the oracle:

* ``logits``: patched within 4x the unpatched float32 model's own distance from its float64 run;
* ``generate``: the same greedy tokens with the KV cache (8 new tokens);
* ``undo``: logits bit-identical to before the patch after ``undo()``;
* ``pickle``: ``torch.save``/``torch.load`` of the patched model gives the same logits.

It then does the same for a tiny model of each family in :data:`DISCOVERED` that the version has
(``posenc.testing.tiny_model_of_type``: the family's default config, shrunk; patched from what its
code does, not from a hand-written entry), with a plain float64 copy of the model as the yardstick.
A tiny config over :data:`MAX_PARAMETERS` parameters is not built (the shrinking follows
transformers 5's field names, and an older version can keep a field at its full size).

Length-dependent models (``phi-3.5-mini-instruct``, ``llama-dynamic``) get a fifth check,
``freeze``: with ``freeze_frequencies`` the cached decode equals a full forward (within 20x the
float32 noise), as docs/transformers.md says.

A model the version cannot build, or that ``patch`` refuses (``UnsupportedModelError``, safe: the
model is left as it was), is reported as such with the reason; a refusal is not a failure. The exit
status is 1 when any check fails.

Run under another version without touching the environment (transformers has no compiled parts)::

    pip install --target /tmp/tf-4.57.6 transformers==4.57.6
    PYTHONPATH=/tmp/tf-4.57.6:src python benchmarks/transformers_versions.py
    PYTHONPATH=src python benchmarks/transformers_versions.py llama-3.1-8b mixtral   # only these
"""

from __future__ import annotations

import copy
import io
import sys
from typing import Callable, Optional

import torch
import transformers

from posenc import testing as tiny
from posenc.integrations.transformers import UnsupportedModelError, patch

transformers.logging.set_verbosity_error()

#: families patched from their code (not hand-listed), checked under every version that has them
DISCOVERED = (
    "mixtral",
    "qwen2_moe",
    "gemma2",
    "gemma3_text",
    "cohere",
    "olmo2",
    "glm",
    "starcoder2",
    "granite",
    "stablelm",
    "qwen3_moe",
    "phimoe",
    "llama4_text",
)
#: a tiny config with more parameters than this is not built
MAX_PARAMETERS = 5_000_000
#: hand-listed models whose frequencies depend on the length: the trained-length field set to 16
LENGTH_DEPENDENT = {
    "phi-3.5-mini-instruct": "original_max_position_embeddings",
    "llama-dynamic": "max_position_embeddings",
}


def _parameters(config) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(config).parameters())


def build_discovered(model_type: str) -> torch.nn.Module:
    """A tiny ``model_type`` model, or ValueError when the family is missing or the model too big."""
    if model_type not in transformers.models.auto.configuration_auto.CONFIG_MAPPING:
        raise ValueError("no such model type in this version")
    count = _parameters(tiny.tiny_config_of_type(model_type))
    if count > MAX_PARAMETERS:
        raise ValueError(f"the tiny config has {count:,} parameters, over the cap of {MAX_PARAMETERS:,}")
    return tiny.tiny_model_of_type(model_type)


def _decode_vs_full(model, ids: torch.Tensor, new: int) -> float:
    """Max |logits of cached decoding - logits of one full forward| over the generated steps."""
    with torch.no_grad():
        out = model.generate(
            ids,
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
        steps = torch.stack(out.logits, 1).double()
        full = model(out.sequences[:, :-1]).logits[:, ids.shape[1] - 1 :].double()
    return float((steps - full).abs().max())


def check_freeze(name: str) -> str:
    """``freeze_frequencies=22`` over 12 prompt and 10 new tokens with a trained length of 16."""
    model = tiny.tiny_model(name, **{LENGTH_DEPENDENT[name]: 16})
    ids = torch.randint(1, tiny.VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    noise = float((tiny.logits(model, ids) - tiny.logits(tiny.float64_reference(model), ids)).abs().max())
    # patched first: after a call past the trained length a dynamic module keeps the longer length's
    # frequencies (transformers 5.10), which patch's check of the module's tables refuses
    try:
        with patch(model, freeze_frequencies=22):
            frozen = _decode_vs_full(model, ids, new=10)
    except UnsupportedModelError as error:
        return f"refused freeze: {str(error)[:160]}"
    unpatched = _decode_vs_full(model, ids, new=10)
    verdict = "ok" if frozen <= 20 * noise else "FAILED"
    return (
        f"{verdict} freeze: cached decode vs full forward {frozen:.2e} (noise {noise:.1e}; unpatched {unpatched:.2e})"
    )


def check(name: str, build: Optional[Callable[[str], torch.nn.Module]] = None) -> str:
    """The four checks on one model: ``tiny.tiny_model(name)``, or ``build(name)`` for a found family.

    A hand-listed model's yardstick is :func:`posenc.testing.float64_reference` (exact rotary tables);
    a found family's is the model copied to float64 as it is.
    """
    ids = torch.randint(1, tiny.VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    try:
        model = tiny.tiny_model(name) if build is None else build(name)
    except Exception as error:  # a family or config field this version does not have
        return f"not built by this version ({type(error).__name__}: {str(error)[:100]})"
    try:
        reference = tiny.float64_reference(model) if build is None else copy.deepcopy(model).to(torch.float64)
        exact = tiny.logits(reference, ids)
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
        if not torch.equal(tiny.logits(model, ids), before) or "_posenc_patch" in model.__dict__:
            return f"FAILED refused but the model changed: {str(error)[:100]}"
        return f"refused: {str(error)[:160]}"
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
    torch.set_num_threads(1)
    names = sys.argv[1:] or tiny.case_names() + list(DISCOVERED)
    counts = {"checked": 0, "ok": 0, "refused": 0, "FAILED": 0, "not built": 0}
    for name in names:
        try:
            result = check(name, None if name in tiny.case_names() else build_discovered)
        except Exception as error:  # a bug in the patch or in this script: reported, never a pass
            result = f"FAILED {type(error).__name__}: {str(error)[:100]}"
        if name in LENGTH_DEPENDENT and result.startswith("ok"):
            try:
                frozen = check_freeze(name)
            except Exception as error:
                frozen = f"FAILED freeze: {type(error).__name__}: {str(error)[:100]}"
            result = f"{frozen}; four checks {result}" if frozen.startswith("FAILED") else f"{result}; {frozen}"
        kind = next(k for k in ("FAILED", "refused", "not built", "ok") if result.startswith(k))
        counts[kind] += 1
        counts["checked"] += kind != "not built"
        failed += kind == "FAILED"
        print(f"  {name:28s} {result}", flush=True)
    print("  " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
