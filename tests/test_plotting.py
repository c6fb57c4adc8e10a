"""Tests of attnbook.core.plotting (shared figure helpers)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from attnbook.core import plotting  # noqa: E402


def test_head_grid_draws_one_panel_per_kind_on_one_colour_scale():
    values = {"a": torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]), "b": torch.tensor([[0.9, 0.0]])}
    fig = plotting.head_grid(values, ["a", "b"], {"a": "first", "b": "second"}, "title")
    panels = [ax for ax in fig.axes if ax.get_title() in ("first", "second")]
    assert [ax.get_title() for ax in panels] == ["first", "second"]
    images = [ax.images[0] for ax in panels]
    assert all(im.get_clim() == (0, pytest.approx(0.9)) for im in images)
    assert images[0].get_array().shape == (3, 2) and panels[1].get_xlabel() == "head"
    with pytest.raises(ValueError, match="every kind"):
        plotting.head_grid(values, ["a", "c"], {"a": "x"}, "t")


#: Machado, Oliveira and Fernandes (2009): full-severity deuteranopia and protanopia on linear RGB
_CVD = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "normal vision": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
}


def _lab_as_seen(hex_colour: str, vision) -> torch.Tensor:
    """CIELAB of an sRGB colour as seen with ``vision`` (a matrix on linear RGB)."""
    c = torch.tensor([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)], dtype=torch.float64)
    linear = torch.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    seen = (torch.tensor(vision, dtype=torch.float64) @ linear).clamp(0, 1)
    xyz = torch.tensor([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]],
                       dtype=torch.float64) @ seen / torch.tensor([0.95047, 1.0, 1.08883], dtype=torch.float64)
    f = torch.where(xyz > (6 / 29) ** 3, xyz.pow(1 / 3), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return torch.stack([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("vision", list(_CVD))
def test_the_variant_colours_stay_apart_for_colour_blind_readers(vision):
    """Every pair of variant colours differs by at least 20 CIELAB units (clearly distinct) as seen with the
    two common red-green colour blindnesses; the earlier palette's SAN and Transformer (red, green) were 7 apart
    under deuteranopia, SAN+skip and SAN+LN (blue, purple) 8."""
    colours = plotting.VARIANT_COLORS
    gaps = {(a, b): float((_lab_as_seen(colours[a], _CVD[vision]) - _lab_as_seen(colours[b], _CVD[vision])).norm())
            for i, a in enumerate(colours) for b in list(colours)[i + 1:]}
    closest = min(gaps, key=gaps.get)
    assert gaps[closest] >= 20, f"{closest} are {gaps[closest]:.1f} apart under {vision}"
    old = {"SAN": "#d62728", "Transformer": "#2ca02c"}
    assert float((_lab_as_seen(old["SAN"], _CVD["deuteranopia"])
                  - _lab_as_seen(old["Transformer"], _CVD["deuteranopia"])).norm()) < 10  # the test can tell


def test_a_missing_run_s_figure_names_what_it_would_show_and_its_command():
    fig = plotting.run_not_shipped("the optimiser sweep", "python scripts/run.py optimiser_sweep --preset paper")
    text = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "the optimiser sweep: not shipped at this preset" in text
    assert "python scripts/run.py optimiser_sweep --preset paper" in text
    with pytest.raises(ValueError, match="which command"):
        plotting.run_not_shipped("the sweep", "")
