"""conform's own tests: a small engine written here from the papers' formulas, correct and with one
bug at a time, each bug a class engines shipped; conform must pass the correct engine and flag each
buggy one as a wrong answer with the right cause named.

The engine below shares no code with conform's reference: it reads the config's fields itself, forms
its frequencies from the formulas (Su et al. 2021; Peng et al. 2023, YaRN; Meta 2024, Llama 3's
``apply_scaling``; emozilla 2023, dynamic NTK) and rotates with its own half-split and interleaved
code, in float64, like an engine that does everything right but the one thing its bug changes.
"""

from __future__ import annotations

import math

import pytest
import torch

from posenc.integrations.conform import conform
from posenc.integrations.conform.checks import check_config


def _default(d, base):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def _yarn(d, base, s, original, beta_fast=32.0, beta_slow=1.0, truncate=True):
    def pair_index(turns):  # the pair whose wavelength fits `turns` turns into the trained length
        return d * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    lo, hi = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, d - 1)
    if lo == hi:
        hi += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float64) - lo) / (hi - lo)).clamp(0, 1)
    theta = _default(d, base)
    return theta / s * ramp + theta * (1 - ramp)


def _llama3(d, base, s, low, high, original):
    theta = _default(d, base)
    wavelength = 2 * math.pi / theta
    smooth = (original / wavelength - low) / (high - low)
    out = (1 - smooth) * theta / s + smooth * theta
    out = torch.where(wavelength > original / low, theta / s, out)
    return torch.where(wavelength < original / high, theta, out)


def _m(s, mscale=1.0):
    return 1.0 if s <= 1 else 0.1 * mscale * math.log(s) + 1.0


