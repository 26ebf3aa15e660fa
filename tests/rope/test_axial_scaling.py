"""Resolution change for axial RoPE: the registry, each method's formula and limits, and bad fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from posenc.rope.axial import AxialRotaryEmbedding, grid_coordinates
from posenc.rope.axial_scaling import (
    AXIAL_SCALINGS,
    AxialInterpolation,
    AxialNTK,
    AxialScalingDescriptor,
    axial_extension,
    axial_frequencies,
    register_axial_scaling,
    unregister_axial_scaling,
)
from posenc.rope.tables import rope_inv_freq


def test_interpolation_is_rotating_the_squeezed_coordinates():
    s = (1.0, 2.0, 4.0)
    scaled = AxialRotaryEmbedding(16, (4, 6, 6), 10000.0, scaling=AxialInterpolation(s))
    plain = AxialRotaryEmbedding(16, (4, 6, 6), 10000.0)
    coords = grid_coordinates((2, 4, 8))
    squeezed = coords.double() / torch.tensor(s, dtype=torch.float64)
    q = torch.randn(1, 2, coords.shape[0], 16, dtype=torch.float64)
    torch.testing.assert_close(scaled(q, q, coords)[0], plain(q, q, squeezed)[0], rtol=1e-12, atol=1e-12)


def test_ntk_keeps_each_axis_fastest_pair_and_slows_its_slowest_by_the_factor():
    axes, bases, s = (8, 16), (100.0, 10000.0), (2.0, 3.0)
    scaled = axial_frequencies(AxialNTK(s), axes, bases)
    plain = axial_frequencies(None, axes, bases)
    for new, old, factor in zip(scaled, plain, s):
        assert float(new[0]) == float(old[0]) == 1.0
        assert float(old[-1] / new[-1]) == pytest.approx(factor, rel=1e-12)
        assert bool((new <= old).all())


def test_a_factor_of_one_changes_nothing():
    axes, bases = (4, 8), (10.0, 1e4)
    plain = axial_frequencies(None, axes, bases)
    for config in (AxialInterpolation((1, 1)), AxialNTK((1.0, 1.0))):
        for a, b in zip(axial_frequencies(config, axes, bases), plain):
            assert torch.equal(a, b)


def test_one_pair_axis_keeps_its_frequency_under_ntk():
    assert float(axial_frequencies(AxialNTK((4.0,)), (2,), (10.0,))[0][0]) == 1.0


def test_extension_from_trained_and_target_grids():
    assert axial_extension("interpolate", (16, 16), (32, 24)) == AxialInterpolation((2.0, 1.5))
    assert axial_extension("ntk", (1, 16, 16), (1, 32, 8)) == AxialNTK((1.0, 2.0, 1.0))
    with pytest.raises(ValueError, match="name must be one of \\['interpolate', 'ntk'\\]"):
        axial_extension("yarn", (16,), (32,))
    with pytest.raises(ValueError, match="one size per axis"):
        axial_extension("ntk", (16, 16), (32,))
    with pytest.raises(ValueError, match="target_grid\\[1\\] must be an integer >= 1"):
        axial_extension("ntk", (16, 16), (32, 0))


@pytest.mark.parametrize(
    "make, axes, match",
    [
        (
            lambda: AxialInterpolation((2.0, 0.0)),
            None,
            "'interpolate' axial scaling: factors\\[1\\] must be a finite number > 0",
        ),
        (lambda: AxialInterpolation(()), None, "factors must be a non-empty sequence"),
        (lambda: AxialInterpolation((2.0, float("nan"))), None, "factors\\[1\\]"),
        (lambda: AxialNTK((0.5,)), None, "'ntk' axial scaling: factors\\[0\\] must be a finite number >= 1"),
        (lambda: AxialNTK(2.0), None, "factors must be a non-empty sequence"),
        (lambda: AxialNTK((2.0, 2.0)), (8, 8, 8), "one factor per axis: 3 for axes_dim \\[8, 8, 8\\]"),
    ],
)
def test_bad_fields_are_refused_by_name(make, axes, match):
    with pytest.raises(ValueError, match=match):
        config = make()
        AxialRotaryEmbedding(sum(axes), axes, scaling=config)


def test_a_method_registered_from_outside_is_used_and_removed():
    @dataclass(frozen=True)
    class Halve:
        rope_type: ClassVar[str] = "halve_test"

        def validate(self, axes_dim):
            pass

    def frequencies(config, axes_dim, bases):
        return tuple(rope_inv_freq(d, b) / 2 for d, b in zip(axes_dim, bases))

    register_axial_scaling(AxialScalingDescriptor("halve_test", Halve, frequencies, summary="/2", source="test"))
    try:
        m = AxialRotaryEmbedding(8, (4, 4), scaling=Halve())
        assert torch.equal(m.inv_freq, torch.cat([rope_inv_freq(4, 10000.0) / 2] * 2))
        with pytest.raises(ValueError, match="already registered"):
            register_axial_scaling(AxialScalingDescriptor("halve_test", Halve, frequencies, summary="", source=""))
    finally:
        unregister_axial_scaling("halve_test")
    assert "halve_test" not in AXIAL_SCALINGS
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_axial_scaling("ntk")


def test_a_method_returning_bad_frequencies_is_refused():
    @dataclass(frozen=True)
    class Broken:
        rope_type: ClassVar[str] = "broken_test"

        def validate(self, axes_dim):
            pass

    register_axial_scaling(
        AxialScalingDescriptor("broken_test", Broken, lambda c, a, b: (torch.zeros(2),) * len(a), summary="", source="")
    )
    try:
        with pytest.raises(ValueError, match="not finite and > 0"):
            AxialRotaryEmbedding(8, (4, 4), scaling=Broken())
    finally:
        unregister_axial_scaling("broken_test")
