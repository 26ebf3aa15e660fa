"""Chapter "Common mistakes": three slips that compile, run and quietly do the wrong thing, each run
beside the right way by :mod:`posenc.teaching.lesson.mistakes` (the same calls the chapter's figures make)."""

from __future__ import annotations

from typing import Dict

import torch
from torch import nn

from ....sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table
from ..formats import sci
from ..mistakes import (
    DRIFT_D_MODEL,
    DRIFT_ROWS,
    PHRASE_LEN,
    ROUNDING_LEVEL,
    SinusoidalAsParameter,
    block_parameters,
    rotated_values_change,
    table_drift,
)
from ..prose import Block
from . import rope
from ._figures import Figure
from ._ranges import Range, checked

#: The small model of mistake 1 (posenc.teaching.lesson.mistakes), so the figure and the text print one number.
D_MODEL = DRIFT_D_MODEL
ROWS = DRIFT_ROWS
#: The width for the concatenation mistake (the figure's default).
WIDE = 512
#: Shift of every position for the relative-invariance check (the figure's default).
SHIFT = 100


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def numbers() -> dict:
    """Each mistake measured beside the right way."""
    n: dict = {}
    drift = table_drift(1, DRIFT_LR)
    n["mistakes.parameter.lr"] = DRIFT_LR
    n["mistakes.parameter.buffer_change"] = drift["buffer"]["largest_change"]
    n["mistakes.parameter.parameter_change"] = drift["parameter"]["largest_change"]
    n["mistakes.parameter.rows_changed"] = drift["parameter"]["rows_changed"]
    n["mistakes.parameter.extra_trainable"] = drift["parameter"]["trainable"] - drift["buffer"]["trainable"]
    n["mistakes.parameter.rows_used"] = drift["rows_used"]
    exact = sinusoidal_table(ROWS, D_MODEL)
    state = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS).state_dict()
    n["mistakes.parameter.buffer_in_state_dict"] = any(key.endswith("pe") for key in state)
    wrong_bf16 = SinusoidalAsParameter(D_MODEL, ROWS).to(torch.bfloat16)
    correct_bf16 = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS).to(torch.bfloat16)
    n["mistakes.parameter.bf16_error_parameter"] = float((wrong_bf16.pe.detach().float() - exact).abs().max())
    n["mistakes.parameter.bf16_error_buffer"] = float((correct_bf16.pe[:ROWS].float() - exact).abs().max())
    n["mistakes.parameter.bf16_buffer_dtype"] = str(correct_bf16.pe.dtype)
    n["mistakes.parameter.bf16_parameter_dtype"] = str(wrong_bf16.pe.dtype)
    moved = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS).to("meta")
    n["mistakes.parameter.buffer_device_after_to"] = moved.pe.device.type

    with torch.device("meta"):  # sizes only, no memory
        linear = (parameter_count(nn.Linear(WIDE, WIDE)), parameter_count(nn.Linear(2 * WIDE, WIDE)))
    block = block_parameters(WIDE)
    for key, (small, big) in (("linear", linear), ("block", (block["added"], block["concatenated"]))):
        n[f"mistakes.concat.{key}.added"] = small
        n[f"mistakes.concat.{key}.concatenated"] = big
        n[f"mistakes.concat.{key}.ratio"] = big / small

    change = rotated_values_change(SHIFT)
    n["mistakes.rotate_v.correct_shift_diff"] = change["qk_only"]
    n["mistakes.rotate_v.rotated_shift_diff"] = change["with_v"]
    n["mistakes.rotate_v.output_scale"] = change["output_scale"]
    n["mistakes.rotate_v.correct_rounding"] = change["qk_only_rounding"]
    n["mistakes.rotate_v.rotated_rounding"] = change["with_v_rounding"]
    return n


