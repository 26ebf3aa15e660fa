"""The tour's figures speak the page's visual language: a scaling is drawn in its palette colour and a
sign in the palette's diverging map, with its scale beside it (:mod:`posenc.teaching.lesson.palette`).

Each section runs with its ``save`` replaced by a function that keeps the figure, so the test reads
the colours matplotlib was asked to draw, not pixels of a PNG.
"""

from __future__ import annotations

import io

import pytest
import rich.console
from matplotlib.colors import to_hex

import posenc.teaching.tour as tour
from posenc.teaching.lesson import palette
from posenc.teaching.tour import configs, extension, waves


def figure_of(monkeypatch, tmp_path, module, section):
    """Run ``section`` and return the one figure it saved."""
    kept = []
    monkeypatch.setattr(module, "save", lambda ctx, fig, name: kept.append(fig))
    ctx = tour.TourContext(console=rich.console.Console(file=io.StringIO()), out_dir=tmp_path, facts={})
    section(ctx)
    (fig,) = kept
    return fig


def drawn_lines(fig) -> dict[str, str]:
    """Label -> colour of every labelled line of every axes."""
    return {
        line.get_label(): to_hex(line.get_color())
        for ax in fig.axes
        for line in ax.get_lines()
        if not line.get_label().startswith("_")
    }


def test_the_scalings_figure_draws_each_scaling_in_its_palette_colour(monkeypatch, tmp_path):
    lines = drawn_lines(figure_of(monkeypatch, tmp_path, extension, extension.context_extension))
    assert set(lines) == set(extension.scalings()) and "default" in lines
    assert lines == {name: palette.SCALING_COLOURS[name] for name in lines}


def palette_dash(name: str):
    """The palette's dash of scaling ``name`` as matplotlib's unscaled ``(offset, lengths)``; ``None``
    lengths for solid."""
    dasharray = palette.SCALING_DASHES.get(name)
    return (0.0, None if dasharray is None else tuple(float(x) for x in dasharray.split()))


def test_the_scalings_figure_draws_each_scaling_in_its_palette_dash(monkeypatch, tmp_path):
    fig = figure_of(monkeypatch, tmp_path, extension, extension.context_extension)
    drawn = {
        line.get_label(): line for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")
    }
    assert set(drawn) == set(extension.scalings())
    assert any(name in palette.SCALING_DASHES for name in drawn)  # one dashed and ...
    assert any(name not in palette.SCALING_DASHES for name in drawn)  # ... one solid line, at least
    for name, line in drawn.items():
        offset, lengths = line._unscaled_dash_pattern  # before matplotlib scales it by the line's width
        assert (float(offset), None if lengths is None else tuple(map(float, lengths))) == palette_dash(name), name
        assert line.get_linestyle() == ("-" if name not in palette.SCALING_DASHES else "--"), name


@pytest.mark.parametrize(
    ("dasharray", "style"),
    [(None, "-"), ("", "-"), ("7 4", (0, (7.0, 4.0))), ("7,4", (0, (7.0, 4.0))), ("3", (0, (3.0, 3.0)))],
)
def test_an_svg_dasharray_becomes_a_matplotlib_line_style(dasharray, style):
    from posenc.teaching.tour._plot import svg_dash

    assert svg_dash(dasharray) == style


@pytest.mark.parametrize("dasharray", ["7 x", "-1 4", "0 0"])
def test_a_bad_svg_dasharray_is_refused(dasharray):
    from posenc.teaching.tour._plot import svg_dash

    with pytest.raises(ValueError, match=f"dasharray must be .* got {dasharray!r}"):
        svg_dash(dasharray)


def test_the_real_configs_figure_draws_each_scaling_in_its_palette_colour(monkeypatch, tmp_path):
    fig = figure_of(monkeypatch, tmp_path, configs, configs.real_configs)
    # the plain curve is unscaled RoPE; LongRoPE's short and long factors are both LongRoPE's
    scaling_of = {"unscaled": "default", "short factors": "longrope", "long factors": "longrope"}
    seen = set()
    for ax in fig.axes:
        for line in ax.get_lines():
            label = line.get_label()
            if label.startswith("_"):
                continue
            name = scaling_of.get(label, label)
            assert to_hex(line.get_color()) == palette.SCALING_COLOURS[name], (ax.get_title(), label)
            seen.add(name)
    assert {"default", "longrope"} <= seen and len(seen) >= 3


