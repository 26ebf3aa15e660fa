"""Knowledge checks: short questions whose answers are explained by a computation run on demand.

Each check has a prompt, a few choices, the index of the right one, a sentence of feedback per
choice, and a function that runs posenc to produce the evidence. The page never learns the right
answer in advance: it sends the reader's choice to ``GET /api/quiz/{id}/answer?choice=N`` and shows
the feedback together with the numbers that were just computed.
"""

from __future__ import annotations

import math
from typing import Dict, List, Tuple

import torch

from .._checks import check_int
from ..lesson.chapters import alibi_penalty, clock_hands, learned_tables, rope, stretching_rope, word_plus_position
from ..lesson.chapters._check import Check, Evidence


# -- evidence ---------------------------------------------------------------------------------------
def _relative() -> Evidence:
    from ..lesson.vectors import example_vector, rotate_at
    from ..rope.tables import rope_inv_freq

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


def _bag_of_words() -> Evidence:
    from ..lesson.vectors import word_vector
    from ..model import Block
    from ..schemes import NoPE
    from ..sinusoidal import SinusoidalPositionalEncoding

    d_model = 16
    with torch.random.fork_rng(devices=[]):  # fixed weights without touching the global RNG
        torch.manual_seed(0)
        block = Block(d_model, n_heads=2).double().eval()
    order_a, order_b = ["dog", "bites", "man"], ["man", "bites", "dog"]

    def outputs(words, scheme):
        x = torch.stack([word_vector(w, d_model) for w in words]).unsqueeze(0)  # (1, 3, d)
        pos = torch.arange(len(words)).unsqueeze(0)
        with torch.no_grad():
            return block(scheme.embed(x, pos), scheme, pos, causal=False)[0]

    nope, sinus = NoPE(), SinusoidalPositionalEncoding(d_model).double()
    a, b = outputs(order_a, nope), outputs(order_b, nope)
    same = float((a[0] - b[2]).abs().max())  # "dog" in each sentence
    a_pe, b_pe = outputs(order_a, sinus), outputs(order_b, sinus)
    differ = float((a_pe[0] - b_pe[2]).abs().max())
    return (
        [
            f"A posenc attention block with no positions, no causal mask: the vector out for "
            f'"dog" differs between the two sentences by {same:.1e}.',
            f"Add sinusoidal positions and it differs by {differ:.3f}.",
        ],
        {"nope_difference": same, "sinusoidal_difference": differ},
    )


def _precision() -> Evidence:
    from ..lesson.vectors import angle_errors
    from ..rope.tables import rope_inv_freq

    inv_freq = rope_inv_freq(128, 10000.0)
    errors = angle_errors(torch.tensor([1_000_000]), inv_freq)
    naive = float(errors["float32"].max())
    exact = float(errors["posenc"].max())
    return (
        [
            f"At position 1,000,000 the angle pos*theta formed in float32 is off by up to {naive:.4f} rad.",
            f"posenc's float32 tables (angles formed in float64 first) are off by at most {exact:.1e} rad.",
        ],
        {"float32": naive, "posenc": exact},
    )


_HERE: Tuple[Check, ...] = (
    Check(
        "bag-of-words",
        "why positions",
        'Attention with no position information and no causal mask reads "dog bites man" and '
        '"man bites dog". Does the vector it produces for "dog" differ?',
        (
            "No: the same words give the same outputs, just listed in another order.",
            "Yes: the softmax weighs earlier words more.",
            "Yes: the query projection depends on where a word sits.",
        ),
        0,
        (
            "Without positions attention sees a bag of words.",
            "The softmax only sees scores, and the scores only see the words.",
            "The projections are the same matrix for every seat.",
        ),
        _bag_of_words,
    ),
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
        "precision",
        "precision",
        "Why does posenc form RoPE angles in float64 before building float32 tables?",
        (
            "Because float64 kernels are faster.",
            "It only matters for bfloat16 models.",
            "At positions near a million, position * theta in float32 is off by hundredths of a radian.",
        ),
        2,
        (
            "The rotation itself still runs in the model's dtype; only the table is built in float64, once.",
            "float32 itself is not precise enough for the product at long positions.",
            "Float32 has a spacing of 0.0625 near a million; float64 keeps the angle exact.",
        ),
        _precision,
    ),
)

#: the checks written in their chapter modules (posenc.lesson.chapters), and those still written here
_WRITTEN = {
    check.id: check
    for chapter in (word_plus_position, clock_hands, learned_tables, rope, stretching_rope, alibi_penalty)
    for check in chapter.CHECKS
}
_WRITTEN.update({check.id: check for check in _HERE})
#: every check, in the order the page has always listed them
ORDER = (
    "bag-of-words",
    "added",
    "learned-limit",
    "relative",
    "qk-only",
    "llama3-bands",
    "fast-columns",
    "alibi-head0",
    "precision",
    "linear-vs-ntk",
)
CHECKS: Tuple[Check, ...] = tuple(_WRITTEN[check_id] for check_id in ORDER)

BY_ID: Dict[str, Check] = {check.id: check for check in CHECKS}


def questions() -> List[dict]:
    return [check.public() for check in CHECKS]


def answer(check_id: str, choice: int) -> dict:
    """Feedback for ``choice`` on check ``check_id``, with evidence computed now."""
    if check_id not in BY_ID:
        raise ValueError(f"check id must be one of {sorted(BY_ID)}, got {check_id!r}")
    check = BY_ID[check_id]
    check_int("choice", choice, minimum=0, maximum=len(check.choices) - 1)
    lines, values = check.evidence()
    return {
        "id": check.id,
        "choice": choice,
        "correct": choice == check.answer,
        "answer": check.answer,
        "feedback": check.feedback[choice],
        "explanation": check.feedback[check.answer],
        "evidence": lines,
        "values": values,
    }
