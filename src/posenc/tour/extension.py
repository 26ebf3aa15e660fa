"""Section: a preview of context extension, what three RoPE scalings do to the frequencies.

A RoPE model trained on ``L0`` tokens has seen, for each rotation pair, only the angles
``0 .. (L0 - 1) * theta_i``. Pairs that turn less than once over ``L0`` meet angles they have never
seen as soon as the input grows longer. The scalings in :mod:`posenc.rope.scaling` change the
frequencies so that a longer input stays (mostly) within the angles seen in training.
"""

from __future__ import annotations

import math
from typing import List

import torch

from ..explorer.palette import SCALING_COLOURS
from ..lesson.stretching import past_training
from ..rope import LinearScaling, NTKScaling, RotaryEmbedding, YaRNScaling, rope_frequencies
from ._plot import new_figure, save
from ._show import plain, prose, sci, table

#: A Llama-2-like head: 128 rotated features, base 10000, trained on 4096 tokens, stretched 4x.
ROTARY_DIM = 128
BASE = 10000.0
TRAINED = 4096
FACTOR = 4.0


def scalings() -> dict:
    """name -> scaling config (``None`` is the unscaled default)."""
    return {
        "default": None,
        "linear": LinearScaling(factor=FACTOR),
        "ntk": NTKScaling(factor=FACTOR),
        "yarn": YaRNScaling(factor=FACTOR, original_max_position_embeddings=TRAINED),
    }


def unseen_mask(inv_freq: torch.Tensor, default: torch.Tensor, trained: int, length: int) -> torch.Tensor:
    """Which pairs are past training at ``length`` tokens (bool, (r/2,)); the lesson's one
    definition, :func:`posenc.lesson.stretching.past_training`."""
    return past_training(inv_freq, default, trained, length)


