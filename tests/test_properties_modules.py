"""Property tests over every module's forward, the position helpers and ModelConfig.

Each generated case ends in exactly one of two ways: the answer equals an independent float64
implementation written here (mpmath angles, explicit pair loops, the ALiBi paper's slope formula,
Python loops for positions), or a clear typed exception (``TypeError``/``ValueError``, or
``IndexError`` for a learned table's end) whose message names the bad argument. Anything else, a
wrong answer or another exception, fails the test. The tallies are printed at the end of the module
(run with ``-s``) and written to ``$POSENC_PROPERTY_COUNTS`` when that is set.
"""

from __future__ import annotations

import collections
import json
import math
import os

import mpmath
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc
from posenc import (
    ALiBi,
    LearnedPositionalEmbedding,
    ModelConfig,
    NoPE,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)
from posenc.rope import rope_frequencies
from posenc.sinusoidal import sinusoidal_frequencies

COUNTS: dict = collections.defaultdict(collections.Counter)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
CLEAR = (TypeError, ValueError, IndexError)


@pytest.fixture(scope="module", autouse=True)
def report_counts():
    yield
    table = {name: dict(c) for name, c in sorted(COUNTS.items())}
    total = collections.Counter()
    for c in COUNTS.values():
        total.update(c)
    table["total"] = dict(total)
    print("\nproperty cases:", json.dumps(table, indent=1))
    path = os.environ.get("POSENC_PROPERTY_COUNTS")
    if path:
        with open(path, "w") as f:
            json.dump(table, f, indent=1)


def run_case(suite: str, compute, reference, compare, bad_argument=None):
    """Run one case and tally it.

    ``bad_argument``: the name an error message must contain (or a tuple of names, any of which will
    do), or None when the input is valid (then an error is itself a failure).
    """
    COUNTS[suite]["cases"] += 1
    try:
        got = compute()
    except CLEAR as exc:
        if bad_argument is None:
            COUNTS[suite]["crashes"] += 1
            raise AssertionError(f"valid input raised {type(exc).__name__}: {exc}") from exc
        names = bad_argument if isinstance(bad_argument, tuple) else (bad_argument,)
        if not any(name in str(exc) for name in names):
            COUNTS[suite]["unclear errors"] += 1
            raise AssertionError(f"error does not name {bad_argument!r}: {exc}") from exc
        COUNTS[suite]["clear errors"] += 1
        return
    except Exception as exc:
        COUNTS[suite]["crashes"] += 1
        raise AssertionError(f"untyped failure {type(exc).__name__}: {exc}") from exc
    if bad_argument is not None:
        COUNTS[suite]["wrong answers"] += 1
        raise AssertionError(f"invalid {bad_argument} was accepted")
    problem = compare(got, reference())
    if problem:
        COUNTS[suite]["wrong answers"] += 1
        raise AssertionError(problem)
    COUNTS[suite]["correct"] += 1


# -- independent float64 pieces -------------------------------------------------------------------
_trig_cache: dict = {}


def exact_cos_sin(position: int, freq: float):
    key = (position, freq)
    if key not in _trig_cache:
        with mpmath.workdps(40):
            angle = mpmath.mpf(position) * mpmath.mpf(freq)
            _trig_cache[key] = (float(mpmath.cos(angle)), float(mpmath.sin(angle)))
    return _trig_cache[key]


def rotate64(x: torch.Tensor, positions: torch.Tensor, inv_freq, factor: float, layout: str, rotary_dim: int):
    """Rotate x (B, H, S, D) by positions (B|1, S) pair by pair, in float64."""
    x = x.to(torch.float64)
    out = x.clone()
    half = rotary_dim // 2
    for b in range(x.shape[0]):
        for s in range(x.shape[2]):
            p = int(positions[min(b, positions.shape[0] - 1), s])
            for i, f in enumerate(inv_freq):
                c, sn = exact_cos_sin(p, f)
                c, sn = c * factor, sn * factor
                ia, ib = (i, i + half) if layout == "half" else (2 * i, 2 * i + 1)
                a, bb = x[b, :, s, ia], x[b, :, s, ib]
                out[b, :, s, ia] = a * c - bb * sn
                out[b, :, s, ib] = a * sn + bb * c
    return out


