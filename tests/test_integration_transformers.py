"""posenc inside real ``transformers`` models: parity, long-position accuracy, generation, scope.

Every case is a tiny random model (2 layers, small width) whose rope fields are copied from a real
config (:mod:`posenc.testing`); nothing is downloaded.

Yardstick: :func:`posenc.testing.float64_reference`, the unpatched ``transformers`` code run
in float64 with its rotary module's angles computed exactly in float64 (plain torch float64 ops, not
posenc's tables or kernels).

Tolerance at short positions: ``4 × noise``, where ``noise`` is the unpatched float32 model's own
distance from the float64 run on the same input. Two float32 evaluations of one function differ by at
most the sum of their errors, and each error is about ``noise`` (the rope part is exact to 6e-8 at
positions below 64 in both); the factor 4 leaves room for the patched path's different (single)
rounding order. A wrong pair layout (the negative control) misses this bound by orders of magnitude.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc import testing as tiny  # noqa: E402  (after the importorskip above)
from posenc.hf import rotary_kwargs_from_hf  # noqa: E402
from posenc.integrations.transformers import (  # noqa: E402
    ARCHITECTURES,
    PosencRotaryTables,
    UnsupportedModelError,
    patch,
    patch_of,
    supported_model_types,
    unpatch,
)

transformers.logging.set_verbosity_error()

CASES = tiny.case_names()
SEQ = 16
LONG_OFFSETS = (131072, 1048576)  # 128k and 1M: position_ids = offset + arange(SEQ)
#: GPT-J's (and CodeGen's) own table stops at n_positions (2048): unpatched, it cannot run at long positions at all
TABLE_BOUND = {"gpt-j-6b", "codegen-350m"}


def ids_for(seed: int = 1, batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return torch.randint(1, tiny.VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def positions(offset: int, batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return (torch.arange(seq) + offset).unsqueeze(0).expand(batch, -1)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


@pytest.fixture(scope="module")
def models():
    """Built once per case for the module: (model, its float64 reference)."""
    cache = {}

    def get(name):
        if name not in cache:
            model = tiny.tiny_model(name)
            cache[name] = (model, tiny.float64_reference(model))
        return cache[name]

    return get


def test_every_supported_family_has_a_case():
    families = {tiny.case_fields(name)[0] for name in CASES}
    assert families == set(supported_model_types())


# -- short positions: equal to the unpatched model ---------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_short_positions_match_unpatched(models, name):
    model, ref = models(name)
    ids, pos = ids_for(), positions(0)
    exact = tiny.logits(ref, ids, pos)
    before = tiny.logits(model, ids, pos)
    noise = max_diff(before, exact)
    with patch(model) as handle:
        after = tiny.logits(model, ids, pos)
        assert handle.attention_modules and handle.rotary_modules
    assert 0 < noise < 1e-4
    assert max_diff(after, before) <= 4 * noise, (name, max_diff(after, before), noise)
    assert max_diff(after, exact) <= 4 * noise


@pytest.mark.parametrize(
    "name, wrong",
    [
        ("llama-3.1-8b", "interleaved"),
        ("gpt-j-6b", "half"),
        ("deepseek-v3", "half"),
        ("gpt-neox-20b", "interleaved"),
        ("deepseek-v2-lite", "half"),
    ],
)
def test_negative_control_wrong_layout_is_detected(models, name, wrong):
    model, ref = models(name)
    ids, pos = ids_for(), positions(0)
    noise = max_diff(tiny.logits(model, ids, pos), tiny.logits(ref, ids, pos))
    with patch(model, layout=wrong):
        wrong_logits = tiny.logits(model, ids, pos)
    assert max_diff(wrong_logits, tiny.logits(ref, ids, pos)) > 100 * 4 * noise


# -- long positions: closer to float64 -----------------------------------------------------------------
@pytest.mark.parametrize("offset", LONG_OFFSETS)
@pytest.mark.parametrize("name", CASES)
def test_long_positions_closer_to_float64(models, name, offset):
    model, ref = models(name)
    ids, pos = ids_for(), positions(offset)
    exact = tiny.logits(ref, ids, pos)
    short_noise = max_diff(tiny.logits(model, ids, positions(0)), tiny.logits(ref, ids, positions(0)))
    with patch(model):
        patched_error = max_diff(tiny.logits(model, ids, pos), exact)
    # the patched model is as exact at 1M as at position 0: its float32 noise, nothing from rope
    assert patched_error <= 4 * short_noise, (name, offset, patched_error, short_noise)
    if name in TABLE_BOUND:
        with pytest.raises(IndexError):
            tiny.logits(model, ids, pos)
        return
    unpatched_error = max_diff(tiny.logits(model, ids, pos), exact)
    assert unpatched_error >= 10 * patched_error, (name, offset, unpatched_error, patched_error)


# -- generation ---------------------------------------------------------------------------------------
def greedy(model, ids, mask=None, new=8):
    with torch.no_grad():
        return model.generate(
            ids, attention_mask=mask, max_new_tokens=new, do_sample=False, pad_token_id=0, min_new_tokens=new
        )


@pytest.mark.parametrize("left_padding", [False, True])
@pytest.mark.parametrize("name", CASES)
def test_greedy_generation_matches_unpatched(models, name, left_padding):
    model, _ = models(name)
    ids = ids_for(seed=3, seq=10)
    mask = torch.ones_like(ids)
    if left_padding:
        ids[0, :4] = 0
        mask[0, :4] = 0
    expected = greedy(model, ids, mask)
    with patch(model):
        got = greedy(model, ids, mask)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_attention_implementations(attn):
    model = tiny.tiny_model("llama-3.1-8b", attn_implementation=attn)
    ids = ids_for()
    exact = tiny.logits(tiny.float64_reference(model), ids)
    before = tiny.logits(model, ids)
    with patch(model):
        after = tiny.logits(model, ids)
        generated = greedy(model, ids[:, :6])
    assert max_diff(after, before) <= 4 * max_diff(before, exact)
    assert torch.equal(generated, greedy(model, ids[:, :6]))


def test_packed_position_ids(models):
    model, ref = models("qwen2.5-7b-instruct-yarn")
    ids = ids_for(batch=1)
    packed = torch.cat((torch.arange(6), torch.arange(4), torch.arange(6))).unsqueeze(0)  # 3 documents
    exact = tiny.logits(ref, ids, packed)
    before = tiny.logits(model, ids, packed)
    with patch(model):
        after = tiny.logits(model, ids, packed)
    assert max_diff(after, before) <= 4 * max_diff(before, exact)


# -- autograd and compile ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["llama-3.1-8b", "gpt-j-6b", "deepseek-v3"])
def test_gradients_match_unpatched(name):
    model = tiny.tiny_model(name).train()
    ids = ids_for()

    def grads():
        model.zero_grad()
        model(ids, labels=ids).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    expected = grads()
    with patch(model):
        got = grads()
    assert expected.keys() == got.keys() and expected
    for n in expected:
        scale = expected[n].abs().max().item() + 1e-12
        assert max_diff(got[n], expected[n]) <= 1e-4 * scale, n


@pytest.mark.slow
def test_torch_compile_matches_eager():
    model = tiny.tiny_model("llama-3.1-8b")
    ids = ids_for()
    with patch(model):
        eager = tiny.logits(model, ids)
        compiled = torch.compile(model)
        got = tiny.logits(compiled, ids)
        got_long = tiny.logits(compiled, ids, positions(1048576))
        eager_long = tiny.logits(model, ids, positions(1048576))
    assert max_diff(got, eager) < 1e-4
    assert max_diff(got_long, eager_long) < 1e-4


# -- scope and undo ------------------------------------------------------------------------------------------
def test_patch_is_per_instance_and_undo_restores_exactly():
    model, other = tiny.tiny_model("llama-3.1-8b"), tiny.tiny_model("llama-3.1-8b", seed=1)
    ids = ids_for()
    attn_class = type(model.model.layers[0].self_attn)
    class_forward = attn_class.forward
    rotary_before = model.model.rotary_emb
    state_before = {k: v.clone() for k, v in model.state_dict().items()}
    logits_before, other_before = tiny.logits(model, ids), tiny.logits(other, ids)

    handle = patch(model)
    assert patch_of(model) is handle
    assert isinstance(model.model.rotary_emb, PosencRotaryTables)
    assert "forward" in model.model.layers[0].self_attn.__dict__
    # the class, the module's function and the other instance are untouched
    assert attn_class.forward is class_forward
    module = __import__(ARCHITECTURES["llama"].module, fromlist=["x"])
    assert module.apply_rotary_pos_emb.__module__ == module.__name__
    assert "forward" not in other.model.layers[0].self_attn.__dict__
    assert type(other.model.rotary_emb).__name__ == "LlamaRotaryEmbedding"
    assert torch.equal(tiny.logits(other, ids), other_before)

    handle.undo()
    handle.undo()  # idempotent
    assert patch_of(model) is None
    assert model.model.rotary_emb is rotary_before
    assert all("forward" not in layer.self_attn.__dict__ for layer in model.model.layers)
    assert torch.equal(tiny.logits(model, ids), logits_before)
    assert all(torch.equal(v, state_before[k]) for k, v in model.state_dict().items())
    assert model.state_dict().keys() == state_before.keys()


def test_context_manager_and_unpatch():
    model = tiny.tiny_model("phi-2")
    with patch(model):
        assert patch_of(model) is not None
    assert patch_of(model) is None
    patch(model)
    unpatch(model)
    assert patch_of(model) is None
    unpatch(model)  # nothing to undo: no error


def test_state_dict_unchanged_by_patch():
    model = tiny.tiny_model("gpt-neox-20b")
    keys = set(model.state_dict())
    with patch(model):
        assert set(model.state_dict()) == keys  # posenc's tables are non-persistent buffers


def test_dtype_casts_keep_exact_tables():
    model = tiny.tiny_model("llama-3.2-1b")
    with patch(model) as handle:
        model.to(torch.bfloat16)
        assert handle.rope.cos_cached.dtype == torch.float32
        cos, _ = model.model.rotary_emb(torch.zeros(1, dtype=torch.bfloat16), torch.arange(4)[None])
        assert cos.dtype == torch.float32  # tables reach the rotation unrounded
        model.double()
        cos, _ = model.model.rotary_emb(torch.zeros(1, dtype=torch.float64), torch.arange(4)[None])
        assert cos.dtype == torch.float64


# -- refusals --------------------------------------------------------------------------------------------------
def test_unsupported_architecture_names_the_supported_ones():
    from transformers import BertConfig, BertModel

    model = BertModel(
        BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
    )
    with pytest.raises(UnsupportedModelError, match="no rotary embedding module .* BertModel"):
        patch(model)


def test_alibi_falcon_is_refused():
    model = tiny.tiny_model("falcon", alibi=True)
    with pytest.raises(UnsupportedModelError, match="alibi=True"):
        patch(model)


def test_double_patch_and_bad_arguments():
    model = tiny.tiny_model("llama-3.1-8b")
    with patch(model), pytest.raises(ValueError, match="already patched"):
        patch(model)
    with pytest.raises(ValueError, match="layout must be one of"):
        patch(model, layout="diagonal")
    with pytest.raises(ValueError, match="freeze_frequencies applies to .* 'llama3'"):
        patch(model, freeze_frequencies=4096)
    assert patch_of(model) is None  # a refused patch leaves nothing behind
    with pytest.raises(TypeError, match="PreTrainedModel"):
        patch(torch.nn.Linear(2, 2))


# -- dynamic frequencies: transformers' behaviour, and freeze_frequencies ----------------------------------------
def decode_vs_full(model, ids, new: int):
    """Max |logits of cached decoding - logits of one full forward| over the generated steps."""
    with torch.no_grad():
        out = model.generate(
            ids,
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
        step_logits = torch.stack(out.logits, 1).double()  # (B, new, V)
        full = model(out.sequences[:, :-1]).logits[:, ids.shape[1] - 1 :].double()
    return max_diff(step_logits, full)


@pytest.mark.parametrize("name", ["phi-3.5-mini-instruct", "llama-dynamic"])
def test_freeze_frequencies_makes_the_kv_cache_consistent(name):
    # a trained length of 16 so that 12 prompt tokens + 10 new ones cross it
    key = {"phi-3.5-mini-instruct": "original_max_position_embeddings", "llama-dynamic": "max_position_embeddings"}
    model = tiny.tiny_model(name, **{key[name]: 16})
    ids = ids_for(seq=12)
    reference_noise = max_diff(tiny.logits(model, ids), tiny.logits(tiny.float64_reference(model), ids))
    with patch(model):
        drifting = decode_vs_full(model, ids, new=10)
    with patch(model, freeze_frequencies=22):
        frozen = decode_vs_full(model, ids, new=10)
    drifting_unpatched = decode_vs_full(model, ids, new=10)
    assert frozen <= 20 * reference_noise  # cached keys and new queries agree
    assert drifting > 100 * frozen and drifting_unpatched > 100 * frozen


@pytest.mark.slow
def test_example_script_runs(capsys):
    import pathlib
    import runpy

    script = pathlib.Path(__file__).resolve().parents[1] / "examples" / "patch_transformers.py"
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "greedy tokens, patched == unpatched: True" in out
    assert "the model is its original self: LlamaRotaryEmbedding" in out


def test_bad_position_ids_are_refused_by_name(models):
    model, _ = models("llama-3.1-8b")
    ids = ids_for()
    with patch(model):
        with pytest.raises(ValueError, match="position_ids"):  # not a silent wrap-around
            tiny.logits(model, ids, positions(0) - 3)
        with pytest.raises(TypeError, match="position_ids"):  # no float positions
            tiny.logits(model, ids, positions(0).float())


# -- what the family's code does, not what its config could mean -------------------------------------------
#: families whose default rope computes and rotates the whole head whatever partial_rotary_factor says
WHOLE_HEAD_FAMILIES = {
    "llama": "codellama-7b",
    "qwen2": "qwen2.5-7b-instruct-yarn",
    "qwen3": "qwen3",
    "mistral": "mistral",
    "gemma": "gemma",
    "gpt_oss": "gpt-oss-20b",
    "falcon": "falcon",
}


def half_rotary_default(name: str):
    """Case ``name`` with the default rope type and ``partial_rotary_factor=0.5``."""
    return tiny.tiny_model(
        name,
        rope_scaling=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    )


@pytest.mark.parametrize("family", sorted(WHOLE_HEAD_FAMILIES))
def test_partial_rotary_factor_follows_the_family_code(family):
    model = half_rotary_default(WHOLE_HEAD_FAMILIES[family])
    assert model.config.model_type == family
    original = next(m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding"))
    head_dim = rotary_kwargs_from_hf(model.config)["head_dim"]
    assert original.inv_freq.numel() == head_dim // 2  # transformers' code: the whole head, factor unused
    ids, pos = ids_for(), positions(0)
    exact = tiny.logits(tiny.float64_reference(model), ids, pos)
    before = tiny.logits(model, ids, pos)
    noise = max_diff(before, exact)
    with patch(model) as handle:
        after = tiny.logits(model, ids, pos)
        assert handle.rope.rotary_dim == head_dim
    assert 0 < noise < 1e-4
    assert max_diff(after, before) <= 4 * noise, (family, max_diff(after, before), noise)
    # the reference is exact: half-width tables would be far from it (a wrong width is not noise)
    assert max_diff(before, exact) <= 4 * noise


def test_partial_rotary_factor_still_applies_where_the_code_uses_it():
    model = tiny.tiny_model("phi-2")  # partial_rotary_factor 0.4: Phi slices the head in its attention
    with patch(model) as handle:
        assert handle.rope.rotary_dim == 32 and handle.rope.head_dim == 80


def test_a_width_the_code_cannot_apply_is_refused_and_nothing_changes():
    # a scaled rope type computes frequencies for int(head_dim * partial_rotary_factor) features, which
    # Mistral's attention then applies to the whole head: transformers' own forward fails
    model = tiny.tiny_model(
        "mistral",
        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6, "partial_rotary_factor": 0.5},
    )
    with pytest.raises(RuntimeError):
        tiny.logits(model, ids_for())
    rotary = model.model.rotary_emb
    with pytest.raises(UnsupportedModelError, match="64 of 128 .* applies them to the whole head"):
        patch(model)  # not a silent half-width rotation
    assert patch_of(model) is None and model.model.rotary_emb is rotary
    assert "forward" not in model.model.layers[0].self_attn.__dict__


def test_config_and_code_widths_that_cannot_be_matched_are_refused():
    model = tiny.tiny_model("mistral", rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6})
    rotary = model.model.rotary_emb
    rotary.inv_freq = rotary.inv_freq[:16]  # a module computing frequencies for 32 features of 128
    with pytest.raises(
        UnsupportedModelError, match="rotated width of 128 of 128 .* computes frequencies for 32 features"
    ):
        patch(model)
    assert patch_of(model) is None and model.model.rotary_emb is rotary
    assert "forward" not in model.model.layers[0].self_attn.__dict__


# -- every rope dict transformers accepts -------------------------------------------------------------------
#: rope dicts as transformers' own test_model_rope_scaling_from_config leaves them: keys the type does not use
LEFTOVER_DICTS = {
    "default": {"rope_type": "default", "rope_theta": 10000.0, "original_max_position_embeddings": 16384},
    "linear": {"rope_type": "linear", "factor": 10.0, "rope_theta": 10000.0, "original_max_position_embeddings": 16384},
    "dynamic": {"rope_type": "dynamic", "factor": 10.0, "rope_theta": 10000.0, "beta_fast": 32.0, "beta_slow": 1.0},
    "linear-after-yarn": {
        "rope_type": "linear",
        "factor": 4.0,
        "rope_theta": 10000.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 1.0,
    },
}


@pytest.mark.parametrize("kind", sorted(LEFTOVER_DICTS))
def test_rope_dicts_with_unused_keys_are_accepted_with_a_warning(kind):
    rope = LEFTOVER_DICTS[kind]
    model = tiny.tiny_model("mistral", rope_parameters=dict(rope))  # transformers builds it (and warns)
    unused = sorted(k for k in rope if k not in ("rope_type", "rope_theta", "factor"))
    ids, pos = ids_for(), positions(0)
    before = tiny.logits(model, ids, pos)
    noise = max_diff(before, tiny.logits(tiny.float64_reference(model), ids, pos))
    with pytest.warns(UserWarning, match=rf"keys the type does not use: {unused!r}".replace("[", r"\[")):
        handle = patch(model)
    with handle:
        after = tiny.logits(model, ids, pos)
    assert max_diff(after, before) <= 4 * noise


@pytest.mark.parametrize(
    "rope, field",
    [
        ({"rope_type": "linear", "factor": -2.0, "rope_theta": 10000.0}, "factor"),
        ({"rope_type": "default", "rope_theta": float("nan")}, "rope_theta"),
        ({"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "beta_fast": "32"}, "beta_fast"),
    ],
)
def test_rope_values_that_make_no_sense_are_still_refused(rope, field):
    model = tiny.tiny_model("mistral")
    model.config.rope_parameters = rope  # set after construction: what a user editing a config does
    with pytest.raises(ValueError, match=field):
        patch(model)
    assert patch_of(model) is None


def test_the_refusal_of_unused_keys_names_an_option_that_exists():
    with pytest.raises(ValueError, match=r"rotary_kwargs_from_hf\(config, strict=False\)") as info:
        rotary_kwargs_from_hf({"head_dim": 64, "rope_parameters": LEFTOVER_DICTS["default"]})
    assert "strict=False" in str(info.value)
    rotary_kwargs_from_hf({"head_dim": 64, "rope_parameters": LEFTOVER_DICTS["default"]}, strict=False)


# -- what users do to patched models ---------------------------------------------------------------------
def _saved_and_loaded(model, before_loading=lambda: None):
    import io

    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    before_loading()
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "phi-2", "gpt-j-6b", "deepseek-v2-lite"])
def test_a_pickled_patched_model_loads_patched(name, monkeypatch):
    from posenc.integrations.transformers import REBUILT_FORWARDS

    model = tiny.tiny_model(name)
    ids = ids_for()
    unpatched = tiny.logits(model, ids)
    patch(model)
    patched = tiny.logits(model, ids)
    # loaded as in a fresh process: the functions are rebuilt from their names
    loaded = _saved_and_loaded(model, lambda: monkeypatch.setattr(REBUILT_FORWARDS, "_built", {}))
    handle = patch_of(loaded)
    assert handle is not None and handle.active and handle.model is loaded
    assert torch.equal(tiny.logits(loaded, ids), patched)  # posenc's rotation, not transformers'
    handle.undo()
    assert torch.equal(tiny.logits(loaded, ids), unpatched)
    assert not any(isinstance(m, PosencRotaryTables) for m in loaded.modules())


@pytest.mark.parametrize("model_type", ["cohere", "glm"])
def test_a_pickled_model_of_a_family_found_from_its_code_loads_patched(model_type, monkeypatch):
    from posenc.integrations.transformers import ARCHITECTURES, REBUILT_FORWARDS

    assert model_type not in ARCHITECTURES  # its stand-ins come from discovery
    model = tiny.tiny_model_of_type(model_type)
    ids = ids_for()
    with torch.no_grad():
        unpatched = model(ids).logits
        patch(model)
        patched = model(ids).logits
        loaded = _saved_and_loaded(model, lambda: monkeypatch.setattr(REBUILT_FORWARDS, "_built", {}))
        assert patch_of(loaded) is not None
        assert torch.equal(loaded(ids).logits, patched)
        patch_of(loaded).undo()
        assert torch.equal(loaded(ids).logits, unpatched)


def test_a_deep_copied_patched_model_is_patched_on_its_own():
    import copy

    model = tiny.tiny_model("llama-3.1-8b")
    ids = ids_for()
    unpatched = tiny.logits(model, ids)
    with patch(model):
        patched = tiny.logits(model, ids)
        twin = copy.deepcopy(model)
    assert torch.equal(tiny.logits(model, ids), unpatched)
    assert torch.equal(tiny.logits(twin, ids), patched)
    patch_of(twin).undo()
    assert torch.equal(tiny.logits(twin, ids), unpatched)


@pytest.mark.parametrize(
    "casts",
    [
        [lambda m: m.half()],
        [lambda m: m.to(torch.bfloat16), lambda m: m.float()],
        [lambda m: m.double()],
    ],
    ids=["half", "bf16-then-float", "double"],
)
def test_undo_after_casts_equals_the_same_casts_unpatched(casts):
    patched, never = tiny.tiny_model("llama-3.1-8b"), tiny.tiny_model("llama-3.1-8b")
    handle = patch(patched)
    for cast in casts:
        cast(patched)
        cast(never)
    handle.undo()
    buffers, expected = dict(patched.named_buffers()), dict(never.named_buffers())
    assert buffers.keys() == expected.keys() and buffers
    for key in expected:
        assert buffers[key].dtype == expected[key].dtype, key
        assert torch.equal(buffers[key], expected[key]), key
    ids = ids_for()
    with torch.no_grad():
        assert torch.equal(patched(ids).logits, never(ids).logits)


# -- one position rule on every path ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [[-1, 0, 1, 2], [-1, 0, 1, 40000], [-1, 0, 1, 2**40], [-(2**63), 0, 1, 2], [3, -(2**63), 0, 2**62]],
    ids=["short", "past-cache", "far", "int64-min", "int64-min-far"],
)
def test_negative_positions_are_refused_inside_and_past_the_cache(bad):
    model = tiny.tiny_model("llama-3.1-8b")
    with patch(model):
        with pytest.raises(ValueError, match=r"position_ids must be >= 0, got -\d+ at index"):
            model.model.rotary_emb(torch.zeros(1), torch.tensor([bad]))


def test_positions_past_the_cache_are_exact_and_bounded():
    from posenc.rope.tables import rope_cos_sin

    model = tiny.tiny_model("llama-3.1-8b")
    with patch(model) as handle:
        rope = handle.rope
        far = torch.tensor([[0, 5, 2**20, 2**40, 2**62]])
        cos, sin = model.model.rotary_emb(torch.zeros(1), far)
        inv_freq, factor = rope.frequencies()
        exact_cos, exact_sin = rope_cos_sin(far, inv_freq, factor)
        assert torch.equal(cos, exact_cos) and torch.equal(sin, exact_sin)
        assert rope.cached_length <= rope.cache_limit  # the rope's one cache policy, not a second one


# -- dynamic NTK as transformers runs it ---------------------------------------------------------------------
def test_dynamic_ntk_keeps_the_largest_length_as_transformers_does():
    """transformers' dynamic rope keeps the frequencies of the largest length seen (and goes back to the
    trained ones below the trained length): call for call, the patched tables are the same."""
    model = tiny.tiny_model("llama-dynamic", max_position_embeddings=16)
    original = model.model.rotary_emb
    x = torch.zeros(1)
    with patch(model):
        tables = model.model.rotary_emb
        for length in (10, 40, 20, 30, 16, 12, 24, 17):  # grow, shorter, trained, reset, grow again
            pos = torch.arange(length)[None]
            expected_cos, expected_sin = original(x, pos)
            cos, sin = tables(x, pos)
            half = cos.shape[-1]
            assert max_diff(cos, expected_cos[..., :half]) < 2e-6, length
            assert max_diff(sin, expected_sin[..., :half]) < 2e-6, length


def test_dynamic_ntk_logits_follow_transformers_call_for_call():
    model = tiny.tiny_model("llama-dynamic", max_position_embeddings=16)
    ref = tiny.float64_reference(model)
    lengths = (12, 40, 20, 12)  # the call at 20 uses length 40's frequencies; 12 resets
    unpatched = [tiny.logits(model, ids_for(seq=n)) for n in lengths]
    # float32 noise where every run uses one call's own length (the first two calls)
    noise = max(max_diff(tiny.logits(ref, ids_for(seq=n)), u) for n, u in zip(lengths[:2], unpatched))
    fresh = tiny.tiny_model("llama-dynamic", max_position_embeddings=16)  # no lengths seen yet
    with patch(fresh):
        patched = [tiny.logits(fresh, ids_for(seq=n)) for n in lengths]
    for n, a, b in zip(lengths, patched, unpatched):
        assert max_diff(a, b) <= 4 * noise, (n, max_diff(a, b), noise)


# -- nothing the user holds is changed -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, projection", [("llama-3.1-8b", "k_proj"), ("falcon", "query_key_value"), ("gpt-j-6b", "k_proj")]
)
def test_a_hooked_projection_output_is_not_rotated_in_place(name, projection):
    model = tiny.tiny_model(name)
    seen = []

    def keep(module, args, output):
        seen.append((output, output.clone()))

    layer = next(m for n, m in model.named_modules() if n.endswith(projection))
    hook = layer.register_forward_hook(keep)
    try:
        with patch(model), torch.no_grad():
            model(ids_for())
    finally:
        hook.remove()
    assert seen
    for held, copy_at_the_time in seen:
        assert torch.equal(held, copy_at_the_time)


# -- every branch of the rotation ------------------------------------------------------------------------------
def test_seq_first_rotation_matches_transformers_unsqueeze_dim_2():
    from transformers.models.llama import modeling_llama

    from posenc.integrations.transformers import STYLES

    model = tiny.tiny_model("llama-3.1-8b")
    b, s, h, d = 2, 7, 3, model.config.head_dim
    gen = torch.Generator().manual_seed(5)
    q, k = torch.randn(b, s, h, d, generator=gen), torch.randn(b, s, 1, d, generator=gen)
    pos = torch.arange(3, 3 + s)[None]
    cos, sin = model.model.rotary_emb(q, pos)
    expected = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
    with patch(model):
        half_cos, half_sin = model.model.rotary_emb(q, pos)
    got = STYLES["pair"]("half")(q, k, half_cos, half_sin, unsqueeze_dim=2)
    for a, e in zip(got, expected):
        assert a.shape == e.shape
        assert max_diff(a, e) < 1e-5


def test_a_float64_model_gets_float64_tables():
    model = tiny.tiny_model("llama-3.1-8b").double()
    ids, pos = ids_for(), positions(1000)
    exact = tiny.logits(tiny.float64_reference(model), ids, pos)  # float64 throughout, exact angles
    with patch(model) as handle:
        cos, _ = model.model.rotary_emb(torch.zeros(1, dtype=torch.float64), pos)
        after = tiny.logits(model, ids, pos)
    assert handle.rope.table_dtype == torch.float64 and cos.dtype == torch.float64
    assert max_diff(after, exact) < 1e-10  # float32 tables would be ~1e-7 away


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default", "rope_theta": 10000.0},
        {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
        {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0, "original_max_position_embeddings": 64},
    ],
    ids=["default", "linear", "yarn"],
)
def test_the_replacement_is_built_from_a_config_as_the_family_module_is(rope):
    """transformers' ``test_model_rope_scaling_frequencies`` builds ``type(model.model.rotary_emb)(config=...)``
    with one rope dict after another and compares the tables: the replacement builds the same way
    (keyword or positional config, optional device) and gives the family's own tables."""
    model = tiny.tiny_model("llama-3.1-8b")
    config = model.config
    family_class = type(model.model.rotary_emb)
    x, pos = torch.zeros(1), torch.arange(0, 300, 7)[None]
    with patch(model):  # then the config changes, as in that test (patch refuses a model built otherwise)
        config.rope_parameters = dict(rope)
        expected_cos, expected_sin = family_class(config=config)(x, pos)
        cls = type(model.model.rotary_emb)
        for rebuilt in (cls(config=config), cls(config), cls(config=config, device="cpu")):
            cos, sin = rebuilt(x, pos)
            half = cos.shape[-1]
            assert max_diff(cos, expected_cos[..., :half]) < 1e-4
            assert max_diff(sin, expected_sin[..., :half]) < 1e-4
    with pytest.raises(TypeError, match="rope .* or config"):
        PosencRotaryTables()


