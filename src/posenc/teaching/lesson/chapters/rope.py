"""Chapter "RoPE: turn, don't add": RoPE turns queries and keys by an angle proportional to their seat.

Every number goes through the library's own rotation (:mod:`posenc.teaching.lesson.rotation`: one 2-D pair,
:func:`posenc.rope.apply_rotary` with tables from :func:`posenc.rope.rope_cos_sin`) and the
:class:`posenc.RotaryEmbedding` module, so each can be checked by hand.
"""

from __future__ import annotations

import math
from typing import Dict, Tuple

import torch

from ....rope import RotaryEmbedding
from ....rope.apply import apply_rotary
from ....rope.layout import permute_for_interleaved
from ....rope.tables import rope_cos_sin, rope_inv_freq
from ..formats import minus, signed
from ..prose import Block, see_also
from ..rotation import (
    DIAL_THETA,
    KEY,
    QUERY,
    SEAT_PAIRS,
    THETA,
    hand_angles,
    order_turn,
    pair_score,
    rotate_2d,
    turn_dials,
)
from ..vectors import example_vector, half_pairs, rotate_at, wrap_degrees
from ._check import Check, Evidence
from ._figures import Figure
from ._ranges import Range, checked

SENTENCES = {"A": ("The", "dog", "bit", "man"), "B": ("The", "man", "bit", "dog")}
#: A full-size head for the module check.
HEAD_DIM = 64


def sign_check(theta: float = DIAL_THETA) -> torch.Tensor:
    """(1, 0) turned by one seat of ``theta`` with the library's rotation, float64 shape (2,).

    With RoPE's matrix ``(a, b) -> (a cos - b sin, a sin + b cos)`` a positive angle moves (1, 0) to
    (cos, sin): its second coordinate is positive, a counter-clockwise turn on ordinary axes.
    """
    return rotate_2d(torch.tensor([[1.0, 0.0]]), [1], theta)[0]


def _seats(pairs) -> str:
    """``[(1, 3), (101, 103)]`` -> ``"seats 1 vs 3 and 101 vs 103"``."""
    text = [f"{m:,} vs {n:,}" for m, n in pairs]
    return "seats " + (", ".join(text[:-1]) + " and " + text[-1] if len(text) > 1 else text[0])


def distance_verdict(scores: dict) -> tuple[str, dict]:
    """The sentence under the score table from ``scores`` (``"rope.demo.score.M.N"`` -> score, to 5
    decimals), and the facts it rests on.

    Pairs at the first pair's gap should score the same, every other gap differently; the sentence
    says which pairs did, and the closing claim is made only when all of them did.
    """
    first = SEAT_PAIRS[0]
    near = round(scores[f"rope.demo.score.{first[0]}.{first[1]}"], 5)
    gap = first[1] - first[0]
    same = [p for p in SEAT_PAIRS if round(scores[f"rope.demo.score.{p[0]}.{p[1]}"], 5) == near]
    other = [p for p in SEAT_PAIRS if p not in same]
    held = all(n - m == gap for m, n in same) and all(n - m != gap for m, n in other)
    facts = {
        "rope.demo.same_score_pairs": [list(p) for p in same],
        "rope.demo.other_score_pairs": [list(p) for p in other],
        "rope.demo.distance_only": held,
    }
    text = f"{_seats(same).capitalize()} give the same score"
    if other:
        gaps = sorted({n - m for m, n in other})
        apart = " or ".join(str(g) for g in gaps)
        text += f"; {_seats(other)}, {apart} apart, do not"
    if held:
        return text + ". Attention reads distance, not address.", facts
    return text + (
        f". **That is NOT as claimed:** every pair {gap} apart should score the same and every other gap differently."
    ), facts


