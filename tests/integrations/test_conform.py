"""posenc conform: the exact reference (against mpmath), the built-in adapters over every fixture and
generated config, the protocol's refusals, the command line and the summary file."""

from __future__ import annotations

import json
import math
import sys
import types

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import testing
from posenc.cli import main
from posenc.fixtures import fixture_names
from posenc.integrations.conform import (
    check_summary,
    conform,
    generated,
    load_adapter,
    posenc_rotate,
    read_summary,
)
from posenc.integrations.conform.checks import ONE_MILLION, check_config
from posenc.integrations.conform.reference import exact_tables, read_config
from posenc.rope.registry import REGISTRY

mpmath = pytest.importorskip("mpmath")


@pytest.fixture(scope="module")
def posenc_report():
    return conform("posenc", ["all"])


@pytest.fixture(scope="module")
def transformers_report():
    pytest.importorskip("transformers")
    return conform("transformers", ["all"])


# -- the exact reference ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["codellama-7b", "llama-3.1-8b", "deepseek-v3", "phi-3.5-mini-instruct", "gpt-oss-20b"]
)
def test_the_reference_agrees_with_mpmath(name):
    """An independent computation at 40 digits: the frequencies from the config's fields by the
    formulas (default and YaRN below; the others use posenc's float64 frequencies as given), each
    angle m * theta reduced mod 2 pi, its cos and sin times the attention factor."""
    mpmath.mp.dps = 40
    reading, facts = read_config(_fixture(name))
    positions = torch.tensor([0, 1, 4095, 131071, ONE_MILLION - 1, 2**40 + 3], dtype=torch.int64)
    seq_len = int(positions.max()) + 1 if reading.length_dependent else None
    inv_freq = reading.frequencies(seq_len)
    if facts.rope_type == "default":
        d = reading.rotary_dim
        exact = [mpmath.mpf(facts.base) ** (-mpmath.mpf(2 * i) / d) for i in range(d // 2)]
        assert max(abs(float(inv_freq[i]) / float(exact[i]) - 1) for i in range(d // 2)) < 1e-15
    cos, sin = exact_tables(reading, positions, seq_len)
    worst = 0.0
    for row, m in enumerate(positions.tolist()):
        for i in range(inv_freq.numel()):
            angle = mpmath.mpf(m) * mpmath.mpf(float(inv_freq[i]))  # theta as the float64 it is, exactly
            want_c = mpmath.cos(angle) * reading.table_factor
            want_s = mpmath.sin(angle) * reading.table_factor
            got_c, got_s = mpmath.mpf(float(cos[row, i])), mpmath.mpf(float(sin[row, i]))
            worst = max(worst, float(abs(got_c - want_c)), float(abs(got_s - want_s)))
    assert worst < 1e-8, worst  # the reference's own bound: ~1e-8 rad at any int64 position


def test_the_yarn_factor_agrees_with_mpmath():
    """DeepSeek-V2-Lite: table factor m(40, 0.707) / m(40, 0.707) = 1 and softmax multiplier
    m(40, 0.707) ** 2; gpt-oss: table factor 0.1 ln 32 + 1 (YaRN, Peng et al. 2023; DeepSeek-V2)."""
    mpmath.mp.dps = 30
    m = lambda s, k: 0.1 * k * mpmath.log(s) + 1  # noqa: E731
    v2, _ = read_config(_fixture("deepseek-v2-lite"))
    assert v2.table_factor == pytest.approx(1.0, abs=1e-15)
    assert v2.softmax_multiplier == pytest.approx(float(m(40, mpmath.mpf("0.707")) ** 2), rel=1e-14)
    oss, _ = read_config(_fixture("gpt-oss-20b"))
    assert oss.table_factor == pytest.approx(float(m(32, 1)), rel=1e-14)
    assert oss.softmax_multiplier == 1.0  # not multi-head latent attention


def _fixture(name):
    from posenc.fixtures import load_fixture

    return load_fixture(name)


# -- the generated configs ------------------------------------------------------------------------------
def test_generated_configs_cover_every_registered_rope_type_with_edges():
    cases = generated()
    types_seen = {read_config(c.config)[1].rope_type for c in cases}
    assert types_seen == set(REGISTRY)
    names = {c.name for c in cases}
    for descriptor in REGISTRY.values():
        for parameter in descriptor.parameters:
            edges = {f"{descriptor.name} {parameter.name}={v:g}" for v in (parameter.minimum, parameter.maximum)}
            assert edges & names, (descriptor.name, parameter.name)  # a refused edge is left out, not both
    assert "yarn attention_factor=1" in names and "yarn mscale=1,mscale_all_dim=1" in names
    assert any("interleaved" in n for n in names)


# -- the built-in adapters ------------------------------------------------------------------------------
def test_posenc_has_no_wrong_answer_anywhere(posenc_report):
    statuses = {r.config: r.status for r in posenc_report.results}
    assert set(fixture_names()) <= set(statuses)
    assert all(s == "ok" for s in statuses.values()), {k: v for k, v in statuses.items() if v != "ok"}
    worst = max(c.error for r in posenc_report.results for c in r.checks if c.dtype == "float32")
    assert worst < 1e-6
    assert posenc_report.exit_code == 0


def test_transformers_reads_every_fixture_right_with_float32_precision_loss(transformers_report):
    by_name = {r.config: r for r in transformers_report.results}
    for name in fixture_names():
        assert by_name[name].status == "precision", (name, by_name[name].status, by_name[name].causes)
    llama = by_name["llama-3.1-8b"]
    angle = {(c.dtype, c.group): c for c in llama.checks if c.check == "angle"}
    # float32 angles: the error grows with the position, from float32 noise near 0 to ~1e-2 rad at 1M
    assert angle[("float32", "near")].error < 1e-5
    assert 1e-3 < angle[("float32", "1M")].error < 0.5 and angle[("float32", "1M")].status == "precision"


def test_transformers_wrong_answers_all_have_a_named_cause(transformers_report):
    """Where the installed transformers gives a wrong answer on a generated config, conform names the
    misreading (5.25: Llama's default rope ignores a partial_rotary_factor in rope_parameters, which its
    linear rope reads); types transformers lacks, and rope_interleave in a family that does not read it,
    are "not supported"."""
    wrong = [r for r in transformers_report.results if r.status == "wrong"]
    for r in wrong:
        assert r.causes and not any(c.startswith("unidentified") for c in r.causes), (r.config, r.causes)
    unsupported = [r for r in transformers_report.results if r.status == "unsupported"]
    assert {r.config for r in unsupported} >= {"ntk", "llama3 interleaved"}
    for r in unsupported:
        assert "transformers has no rope type 'ntk'" in r.message or "does not read rope_interleave" in r.message
    assert not [r for r in transformers_report.results if r.status == "error"]


# -- the protocol's refusals ---------------------------------------------------------------------------------
def _bad(kind):
    def rotate(config, q, k, positions):
        q_rot, k_rot, scale = posenc_rotate(config, q, k, positions)
        if kind == "raises":
            raise RuntimeError("CUDA kernel not built\nfor this device")
        if kind == "shape":
            return q_rot[:, :1], k_rot
        if kind == "nan":
            q_rot = q_rot.clone()
            q_rot[3, 0, 0] = float("nan")
        if kind == "dtype":
            return q_rot.half(), k_rot
        if kind == "single":
            return q_rot
        if kind == "scale":
            return q_rot, k_rot, -1.0
        return q_rot, k_rot

    return rotate


@pytest.mark.parametrize(
    "kind, words",
    [
        ("raises", "the adapter raised RuntimeError: CUDA kernel not built for this device"),
        ("shape", "q_rot of shape (16, 1, 128) for q, k of shape (16, 2, 128)"),
        ("nan", "a non-finite q_rot (first at index (3, 0, 0), position 3)"),
        ("dtype", "q_rot in float16 for float32 inputs"),
        ("single", "returned Tensor; expected (q_rot, k_rot) or (q_rot, k_rot, softmax_scale)"),
        ("scale", "softmax_scale -1.0; expected a finite number > 0"),
    ],
)
def test_a_misbehaving_adapter_is_one_line_and_the_others_go_on(kind, words, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": "8"}}')
    report = conform(_bad(kind), ["llama-3.1-8b", str(broken), "phi-2"], dtypes=("float32",))
    first, second, third = report.results
    assert first.status == "error" and words in first.message and "\n" not in first.message
    assert second.status == "error" and "conform cannot read this config" in second.message
    assert "factor" in second.message
    assert third.status == "error"  # the same adapter, the next config: checked, not skipped
    assert report.exit_code == 1


def test_supports_makes_not_supported_rows_and_unreadable_names_are_reported():
    def rotate(config, q, k, positions):
        return posenc_rotate(config, q, k, positions)

    rotate.supports = lambda config: True if config.get("model_type") == "llama" else "only Llama here"
    report = conform(rotate, ["llama-3.1-8b", "phi-2", "no-such-config"], dtypes=("float32",))
    statuses = [(r.status, r.message) for r in report.results]
    assert statuses[0] == ("ok", None)
    assert statuses[1] == ("unsupported", "only Llama here")
    assert statuses[2][0] == "error" and "'no-such-config' is no file, folder, fixture" in statuses[2][1]


def test_load_adapter_names_what_is_wrong():
    assert load_adapter("posenc") is posenc_rotate
    for spec, words in [
        ("nocolon", "adapter must be MODULE:FUNCTION"),
        ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
        ("math:no_such", "'math' has no attribute 'no_such'"),
        ("math:pi", "'pi' is a float, not a callable"),
    ]:
        with pytest.raises(ValueError, match=words.replace("(", r"\(")):
            load_adapter(spec)


# -- the command line and the summary -------------------------------------------------------------------------
@pytest.fixture()
def engine_module(monkeypatch):
    """An importable engine module whose rotate has the Llama 3 scaling dropped."""
    module = types.ModuleType("conform_test_engine")

    def rotate(config, q, k, positions):
        plain = {**config, "rope_scaling": None}
        return posenc_rotate(plain, q, k, positions)

    module.rotate = rotate
    monkeypatch.setitem(sys.modules, "conform_test_engine", module)
    return module


def test_the_command_line_end_to_end(tmp_path, capsys, engine_module):
    out = tmp_path / "summary.json"
    code = main(["conform", "--adapter", "posenc", "--config", "llama-3.1-8b", "phi-2", "--json", str(out)])
    assert code == 0
    summary = read_summary(out)
    assert summary["engine"]["name"] == "posenc" and summary["counts"]["ok"] == 2
    entry = summary["configs"][0]
    assert entry["config"] == "llama-3.1-8b" and entry["rope_type"] == "llama3"
    assert set(entry["worst"]) == {"angle", "factor", "q", "k", "score"}
    groups = {c["group"] for c in entry["checks"]}
    assert groups == {"near", "trained", "past_original", "far", "1M", "near_again"}
    code = main(
        ["conform", "--adapter", "conform_test_engine:rotate", "--config", "llama-3.1-8b", "--dtype", "float32"]
    )
    text = capsys.readouterr().out
    assert code == 1 and "wrong" in text and "cause: llama3 scaling dropped" in text
    assert main(["conform", "--adapter", "nocolon"]) == 2


def test_precision_tolerance_fails_float32_angles(capsys):
    pytest.importorskip("transformers")
    args = ["conform", "--adapter", "transformers", "--config", "codellama-7b", "--dtype", "float32"]
    assert main(args) == 0
    assert main(args + ["--precision", "1e-3"]) == 1
    assert "past --precision" in capsys.readouterr().out


def test_help_shows_the_adapter_protocol(capsys):
    with pytest.raises(SystemExit):
        main(["conform", "--help"])
    text = capsys.readouterr().out
    assert "rotate(config: dict, q: Tensor, k: Tensor, positions: Tensor)" in text
    assert "(q_rot, k_rot, softmax_scale)" in text and "supports(config)" in text


def test_the_summary_reader_refuses_other_files(tmp_path):
    with pytest.raises(ValueError, match="schema must be 'posenc.conform.summary'"):
        check_summary({"schema": "other"})
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"schema": "posenc.conform.summary", "schema_version": 2}))
    with pytest.raises(ValueError, match="schema_version must be 1"):
        read_summary(path)


# -- posenc.testing.assert_conforms -------------------------------------------------------------------------------
def test_assert_conforms_passes_posenc_and_names_the_cause_of_a_bug(engine_module):
    report = testing.assert_conforms(posenc_rotate, configs=["llama-3.2-1b"], dtypes=("float32",))
    assert report.results[0].status == "ok"
    with pytest.raises(AssertionError, match=r"llama-3.2-1b: wrong .*llama3 scaling dropped"):
        testing.assert_conforms(engine_module.rotate, configs=["llama-3.2-1b"], dtypes=("float32",))


def test_near_again_catches_state_left_by_far_positions():
    """The length-dependent groups in order: an engine whose dynamic scaling keeps its longest
    length is right until the far positions and wrong when it comes back near."""
    config = {
        "model_type": "llama",
        "head_dim": 32,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "max_position_embeddings": 4096,
        "rope_scaling": {"rope_type": "dynamic", "factor": 4.0},
    }
    from posenc.rope import RotaryEmbedding

    rope = RotaryEmbedding.from_hf_config(config)
    longest = [0]

    def sticky(config, q, k, positions):
        longest[0] = max(longest[0], int(positions.max()) + 1)
        if longest[0] > 4096:
            rope.freeze_frequencies(longest[0])  # the frequencies of the longest length, kept
        q_rot, k_rot = rope(q[None], k[None], positions[None], heads_first=False)
        return q_rot[0], k_rot[0]

    result = check_config(sticky, "dyn", "test", config, dtypes=("float32",))
    by_group = {c.group: c.status for c in result.checks if c.check == "angle"}
    assert by_group["near"] == "ok" and by_group["1M"] == "ok" and by_group["near_again"] == "wrong"
    assert any("not reset" in c for c in result.causes)
    assert not math.isnan(result.checks[0].error)


def test_posenc_reads_a_real_config_with_keys_its_rope_type_does_not_use():
    """Ministral3's rope dict holds llama_4_scaling_beta, which no YaRN field reads: the adapter reads
    the config as transformers does (ignoring it) instead of raising."""
    config = {
        "model_type": "ministral3",
        "head_dim": 128,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 16384,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "llama_4_scaling_beta": 0.1,
        },
    }
    result = check_config(posenc_rotate, "ministral3", "dict", config, dtypes=("float32",))
    assert result.status == "ok", result.message


_TYPES = sorted(d.name for d in REGISTRY.values() if d.extension is not None)


@given(
    rope_type=st.sampled_from(_TYPES),
    factor=st.floats(1.0, 64.0),
    head_dim=st.sampled_from([8, 16, 64]),
    partial=st.sampled_from([0.5, 1.0]),
    interleaved=st.booleans(),
    original=st.integers(16, 1 << 16),
)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_posenc_conforms_on_any_config_the_registry_can_write(
    rope_type, factor, head_dim, partial, interleaved, original
):
    """Property: a config of any type with an extension, any factor, width, slice and layout is
    either refused by posenc's reader with a clear ValueError or rotated by posenc exactly."""
    from types import SimpleNamespace

    from posenc.rope.hfconfig import to_hf_dict

    scaling = REGISTRY[rope_type].extension(factor, original)
    rope = SimpleNamespace(
        head_dim=head_dim,
        rotary_dim=int(head_dim * partial),
        base=10000.0,
        scaling=scaling,
        max_position_embeddings=int(factor * original),
        layout="interleaved" if interleaved else "half",
    )
    try:
        config = {**to_hf_dict(rope), "model_type": "llama", "hidden_size": 2 * head_dim, "num_attention_heads": 2}
    except ValueError:
        return  # posenc refuses to write it, with a message
    result = check_config(posenc_rotate, "property", "dict", config, dtypes=("float32",))
    assert result.status in ("ok", "error"), (result.status, result.causes)
    if result.status == "error":
        assert result.message.startswith("conform cannot read this config"), result.message


@pytest.mark.parametrize("placement", ["softmax", "q"])
def test_the_attention_factor_may_sit_anywhere(placement):
    """gpt-oss's YaRN factor 0.1 ln 32 + 1 on both tables, or squared in the softmax scale, or squared
    on q alone: the same scores, so the same verdict (posenc's rotation with the factor moved)."""
    config = _fixture("gpt-oss-20b")
    factor = read_config(config)[0].table_factor
    assert factor == pytest.approx(0.1 * math.log(32) + 1)

    def moved(config, q, k, positions):
        q_rot, k_rot, scale = posenc_rotate(config, q, k, positions)
        if placement == "softmax":
            return q_rot / factor, k_rot / factor, scale * factor**2
        return q_rot * factor, k_rot / factor, scale

    result = check_config(moved, placement, "fixture", config, dtypes=("float32",))
    assert result.status == "ok", [(c.check, c.group, c.error) for c in result.checks if c.status != "ok"]

    # and dropping it is caught, with the formula named
    def dropped(config, q, k, positions):
        q_rot, k_rot, scale = posenc_rotate(config, q, k, positions)
        return q_rot / factor, k_rot / factor, scale

    result = check_config(dropped, "dropped", "fixture", config, dtypes=("float32",))
    assert result.status == "wrong"
    assert result.causes == ["attention factor 1.0 = 1 (no attention factor applied) where the config gives 1.34657"]


def test_a_config_with_a_rope_dict_per_layer_type_is_checked_per_layer_type(tmp_path):
    """Gemma 3's shape: sliding layers on base 10000, full layers on base 1e6 with linear 8."""
    config = {
        "model_type": "gemma3_text",
        "head_dim": 32,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "max_position_embeddings": 32768,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    report = conform("posenc", [str(path)], dtypes=("float32",))
    assert [(r.config.split(" ")[-1], r.rope_type, r.status) for r in report.results] == [
        ("[full_attention]", "linear", "ok"),
        ("[sliding_attention]", "default", "ok"),
    ]


def test_max_position_skips_the_groups_past_an_engines_cache():
    def rotate(config, q, k, positions):
        if int(positions.max()) > 8191:
            raise IndexError("index 8192 is out of bounds for dimension 0 with size 8192")
        return posenc_rotate(config, q, k, positions)

    rotate.max_position = lambda config: 8191
    result = check_config(rotate, "llama", "fixture", _fixture("llama-3.1-8b"), dtypes=("float32",))
    assert result.status == "ok"
    assert {c.group for c in result.checks} == {"near", "trained", "near_again"}
    assert [s.split(":")[0] for s in result.skipped] == ["past_original", "far", "1M"]
    assert "past the adapter's max_position 8191" in result.skipped[0]
    rotate.max_position = lambda config: -1
    bad = check_config(rotate, "llama", "fixture", _fixture("llama-3.1-8b"), dtypes=("float32",))
    assert bad.status == "error" and "max_position() returned -1" in bad.message


def test_the_transformers_adapter_runs_a_family_with_a_rope_per_layer_type(tmp_path):
    """Gemma 3's rotary module takes a layer type; each layer type's case runs through it."""
    pytest.importorskip("transformers")
    config = {
        "model_type": "gemma3_text",
        "head_dim": 32,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 32768,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        },
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    report = conform("transformers", [str(path)], dtypes=("float32",))
    assert [r.status for r in report.results] == ["precision", "precision"], [r.message for r in report.results]


def test_the_json_summary_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    """--json goes through the run files' one atomic write: a link at the output path (or at the
    temporary name an earlier version used) is replaced, and the file it pointed at keeps its bytes."""
    precious = tmp_path / "model.safetensors"
    precious.write_bytes(b"weights")
    out = tmp_path / "summary.json"
    out.symlink_to(precious)
    (tmp_path / "summary.json.tmp").symlink_to(precious)
    assert main(["conform", "--adapter", "posenc", "--config", "phi-2", "--json", str(out)]) == 0
    assert precious.read_bytes() == b"weights"
    assert not out.is_symlink() and read_summary(out)["counts"]["ok"] == 1