#: the learning rate of the one Adam step that measures the drift of a table held as a Parameter
DRIFT_LR = 1e-2


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    p = "mistakes.parameter."
    dtype = {k: n[p + k].replace("torch.", "") for k in ("bf16_buffer_dtype", "bf16_parameter_dtype")}
    drift_rows = (
        ("", "table as buffer (posenc)", "table as Parameter"),
        ("largest change after one step", sci(n[p + "buffer_change"]), sci(n[p + "parameter_change"])),
        ("extra trainable numbers", "0", f"{n[p + 'extra_trainable']:,}"),
        ("dtype after .to(bfloat16)", dtype["bf16_buffer_dtype"], dtype["bf16_parameter_dtype"]),
        ("max error after .to(bfloat16)", sci(n[p + "bf16_error_buffer"]), sci(n[p + "bf16_error_parameter"])),
    )
    concat_rows = [("layer", f"input {WIDE} (added)", f"input {2 * WIDE} (concatenated)", "ratio")]
    for key, label in (
        ("linear", "a linear map back to the model width"),
        ("block", "one transformer block (attention + MLP)"),
    ):
        c = f"mistakes.concat.{key}."
        concat_rows.append((label, f"{n[c + 'added']:,}", f"{n[c + 'concatenated']:,}", f"{n[c + 'ratio']:.2f}x"))
    v = "mistakes.rotate_v."
    last = PHRASE_LEN - 1
    values_rows = (
        ("attention", f"max |out(seats 0-{last}) - out(seats {SHIFT}-{SHIFT + last})|", "shift-invariant?"),
        ("q and k rotated (correct)", sci(n[v + "correct_shift_diff"]), "yes" if n[v + "correct_rounding"] else "no"),
        (
            "q, k and v rotated (mistake)",
            sci(n[v + "rotated_shift_diff"]),
            "yes" if n[v + "rotated_rounding"] else "no",
        ),
    )
    return [
        Block(
            "plain",
            """Three slips are easy to make when writing this code. We make each one on purpose and measure what
            breaks.""",
            "intro",
        ),
        Block(
            "p",
            """Three mistakes that compile, run, and quietly do the wrong thing. Each one is run here beside the
            right way.""",
            "intro",
        ),
        Block("h3", "1. The sine table as a trainable parameter", "m1"),
        Block(
            "p",
            """The table is a constant of mathematics, not a weight the training should change. Stored as an
            `nn.Parameter`, the optimizer starts changing it. PyTorch has a place for such tensors: a "buffer"
            (`register_buffer`) travels with the module (to the GPU, for example) but the optimizer never
            touches it, and a "non-persistent" buffer (`persistent=False`, as posenc registers it) is also left
            out of the saved weights (a plain buffer would be saved), since the formula rebuilds it.""",
            "m1",
        ),
        Block(
            "caption",
            """Largest change of any table value after Adam steps on one sentence, in a posenc TinyLM with the
            table as a buffer and as a parameter.""",
            "mis-param-caption",
        ),
        Block(
            "p",
            """We build two copies of posenc's TinyLM, one with `SinusoidalPositionalEncoding` (the table is a
            non-persistent buffer) and one whose table is an `nn.Parameter` (a trainable weight), and take one
            training step (Adam) on the same sentence.""",
            "m1-measured",
        ),
        Block("table", "The table as a buffer and as a Parameter", "m1-measured", rows=drift_rows),
        Block(
            "p",
            f"""The Parameter drifted by up to {sci(n[p + "parameter_change"])} in one step, the learning rate
            ({sci(n[p + "lr"])}): Adam's first step moves every weight that has a gradient by about that much,
            whatever the gradient's size. {n[p + "rows_changed"]} rows (of the {n[p + "rows_used"]} seats the
            sentence used) no longer follow the formula. It also adds
            {n[p + "extra_trainable"]:,} numbers for the optimizer to carry; cast to bf16 it is rounded by up to
            {n[p + "bf16_error_parameter"]:.4f}. The buffer never receives a gradient, is not saved in the
            state_dict (saved: {n[p + "buffer_in_state_dict"]}), follows the module on every `.to()` (here even
            to PyTorch's stand-in device for tensors that have a shape but no memory, called
            "{n[p + "buffer_device_after_to"]}"), and posenc keeps it in float32 when the model is cast to a low
            precision.""",
            "m1-measured",
        ),
        Block("h3", "2. Gluing the position on instead of adding it", "m2"),
        Block(
            "p",
            f"""Concatenating a d-wide position to a d-wide word makes every token 2d wide, and every weight
            matrix that reads it grows: twice as many inputs, and four times the weights where the output is 2d
            wide too. With d = {WIDE}, here are the weight counts
            of posenc's own layers. We only need their sizes, so we build them on the "meta" device met above,
            where tensors have a shape but no memory and no values:""",
            "m2",
        ),
        Block(
            "caption",
            """Parameters of one posenc transformer block at width d (added) and 2d (concatenated), counted on the
            meta device.""",
            "mis-cat-caption",
        ),
        Block("table", "Weights of posenc's layers, added and concatenated", "m2-measured", rows=tuple(concat_rows)),
        Block(
            "p",
            """A layer that only reads the wider vector, such as the table's linear map back to the model width,
            doubles; a block that keeps the wider width throughout grows fourfold, because its weight matrices
            are width × width. Adding costs nothing and keeps the width.""",
            "m2-measured",
        ),
        Block("h3", "3. Turning the values too", "m3"),
        Block(
            "p",
            f"""RoPE turns queries and keys so that their score depends on the gap: shift every position by the
            same amount and the output must not change. Values carry the content that is passed on; turn them
            too and what a word passes on depends on where it sits. We run posenc's `CausalSelfAttention` with
            `RotaryEmbedding` (in float64) on {PHRASE_LEN} random tokens at seats 0-{last} and again at seats
            {SHIFT}-{SHIFT + last}, once as intended and once with the values rotated as well.""",
            "m3",
        ),
        Block(
            "caption",
            """How much the last token's output changes when the same six tokens are moved, with q and k turned
            (right) and with v turned too (wrong).""",
            "mis-v-caption",
        ),
        Block(
            "table", "The same phrase moved: RoPE as intended and with turned values", "m3-measured", rows=values_rows
        ),
        Block(
            "p",
            f"""Rotated values break the invariance: the output moves by {n[v + "rotated_shift_diff"]:.3f} when
            the sentence is merely shifted (output entries are up to {n[v + "output_scale"]:.3f} in size). The
            value vectors carry what each token says; turning them by absolute angles smuggles absolute position
            back into the content that flows onward.""",
            "m3-measured",
        ),
        Block(
            "try",
            """take more optimizer steps and watch the parameter table drift; the buffer stays at exactly 0.""",
            "after",
        ),
    ]


