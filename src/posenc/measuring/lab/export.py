"""``posenc lab export RUN --scheme rope OUT``: a lab model as a ``transformers`` checkpoint.

The lab's :class:`~posenc.model.TinyLM` with RoPE is, layer for layer, a **GPT-NeoX** model with
``use_parallel_residual=False``:

=====================================  ==========================================================
TinyLM                                 ``GPTNeoXForCausalLM``
=====================================  ==========================================================
``tok`` (256 bytes)                    ``gpt_neox.embed_in``; ``lm_head`` tied to it
                                       (``tie_word_embeddings=True``)
``norm1`` / ``norm2`` (LayerNorm)      ``input_layernorm`` / ``post_attention_layernorm``
``x + attn(norm1(x))``, then           ``use_parallel_residual=False``: the same two sequential
``x + mlp(norm2(x))``                  residual steps
``attn.qkv``: rows ``[q | k | v]``     ``attention.query_key_value``: rows grouped per head,
                                       ``[q_h | k_h | v_h]`` for each head ``h`` (permuted here)
``attn.out``                           ``attention.dense``
``mlp``: Linear, exact GELU, Linear    ``dense_h_to_4h``, ``hidden_act="gelu"`` (erf), ``dense_4h_to_h``
RoPE, half-split pairs, ``rotary_dim``  ``rotate_half``, ``partial_rotary_factor = rotary_dim / head_dim``
softmax scale ``1 / sqrt(head_dim)``   ``head_size ** -0.5``
``norm`` (final LayerNorm, eps 1e-5)   ``final_layer_norm`` (``layer_norm_eps=1e-5``)
=====================================  ==========================================================

Two differences are bridged without changing what the model computes:

* GPT-NeoX always has biases in its LayerNorms and MLP; a TinyLM built with ``bias=False`` gets
  biases of exactly zero there (``x + 0.0 == x`` in floating point, so the sums are unchanged).
* A TinyLM with interleaved pairs (``rope_layout="interleaved"``) has its query and key rows permuted
  into the half-split order (pair ``i`` at features ``2i, 2i+1`` moves to ``i, i + r/2``). q and k
  are permuted alike, so every dot product, hence the model, is unchanged.

A TinyLM whose embeddings are scaled (``embed_scale != 1``, the sinusoidal default) or which uses
another position scheme has no GPT-NeoX equivalent and is refused with the reason.

The tokenizer maps byte ``b`` to token ``b`` (the lab reads raw bytes): a byte-level BPE with the
256 byte tokens and no merges, saved as a ``PreTrainedTokenizerFast`` so ``AutoTokenizer`` loads it
offline. ``max_position_embeddings`` is the lab's training length: the context the model was
trained on, from which ``posenc eval`` measures 1, 2, 4 and 8 times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Tuple, cast

import torch

from ...model import Block, TinyLM
from ...rope import RotaryEmbedding
from ...rope.hfconfig import to_hf_dict
from ...rope.layout import permute_for_half_split
from ...runs import folder_mode
from ...runs.lab_run import RunModelError, read_run_model

#: The transformers architecture the lab's RoPE block matches.
ARCHITECTURE = "GPTNeoXForCausalLM"


class ExportError(ValueError):
    """A model or run that cannot be exported, with the reason."""


def check_exportable(model: TinyLM) -> RotaryEmbedding:
    """The model's rotary embedding, or :class:`ExportError` saying why GPT-NeoX cannot express it."""
    scheme = model.scheme
    if not isinstance(scheme, RotaryEmbedding):
        raise ExportError(
            f"only the rope scheme has a transformers architecture with the same block (GPT-NeoX); "
            f"this model's scheme is {type(scheme).__name__}"
        )
    if model.embed_scale != 1.0:
        raise ExportError(
            f"this model multiplies its token embeddings by {model.embed_scale:g}; GPT-NeoX ties them "
            f"to the output head unscaled, so it cannot express that"
        )
    if scheme.softmax_scale_factor != 1.0:  # the hook every PositionScheme declares
        raise ExportError(
            f"this model's attention multiplies 1/sqrt(head_dim) by {scheme.softmax_scale_factor:g} "
            f"(softmax_scale_factor); GPT-NeoX has no config field for another softmax scale"
        )
    return scheme


