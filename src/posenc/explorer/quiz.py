"""Knowledge checks: short questions whose answers are explained by a computation run on demand.

Each check has a prompt, a few choices, the index of the right one, a sentence of feedback per
choice, and a function that runs posenc to produce the evidence. The page never learns the right
answer in advance: it sends the reader's choice to ``GET /api/quiz/{id}/answer?choice=N`` and shows
the feedback together with the numbers that were just computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import torch

from .._checks import check_int

#: the evidence of an explanation: sentences with the numbers filled in, and the raw numbers
Evidence = Tuple[List[str], Dict[str, object]]


@dataclass(frozen=True)
class Check:
    id: str
    topic: str
    prompt: str
    choices: Tuple[str, ...]
    answer: int
    feedback: Tuple[str, ...]  # one sentence per choice
    evidence: Callable[[], Evidence]

    def public(self) -> dict:
        """What the page may see before an answer is given (no answer, no feedback)."""
        return {"id": self.id, "topic": self.topic, "prompt": self.prompt, "choices": list(self.choices)}


# -- evidence ---------------------------------------------------------------------------------------
def _added() -> Evidence:
    """Width and size of a position vector beside a word vector, at the teaching layer's stated scale.

    The scale is :mod:`posenc.input_sizes`' (TinyLM's N(0, 0.02^2) embeddings times sqrt(d_model)),
    the same function ``posenc tour`` prints from, so the two agree by construction and a test checks it.
    """
    from ..input_sizes import D_MODEL, position_word_lengths
    from ..sinusoidal import SinusoidalPositionalEncoding

    d_model = D_MODEL
    sizes = position_word_lengths(d_model)
    pe = SinusoidalPositionalEncoding(d_model, max_len=2048)
    tokens = torch.zeros(1, 3, d_model)
    out = pe(tokens)  # (1, 3, d)
    largest = float(pe.pe.abs().max())
    pe_norm = pe.pe.to(torch.float64).norm(dim=-1)  # (max_len,)
    unscaled = sizes["ratio"] * sizes["embed_scale"]  # without the sqrt(d) factor
    raw = sizes["raw_ratio"][1000]
    return (
        [
            f"Three token vectors of width {d_model} in, {tuple(out.shape)} out: the width is unchanged.",
            f"Every value lies in [-1, 1] (largest |value| over {pe.pe.shape[0]} rows: {largest:.6f}) "
            f"and every row has the same length |PE| = sqrt(d/2) = {float(pe_norm.min()):.4f} .. "
            f"{float(pe_norm.max()):.4f}.",
            f"Scale used here and in posenc tour: posenc's TinyLM, word vectors N(0, "
            f"{sizes['embedding_std']}^2) times sqrt(d_model) = {sizes['embed_scale']:.1f}, mean length "
            f"{sizes['word_norm']:.2f}. The position vector is {sizes['ratio']:.2f}x the word's length: "
            f"the same size, so neither drowns the other.",
            f"Raw integers instead: seat 1000 as 1000 in every coordinate is {raw:,.0f}x the word's length. "
            f"(Without the sqrt(d_model) factor the sine code would be {unscaled:.1f}x, which is why the "
            f"2017 Transformer scales its embeddings.)",
        ],
        {
            "shape": list(out.shape),
            "max_abs": largest,
            "d_model": d_model,
            "embedding_std": sizes["embedding_std"],
            "embed_scale": sizes["embed_scale"],
            "pe_norm": [float(pe_norm.min()), float(pe_norm.max())],
            "embedding_norm": sizes["word_norm"],
            "ratio": sizes["ratio"],
            "ratio_unscaled": unscaled,
            "raw_ratio_1000": raw,
        },
    )


def _learned_limit() -> Evidence:
    from ..learned import LearnedPositionalEmbedding, PositionOutOfRangeError

    table = LearnedPositionalEmbedding(max_len=512, d_model=4)
    try:
        table.encodings(torch.arange(600))
        message = "no error"
    except PositionOutOfRangeError as err:
        message = str(err)
    return (
        [f"posenc's LearnedPositionalEmbedding(max_len=512) asked for positions 0..599 says: {message}"],
        {"max_len": 512, "requested": 600, "error": message},
    )


def _relative() -> Evidence:
    from ..rope.tables import rope_inv_freq
    from .views import example_vector, rotate_at

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
    from ..lesson.mistakes import rotated_values_change

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


#: the shipped config the Llama 3 check reads
LLAMA3_FIXTURE = "llama-3.1-8b"


def _llama3_bands() -> Evidence:
    from ..fixtures import load_fixture
    from ..hf import rotary_kwargs_from_hf
    from ..rope.scaling import rope_frequencies
    from ..rope.tables import rope_inv_freq

    kw = rotary_kwargs_from_hf(load_fixture(LLAMA3_FIXTURE))
    cfg, rotary_dim, base = kw["scaling"], kw["rotary_dim"], kw["base"]
    scaled, _ = rope_frequencies(cfg, rotary_dim, base)
    ratio = scaled / rope_inv_freq(rotary_dim, base)  # (rotary_dim / 2,)
    kept = int(torch.isclose(ratio, torch.ones_like(ratio), rtol=1e-12, atol=0).sum())
    divided = int(torch.isclose(ratio, torch.full_like(ratio, 1 / cfg.factor), rtol=1e-12, atol=0).sum())
    between = ratio.numel() - kept - divided
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


def _fast_columns() -> Evidence:
    from ..sinusoidal import sinusoidal_table

    d_model = 64
    table = sinusoidal_table(6, d_model)
    change = (table[5] - table[4]).abs()  # (d,)
    return (
        [
            f"|PE[5] - PE[4]| in the first two columns (fastest wave): {float(change[0]):.4f}, {float(change[1]):.4f}.",
            f"In the last two columns (slowest wave): {float(change[-2]):.2e}, {float(change[-1]):.2e}.",
        ],
        {"first": change[:2].tolist(), "last": change[-2:].tolist()},
    )


def _bag_of_words() -> Evidence:
    from ..model import Block
    from ..schemes import NoPE
    from ..sinusoidal import SinusoidalPositionalEncoding
    from .views import word_vector

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


def _alibi_head0() -> Evidence:
    from ..alibi import alibi_bias, alibi_slopes

    slopes = alibi_slopes(8)
    bias = alibi_bias(slopes, torch.tensor([10]), torch.arange(11))  # (8, 1, 11)
    return (
        [
            f"Slopes for 8 heads: {[f'1/{round(1 / s)}' for s in slopes.tolist()]}.",
            f"Head 0, query at 10, key at 0: bias {float(bias[0, 0, 0]):g}; head 7: {float(bias[7, 0, 0]):g}.",
        ],
        {"slopes": slopes.tolist(), "head0": float(bias[0, 0, 0]), "head7": float(bias[7, 0, 0])},
    )


def _precision() -> Evidence:
    from ..rope.tables import rope_inv_freq
    from .views import angle_errors

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


def _linear_vs_ntk() -> Evidence:
    from ..rope.scaling import LinearScaling, NTKScaling, rope_frequencies
    from ..rope.tables import rope_inv_freq

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
        "added",
        "input encodings",
        "A sinusoidal or learned position vector meets a token's embedding before the first layer. "
        "How are the two combined?",
        (
            "The position vector is glued onto the end, so the width doubles.",
            "They have the same width d_model and are summed element by element.",
            "The position vector replaces the embedding in the first layer only.",
        ),
        1,
        (
            "Concatenation would double the width, and every weight matrix after it; the schemes add instead.",
            "Same width, plain sum; the position values are bounded and of fixed size, unlike raw integers.",
            "The model needs both what the word is and where it is; nothing is thrown away.",
        ),
        _added,
    ),
    Check(
        "learned-limit",
        "learned tables",
        "A model has a learned position table with 512 rows (BERT-style) and is given 600 tokens. "
        "What happens at position 512?",
        (
            "The table wraps round and position 512 reuses row 0.",
            "New rows are filled in from sine waves on the fly.",
            "There is no row 512: the lookup fails unless the input is cut or the table is stretched.",
        ),
        2,
        (
            "Nothing wraps: reusing row 0 would make position 512 look like the first token.",
            "A learned table has no formula to fall back on; rows that were never trained do not exist.",
            "The table ends at row 511. posenc says so, and offers truncation or interpolation.",
        ),
        _learned_limit,
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
    Check(
        "fast-columns",
        "sinusoidal",
        "Seats 4 and 5 are neighbours. Which columns of the sinusoidal table tell them apart best?",
        (
            "The last columns, the slow waves.",
            "The first columns, the fast waves.",
            "All columns change by the same amount.",
        ),
        1,
        (
            "Slow waves barely move between neighbours; they place a token in the larger stretch of text.",
            "The first pair turns a full radian per seat, like a second hand.",
            "Each pair turns at its own speed, from one radian per seat down to a tiny fraction.",
        ),
        _fast_columns,
    ),
    Check(
        "alibi-head0",
        "ALiBi",
        "In an 8-head ALiBi model, what does head 0 add to the score of a key 10 tokens behind the query?",
        (
            "-5, because head 0's slope is 1/2.",
            "-10/256, because every head uses the smallest slope.",
            "+5, nearer keys are penalised instead.",
        ),
        0,
        (
            "Slopes are 1/2, 1/4, ..., 1/256, and the penalty is slope times distance.",
            "1/256 is the slope of the last head, the one that looks furthest.",
            "The penalty grows with distance and is never positive.",
        ),
        _alibi_head0,
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
)

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