def close(tolerance):
    def compare(got, want):
        got = (got,) if isinstance(got, torch.Tensor) else got
        want = (want,) if isinstance(want, torch.Tensor) else want
        for g, w in zip(got, want):
            if g.shape != w.shape:
                return f"shape {tuple(g.shape)} != {tuple(w.shape)}"
            scale = max(1.0, float(w.abs().max())) if w.numel() else 1.0
            err = float((g.detach().to(torch.float64) - w).abs().max()) if w.numel() else 0.0
            if not err <= tolerance * scale:
                return f"max error {err:.3g} > {tolerance:g} x {scale:.3g}"
        return None

    return compare


TOLERANCE = {torch.float32: 2e-6, torch.float64: 1e-6, torch.bfloat16: 1.6e-2}
positions_st = st.one_of(st.integers(0, 64), st.integers(0, 2**40), st.integers(0, 2**62))


# -- RotaryEmbedding -------------------------------------------------------------------------------
def scaling_for(kind: str, draw, pairs: int):
    if kind == "default":
        return None
    factor = draw(st.floats(1.0, 16.0))
    original = draw(st.integers(4, 64))
    return {
        "linear": lambda: posenc.rope.LinearScaling(factor),
        "ntk": lambda: posenc.rope.NTKScaling(factor),
        "dynamic": lambda: posenc.rope.DynamicNTKScaling(factor, original),
        "yarn": lambda: posenc.rope.YaRNScaling(factor, original),
        "llama3": lambda: posenc.rope.Llama3Scaling(factor, 1.0, 4.0, original),
        "longrope": lambda: posenc.rope.LongRoPEScaling(
            draw(st.lists(st.floats(1.0, 4.0), min_size=pairs, max_size=pairs)),
            draw(st.lists(st.floats(1.0, 8.0), min_size=pairs, max_size=pairs)),
            original,
        ),
        "proportional": lambda: posenc.rope.ProportionalScaling(draw(st.floats(0.1, 1.0)), factor),
    }[kind]()


HOSTILE = ["none", "negative", "bool", "float", "seq", "head_dim", "int q", "offset and ids", "batch"]


