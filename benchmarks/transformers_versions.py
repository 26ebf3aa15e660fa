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

Then it measures transformers' own kernels mechanism against posenc's re-binding on a tiny Mistral
(:func:`kernels_route`). ``--coverage`` adds the enumeration of ``tests/integrations/test_transformers_coverage.py``
under that version (every rotary causal-LM type, each held to the exact float64 reference at
positions 0..31 and in a far block; about 7 minutes a version on two cores).

The version matrix, one command: each version in a fresh venv (torch 2.13.0, that transformers and
what it requires, such as ``kernels`` for 5.25), this script run inside it, one table printed at the
end (docs/transformers.md holds it)::

    OMP_NUM_THREADS=1 python benchmarks/transformers_versions.py --matrix /tmp/tfm             # 4.57.6, 5.24.0, newest
    OMP_NUM_THREADS=1 python benchmarks/transformers_versions.py --matrix /tmp/tfm --coverage  # and every rotary type
    OMP_NUM_THREADS=1 python benchmarks/transformers_versions.py --matrix /tmp/tfm 5.25.0      # these versions

Under the transformers on the path (no venv)::

    PYTHONPATH=src python benchmarks/transformers_versions.py                      # the tiny models
    PYTHONPATH=src python benchmarks/transformers_versions.py llama-3.1-8b mixtral # only these
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

REPO = pathlib.Path(__file__).resolve().parent.parent
#: the oldest release patch accepts and the one docs/transformers.md was written against; the newest
#: on the index is added by --matrix
MATRIX = ("4.57.6", "5.24.0")

#: families beside the integration cases (tiny configs of their own type), checked under every version that has them
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
#: integration cases whose frequencies depend on the length: the trained-length field set to 16
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


