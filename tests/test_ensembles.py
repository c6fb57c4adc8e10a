"""Tests of attnbook.core.ensembles: models stacked along a model axis, each model's parameters in its own row."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnbook.core.ensembles import check_seeds, stack_models


def test_stack_models_keeps_each_model_in_its_row_and_trains_them_as_parameters():
    models = [nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)) for _ in range(3)]
    with torch.no_grad():
        for i, m in enumerate(models):
            m[0].weight.fill_(float(i))
            m[1].running_mean.fill_(10.0 + i)
    params, buffers, template = stack_models(models, "cpu")
    assert params["0.weight"].shape == (3, 2, 3) and isinstance(params["0.weight"], nn.Parameter)
    assert [float(params["0.weight"][i, 0, 0]) for i in range(3)] == [0.0, 1.0, 2.0]
    assert buffers["1.running_mean"][:, 0].tolist() == [10.0, 11.0, 12.0]
    assert next(template.parameters()).device.type == "meta"
    assert models[0][0].weight.device.type == "cpu"  # the template is a copy


def test_check_seeds_wants_distinct_seeds():
    assert check_seeds(range(3)) == [0, 1, 2]
    for bad in ([], [1, 1]):
        with pytest.raises(ValueError, match="distinct"):
            check_seeds(bad)


def test_models_are_batched_on_a_real_gpu_only(monkeypatch):
    from attnbook.core.ensembles import batches_models_on
    from attnbook.core.virtual_cuda import virtual_cuda

    assert not batches_models_on("cpu")
    with virtual_cuda() as dev:  # computes on the CPU
        assert not batches_models_on(dev)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert batches_models_on("cuda") and batches_models_on(torch.device("cuda", 0))
    assert not batches_models_on("cpu")