@st.composite
def rope_cases(draw):
    head_dim = 2 * draw(st.integers(1, 8))
    rotary_dim = draw(st.one_of(st.none(), st.integers(1, head_dim // 2).map(lambda n: 2 * n)))
    kind = draw(st.sampled_from(sorted(posenc.rope.REGISTRY)))
    scaling = scaling_for(kind, draw, (rotary_dim or head_dim) // 2)
    return dict(
        head_dim=head_dim,
        rotary_dim=rotary_dim,
        scaling=scaling,
        layout=draw(st.sampled_from(["half", "interleaved"])),
        base=draw(st.sampled_from([10000.0, 500000.0, 1e6]) | st.floats(2.0, 1e7)),
        batch=draw(st.integers(1, 2)),
        q_heads=draw(st.integers(1, 3)),
        kv_heads=draw(st.integers(1, 2)),
        seq=draw(st.integers(1, 4)),
        dtype=draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16])),
        heads_first=draw(st.booleans()),
        strided=draw(st.booleans()),
        mode=draw(st.sampled_from(["offset", "offset tensor", "ids", "ids shared"])),
        offset=draw(positions_st),
        starts=draw(st.lists(positions_st, min_size=2, max_size=2)),
        ids=draw(st.lists(positions_st, min_size=8, max_size=8)),
        hostile=draw(st.sampled_from(HOSTILE) | st.just("none")),
    )


@pytest.mark.slow
@settings(SETTINGS, max_examples=400)
@given(case=rope_cases())
def test_rotary_embedding_is_exact_or_refuses(case):
    c = case
    rope = RotaryEmbedding(
        c["head_dim"],
        base=c["base"],
        rotary_dim=c["rotary_dim"],
        layout=c["layout"],
        scaling=c["scaling"],
        max_position_embeddings=16,
    )
    r = rope.rotary_dim
    gen = torch.Generator().manual_seed(0)
    B, S = c["batch"], c["seq"]
    q = torch.randn(B, c["q_heads"], S, c["head_dim"], generator=gen).to(c["dtype"])
    k = torch.randn(B, c["kv_heads"], S, c["head_dim"], generator=gen).to(c["dtype"])
    if c["mode"] == "offset":
        pos, kwargs = torch.arange(S).unsqueeze(0) + c["offset"], dict(offset=c["offset"])
        pos = torch.tensor([[c["offset"] + s for s in range(S)]])
    elif c["mode"] == "offset tensor":
        starts = torch.tensor(c["starts"][:1] * B if B == 1 else c["starts"][:B])
        pos = torch.tensor([[int(o) + s for s in range(S)] for o in starts])
        kwargs = dict(offset=starts)
    else:
        rows = 1 if c["mode"] == "ids shared" else B
        pos = (
            torch.tensor(c["ids"][: rows * S]).reshape(rows, S)
            if len(c["ids"]) >= rows * S
            else torch.tensor((c["ids"] * 4)[: rows * S]).reshape(rows, S)
        )
        kwargs = dict(position_ids=pos)
    bad = None
    hostile = c["hostile"]
    if hostile == "negative" and "position_ids" in kwargs:
        kwargs["position_ids"] = pos.clone()
        kwargs["position_ids"][0, -1] = -3
        bad = "position_ids"
    elif hostile == "negative" and c["mode"] == "offset":
        kwargs["offset"], bad = -c["offset"] - 1, "offset"
    elif hostile in ("bool", "float") and "position_ids" in kwargs:
        kwargs["position_ids"] = pos.bool() if hostile == "bool" else pos.double()
        bad = "position_ids"
    elif hostile == "seq" and "position_ids" in kwargs:
        kwargs["position_ids"], bad = torch.cat((pos, pos), -1), "position_ids"
    elif hostile == "head_dim":
        q, k, bad = torch.randn(B, 1, S, c["head_dim"] + 2), torch.randn(B, 1, S, c["head_dim"] + 2), "head_dim"
    elif hostile == "int q":
        q, bad = torch.ones(B, 1, S, c["head_dim"], dtype=torch.long), "q"
    elif hostile == "offset and ids" and "position_ids" in kwargs:
        kwargs["offset"], bad = 1, "offset"
    elif hostile == "batch" and c["mode"] == "ids":
        kwargs["position_ids"], bad = torch.cat((pos, pos, pos)), "position_ids"
    if bad is None:
        COUNTS["rope"][f"mode {c['mode']}"] += 1
    q_in, k_in = q, k
    if not c["heads_first"]:
        q_in, k_in = q.transpose(1, 2), k.transpose(1, 2)
    if c["strided"]:
        q_in = q_in.transpose(-1, -2).contiguous().transpose(-1, -2)
    length = int(pos.max()) + 1

    def compute():
        out_q, out_k = rope(q_in, k_in, heads_first=c["heads_first"], **kwargs)
        if not c["heads_first"]:
            out_q, out_k = out_q.transpose(1, 2), out_k.transpose(1, 2)
        return out_q, out_k

    def reference():
        if rope.is_dynamic:
            inv_freq, factor = rope_frequencies(c["scaling"], r, c["base"], length)
        else:
            inv_freq, factor = rope_frequencies(c["scaling"], r, c["base"])
        return (
            rotate64(q, pos, inv_freq.tolist(), factor, c["layout"], r),
            rotate64(k, pos, inv_freq.tolist(), factor, c["layout"], r),
        )

    run_case("rope", compute, reference, close(TOLERANCE[c["dtype"]]), bad)


# -- sinusoidal, learned, ALiBi, NoPE -----------------------------------------------------------------
@pytest.mark.slow
@SETTINGS
@given(
    d_model=st.integers(1, 12),
    base=st.sampled_from([10000.0, 500.0]),
    batch=st.integers(1, 2),
    seq=st.integers(1, 4),
    ids=st.lists(positions_st, min_size=8, max_size=8),
    use_offset=st.booleans(),
    hostile=st.sampled_from(["none", "none", "negative", "bool", "float", "width"]),
)
def test_sinusoidal_is_exact_or_refuses(d_model, base, batch, seq, ids, use_offset, hostile):
    pe = SinusoidalPositionalEncoding(d_model, max_len=8, base=base)
    x = torch.randn(batch, seq, d_model, dtype=torch.float64)
    pos = torch.tensor(ids[:seq]).unsqueeze(0)
    kwargs = dict(offset=ids[0]) if use_offset else dict(position_ids=pos)
    if use_offset:
        pos = torch.tensor([[ids[0] + s for s in range(seq)]])
    bad = None
    if hostile == "negative":
        kwargs, bad = dict(position_ids=-pos - 1), "position_ids"
    elif hostile in ("bool", "float"):
        kwargs, bad = dict(position_ids=pos.bool() if hostile == "bool" else pos.float()), "position_ids"
    elif hostile == "width":
        x, bad = torch.randn(batch, seq, d_model + 1), "d_model"
    freqs = sinusoidal_frequencies(d_model, base).tolist()

    def reference():
        table = torch.tensor(
            [[v for f in freqs for v in reversed(exact_cos_sin(int(p), f))][:d_model] for p in pos[0]],
            dtype=torch.float64,
        )
        return x + table.unsqueeze(0)

    run_case("sinusoidal", lambda: pe(x, **kwargs), reference, close(1e-6), bad)


@SETTINGS
@given(
    max_len=st.integers(1, 20),
    d_model=st.integers(1, 8),
    seq=st.integers(1, 5),
    fractions=st.lists(st.floats(0.0, 1.1), min_size=5, max_size=5),
    hostile=st.sampled_from(["none", "none", "negative", "bool", "float"]),
)
def test_learned_is_the_table_row_or_refuses(max_len, d_model, seq, fractions, hostile):
    ids = [int(f * max_len) for f in fractions]  # mostly inside, sometimes past the end
    learned = LearnedPositionalEmbedding(max_len, d_model)
    x = torch.randn(1, seq, d_model)
    pos = torch.tensor([ids[:seq]])
    bad = "position" if int(pos.max()) >= max_len else None
    if hostile == "negative":
        pos, bad = -pos - 1, "position_ids"
    elif hostile in ("bool", "float"):
        pos, bad = (pos.bool() if hostile == "bool" else pos.float()), "position_ids"

    def reference():
        w = learned.weight.detach().to(torch.float64)
        return x.to(torch.float64) + torch.stack([w[int(p)] for p in pos[0]]).unsqueeze(0)

    run_case("learned", lambda: learned(x, position_ids=pos), reference, close(1e-6), bad)


def paper_slopes(n: int):
    """Press et al.'s slopes, written from the paper's description."""

    def geometric(m):
        return [2.0 ** (-8.0 * (i + 1) / m) for i in range(m)]

    p = 1
    while p * 2 <= n:
        p *= 2
    return geometric(p) + geometric(2 * p)[0::2][: n - p]


@SETTINGS
@given(
    heads=st.integers(1, 12),
    q_pos=st.lists(positions_st, min_size=1, max_size=4),
    k_pos=st.lists(st.integers(0, 2**30), min_size=1, max_size=4),
    hostile=st.sampled_from(["none", "none", "negative", "bool", "float"]),
)
def test_alibi_bias_is_the_distance_penalty_or_refuses(heads, q_pos, k_pos, hostile):
    alibi = ALiBi(heads)
    qp, kp = torch.tensor(q_pos), torch.tensor(k_pos)
    bad = None
    if hostile == "negative":
        qp, bad = -qp - 1, "q_positions"
    elif hostile in ("bool", "float"):
        kp, bad = (kp.bool() if hostile == "bool" else kp.double()), "k_positions"

    def reference():
        slopes = paper_slopes(heads)
        return torch.tensor([[[-s * abs(i - j) for j in k_pos] for i in q_pos] for s in slopes], dtype=torch.float64)

    run_case("alibi", lambda: alibi.bias(qp, kp), reference, close(2e-7), bad)


@SETTINGS
@given(batch=st.integers(1, 2), seq=st.integers(1, 4), width=st.integers(1, 8))
def test_nope_changes_nothing(batch, seq, width):
    nope = NoPE()
    x, q, k = torch.randn(batch, seq, width), torch.randn(batch, 2, seq, width), torch.randn(batch, 1, seq, width)
    pos = torch.arange(seq).unsqueeze(0)

    def compute():
        return nope.embed(x, pos), *nope.rotate(q, k, pos), nope.bias(pos[0], pos[0])

    def compare(got, _):
        ok = got[0] is x and got[1] is q and got[2] is k and got[3] is None
        return None if ok else "NoPE changed its input"

    run_case("nope", compute, lambda: None, compare)


# -- position helpers ----------------------------------------------------------------------------------
@SETTINGS
@given(
    mask=st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=6), min_size=1, max_size=3),
    as_bool=st.booleans(),
    hostile=st.sampled_from(["none", "none", "value 2", "float", "1-d"]),
)
def test_attention_mask_helper(mask, as_bool, hostile):
    width = len(mask[0])
    mask = [(row * width)[:width] for row in mask]
    t = torch.tensor(mask, dtype=torch.bool if as_bool else torch.long)
    bad = None
    if hostile == "value 2":
        t, bad = t.long(), "attention_mask"
        t[0, 0] = 2
    elif hostile == "float":
        t, bad = t.float(), "attention_mask"
    elif hostile == "1-d":
        t, bad = t[0], "attention_mask"

    def reference():
        out = []
        for row in mask:
            count, positions = 0, []
            for m in row:
                positions.append(count if m else 0)
                count += m
            out.append(positions)
        return torch.tensor(out, dtype=torch.float64)

    run_case(
        "positions.attention_mask", lambda: posenc.rope.position_ids_from_attention_mask(t), reference, close(0), bad
    )