integration = __import__("posenc.integrations.transformers", fromlist=["patch"])


@pytest.mark.parametrize("version", ["4.45.2", "4.57.5", "3.0.0"])
def test_transformers_older_than_tested_is_refused_by_version(version, monkeypatch):
    model = tiny.tiny_model("llama-3.1-8b")
    rotary = model.model.rotary_emb
    monkeypatch.setattr(integration, "_transformers_version", lambda: version)
    with pytest.raises(UnsupportedModelError, match=rf"tested with transformers 4\.57\.6 and later; this is {version}"):
        patch(model)
    assert patch_of(model) is None and model.model.rotary_emb is rotary


@pytest.mark.parametrize("version", ["4.57.6", "5.0.0", "5.25.0.dev0"])
def test_tested_transformers_versions_are_accepted(version, monkeypatch):
    model = tiny.tiny_model("llama-3.1-8b")
    monkeypatch.setattr(integration, "_transformers_version", lambda: version)
    with patch(model) as handle:
        assert handle.active


# -- a listed family is held to what its rotary module computes, not to what its config says -------------
def _untouched(model, rotary) -> bool:
    attention = [m for m in model.modules() if "forward" in m.__dict__]
    return patch_of(model) is None and not attention and rotary in list(model.modules())


#: config edits made after the model was built: the rotary module keeps the tables it was built with
EDITED_CONFIGS = {
    "llama-linear-added": ("llama-3.1-8b", lambda c: c.rope_parameters.update(rope_type="linear", factor=4.0)),
    "llama-theta": ("llama-3.1-8b", lambda c: c.rope_parameters.update(rope_theta=10000.0)),
    "deepseek-v2-theta": ("deepseek-v2-lite", lambda c: c.rope_parameters.update(rope_theta=500.0)),  # complex form
    "mistral-theta": ("mistral", lambda c: c.rope_parameters.update(rope_theta=10000.0)),
}


