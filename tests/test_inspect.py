"""``posenc inspect``: runs on every fixture, and its numbers agree with independent computation.

Independent here means: wavelengths from the closed form ``2 pi * base ** (2i / d)`` in Python floats;
what the scaling does to each pair from ``transformers``' own ``ROPE_INIT_FUNCTIONS``; the precision
audit from ``transformers``' own rotary module run at the audited positions.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import threading

import pytest
import torch

from posenc import cli
from posenc import inspect as inspect_module
from posenc.fixtures import fixture_names, load_fixture
from posenc.inspect import EXACT_INTEGERS, format_report, inspect_config

FIXTURES = fixture_names()


def fields(name):
    return {k: v for k, v in load_fixture(name).items() if k not in ("source", "note")}


@pytest.fixture(scope="module")
def reports():
    return {name: inspect_config(fields(name)) for name in FIXTURES}


@pytest.mark.parametrize("name", FIXTURES)
def test_runs_on_every_fixture_and_fits_one_screen(reports, name):
    report = reports[name]
    json.loads(json.dumps(report))  # JSON-ready
    text = format_report(report)
    assert len(text.splitlines()) <= 40
    assert report["rope_type"] in text and f"{report['extended_context']:,}" in text
    assert sum(g["last"] - g["first"] + 1 for g in report["pair_groups"]) == report["rotated_pairs"]


@pytest.mark.parametrize("name", FIXTURES)
def test_wavelengths_match_the_closed_form(reports, name):
    r = reports[name]
    d, base = r["rotary_dim"], r["rope_theta"]
    for p in r["pairs"]:
        expected = 2 * math.pi * base ** (2 * p["pair"] / d)
        assert p["wavelength"] == pytest.approx(expected, rel=1e-12)
        assert p["scaled_wavelength"] == pytest.approx(p["wavelength"] * p["ratio"], rel=1e-12)


@pytest.mark.parametrize(
    "name, rotated, unrotated, layout, trained, extended",
    [
        ("gpt-neox-20b", 24, 72, "half", 2048, 2048),
        ("phi-2", 32, 48, "half", 2048, 2048),
        ("gpt-j-6b", 64, 192, "interleaved", 2048, 2048),
        ("deepseek-v3", 64, 0, "interleaved", 4096, 163840),
        ("llama-3.1-8b", 128, 0, "half", 8192, 131072),
        ("phi-3.5-mini-instruct", 96, 0, "half", 4096, 131072),
    ],
)
def test_shape_and_context_fields(reports, name, rotated, unrotated, layout, trained, extended):
    r = reports[name]
    assert (r["rotary_dim"], r["unrotated_dim"], r["layout"]) == (rotated, unrotated, layout)
    assert (r["trained_context"], r["extended_context"]) == (trained, extended)


def hf_rotary(name):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    f = fields(name)
    model_type = f.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **f)
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    (cls,) = [getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding") and n[0] != "_"]
    return config, cls(config)


SCALED = [n for n in FIXTURES if n not in ("gpt-j-6b",)]


@pytest.mark.parametrize("name", SCALED)
def test_pair_kinds_match_transformers_frequencies(reports, name):
    r = reports[name]
    _, rotary = hf_rotary(name)
    if r["rope_type"] == "longrope":  # the long factors apply at the extended length
        rotary(torch.zeros(1), torch.tensor([[r["extended_context"] - 1]]))
    hf = rotary.inv_freq.double()
    default = torch.tensor([1.0 / p["wavelength"] * 2 * math.pi for p in r["pairs"]], dtype=torch.float64)
    ratio = default / hf  # transformers' float32 frequencies: 1e-6 relative
    for p, hf_ratio in zip(r["pairs"], ratio.tolist()):
        assert p["ratio"] == pytest.approx(hf_ratio, rel=2e-6)
        if p["kind"] == "kept":
            assert hf_ratio == pytest.approx(1.0, rel=2e-6)
        elif p["kind"] == "interpolated":
            assert hf_ratio == pytest.approx(r["factor"], rel=2e-6)
        else:
            assert p["kind"] in ("ramped", "searched", "rebased")
            if p["kind"] == "ramped":
                assert 1.0 + 1e-6 < hf_ratio < r["factor"] * (1 - 1e-6)
    assert r["attention_factor"] == pytest.approx(rotary.attention_scaling, rel=1e-6)


@pytest.mark.parametrize(
    "name", ["llama-3.1-8b", "phi-3.5-mini-instruct", "qwen2.5-7b-instruct-yarn", "codellama-7b", "gpt-oss-20b"]
)
def test_precision_audit_matches_transformers_own_module(reports, name):
    r = reports[name]
    audit = r["precision"]
    _, rotary = hf_rotary(name)
    first, last = audit["positions_audited"]
    pos = torch.arange(first, last + 1)[None]
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), pos)
    half = cos.shape[-1] // 2 if name != "gpt-oss-20b" else cos.shape[-1]
    cos, sin = cos[..., :half].double(), sin[..., :half].double()
    inv = torch.tensor([2 * math.pi / p["scaled_wavelength"] for p in r["pairs"]], dtype=torch.float64)
    angle = pos.double()[..., None] * inv
    f = r["attention_factor"]
    actual = max(float((cos - angle.cos() * f).abs().max()), float((sin - angle.sin() * f).abs().max()))
    # the report emulates transformers (float32 frequencies and angles); its rounding is the same kind
    assert audit["transformers"]["cos_sin_error"] == pytest.approx(actual, rel=2.0)
    assert audit["transformers"]["cos_sin_error"] > 1e3 * audit["posenc"]["cos_sin_error"]
    assert audit["posenc"]["cos_sin_error"] < 1.2e-7 * max(1.0, f)


def test_risks():
    llama = fields("llama-3.1-8b")
    risks = {x["risk"] for x in inspect_config(llama)["risks"]}
    assert "float32 angles at the longest context" in risks
    assert not any("change during generation" in x for x in risks)

    bf16 = inspect_config({**llama, "torch_dtype": "bfloat16"})
    risks = {x["risk"] for x in bf16["risks"]}
    assert {"inv_freq stored in bfloat16", "positions past bfloat16's exact-integer range"} <= risks
    assert bf16["precision"]["dtype"] == "bfloat16"
    assert (
        bf16["precision"]["transformers"]["cos_sin_error"]
        >= inspect_config(llama)["precision"]["transformers"]["cos_sin_error"]
    )

    huge = inspect_config({**fields("codellama-7b"), "max_position_embeddings": EXACT_INTEGERS["float32"] + 2})
    assert "positions past float32's exact-integer range" in {x["risk"] for x in huge["risks"]}

    phi3 = {x["risk"] for x in inspect_config(fields("phi-3.5-mini-instruct"))["risks"]}
    assert "frequencies change during generation" in phi3

    dynamic = inspect_config({**llama, "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}})
    assert "frequencies change during generation" in {x["risk"] for x in dynamic["risks"]}
    assert {p["kind"] for p in dynamic["pairs"]} <= {"kept", "rebased"}

    missing = {**llama, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    assert "missing original_max_position_embeddings" in {x["risk"] for x in inspect_config(missing)["risks"]}
    given = {**llama, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}}
    assert "missing original_max_position_embeddings" not in {x["risk"] for x in inspect_config(given)["risks"]}


def test_softmax_scale_comes_from_the_registry_for_any_type():
    """The report's softmax scale is the descriptor's, so a registered type with its own is reported."""
    import dataclasses

    from tilt_scaling import TILT

    from posenc.rope import register_scaling, unregister_scaling

    deepseek = {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
    }
    assert inspect_config({"head_dim": 64, "rope_scaling": deepseek})["softmax_scale_factor"] == pytest.approx(
        (0.1 * 0.707 * math.log(40) + 1) ** 2, rel=1e-15
    )
    register_scaling(dataclasses.replace(TILT, softmax_scale=lambda config: 1.25))
    try:
        report = inspect_config({"head_dim": 32, "rope_scaling": {"rope_type": "tilt", "factor": 2.0}})
    finally:
        unregister_scaling("tilt")
    assert report["rope_type"] == "tilt" and report["softmax_scale_factor"] == 1.25


def test_the_missing_trained_length_risk_follows_the_registry():
    """The types a missing original_max_position_embeddings is a risk for come from the registry (the
    descriptors whose rope dict may hold the key), not a hand list: a toy type registered with the
    field gets the risk, the same toy without it does not."""
    import dataclasses
    from typing import ClassVar, Optional

    from tilt_scaling import TILT, TiltScaling

    from posenc.inspect import reads_trained_length
    from posenc.rope import REGISTRY, TransformersSpelling, register_scaling, unregister_scaling

    @dataclasses.dataclass(frozen=True)
    class TrainedTilt(TiltScaling):
        original_max_position_embeddings: Optional[int] = None
        rope_type: ClassVar[str] = "trained_tilt"

    toy = dataclasses.replace(
        TILT,
        name="trained_tilt",
        config_class=TrainedTilt,
        transformers=TransformersSpelling(
            read=lambda ctx: TrainedTilt(ctx.require("factor"), original_max_position_embeddings=ctx.original())
        ),
    )
    builtin = {name for name in REGISTRY if reads_trained_length(name)}
    assert builtin == {"yarn", "llama3", "longrope"}  # the three transformers falls back for
    base = {"head_dim": 32, "max_position_embeddings": 16384}

    def risks(rope):
        return [r["risk"] for r in inspect_config({**base, "rope_scaling": rope})["risks"]]

    register_scaling(toy)
    register_scaling(TILT)
    try:
        assert reads_trained_length("trained_tilt") and not reads_trained_length("tilt")
        assert "missing original_max_position_embeddings" in risks({"rope_type": "trained_tilt", "factor": 2.0})
        given = {"rope_type": "trained_tilt", "factor": 2.0, "original_max_position_embeddings": 4096}
        assert "missing original_max_position_embeddings" not in risks(given)
        assert "missing original_max_position_embeddings" not in risks({"rope_type": "tilt", "factor": 2.0})
    finally:
        unregister_scaling("trained_tilt")
        unregister_scaling("tilt")


@pytest.mark.parametrize(
    "config, layer_type",
    [
        (  # one rope dict per layer type
            {
                "head_dim": 64,
                "max_position_embeddings": 32768,
                "rope_parameters": {
                    "full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
                    "sliding_attention": {"rope_type": "default"},
                },
            },
            "full_attention",
        ),
        (  # the rope fields in a multimodal config's text_config
            {
                "model_type": "vision-language",
                "text_config": {
                    "head_dim": 64,
                    "max_position_embeddings": 32768,
                    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
                },
            },
            None,
        ),
    ],
)
def test_a_trained_length_where_the_reader_finds_it_is_not_reported_missing(config, layer_type):
    """The risks read the rope dict the reader reads (posenc.rope.hfconfig), not a copy of its rules:
    a trained length given per layer type or inside text_config is there."""
    report = inspect_config(config, layer_type=layer_type)
    assert report["trained_context"] == 8192
    assert "missing original_max_position_embeddings" not in [r["risk"] for r in report["risks"]]
    rope = config["rope_parameters"]["full_attention"] if layer_type else config["text_config"]["rope_scaling"]
    del rope["original_max_position_embeddings"]
    report = inspect_config(config, layer_type=layer_type)
    assert "missing original_max_position_embeddings" in [r["risk"] for r in report["risks"]]


def test_config_object_matches_dict():
    transformers = pytest.importorskip("transformers")
    f = fields("llama-3.1-8b")
    f.pop("model_type")
    from_object = inspect_config(transformers.LlamaConfig(**f))
    from_dict = inspect_config(fields("llama-3.1-8b"))
    for key in ("rope_type", "rope_theta", "rotary_dim", "trained_context", "extended_context", "pairs"):
        assert from_object[key] == from_dict[key], key
    assert from_object["source"] == "LlamaConfig"


# -- the command line ----------------------------------------------------------------------------------
def write_config(tmp_path, name="llama-3.1-8b", text=None):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(text if text is not None else json.dumps(fields(name)))
    return folder


def test_cli_text_json_folder_and_plot(tmp_path, capsys):
    folder = write_config(tmp_path)
    assert cli.main(["inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "llama3, factor 8" in out and "risks" in out
    assert cli.main(["inspect", str(folder / "config.json"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rope_type"] == "llama3" and len(report["pairs"]) == 64
    plot = tmp_path / "waves.png"
    assert cli.main(["inspect", str(folder), "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: p / "absent.json", "does not exist"),
        (lambda p: p, "folder without a config.json"),
        (lambda p: write_config(p, text="{not json"), "is not valid JSON (line 1"),
        (lambda p: write_config(p, text="[1, 2]"), "holds a JSON list"),
        (
            lambda p: write_config(
                p,
                text=json.dumps(
                    {
                        "model_type": "llama",
                        "hidden_size": 64,
                        "num_attention_heads": 2,
                        "rope_scaling": {"rope_type": "warp"},
                    }
                ),
            ),
            "rope_type must be one of",
        ),
        (
            lambda p: write_config(p, text=json.dumps({**fields("codellama-7b"), "max_position_embeddings": 10**30})),
            "max_position_embeddings must be an integer >= 1 and <= 2**53",
        ),
    ],
)
def test_cli_bad_inputs_give_one_line(tmp_path, capsys, setup, message):
    target = setup(tmp_path)
    assert cli.main(["inspect", str(target)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in captured.err
    assert captured.out == ""


def _deep_yarn(**extra):
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, **extra}
    return json.dumps({**fields("llama-3.1-8b"), "rope_scaling": rope})


def _underflowing_longrope():
    f = fields("llama-3.1-8b")
    rope = {"rope_type": "longrope", "original_max_position_embeddings": 4096}
    rope.update(short_factor=[1.0] * 64, long_factor=[1e300] * 64)
    return json.dumps({**f, "rope_theta": 1e300, "rope_scaling": rope})


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000 + "]" * 100_000, "nests arrays or objects deeper than 32 levels"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "nests arrays or objects deeper than 32 levels"),
        (_deep_yarn(attention_factor=1e39), "attention_factor must be None or a number > 0 and <= 1000"),
        (_deep_yarn(mscale=1e39, mscale_all_dim=1.0), "mscale must be None or a number > 0 and <= 1000"),
        (_deep_yarn(mscale=1.0, mscale_all_dim=1.7e308), "mscale_all_dim must be None or a number > 0"),
        (_underflowing_longrope(), "its wavelength 2*pi/theta is beyond float64"),
    ],
    ids=["deep-array", "deep-object", "attention-factor", "mscale", "mscale-all-dim", "underflow"],
)
def test_cli_hostile_configs_give_one_line(tmp_path, capsys, text, message):
    folder = write_config(tmp_path, text=text)
    for extra in ([], ["--json"]):
        assert cli.main(["inspect", str(folder), *extra]) == 2
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], captured.err[-500:]
        assert captured.out == ""


def test_cli_json_is_strict_json_at_extreme_but_valid_settings(tmp_path, capsys):
    folder = write_config(tmp_path, text=_deep_yarn(beta_slow=5e-324, mscale=1000.0, mscale_all_dim=1e-300))
    assert cli.main(["inspect", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert math.isfinite(report["attention_factor"]) and math.isfinite(report["softmax_scale_factor"])


def test_cli_refuses_what_is_not_a_regular_file_and_caps_the_size(tmp_path, capsys):
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(inspect_module.MAX_CONFIG_BYTES + 1)  # sparse: nothing is written
    assert cli.main(["inspect", str(big)]) == 2
    assert "is larger than 16,777,216 bytes" in capsys.readouterr().err
    assert cli.main(["inspect", "/dev/null"]) == 2
    assert "/dev/null is not a regular file" in capsys.readouterr().err


def test_cli_refuses_a_fifo_without_waiting_for_a_writer(tmp_path, capsys):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    # a writer that only gets through if someone opens the FIFO for reading; released below either way
    writer = threading.Thread(target=lambda: os.close(os.open(fifo, os.O_WRONLY)), daemon=True)
    writer.start()
    try:
        assert cli.main(["inspect", str(tmp_path)]) == 2
        assert "is not a regular file" in capsys.readouterr().err
    finally:
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(timeout=30)


def test_cli_plot_of_a_path_with_dollar_signs(tmp_path, capsys):
    parent = tmp_path / "we$\\x$ird"  # mathtext would parse $\x$ and fail
    parent.mkdir()
    folder = write_config(parent)
    plot = tmp_path / "waves.png"
    assert cli.main(["inspect", str(folder), "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_cli_bad_plot_path(tmp_path, capsys):
    folder = write_config(tmp_path)
    assert cli.main(["inspect", str(folder), "--plot", str(tmp_path / "waves.txt")]) == 2
    assert "--plot must end in" in capsys.readouterr().err
    assert cli.main(["inspect", str(folder), "--plot", str(tmp_path / "no" / "such" / "dir" / "w.png")]) == 2
    assert "cannot write" in capsys.readouterr().err


# -- the rotated width is the one the family's code uses (and the one posenc's patch rotates) --------------
@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3", "mistral", "gemma", "gpt_oss", "falcon"])
def test_width_follows_the_family_code_not_partial_rotary_factor(model_type):
    pytest.importorskip("transformers")
    config = {
        "model_type": model_type,
        "hidden_size": 256,
        "num_attention_heads": 2,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    }
    if model_type != "falcon":  # FalconConfig derives head_dim and refuses it as an argument
        config["head_dim"] = 128
    report = inspect_config(config)
    assert (report["rotary_dim"], report["unrotated_dim"]) == (128, 0)
    assert "partial_rotary_factor=0.5 would rotate 64 of 128" in report["rotary_dim_note"]
    assert "partial_rotary_factor=0.5 would rotate 64 of 128" in format_report(report).replace("\n" + " " * 17, " ")


def test_width_where_the_code_uses_partial_rotary_factor_has_no_note(reports):
    assert reports["phi-2"]["rotary_dim"] == 32 and reports["phi-2"]["rotary_dim_note"] is None
    assert all(r["rotary_dim_note"] is None for r in reports.values())  # the fixtures' code and config agree


def test_inspect_and_patch_agree_on_the_width():
    pytest.importorskip("transformers")
    from posenc import testing as tiny
    from posenc.integrations.transformers import patch

    model = tiny.tiny_model(
        "mistral",
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25},
    )
    with patch(model) as handle:
        assert inspect_config(model.config)["rotary_dim"] == handle.rope.rotary_dim == 128


def test_inspect_reads_the_width_from_the_text_rotary_class_beside_a_vision_one():
    """minimax_m3_vl_text's modeling module defines a text and a vision rotary class; its config says
    rotary_dim=8 of 16, its text rotary module (and patch) rotates 16."""
    pytest.importorskip("transformers")
    from posenc import testing as tiny
    from posenc.integrations.transformers import patch

    model = tiny.tiny_model_of_type("minimax_m3_vl_text")
    assert model.config.rotary_dim == 8 and model.config.head_dim == 16
    report = inspect_config(model.config)
    with patch(model) as handle:
        assert report["rotary_dim"] == handle.rope.rotary_dim == 16
    assert "the width here is the code's (16)" in report["rotary_dim_note"]


def test_unused_rope_keys_are_a_risk_not_a_refusal():
    config = {
        **fields("codellama-7b"),
        "rope_scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 32.0},  # a yarn key left over
    }
    report = inspect_config(config)
    assert report["rope_type"] == "linear"
    risks = {x["risk"]: x["detail"] for x in report["risks"]}
    assert "['beta_fast']" in risks["rope keys the type does not use"]
    assert "rope keys the type does not use" not in {x["risk"] for x in inspect_config(fields("codellama-7b"))["risks"]}


_QWEN2_VL_TEXT = {
    "model_type": "qwen2",
    "hidden_size": 128,
    "num_attention_heads": 2,  # head_dim 64: 32 pairs
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
}


@pytest.mark.parametrize(
    "section, said",
    [([1, 2, 3], "sums to 6"), ("abc", "sequence of 3 ints"), ([16, 24], "must have 3 entries")],
)
def test_an_mrope_section_posenc_refuses_is_a_risk(capsys, section, said):
    config = {**_QWEN2_VL_TEXT, "rope_scaling": {"rope_type": "default", "mrope_section": section}}
    report = inspect_config(config)
    risks = {x["risk"]: x["detail"] for x in report["risks"]}
    assert said in risks["an M-RoPE section posenc refuses"]
    assert "risks: none found" not in format_report(report)


def test_an_mrope_section_posenc_reads_is_no_risk():
    config = {**_QWEN2_VL_TEXT, "rope_scaling": {"rope_type": "default", "mrope_section": [16, 8, 8]}}
    assert "an M-RoPE section posenc refuses" not in {x["risk"] for x in inspect_config(config)["risks"]}
