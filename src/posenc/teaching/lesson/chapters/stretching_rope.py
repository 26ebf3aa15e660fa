"""Chapter "Stretching RoPE": what the scalings do to the frequencies, and two real configs.

A RoPE model trained on ``L0`` tokens has seen, for each rotation pair, only part of the angles when
the pair turns less than once over ``L0``; the scalings of :mod:`posenc.rope.scaling` change the
frequencies so that a longer input stays (mostly) within the angles seen in training. The measure is
the lesson's one definition, :func:`posenc.teaching.lesson.stretching.past_training`. The blocks whose slot
starts with ``configs`` read two real ``config.json`` files (:mod:`posenc.fixtures`).
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

import torch

from ....fixtures import load_fixture
from ....rope import LinearScaling, NTKScaling, RotaryEmbedding, YaRNScaling, rope_frequencies, rope_inv_freq
from ....rope.registry import scaling_parameters
from ..palette import parameter_label
from ..prose import Block, see_also
from ..stretching import band_masks, partial_turn, past_training
from ..vectors import TWO_PI
from ._check import Check, Evidence
from ._figures import Figure
from ._ranges import Range, checked

#: A Llama-2-like head: 128 rotated features, base 10000, trained on 4096 tokens, stretched 4x.
ROTARY_DIM = 128
BASE = 10000.0
TRAINED = 4096
FACTOR = 4.0
#: (fact key, fixture name) of the two real configs
MODELS = (("llama31", "llama-3.1-8b"), ("phi35", "phi-3.5-mini-instruct"))


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
    definition, :func:`posenc.teaching.lesson.stretching.past_training`."""
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


def pair_bands(scaled: torch.Tensor, default: torch.Tensor, factor: float) -> Tuple[int, int, int]:
    """Counts of pairs kept (frequency unchanged), slowed by the whole factor and blended in between:
    :func:`posenc.teaching.lesson.stretching.band_masks`, which the explorer's wavelength view counts with too."""
    kept, divided, blended = band_masks(scaled / default, factor)
    return int(kept.sum()), int(divided.sum()), int(blended.sum())


