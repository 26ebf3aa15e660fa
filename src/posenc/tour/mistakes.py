"""Section: three common mistakes with position encodings, each run to show what it breaks."""

from __future__ import annotations

import torch
from torch import nn

from ..lesson.mistakes import (
    DRIFT_D_MODEL,
    DRIFT_ROWS,
    PHRASE_LEN,
    SinusoidalAsParameter,
    block_parameters,
    rotated_values_change,
    table_drift,
    values_rotated,
)
from ..sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table
from ._show import plain, prose, sci, table, verdict

#: The small model of mistake 1 is the lesson's (posenc.lesson.mistakes), so both print one number.
D_MODEL = DRIFT_D_MODEL
ROWS = DRIFT_ROWS
#: The lesson's width for the concatenation mistake.
WIDE = 512
#: Shift of every position for the relative-invariance check.
SHIFT = 100

__all__ = ["SinusoidalAsParameter", "common_mistakes", "parameter_count", "values_rotated"]


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def common_mistakes(ctx) -> None:
    plain(
        ctx,
        """Three slips are easy to make when writing this code. We make each one on purpose
    and measure what breaks.""",
    )
    _parameter_instead_of_buffer(ctx)
    _concatenate_instead_of_add(ctx)
    _rotating_values(ctx)


def _parameter_instead_of_buffer(ctx) -> None:
    prose(
        ctx,
        """[bold]Mistake 1: the fixed sine table as an nn.Parameter.[/] The table is a
    constant of mathematics, not a weight the training should change. PyTorch has a place for such
    tensors: a "buffer" travels with the module (to the GPU, for example) but the optimizer never
    touches it, and a "non-persistent" buffer is also left out of saved checkpoints, since it can
    be rebuilt from the formula. We build two copies of posenc's TinyLM, one with
    [cyan]SinusoidalPositionalEncoding[/] (the table is a non-persistent buffer) and one whose table
    is an [cyan]nn.Parameter[/] (a trainable weight), and take one training step (Adam) on the same
    sentence.""",
    )
    drift = table_drift(1)
    moved_buffer = ctx.record("mistakes.parameter.buffer_change", drift["buffer"]["largest_change"])
    moved_param = ctx.record("mistakes.parameter.parameter_change", drift["parameter"]["largest_change"])
    rows_changed = ctx.record("mistakes.parameter.rows_changed", drift["parameter"]["rows_changed"])
    extra = ctx.record(
        "mistakes.parameter.extra_trainable", drift["parameter"]["trainable"] - drift["buffer"]["trainable"]
    )
    exact = sinusoidal_table(ROWS, D_MODEL)
    in_state = ctx.record(
        "mistakes.parameter.buffer_in_state_dict",
        any(key.endswith("pe") for key in SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS).state_dict()),
    )

    wrong_bf16 = SinusoidalAsParameter(D_MODEL, ROWS).to(torch.bfloat16)
    correct_bf16 = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS).to(torch.bfloat16)
    err_param = ctx.record(
        "mistakes.parameter.bf16_error_parameter", float((wrong_bf16.pe.detach().float() - exact).abs().max())
    )
    err_buffer = ctx.record(
        "mistakes.parameter.bf16_error_buffer", float((correct_bf16.pe[:ROWS].float() - exact).abs().max())
    )
    ctx.record("mistakes.parameter.bf16_buffer_dtype", str(correct_bf16.pe.dtype))
    moved = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS).to("meta")
    ctx.record("mistakes.parameter.buffer_device_after_to", moved.pe.device.type)

    t = table("", "table as buffer (posenc)", "table as Parameter")
    t.add_row("largest change after one step", sci(moved_buffer), sci(moved_param))
    t.add_row("extra trainable numbers", "0", f"{extra:,}")
    t.add_row(
        "dtype after .to(bfloat16)",
        str(correct_bf16.pe.dtype).replace("torch.", ""),
        str(wrong_bf16.pe.dtype).replace("torch.", ""),
    )
    t.add_row("max error after .to(bfloat16)", sci(err_buffer), sci(err_param))
    ctx.console.print(t)
    used = ctx.record("mistakes.parameter.rows_used", drift["rows_used"])
    prose(
        ctx,
        f"""The Parameter drifted by up to {moved_param:.4f} in one step: {rows_changed} rows
    (of the {used} seats the sentence used) no longer follow the formula. It also adds {extra:,} numbers for the
    optimizer to carry; cast to bf16 it is rounded by up to {err_param:.4f}. The buffer never
    receives a gradient, is not saved in the state_dict (saved: {in_state}), follows the module on
    every [cyan].to()[/] (here even to PyTorch's stand-in device for tensors that have a shape but
    no memory, called "{moved.pe.device.type}"), and posenc keeps it in
    float32 when the model is cast to a low precision.""",
    )