def gpt_neox_config(model: TinyLM, max_position_embeddings: int) -> Dict[str, Any]:
    """The ``config.json`` fields of the GPT-NeoX model equal to ``model``.

    ``max_position_embeddings`` is the trained context (the lab's ``train_len``).
    """
    rope = check_exportable(model)
    c = model.config
    described = RotaryEmbedding(
        rope.head_dim,
        base=rope.base,
        rotary_dim=rope.rotary_dim,
        layout="half",  # the rows are permuted to half-split on export
        scaling=rope.scaling,
        max_position_embeddings=max_position_embeddings,
    )
    rope_fields = to_hf_dict(described, style="rope_parameters")
    rope_fields.pop("head_dim")  # GPT-NeoX derives it from hidden_size / num_attention_heads
    # Always explicit: GPT-NeoX configs without it rotate a quarter of each head (rotary_pct 0.25).
    rope_fields["rope_parameters"].setdefault("partial_rotary_factor", 1.0)
    return {
        "architectures": [ARCHITECTURE],
        "model_type": "gpt_neox",
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "intermediate_size": c.mlp_ratio * c.d_model,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-5,
        "use_parallel_residual": False,
        "attention_bias": bool(c.bias),
        "tie_word_embeddings": True,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
        "use_cache": True,
        "bos_token_id": None,
        "eos_token_id": None,
        **rope_fields,
    }


def gpt_neox_state_dict(model: TinyLM) -> Dict[str, torch.Tensor]:
    """``model``'s weights under GPT-NeoX names and layouts (float32 copies, zeros for absent biases)."""
    rope = check_exportable(model)
    c = model.config
    D, H = c.d_model, c.n_heads
    hd = D // H

    def zeros(n: int) -> torch.Tensor:
        return torch.zeros(n, dtype=torch.float32)

    def weight_and_bias(linear: torch.nn.Linear, out_features: int) -> Tuple[torch.Tensor, torch.Tensor]:
        w = linear.weight.detach().float().clone()
        b = linear.bias.detach().float().clone() if linear.bias is not None else zeros(out_features)
        return w, b

    state: Dict[str, torch.Tensor] = {"gpt_neox.embed_in.weight": model.tok.weight.detach().float().clone()}
    for i, module in enumerate(model.blocks):
        block = cast(Block, module)
        p = f"gpt_neox.layers.{i}."
        for ours, theirs in ((block.norm1, "input_layernorm"), (block.norm2, "post_attention_layernorm")):
            state[p + theirs + ".weight"] = ours.weight.detach().float().clone()
            state[p + theirs + ".bias"] = ours.bias.detach().float().clone() if ours.bias is not None else zeros(D)
        w, b = weight_and_bias(block.attn.qkv, 3 * D)
        (wq, wk, wv), (bq, bk, bv) = w.split(D), b.split(D)
        if rope.layout == "interleaved":
            wq, wk, bq, bk = (permute_for_half_split(t, H, rope.rotary_dim) for t in (wq, wk, bq, bk))
        # TinyLM: rows [q (D) | k (D) | v (D)], head h at rows h*hd .. (h+1)*hd of each part.
        # GPT-NeoX: view(..., H, 3*hd) then chunk(3): rows [q_h | k_h | v_h] for h = 0 .. H-1.
        w = torch.stack([t.view(H, hd, D) for t in (wq, wk, wv)], dim=1)  # (H, 3, hd, D)
        b = torch.stack([t.view(H, hd) for t in (bq, bk, bv)], dim=1)  # (H, 3, hd)
        state[p + "attention.query_key_value.weight"] = w.reshape(3 * D, D).contiguous()
        if c.bias:
            state[p + "attention.query_key_value.bias"] = b.reshape(3 * D).contiguous()
        w, b = weight_and_bias(block.attn.out, D)
        state[p + "attention.dense.weight"] = w
        if c.bias:
            state[p + "attention.dense.bias"] = b
        up, down = cast(torch.nn.Linear, block.mlp[0]), cast(torch.nn.Linear, block.mlp[2])
        state[p + "mlp.dense_h_to_4h.weight"], state[p + "mlp.dense_h_to_4h.bias"] = weight_and_bias(
            up, up.out_features
        )
        state[p + "mlp.dense_4h_to_h.weight"], state[p + "mlp.dense_4h_to_h.bias"] = weight_and_bias(down, D)
    state["gpt_neox.final_layer_norm.weight"] = model.norm.weight.detach().float().clone()
    state["gpt_neox.final_layer_norm.bias"] = (
        model.norm.bias.detach().float().clone() if model.norm.bias is not None else zeros(D)
    )
    return state


