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
