"""posenc's axial tables in diffusers' FLUX transformer: parity at trained resolution, exact undo, exact
tables at coordinates where FluxPosEmbed's float32 ids collide, resolution change, refusals.

Needs diffusers (the ``diffusers`` extra); skipped with a reason where it is absent."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

diffusers = pytest.importorskip("diffusers", reason="diffusers is not installed (pip install 'posenc[diffusers]')")

from diffusers import FluxTransformer2DModel  # noqa: E402
from diffusers.models.transformers.transformer_flux import FluxPosEmbed  # noqa: E402

from posenc.integrations.diffusers import FluxAxialTables, patch, patched  # noqa: E402
from posenc.rope.axial_scaling import AxialNTK, axial_extension  # noqa: E402

#: the rope fields of black-forest-labs/FLUX.1-dev's transformer/config.json (and FLUX.1-schnell's)
FLUX1_ROPE = {"attention_head_dim": 128, "axes_dims_rope": [16, 56, 56], "num_attention_heads": 24}
#: a tiny FLUX transformer: the real config's field names, the same structure (axes summing to the head)
TINY = dict(
    patch_size=1,
    in_channels=8,
    num_layers=1,
    num_single_layers=1,
    attention_head_dim=16,
    num_attention_heads=2,
    joint_attention_dim=16,
    pooled_projection_dim=8,
    guidance_embeds=False,
    axes_dims_rope=(4, 6, 6),
)
TWO_PI = 2 * Fraction("3.14159265358979323846264338327950288419716939937510582097494")


def image_ids(height: int, width: int, offset: float = 0.0) -> torch.Tensor:
    """FLUX's latent image ids, (height * width, 3): (0, row, col), as its pipeline builds them."""
    ids = torch.zeros(height, width, 3)
    ids[..., 1] = torch.arange(height)[:, None] + offset
    ids[..., 2] = torch.arange(width)[None, :] + offset
    return ids.reshape(-1, 3)


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    model = FluxTransformer2DModel(**TINY).eval()
    h, w, text = 4, 6, 5
    inputs = dict(
        hidden_states=torch.randn(1, h * w, TINY["in_channels"]),
        encoder_hidden_states=torch.randn(1, text, TINY["joint_attention_dim"]),
        pooled_projections=torch.randn(1, TINY["pooled_projection_dim"]),
        timestep=torch.tensor([0.5]),
        img_ids=image_ids(h, w),
        txt_ids=torch.zeros(text, 3),
        return_dict=False,
    )

    def run():
        with torch.no_grad():
            return model(**inputs)[0]

    return model, run


def test_patched_model_gives_its_own_output_at_trained_resolution_and_undo_restores_it(tiny):
    model, run = tiny
    before = run()
    handle = patch(model)
    assert isinstance(model.pos_embed, FluxAxialTables) and handle.replaced == ["pos_embed"]
    assert patched(model) is handle
    torch.testing.assert_close(run(), before, rtol=1e-5, atol=1e-6)  # float32 noise at most
    handle.undo()
    assert isinstance(model.pos_embed, FluxPosEmbed) and patched(model) is None
    assert torch.equal(run(), before)
    handle.undo()  # idempotent


def test_the_patch_is_per_instance(tiny):
    model, _ = tiny
    torch.manual_seed(0)
    other = FluxTransformer2DModel(**TINY)
    with patch(model):
        assert isinstance(other.pos_embed, FluxPosEmbed)
    assert isinstance(model.pos_embed, FluxPosEmbed)


def test_tables_of_the_real_flux1_axes_equal_flux_pos_embed():
    head = FLUX1_ROPE["attention_head_dim"]
    assert sum(FLUX1_ROPE["axes_dims_rope"]) == head
    ids = torch.cat((torch.zeros(512, 3), image_ids(64, 64)))  # 512 text tokens, a 1024x1024 image's latents
    theirs = FluxPosEmbed(theta=10000, axes_dim=FLUX1_ROPE["axes_dims_rope"])(ids)
    ours = FluxAxialTables(10000, FLUX1_ROPE["axes_dims_rope"])(ids)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape == (512 + 64 * 64, head) and a.dtype == b.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def exact_cos(coordinate: int, frequency: float) -> float:
    x = Fraction(coordinate) * Fraction(frequency)
    return math.cos(float(x - TWO_PI * math.floor(x / TWO_PI)))


def test_tables_stay_exact_where_float32_ids_collide():
    # coordinates past 2**24, given in float64: FluxPosEmbed reads them through ids.float()
    axes = (4, 6, 6)
    start = 2**25 + 1
    ids = torch.tensor([[0.0, start, start + 1], [0.0, start + 2, start + 3]], dtype=torch.float64)
    ours, _ = FluxAxialTables(10000, axes)(ids)
    theirs, _ = FluxPosEmbed(theta=10000, axes_dim=list(axes))(ids)
    frequencies = 10000.0 ** (-torch.arange(0, 6, 2, dtype=torch.float64) / 6)
    for row, (_, h, _) in enumerate(ids.tolist()):
        want = torch.tensor([exact_cos(int(h), float(f)) for f in frequencies], dtype=torch.float64)
        got_ours = ours[row, 4:10:2].double()  # the height axis, one value per pair
        got_theirs = theirs[row, 4:10:2].double()
        assert (got_ours - want).abs().max() < 2e-7
        if row == 0:  # 2**25 + 1 is not a float32: FluxPosEmbed rotates 2**25 instead
            assert (got_theirs - want).abs().max() > 1e-2


def test_resolution_change_through_the_axial_registry(tiny):
    model, run = tiny
    before = run()
    config = axial_extension("ntk", (1, 4, 6), (1, 8, 12))
    assert config == AxialNTK((1.0, 2.0, 2.0))
    with patch(model, scaling=config) as handle:
        (tables,) = handle.tables
        assert tables.rope.scaling == config
        assert not torch.allclose(run(), before)  # the tables are the ones the model now reads
    assert torch.equal(run(), before)


def test_refusals_name_what_is_wrong(tiny):
    model, _ = tiny
    with pytest.raises(ValueError, match="Linear holds no diffusers FluxPosEmbed"):
        patch(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        patch("flux")
    with pytest.raises(ValueError, match="one factor per axis: 3"):
        patch(model, scaling=AxialNTK((2.0, 2.0)))
    assert isinstance(model.pos_embed, FluxPosEmbed)  # a refused patch changes nothing
    handle = patch(model)
    with pytest.raises(ValueError, match="already patched by posenc"):
        patch(model)
    handle.undo()