def _concatenate_instead_of_add(ctx) -> None:
    with torch.device("meta"):  # sizes only, no memory
        project_add = nn.Linear(WIDE, WIDE)
        project_cat = nn.Linear(2 * WIDE, WIDE)
    block = block_parameters(WIDE)  # the numbers the lesson draws
    prose(
        ctx,
        f"""[bold]Mistake 2: concatenating instead of adding.[/] Gluing a {WIDE}-wide position
    vector onto a {WIDE}-wide word vector makes every token {2 * WIDE} wide. Below are the weight
    counts of posenc's own layers. We only need their sizes, so we build them on the "meta" device
    met above, where tensors have a shape but no memory and no values:""",
    )
    t = table("layer", f"input {WIDE}\n(added)", f"input {2 * WIDE}\n(concatenated)", "ratio")
    counts = (
        ("linear", "a linear map back to the model width", parameter_count(project_add), parameter_count(project_cat)),
        ("block", "one transformer block (attention + MLP)", block["added"], block["concatenated"]),
    )
    for key, label, n_small, n_big in counts:
        n_small = ctx.record(f"mistakes.concat.{key}.added", n_small)
        n_big = ctx.record(f"mistakes.concat.{key}.concatenated", n_big)
        ratio = ctx.record(f"mistakes.concat.{key}.ratio", n_big / n_small)
        t.add_row(label, f"{n_small:,}", f"{n_big:,}", f"{ratio:.2f}x")
    ctx.console.print(t)
    prose(
        ctx,
        """A layer that only reads the wider vector doubles; a block that keeps the wider
    width throughout grows fourfold, because its weight matrices are width x width. Adding costs
    nothing and keeps the width.""",
    )


def _rotating_values(ctx) -> None:
    prose(
        ctx,
        f"""[bold]Mistake 3: rotating the values too.[/] RoPE's promise is that attention
    depends only on distances: shift every position by the same amount and the output must not
    change. We run posenc's [cyan]CausalSelfAttention[/] with [cyan]RotaryEmbedding[/] (in float64)
    on {PHRASE_LEN} random tokens at seats 0-{PHRASE_LEN - 1} and again at seats {SHIFT}-{SHIFT + PHRASE_LEN - 1},
    once as intended and once with the values rotated as well.""",
    )
    change = rotated_values_change(SHIFT)  # the numbers the lesson draws
    right_diff = ctx.record("mistakes.rotate_v.correct_shift_diff", change["qk_only"])
    wrong_diff = ctx.record("mistakes.rotate_v.rotated_shift_diff", change["with_v"])
    scale = ctx.record("mistakes.rotate_v.output_scale", change["output_scale"])
    t = table("attention", f"max |out(seats 0-5) -\nout(seats {SHIFT}-{SHIFT + 5})|", "shift-invariant?")
    t.add_row("q and k rotated (correct)", sci(right_diff), verdict(change["qk_only_rounding"], "yes", "no"))
    t.add_row("q, k and v rotated (mistake)", sci(wrong_diff), verdict(change["with_v_rounding"], "yes", "no"))
    ctx.console.print(t)
    prose(
        ctx,
        f"""Rotated values break the invariance: the output moves by {wrong_diff:.3f} when
    the sentence is merely shifted (output entries are up to {scale:.3f} in size). The value vectors
    carry what each token says; turning them by absolute angles smuggles absolute position back
    into the content that flows onward.""",
    )