@SETTINGS
@given(
    lengths=st.lists(st.integers(0, 5), min_size=0, max_size=5),
    hostile=st.sampled_from(["none", "none", "decreasing", "not at 0", "float", "2-d"]),
)
def test_cu_seqlens_helper(lengths, hostile):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    t = torch.tensor(cu)
    bad = None
    if hostile == "decreasing" and cu[-1] > 0:
        t, bad = torch.tensor(cu + [cu[-1] - 1]), "cu_seqlens"
    elif hostile == "not at 0":
        t, bad = t + 1, "cu_seqlens"
    elif hostile == "float":
        t, bad = t.float(), "cu_seqlens"
    elif hostile == "2-d":
        t, bad = t.unsqueeze(0), "cu_seqlens"

    def reference():
        return torch.tensor([i for n in lengths for i in range(n)], dtype=torch.float64)

    run_case("positions.cu_seqlens", lambda: posenc.rope.position_ids_from_cu_seqlens(t), reference, close(0), bad)


@SETTINGS
@given(
    docs=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=6), min_size=1, max_size=3),
    hostile=st.sampled_from(["none", "none", "float", "scalar"]),
)
def test_document_ids_helper(docs, hostile):
    width = len(docs[0])
    docs = [(row * width)[:width] for row in docs]
    t = torch.tensor(docs)
    bad = None
    if hostile == "float":
        t, bad = t.float(), "document_ids"
    elif hostile == "scalar":
        t, bad = t[0, 0], "document_ids"

    def reference():
        out = []
        for row in docs:
            positions, count = [], 0
            for i, d in enumerate(row):
                count = 0 if i == 0 or d != row[i - 1] else count + 1
                positions.append(count)
            out.append(positions)
        return torch.tensor(out, dtype=torch.float64)

    run_case("positions.document_ids", lambda: posenc.rope.position_ids_from_document_ids(t), reference, close(0), bad)