def numbers() -> dict:
    """The scalings on a Llama-2-like head, and two real configs read from their fields."""
    n: dict = {}
    length = int(TRAINED * FACTOR)
    default, _ = rope_frequencies(None, ROTARY_DIM, BASE)  # (64,) float64
    n["extension.partial_turn_pairs"] = int(partial_turn(default, TRAINED).sum())
    for name, config in scalings().items():
        inv_freq, factor = rope_frequencies(config, ROTARY_DIM, BASE)
        n[f"extension.{name}.fastest_ratio"] = float(inv_freq[0] / default[0])
        n[f"extension.{name}.slowest_ratio"] = float(inv_freq[-1] / default[-1])
        n[f"extension.{name}.fastest_step"] = float(inv_freq[0])
        n[f"extension.{name}.attention_factor"] = factor
        mask = unseen_mask(inv_freq, default, TRAINED, length)  # (64,) bool
        n[f"extension.{name}.unseen_pairs"] = int(mask.sum())
        if name == "ntk":
            n["extension.ntk.unseen_indices"] = torch.nonzero(mask).flatten().tolist()
        if name == "yarn":
            kept, slowed, _ = pair_bands(inv_freq, default, FACTOR)
            n["extension.yarn.kept_pairs"], n["extension.yarn.slowed_pairs"] = kept, slowed
    linear = RotaryEmbedding(ROTARY_DIM, base=BASE, scaling=LinearScaling(factor=FACTOR), max_position_embeddings=8)
    unscaled = RotaryEmbedding(ROTARY_DIM, base=BASE, max_position_embeddings=8)
    seats = torch.tensor([[0, 1_000, 4_000, TRAINED - 1]])
    cos_lin, sin_lin = linear.cos_sin(seats * int(FACTOR))
    cos_def, sin_def = unscaled.cos_sin(seats)
    n["extension.linear.interpolation_error"] = float(
        torch.maximum((cos_lin - cos_def).abs(), (sin_lin - sin_def).abs()).max()
    )
    for key, name in MODELS:
        fixture = load_fixture(name)
        rope = RotaryEmbedding.from_hf_config(fixture)
        scaling = rope.scaling
        default = rope_inv_freq(rope.rotary_dim, rope.base)  # (r/2,) float64
        trained = scaling.original_max_position_embeddings
        context = fixture["max_position_embeddings"]
        scaled, _ = rope.frequencies(context)  # longrope: the long factors at full context
        c = f"configs.{key}."
        n[c + "model"] = fixture["source"].split("/")[-1]
        n[c + "source"] = fixture["source"]
        n[c + "rope_type"] = scaling.rope_type
        n[c + "rotary_dim"], n[c + "head_dim"], n[c + "base"] = rope.rotary_dim, rope.head_dim, rope.base
        n[c + "trained"], n[c + "context"] = trained, context
        n[c + "factor"] = float(scaling.factor)
        n[c + "attention_factor"] = rope.attention_factor
        n[c + "slowest_wavelength"] = float(2 * math.pi / scaled[-1])
        n[c + "slowest_wavelength_default"] = float(2 * math.pi / default[-1])
        if scaling.rope_type == "llama3":
            n[c + "kept"], n[c + "slowed"], n[c + "blended"] = pair_bands(scaled, default, scaling.factor)
            n[c + "kept_below"] = trained / scaling.high_freq_factor
            n[c + "slowed_above"] = trained / scaling.low_freq_factor
        else:
            n[c + "long_factor_range"] = [min(scaling.long_factor), max(scaling.long_factor)]
            n[c + "short_factor_range"] = [min(scaling.short_factor), max(scaling.short_factor)]
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    length = int(TRAINED * FACTOR)
    pairs = ROTARY_DIM // 2
    rows: list[tuple[str, ...]] = [
        ("scaling", "fastest", "slowest", "rad/seat", "attn factor", f"unseen at {length:,}")
    ]
    for name in scalings():
        e = f"extension.{name}."
        rows.append(
            (
                name,
                f"x{n[e + 'fastest_ratio']:.3f}",
                f"x{n[e + 'slowest_ratio']:.4f}",
                f"{n[e + 'fastest_step']:.3f}",
                f"{n[e + 'attention_factor']:.4f}",
                f"{n[e + 'unseen_pairs']} of {pairs}",
            )
        )
    yarn = scalings()["yarn"]
    ntk_unseen = n["extension.ntk.unseen_indices"]
    kept, slowed = n["extension.yarn.kept_pairs"], n["extension.yarn.slowed_pairs"]
    yarn_af = n["extension.yarn.attention_factor"]
    read: list[tuple[str, ...]] = [("model", "rope type", "rotated", "base", "trained", "context")]
    does: list[tuple[str, ...]] = [("model", "table factor", "slowest, unscaled", "slowest, scaled")]
    for key, _ in MODELS:
        c = f"configs.{key}."
        read.append(
            (
                n[c + "model"],
                n[c + "rope_type"],
                f"{n[c + 'rotary_dim']} of {n[c + 'head_dim']}",
                f"{n[c + 'base']:g}",
                f"{n[c + 'trained']:,}",
                f"{n[c + 'context']:,}",
            )
        )
        does.append(
            (
                n[c + "model"],
                f"{n[c + 'attention_factor']:.4f}",
                f"{n[c + 'slowest_wavelength_default']:,.0f}",
                f"{n[c + 'slowest_wavelength']:,.0f}",
            )
        )
    llama, phi = "configs.llama31.", "configs.phi35."
    trained = n[llama + "trained"]
    llama_af = n[llama + "attention_factor"]
    tables = "its tables are not rescaled (factor 1)" if llama_af == 1.0 else f"its tables are scaled by {llama_af:.4f}"
    long_lo, long_hi = n[phi + "long_factor_range"]
    short_lo, short_hi = n[phi + "short_factor_range"]
    phi_trained, phi_s = n[phi + "trained"], n[phi + "factor"]
    return [
        Block(
            "plain",
            """A model trained on short texts has only seen its slow clock hands in part of their circle. To read
            longer texts, we slow the hands down so that the new seats still show positions the model has seen.""",
            "intro",
        ),
        Block(
            "p",
            """Because RoPE is only turning, a model trained on 8,192 tokens can be stretched to 128,000 and more
            by slowing the hands down, so that more words fit around the clock face (usually followed by a short
            fine-tune). Each pair repeats every 2π/θᵢ seats, its *wavelength*. Fast pairs went round many times
            during training and have seen every angle; the slowest ones never finished a turn. Longer inputs
            would show those slow pairs angles they never saw, and that is what the scalings fix.""",
            "intro",
        ),
        Block(
            "p",
            """**Pairs past training.** A training text of L₀ seats runs from seat 0 to seat L₀ − 1, so pair i
            sweeps the angles from 0 to (L₀ − 1)θᵢ, in steps of θᵢ. If L₀θᵢ, one step further, is a full turn or
            more, the pair has come within one step of every angle. If not, the pair is *past training* at a
            length L when the angle at the last seat, (L − 1)θ′ᵢ with the scaled frequency θ′, is larger than
            L₀θᵢ: one step past the last trained seat. The bound allows that one step because the model only ever
            saw whole seats, θᵢ apart: an angle less than a step beyond the last one it saw is no farther from
            it than two neighbouring seats are from each other. Linear scaling by L/L₀ ends just there: its last
            angle, (L − 1)θᵢ·L₀/L, lies between (L₀ − 1)θᵢ and L₀θᵢ. Fewer is better; zero means nothing new.
            `posenc tour` and `posenc explore` count with the same function
            (`posenc.teaching.lesson.stretching.past_training`).""",
            "definition",
            id="def-past-training",
        ),
        Block(
            "item",
            """**Linear (position interpolation)** slows every pair by the factor: no pair goes past training,
            but neighbours end up closer than the model ever saw.""",
            "scalings",
        ),
        Block(
            "item",
            """**NTK-aware** raises the base instead: the fastest pair stays as it was, the slowest is slowed by
            the full factor, and the pairs in between by less.""",
            "scalings",
        ),
        Block(
            "item",
            """**YaRN** leaves fast pairs alone, slows the slow ones by the full factor, blends in between, and
            sharpens attention a little to make up for the longer text.""",
            "scalings",
        ),
        Block(
            "caption",
            """Wavelength of each pair of a 128-wide head (log scale) for plain RoPE and the three scalings, from
            posenc's `rope_frequencies`; dashed lines at the trained and the stretched length.""",
            "stretch-rope-caption",
        ),
        Block(
            "try",
            """read the last column. Plain RoPE puts every pair that turned less than once in training past it;
            linear scaling and YaRN put none there; NTK-aware, which slows the pairs between fast and slow by less
            than the factor, still leaves most of the slow pairs past training. Linear pays for its zero
            elsewhere: its fastest θ is divided by the factor, so neighbours look closer than the model ever
            saw.""",
            "after",
        ),
        Block("h3", f"Measured: a Llama-2-like head stretched {FACTOR:g}x", "measured"),
        Block(
            "p",
            f"""RoPE models are trained on a fixed length and then stretched. Take a Llama-2-like head:
            {ROTARY_DIM} rotated features ({pairs} pairs), base {BASE:g}, trained on {TRAINED:,} tokens, to be
            read at {length:,} ({FACTOR:g}x). A pair that turned less than once in training has only seen part of
            its circle; at the longer length it would meet angles it never saw. Each scaling is a config in
            `posenc.rope.scaling` turned into frequencies by `rope_frequencies`:""",
            "measured",
        ),
        Block(
            "table",
            """Each scaling's frequencies (fastest, slowest: the pair's frequency relative to the default;
            rad/seat: the fastest pair's turn per seat; unseen: pairs past training)""",
            "measured",
            rows=tuple(rows),
        ),
        Block(
            "p",
            f"""**Linear** (position interpolation) divides every frequency by {FACTOR:g}: seat {FACTOR:g}p now
            looks exactly like seat p did (checked with `RotaryEmbedding`: largest cos/sin difference
            {n["extension.linear.interpolation_error"]:.2e}), so nothing is unseen, but neighbours are
            {FACTOR:g} times closer: the fastest pair moves {n["extension.linear.fastest_step"]:.2f} rad per seat
            instead of 1. **NTK-aware** raises the base instead: the fastest pair keeps its speed (local order
            stays sharp) and only the slowest pair is slowed the full {FACTOR:g}x, with a smooth change in
            between. That change is too gentle near the slow end: {len(ntk_unseen)} pairs (pairs
            {index_ranges(ntk_unseen)}, counting 0 as the fastest and {pairs - 1} as the slowest) are slowed too
            little and still pass the angles they saw in training, though by less. **YaRN** keeps the pairs that
            turn more than about {times(yarn.beta_fast)} in training (beta_fast), interpolates the pairs that
            turn less than {times(yarn.beta_slow)} (beta_slow), ramps in between (here {kept} pairs kept,
            {slowed} fully slowed, {pairs - kept - slowed} ramped), and scales the attention logits by
            {yarn_af**2:.4f} (its factor {yarn_af:.4f} on both q and k) to counter the flatter attention over a
            longer input. Of the {pairs} pairs, {n["extension.partial_turn_pairs"]} turn less than once in
            {TRAINED:,} tokens: with no scaling, all of them meet new angles. The lab trains small models and
            measures what each scaling does to text longer than the training length.""",
            "measured",
        ),
        Block(
            "tour-figure",
            f"""Figure rope_scaling_wavelengths.png, written by `posenc tour`, plots every pair's wavelength (how
            many seats one full turn takes) under each scaling, with the trained length {TRAINED:,} and the
            target length {length:,} as horizontal lines: a pair whose curve lies above the trained line has
            never finished a turn in training.""",
            "measured",
        ),
        # the second part of the chapter (the tour's section "configs") opens in plain words too, under a
        # heading of its own on the page: the manifest's name of the part, which the tour prints as the
        # section's title instead
        Block("h3", "Real model configs", "configs-heading"),
        Block(
            "plain",
            """Real models write these choices into a settings file that ships with the weights. We read two of
            them and see what their settings do to the clock hands.""",
            "configs",
        ),
        Block(
            "p",
            """Real models ship their RoPE settings in `config.json`: a base (`rope_theta`) and a `rope_scaling`
            dict. Two public configs, loaded with `RotaryEmbedding.from_hf_config` from the fixtures in
            `posenc.fixtures`:""",
            "configs",
        ),
        Block("table", "What each config says", "configs", rows=tuple(read)),
        Block("table", "What its scaling does (the slowest pair's wavelength, in tokens)", "configs", rows=tuple(does)),
        Block(
            "p",
            f"""**Llama 3.1** keeps its {n[llama + "kept"]} fastest pairs exactly (wavelengths under {trained:,} /
            high_freq_factor = {n[llama + "kept_below"]:,.0f} tokens), slows the {n[llama + "slowed"]} slowest by
            the full factor {n[llama + "factor"]:g} (wavelengths over {trained:,} / low_freq_factor =
            {n[llama + "slowed_above"]:,.0f} tokens) and blends the {n[llama + "blended"]} in between; {tables}.
            **Phi-3.5-mini** (LongRoPE) divides each pair by its own searched factor: between {short_lo:.2f} and
            {short_hi:.2f} for inputs up to {phi_trained:,} tokens, between {long_lo:.2f} and {long_hi:.2f}
            beyond, and scales its cos/sin tables by {n[phi + "attention_factor"]:.4f} = sqrt(1 + ln {phi_s:g} /
            ln {phi_trained}) for every input ({phi_s:g} = {n[phi + "context"]:,} / {phi_trained:,}, context over
            trained length). Because the long list takes over past {phi_trained:,} tokens, the frequencies change
            when a generation crosses that length; `freeze_frequencies` fixes them for the whole generation so
            that cached keys and new queries agree.""",
            "configs",
        ),
        Block(
            "tour-figure",
            """Figure real_config_wavelengths.png, written by `posenc tour`, shows, for each model, every pair's
            wavelength unscaled and as its config scales it, beside the trained and the advertised context
            lengths.""",
            "configs",
        ),
        see_also("""Workbench: [wavelengths and scaling](#wavelengths) with dynamic NTK, Llama 3, real model configs,
            and [copy as config](#config)."""),
    ]


