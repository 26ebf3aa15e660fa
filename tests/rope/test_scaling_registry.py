"""The scaling registry: a rope type added from outside the package works everywhere the apps look.

The toy scaling of ``tilt_scaling.py``, registered, must round-trip through Hugging Face
dicts, appear in the explorer's ``/api/scalings`` (and draw in ``/api/wavelengths``), and be a choice
of ``posenc lab --extension-methods``; unregistered, it must be gone from all of them. The registry's
own rules (refused registrations, live views) and the agreement of the docs and the lab's table with
the registry are checked here too.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from fastapi.testclient import TestClient
from tilt_scaling import TILT, TiltScaling, tilt_frequencies

from posenc.hf import rotary_kwargs_from_hf, to_hf_dict
from posenc.measuring.lab import cli as lab_cli
from posenc.measuring.lab.config import LabConfig, preset_config
from posenc.measuring.lab.extend import (
    dynamic_effective_scaling,
    extended_model,
    method_names,
    method_table,
    scaling_for,
)
from posenc.measuring.lab.train import build_model
from posenc.rope import (
    DYNAMIC_TYPES,
    REGISTRY,
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    NTKScaling,
    Parameter,
    RotaryEmbedding,
    ScalingDescriptor,
    TransformersSpelling,
    YaRNScaling,
    register_scaling,
    rope_frequencies,
    scaling_from_dict,
    scaling_to_dict,
    softmax_scale,
    unregister_scaling,
    yarn_softmax_scale,
)
from posenc.rope.registry import extension_types, scaling_parameters
from posenc.rope.tables import rope_inv_freq
from posenc.runs.extension import ADAPTIVE_FACTOR, extension_config
from posenc.teaching.explorer.app import create_app
from posenc.teaching.lesson import palette

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scalings.md"


@pytest.fixture
def tilt():
    register_scaling(TILT)
    try:
        yield TILT
    finally:
        unregister_scaling("tilt")


def lab_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    lab_cli.add_arguments(parser)
    return parser


# -- the proof: one descriptor, and every app knows the type -----------------------------------------
@pytest.mark.parametrize("style", ["rope_parameters", "rope_scaling"])
def test_outside_scaling_round_trips_through_hugging_face_dicts(tilt, style):
    rope = RotaryEmbedding(
        32,
        base=5000.0,
        rotary_dim=16,
        layout="interleaved",
        scaling=TiltScaling(3.0, tilt_floor=1.5),
        max_position_embeddings=128,
    )
    fields = to_hf_dict(rope, style=style)
    rope_dict = fields[style]
    assert rope_dict["rope_type"] == "tilt" and rope_dict["factor"] == 3.0 and rope_dict["tilt_floor"] == 1.5
    back = RotaryEmbedding.from_hf_config(fields)
    assert (back.head_dim, back.rotary_dim, back.base, back.layout, back.max_position_embeddings) == (
        32,
        16,
        5000.0,
        "interleaved",
        128,
    )
    assert back.scaling == rope.scaling
    assert torch.equal(back.frequencies()[0], tilt_frequencies(TiltScaling(3.0, tilt_floor=1.5), 16, 5000.0)[0])
    assert scaling_from_dict(scaling_to_dict(rope.scaling)) == rope.scaling
    # the generic reader still checks keys and values
    with pytest.raises(ValueError, match="keys it does not use: \\['factr'\\]"):
        rotary_kwargs_from_hf({"head_dim": 32, "rope_scaling": {"rope_type": "tilt", "factor": 2.0, "factr": 1}})
    with pytest.raises(ValueError, match="'tilt' scaling: factor must be .* got '2'"):
        rotary_kwargs_from_hf({"head_dim": 32, "rope_scaling": {"rope_type": "tilt", "factor": "2"}})
    with pytest.raises(ValueError, match="missing its required key 'factor'"):
        rotary_kwargs_from_hf({"head_dim": 32, "rope_scaling": {"rope_type": "tilt"}})


def test_outside_scaling_appears_in_the_explorer(tilt, monkeypatch):
    # its parameter's label is presentation: the palette's table gives it (else the name is the label)
    monkeypatch.setitem(palette.SCALING_PARAMETER_LABELS, "tilt_floor", "tilt floor (toy)")
    with TestClient(create_app(allowed_hosts=None)) as client:
        listed = {s["name"]: s for s in client.get("/api/scalings").json()["scalings"]}
        # a type the palette does not know is labelled by its name and gets a colour of its own
        assert listed["tilt"]["label"] == "tilt"
        assert listed["tilt"]["colour"] not in {s["colour"] for n, s in listed.items() if n != "tilt"}
        assert listed["tilt"]["overlay"] is True and listed["tilt"]["lab"] is True
        assert listed["tilt"]["parameters"] == [
            {"name": "factor", "label": "factor", "minimum": 1.0, "maximum": 64.0, "step": 1.0, "default": 8.0},
            {
                "name": "tilt_floor",
                "label": "tilt floor (toy)",
                "minimum": 1.0,
                "maximum": 4.0,
                "step": 0.5,
                "default": 1.0,
            },
        ]
        assert "tilt" in client.get("/api/meta").json()["methods"]
        # its own parameter travels by name, with no change to the server
        d = client.get(
            "/api/wavelengths",
            params={
                "rotary_dim": 16,
                "base": 10000,
                "train_len": 1024,
                "methods": "tilt",
                "factor": 4,
                "tilt_floor": 2,
            },
        ).json()
        want = tilt_frequencies(TiltScaling(4.0, tilt_floor=2.0), 16, 10000.0)[0]
        assert d["methods"]["tilt"]["inv_freq"] == want.tolist()
        assert want.tolist() != tilt_frequencies(TiltScaling(4.0), 16, 10000.0)[0].tolist()
        config = client.get("/api/config", params={"head_dim": 16, "method": "tilt", "factor": 4, "tilt_floor": 1.5})
        assert config.json()["posenc"]["scaling"] == {"rope_type": "tilt", "factor": 4.0, "tilt_floor": 1.5}
        assert config.json()["hf_rope_parameters"]["rope_parameters"]["rope_type"] == "tilt"
        # and is checked against its definition
        refused = client.get("/api/wavelengths", params={"methods": "tilt", "tilt_floor": 5})
        assert refused.status_code == 422
        assert refused.json()["detail"] == "tilt_floor (tilt floor (toy)) must be a number from 1 to 4, got '5'"
    with TestClient(create_app(allowed_hosts=None)) as client:
        unregister_scaling("tilt")
        try:
            names = [s["name"] for s in client.get("/api/scalings").json()["scalings"]]
            assert "tilt" not in names
            assert client.get("/api/wavelengths", params={"methods": "tilt"}).status_code == 422
            gone = client.get("/api/wavelengths", params={"tilt_floor": 2})
            assert gone.status_code == 422 and "unknown parameter 'tilt_floor'" in gone.json()["detail"]
        finally:
            register_scaling(TILT)


def test_outside_scaling_is_a_lab_choice(tilt):
    args = lab_parser().parse_args(["--extension-methods", "linear,tilt"])
    assert args.extension_methods == ["linear", "tilt"]
    assert "tilt" in method_names() and "tilt" in extension_types()
    LabConfig(extension_methods=["tilt", "yarn"]).validate()
    assert scaling_for("tilt", 256, 64) == TiltScaling(4.0)


def test_unregistered_scaling_is_gone_everywhere():
    register_scaling(TILT)
    unregister_scaling("tilt")
    assert "tilt" not in REGISTRY
    with pytest.raises(SystemExit):
        lab_parser().parse_args(["--extension-methods", "tilt"])
    with pytest.raises(ValueError, match="rope_type must be one of"):
        rotary_kwargs_from_hf({"head_dim": 32, "rope_scaling": {"rope_type": "tilt", "factor": 2.0}})
    with pytest.raises(ValueError, match="registered rope type"):
        rope_frequencies(TiltScaling(2.0), 16, 10000.0)


# -- the registry's rules ------------------------------------------------------------------------------
def test_registration_is_refused_when_it_does_not_fit(tilt):
    with pytest.raises(ValueError, match="already registered"):
        register_scaling(TILT)

    @dataclass(frozen=True)
    class Tilt2(TiltScaling):
        rope_type: ClassVar[str] = "tilt2"

    with pytest.raises(ValueError, match="'su' is already registered"):
        register_scaling(
            ScalingDescriptor(
                "tilt2", Tilt2, tilt_frequencies, "", "", transformers=TransformersSpelling(aliases=("su",))
            )
        )
    assert "tilt2" not in REGISTRY
    with pytest.raises(ValueError, match="rope_type must be 'other'"):
        register_scaling(ScalingDescriptor("other", TiltScaling, tilt_frequencies, "", ""))
    with pytest.raises(ValueError, match="must match"):
        register_scaling(ScalingDescriptor("Bad Name", TiltScaling, tilt_frequencies, "", ""))
    with pytest.raises(TypeError, match="ScalingDescriptor"):
        register_scaling({"name": "x"})
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_scaling("linear")
    with pytest.raises(ValueError, match="Parameter instances"):
        dataclasses.replace(TILT, parameters=("factor",))
    # a parameter is a field of the config, and a name two types share is defined alike (one slider)
    with pytest.raises(ValueError, match="'tilt_flor' is not a field"):
        register_scaling(dataclasses.replace(TILT, parameters=(Parameter("tilt_flor", 1.0, 4.0, 0.5, 1.0),)))
    wider = dataclasses.replace(
        TILT,
        name="tilt2",
        config_class=Tilt2,
        parameters=(Parameter("factor", 1.0, 1024.0, 1.0, 8.0),),
    )
    with pytest.raises(ValueError, match="differs from the registered"):
        register_scaling(wider)
    assert "tilt2" not in REGISTRY
    with pytest.raises(ValueError, match="minimum <= default <= maximum"):
        Parameter("factor", 1.0, 4.0, 1.0, 8.0)


def test_length_dependent_types_need_a_trained_length_and_join_dynamic_types():
    def unscaled(config, rotary_dim, base, seq_len=None):
        return rope_inv_freq(rotary_dim, base), 1.0

    @dataclass(frozen=True)
    class Grow:
        factor: float = 2.0
        rope_type: ClassVar[str] = "grow"

        def validate(self, rotary_dim):
            pass

    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        register_scaling(ScalingDescriptor("grow", Grow, unscaled, "", "", length_dependent=True))

    @dataclass(frozen=True)
    class GrowWithLength:
        factor: float = 2.0
        original_max_position_embeddings: int = 64
        rope_type: ClassVar[str] = "grow"

        def validate(self, rotary_dim):
            pass

    assert "grow" not in DYNAMIC_TYPES
    register_scaling(ScalingDescriptor("grow", GrowWithLength, unscaled, "", "", length_dependent=True))
    try:
        assert "grow" in DYNAMIC_TYPES and set(DYNAMIC_TYPES) == {"dynamic", "longrope", "grow"}
        assert RotaryEmbedding(8, scaling=GrowWithLength()).is_dynamic
    finally:
        unregister_scaling("grow")
    assert set(DYNAMIC_TYPES) == {"dynamic", "longrope"}


def test_softmax_scale_comes_from_the_descriptor():
    deepseek = YaRNScaling(40.0, 4096, mscale=0.707, mscale_all_dim=0.707)
    assert (
        softmax_scale(deepseek)
        == yarn_softmax_scale(deepseek)
        == pytest.approx((0.1 * 0.707 * math.log(40) + 1) ** 2, rel=1e-15)
    )
    assert softmax_scale(LinearScaling(4.0)) == 1.0 == softmax_scale(None)
    assert RotaryEmbedding(64, scaling=deepseek).softmax_scale_factor == softmax_scale(deepseek)


def test_parameter_spaces_are_fields_and_ramps_bound_the_ramp():
    varied = [d for d in REGISTRY.values() if d.parameters]
    assert {"linear", "ntk", "dynamic", "yarn", "llama3"} == {d.name for d in varied}
    for d in varied:
        # every parameter names a field of the config class
        names = {p.name for p in d.parameters}
        assert names <= {f.name for f in dataclasses.fields(d.config_class)}
    # a ramp's bounds are wavelengths: trained length over the rotation counts that bound it
    assert REGISTRY["yarn"].ramp(YaRNScaling(8.0, 4096)) == (4096 / 32, 4096 / 1)
    assert {n for n, d in REGISTRY.items() if d.ramp is not None} == {"yarn", "llama3"}


def test_the_registry_holds_no_presentation():
    """Labels and what a page shows first are the palette's; the descriptor holds facts only."""
    forbidden = {"label", "shown", "colour", "dash"}
    for cls in (ScalingDescriptor, Parameter, TransformersSpelling):
        assert not forbidden & {f.name for f in dataclasses.fields(cls)}, cls
    assert set(palette.SHOWN_SCALINGS) <= set(REGISTRY)
    assert set(palette.SCALING_PARAMETER_LABELS) <= set(scaling_parameters())


