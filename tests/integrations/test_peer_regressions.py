"""What transformers' own model tests found, each in a few lines without their test tree.

``benchmarks/peer/compare.py`` runs transformers' ``test_modeling_<family>.py`` files with and without
:func:`posenc.integrations.transformers.patch` on every model they build. Each test here is the
smallest reproduction of a test that passed without the patch and failed with it, on a tiny random
Llama (the families share the code paths involved), kept as a regression test now that it passes.
The peer test each one stands for is named in its docstring.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

transformers = pytest.importorskip("transformers")

from posenc.integrations.transformers import patch  # noqa: E402  (after the importorskip above)

transformers.logging.set_verbosity_error()


#: the sizes of transformers' own tiny test models (vocabulary 99, width 32, MLP 37), 2 layers, 64 positions
TINY = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2, max_position_embeddings=64)


def tiny_llama_config(**rope) -> "transformers.LlamaConfig":
    config = transformers.LlamaConfig(**TINY, num_attention_heads=4, num_key_value_heads=2)
    if rope:
        config.rope_parameters = {"rope_theta": 10_000.0, **rope}
    return config


def tiny_llama(config) -> "transformers.LlamaModel":
    torch.manual_seed(0)
    return transformers.LlamaModel(config).eval()


IDS = torch.randint(1, 99, (2, 12), generator=torch.Generator().manual_seed(1))


def compiled_graphs(model, *inputs, **kwargs):
    """(outputs, graphs): ``model`` compiled with ``fullgraph=True``, each input run through it."""
    graphs = []

    def count_graphs(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend=count_graphs, fullgraph=True)
        with torch.no_grad():
            outs = [compiled(ids, position_ids=pos, **kwargs).last_hidden_state for ids, pos in inputs]
    finally:
        torch._dynamo.reset()
    return outs, graphs


def test_compile_fullgraph_traces_a_patched_model_as_one_graph():
    """``test_generate_compile_model_forward_fullgraph``: ``torch.compile(fullgraph=True)`` must trace a
    patched model as it traces the unpatched one (as many graphs, no data-dependent branch), with the
    same output, and stay exact at far positions: the rows are formed in the graph, not read from a
    cache whose size the graph would have to check."""
    model = tiny_llama(tiny_llama_config())
    near = torch.arange(12).unsqueeze(0)
    far = near + 2**33  # past any cache
    _, unpatched_graphs = compiled_graphs(model, (IDS, near))
    with patch(model), torch.no_grad():
        eager = [model(IDS, position_ids=pos).last_hidden_state for pos in (near, far)]
        got, graphs = compiled_graphs(model, (IDS, near), (IDS, far))
    assert len(unpatched_graphs) == 1
    assert len(graphs) == len(unpatched_graphs)
    for out, expected in zip(got, eager):
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_a_compiled_patched_model_keeps_the_position_rules():
    """The rule eager code applies with a read-back (positions >= 0) is an assertion in the graph."""
    model = tiny_llama(tiny_llama_config())
    with patch(model), pytest.raises(RuntimeError, match="position_ids must be >= 0"):
        compiled_graphs(model, (IDS, torch.tensor([[0, 1, 2, -1] * 3])))


@pytest.mark.parametrize(
    "rope",
    [
        # a default dict with a key only scaled types use: transformers warns and ignores it
        {"rope_type": "default", "original_max_position_embeddings": 16384},
        # a linear dict with that key left over from the dict it was updated from
        {"rope_type": "linear", "factor": 10.0, "original_max_position_embeddings": 16384},
    ],
    ids=["default+original_max", "linear+original_max"],
)
def test_patch_accepts_rope_dicts_transformers_accepts(rope):
    """``test_model_rope_scaling_from_config_{linear,dynamic,yarn}``: those tests update one rope dict
    into the next, so keys of one type remain in the next; transformers builds and runs such a model,
    so the patch must too, with the same output."""
    model = tiny_llama(tiny_llama_config(**rope))
    with torch.no_grad():
        expected = model(IDS).last_hidden_state
        with patch(model):
            out = model(IDS).last_hidden_state
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_replaced_rotary_module_can_be_rebuilt_from_a_config():
    """``test_model_rope_scaling_frequencies``: code that finds a model's rotary module and builds
    another of the same class with ``type(module)(config=config)`` must get a working module, one
    that agrees with the patched model's own."""
    config = tiny_llama_config()
    model = tiny_llama(config)
    positions = torch.arange(20).unsqueeze(0)
    x = torch.zeros(1)
    with patch(model):
        installed = model.rotary_emb
        rebuilt = type(installed)(config=config)
        expected = installed(x, positions)
        got = rebuilt(x, positions)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def tiny_phi3_config() -> "transformers.Phi3Config":
    return transformers.Phi3Config(
        **TINY, num_attention_heads=4, num_key_value_heads=2, original_max_position_embeddings=16, pad_token_id=0
    )


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "yarn", "factor": 10.0, "rope_theta": 10_000.0},
        # a LongRoPE dict updated to yarn: its factor lists stay behind, unused
        {"rope_type": "yarn", "factor": 10.0, "short_factor": [1.0] * 4, "long_factor": [3.0] * 4},
    ],
    ids=["yarn", "yarn+longrope_lists"],
)
def test_a_built_phi3_config_set_to_yarn_is_yarn(rope):
    """``test_model_rope_scaling_frequencies`` and ``test_model_rope_scaling_from_config_2_yarn`` on
    Phi-3: transformers translates Phi-3's ``"yarn"`` to LongRoPE when it builds a config from its
    fields, but a ``"yarn"`` set on a built config is what its rotary module runs: YaRN. The patched
    model and a rotary module rebuilt from the config must give transformers' numbers, not refuse the
    dict as a LongRoPE one without factor lists."""
    config = tiny_phi3_config()
    config.rope_parameters = {**config.rope_parameters, **rope}
    torch.manual_seed(0)
    model = transformers.Phi3Model(config).eval()
    reference = model.rotary_emb
    assert reference.rope_type == "yarn"
    ids = torch.randint(1, 99, (2, 24), generator=torch.Generator().manual_seed(1))  # past the trained 16
    positions = torch.arange(24).unsqueeze(0)
    x = torch.zeros(1)
    with torch.no_grad():
        expected = model(ids).last_hidden_state
        expected_cos, expected_sin = reference(x, positions)
        with patch(model):
            out = model(ids).last_hidden_state
            installed = model.rotary_emb
            rebuilt = type(installed)(config=config)
            assert installed.rope.scaling.rope_type == "yarn"
            for module in (installed, rebuilt):
                cos, sin = module(x, positions)  # one value per pair; transformers' repeats them twice
                torch.testing.assert_close(torch.cat((cos, cos), -1), expected_cos, rtol=1e-6, atol=1e-6)
                torch.testing.assert_close(torch.cat((sin, sin), -1), expected_sin, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def tiny_gemma3_config() -> "transformers.Gemma3TextConfig":
    layers = dict(layer_types=["sliding_attention", "full_attention"], sliding_window=8)
    return transformers.Gemma3TextConfig(
        **TINY, num_attention_heads=4, num_key_value_heads=2, head_dim=8, pad_token_id=0, **layers
    )


def tiny_gemma3(config) -> "transformers.Gemma3TextModel":
    torch.manual_seed(0)
    return transformers.Gemma3TextModel(config).eval()


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default"},
        {"rope_type": "linear", "factor": 10.0},
        {"rope_type": "dynamic", "factor": 10.0},
        {"rope_type": "yarn", "factor": 10.0},
    ],
    ids=["default", "linear", "dynamic", "yarn"],
)
def test_gemma3_replaced_rotary_module_can_be_rebuilt_from_a_config(rope):
    """``Gemma3TextModelTest::test_model_rope_scaling_frequencies``: the per-layer-type replacement
    of Gemma 3's rotary module, rebuilt with ``type(module)(config=config)``, gives each layer type's
    cos/sin and ``<layer_type>_inv_freq`` as ``Gemma3RotaryEmbedding(config=config)`` does, for a
    config whose rope dicts were set after it was built (the test's way), positions past the
    trained length included."""
    model = tiny_gemma3(tiny_gemma3_config())
    config = tiny_gemma3_config()
    config.rope_parameters = {
        "full_attention": {**rope, "rope_theta": 1_000_000.0},
        "sliding_attention": {**rope, "rope_theta": 10_000.0},
    }
    positions = torch.arange(96).unsqueeze(0)  # past max_position_embeddings = 64
    x = torch.zeros(1)
    with patch(model), torch.no_grad():
        rebuilt = type(model.rotary_emb)(config=config)
        reference = transformers.models.gemma3.modeling_gemma3.Gemma3RotaryEmbedding(config=config)
        assert rebuilt.layer_types == reference.layer_types == ["full_attention", "sliding_attention"]
        for layer_type in reference.layer_types:
            expected_cos, expected_sin = reference(x, positions, layer_type=layer_type)
            cos, sin = rebuilt(x, positions, layer_type=layer_type)  # one value per pair
            torch.testing.assert_close(torch.cat((cos, cos), -1), expected_cos, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(torch.cat((sin, sin), -1), expected_sin, rtol=1e-5, atol=1e-5)
            inv_freq = getattr(rebuilt, f"{layer_type}_inv_freq")
            torch.testing.assert_close(inv_freq.float(), getattr(reference, f"{layer_type}_original_inv_freq"))
    with pytest.raises(AttributeError):
        _ = rebuilt.other_attention_inv_freq  # a layer type it has no tables for


@pytest.mark.parametrize(
    "plain",
    [
        {"rope_type": "yarn", "factor": 10.0, "rope_theta": 10_000.0, "original_max_position_embeddings": 16384},
        {"rope_type": "default", "rope_theta": 10_000.0, "original_max_position_embeddings": 16384},
    ],
    ids=["yarn", "default"],
)
def test_gemma3_plain_keys_beside_layer_type_dicts_change_nothing(plain):
    """``Gemma3Vision2TextModelTest::test_model_rope_scaling_from_config_*``: the test updates Gemma 3's
    per-layer-type rope dict with plain keys, which transformers' per-layer-type code never reads
    (each layer type reads ``rope_parameters[layer_type]``). The patch must take such a model, warn
    that the keys change nothing, and give the unpatched model's output; before, it was refused."""
    config = tiny_gemma3_config()
    config.rope_parameters.update(plain)
    model = tiny_gemma3(config)
    ids = torch.randint(1, 99, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(ids).last_hidden_state
        with pytest.warns(UserWarning, match="beside its per-layer-type dicts"):
            handle = patch(model)
        with handle:
            out = model(ids).last_hidden_state
            bases = {k: t.rope.base for k, t in model.rotary_emb.tables.items()}
            scalings = {k: t.rope.scaling for k, t in model.rotary_emb.tables.items()}
    assert bases == {"sliding_attention": 10_000.0, "full_attention": 1_000_000.0}
    assert scalings == {"sliding_attention": None, "full_attention": None}
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


# -- Qwen2-VL (M-RoPE) ---------------------------------------------------------------------------------
def tiny_qwen2_vl_text(**rope) -> "transformers.Qwen2VLTextModel":
    rope = {"rope_type": "default", "rope_theta": 10_000.0, "mrope_section": [2, 3, 3], **rope}
    config = transformers.Qwen2VLTextConfig(**TINY, num_attention_heads=2, num_key_value_heads=1, rope_parameters=rope)
    torch.manual_seed(0)
    return transformers.Qwen2VLTextModel(config).eval()


def test_qwen2_vl_accepts_one_position_stream_for_all_three():
    """Qwen2VLModelTest::test_generate_continue_from_past_key_values: position ids of shape
    (1, batch, seq) are one stream broadcast to all three, as transformers' module broadcasts them;
    the patched model refused them."""
    model = tiny_qwen2_vl_text()
    ids = IDS[:, :5]
    positions = torch.arange(3, 8).expand(1, 2, -1)
    with torch.no_grad():
        want = model(ids, position_ids=positions).last_hidden_state
        cos_want, sin_want = model.rotary_emb(torch.zeros(1), positions)
        with patch(model):
            got = model(ids, position_ids=positions).last_hidden_state
            cos, sin = model.rotary_emb(torch.zeros(1), positions)
    assert cos.shape == cos_want.shape[:-1] + (cos_want.shape[-1] // 2,)
    torch.testing.assert_close(torch.cat([cos, cos], -1), cos_want)
    torch.testing.assert_close(torch.cat([sin, sin], -1), sin_want)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rope", [{"rope_type": "linear", "factor": 10.0}, {"rope_type": "yarn", "factor": 10.0}])
def test_qwen2_vl_replaced_rotary_module_can_be_rebuilt_from_a_config(rope):
    """Qwen2VLModelTest::test_model_rope_scaling_frequencies: the replacement found as the model's
    ``rotary_emb``, rebuilt by its class from a config, gives the M-RoPE tables of transformers'
    module built from that config, with the stream of each pair; it gave unselected (3, batch, seq) tables."""
    model = tiny_qwen2_vl_text()
    original_class = type(model.rotary_emb)
    config = copy.deepcopy(model.config)
    config.rope_parameters = {"rope_theta": 10_000.0, "mrope_section": [2, 3, 3], **rope}
    positions = torch.stack([torch.arange(40), torch.arange(40) // 2, torch.arange(40) // 3])[:, None]
    with patch(model):
        replacement_class = type(model.rotary_emb)
        assert list(inspect.signature(replacement_class.__init__).parameters)[1] == "config"  # after self
        rebuilt = replacement_class(config=config)
    want_cos, want_sin = original_class(config=config)(torch.zeros(1), positions)
    cos, sin = rebuilt(torch.zeros(1), positions)
    torch.testing.assert_close(torch.cat([cos, cos], -1), want_cos)
    torch.testing.assert_close(torch.cat([sin, sin], -1), want_sin)
    torch.testing.assert_close(rebuilt.inv_freq, original_class(config=config).inv_freq)


def test_qwen2_vl_patched_on_the_meta_device_gets_its_streams_back():
    """Qwen2VLModelTest::test_init_weights_can_init_buffers and test_all_tensors_are_parameter_or_buffer:
    a model built and patched on the meta device, then ``to_empty()`` + ``init_weights()``, must have
    the buffers it has when built on the CPU; the streams of the M-RoPE tables were left as
    uninitialised memory (read as out-of-range stream indices)."""
    reference = tiny_qwen2_vl_text()
    with torch.device("meta"):
        model = transformers.Qwen2VLTextModel(reference.config)
        patch(model)
    model.to_empty(device="cpu")
    model.init_weights()
    model.load_state_dict(reference.state_dict())
    model.eval()
    patch(reference)
    assert torch.equal(model.rotary_emb.streams, reference.rotary_emb.streams)
    positions = torch.stack([torch.arange(6), torch.arange(6) // 2, torch.arange(6) // 3])[:, None].expand(3, 2, 6)
    with torch.no_grad():
        got = model(IDS[:, :6], position_ids=positions).last_hidden_state
        want = reference(IDS[:, :6], position_ids=positions).last_hidden_state
    assert torch.equal(got, want)
    model.half()  # a cast keeps them too
    assert torch.equal(model.rotary_emb.streams, reference.rotary_emb.streams)


def _compare_module():
    import importlib.util
    import pathlib
    import sys

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "peer" / "compare.py"
    spec = importlib.util.spec_from_file_location("peer_compare", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_compare_reads_a_test_module_that_did_not_import_as_not_run(tmp_path):
    """A peer run without httpx in its venv: the family's test module failed to import in both modes,
    pytest recorded one collection error each, and compare.py counted 0 tests that pass plain and fail
    patched, a green row for a family where nothing ran. It is now "not run" and fails the command."""
    compare = _compare_module()
    error = (
        '<testsuites><testsuite name="pytest" errors="1" failures="0" skipped="0" tests="1">'
        '<testcase classname="" name="tests.models.qwen3_moe.test_modeling_qwen3_moe" time="0.000">'
        "<error message=\"collection failure\">ModuleNotFoundError: No module named 'httpx'</error>"
        "</testcase></testsuite></testsuites>"
    )
    passed = (
        '<testsuites><testsuite name="pytest" tests="1"><testcase classname="tests.models.llama.'
        'test_modeling_llama.LlamaModelTest" name="test_config" time="0.1"/></testsuite></testsuites>'
    )
    runs = {}
    for mode, text in (("plain", error), ("patched", error)):
        (tmp_path / f"{mode}.xml").write_text(text)
        runs[mode] = compare.read_junit(tmp_path / f"{mode}.xml")
    broken = compare.FamilyResult("qwen3_moe", runs)
    assert broken.regressions() == [] and broken.not_run() == ["plain", "patched"]
    table = compare.markdown([broken])
    assert "| not run (plain, patched) |" in table and "collection failure" in table
    (tmp_path / "ok.xml").write_text(passed)
    fine = compare.FamilyResult("llama", {m: compare.read_junit(tmp_path / "ok.xml") for m in compare.MODES})
    assert fine.not_run() == [] and "| llama | 1 / 0 / 0 | 1 / 0 / 0 | 0 |" in compare.markdown([fine])
