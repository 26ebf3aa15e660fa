"""Every rotary causal-LM model type of the installed transformers: patched and exact, or refused.

The model types are enumerated, not listed: ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` filtered to those
whose modeling module defines a rotary embedding (:func:`posenc.integrations.discovery.rotary_causal_lm_types`).
Each gets a tiny random model from its own config class (:func:`posenc.testing.tiny_model_of_type`) and
:func:`posenc.testing.coverage` patches it. A supported type must give logits within 4x the float32
rounding of an exact float64 reference (the unpatched code in float64, angles computed by the reference
itself) at positions 0..31 and in a far block ending near the trained length, the same greedy tokens
with the KV cache, and bit-identical logits after ``undo()``. A refused type must be refused with
``UnsupportedModelError`` and left exactly as it was.

Every type runs (about three minutes on two cores; :data:`FAST`, one type per way of rotating, in the
``not slow`` tier). :func:`test_at_least_95_percent_are_proven_and_the_docs_table_is_this_run` counts
them: at least 95% of the types must be proven (a type the tiny builder cannot build counts as not
covered), and docs/transformers.md's table (``benchmarks/transformers_coverage.py --write``) must say
what this run found.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc import testing  # noqa: E402
from posenc.integrations import discovery  # noqa: E402
from posenc.integrations.tables import PerLayerTypeTables, StreamTables  # noqa: E402
from posenc.integrations.transformers import patch, stand_in  # noqa: E402

transformers.logging.set_verbosity_error()

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "transformers.md"
#: one type per way of rotating that discovery finds, the most used family, and refusals
FAST = (
    "llama",  # the most used
    "mixtral",  # found: half-split, whole head, through a kernels Func module on 5.25
    "stablelm",  # found: partial rotary, sliced by the attention
    "cohere",  # found: interleaved pairs from an interleaved table
    "glm",  # found: partial interleaved rotary inside the function
    "gpt_oss",  # found: half-width table
    "zamba2",  # refused: its config builds no rotary module (use_mem_rope=False)
)
#: the share of the enumerated types that must be proven
COVERED = 0.95

_ROWS: dict = {}


def _row(model_type: str) -> testing.Coverage:
    """Each type is built and checked once per session, for its own test and for the count."""
    if model_type not in _ROWS:
        _ROWS[model_type] = testing.coverage(model_type)
    return _ROWS[model_type]


@pytest.fixture(scope="module")
def census():
    return discovery.census()


def _types():
    found = discovery.rotary_causal_lm_types()
    return [pytest.param(t, marks=() if t in FAST else pytest.mark.slow) for t in sorted(found)]


def test_the_enumeration_is_the_causal_lm_types_with_a_rotary_module(census):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert set(census) <= set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    assert {"llama", "mixtral", "cohere", "gemma2", "qwen3_moe", "olmo2"} <= set(census)
    assert "gpt2" not in census and "bloom" not in census  # learned positions, ALiBi


@pytest.mark.parametrize("model_type", _types())
def test_every_rotary_model_type_is_patched_exactly_or_refused(model_type):
    row = _row(model_type)
    if row.status == "untested":
        pytest.skip(f"the tiny config does not build for {model_type}: {row.detail}")
    assert row.status in ("supported", "refused"), row.detail
    if row.status == "refused":
        assert row.untouched, "a refused model must be left exactly as it was"
        assert row.detail
        return
    assert row.logit_error <= testing.NOISE_FACTOR * row.noise + 1e-6, (row.logit_error, row.noise)
    assert row.far_error <= testing.NOISE_FACTOR * row.far_noise + 1e-6, (row.far_start, row.far_error, row.far_noise)
    assert row.same_generation
    assert row.undo_exact


def test_the_far_block_tells_exact_tables_from_float32_ones():
    """The yardstick can fail: Mixtral's own float32 tables, unpatched, miss the far block's bound."""
    row = _row("mixtral")
    assert row.far_start >= 30000 and row.proven
    assert row.plain_far_error > 10 * testing.NOISE_FACTOR * row.far_noise


def test_docs_table_agrees_with_discovery(census):
    table = testing.read_coverage_table(DOC.read_text())
    assert set(table) == set(census), "regenerate: PYTHONPATH=src python benchmarks/transformers_coverage.py --write"
    for model_type, (_, rotation, _) in table.items():
        assert rotation == testing.rotation_found(model_type, census), model_type


HEADLINE = re.compile(r"(\d+) of (\d+) causal-LM model types with a rotary embedding are supported")


def test_docs_headline_counts_the_tables_supported_rows():
    text = DOC.read_text()
    table = testing.read_coverage_table(text)
    found = HEADLINE.search(text)
    assert found, "the coverage table has no headline"
    supported, total = int(found.group(1)), int(found.group(2))
    assert (supported, total) == (sum(s == "supported" for s, _, _ in table.values()), len(table))
    assert supported >= COVERED * total, f"{supported} of {total} is under {COVERED:.0%}"


@pytest.mark.slow
def test_at_least_95_percent_are_proven_and_the_docs_table_is_this_run():
    """The statuses in the table are what this run finds, and this run proves at least 95% of the
    types (a "supported" row passed every check here; a refusal or an unbuildable type does not
    count), and the headline counts them."""
    table = testing.read_coverage_table(DOC.read_text())
    rows = [_row(model_type) for model_type in sorted(discovery.rotary_causal_lm_types())]
    assert {r.model_type for r in rows} == set(table)
    for row in rows:
        status, _, why = table[row.model_type]
        assert (row.status, "" if row.status == "supported" else row.detail) == (status, why), row.model_type
    proven = [r for r in rows if r.proven]
    assert f"{len(proven)} of {len(rows)} causal-LM model types" in DOC.read_text()
    assert len(proven) >= COVERED * len(rows), f"{len(proven)} of {len(rows)} proven"


# -- the probe: what it accepts and what it refuses ---------------------------------------------------------
def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _rotate_pairs(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def llama_style(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def cohere_style(q, k, cos, sin, unsqueeze_dim=1):  # interleaved table, interleaved pairs
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + _rotate_pairs(q) * sin, k * cos + _rotate_pairs(k) * sin


def glm_style(q, k, cos, sin, unsqueeze_dim=1):  # cat table, first half interleaved, rest passed through
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    cos = cos[..., : cos.shape[-1] // 2].repeat_interleave(2, dim=-1)
    sin = sin[..., : sin.shape[-1] // 2].repeat_interleave(2, dim=-1)
    r = cos.shape[-1]
    rot = [torch.cat((x[..., :r] * cos + _rotate_pairs(x[..., :r]) * sin, x[..., r:]), dim=-1) for x in (q, k)]
    return rot[0], rot[1]


def minus_angle(q, k, cos, sin, unsqueeze_dim=1):
    return llama_style(q, k, cos, -sin, unsqueeze_dim)


def not_a_rotation(q, k, cos, sin, unsqueeze_dim=1):
    return q * cos.unsqueeze(unsqueeze_dim), k * cos.unsqueeze(unsqueeze_dim)


def odd_signature(tensor, sin, cos):
    return tensor


@pytest.mark.parametrize(
    "fn, form, layout, sign",
    [
        (llama_style, "cat", "half", 1),
        (cohere_style, "interleave", "interleaved", 1),
        (glm_style, "cat", "interleaved", 1),
        (minus_angle, "cat", "half", -1),
    ],
)
def test_the_probe_finds_how_a_function_rotates(fn, form, layout, sign):
    found, why = discovery.classify_function(fn)
    assert why == ""
    assert (found.form, found.layout, found.sign, found.arity) == (form, layout, sign, "pair")


@pytest.mark.parametrize(
    "fn, why", [(not_a_rotation, "matches no rotation"), (odd_signature, "takes (tensor, sin, cos)")]
)
def test_the_probe_refuses_what_it_cannot_match(fn, why):
    found, reason = discovery.classify_function(fn)
    assert found is None and why in reason


@pytest.mark.parametrize("fn", [llama_style, cohere_style, glm_style, minus_angle])
def test_the_stand_in_rotates_as_the_function_does(fn):
    found, _ = discovery.classify_function(fn)
    ours = stand_in(found, fn)
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 3, 5, 12, generator=gen), torch.randn(2, 1, 5, 12, generator=gen)
    angles = torch.rand(2, 5, 4, generator=gen) * 6  # 8 of 12 features rotated
    cos, sin = angles.cos(), angles.sin()
    if fn is not glm_style:  # a whole-head function is called on exactly the rotated width
        q, k = q[..., :8], k[..., :8]
    want = fn(q, k, discovery.expand(cos, found.form), discovery.expand(sin, found.form))
    got = ours(q, k, cos, sin)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


# -- special families -----------------------------------------------------------------------------------------
def test_gemma3_local_and_global_layers_get_their_own_base():
    model = testing.tiny_model_of_type("gemma3_text")
    assert {"sliding_attention", "full_attention"} <= set(model.config.layer_types)
    ids = torch.randint(3, testing.VOCAB, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(ids).logits
    handle = patch(model)
    tables = model.model.rotary_emb
    assert isinstance(tables, PerLayerTypeTables)
    bases = {name: t.rope.base for name, t in tables.tables.items()}
    assert bases == {"sliding_attention": 10000.0, "full_attention": 1000000.0}
    with torch.no_grad():
        patched = model(ids).logits
        # negative control: one base for both kinds of layer is a different model
        tables.tables["full_attention"] = tables.tables["sliding_attention"]
        one_base = model(ids).logits
    handle.undo()
    assert float((patched - before).abs().max()) < 1e-4
    assert float((one_base - before).abs().max()) > 100 * float((patched - before).abs().max())


def test_mrope_text_positions_and_differing_streams_are_rotated_as_the_model_does():
    model = testing.tiny_model_of_type("qwen3_5_text")
    original = model.model.rotary_emb
    x = torch.zeros(1, 4, 8)
    text = torch.arange(4).expand(3, 1, 4)
    image = text.clone()
    image[1, 0, 2], image[2, 0, 3] = 0, 9  # height and width streams that differ from the temporal one
    with torch.no_grad():
        want = original(x, image)
    with patch(model):
        rotary = model.model.rotary_emb
        assert isinstance(rotary, StreamTables)
        cos, sin = rotary(x, text)
        cos1, sin1 = rotary(x, torch.arange(4)[None])
        assert torch.equal(cos, cos1) and torch.equal(sin, sin1)
        got = rotary(x, image)
    for ours, theirs in zip(got, want):
        half = ours.shape[-1]
        assert float((ours - theirs[..., :half]).abs().max()) < 1e-6


#: what the families once listed by hand rotate, from their code: global -> (arity, layout, deinterleave)
_ONCE_LISTED = {
    **{
        t: {"apply_rotary_pos_emb": ("pair", "half", False)}
        for t in ("llama", "mistral", "qwen2", "qwen3", "phi3", "phi", "gemma", "gpt_neox", "gpt_oss", "falcon")
    },
    "deepseek_v3": {
        "apply_rotary_pos_emb": ("pair", "half", False),
        "apply_rotary_pos_emb_interleave": ("pair", "half", True),  # interleaved pairs returned half-split
    },
    "deepseek_v2": {"apply_rotary_emb": ("complex", "interleaved", False)},
    "gptj": {"apply_rotary_pos_emb": ("single", "interleaved", False)},
    "codegen": {"apply_rotary_pos_emb": ("single", "interleaved", False)},
}


def test_discovery_finds_the_families_once_listed_by_hand(census):
    """The families patch once took from a hand-written table are found from their code with the
    rotation that table said (GPT-J and CodeGen told by their hint line only how they are called)."""
    for model_type, functions in _ONCE_LISTED.items():
        found = {f.name: (f.arity, f.layout, f.deinterleave) for f in census[model_type].functions}
        assert found == functions, model_type
        assert not census[model_type].refused, model_type
    for model_type in ("gptj", "codegen"):
        (f,) = census[model_type].functions
        assert f.sin_first and f.seq_first, model_type


def test_without_its_hint_gptj_is_refused_with_what_the_probe_saw():
    """The hint line is what lets GPT-J through: the probe alone cannot read its f(tensor, sin, cos)."""
    module = discovery.rotary_causal_lm_module("gptj")
    alone = discovery.census_module(module)
    assert not alone.functions
    ((name, why),) = alone.refused
    assert name == "apply_rotary_pos_emb" and "takes (tensor, sin, cos)" in why


# -- the tiny builder: configs that the family's own defaults would break --------------------------------------
def test_the_tiny_builder_drops_per_layer_overrides_past_its_depth_and_keeps_an_even_rotated_width():
    # gemma4's defaults override layers 5, 11, ..., 29, which a tiny depth refuses (ValueError) unless dropped
    assert testing.tiny_config_of_type("gemma4_text").num_hidden_layers == testing.LAYERS
    mimo = testing.tiny_config_of_type("mimo_v2_flash")  # partial_rotary_factor 0.334: 16 heads would rotate 5
    for rope in mimo.rope_parameters.values():
        width = int(mimo.head_dim * rope["partial_rotary_factor"])
        assert width >= 2 and width % 2 == 0, (mimo.head_dim, width)
    minimax = testing.tiny_config_of_type("minimax_m3_vl_text")  # rotates half of each head
    assert 2 <= minimax.rotary_dim < minimax.head_dim and minimax.rotary_dim % 2 == 0
    assert minimax.rotary_dim * 2 == minimax.head_dim


# -- freeze_frequencies on a model with one rope dict per layer type ---------------------------------------------
_DYNAMIC_PER_LAYER_TYPE = {
    "sliding_attention": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    "full_attention": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 1000000.0},
}


def _table_cos_sin(tables, n: int) -> torch.Tensor:
    x = torch.zeros(1, n, 8, dtype=torch.float64)
    cos, sin = tables(x, torch.arange(n)[None])
    half = tables.rope.rotary_dim // 2  # one entry per frequency first, whether or not the form repeats them
    return torch.stack((cos[0, :, :half], sin[0, :, :half]))  # (2, n, rotary_dim / 2)


@pytest.mark.parametrize("how", ["patch", "handle"])
def test_freeze_frequencies_freezes_every_layer_types_tables(how):
    from posenc.rope import rope_frequencies

    model = testing.tiny_model_of_type(
        "gemma3_text", rope_parameters=_DYNAMIC_PER_LAYER_TYPE, max_position_embeddings=16
    ).double()
    frozen_at = 64  # past max_position_embeddings: dynamic NTK's frequencies differ from the trained ones
    handle = (
        patch(model, freeze_frequencies=frozen_at) if how == "patch" else patch(model).freeze_frequencies(frozen_at)
    )
    tables = model.model.rotary_emb.tables
    assert set(tables) == set(_DYNAMIC_PER_LAYER_TYPE)
    assert {name: t.rope.frozen_seq_len for name, t in tables.items()} == dict.fromkeys(tables, frozen_at)
    for name, t in tables.items():
        rope = t.rope
        inv_freq, _ = rope_frequencies(rope.scaling, rope.rotary_dim, rope.base, frozen_at)
        trained, _ = rope_frequencies(rope.scaling, rope.rotary_dim, rope.base, 16)
        assert not torch.allclose(inv_freq, trained)  # the check below can tell frozen from not frozen
        angles = torch.arange(8, dtype=torch.float64)[:, None] * inv_freq
        want = torch.stack((angles.cos(), angles.sin()))
        torch.testing.assert_close(_table_cos_sin(t, 8), want, rtol=0, atol=1e-12, msg=name)
    handle.unfreeze_frequencies()
    assert all(t.rope.frozen_seq_len is None for t in tables.values())
    handle.undo()


def test_freeze_frequencies_is_refused_when_no_layer_type_is_length_dependent():
    model = testing.tiny_model_of_type("gemma3_text")  # default and linear: frequencies never change
    with pytest.raises(ValueError, match="freeze_frequencies applies to the length-dependent"):
        patch(model, freeze_frequencies=64)
    assert "_posenc_patch" not in model.__dict__


# -- config readings the tiny builder found missing ------------------------------------------------------------
def test_a_config_is_read_through_its_attribute_map():
    from posenc.hf import rotary_kwargs_from_hf

    config = transformers.DbrxConfig(d_model=64, n_heads=4, rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    assert "hidden_size" not in config.to_dict()  # stored as d_model, read as hidden_size
    assert rotary_kwargs_from_hf(config)["head_dim"] == 16


def test_mla_partial_rotary_factor_is_taken_against_head_dim_as_transformers_does():
    from posenc.hf import rotary_kwargs_from_hf

    # Dots 3: q/k heads of 256 features, 64 of them rotated (qk_rope_head_dim), factor 64 / 256
    config = {
        "model_type": "dots3_note_text",
        "head_dim": 256,
        "qk_rope_head_dim": 64,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e4, "partial_rotary_factor": 0.25},
    }
    kwargs = rotary_kwargs_from_hf(config)
    assert (kwargs["head_dim"], kwargs["rotary_dim"]) == (64, 64)
    # DeepSeek: head_dim is the rotated part itself, and a factor shrinks it
    deepseek = {
        **config,
        "head_dim": 64,
        "rope_parameters": {**config["rope_parameters"], "partial_rotary_factor": 0.5},
    }
    assert rotary_kwargs_from_hf(deepseek)["rotary_dim"] == 32


def test_a_refusal_is_checked_without_the_float64_yardstick(census):
    # Inkling 2's text model runs in float32 but not as a float64 copy (its code makes float32 tensors);
    # the refusal (no rotary module in the text model) and the untouched model need no yardstick
    if "inkling2_text" not in census:
        pytest.skip("this transformers has no inkling2_text")
    row = _row("inkling2_text")
    assert row.status == "refused", row.detail
    assert row.untouched and "no rotary embedding module" in row.detail
