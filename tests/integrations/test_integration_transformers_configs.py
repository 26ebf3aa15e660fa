"""How posenc's ``transformers`` patch reads a family's config: partial rotary widths as the family's code
applies them, rope dicts with unused keys, dynamic NTK as ``transformers`` calls it, per-layer-type rope
dicts, configs edited after the model was built, and the ``transformers`` versions it accepts.

Every case is a tiny random model (2 layers, small width) whose rope fields are copied from a real
config (:mod:`posenc.testing`); nothing is downloaded.
"""

from __future__ import annotations

import pytest
import torch
from integration_support import ids_for, max_diff, positions

transformers = pytest.importorskip("transformers")

from posenc import testing as tiny  # noqa: E402  (after the importorskip above)
from posenc.hf import rotary_kwargs_from_hf  # noqa: E402
from posenc.integrations.transformers import (  # noqa: E402
    UnsupportedModelError,
    patch,
    patch_of,
)

transformers.logging.set_verbosity_error()


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
def test_an_unedited_family_passes_its_table_check_and_patches_exactly(name):
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
def test_a_family_built_on_the_meta_device_is_checked_and_patched(name):
    """On the meta device a module is checked as its class rebuilds it from its config (GPT-J's table
    module keeps none: it is rebuilt from the model's)."""
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