def _scaling_range(name: str) -> Range:
    """The range of a RoPE scaling's parameter, read from its registry descriptor (its one definition)."""
    p = scaling_parameters()[name]
    return (float(p.minimum), float(p.maximum), float(p.default), parameter_label(name))


# -- the figure: every pair's wavelength under each scaling --
#: parameter -> (minimum, maximum, default, help) of the figures (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    # the registry's range; the figure opens on the head the text measures, trained on TRAINED, stretched FACTOR x
    "factor": (*_scaling_range("factor")[:2], FACTOR, _scaling_range("factor")[3]),
    "train_len": (256, 131_072, TRAINED, "context length the model was trained with"),
    "stretch_head_dim": (16, 256, 128, "features per head (even)"),
}


def stretching(factor: float, train_len: int, head_dim: int) -> dict:
    """Wavelength of every pair under plain RoPE, linear (PI), NTK-aware and YaRN scaling.

    For each method: the wavelengths 2 pi / theta_i, the attention factor, and the pairs *past
    training* at the new length (factor x train_len), by the one definition the tour uses too
    (:func:`posenc.teaching.lesson.stretching.past_training`): pairs that turned less than once in training
    and would now reach an angle larger than any they saw. A method with none shows the model no new
    angle.
    """
    checked(FIGURE_RANGES, "factor", factor)
    checked(FIGURE_RANGES, "train_len", train_len)
    checked(FIGURE_RANGES, "stretch_head_dim", head_dim, argument="head_dim", even=True)
    target = round(factor * train_len)
    configs = {
        "rope": None,
        "linear": LinearScaling(factor=factor),
        "ntk": NTKScaling(factor=factor),
        "yarn": YaRNScaling(factor=factor, original_max_position_embeddings=train_len),
    }
    plain = rope_inv_freq(head_dim, 10000.0)
    partial = partial_turn(plain, train_len).tolist()
    methods = []
    for name, cfg in configs.items():
        inv_freq, attention = rope_frequencies(cfg, head_dim, 10000.0)
        past = past_training(inv_freq, plain, train_len, target)  # (d/2,) bool
        methods.append(
            {
                "method": name,
                "wavelengths": (TWO_PI / inv_freq).tolist(),
                "attention_factor": attention,
                "fastest_theta": float(inv_freq[0]),
                "past_training": past.tolist(),
                "pairs_past_training": int(past.sum()),
            }
        )
    return {
        "factor": factor,
        "train_len": train_len,
        "target_len": target,
        "head_dim": head_dim,
        "pairs": head_dim // 2,
        "partial_turn_pairs": int(sum(partial)),
        "methods": methods,
    }


