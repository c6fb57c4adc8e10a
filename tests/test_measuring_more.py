"""Tests of the analysis of chapter "Rank collapse in pretrained transformers" in attnbook.hf.measuring:
the first layer below a level and where the bound applies over several models."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnbook.hf.measuring import bound_margins, first_layer_below


def test_first_layer_below_reads_the_mean_over_inputs():
    curves = np.array([[0.9, 0.9], [0.2, 0.0], [0.001, 0.019], [0.0, 0.0]])  # means 0.9, 0.1, 0.01, 0
    assert first_layer_below(curves, 0.5) == 1
    assert first_layer_below(curves, 0.01) == 3  # 0.01 is not below 0.01
    assert first_layer_below(curves, 0.0101) == 2
    with pytest.raises(ValueError, match="below 0"):
        first_layer_below(curves, 0.0)


def case(residual, threshold, relative):
    residual, threshold = np.array(residual), np.array(threshold)
    return {"threshold": threshold, "input_residual": residual, "input_relative": np.array(relative),
            "applies": residual < threshold}


def test_bound_margins():
    cases = {"a": case([500.0, 3.0, 0.5], [2.0, 2.0, 2.0], [0.9, 1e-3, 1e-6]),
             "b": case([300.0, 0.1, 0.01], [1.0, 1.0, 1.0], [0.8, 1e-5, 1e-7])}
    excess, relative = bound_margins(cases)
    assert excess == pytest.approx(250.0)  # min(500 / 2, 300 / 1)
    assert relative == pytest.approx(1e-5)  # applies: a's layer 3 (1e-6), b's layers 2 and 3
    # a model where the step never contracts does not count; none at all gives NaN
    cases["c"] = case([5.0, 5.0], [1.0, 1.0], [0.5, 0.5])
    assert bound_margins(cases) == (pytest.approx(5.0), pytest.approx(1e-5))
    assert math.isnan(bound_margins({"c": cases["c"]})[1])
    with pytest.raises(ValueError):
        bound_margins({})
