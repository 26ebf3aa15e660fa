"""llama.cpp end to end: tiny Llamas of each rope type through the converter llama.cpp ships, their
logits held against the exact reference model.

Run in a venv with ``llama-cpp-python`` built from source, ``transformers``, ``sentencepiece``, the
``gguf`` package of the same llama.cpp tree, and posenc::

    python benchmarks/conform_engines/llama_cpp/check.py --converter LLAMA_CPP/convert_hf_to_gguf.py --out OUT.json

For each case of :data:`CASES` (a tiny ``LlamaForCausalLM`` config, random weights): the model is
saved with a SentencePiece tokenizer trained here on a few KB of the Python standard library's
source (the converter recognises no byte-level tokenizer), converted to GGUF in float32 by
``convert_hf_to_gguf.py``, and run by ``llama_cpp.Llama`` over :data:`TOKENS` tokens. The
reference is the same transformers model in float64 with posenc's exact rotary tables
(:func:`posenc.testing.float64_reference`). The engine's noise is its largest logit difference on
the unscaled case; a case more than :data:`WRONG` times that off is a wrong answer, and where the
config's YaRN attention factor read as ``0.1 ln(factor) + 1`` (the value llama.cpp's YaRN computes
when it multiplies, rather than replaces, that term) brings it back to the noise, that is the cause
named. The converter's reading of the config is part of what is checked.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import inspect
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np
import torch

TOKENS = 1500  # positions 0 .. 1499: far past the scaled cases' original 256
NEAR, FAR = range(0, 64), range(TOKENS - 100, TOKENS)
WRONG = 10.0  # a wrong answer: this many times the engine's noise
ORIGINAL = 256
BASE = {"rope_theta": 10000.0}
CASES: Dict[str, Dict[str, Any]] = {
    "default": {"rope_type": "default"},
    "linear x4": {"rope_type": "linear", "factor": 4.0},
    "llama3 x8": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": ORIGINAL,
    },
    "yarn x8": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": ORIGINAL},
    "yarn x8 attention_factor=1": {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": ORIGINAL,
        "attention_factor": 1.0,
    },
    "yarn x8 mscale=mscale_all_dim=1": {
        "rope_type": "yarn",
        "factor": 8.0,
        "original_max_position_embeddings": ORIGINAL,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    },
}


def corpus() -> str:
    """A few KB of text: the sources of three standard-library modules."""
    import difflib
    import json as json_module
    import textwrap

    return "".join(inspect.getsource(m) for m in (textwrap, json_module.decoder, difflib))[:60_000]


def train_tokenizer(folder: pathlib.Path) -> "Any":
    import sentencepiece as spm

    text = folder / "corpus.txt"
    text.write_text(corpus())
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(folder / "tokenizer"),
        vocab_size=512,
        model_type="unigram",
        character_coverage=1.0,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        pad_id=-1,
        minloglevel=2,
    )
    return spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))


def tiny_llama(rope: Dict[str, Any], vocab: int, seed: int = 0):
    """A 2-layer Llama (hidden 128, 4 heads of 32, 2 key-value heads), weights N(0, 1/fan_in)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=2048,
        rope_parameters={**BASE, **rope},
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[-1]))
    return model.eval()


def convert(model, tokenizer_dir: pathlib.Path, folder: pathlib.Path, converter: str) -> pathlib.Path:
    model.save_pretrained(folder)
    (folder / "tokenizer.model").write_bytes((tokenizer_dir / "tokenizer.model").read_bytes())
    out = folder / "model-f32.gguf"
    done = subprocess.run(
        [sys.executable, converter, str(folder), "--outfile", str(out), "--outtype", "f32"],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"convert_hf_to_gguf.py failed: {done.stderr.strip().splitlines()[-1][:300]}")
    return out


def engine_logits(gguf: pathlib.Path, ids: List[int]) -> np.ndarray:
    from llama_cpp import GGML_TYPE_F32, Llama

    # the key/value cache in float32 too (llama.cpp's default is float16, which alone is ~4e-3 of logit here)
    llm = Llama(
        model_path=str(gguf),
        n_ctx=2048,
        n_batch=512,
        logits_all=True,
        n_threads=2,
        type_k=GGML_TYPE_F32,
        type_v=GGML_TYPE_F32,
        verbose=False,
    )
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float64)  # (tokens, vocab)


def exact_logits(model, ids: List[int]) -> np.ndarray:
    from posenc.testing import float64_reference, logits

    return logits(float64_reference(model), torch.tensor([ids]))[0].numpy()