# -- the figure: each mistake run next to the right way --
#: parameter -> (minimum, maximum, default, help) of the figure (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "steps": (1, 10, 1, "optimizer steps taken"),
    "concat_d_model": (16, 2048, 512, "width of the word vectors"),
    "shift": rope.FIGURE_RANGES["shift"],  # the RoPE chapter's move of every seat
}


def mistakes(steps: int, d_model: int, shift: int) -> dict:
    """Each common mistake run next to the right way, by :mod:`posenc.teaching.lesson.mistakes` (the numbers
    the tour prints too).

    1. Table as Parameter: ``steps`` Adam steps on one sentence move the parameter copy of the table
       away from the formula; the buffer copy does not move.
    2. Concatenate instead of add: parameters of one Block at width d (added) and 2d (glued on),
       built on the meta device so only the sizes exist.
    3. Rotating V: a phrase moved ``shift`` seats; the largest change of the attention block's output
       with q, k rotated (as RoPE does) and with v rotated too.
    """
    checked(FIGURE_RANGES, "steps", steps)
    checked(FIGURE_RANGES, "concat_d_model", d_model)
    checked(FIGURE_RANGES, "shift", shift)
    drift = table_drift(steps)
    return {
        "steps": steps,
        "parameter": {label: drift[label] for label in ("buffer", "parameter")},
        "concat": block_parameters(d_model),
        "values": rotated_values_change(shift),
        "rounding_level": ROUNDING_LEVEL,
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"mistakes": Figure(mistakes, d_model="concat_d_model")}
