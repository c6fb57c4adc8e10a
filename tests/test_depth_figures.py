"""Tests of attnbook.hf.depth_figures (chapter "Rank collapse in pretrained transformers": the residual
panels, the tables and the path-product box plots), drawn from small synthetic inputs."""

from __future__ import annotations

import numpy as np
import pytest

from attnbook.core.plotting import variant_color
from attnbook.hf import VARIANTS, depth_figures as df

RAW = {model: {state: {"embeddings": 0.5, **{v: [[1, 0.4], [12, 0.1 + i / 10]] for i, v in enumerate(VARIANTS)}}
               for state in ("init", "pretrained")}
       for model in ("bert-base-cased", "albert-base-v2", "xlnet-base-cased")}


def curves(depth: int, start: float = 0.9) -> dict:
    """Per variant a (depth + 1, 3) array whose mean falls linearly from ``start`` to 0."""
    mean = np.linspace(start, 0.0, depth + 1)
    return {v: mean[:, None] + np.array([-0.01, 0.0, 0.01]) for v in VARIANTS}



def test_fig2_reference_and_paper_key():
    ref = df.fig2_reference(RAW)
    assert ref[("bert-base-cased", "init")]["SAN"] == [(1, 0.4), (12, 0.1)]
    assert ref[("xlnet-base-cased", "pretrained")]["embeddings"] == 0.5
    assert df.paper_key("all-MiniLM-L6-v2") == "bert-base-cased" and df.paper_key("albert-base-v2") == "albert-base-v2"


def test_pretrained_panels_offline_puts_the_legend_in_the_spare_panel():
    fig = df.pretrained_panels({"all-MiniLM-L6-v2": curves(6)}, df.fig2_reference(RAW))
    model_ax, spare = fig.axes
    assert not spare.axison and spare.get_legend() is not None
    assert "(markers: BERT-base)" in model_ax.get_title()
    san = next(line for line in model_ax.lines if line.get_label() == "SAN")
    np.testing.assert_allclose(san.get_xdata(), np.arange(7) / 6)  # depth l / L from 0 to 1
    np.testing.assert_allclose(san.get_ydata(), np.linspace(0.9, 0, 7))
    assert san.get_color() == variant_color("SAN")
    # the paper's SAN points at l / 12, hollow markers then the coloured dots
    dots = [line for line in model_ax.lines if list(line.get_ydata()) == [0.4, 0.1]]
    assert len(dots) == 2 and list(dots[0].get_xdata()) == [1 / 12, 1.0]


def test_init_panels_one_per_model_and_a_legend_panel():
    init = {m: curves(12) for m in ("bert-base-cased", "albert-base-v2", "xlnet-base-cased")}
    fig = df.init_panels(init, df.fig2_reference(RAW))
    assert len(fig.axes) == 4
    assert [ax.get_title() for ax in fig.axes[:3]] == [f"{m} at init" for m in init]
    assert fig.axes[3].get_legend() is not None and not fig.axes[3].axison
    assert fig.axes[0].get_ylabel().startswith("$r_l$") and fig.axes[1].get_ylabel() == ""


def test_last_layer_table_rows_and_values():
    init = {"bert-base-cased": curves(12, start=0.5)}
    init["bert-base-cased"]["SAN"] = np.full((13, 3), 0.25)
    table = df.last_layer_table({"all-MiniLM-L6-v2": curves(6)}, init, df.fig2_reference(RAW))
    lines = table.splitlines()
    assert len(lines) == 4 and lines[0].count("|") == len(VARIANTS) + 2
    assert lines[2].startswith("| MiniLM-L6<br>pretrained |") and lines[3].startswith("| BERT-base<br>init |")
    assert "0.25 ± 0.00<br>*paper 0.10*" in lines[3]  # SAN: book's last layer above the paper's layer 12


def test_last_layer_table_says_about_zero_without_a_layer_12_point():
    ref = df.fig2_reference(RAW)
    ref[("bert-base-cased", "init")]["SAN"] = [(1, 0.3), (4, 0.0)]
    table = df.last_layer_table({}, {"bert-base-cased": curves(12)}, ref)
    assert "*paper ≈ 0*" in table.splitlines()[2].split("|")[2]


def test_bound_table_one_row_per_layer_up_to_the_limit():
    w = {"threshold": np.full(8, 2.0), "input_residual": np.linspace(10, 1, 8),
         "input_relative": np.full(8, 1e-5), "applies": np.linspace(10, 1, 8) < 2.0}
    rows = df.bound_table({"toy": w}).splitlines()
    assert len(rows) == 2 + 6
    assert rows[2] == "| toy | 1 | 2 | 10 | 1.0e-05 | no |"
    assert len(df.bound_table({"toy": w}, max_layers=10).splitlines()) == 2 + 8
    assert df.bound_table({"toy": w}, max_layers=10).splitlines()[-1].endswith("| yes |")


def test_rank1_boxplots_one_box_per_length_and_a_floor():
    rank1 = {"a": {1: np.array([0.5, 0.4]), 2: np.array([0.0, 0.0])},
             "b": {k: np.full(3, 10.0 ** -k) for k in range(1, 5)}}
    fig = df.rank1_boxplots(rank1)
    a, b = fig.axes
    assert a.get_yscale() == "log" and a.get_title() == "a" and b.get_title() == "b"
    medians = [line for line in a.lines if line.get_ydata()[0] == line.get_ydata()[-1]]
    assert min(line.get_ydata()[0] for line in medians) == pytest.approx(1e-8)  # zeros drawn at 1e-8
    assert list(b.get_xticks()[:4]) == [1, 2, 3, 4]
    assert b.get_position().width > a.get_position().width