class Engine:
    """A plain RoPE engine of the adapter protocol; ``bug`` names the one thing it gets wrong."""

    def __init__(self, bug=None):
        self.bug = bug
        self.longest = 0

    def frequencies(self, config, d, length):
        rope = config.get("rope_scaling") or {}
        base = float(config.get("rope_theta", 10000.0))
        if self.bug != "legacy fields only" and config.get("rope_parameters"):
            rope = config["rope_parameters"]
            base = float(rope.get("rope_theta", base))
        kind = rope.get("rope_type", "default")
        s = float(rope.get("factor", 1.0))
        original = int(rope.get("original_max_position_embeddings", config["max_position_embeddings"]))
        if self.bug == "original_max ignored":
            original = int(config["max_position_embeddings"])
        factor = 1.0
        if kind == "yarn":
            fast, slow = float(rope.get("beta_fast", 32.0)), float(rope.get("beta_slow", 1.0))
            if self.bug == "beta swapped":
                fast, slow = slow, fast
            inv = _yarn(d, base, s, original, fast, slow)
            if self.bug == "yarn twice":  # the loader stored YaRN's frequencies, the layer blends them again
                inv = inv * (inv / _default(d, base))
            if rope.get("attention_factor") is not None and self.bug != "attention_factor dropped":
                factor = float(rope["attention_factor"])
            elif rope.get("mscale") and rope.get("mscale_all_dim") and self.bug != "mscale ignored":
                factor = _m(s, rope["mscale"]) / _m(s, rope["mscale_all_dim"])
            else:
                factor = _m(s)
            if self.bug == "factor collapsed":
                factor = 1.0
        elif kind == "llama3" and self.bug != "llama3 dropped":
            low, high = float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
            if self.bug == "low/high swapped":
                low, high = high, low
            inv = _llama3(d, base, s, low, high, original)
        elif kind == "dynamic":
            self.longest = max(self.longest, length)
            seen = self.longest if self.bug == "dynamic not reset" else length
            seen = max(seen, original)
            scaled = base * (s * seen / original - (s - 1)) ** (d / (d - 2))
            inv = _default(d, scaled)
        else:
            inv = _default(d, base)
        return inv, factor

    def __call__(self, config, q, k, positions):
        head = q.shape[-1]
        d = int(head * float(config.get("partial_rotary_factor", 1.0)))
        if self.bug == "positions shifted":
            positions = positions + 1
        inv, factor = self.frequencies(config, d, int(positions.max()) + 1)
        angles = positions.to(torch.float64)[:, None] * inv  # (T, d/2)
        cos, sin = angles.cos() * factor, angles.sin() * factor
        if self.bug == "bf16 tables":
            cos, sin = cos.to(torch.bfloat16), sin.to(torch.bfloat16)
        cos, sin = cos.to(torch.float64)[:, None, :], sin.to(torch.float64)[:, None, :]
        interleaved = bool(config.get("rope_interleave", False)) != (self.bug == "layout swapped")
        lo = head - d if self.bug == "wrong slice" else 0
        outs = []
        for x in (q, k):
            x64 = x.to(torch.float64)
            part = x64[..., lo : lo + d]
            a, b = (part[..., 0::2], part[..., 1::2]) if interleaved else (part[..., : d // 2], part[..., d // 2 :])
            ra, rb = a * cos - b * sin, a * sin + b * cos
            rot = torch.stack((ra, rb), dim=-1).flatten(-2) if interleaved else torch.cat((ra, rb), dim=-1)
            outs.append(torch.cat((x64[..., :lo], rot, x64[..., lo + d :]), dim=-1).to(x.dtype))
        return outs[0], outs[1]


def _config(rope=None, **top):
    config = {
        "model_type": "llama",
        "head_dim": 32,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "max_position_embeddings": 65536,
        "rope_theta": 10000.0,
        "rope_scaling": rope,
    }
    config.update(top)
    return config


#: a Ministral3-like YaRN: mscale == mscale_all_dim == 1, so the table factor is exactly 1
YARN_MSCALE = _config(
    {
        "rope_type": "yarn",
        "factor": 16.0,
        "original_max_position_embeddings": 4096,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    }
)
#: vllm#46280's shape: factor 64 and an explicit attention_factor 1.0
YARN_EXPLICIT = _config(
    {"rope_type": "yarn", "factor": 64.0, "original_max_position_embeddings": 1024, "attention_factor": 1.0}
)
YARN_PLAIN = _config({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192})
LLAMA3 = _config(
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    rope_theta=500000.0,
)
DYNAMIC = _config({"rope_type": "dynamic", "factor": 4.0}, max_position_embeddings=4096)
PARTIAL = _config(None, partial_rotary_factor=0.5, model_type="phi")
INTERLEAVED = _config(None, rope_interleave=True, max_position_embeddings=4096)

#: a YaRN config in transformers 5's form: rope_theta inside rope_parameters, no rope_scaling
YARN_PARAMETERS = {
    **{k: v for k, v in _config(None).items() if k not in ("rope_scaling", "rope_theta")},
    "rope_parameters": {
        "rope_type": "yarn",
        "rope_theta": 1000000.0,
        "factor": 16.0,
        "original_max_position_embeddings": 16384,
    },
}

#: bug, config, words the named cause must hold (one bug class each, as the engines shipped them)
REPLAYS = [
    # vllm#48621 (vLLM 0.25 to 0.28): yarn_get_mscale(factor) * attn_factor, mscale/mscale_all_dim unread
    ("mscale ignored", YARN_MSCALE, "attention factor 0.1*ln(factor)+1 = 1.27726 (mscale, mscale_all_dim ignored)"),
    # vllm#46280: the config's attention_factor 1.0 replaced by the derived 0.1 ln 64 + 1
    (
        "attention_factor dropped",
        YARN_EXPLICIT,
        "attention factor 0.1*ln(factor)+1 = 1.41589 (attention_factor ignored)",
    ),
    # exllamav3#259: YaRN's attention factor collapsed to 1.0
    (
        "factor collapsed",
        YARN_PLAIN,
        "attention factor 1.0 = 1 (no attention factor applied) where the config gives 1.20794",
    ),
    ("llama3 dropped", LLAMA3, "llama3 scaling dropped"),
    ("yarn twice", YARN_PLAIN, "yarn scaling applied twice"),
    ("beta swapped", YARN_PLAIN, "beta_fast/beta_slow swapped"),
    ("dynamic not reset", DYNAMIC, "dynamic scaling not reset"),
    ("bf16 tables", YARN_PLAIN, "cos/sin tables in bfloat16"),
    ("wrong slice", PARTIAL, "partial rotary slice wrong"),
    ("layout swapped", INTERLEAVED, "layout swapped"),
    ("positions shifted", YARN_PLAIN, "positions shifted by +1"),
    ("original_max ignored", YARN_PLAIN, "original_max_position_embeddings ignored"),
    ("low/high swapped", LLAMA3, "low_freq_factor/high_freq_factor swapped"),
    # an engine reading only the legacy top-level fields, given transformers 5's rope_parameters
    ("legacy fields only", YARN_PARAMETERS, "rope dict unread (rope_parameters in transformers 5's form)"),
]


@pytest.mark.parametrize("bug, config, cause", REPLAYS, ids=[r[0] for r in REPLAYS])
def test_each_replayed_bug_is_a_wrong_answer_with_its_cause_named(bug, config, cause):
    result = check_config(Engine(bug), bug, "replay", config, dtypes=("float32",))
    assert result.status == "wrong", (bug, result.status, result.message)
    assert any(cause in c for c in result.causes), (bug, result.causes)
    # the cause is identified, not one guess among many: no other misreading fits
    assert len(result.causes) == 1, result.causes


@pytest.mark.parametrize(
    "config", [YARN_MSCALE, YARN_EXPLICIT, YARN_PLAIN, LLAMA3, DYNAMIC, PARTIAL, INTERLEAVED, YARN_PARAMETERS]
)
def test_the_engine_without_a_bug_conforms_in_both_dtypes(config):
    """The control: the same engine with no bug gets the exact answer, so each replay's finding is its
    bug's alone. In float32 it is within the dtype's noise everywhere; in float64 its plain products
    ``m * theta`` lose what float64 rounding loses (about 1e-16 of the angle), which conform reports
    as precision loss, never as a wrong answer."""
    result = check_config(Engine(), "correct", "replay", config)
    assert result.status in ("ok", "precision")
    assert all(c.status == "ok" for c in result.checks if c.dtype == "float32")
    assert max(c.error for c in result.checks if c.dtype == "float64") < 1e-9


def test_the_mscale_replay_reads_as_the_issue_reports_it():
    """vllm#48621: Ministral3's multiplier 1.2773 where the config asks 1.0, 27% in every score (the
    engine's score multiplier over the exact one is 1.2773 ** 2, its factor check says so)."""
    result = check_config(Engine("mscale ignored"), "m", "replay", YARN_MSCALE, dtypes=("float32",))
    factor = max(c.error for c in result.checks if c.check == "factor")
    assert factor == pytest.approx(_m(16.0) ** 2 - 1, rel=1e-5)
    score = max(c.error for c in result.checks if c.check == "score")
    assert score == pytest.approx(_m(16.0) ** 2 - 1, rel=1e-3)


def test_bf16_tables_are_a_wrong_answer_and_float32_angles_only_precision_loss():
    """Two finding kinds kept apart: tables coarser than the call are wrong at position 0 already;
    float32 angle arithmetic is exact near 0 and loses precision as the angle grows."""

    def float32_angles(config, q, k, positions):
        inv = _default(32, 10000.0).to(torch.float32)
        angles = positions.to(torch.float32)[:, None] * inv  # float32 product, as most engines form it
        cos, sin = angles.cos()[:, None, :].to(q.dtype), angles.sin()[:, None, :].to(q.dtype)
        out = []
        for x in (q, k):
            a, b = x[..., :16], x[..., 16:]
            out.append(torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1))
        return out[0], out[1]

    config = _config(None)
    result = check_config(float32_angles, "f32", "replay", config, dtypes=("float32",))
    assert result.status == "precision", result.causes
    by_group = {c.group: c for c in result.checks if c.check == "angle"}
    assert by_group["near"].status == "ok"
    assert by_group["1M"].status == "precision" and by_group["1M"].error > 100 * by_group["near"].error
    report = conform(float32_angles, [config], dtypes=("float32",))
    assert report.exit_code == 0
    assert conform(float32_angles, [config], dtypes=("float32",), precision=1e-4).exit_code == 1
    bf16 = check_config(Engine("bf16 tables"), "bf16", "replay", config, dtypes=("float32",))
    near = [c for c in bf16.checks if c.group == "near" and c.check == "q"][0]
    assert bf16.status == "wrong" and near.status == "wrong"