def numbers() -> dict:
    """The one-pair scores, a full head through the module, the sign of a turn and the clock dials."""
    n: dict = {}
    for m, key_seat in SEAT_PAIRS:
        n[f"rope.demo.score.{m}.{key_seat}"] = pair_score(QUERY, KEY, m, key_seat)
    n["rope.demo.score_near"] = n["rope.demo.score.1.3"]
    n["rope.demo.score_far"] = n["rope.demo.score.101.103"]
    n.update(distance_verdict(n)[1])
    rope = RotaryEmbedding(HEAD_DIM)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 1, HEAD_DIM, generator=g)  # (batch, heads, seq, head_dim)
    k = torch.randn(1, 1, 1, HEAD_DIM, generator=g)
    scores: dict = {}
    for start in (0, 1_000, 100_000):
        q_rot, _ = rope(q, q, position_ids=torch.tensor([[start + 5]]))
        k_rot, _ = rope(k, k, position_ids=torch.tensor([[start + 2]]))
        scores[start] = float((q_rot * k_rot).sum())
    n["rope.module.scores"] = scores
    n["rope.module.spread"] = max(scores.values()) - min(scores.values())
    moved = sign_check()
    n["rope.sign.turned_x"], n["rope.sign.turned_y"] = float(moved[0]), float(moved[1])
    n["rope.sign.counter_clockwise"] = bool(moved[1] > 0)
    angles = hand_angles(list(range(4)))
    for seat in range(4):
        n[f"rope.dial.{seat}"] = float(angles[seat])
    n["rope.dial.step_degrees"] = math.degrees(DIAL_THETA)
    for name, words in SENTENCES.items():
        dog, bit = words.index("dog"), words.index("bit")
        n[f"rope.relative.{name}"] = wrap_degrees(float(angles[bit] - angles[dog]))
    for sentence, name in enumerate(SENTENCES):  # the who-bit-whom figure's own function, so both print one score
        n[f"rope.relative.score.{name}"] = word_order(sentence, ORDER_DEGREES)["score_rope"]
    return n