def index_ranges(indices) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``: pair indices as runs of consecutive numbers."""
    runs: List[List[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def times(count: float) -> str:
    """``1`` -> ``"once"``, ``32`` -> ``"32 times"``."""
    return "once" if count == 1 else f"{count:g} times"


def context_extension(ctx) -> None:
    plain(
        ctx,
        """A model trained on short texts has only seen its slow clock hands in part of their
    circle. To read longer texts, we slow the hands down so that the new seats still show positions
    the model has seen.""",
    )
    length = int(TRAINED * FACTOR)
    prose(
        ctx,
        f"""RoPE models are trained on a fixed length and then stretched. Take a Llama-2-like
    head: {ROTARY_DIM} rotated features ({ROTARY_DIM // 2} pairs), base {BASE:g}, trained on
    {TRAINED:,} tokens, to be read at {length:,} ({FACTOR:g}x). A pair that turned less than once in
    training has only seen part of its circle; at the longer length it would meet angles it never
    saw. Each scaling is a config in [cyan]posenc.rope.scaling[/] turned into frequencies by
    [cyan]rope_frequencies[/]:""",
    )
    default, _ = rope_frequencies(None, ROTARY_DIM, BASE)  # (64,) float64
    short_pairs = ctx.record("extension.partial_turn_pairs", int((TRAINED * default < 2 * math.pi).sum()))
    results = {}
    t = table(
        "scaling",
        "fastest\npair",
        "slowest\npair",
        "rad/seat,\nfastest",
        "attention\nfactor",
        f"pairs unseen\nat {length:,}",
    )
    configs = scalings()
    yarn = configs["yarn"]
    for name, config in configs.items():
        inv_freq, factor = rope_frequencies(config, ROTARY_DIM, BASE)
        results[name] = inv_freq
        fast = ctx.record(f"extension.{name}.fastest_ratio", float(inv_freq[0] / default[0]))
        slow = ctx.record(f"extension.{name}.slowest_ratio", float(inv_freq[-1] / default[-1]))
        step = ctx.record(f"extension.{name}.fastest_step", float(inv_freq[0]))
        ctx.record(f"extension.{name}.attention_factor", factor)
        mask = unseen_mask(inv_freq, default, TRAINED, length)  # (64,) bool
        unseen = ctx.record(f"extension.{name}.unseen_pairs", int(mask.sum()))
        if name == "ntk":
            ntk_unseen = ctx.record("extension.ntk.unseen_indices", torch.nonzero(mask).flatten().tolist())
        if name == "yarn":
            ratio = inv_freq / default  # (64,) 1 = kept, 1/s = slowed
            yarn_kept = ctx.record("extension.yarn.kept_pairs", int((ratio >= 1 - 1e-12).sum()))
            yarn_slowed = ctx.record("extension.yarn.slowed_pairs", int((ratio <= (1 + 1e-12) / FACTOR).sum()))
        t.add_row(
            name, f"x{fast:.3f}", f"x{slow:.4f}", f"{step:.3f}", f"{factor:.4f}", f"{unseen} of {ROTARY_DIM // 2}"
        )
    ctx.console.print(t)
    ctx.console.print("[dim](fastest/slowest pair: its frequency relative to the default)[/]")
    ctx.console.print()

    linear = RotaryEmbedding(ROTARY_DIM, base=BASE, scaling=LinearScaling(factor=FACTOR), max_position_embeddings=8)
    unscaled = RotaryEmbedding(ROTARY_DIM, base=BASE, max_position_embeddings=8)
    seats = torch.tensor([[0, 1_000, 4_000, TRAINED - 1]])
    cos_lin, sin_lin = linear.cos_sin(seats * int(FACTOR))
    cos_def, sin_def = unscaled.cos_sin(seats)
    same = ctx.record(
        "extension.linear.interpolation_error",
        float(torch.maximum((cos_lin - cos_def).abs(), (sin_lin - sin_def).abs()).max()),
    )
    prose(
        ctx,
        f"""[bold]Linear[/] (position interpolation) divides every frequency by {FACTOR:g}:
    seat {FACTOR:g}p now looks exactly like seat p did (checked with [cyan]RotaryEmbedding[/]: largest
    cos/sin difference {sci(same)}), so nothing is unseen, but neighbours are {FACTOR:g} times
    closer: the fastest pair moves {ctx.facts["extension.linear.fastest_step"]:.2f} rad per seat
    instead of 1. [bold]NTK-aware[/] raises the base instead: the fastest pair keeps its speed (local
    order stays sharp) and only the slowest pair is slowed the full {FACTOR:g}x, with a smooth change in
    between. That change is too gentle near the slow end: {len(ntk_unseen)} pairs (pairs
    {index_ranges(ntk_unseen)}, counting 0 as the fastest and {ROTARY_DIM // 2 - 1} as the slowest) are
    slowed too little and still pass the angles they saw in training, though by less. [bold]YaRN[/]
    keeps the pairs that turn more than about {times(yarn.beta_fast)} in training (beta_fast),
    interpolates the pairs that turn less than {times(yarn.beta_slow)} (beta_slow), ramps in between
    (here {yarn_kept} pairs kept, {yarn_slowed} fully slowed, {ROTARY_DIM // 2 - yarn_kept - yarn_slowed}
    ramped), and scales the attention logits by
    {ctx.facts["extension.yarn.attention_factor"] ** 2:.4f} (its factor
    {ctx.facts["extension.yarn.attention_factor"]:.4f} on both q and k) to counter the flatter
    attention over a longer input. Of the {ROTARY_DIM // 2} pairs, {short_pairs} turn less than once in
    {TRAINED:,} tokens: with no scaling, all of them meet new angles. The lab trains small models
    and measures what each scaling does to text longer than the training length.""",
    )
    _draw(ctx, results)


def _draw(ctx, results: dict) -> None:
    prose(
        ctx,
        f"""Figure [cyan]rope_scaling_wavelengths.png[/] plots every pair's wavelength (how
    many seats one full turn takes) under each scaling, with the trained length {TRAINED:,} and the
    target length {int(TRAINED * FACTOR):,} as horizontal lines: a pair whose curve lies above the
    trained line has never finished a turn in training.""",
    )
    fig = new_figure(8, 4.6)
    ax = fig.subplots()
    index = range(ROTARY_DIM // 2)
    styles = {"default": "-", "linear": "--", "ntk": "-.", "yarn": ":"}
    for name, inv_freq in results.items():
        colour = SCALING_COLOURS[name]  # one colour per scaling, as in the explorer
        ax.plot(index, (2 * math.pi / inv_freq).numpy(), styles[name], color=colour, linewidth=1.8, label=name)
    ax.axhline(TRAINED, color="0.3", linewidth=0.9)
    ax.text(1, TRAINED * 1.15, f"trained length {TRAINED:,}", fontsize=8, color="0.3")
    ax.axhline(TRAINED * FACTOR, color="tab:red", linewidth=0.9)
    ax.text(1, TRAINED * FACTOR * 1.15, f"target length {int(TRAINED * FACTOR):,}", fontsize=8, color="tab:red")
    ax.set_yscale("log")
    ax.set_xlabel("rotation pair i (0 = fastest)")
    ax.set_ylabel("wavelength in seats (2 pi / theta_i)")
    ax.set_title(f"RoPE wavelengths, {ROTARY_DIM} rotated features, base {BASE:g}, scaled {FACTOR:g}x")
    ax.legend()
    save(ctx, fig, "rope_scaling_wavelengths")