def check_freeze(name: str) -> str:
    """``freeze_frequencies=22`` over 12 prompt and 10 new tokens with a trained length of 16."""
    model = tiny.tiny_model(name, **{LENGTH_DEPENDENT[name]: 16})
    ids = torch.randint(1, tiny.VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    noise = float((tiny.logits(model, ids) - tiny.logits(tiny.float64_reference(model), ids)).abs().max())
    # patched first: after a call past the trained length a dynamic module keeps the longer length's
    # frequencies (transformers 5.10), which patch's check of the module's tables refuses
    try:
        with patch(model, freeze_frequencies=22):
            frozen = tiny.decode_vs_full(model, ids, new=10)
    except UnsupportedModelError as error:
        return f"refused freeze: {str(error)[:160]}"
    unpatched = tiny.decode_vs_full(model, ids, new=10)
    verdict = "ok" if frozen <= 20 * noise else "FAILED"
    return (
        f"{verdict} freeze: cached decode vs full forward {frozen:.2e} (noise {noise:.1e}; unpatched {unpatched:.2e})"
    )


def check(name: str, build: Optional[Callable[[str], torch.nn.Module]] = None) -> str:
    """The four checks on one model: ``tiny.tiny_model(name)``, or ``build(name)`` for a found family.

    An integration case's yardstick is :func:`posenc.testing.float64_reference` (exact rotary tables);
    another family's is the model copied to float64 as it is.
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


def kernels_route() -> Dict[str, object]:
    """transformers' own kernels mechanism against posenc's re-binding, on a tiny Mistral.

    Where ``apply_rotary_pos_emb`` is a ``kernels`` ``Func`` module (transformers 5.25 with the
    ``kernels`` package), posenc's rotation is registered for it through ``use_kernel_mapping`` with a
    local repository object (``load()`` returns posenc's rotation as a layer) and the model is
    ``kernelize``d; both models are then held to the exact float64 reference in a far block.
    """
    import kernels  # noqa: F401  (ImportError: the route does not exist here)
    from kernels import Mode, kernelize, use_kernel_mapping
    from torch import nn

    from posenc import apply_rotary

    module = __import__("transformers.models.mistral.modeling_mistral", fromlist=["x"])
    if not isinstance(module.apply_rotary_pos_emb, nn.Module):
        return {"kernels": "apply_rotary_pos_emb is a plain function: nothing for kernelize to replace"}

    class PosencRotation(nn.Module):
        can_torch_compile = True
        has_backward = True

        def forward(self, q, k, cos, sin, unsqueeze_dim=1):  # transformers' full-width cat tables
            half = cos.shape[-1] // 2
            return apply_rotary(q, k, cos[..., :half], sin[..., :half], layout="half")

    class LocalRepository:
        layer_name = "PosencRotation"

        def load(self):
            return PosencRotation

    model = tiny.tiny_model_of_type("mistral")
    ids = torch.randint(3, tiny.VOCAB, (2, 32), generator=torch.Generator().manual_seed(1))
    far = torch.arange(32736, 32768).expand(2, 32)
    exact = tiny.logits(tiny.float64_reference(model), ids, far)
    plain = float((tiny.logits(model, ids, far) - exact).abs().max())
    start = time.perf_counter()
    with use_kernel_mapping({"rotary_pos_emb": {"cpu": {Mode.INFERENCE: LocalRepository()}}}):
        kernelized = kernelize(copy.deepcopy(model), mode=Mode.INFERENCE, device="cpu")
    kernelize_ms = 1e3 * (time.perf_counter() - start)
    swapped = sum(
        "forward" in f.__dict__ for m in kernelized.modules() for f in getattr(m, "_kernel_funcs", {}).values()
    )
    kernel_far = float((tiny.logits(kernelized, ids, far) - exact).abs().max())
    start = time.perf_counter()
    handle = patch(model)
    patch_ms = 1e3 * (time.perf_counter() - start)
    patched_far = float((tiny.logits(model, ids, far) - exact).abs().max())
    handle.undo()
    return {
        "kernels": f"{swapped} rotations swapped by kernelize",
        "far_unpatched": plain,
        "far_kernelize": kernel_far,
        "far_patch": patched_far,
        "kernelize_ms": round(kernelize_ms, 1),
        "patch_ms": round(patch_ms, 1),
    }


def coverage_counts() -> Dict[str, object]:
    """The coverage enumeration under this version: ``proven`` of ``types``, and the rest by status."""
    from posenc.integrations import discovery

    rows = []
    for model_type in discovery.rotary_causal_lm_types():
        try:
            count = _parameters(tiny.tiny_config_of_type(model_type))
            if count > MAX_PARAMETERS:  # an older release can keep a field the shrinking does not know
                row = tiny.Coverage(model_type, "untested", f"the tiny config has {count:,} parameters")
            else:
                row = tiny.coverage(model_type)
        except Exception as error:  # a bug in the patch or the builder: counted, never a pass
            row = tiny.Coverage(model_type, "error", f"{type(error).__name__}: {error}")
        rows.append(row)
        print(f"  coverage {model_type:26s} {row.status:9s} {row.detail[:110]}", flush=True)
    ratios = sorted(r.plain_far_error / r.far_error for r in rows if r.proven and r.far_error > 0)
    out: Dict[str, object] = {"types": len(rows), "proven": sum(r.proven for r in rows)}
    for status in ("refused", "untested", "error"):
        out[status] = sorted(r.model_type for r in rows if r.status == status)
    out["error"] = sorted(r.model_type for r in rows if r.status in ("error", "supported") and not r.proven)
    out["median_far_ratio"] = ratios[len(ratios) // 2] if ratios else None
    return out


def inner(names: List[str], coverage: bool) -> int:
    """The tiny models (``names``, default all), the kernels route, and with ``coverage`` the
    enumeration; the summary as one ``RESULT {json}`` line at the end."""
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = 0
    torch.set_num_threads(1)
    names = names or tiny.case_names() + list(DISCOVERED)
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
    summary: Dict[str, object] = {"transformers": transformers.__version__, "tiny": counts}
    try:
        summary.update(kernels_route())
    except ImportError:
        summary["kernels"] = "no kernels package"
    except Exception as error:
        summary["kernels"] = f"kernelize failed: {type(error).__name__}: {str(error)[:120]}"
    print(f"  kernels route: {json.dumps({k: v for k, v in summary.items() if k != 'tiny'})}", flush=True)
    if coverage:
        summary["coverage"] = coverage_counts()
    print("RESULT " + json.dumps(summary), flush=True)
    return 1 if failed else 0


def newest_on_the_index() -> str:
    """The newest transformers release pip sees (``pip index versions``)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "transformers", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split("(", 1)[1].split(")", 1)[0]


def one_version(version: str, root: pathlib.Path, torch_version: str, coverage: bool) -> Dict[str, object]:
    """A fresh venv with ``version``, this script run in it (with ``--coverage`` if asked); its RESULT line."""
    venv, log = root / f"tf-{version}", root / f"tf-{version}.log"
    shutil.rmtree(venv, ignore_errors=True)
    start = time.monotonic()
    with log.open("w") as out:

        def step(cmd: List[str], **kwargs) -> int:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, **kwargs).returncode

        py = str(venv / "bin" / "python")
        pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if step([sys.executable, "-m", "venv", str(venv)]) or step(
            pip + [f"torch=={torch_version}", f"transformers=={version}", "numpy>=1.24"]
        ):
            return {"transformers": version, "status": "install failed (see the log)"}
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        step([py, str(pathlib.Path(__file__).resolve()), *(["--coverage"] if coverage else [])], env=env)
    shutil.rmtree(venv, ignore_errors=True)
    results = [ln for ln in log.read_text().splitlines() if ln.startswith("RESULT ")]
    row: Dict[str, object] = json.loads(results[-1][7:]) if results else {"transformers": version}
    row.setdefault("status", "ok" if results else "no result (see the log)")
    row["minutes"] = round((time.monotonic() - start) / 60, 1)
    return row


def table(rows: List[Dict[str, object]]) -> str:
    """The matrix as markdown: one row per version."""
    lines = [
        "| transformers | tiny models: checked, all checks pass, refused, failed | rotary types proven "
        "(exact at 0..31 and far) | not proven | `apply_rotary_pos_emb` / kernels route (far-block error: "
        "unpatched, kernelize, patch) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        tiny_counts: dict = row.get("tiny", {})  # type: ignore[assignment]
        cov: dict = row.get("coverage", {})  # type: ignore[assignment]
        if not tiny_counts:
            lines.append(f"| {row['transformers']} | {row['status']} | | | |")
            continue
        proven = f"{cov.get('proven')} of {cov.get('types')}" if cov else "not run"
        if cov and cov.get("median_far_ratio"):
            proven += f" (unpatched a median {cov['median_far_ratio']:.0f}x further in the far block)"
        missing = "; ".join(
            f"{k}: {', '.join(v)}" for k, v in cov.items() if k in ("refused", "untested", "error") and v
        )
        route = str(row.get("kernels", ""))
        if "far_kernelize" in row:
            route += f" ({row['far_unpatched']:.1e}, {row['far_kernelize']:.1e}, {row['far_patch']:.1e})"
        lines.append(
            f"| {row['transformers']} | {tiny_counts['checked']}, {tiny_counts['ok']}, {tiny_counts['refused']}, "
            f"{tiny_counts['FAILED']} | {proven} | {missing} | {route} |"
        )
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="tiny models to check (default: all); versions with --matrix")
    parser.add_argument("--coverage", action="store_true", help="also the coverage enumeration (every rotary type)")
    parser.add_argument("--matrix", type=pathlib.Path, metavar="ROOT", help="run the versions, each in a venv here")
    parser.add_argument("--torch", default="2.13.0", help="torch release for the matrix venvs (default 2.13.0)")
    args = parser.parse_args(argv)
    if args.matrix is None:
        global torch, transformers, tiny, patch, UnsupportedModelError
        import torch
        import transformers

        from posenc import testing as tiny
        from posenc.integrations.transformers import UnsupportedModelError, patch

        transformers.logging.set_verbosity_error()
        return inner(args.names, args.coverage)
    versions = args.names or [*MATRIX, newest_on_the_index()]
    args.matrix.mkdir(parents=True, exist_ok=True)
    rows = []
    for version in dict.fromkeys(versions):
        print(f"transformers {version}: a fresh venv in {args.matrix} ...", flush=True)
        rows.append(one_version(version, args.matrix, args.torch, args.coverage))
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    return 0 if all(r.get("status") == "ok" and not r.get("tiny", {}).get("FAILED") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