def with_attention_factor(model, value: float):
    """The same weights under a config whose YaRN ``attention_factor`` is ``value``."""
    config = copy.deepcopy(model.config)
    config.rope_parameters = {**config.rope_parameters, "attention_factor": value}
    for key in ("mscale", "mscale_all_dim"):
        config.rope_parameters.pop(key, None)
    other = type(model)(config)
    other.load_state_dict(model.state_dict())
    return other.eval()


def gguf_fields(gguf: pathlib.Path) -> Dict[str, Any]:
    """The rope fields the converter wrote."""
    from gguf import GGUFReader

    out = {}
    for field in GGUFReader(str(gguf)).fields.values():
        if "rope" in field.name:
            value = field.parts[field.data[0]]
            if value.dtype == np.uint8:  # a string
                out[field.name] = bytes(value).decode()
            else:
                out[field.name] = value.tolist()[0] if len(value) == 1 else value.tolist()
    return out


def run(converter: str) -> Dict[str, Any]:
    import llama_cpp

    rows: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        sp = train_tokenizer(root)
        ids = (sp.encode(corpus()) * 4)[:TOKENS]
        for i, (name, rope) in enumerate(CASES.items()):
            folder = root / f"case{i}"
            folder.mkdir()
            model = tiny_llama(rope, sp.get_piece_size())
            row: Dict[str, Any] = {"config": name, "rope_parameters": {**BASE, **rope}}
            try:
                gguf = convert(model, root, folder, converter)
                got = engine_logits(gguf, ids)
            except Exception as error:
                row.update(status="error", message=f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
                rows.append(row)
                continue
            exact = exact_logits(model, ids)
            row["gguf_rope_fields"] = gguf_fields(gguf)
            row["error"] = {
                "near": float(np.abs(got[NEAR] - exact[NEAR]).max()),
                "far": float(np.abs(got[FAR] - exact[FAR]).max()),
                "all": float(np.abs(got - exact).max()),
            }
            if rope["rope_type"] == "yarn":
                formula = 0.1 * math.log(rope["factor"]) + 1.0
                misread = exact_logits(with_attention_factor(model, formula), ids)
                row["hypothesis"] = f"attention factor 0.1*ln(factor)+1 = {formula:.4f}"
                row["error_under_hypothesis"] = float(np.abs(got - misread).max())
            rows.append(row)
    noise = next((r["error"]["all"] for r in rows if r["config"] == "default" and "error" in r), None)
    for row in rows:
        if "error" not in row or noise is None:
            continue
        row["noise"] = noise
        if row["error"]["all"] <= WRONG * noise:
            row["status"], row["causes"] = "ok", []
            continue
        row["status"] = "wrong"
        hyp = row.get("error_under_hypothesis")
        exact_factor = _exact_yarn_factor(row["rope_parameters"])
        if hyp is not None and hyp <= WRONG * noise:
            row["causes"] = [
                f"{row['hypothesis']} where the config gives {exact_factor:.4f}: the logits match the "
                f"model with that factor to {hyp:.1e} (noise {noise:.1e})"
            ]
        else:
            row["causes"] = ["unidentified"]
    counts: Dict[str, int] = {}
    for row in rows:
        counts[row.get("status", "error")] = counts.get(row.get("status", "error"), 0) + 1
    return {
        "schema": "posenc.conform.llama_cpp",
        "schema_version": 1,
        "engine": {"name": "llama.cpp (llama-cpp-python)", "version": llama_cpp.__version__},
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "torch_version": torch.__version__,
        "transformers_version": __import__("transformers").__version__,
        "tokens": TOKENS,
        "groups": {"near": [NEAR.start, NEAR.stop - 1], "far": [FAR.start, FAR.stop - 1]},
        "unit": "largest |logit difference| against the float64 exact model",
        "counts": counts,
        "configs": rows,
    }


def _exact_yarn_factor(rope: Dict[str, Any]) -> float:
    from posenc.rope import RotaryEmbedding

    config = {"hidden_size": 128, "num_attention_heads": 4, "head_dim": 32, "max_position_embeddings": 2048}
    return float(RotaryEmbedding.from_hf_config({**config, "rope_parameters": rope}).attention_factor)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--converter", required=True, help="convert_hf_to_gguf.py of the llama.cpp tree built")
    parser.add_argument("--out", required=True, help="the summary JSON to write")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    summary = run(args.converter)
    pathlib.Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    for row in summary["configs"]:
        print(f"{row.get('status', 'error'):<6} {row['config']:<34} {json.dumps(row.get('error', row.get('message')))}")
        for cause in row.get("causes", []):
            print(f"       cause: {cause}")
    return 1 if any(r.get("status") != "ok" for r in summary["configs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