# -- the lab's table -----------------------------------------------------------------------------------
def test_lab_methods_are_the_registered_types_an_extension_ratio_sets():
    assert method_names() == ("none",) + tuple(n for n, d in REGISTRY.items() if d.extension is not None)
    assert {"linear", "ntk", "dynamic", "yarn", "llama3"} <= set(method_names())
    assert [name for name, _ in method_table(256, 64)] == list(method_names())
    for name in extension_types():
        config = scaling_for(name, 256, 64)
        assert type(config) is REGISTRY[name].config_class
        REGISTRY[name].validate(config, 16)
    with pytest.raises(ValueError, match="now spelt 'dynamic'"):
        scaling_for("dynamic_ntk", 256, 64)
    with pytest.raises(SystemExit):
        lab_parser().parse_args(["--extension-methods", "dynamic_ntk"])


def test_a_run_extends_by_the_length_ratio_and_an_adaptive_type_by_its_fixed_factor():
    """The lab's table (and eval's fitted specs): factor L / L0 for a type whose frequencies are fixed
    once set, the fixed ADAPTIVE_FACTOR for one that follows the current length."""
    assert dict(method_table(256, 64)) == {
        "none": None,
        "linear": LinearScaling(4.0),
        "ntk": NTKScaling(4.0),
        "dynamic": DynamicNTKScaling(ADAPTIVE_FACTOR, 64),
        "yarn": YaRNScaling(4.0, 64, beta_fast=32.0, beta_slow=1.0),
        "llama3": Llama3Scaling(4.0, 1.0, 4.0, 64),
    }
    assert ADAPTIVE_FACTOR == 2.0
    # dynamic NTK's scale at the target length is what the lab freezes it to
    at = rope_frequencies(extension_config(REGISTRY["dynamic"], 256, 64), 16, 10000.0, seq_len=256)[0]
    assert torch.allclose(at, rope_frequencies(dynamic_effective_scaling(256, 64), 16, 10000.0)[0], rtol=1e-12)
    with pytest.raises(ValueError, match="'longrope' is not set by an extension ratio alone"):
        extension_config(REGISTRY["longrope"], 256, 64)


