"""posenc inside real ``transformers`` models: parity, long-position accuracy, generation,
scope, and a patch that survives pickling, copies and casts; how each family's config is read is in
``test_integration_transformers_configs``.

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
from integration_support import ids_for, max_diff, positions

transformers = pytest.importorskip("transformers")

from posenc import testing as tiny  # noqa: E402  (after the importorskip above)
from posenc.integrations.transformers import (  # noqa: E402
    PosencRotaryTables,
    UnsupportedModelError,
    patch,
    patch_of,
    supported_model_types,
    unpatch,
)

transformers.logging.set_verbosity_error()


CASES = tiny.case_names()


LONG_OFFSETS = (131072, 1048576)  # 128k and 1M: position_ids = offset + arange(SEQ)


#: GPT-J's (and CodeGen's) own table stops at n_positions (2048): unpatched, it cannot run at long positions at all
TABLE_BOUND = {"gpt-j-6b", "codegen-350m"}


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


def test_every_case_is_a_family_the_probe_reads():
    families = {tiny.case_fields(name)[0] for name in CASES}
    assert families <= set(supported_model_types())


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
    module = __import__("transformers.models.llama.modeling_llama", fromlist=["x"])
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


@pytest.mark.parametrize("name", ["phi-3.5-mini-instruct", "llama-dynamic"])
def test_freeze_frequencies_makes_the_kv_cache_consistent(name):
    # a trained length of 16 so that 12 prompt tokens + 10 new ones cross it
    key = {"phi-3.5-mini-instruct": "original_max_position_embeddings", "llama-dynamic": "max_position_embeddings"}
    model = tiny.tiny_model(name, **{key[name]: 16})
    ids = ids_for(seq=12)
    reference_noise = max_diff(tiny.logits(model, ids), tiny.logits(tiny.float64_reference(model), ids))
    with patch(model):
        drifting = tiny.decode_vs_full(model, ids, new=10)
    with patch(model, freeze_frequencies=22):
        frozen = tiny.decode_vs_full(model, ids, new=10)
    drifting_unpatched = tiny.decode_vs_full(model, ids, new=10)
    assert frozen <= 20 * reference_noise  # cached keys and new queries agree
    assert drifting > 100 * frozen and drifting_unpatched > 100 * frozen


@pytest.mark.slow
def test_example_script_runs(capsys):
    import pathlib
    import runpy

    script = pathlib.Path(__file__).resolve().parents[2] / "examples" / "patch_transformers.py"
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
    from posenc.integrations.transformers import REBUILT_FORWARDS

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


def test_seq_first_rotation_matches_transformers_unsqueeze_dim_2():
    from transformers.models.llama import modeling_llama

    from posenc.integrations import discovery
    from posenc.integrations.transformers import stand_in

    model = tiny.tiny_model("llama-3.1-8b")
    b, s, h, d = 2, 7, 3, model.config.head_dim
    gen = torch.Generator().manual_seed(5)
    q, k = torch.randn(b, s, h, d, generator=gen), torch.randn(b, s, 1, d, generator=gen)
    pos = torch.arange(3, 3 + s)[None]
    cos, sin = model.model.rotary_emb(q, pos)
    expected = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=2)
    with patch(model):
        half_cos, half_sin = model.model.rotary_emb(q, pos)
    found, _ = discovery.classify_function(modeling_llama.apply_rotary_pos_emb)
    got = stand_in(found, modeling_llama.apply_rotary_pos_emb)(q, k, half_cos, half_sin, unsqueeze_dim=2)
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