def byte_tokenizer():
    """A ``PreTrainedTokenizerFast`` with token ``b`` for byte ``b`` (256 tokens, no merges).

    ``encode(text)`` gives ``list(text.encode("utf-8"))``, the lab's byte ids, and ``decode`` inverts
    it. Built with the ``tokenizers`` library: a byte-level BPE (GPT-2's byte-to-character map) whose
    vocabulary is the 256 single bytes, with no pre-tokenizer regex, so no text is ever split or merged.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    char_of = _byte_to_char()
    if set(char_of.values()) != set(pre_tokenizers.ByteLevel.alphabet()):  # pragma: no cover
        raise RuntimeError("this tokenizers library maps bytes to characters differently from GPT-2")
    vocab = {char_of[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=1 << 30, clean_up_tokenization_spaces=False)


def _byte_to_char() -> Dict[int, str]:
    """GPT-2's reversible map of the 256 bytes to printable characters (``bytes_to_unicode``)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def export_model(model: TinyLM, out: Path, *, max_position_embeddings: int) -> Path:
    """Write ``model`` to the folder ``out`` as a GPT-NeoX checkpoint with the byte tokenizer.

    The written model is loaded back with ``transformers`` before returning, and its state compared
    with what was written, so a layout that ``transformers`` would silently re-initialise fails here.
    """
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    fields = gpt_neox_config(model, max_position_embeddings)
    state = gpt_neox_state_dict(model)
    config = GPTNeoXConfig(**fields)
    with torch.device("meta"):
        hf = GPTNeoXForCausalLM(config)
    expected = set(hf.state_dict()) - {"lm_head.weight"}
    if set(state) != expected:
        raise ExportError(
            f"the weights do not match this transformers' GPT-NeoX: missing {sorted(expected - set(state))}, "
            f"unexpected {sorted(set(state) - expected)}"
        )
    hf = GPTNeoXForCausalLM(config)
    hf.load_state_dict(state, strict=False)  # lm_head is tied to embed_in
    hf.tie_weights()
    if hf.lm_head.weight.data_ptr() != hf.gpt_neox.embed_in.weight.data_ptr():  # pragma: no cover
        raise ExportError("transformers did not tie lm_head to embed_in; the export would be wrong")
    out = check_new_folder(Path(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    # written beside OUT and moved into place whole: an interrupted export leaves no half checkpoint
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        os.chmod(partial, folder_mode())  # mkdtemp makes it 0700; the checkpoint gets what the umask allows
        hf.save_pretrained(partial)
        byte_tokenizer().save_pretrained(partial)
        check_new_folder(out)
        if out.is_dir():
            out.rmdir()  # empty (checked just above); rmdir refuses anything else
        os.rename(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return out


def check_new_folder(out: Path) -> Path:
    """``out`` if nothing would be lost by writing a checkpoint there (it does not exist, or is an
    empty folder), else :class:`ExportError`: an existing run, checkpoint or any other file is never
    overwritten."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ExportError(f"OUT {str(out)!r} is a file; give a new folder")
    if out.is_dir() and any(out.iterdir()):
        raise ExportError(
            f"OUT {str(out)!r} already holds files (a lab run or a checkpoint there would be overwritten); "
            "give a new or empty folder"
        )
    return out


def load_run_model(run: Path, scheme: str) -> Tuple[TinyLM, int]:
    """The trained ``scheme`` model of a lab run folder and the run's training length
    (:func:`posenc.runs.lab_run.read_run_model`, the whole config checked as the lab checks it)."""
    from .config import LabConfig

    try:
        # the model is built from the checked config, with the defaults of any field the file leaves out
        found = read_run_model(Path(run), scheme, check_config=lambda stored: LabConfig.from_dict(stored).to_dict())
    except RunModelError as err:
        raise ExportError(str(err)) from None
    if found.step < found.steps:
        print(
            f"note: {scheme} stopped at step {found.step} of {found.steps}; exporting it as it is",
            file=sys.stderr,
        )
    return found.model, found.train_len


# -- the command ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("export_run", metavar="RUN", help="a run folder made by `posenc lab`")
    parser.add_argument("export_out", metavar="OUT", help="folder to write the transformers checkpoint to")
    parser.add_argument(
        "--scheme",
        dest="export_scheme",
        metavar="SCHEME",
        default="rope",
        help="the scheme whose model to export (only rope has a matching transformers architecture)",
    )


def run(args) -> int:
    try:
        import transformers  # noqa: F401
    except ImportError:
        print(
            "posenc lab export: needs transformers (pip install 'posenc[eval]')",
            file=sys.stderr,
        )
        return 2
    try:
        out = check_new_folder(Path(args.export_out))
        model, train_len = load_run_model(Path(args.export_run), args.export_scheme)
        export_model(model, out, max_position_embeddings=train_len)
    except (ExportError, OSError) as err:
        print(f"posenc lab export: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({ARCHITECTURE}, trained context {train_len}); evaluate it: posenc eval {out}")
    return 0
