"""Section: two real model configs, read from their ``config.json`` fields, and what their scalings do.

The fixtures in :mod:`posenc.fixtures` hold the rope fields of public configs. Loading one with
:meth:`posenc.rope.RotaryEmbedding.from_hf_config` gives the same frequencies ``transformers`` uses
(``tests/test_hf_parity.py``); this section shows them next to the unscaled frequencies of the same
head, as wavelengths in tokens.
"""

from __future__ import annotations

import math

import torch

from ..explorer.palette import SCALING_COLOURS
from ..fixtures import load_fixture
from ..rope import RotaryEmbedding, rope_inv_freq
from ._plot import new_figure, save
from ._show import plain, prose, table

#: (fact key, fixture name)
MODELS = (("llama31", "llama-3.1-8b"), ("phi35", "phi-3.5-mini-instruct"))


def pair_bands(scaled: torch.Tensor, default: torch.Tensor, factor: float):
    """Counts of pairs kept (ratio 1), fully slowed (ratio >= factor) and blended in between."""
    ratio = default / scaled
    kept = int((ratio <= 1 + 1e-12).sum())
    slowed = int((ratio >= factor * (1 - 1e-12)).sum())
    return kept, slowed, len(ratio) - kept - slowed


def real_configs(ctx) -> None:
    plain(
        ctx,
        """Real models write these choices into a settings file that ships with the weights.
    We read two of them and see what their settings do to the clock hands.""",
    )
    prose(
        ctx,
        """Real models ship their RoPE settings in [cyan]config.json[/]: a base
    ([cyan]rope_theta[/]) and a [cyan]rope_scaling[/] dict. Two public configs, loaded with
    [cyan]RotaryEmbedding.from_hf_config[/] from the fixtures in [cyan]posenc.fixtures[/]:""",
    )
    read = table("model", "rope type", "rotated", "base", "trained", "context", title="What each config says")
    does = table(
        "model",
        "table\nfactor",
        "slowest wavelength,\nunscaled",
        "slowest wavelength,\nscaled",
        title="What its scaling does (wavelengths in tokens)",
    )
    curves, scalings = {}, {}
    for key, name in MODELS:
        fixture = load_fixture(name)
        rope = RotaryEmbedding.from_hf_config(fixture)
        scaling = scalings[key] = rope.scaling
        default = rope_inv_freq(rope.rotary_dim, rope.base)  # (r/2,) float64
        trained = scaling.original_max_position_embeddings
        context = fixture["max_position_embeddings"]
        scaled, _ = rope.frequencies(context)  # longrope: the long factors at full context
        model = ctx.record(f"configs.{key}.model", fixture["source"].split("/")[-1])
        ctx.record(f"configs.{key}.source", fixture["source"])
        ctx.record(f"configs.{key}.rope_type", scaling.rope_type)
        ctx.record(f"configs.{key}.rotary_dim", rope.rotary_dim)
        ctx.record(f"configs.{key}.head_dim", rope.head_dim)
        ctx.record(f"configs.{key}.base", rope.base)
        ctx.record(f"configs.{key}.trained", trained)
        ctx.record(f"configs.{key}.context", context)
        ctx.record(f"configs.{key}.factor", float(scaling.factor))
        af = ctx.record(f"configs.{key}.attention_factor", rope.attention_factor)
        slowest = ctx.record(f"configs.{key}.slowest_wavelength", float(2 * math.pi / scaled[-1]))
        unscaled = ctx.record(f"configs.{key}.slowest_wavelength_default", float(2 * math.pi / default[-1]))
        if scaling.rope_type == "llama3":
            kept, slowed, blended = pair_bands(scaled, default, scaling.factor)
            ctx.record(f"configs.{key}.kept", kept)
            ctx.record(f"configs.{key}.blended", blended)
            ctx.record(f"configs.{key}.slowed", slowed)
            ctx.record(f"configs.{key}.kept_below", trained / scaling.high_freq_factor)
            ctx.record(f"configs.{key}.slowed_above", trained / scaling.low_freq_factor)
        else:
            ctx.record(f"configs.{key}.long_factor_range", [min(scaling.long_factor), max(scaling.long_factor)])
            ctx.record(f"configs.{key}.short_factor_range", [min(scaling.short_factor), max(scaling.short_factor)])
        read.add_row(
            model,
            scaling.rope_type,
            f"{rope.rotary_dim} of {rope.head_dim}",
            f"{rope.base:g}",
            f"{trained:,}",
            f"{context:,}",
        )
        does.add_row(model, f"{af:.4f}", f"{unscaled:,.0f}", f"{slowest:,.0f}")
        curves[key] = (fixture["source"], default, scaled, trained, context, rope)
    ctx.console.print(read)
    ctx.console.print(does)
    ctx.console.print()
    _explain(ctx, scalings)
    _draw(ctx, curves)