@SETTINGS
@given(
    offsets=st.one_of(st.integers(0, 2**40), st.lists(st.integers(0, 2**40), min_size=1, max_size=3)),
    seq=st.integers(0, 4),
    hostile=st.sampled_from(["none", "none", "negative", "float", "bool", "seq"]),
)
def test_offsets_helper(offsets, seq, hostile):
    value = offsets if isinstance(offsets, int) else torch.tensor(offsets)
    bad = None
    if hostile == "negative":
        value, bad = (-offsets - 1 if isinstance(offsets, int) else -value - 1), "offsets"
    elif hostile == "float":
        value, bad = float(offsets) if isinstance(offsets, int) else value.double(), "offsets"
    elif hostile == "bool":
        value, bad = True, "offsets"
    elif hostile == "seq":
        seq, bad = -1, "seq_len"
    rows = [offsets] if isinstance(offsets, int) else offsets

    def reference():
        return torch.tensor([[o + s for s in range(seq)] for o in rows], dtype=torch.float64)

    run_case("positions.offsets", lambda: posenc.rope.position_ids_from_offsets(value, seq), reference, close(0), bad)


# -- ModelConfig -----------------------------------------------------------------------------------------
def junk():
    return st.sampled_from([True, 2.5, "64", None, -1, 0, float("nan"), [4]])


