"""Tests of attnbook.rank.tasks.effectiveness_figures (chapter "Path effectiveness": accuracy by path length
and the recipe benchmark's table), from small synthetic inputs."""

from __future__ import annotations

import numpy as np
import pytest

from attnbook.rank.tasks import effectiveness_figures as ef



def test_accuracy_by_length_one_panel_per_task():
    names = ("sort", "hull")
    acc = {(name, n): np.linspace(0.9, 0.1, 4)[:, None] + np.array([[0.0, 0.02]]) for name in names for n in (5, 20)}
    probe = {name: np.full((4, 2), 0.6) for name in names}
    fig = ef.accuracy_by_length(acc, probe, {"sort": 0.98, "hull": 0.9}, {"sort": 0.1, "hull": 0.6},
                                {"sort": 0.97, "hull": 0.95}, {"sort": 0.1, "hull": 0.54})
    assert [ax.get_title() for ax in fig.axes] == list(names)
    hull = fig.axes[1]
    assert hull.get_ylabel() == "token accuracy" and hull.get_ylim() == (0, 1.05)
    labels = [line.get_label() for line in hull.lines]
    flat = {line.get_label(): line.get_ydata()[0] for line in hull.lines if len(line.get_ydata()) == 2}
    assert flat["this book: full model"] == 0.9 and flat["this book: chance / majority"] == 0.6
    assert flat["paper: chance / majority"] == 0.54 and flat["paper: full model"] == 0.95
    assert "20 paths, probe refitted" in labels
    # 5 and 20 paths side by side, shifted around the path lengths, at the mean over repeats
    bars = [c for c in hull.containers]
    assert [c.get_label() for c in bars] == ["5 paths", "20 paths"]
    x5, x20 = (c.lines[0].get_xdata() for c in bars)
    np.testing.assert_allclose(x20 - x5, 0.12)
    np.testing.assert_allclose(bars[0].lines[0].get_ydata(), np.linspace(0.9, 0.1, 4) + 0.01)
    assert len(fig.legends) == 1


def test_accuracy_by_length_refuses_three_numbers_of_paths():
    acc = {("sort", n): np.zeros((2, 2)) for n in (1, 5, 20)}
    with pytest.raises(ValueError, match="at most 2"):
        ef.accuracy_by_length(acc, {"sort": np.zeros((2, 2))}, {"sort": 1}, {"sort": 0}, {"sort": 1}, {"sort": 0})


def test_bench_table():
    row = dict(task="hull", target=0.9, final_acc=0.95, cpu_seconds=400.0, steps_done=900)
    bench = {"meta": {"command": "python scripts/bench_recipes.py"}, "machine": "cpu", "date": "today",
             "rows": [dict(row, recipe="paper", reached=True, cpu_seconds_to_target=141.9, steps_to_target=700),
                      dict(row, recipe="book", reached=False, cpu_seconds_to_target=None, steps_to_target=None)]}
    lines = ef.bench_table(bench).splitlines()
    assert lines[0] == "produced by: python scripts/bench_recipes.py | cpu | today"
    assert len(lines) == 4
    assert lines[2].split() == ["hull", "paper", "0.90", "142", "CPU", "s", "700", "0.950"]
    assert lines[3].split() == ["hull", "book", "0.90", "not", "in", "400", "CPU", "s", "900", "0.950"]