#: route -> figure function (the explorer serves it at /api/lesson/<route>)
FIGURES = {"stretch": Figure(stretching, head_dim="stretch_head_dim")}


# -- the knowledge checks the manifest lists under this chapter (the quiz collects them) --
#: the shipped config the Llama 3 check reads
LLAMA3_FIXTURE = "llama-3.1-8b"


def _llama3_bands() -> Evidence:
    from ....fixtures import load_fixture
    from ....hf import rotary_kwargs_from_hf
    from ....rope.scaling import rope_frequencies
    from ....rope.tables import rope_inv_freq

    kw = rotary_kwargs_from_hf(load_fixture(LLAMA3_FIXTURE))
    cfg, rotary_dim, base = kw["scaling"], kw["rotary_dim"], kw["base"]
    scaled, _ = rope_frequencies(cfg, rotary_dim, base)
    default = rope_inv_freq(rotary_dim, base)  # (rotary_dim / 2,)
    ratio = scaled / default
    kept, divided, between = pair_bands(scaled, default, cfg.factor)
    original, high = cfg.original_max_position_embeddings, cfg.high_freq_factor
    return (
        [
            f"{LLAMA3_FIXTURE} (rope_theta {base:g}, {rotary_dim} rotated features, factor "
            f"{cfg.factor:g}, original context {original}): {kept} of {ratio.numel()} pairs keep their "
            f"frequency, {between} are blended, {divided} are divided by {cfg.factor:g}.",
            f"The kept pairs are the first ones, wavelength under {original} / high_freq_factor "
            f"{high:g} = {original / high:g} tokens: they already turn several times inside the trained "
            f"context.",
        ],
        {
            "kept": kept,
            "blended": between,
            "divided": divided,
            "ratio": ratio.tolist(),
            "factor": cfg.factor,
            "original": original,
            "low_freq_factor": cfg.low_freq_factor,
            "high_freq_factor": high,
            "base": base,
            "rotary_dim": rotary_dim,
        },
    )