def test_the_real_configs_figure_draws_each_scaling_in_its_palette_dash(monkeypatch, tmp_path):
    """Each curve in its scaling's palette colour and dash (as the explorer draws it): no dashes of the
    tour's own for "scaled" (a dash means a scaling, the same one everywhere)."""
    fig = figure_of(monkeypatch, tmp_path, configs, configs.real_configs)
    scaling_of = {"unscaled": "default", "short factors": "longrope", "long factors": "longrope"}
    lines = [line for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")]
    for line in lines:
        name = scaling_of.get(line.get_label(), line.get_label())
        assert to_hex(line.get_color()) == palette.SCALING_COLOURS[name], line.get_label()
        offset, lengths = line._unscaled_dash_pattern  # before matplotlib scales it by the line's width
        assert (float(offset), None if lengths is None else tuple(map(float, lengths))) == palette_dash(name), name
        assert line.get_linestyle() == ("-" if name not in palette.SCALING_DASHES else "--"), name
    assert len(lines) == 5  # two panels, each unscaled + scaled, and LongRoPE's two lists
    # LongRoPE's two lists share its colour and dash, and are still told apart
    short, long = (
        next(line for line in lines if line.get_label() == f"{which} factors") for which in ("short", "long")
    )
    assert (short.get_alpha(), short.get_linewidth()) != (long.get_alpha(), long.get_linewidth())


def test_a_dashed_scaling_is_drawn_dashed_in_the_real_configs_figure(monkeypatch, tmp_path):
    """The figure reads the dash from the palette: give Llama 3 one there and its curve takes it."""
    monkeypatch.setitem(palette.SCALING_DASHES, "llama3", "5 2")
    fig = figure_of(monkeypatch, tmp_path, configs, configs.real_configs)
    (line,) = [line for ax in fig.axes for line in ax.get_lines() if line.get_label() == "llama3"]
    offset, lengths = line._unscaled_dash_pattern
    assert (float(offset), tuple(map(float, lengths))) == (0.0, (5.0, 2.0))


def test_the_sinusoidal_heatmap_uses_the_page_sign_map_with_its_scale(monkeypatch, tmp_path):
    fig = figure_of(monkeypatch, tmp_path, waves, waves.three_rules)
    (image,) = [image for ax in fig.axes for image in ax.get_images()]
    assert image.colorbar is not None  # the map's legend is drawn beside it
    for value in (-1.0, -0.5, 0.0, 0.5, 1.0):
        assert to_hex(image.cmap(image.norm(value))) == palette.diverging(value), value
    assert palette.diverging(0.0) == "#ffffff"


def test_the_sign_colormap_refuses_an_even_number_of_steps():
    from posenc.teaching.tour._plot import sign_colormap

    with pytest.raises(ValueError, match="steps must be an odd number .* got 256"):
        sign_colormap(256)


def test_the_heatmap_figure_draws_no_line_in_a_scheme_or_scaling_colour(monkeypatch, tmp_path):
    """Matplotlib's default cycle starts with RoPE's blue, YaRN's orange and NTK's green: sine columns of
    the sinusoidal table must not borrow them (nor ALiBi's black)."""
    fig = figure_of(monkeypatch, tmp_path, waves, waves.three_rules)
    meaning = {c.lower() for c in (*palette.SCHEME_COLOURS.values(), *palette.SCALING_COLOURS.values())}
    drawn = {to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()}
    assert len(drawn) >= 3 and not drawn & meaning, drawn & meaning


def reference_lines(fig) -> list:
    """Every horizontal line of a figure that is not a labelled curve: its reference lines."""
    return [
        line
        for ax in fig.axes
        for line in ax.get_lines()
        if line.get_label().startswith("_") and len(set(line.get_ydata())) == 1
    ]


@pytest.mark.parametrize(
    ("module", "section"),
    [(extension, extension.context_extension), (configs, configs.real_configs)],
    ids=["scalings", "real-configs"],
)
def test_reference_lines_are_the_lessons_neutral_grey_told_apart_by_dash(monkeypatch, tmp_path, module, section):
    """The tour drew the stretched length in tab:red and the lesson in brown-orange beside YaRN's orange:
    both now draw a reference line in the palette's neutral grey, trained and stretched told apart by
    the palette's dashes, their labels in the same grey."""
    fig = figure_of(monkeypatch, tmp_path, module, section)
    lines = reference_lines(fig)
    assert len(lines) == 2 * len(fig.axes), lines  # trained and stretched, in every panel
    grey = palette.NEUTRAL_COLOURS["reference"]
    dashes = {tuple(float(x) for x in palette.REFERENCE_DASHES[k].split()) for k in ("trained", "stretched")}
    for line in lines:
        assert to_hex(line.get_color()) == grey
        _, lengths = line._unscaled_dash_pattern
        assert tuple(map(float, lengths)) in dashes, lengths
    for ax in fig.axes:
        drawn = {tuple(map(float, line._unscaled_dash_pattern[1])) for line in reference_lines(fig) if line.axes is ax}
        assert drawn == dashes
        labels = [t for t in ax.texts if "length" in t.get_text() or t.get_text().split()[0] in ("trained", "context")]
        assert labels and all(to_hex(t.get_color()) == grey for t in labels), [t.get_text() for t in ax.texts]
