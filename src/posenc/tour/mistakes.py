"""Section: three common mistakes with position encodings, each run to show what it breaks."""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from ..model import Block, CausalSelfAttention, ModelConfig, TinyLM
from ..rope import RotaryEmbedding
from ..schemes import PositionScheme
from ..sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table
from ._show import plain, prose, sci, table, verdict

#: Small model for the training-step and rotation checks.
D_MODEL = 32
N_HEADS = 4
ROWS = 64
#: The lesson's width for the concatenation mistake.
WIDE = 512
WIDE_HEADS = 8
#: Shift of every position for the relative-invariance check.
SHIFT = 100


class SinusoidalAsParameter(PositionScheme):
    """The mistake: the fixed sinusoidal table stored as a trainable ``nn.Parameter``."""

    name = "sinusoidal-as-parameter"

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.pe = nn.Parameter(sinusoidal_table(max_len, d_model))  # (max_len, d_model)

    def embed(self, x, position_ids):
        return x + self.pe[position_ids].to(x.dtype)


def one_training_step(model: TinyLM, tokens: torch.Tensor, lr: float = 1e-2) -> None:
    """One Adam step of next-token prediction on ``tokens`` (batch, seq)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    logits = model(tokens[:, :-1])  # (B, S-1, vocab)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


@contextmanager
def values_rotated(attention: CausalSelfAttention, rope: RotaryEmbedding, position_ids: torch.Tensor):
    """Inside this block, ``attention`` also rotates its values by their positions (the mistake).

    A forward hook on the fused q/k/v projection turns the value third of its output, so the real
    :class:`~posenc.model.CausalSelfAttention` forward runs unchanged around it.
    """
    heads, head_dim = attention.n_heads, attention.head_dim

    def hook(module, inputs, output):
        q, k, v = output.split(heads * head_dim, dim=-1)  # 3 x (B, S, D)
        B, S, D = v.shape
        v = v.view(B, S, heads, head_dim).transpose(1, 2)  # (B, H, S, hd)
        v, _ = rope.rotate(v, v, position_ids)
        return torch.cat((q, k, v.transpose(1, 2).reshape(B, S, D)), dim=-1)

    handle = attention.qkv.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


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
    config = ModelConfig(
        scheme="sinusoidal", vocab_size=256, d_model=D_MODEL, n_layers=1, n_heads=N_HEADS, max_len=ROWS
    )
    tokens = torch.tensor([list(b"the dog bit the man")])  # (1, 19) bytes
    correct_scheme = SinusoidalPositionalEncoding(D_MODEL, max_len=ROWS)
    wrong_scheme = SinusoidalAsParameter(D_MODEL, ROWS)
    correct = TinyLM(config, scheme=correct_scheme)
    wrong = TinyLM(config, scheme=wrong_scheme)
    exact = sinusoidal_table(ROWS, D_MODEL)
    for model in (correct, wrong):
        one_training_step(model, tokens)
    moved_buffer = ctx.record("mistakes.parameter.buffer_change", float((correct_scheme.pe[:ROWS] - exact).abs().max()))
    moved_param = ctx.record(
        "mistakes.parameter.parameter_change", float((wrong_scheme.pe.detach() - exact).abs().max())
    )
    rows_changed = ctx.record(
        "mistakes.parameter.rows_changed", int(((wrong_scheme.pe.detach() - exact).abs().amax(-1) > 0).sum())
    )
    extra = ctx.record("mistakes.parameter.extra_trainable", parameter_count(wrong) - parameter_count(correct))
    in_state = ctx.record(
        "mistakes.parameter.buffer_in_state_dict", any(key.endswith("pe") for key in correct.state_dict())
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
    used = ctx.record("mistakes.parameter.rows_used", tokens.shape[1] - 1)
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
        added = Block(WIDE, WIDE_HEADS)
        concatenated = Block(2 * WIDE, WIDE_HEADS)
        project_add = nn.Linear(WIDE, WIDE)
        project_cat = nn.Linear(2 * WIDE, WIDE)
    rows = (
        ("a linear map back to the model width", project_add, project_cat),
        ("one transformer block (attention + MLP)", added, concatenated),
    )
    prose(
        ctx,
        f"""[bold]Mistake 2: concatenating instead of adding.[/] Gluing a {WIDE}-wide position
    vector onto a {WIDE}-wide word vector makes every token {2 * WIDE} wide. Below are the weight
    counts of posenc's own layers. We only need their sizes, so we build them on the "meta" device
    met above, where tensors have a shape but no memory and no values:""",
    )
    t = table("layer", f"input {WIDE}\n(added)", f"input {2 * WIDE}\n(concatenated)", "ratio")
    for label, small, big in rows:
        key = "linear" if isinstance(small, nn.Linear) else "block"
        n_small = ctx.record(f"mistakes.concat.{key}.added", parameter_count(small))
        n_big = ctx.record(f"mistakes.concat.{key}.concatenated", parameter_count(big))
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
    change. We run posenc's [cyan]CausalSelfAttention[/] with [cyan]RotaryEmbedding[/] on 6 random
    tokens at seats 0-5 and again at seats {SHIFT}-{SHIFT + 5}, once as intended and once with the
    values rotated as well.""",
    )
    attention = CausalSelfAttention(D_MODEL, N_HEADS).eval()
    rope = RotaryEmbedding(D_MODEL // N_HEADS)
    x = torch.randn(1, 6, D_MODEL)  # (batch, seq, d_model)
    seats = torch.arange(6).unsqueeze(0)  # (1, seq)
    with torch.no_grad():
        right = [attention(x, rope, p) for p in (seats, seats + SHIFT)]
        wrong = []
        for p in (seats, seats + SHIFT):
            with values_rotated(attention, rope, p):
                wrong.append(attention(x, rope, p))
    right_diff = ctx.record("mistakes.rotate_v.correct_shift_diff", float((right[0] - right[1]).abs().max()))
    wrong_diff = ctx.record("mistakes.rotate_v.rotated_shift_diff", float((wrong[0] - wrong[1]).abs().max()))
    scale = ctx.record("mistakes.rotate_v.output_scale", float(right[0].abs().max()))
    t = table("attention", f"max |out(seats 0-5) -\nout(seats {SHIFT}-{SHIFT + 5})|", "shift-invariant?")
    t.add_row("q and k rotated (correct)", sci(right_diff), verdict(right_diff < 1e-4, "yes", "no"))
    t.add_row("q, k and v rotated (mistake)", sci(wrong_diff), verdict(wrong_diff < 1e-4, "yes", "no"))
    ctx.console.print(t)
    prose(
        ctx,
        f"""Rotated values break the invariance: the output moves by {wrong_diff:.3f} when
    the sentence is merely shifted (output entries are up to {scale:.3f} in size). The value vectors
    carry what each token says; turning them by absolute angles smuggles absolute position back
    into the content that flows onward.""",
    )