@pytest.mark.parametrize("edit", sorted(EDITED_CONFIGS))
def test_a_config_edited_after_the_model_was_built_is_refused_and_nothing_changes(edit):
    name, change = EDITED_CONFIGS[edit]
    model = tiny.tiny_model(name)
    ids = ids_for()
    before = tiny.logits(model, ids)
    change(model.config)
    assert torch.equal(tiny.logits(model, ids), before)  # the model still runs the tables it was built with
    rotary = next(m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding"))
    with pytest.raises(UnsupportedModelError, match=r"cos/sin differ from posenc's tables .* by \d"):
        patch(model)
    assert _untouched(model, rotary)
    assert torch.equal(tiny.logits(model, ids), before)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v2-lite", "gpt-j-6b"])
def test_an_unedited_listed_family_passes_its_table_check_and_patches_exactly(name):
    model = tiny.tiny_model(name)
    ids = ids_for()
    before = tiny.logits(model, ids)
    noise = max_diff(before, tiny.logits(tiny.float64_reference(model), ids))
    with patch(model):
        assert max_diff(tiny.logits(model, ids), before) <= 4 * noise


@pytest.mark.parametrize("name", ["llama-dynamic", "phi-3.5-mini-instruct"])
def test_length_dependent_tables_are_checked_past_the_trained_length(name):
    """Dynamic NTK and LongRoPE agree with the trained frequencies at positions 0..15 whatever their
    scaling: the check also makes a call past the trained length, where their frequencies change."""
    model = tiny.tiny_model(name)
    rotary = model.model.rotary_emb
    state = {k: v for k, v in vars(rotary).items() if not k.startswith("_")}
    buffers = {k: v.clone() for k, v in rotary.named_buffers()}
    patch(model).undo()  # accepted as built; the check ran on a copy: the module's cached state is as it was
    assert {k: v for k, v in vars(rotary).items() if not k.startswith("_")} == state
    assert all(torch.equal(v, buffers[k]) for k, v in rotary.named_buffers())
    rotary.rope_type = "default"  # the module no longer scales past the trained length; short calls are as before
    with pytest.raises(UnsupportedModelError, match=r"at positions 0\.\.15 and \d+"):
        patch(model)
    assert _untouched(model, rotary)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ["llama-dynamic", "phi-3.5-mini-instruct"])