def _linear_vs_ntk() -> Evidence:
    from ....rope.scaling import LinearScaling, NTKScaling, rope_frequencies
    from ....rope.tables import rope_inv_freq

    rotary_dim, base = 128, 10000.0
    plain = rope_inv_freq(rotary_dim, base)
    linear = rope_frequencies(LinearScaling(factor=4.0), rotary_dim, base)[0] / plain
    ntk = rope_frequencies(NTKScaling(factor=4.0), rotary_dim, base)[0] / plain
    return (
        [
            f"Fastest pair, new/old frequency: linear {float(linear[0]):.4f}, NTK {float(ntk[0]):.4f}.",
            f"Slowest pair: linear {float(linear[-1]):.4f}, NTK {float(ntk[-1]):.4f}.",
        ],
        {"linear": [float(linear[0]), float(linear[-1])], "ntk": [float(ntk[0]), float(ntk[-1])]},
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "linear-vs-ntk",
        "context extension",
        "Position interpolation (linear) and NTK-aware scaling both stretch a RoPE model 4x. What "
        "happens to the fastest pair?",
        (
            "Linear slows it 4x; NTK leaves it unchanged and slows the slowest pair 4x.",
            "Both slow it 4x.",
            "NTK slows it more than linear does.",
        ),
        0,
        (
            "NTK raises the base, which moves slow pairs most and the fastest one not at all.",
            "Only linear divides every frequency; NTK changes the base instead.",
            "NTK's base change leaves the first pair (exponent 0) exactly where it was.",
        ),
        _linear_vs_ntk,
    ),
    Check(
        "llama3-bands",
        "context extension",
        "Llama 3.1 stretches its RoPE context by 8x with the llama3 scaling. Which rotation pairs "
        "does it leave exactly as trained?",
        (
            "The slow pairs, whose wavelength exceeds the training context.",
            "None: every frequency is divided by 8.",
            "The fast pairs, whose wavelength is shorter than original_max_position_embeddings / high_freq_factor.",
        ),
        2,
        (
            "The slow pairs are the ones that get divided by the factor: they never completed a turn in "
            "training, so longer inputs would show them unseen angles.",
            "That is plain position interpolation (the linear scaling), not llama3.",
            "Fast pairs already turned many times in training, so larger positions show them nothing new.",
        ),
        _llama3_bands,
    ),
)