FIELDS = [
    "scheme",
    "vocab_size",
    "d_model",
    "n_layers",
    "n_heads",
    "mlp_ratio",
    "max_len",
    "rope_base",
    "rotary_dim",
    "rope_layout",
    "dropout",
    "bias",
    "embed_scale",
]


def config_problem(cfg: dict):
    """The field an independent reading of the rules refuses first-or-any, or None if all is valid."""
    problems = []
    ints = ("vocab_size", "d_model", "n_layers", "n_heads", "mlp_ratio", "max_len")
    if cfg["scheme"] not in posenc.SCHEMES:
        problems.append("scheme")
    for name in ints:
        v = cfg[name]
        if type(v) is not int or v < 1:
            problems.append(name)
    if not problems and cfg["d_model"] % cfg["n_heads"]:
        problems.append("divisible")
    number = lambda v: type(v) in (int, float) and math.isfinite(v)
    if not (number(cfg["rope_base"]) and cfg["rope_base"] > 1):
        problems.append("rope_base")
    head = cfg["d_model"] // cfg["n_heads"] if not problems else None
    if head is not None and cfg["scheme"] == "rope" and (head < 2 or head % 2):
        problems.append("head_dim")
    r = cfg["rotary_dim"]
    if r is not None and (type(r) is not int or r < 2 or r % 2 or (head is not None and r > head)):
        problems.append("rotary_dim")
    if not isinstance(cfg["rope_layout"], str) or cfg["rope_layout"] not in ("half", "interleaved"):
        problems.append("rope_layout")
    if not (number(cfg["dropout"]) and 0 <= cfg["dropout"] <= 1):
        problems.append("dropout")
    if type(cfg["bias"]) is not bool:
        problems.append("bias")
    e = cfg["embed_scale"]
    if e is not None and not (number(e) and e > 0):
        problems.append("embed_scale")
    return problems


@pytest.mark.slow
@SETTINGS
@given(data=st.data())
def test_model_config_validates_like_its_rules(data):
    cfg = dict(
        scheme=data.draw(st.sampled_from(list(posenc.SCHEMES) * 4 + ["RoPE", "xpos"])),
        vocab_size=data.draw(st.integers(1, 300)),
        d_model=data.draw(st.sampled_from([8, 12, 16, 24, 30, 32])),
        n_layers=data.draw(st.integers(1, 3)),
        n_heads=data.draw(st.sampled_from([1, 2, 2, 4, 4, 3])),
        mlp_ratio=data.draw(st.integers(1, 4)),
        max_len=data.draw(st.integers(1, 64)),
        rope_base=data.draw(st.floats(1.5, 1e6)),
        rotary_dim=data.draw(st.sampled_from([None, None, None, 2, 4]) | st.integers(1, 16)),
        rope_layout=data.draw(st.sampled_from(["half", "interleaved"] * 4 + ["zigzag"])),
        dropout=data.draw(st.floats(0, 1)),
        bias=data.draw(st.booleans()),
        embed_scale=data.draw(st.none() | st.floats(0.1, 10)),
    )
    if data.draw(st.integers(0, 3)) == 0:
        cfg[data.draw(st.sampled_from(FIELDS))] = data.draw(junk())
    problems = config_problem(cfg)

    def compute():
        config = ModelConfig(**cfg).validate()
        model = posenc.TinyLM(config) if not problems else None
        return config, model

    def compare(got, _):
        _, model = got
        seq = min(3, cfg["max_len"])  # a learned table has max_len rows
        ids = torch.randint(0, cfg["vocab_size"], (1, seq))
        logits = model(ids)
        if logits.shape != (1, seq, cfg["vocab_size"]) or not torch.isfinite(logits).all():
            return f"bad logits {tuple(logits.shape)}"
        return None

    # the message must name one of the fields the rules refuse ("divisible" and "head_dim" concern d_model)
    run_case("ModelConfig", compute, lambda: None, compare, tuple(problems) or None)