def test_the_long_probe_allows_for_float32_angles_in_any_dtype(name, dtype):
    # a float64 model's module still forms its angles in float32: at 2 * the trained length they are
    # off by about 1e-3, which is rounding, not a different model (it was refused at 1e-5)
    patch(tiny.tiny_model(name).to(dtype)).undo()


@pytest.mark.parametrize("name", ["llama-dynamic", "phi-3.5-mini-instruct", "gpt-j-6b", "deepseek-v2-lite"])
def test_a_listed_family_built_on_the_meta_device_is_checked_and_patched(name):
    """On the meta device a module is checked as its class rebuilds it from its config (GPT-J's table
    module keeps none: its table is made from the config when the weights are)."""
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(tiny.tiny_config(name))
        patch(model).undo()


def test_a_dynamic_model_that_ran_long_calls_before_the_patch_is_accepted_and_follows_on():
    model = tiny.tiny_model("llama-dynamic", max_position_embeddings=16)
    twin = tiny.tiny_model("llama-dynamic", max_position_embeddings=16)  # same seed, same weights
    for m in (model, twin):
        tiny.logits(m, ids_for(seq=80))  # its module now keeps the frequencies of length 80
    rotary = model.model.rotary_emb
    noise = max_diff(tiny.logits(twin, ids_for(seq=80)), tiny.logits(tiny.float64_reference(twin), ids_for(seq=80)))
    with patch(model):  # the check's short and long calls ran on a copy of the module
        # a call of length 20 uses length 80's frequencies in transformers (the largest seen): patched too
        assert max_diff(tiny.logits(model, ids_for(seq=20)), tiny.logits(twin, ids_for(seq=20))) <= 4 * noise
    assert rotary.max_seq_len_cached == 80


