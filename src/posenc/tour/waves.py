"""Sections: the sinusoidal table's three rules, measured; and the lesson's wave fingerprint."""

from __future__ import annotations

import math
from typing import Tuple

import torch

from ..sinusoidal import sinusoidal_frequencies, sinusoidal_table
from ._plot import new_figure, save
from ._show import plain, prose, sci, signed, table, verdict

#: Table measured for the three rules: a modest width, 10,000 seats.
D_MODEL = 128
LENGTH = 10_000
#: Seats searched for near-repeats of the fastest pair of columns alone.
FAST_ONLY_LENGTH = 2_000
#: Offsets k for the "pos + k is a fixed linear map of pos" rule.
OFFSETS = (1, 7, 250)
#: The lesson's wave fingerprint: seat -> (fast, medium, slow), to two decimals.
LESSON_FINGERPRINT = {0: (0.00, 1.00, 0.00), 1: (0.84, 0.54, 0.01), 2: (0.91, -0.42, 0.02), 3: (0.14, -0.99, 0.03)}
LESSON_WORDS = ("The", "dog", "bit", "man")


def offset_map(k: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The (d_model, d_model) matrix ``R_k`` with ``PE[pos + k] = R_k @ PE[pos]`` for every pos.

    Pair ``i`` of the table is ``(sin(pos * w_i), cos(pos * w_i))``; the angle-addition formulas make
    its shift by ``k`` the 2x2 rotation ``[[cos(k w_i), sin(k w_i)], [-sin(k w_i), cos(k w_i)]]``.
    """
    if d_model % 2:
        raise ValueError(f"offset_map needs an even d_model (whole sin/cos pairs), got {d_model}")
    blocks = []
    for w in sinusoidal_frequencies(d_model, base).tolist():
        c, s = math.cos(k * w), math.sin(k * w)
        blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def min_pairwise_distance(rows: torch.Tensor, chunk: int = 2048) -> Tuple[float, int, int]:
    """Smallest Euclidean distance between two different rows, and the two row indices (i < j).

    Every pair is compared once. A float32 pass over ``|a|^2 + |b|^2 - 2 a.b`` (blocks of ``chunk``
    rows against the rows after them) finds the pairs within a safe margin of the smallest squared
    distance (the margin is ~40 times float32's rounding bound for these norms); those candidates
    are then measured again in float64, and the smallest float64 distance is returned.
    """
    n = rows.shape[0]
    if n < 2:
        raise ValueError(f"rows must hold at least 2 vectors to compare, got {n}")
    fast = rows.to(torch.float32)
    sq = (fast * fast).sum(-1)  # (n,)
    margin = 2e-5 * float(sq.max()) + 1e-30
    best = float("inf")
    firsts, seconds = [], []
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        d2 = sq[start:stop, None] + sq[None, start:]  # (c, n - start)
        d2.addmm_(fast[start:stop], fast[start:].T, alpha=-2.0)
        c = stop - start
        d2[:, :c].masked_fill_(torch.ones(c, c, dtype=torch.bool).tril(), float("inf"))  # keep j > i
        best = min(best, float(d2.min()))
        i, j = torch.nonzero(d2 <= best + margin, as_tuple=True)
        firsts.append(i + start)
        seconds.append(j + start)
    first, second = torch.cat(firsts), torch.cat(seconds)
    exact = rows.to(torch.float64)
    dist = (exact[first] - exact[second]).norm(dim=-1)  # (candidates,)
    k = int(dist.argmin())
    return float(dist[k]), int(first[k]), int(second[k])


def three_rules(ctx) -> None:
    plain(
        ctx,
        """Instead of one number that keeps growing, give every seat a set of waves, like the
    hands of a clock turning at different speeds. Wave values always stay between -1 and 1.""",
    )
    prose(
        ctx,
        f"""The 2017 transformer codes seat [italic]pos[/] with waves: column 2i holds
    sin(pos / 10000^(2i/d)) and column 2i+1 the cosine of the same angle. Early columns turn fast,
    late columns slowly, like the hands of a clock. We build the table with
    [cyan]posenc.sinusoidal_table[/] for {LENGTH:,} seats and d_model = {D_MODEL} and measure each
    rule on it.""",
    )
    pe = sinusoidal_table(LENGTH, D_MODEL, dtype=torch.float64)  # (LENGTH, D_MODEL)

    lo, hi = ctx.record("waves.min", float(pe.min())), ctx.record("waves.max", float(pe.max()))
    ctx.console.print(
        f"[bold]Rule 1, bounded.[/] Smallest value {lo:+.6f}, largest {hi:+.6f}: "
        f"every entry lies in [-1, 1] at every seat, however long the text.",
        highlight=False,
    )
    ctx.console.print()

    prose(
        ctx,
        """[bold]Rule 2, a step is a step.[/] Moving k seats turns every clock hand by the same
    amount, whichever seat you start from: each (sin, cos) pair turns by the fixed angle k * w_i. In
    matrix form PE(pos + k) = R_k PE(pos), where R_k holds one small 2x2 turning matrix per pair
    along its diagonal and zeros everywhere else (a "block-diagonal" matrix); it does not depend on
    pos. We build R_k from the frequencies alone and check it
    against every seat of the table:""",
    )
    t = table("k", "seats checked", "max |PE(p+k) - R_k PE(p)|", "max |R_k R_k^T - I|")
    for k in OFFSETS:
        rk = offset_map(k, D_MODEL)
        residual = ctx.record(f"waves.offset.{k}.residual", float((pe[k:] - pe[:-k] @ rk.T).abs().max()))
        ortho = ctx.record(
            f"waves.offset.{k}.orthogonality", float((rk @ rk.T - torch.eye(D_MODEL, dtype=torch.float64)).abs().max())
        )
        t.add_row(str(k), f"0..{LENGTH - 1 - k:,}", sci(residual), sci(ortho))
    ctx.console.print(t)
    prose(
        ctx,
        """The residual is float64 rounding: one matrix per offset serves every seat, so a
    model can learn "two words back" once and use it anywhere.""",
    )

    dist, i, j = min_pairwise_distance(pe)
    ctx.record("waves.unique.min_distance", dist)
    ctx.record("waves.unique.pair", [i, j])
    fast_dist, fi, fj = min_pairwise_distance(pe[:FAST_ONLY_LENGTH, :2])
    ctx.record("waves.unique.fast_only.min_distance", fast_dist)
    ctx.record("waves.unique.fast_only.pair", [fi, fj])
    turns = ctx.record("waves.unique.fast_only.turns", (fj - fi) / (2 * math.pi))
    prose(
        ctx,
        f"""[bold]Rule 3, one fingerprint per seat.[/] Comparing all
    {LENGTH * (LENGTH - 1) // 2:,} pairs of seats 0..{LENGTH - 1:,}, the smallest distance is
    {dist:.4f}, between seats {i} and {j} ({j - i} apart): no two seats share a code. (By rule 2 the
    distance depends only on how far apart two seats are, so every pair of neighbours ties with
    this one.) The many speeds matter: the fastest pair of columns on its own nearly repeats. Among
    seats 0..{FAST_ONLY_LENGTH - 1:,}, seats {fi} and {fj} are only {sci(fast_dist)} apart in those two
    columns, because {fj - fi} radians is {turns:.5f} turns, almost a whole number. The slower
    columns tell such seats apart.""",
    )

    _heatmap(ctx)


def _heatmap(ctx, seats: int = 200) -> None:
    prose(
        ctx,
        f"""Figure [cyan]sinusoidal_heatmap.png[/] draws the table for seats 0-{seats - 1}:
    on the left every value as a colour (fast columns flicker, slow ones barely change), on the
    right three single columns, fast, medium and slow, as curves.""",
    )
    pe = sinusoidal_table(seats, D_MODEL).numpy()  # (seats, D_MODEL)
    fig = new_figure(11, 4.6)
    left, right = fig.subplots(1, 2, width_ratios=(1.35, 1))
    image = left.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    left.set_xlabel("dimension (even: sin, odd: cos)")
    left.set_ylabel("position (seat)")
    left.set_title(f"Sinusoidal table, d_model={D_MODEL}, base 10000")
    for col, label, color in ((0, "fast", "black"), (D_MODEL - 2, "slow", "darkgreen")):
        left.axvline(col, color=color, linewidth=1.2, linestyle="--")
        left.text(
            col + (3 if col == 0 else -3),
            seats * 0.5,
            f"{label} wave\n(column {col})",
            ha="left" if col == 0 else "right",
            va="center",
            fontsize=9,
            color=color,
            bbox=dict(boxstyle="round", facecolor="white", alpha=0.85),
        )
    fig.colorbar(image, ax=left, shrink=0.85)
    freqs = sinusoidal_frequencies(D_MODEL).tolist()
    for pair, style in ((0, "-"), (24, "-."), (D_MODEL // 2 - 1, "--")):
        wavelength = 2 * math.pi / freqs[pair]
        right.plot(
            pe[:, 2 * pair], style, linewidth=1.2, label=f"column {2 * pair}: wavelength {wavelength:,.0f} seats"
        )
    right.set_xlabel("position (seat)")
    right.set_ylabel("value")
    right.set_ylim(-1.1, 1.1)
    right.set_title("Three sine columns: fast, medium, slow")
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    save(ctx, fig, "sinusoidal_heatmap")


def fingerprint(ctx) -> None:
    plain(
        ctx,
        """Reading the waves at seats 0 to 3 gives each seat its own short list of numbers, a
    fingerprint that no other seat shares.""",
    )
    pe = sinusoidal_table(4, 4, dtype=torch.float64)  # (4 seats, 4 columns)
    prose(
        ctx,
        """The lesson shows a "wave fingerprint" for seats 0-3 with a fast, a medium and a
    slow wave. Those numbers are the first three columns of the sinusoidal table with d_model = 4
    (built here with [cyan]posenc.sinusoidal_table(4, 4)[/]). Column 0 is sin(pos), column 1 cos(pos),
    column 2 sin(pos/100) and column 3 cos(pos/100):""",
    )
    t = table("seat", "col 0", "col 1", "col 2", "col 3", "lesson (fast medium slow)", "same?")
    for seat in range(4):
        values = pe[seat].tolist()
        for col, name in enumerate(("fast", "medium", "slow", "col3")):
            ctx.record(f"fingerprint.{name}.{seat}", values[col])
        lesson = LESSON_FINGERPRINT[seat]
        same = all(round(values[c], 2) == lesson[c] for c in range(3))
        t.add_row(
            f"{seat} {LESSON_WORDS[seat]}",
            *(signed(v) for v in values),
            " ".join(signed(v) for v in lesson),
            verdict(same, "yes", "no"),
        )
    ctx.console.print(t)
    period = ctx.record("fingerprint.slow_divisor", float(1 / sinusoidal_frequencies(4)[1]))
    slow_step = ctx.record("fingerprint.slow_step", float(pe[3, 2] - pe[0, 2]) / 3)  # mean rise, seats 0-3
    paper = sinusoidal_frequencies(512)  # (256,) one per pair
    spread = ctx.record("fingerprint.speed_ratio_512", float(1 / paper[-1]))
    between = ctx.record("fingerprint.pairs_between_512", len(paper) - 2)
    prose(
        ctx,
        f"""Two honest remarks. The "medium" wave is not a slower wave: it is column 1, the
    cosine partner of the fast sine, turning at exactly the same speed (it just starts at 1 instead
    of 0). With d_model = 4 there are only two speeds, 1 and 1/{period:.0f} (10000^(2/4) =
    {period:.0f}), so the "slow" wave is column 2, sin(pos/{period:.0f}), whose values grow by
    about {slow_step:.2f} per seat. In the paper's model (d_model = 512) the slowest pair turns
    {spread:,.0f} times more slowly than the fastest, and the {between} pairs in between fill in the
    speeds.""",
    )