def prose(n: dict) -> list[Block]:
    """The chapter's text with the numbers of :func:`numbers`."""
    first = n["rope.demo.score.1.3"]
    score_rows: list[tuple[str, ...]] = [
        ("query seat m", "key seat n", "gap m − n", "score q.k", "equals seats 1 vs 3?")
    ]
    for m, k in SEAT_PAIRS:
        score = n[f"rope.demo.score.{m}.{k}"]
        same = "yes, to 5 decimals" if round(score, 5) == round(first, 5) else "no"
        equal = "" if (m, k) == SEAT_PAIRS[0] else same
        score_rows.append((str(m), str(k), minus(f"{m - k:d}"), f"{score:.5f}", equal))
    angles = [n[f"rope.dial.{seat}"] for seat in range(4)]
    sentence_rows: list[tuple[str, ...]] = [("sentence", "dog at", "bit at", "dog's hand", "bit's hand", "dog to bit")]
    for name, words in SENTENCES.items():
        dog, bit = words.index("dog"), words.index("bit")
        sentence_rows.append(
            (
                f"{name}: {' '.join(words)}",
                str(dog),
                str(bit),
                f"{angles[dog]:.0f}°",
                f"{angles[bit]:.0f}°",
                f"{signed(n[f'rope.relative.{name}'], 0)}°",
            )
        )
    scores = n["rope.module.scores"]
    step = n["rope.dial.step_degrees"]
    verdict, _ = distance_verdict(n)
    return [
        Block(
            "plain",
            """Modern models add nothing to the word. Inside attention they turn small pieces of each query and
            key like clock hands, further the later the word sits, so that only the gap between two words changes
            their match.""",
            "intro",
        ),
        Block(
            "p",
            """Llama 3, Mistral, DeepSeek, Gemma and Qwen add nothing to the word vectors. When you read, what
            matters is rarely that "blue sky" sits at words 10 and 11 rather than 510 and 511; what matters is
            that the two words are neighbours. RoPE (rotary position embedding, Su et al. 2021) builds exactly that
            in. Inside every attention layer it cuts each query and key into pairs of numbers and *turns* each pair
            by an angle m·θ proportional to the seat m:""",
            "intro",
        ),
        Block("formula", "(a′, b′) = (a·cos mθ − b·sin mθ, a·sin mθ + b·cos mθ)", "intro"),
        Block("h3", "The 2×2 matrix at work", "intro"),
        Block(
            "caption",
            """Drag the grey tip (or focus it and use the arrow keys) to choose the vector (a, b). The dashed grey
            arrow is the vector before the turn, the blue one after it; the arc is the turn *m*·θ, computed by
            posenc's `apply_rotary`.""",
            "rot-caption",
        ),
        Block("h3", "Which way is positive?", "sign"),
        Block(
            "p",
            f"""Everywhere in posenc (the tour, the explorer, the figures) a positive angle turns counter-clockwise,
            as in school geometry: RoPE's 2x2 matrix sends (a, b) to (a cos − b sin, a sin + b cos), and posenc's
            `apply_rotary` turns (1, 0) by one seat of {step:.0f} degrees to ({signed(n["rope.sign.turned_x"], 3)},
            {signed(n["rope.sign.turned_y"], 3)}), up and to the left of where it started. Explanations of RoPE often
            say the hands turn "clockwise", as a clock's do (many explanations call the same +{step:.0f} degree step
            so): that is the same rotation seen from behind the page, or with θ made negative. Nothing in attention
            depends on the choice, as long as every token turns the same way: what attention uses is the signed
            angle *between* two hands, positive when the query sits after the key.""",
            "sign",
        ),
        Block("h3", "Every pair is a clock hand", "dials"),
        Block(
            "p",
            """A query of width 8 has four pairs, four hands. Pair i turns θᵢ = 10000^(−2i/d) radians per seat,
            fast to slow as in [chapter 5](#clock-hands). The ghost hand is the pair before the turn; the solid
            hand is after it.""",
            "dials",
        ),
        Block(
            "try",
            """drag *move both by*: every hand turns, yet the score under the dials stays the same to the last
            digit.""",
            "dials-try",
        ),
        Block(
            "caption",
            """Top row: the query's pairs at seat m plus the move; bottom row: the key's at seat n plus the move.
            Dashed grey: before; solid: after; shaded: the turn (shown modulo 360°). The *gap* is m − n, the
            query's seat minus the key's, everywhere in posenc.""",
            "rope-caption",
        ),
        Block("h3", "Why only the gap counts", "gap"),
        Block(
            "p",
            """Attention scores a query against a key with a dot product. Turning by mθ and then comparing with a
            key turned by nθ is the same as leaving the query alone and turning the key back by the gap (m − n)θ,
            because turning back by mθ undoes part of the key's turn:""",
            "gap",
        ),
        Block("h3", "Two ways to cut a head into pairs", "pairs"),
        Block(
            "p",
            """Which two numbers form a pair is a convention, and both are in use. *Half-split* (GPT-NeoX, Hugging
            Face, and posenc's default, `rotate_half`) pairs number i with number i + d/2; *interleaved* (GPT-J,
            Meta's Llama code) pairs neighbours, 2i with 2i + 1. The turn is the same; only the places of the
            numbers differ, so a checkpoint moves from one to the other by reordering the rows of its query and key
            weights (`posenc.rope.layout.permute_for_interleaved`). Loading one convention's weights with the
            other's code scrambles every score without any error.""",
            "pairs",
        ),
        Block("h3", "The same turn as complex numbers", "pairs"),
        Block(
            "p",
            """The turn is not a guess; it is what the wish for a score that sees only the gap leads to. Ask for
            a way f to write seat m into a query q (and n into a key k) such that""",
            "pairs",
        ),
        Block("formula", "⟨f(q, m), f(k, n)⟩ = g(q, k, m − n)", "pairs"),
        Block(
            "p",
            """Read a pair (a, b) as the complex number a + ib; the dot product of two pairs is then
            Re(q · conj(k)). Multiplying by e^(imθ) = cos mθ + i sin mθ does what is asked, since
            Re(q e^(imθ) · conj(k e^(inθ))) = Re(q · conj(k) · e^(i(m − n)θ)): the seats meet only as the gap.
            That multiplication is the 2×2 matrix above in one symbol, and it keeps every length, so the seat
            changes where a query points, never how long it is (Su et al. 2021, section 3.2). Over a whole head
            the score is Re Σᵢ qᵢ · conj(kᵢ) · e^(i(m − n)θᵢ).""",
            "pairs",
        ),
        Block(
            "caption",
            """The eight numbers of one head and the pairs each convention turns together (the arcs), and one query
            and key (seats m + move and n + move of the dials above) scored four ways by posenc: half-split,
            interleaved after reordering, as complex numbers, and from the gap alone.""",
            "pairs-caption",
        ),
        Block("h3", "Who bit whom?", "order"),
        Block(
            "p",
            """One pair turning 30° per seat, the picture explanations of RoPE usually draw: seats 0, 1, 2, 3 point
            at 0°, 30°, 60°, 90°.
            In sentence A, “the dog bit man”, “dog” sits at seat 1 (30°) and “bit” at seat 2 (60°): from “dog” to
            “bit” the hand turns +30°. In sentence B, “the man bit dog”, “dog” moves to seat 3 (90°), behind “bit”,
            and the turn from “dog” to “bit” is −30°. The words are the same; only the sign of the angle between
            them changed, and attention sees it. Without positions it would not.""",
            "order",
        ),
        Block(
            "caption",
            """One dial per seat: each word's hand at seat × θ, counter-clockwise from 3 o'clock (dashed: the
            unturned hand at 0°). "dog" is drawn in the key's colour and "bit" in the query's.""",
            "order-caption",
        ),
        Block(
            "try",
            """press *Show sentence B* and watch the turn from “dog” to “bit” go from +30° to −30°.""",
            "after",
        ),
        Block("h3", "Measured: one pair at four pairs of seats, and a full head", "measured"),
        Block(
            "p",
            f"""Modern LLMs turn pair i of the token at seat m by the angle m·θᵢ. The score of query seat m against
            key seat n is then a function of m − n alone: turning both by the same extra angle leaves their dot
            product unchanged. The lesson's example: one pair, theta = {THETA} rad, q = {list(QUERY)},
            k = {list(KEY)}, turned by posenc's `apply_rotary`.""",
            "measured",
        ),
        Block("table", "The score of one pair at four pairs of seats", "measured", rows=tuple(score_rows)),
        Block("p", verdict, "measured"),
        Block(
            "p",
            f"""The same holds for a full {HEAD_DIM}-wide head with {HEAD_DIM // 2} pairs turning at
            {HEAD_DIM // 2} speeds, through the `posenc.RotaryEmbedding` module: a random query 3 seats after a
            random key scores {minus(f"{scores[0]:.6f}")} at seats 5/2, {minus(f"{scores[1_000]:.6f}")} at
            1005/1002 and {minus(f"{scores[100_000]:.6f}")} at 100005/100002 (spread
            {n["rope.module.spread"]:.2e}, float32 rounding).""",
            "measured",
        ),
        Block(
            "p",
            f"""The clock picture: with θ = {step:.0f}° per seat, RoPE turns the vector (1, 0), which points at
            0°, to {", ".join(f"{a:.0f}°" for a in angles)} at seats 0–3.""",
            "measured",
        ),
        Block("table", "Who bit whom, on the clock", "measured", rows=tuple(sentence_rows)),
        Block(
            "p",
            f"""In sentence A “dog” sits one seat before “bit”, so the turn from dog to bit is
            {signed(n["rope.relative.A"], 0)}°; in sentence B it sits one seat after, and the turn flips to
            {signed(n["rope.relative.B"], 0)}°. The words are the same, only the sign of the angle between them
            changed, and the attention score follows: with “bit” querying q = {list(QUERY)} and “dog” keyed
            k = {list(KEY)}, the score is {n["rope.relative.score.A"]:.5f} in A and
            {n["rope.relative.score.B"]:.5f} in B, the score the “Who bit whom?” dials print under them for the
            sentence they show. Values are never turned: they carry what a token says, not
            where it is.""",
            "measured",
        ),
        Block(
            "tour-figure",
            """Figure rope_clock_dials.png, written by `posenc tour`, draws both sentences: each word's hand,
            the unturned hand at 0 degrees as a faint grey line, and the turn between them shaded.""",
            "measured",
        ),
        see_also("Workbench: [RoPE clock dials](#dials) at any head size, and [score against distance](#scores)."),
    ]