@pytest.mark.parametrize("length", [64, 256, 1000])
def test_eval_fits_each_length_exactly_as_the_lab_extends(length):
    """docs/eval.md: a spec naming a type alone fits it to each length as ``posenc lab`` does."""
    from posenc.measuring.eval.scalings import parse_spec, scaled_config

    for method in extension_types():
        assert scaled_config(parse_spec(method), length, 64) == scaling_for(method, length, 64), method


@pytest.mark.slow
def test_lab_dynamic_ntk_is_frozen_at_the_window_length():
    """One pass over L tokens picks the frequencies of length L: the frozen module, the static NTK
    with s_eff = 2 L / L0 - 1, and the unfrozen module on a full window all agree."""
    model = build_model(preset_config("smoke"), "rope")
    train_len = model.scheme.max_position_embeddings
    length = 2 * train_len
    x = torch.randint(0, 256, (1, length), generator=torch.Generator().manual_seed(0))
    frozen = extended_model(model, "dynamic", length, train_len)
    assert frozen.scheme.frozen_seq_len == length
    static = extended_model(model, "ntk", length, train_len)
    static.scheme = RotaryEmbedding(
        static.scheme.head_dim,
        base=static.scheme.base,
        scaling=dynamic_effective_scaling(length, train_len),
        max_position_embeddings=length,
    )
    free = extended_model(model, "dynamic", length, train_len)
    free.scheme.unfreeze_frequencies()
    with torch.no_grad():
        a, b, c = frozen(x), static(x), free(x)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)
    assert frozen.scheme.scaling == DynamicNTKScaling(2.0, train_len)


# -- the docs table --------------------------------------------------------------------------------------
def _docs_rows():
    rows = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `(\w+)` \| `(\w+)\((.*?)\)` \|(.*)$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3), [c.strip() for c in match.group(4).split("|")])
    return rows


def test_docs_table_lists_every_registered_type_as_the_registry_describes_it():
    rows = _docs_rows()
    assert list(rows) == list(REGISTRY), "docs/scalings.md's table must list every registered type, in order"
    for name, (cls, args, cells) in rows.items():
        d = REGISTRY[name]
        assert cls == d.config_class.__name__
        fields = [f.name for f in dataclasses.fields(d.config_class)]
        assert [a.split("=")[0].strip() for a in args.split(",") if a.strip()] == fields
        frequencies, _attention, length, in_transformers, _source = cells[:5]
        assert frequencies == d.summary
        assert length == ("yes" if d.length_dependent else "no")
        assert in_transformers == ("yes" if d.transformers.known else "no")
