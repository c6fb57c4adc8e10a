"""The intro's map of the argument (attnbook.booktools.overview): each panel shows its result."""

import matplotlib

matplotlib.use("Agg")

from attnbook.booktools import overview  # noqa: E402


def test_the_collapse_panel_separates_pure_attention_from_skips():
    curves = overview.collapse_curves(depth=8)
    assert curves["SAN"].shape == (9,) and curves["SAN+skip"].shape == (9,)
    assert curves["SAN"][-1] < 1e-10 < 0.05 < curves["SAN+skip"][-1]
    assert abs(curves["SAN"][0] - curves["SAN+skip"][0]) < 1e-12  # the same inputs


def test_the_cosine_panel_collapses_only_without_scaling():
    depths = (1, 4, 16)
    cos = overview.cosine_curves(depths)
    assert len(cos["alpha = 1"]) == 3 and cos["alpha = 1"][-1] > 0.95
    assert cos["alpha = 1/sqrt(L)"][-1] < 0.8


def test_argument_map_draws_three_panels_with_their_curves():
    depths = (1, 2)
    fig = overview.argument_map(overview.collapse_curves(depth=2), {"a": [0.5, 0.9], "b": [0.5, 0.6]}, depths,
                                [(48, 0.0), (8, -1.0)], [(48, 0.0), (10, -0.2)])
    assert [ax.get_title() for ax in fig.axes] == ["I. Rank collapse", "II. Signal propagation", "III. Heads"]
    assert [len(ax.lines) for ax in fig.axes] == [2, 2, 2]
    assert list(fig.axes[2].lines[0].get_xdata()) == [8, 48]  # sorted by heads kept