# -- the figures: a turned vector, the RoPE dials, the two pair layouts, who bit whom --
#: parameter -> (minimum, maximum, default, help) of the figures (the explorer's API publishes it)
FIGURE_RANGES: Dict[str, Range] = {
    "a": (-10.0, 10.0, 1.0, "first number of the 2-D vector"),
    "b": (-10.0, 10.0, 0.5, "second number of the 2-D vector"),
    "rot_seat": (0, 1000, 1, "seat m of the rotated vector"),
    "theta_deg": (-180.0, 180.0, 30.0, "theta, the turn per seat, in degrees"),
    "rope_head_dim": (2, 16, 8, "features per head (even; the lesson draws every pair)"),
    "m": (0, 100_000, 3, "seat m of the query"),
    "n": (0, 100_000, 1, "seat n of the key"),
    "shift": (0, 100_000, 100, "amount every seat is moved by"),
    "order_deg": (1.0, 179.0, 30.0, "turn per seat of the one-pair clock, in degrees"),
    "order_sentence": (0, 1, 0, "0: the dog bit the man; 1: swapped"),
}


#: relative size under which a figure's float64 result is rounding, drawn and printed as 0 (the cosine of
#: 90° computed from a rounded pi is 6.1e-17, not 0)
ROUNDING = 1e-12