# -- one rope dict per layer type: the width and the warnings as for one dict -----------------------------
#: Gemma 3's default dicts with partial_rotary_factor: its default frequencies cover the whole head anyway
GEMMA3_PARTIAL = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "full_attention": {"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5},
}


def _float64_noise(model, ids, before) -> float:
    """The model's float32 distance from its own float64 copy (the yardstick of the coverage test)."""
    import copy

    return max_diff(before, tiny.logits(copy.deepcopy(model).double(), ids)) + 1e-6


def test_a_layer_type_dict_with_partial_rotary_factor_follows_the_family_code():
    from posenc.inspect import inspect_config

    model = tiny.tiny_model_of_type("gemma3_text", rope_parameters=GEMMA3_PARTIAL)
    rotary = model.model.rotary_emb
    head_dim = model.config.head_dim
    assert all(2 * getattr(rotary, f"{k}_inv_freq").numel() == head_dim for k in GEMMA3_PARTIAL)  # the code's width
    ids = ids_for()
    before = tiny.logits(model, ids)
    noise = _float64_noise(model, ids, before)
    with patch(model) as handle:  # it was refused: posenc read head_dim // 2 from the dicts
        assert max_diff(tiny.logits(model, ids), before) <= 4 * noise
        assert {r.rotary_dim for r in handle.ropes} == {head_dim}
        rebuilt = type(model.model.rotary_emb)(config=model.config)  # as transformers' tests rebuild it
        x, pos = torch.zeros(1), torch.arange(0, 40, 3)[None]
        for layer_type in GEMMA3_PARTIAL:
            cos, sin = rebuilt(x, pos, layer_type)
            own_cos, own_sin = rotary(x, pos, layer_type)
            assert 2 * cos.shape[-1] == own_cos.shape[-1] == head_dim
            half = head_dim // 2
            assert max_diff(cos, own_cos[..., :half]) < 1e-5 and max_diff(sin, own_sin[..., :half]) < 1e-5
    for layer_type in GEMMA3_PARTIAL:
        report = inspect_config(model.config, layer_type=layer_type)
        assert report["rotary_dim"] == head_dim, layer_type
        assert f"the width here is the code's ({head_dim})" in report["rotary_dim_note"]


def test_unused_keys_of_a_layer_type_dict_are_accepted_with_a_warning():
    dicts = {k: dict(v) for k, v in GEMMA3_PARTIAL.items()}
    for d in dicts.values():
        d.pop("partial_rotary_factor")
    dicts["full_attention"]["beta_fast"] = 32.0  # a yarn key left over: transformers warns and ignores it
    model = tiny.tiny_model_of_type("gemma3_text", rope_parameters=dicts)
    ids = ids_for()
    before = tiny.logits(model, ids)
    noise = _float64_noise(model, ids, before)
    said = r"dict for 'full_attention' layers has keys the type does not use: \['beta_fast'\]"
    with pytest.warns(UserWarning, match=said):
        handle = patch(model)
    with handle:
        assert max_diff(tiny.logits(model, ids), before) <= 4 * noise
