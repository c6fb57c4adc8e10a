"""One figure style for the whole book, and the way the papers' reference values are drawn on figures.

Conventions: this book's results are solid lines or filled markers in the variant's colour; a paper's
value is a dashed grey line (:func:`paper_line`) or a hollow black marker (:func:`paper_marker`), always
labelled "paper: ..." in the legend.
"""

from __future__ import annotations

from typing import Optional, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

#: one colour per architecture variant, used by every chapter: Okabe and Ito's colour-blind-safe colours
#: (vermillion, sky blue, blue, bluish green, black), chosen so that every pair stays apart under simulated
#: deuteranopia and protanopia (the earlier red/green and blue/purple pairs did not; tests/test_plotting.py)
VARIANT_COLORS = {
    "SAN": "#D55E00",
    "SAN+MLP": "#56B4E9",
    "SAN+skip": "#0072B2",
    "SAN+LN": "#009E73",
    "Transformer": "#000000",
}
PAPER_STYLE = dict(color="0.35", linestyle="--", linewidth=1.3)
PAPER_MARKER = dict(marker="o", markerfacecolor="none", markeredgecolor="black", markersize=8, linestyle="none")

#: Figures are at most ``MAX_WIDTH`` inches wide with no text below 12 pt, so that their smallest text is
#: displayed at 9 CSS pixels or more on a phone (a 358 px column: 12 / 72 * 358 / 6.4 = 9.3 px) and larger
#: on a desktop; 144 dpi keeps them sharp (tests/test_browser.py measures both).
MAX_WIDTH = 6.4
STYLE = {
    "figure.figsize": (MAX_WIDTH, 3.8),
    "figure.dpi": 144,
    "savefig.dpi": 144,
    "savefig.bbox": "tight",
    "font.size": 12,
    "axes.titlesize": 12,
    "axes.labelsize": 12,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "figure.titlesize": 13,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 12,
    "legend.frameon": False,
    "lines.linewidth": 2.0,
}


def use_style() -> None:
    """Apply the book's figure style (called by :func:`attnbook.setup`)."""
    mpl.rcParams.update(STYLE)


def plain_log_ticks(ax: plt.Axes, values: Sequence[float], axis: str = "x") -> None:
    """Label a log axis at ``values`` in plain numbers, without minor labels (they collide)."""
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_locator(FixedLocator(list(values)))
    a.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    a.set_minor_locator(NullLocator())
    a.set_minor_formatter(NullFormatter())


def variant_color(name: str) -> str:
    """The colour of an architecture variant (``"SAN"``, ``"SAN+skip"``, ...)."""
    if name not in VARIANT_COLORS:
        raise ValueError(f"unknown variant {name!r}; expected one of {', '.join(VARIANT_COLORS)}")
    return VARIANT_COLORS[name]


def paper_line(ax: plt.Axes, y: float, label: str, *, horizontal: bool = True) -> None:
    """Draw a paper's reference value as a dashed line labelled ``"paper: <label>"``."""
    (ax.axhline if horizontal else ax.axvline)(y, label=f"paper: {label}", **PAPER_STYLE)


def paper_marker(
    ax: plt.Axes, x: Sequence[float] | float, y: Sequence[float] | float, label: Optional[str] = None
) -> None:
    """Draw paper values read off its figures as hollow black markers."""
    ax.plot(x, y, label=None if label is None else f"paper: {label}", **PAPER_MARKER)


def head_grid(values, kinds: Sequence[str], titles, title: str, vmax: Optional[float] = None) -> plt.Figure:
    """One heat map per attention kind of a ``kind -> (layers, heads)`` table (chapter "A translation
    model": confidence and relevance of every head), stacked with heights proportional to the layer counts
    and one shared colour scale from 0 to ``vmax`` (default: the largest value); ``titles``: kind -> panel
    title. Returns the figure."""
    if not kinds or any(k not in values for k in kinds):
        raise ValueError(f"values must hold every kind of {list(kinds)}, got {sorted(values)}")
    arrays = [values[k].numpy() if hasattr(values[k], "numpy") else values[k] for k in kinds]
    fig, axes = plt.subplots(len(kinds), 1, figsize=(6.4, 9.0), layout="constrained", squeeze=False,
                             gridspec_kw=dict(height_ratios=[a.shape[0] for a in arrays]))
    axes = axes[:, 0]
    vmax = vmax or max(float(a.max()) for a in arrays)
    for ax, k, v in zip(axes, kinds, arrays):
        im = ax.imshow(v, vmin=0, vmax=vmax, cmap="viridis", aspect="auto")
        ax.set(title=titles[k], ylabel="layer", xticks=range(v.shape[1]),
               xticklabels=range(1, v.shape[1] + 1), yticks=range(v.shape[0]),
               yticklabels=range(1, v.shape[0] + 1))
        ax.grid(False)
    axes[-1].set_xlabel("head")
    fig.colorbar(im, ax=list(axes), shrink=0.6)
    fig.suptitle(title)
    return fig


def run_not_shipped(what: str, command: str) -> plt.Figure:
    """The place of a figure whose precomputed run is not shipped at the active preset (any chapter that
    draws one): a small figure that says what it would show and the command that makes it, so that the
    chapter's figure and the text's reference to it exist at every preset."""
    if not what or not command:
        raise ValueError(f"say what the figure shows and which command makes it, got {what!r} and {command!r}")
    fig, ax = plt.subplots(figsize=(6.4, 1.6), layout="constrained")
    ax.axis("off")
    ax.text(0.5, 0.5, f"{what}: not shipped at this preset\nmade by: {command}", ha="center", va="center",
            wrap=True)
    return fig