def _rounding_as_zero(value: float, scale: float = 1.0) -> float:
    return 0.0 if abs(value) < ROUNDING * max(scale, 1.0) else value


def rotate_vector(a: float, b: float, seat: int, theta_deg: float) -> dict:
    """Turn the 2-D vector (a, b) by seat x theta with posenc's apply_rotary (one pair).

    Entries within float64 rounding of zero (under :data:`ROUNDING` times the vector's length, or times 1
    for the matrix) are returned as 0: at a turn of 90° the matrix is [[0, −1], [1, 0]], as the text says.
    """
    a, b = checked(FIGURE_RANGES, "a", a), checked(FIGURE_RANGES, "b", b)
    checked(FIGURE_RANGES, "rot_seat", seat)
    checked(FIGURE_RANGES, "theta_deg", theta_deg)
    inv_freq = torch.tensor([math.radians(theta_deg)], dtype=torch.float64)
    turned = rotate_at(torch.tensor([a, b], dtype=torch.float64), [seat], inv_freq)[0]
    rotated = [_rounding_as_zero(v, math.hypot(a, b)) for v in turned.tolist()]
    angle = seat * math.radians(theta_deg)
    c, s = _rounding_as_zero(math.cos(angle)), _rounding_as_zero(math.sin(angle))
    return {
        "a": a,
        "b": b,
        "seat": seat,
        "theta_deg": theta_deg,
        "angle": angle,
        "angle_deg": seat * theta_deg,
        "matrix": [[c, -s + 0.0], [s, c]],  # + 0.0: no -0.0 at a half turn
        "rotated": rotated,
        "length": math.hypot(a, b),
        "rotated_length": float(turned.norm()),
    }


#: the seeds of the clock's query and key (:func:`posenc.teaching.lesson.vectors.example_vector`)
CLOCK_SEEDS = (1, 2)