def _explain(ctx, scalings: dict) -> None:
    """The paragraph under the tables: every number in it comes from a loaded config or a fact."""
    (llama_key, _), (phi_key, _) = MODELS
    llama, phi = f"configs.{llama_key}", f"configs.{phi_key}"
    band = scalings[llama_key]
    trained = ctx.facts[llama + ".trained"]
    llama_af = ctx.facts[llama + ".attention_factor"]
    tables = "its tables are not rescaled (factor 1)" if llama_af == 1.0 else f"its tables are scaled by {llama_af:.4f}"
    long_lo, long_hi = ctx.facts[phi + ".long_factor_range"]
    short_lo, short_hi = ctx.facts[phi + ".short_factor_range"]
    phi_trained, phi_s = ctx.facts[phi + ".trained"], ctx.facts[phi + ".factor"]
    prose(
        ctx,
        f"""[bold]Llama 3.1[/] keeps its {ctx.facts[llama + ".kept"]} fastest pairs exactly
    (wavelengths under {trained:,} / high_freq_factor = {ctx.facts[llama + ".kept_below"]:,.0f}
    tokens), slows the {ctx.facts[llama + ".slowed"]} slowest by the full factor {band.factor:g}
    (wavelengths over {trained:,} / low_freq_factor = {ctx.facts[llama + ".slowed_above"]:,.0f}
    tokens) and blends the {ctx.facts[llama + ".blended"]} in between; {tables}.
    [bold]Phi-3.5-mini[/] (LongRoPE) divides each pair by its own searched factor: between
    {short_lo:.2f} and {short_hi:.2f} for inputs up to {phi_trained:,} tokens, between
    {long_lo:.2f} and {long_hi:.2f} beyond, and scales its cos/sin tables by
    {ctx.facts[phi + ".attention_factor"]:.4f} = sqrt(1 + ln {phi_s:g} / ln {phi_trained}) for every
    input ({phi_s:g} = {ctx.facts[phi + ".context"]:,} / {phi_trained:,}, context over trained length).
    Because the long list takes over past {phi_trained:,} tokens, the frequencies change when a
    generation crosses that length; [cyan]freeze_frequencies[/] fixes them for the whole generation
    so that cached keys and new queries agree.""",
    )


def _draw(ctx, curves: dict) -> None:
    prose(
        ctx,
        """Figure [cyan]real_config_wavelengths.png[/] shows, for each model, every pair's
    wavelength unscaled and as its config scales it, beside the trained and the advertised context
    lengths.""",
    )
    fig = new_figure(10, 4.4)
    axes = fig.subplots(1, 2)
    for ax, (source, default, scaled, trained, context, rope) in zip(axes, curves.values()):
        index = range(len(default))
        ax.plot(
            index,
            (2 * math.pi / default).numpy(),
            "-",
            color=SCALING_COLOURS["default"],
            linewidth=1.6,
            label="unscaled",
        )
        if rope.scaling.rope_type == "longrope":
            short, _ = rope.frequencies(trained)
            colour = SCALING_COLOURS["longrope"]
            ax.plot(
                index,
                (2 * math.pi / short).numpy(),
                "-.",
                color=colour,
                alpha=0.6,
                linewidth=1.6,
                label="short factors",
            )
            ax.plot(index, (2 * math.pi / scaled).numpy(), "--", color=colour, linewidth=1.6, label="long factors")
        else:
            colour = SCALING_COLOURS[rope.scaling.rope_type]
            ax.plot(
                index, (2 * math.pi / scaled).numpy(), "--", color=colour, linewidth=1.6, label=rope.scaling.rope_type
            )
        ax.axhline(trained, color="0.3", linewidth=0.9)
        ax.text(0.5, trained * 1.2, f"trained {trained:,}", fontsize=8, color="0.3")
        ax.axhline(context, color="tab:red", linewidth=0.9)
        ax.text(0.5, context * 1.2, f"context {context:,}", fontsize=8, color="tab:red")
        ax.set_yscale("log")
        ax.set_xlabel("rotation pair i (0 = fastest)")
        ax.set_ylabel("wavelength in tokens")
        ax.set_title(f"{source}: base {rope.base:g}", fontsize=10)
        ax.legend(fontsize=8)
    save(ctx, fig, "real_config_wavelengths")