def clock_vectors(head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The clock's query and key, each (head_dim,) float64."""
    return example_vector(head_dim, CLOCK_SEEDS[0]), example_vector(head_dim, CLOCK_SEEDS[1])


def rope_clock(head_dim: int, m: int, n: int, shift: int) -> dict:
    """Every pair of a query at seat m and a key at seat n, both moved by ``shift``: the vectors
    before (the ghost hands) and after the turn, the turn itself, and the relative-angle proof.

    The gap is ``m - n``, the query's seat minus the key's (positive when the key comes first, as in
    a decoder), the same everywhere in posenc. The proof: (R(m t) q) . (R(n t) k) = q . R(-(m - n) t) k,
    because R(m t)^T R(n t) = R((n - m) t). Both sides are computed, for the seats as given and for
    both moved by ``shift``; the ``*_moved`` fields are what the dials draw.
    """
    checked(FIGURE_RANGES, "rope_head_dim", head_dim, argument="head_dim", even=True)
    for name, value in (("m", m), ("n", n), ("shift", shift)):
        checked(FIGURE_RANGES, name, value)
    inv_freq = rope_inv_freq(head_dim, 10000.0)  # (d/2,)
    q, k = clock_vectors(head_dim)
    turn = turn_dials(q, k, m, n, shift, inv_freq)  # the workbench's dials compute the same
    q_pairs, k_pairs = half_pairs(q).tolist(), half_pairs(k).tolist()  # (d/2) x [a, b]
    q_rot, k_rot = [half_pairs(v).tolist() for v in turn.q_rot], [half_pairs(v).tolist() for v in turn.k_rot]
    pairs = []
    for i in range(head_dim // 2):
        theta = float(inv_freq[i])
        pairs.append(
            {
                "pair": i,
                "theta": theta,
                "theta_deg": math.degrees(theta),
                "q": q_pairs[i],
                "k": k_pairs[i],
                "q_rotated": q_rot[0][i],
                "k_rotated": k_rot[0][i],
                "q_moved": q_rot[1][i],
                "k_moved": k_rot[1][i],
                "q_turn_deg": math.degrees(m * theta),
                "k_turn_deg": math.degrees(n * theta),
                "q_turn_moved_deg": math.degrees((m + shift) * theta),
                "k_turn_moved_deg": math.degrees((n + shift) * theta),
                "gap_deg": math.degrees(float(turn.gap_angle[i])),
            }
        )
    return {
        "head_dim": head_dim,
        "m": m,
        "n": n,
        "gap": m - n,
        "shift": shift,
        "pairs": pairs,
        "score": turn.scores[0],
        "score_shifted": turn.scores[1],
        "score_gap_only": turn.score_gap_only,
        "score_unrotated": turn.score_unrotated,
    }


#: the two sentences: "dog" one seat before "bit", then one seat after it
ORDER_SENTENCES = ("the dog bit man", "the man bit dog")
#: the usual clock: one pair turning 30 degrees per seat
ORDER_DEGREES = 30.0
#: the clock's 2-D vectors: "bit" as the query, "dog" as the key, the lesson's example pair
ORDER_VECTORS = (QUERY, KEY)


def pair_layouts(m: int, n: int) -> dict:
    """The two ways to cut an 8-wide head into pairs, and RoPE read as complex numbers.

    Half-split (GPT-NeoX, Hugging Face, posenc's default) pairs feature ``i`` with ``i + 4``;
    interleaved (GPT-J, Meta's Llama code) pairs ``2i`` with ``2i + 1``. The same query and key give
    the same score under both once the projection rows are reordered
    (:func:`posenc.rope.layout.permute_for_interleaved`). Read pair ``i`` as the complex number
    ``a + ib``: RoPE multiplies it by ``e^{i m theta_i}``, and the score is the real part of
    ``sum q_i conj(k_i) e^{i (m - n) theta_i}``, the gap alone.

    The query and key are the dials' (:func:`clock_vectors` at width 8), so at the dials' seats (m and n
    plus the move) the half-split score is the score printed under the dials.
    """
    checked(FIGURE_RANGES, "m", m)
    checked(FIGURE_RANGES, "n", n)
    head_dim, half = 8, 4
    q, k = clock_vectors(head_dim)
    inv_freq = rope_inv_freq(head_dim, 10000.0)  # (4,)
    cos, sin = rope_cos_sin(torch.tensor([m, n]), inv_freq, dtype=torch.float64)  # (2, 4)

    def turned(vec: torch.Tensor, row: int, layout: str) -> torch.Tensor:
        x = vec.view(1, 1, 1, head_dim)
        return apply_rotary(x, x, cos[row : row + 1], sin[row : row + 1], layout=layout)[0].view(head_dim)

    score_half = float(turned(q, 0, "half") @ turned(k, 1, "half"))
    q_int, k_int = (permute_for_interleaved(v, n_heads=1) for v in (q, k))
    score_interleaved = float(turned(q_int, 0, "interleaved") @ turned(k_int, 1, "interleaved"))
    # the complex view: pair i of the half-split layout is q[i] + i q[i + 4]
    zq, zk = (torch.complex(v[:half], v[half:]) for v in (q, k))
    spin_m, spin_n = (torch.polar(torch.ones(half, dtype=torch.float64), p * inv_freq) for p in (m, n))
    zq_turned, zk_turned = zq * spin_m, zk * spin_n
    rq = turned(q, 0, "half")
    complex_vs_matrix = float((torch.complex(rq[:half], rq[half:]) - zq_turned).abs().max())
    score_complex = float((zq_turned * zk_turned.conj()).real.sum())
    gap_only = torch.polar(torch.ones(half, dtype=torch.float64), (m - n) * inv_freq)
    score_gap = float((zq * zk.conj() * gap_only).real.sum())
    return {
        "m": m,
        "n": n,
        "head_dim": head_dim,
        "pairs_half": [[i, i + half] for i in range(half)],
        "pairs_interleaved": [[2 * i, 2 * i + 1] for i in range(half)],
        "score_half": score_half,
        "score_interleaved": score_interleaved,
        "complex_vs_matrix": complex_vs_matrix,
        "score_complex": score_complex,
        "score_gap_only": score_gap,
        "q_complex": [[float(z.real), float(z.imag)] for z in zq],
        "q_turned_complex": [[float(z.real), float(z.imag)] for z in zq_turned],
        "theta": inv_freq.tolist(),
    }


def word_order(sentence: int, degrees: float) -> dict:
    """The dog/man clock: every word of sentence A (0) or B (1) turned seat x degrees, and the turn
    from "dog" to "bit" (angle of "bit" minus angle of "dog", counter-clockwise positive): with the
    usual 30 degrees it is +30 in A and -30 in B.

    The scores come from posenc's apply_rotary on one pair: a fixed "bit" query against a fixed
    "dog" key at their seats, beside the score without positions.
    """
    checked(FIGURE_RANGES, "order_sentence", sentence, argument="sentence")
    checked(FIGURE_RANGES, "order_deg", degrees)
    words = ORDER_SENTENCES[sentence].split()
    dog, bit = words.index("dog"), words.index("bit")
    q, k = (torch.tensor(v, dtype=torch.float64) for v in ORDER_VECTORS)
    turn = order_turn(q, k, bit, dog, degrees)  # the workbench's word-order view computes the same
    return {
        "sentence": sentence,
        "text": ORDER_SENTENCES[sentence],
        "words": words,
        "degrees": degrees,
        "angles_deg": [i * degrees for i in range(len(words))],
        "dog_seat": dog,
        "bit_seat": bit,
        "turn_dog_to_bit_deg": turn["relative_angle_deg"],
        "score_rope": turn["score_rope"],
        "score_nope": turn["score_nope"],
    }


#: route -> figure function (the explorer serves each at /api/lesson/<route>)
FIGURES = {
    "rotate": Figure(rotate_vector, seat="rot_seat"),
    "rope": Figure(rope_clock, head_dim="rope_head_dim"),
    "order": Figure(word_order, sentence="order_sentence", degrees="order_deg"),
    "pairs": pair_layouts,
}


# -- the knowledge checks the manifest lists under this chapter (the quiz collects them) --
def _relative() -> Evidence:
    head_dim, base = 16, 10000.0
    inv_freq = rope_inv_freq(head_dim, base)
    q, k = example_vector(head_dim, 1), example_vector(head_dim, 2)
    near = float(rotate_at(q, [12], inv_freq)[0] @ rotate_at(k, [10], inv_freq)[0])
    far = float(rotate_at(q, [512], inv_freq)[0] @ rotate_at(k, [510], inv_freq)[0])
    angle = math.degrees(2 * float(inv_freq[0]))
    return (
        [
            f"Fastest pair: theta = {float(inv_freq[0]):.4f} rad per seat, so both gaps are "
            f"2*theta = {angle:.2f} degrees.",
            f"Score with the query at 12 and the key at 10: {near:.12f}.",
            f"Score with the query at 512 and the key at 510: {far:.12f} "
            f"(difference {abs(near - far):.1e}, float64 rounding).",
        ],
        {"score_near": near, "score_far": far, "two_theta_deg": angle},
    )


def _qk_only() -> Evidence:
    from ..mistakes import rotated_values_change

    shift = 37
    change = rotated_values_change(shift)
    seq, plain, rotated = change["seq"], change["qk_only"], change["with_v"]
    return (
        [
            f"The same {seq} tokens placed at seats 0..{seq - 1} and again at {shift}..{shift + seq - 1}, "
            "through posenc's attention block.",
            f"q and k rotated, v untouched: the output moves by {plain:.1e} (rounding).",
            f"v rotated too: it moves by {rotated:.3f}, the output now depends on where the phrase sits.",
        ],
        {"change_qk_only": plain, "change_with_v": rotated, "shift": shift},
    )


CHECKS: Tuple[Check, ...] = (
    Check(
        "relative",
        "RoPE",
        "With RoPE, a key at seat 10 and a query at seat 12 are two seats apart. The same two words "
        "later sit at 510 and 512. How do their scores compare?",
        (
            "Identical: in every pair the angle between them is 2 * theta in both places.",
            "The later score is smaller because the angles are 50 times larger.",
            "They agree only for the slowest pairs.",
        ),
        0,
        (
            "Both vectors turned by the same extra amount, so the angle between them, and the "
            "dot product, is unchanged.",
            "Each vector turns further, but by the same amount; the gap between them is what counts.",
            "Every pair keeps its gap, fast or slow, so the whole score is the same.",
        ),
        _relative,
    ),
    Check(
        "qk-only",
        "RoPE",
        "RoPE rotates queries and keys. Why are the values left alone?",
        (
            "Rotating values would cost too much memory.",
            "Only the score needs position, and q.k depends only on the distance; rotated values would "
            "make what a token passes on depend on its absolute seat.",
            "The output projection undoes any rotation of the values anyway.",
        ),
        1,
        (
            "Cost is not the reason: a rotation of v costs the same as a rotation of k.",
            "Rotated values bring absolute position back into the output.",
            "The output projection is one fixed matrix; it cannot undo a rotation that varies by seat.",
        ),
        _qk_only,
    ),
)
