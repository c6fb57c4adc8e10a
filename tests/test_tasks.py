"""Tests of attnbook.tasks (circle, sort, hull, memorization) and the path-restricted forward pass."""

from __future__ import annotations

import pytest
import torch

from attnbook import paths, tasks
from attnbook.tasks import circle, hull, memorization, sort
from attnbook.train import train


def test_circle_data_and_model():
    x, y = circle.circle_dataset(1000)
    assert x.shape == y.shape == (499, 2, 2)
    assert torch.allclose(x[1:], y[:-1])
    assert torch.allclose(x.norm(dim=-1), torch.full((499, 2), 0.3), atol=1e-6)
    for kw in ({}, {"skip": True}, {"mlp": True}):
        m = circle.CircleNet(32, **kw)
        hist = train(m, lambda s: (x[:64], y[:64]), lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), steps=3,
                     progress=False, device="cpu")
        assert len(hist["loss"]) == 3
        traj = circle.rollout(m, x[0], 20)
        assert traj.shape == (21, 2, 2) and torch.equal(traj[0], x[0])
    still = torch.zeros(51, 2, 2)
    assert circle.spread(still) == 0.0 and circle.token_gap(still) == 0.0
    moving = torch.stack([x[:51, 0], x[:51, 1]], 1)
    assert circle.token_gap(moving) == pytest.approx(2.0, abs=0.01)


def test_circle_bad_input():
    with pytest.raises(ValueError):
        circle.circle_points(7)
    with pytest.raises(ValueError):
        circle.CircleNet(33, 2)
    with pytest.raises(ValueError):
        circle.rollout(circle.CircleNet(8), torch.zeros(3, 2), 5)
    with pytest.raises(ValueError):
        circle.spread(torch.zeros(10, 2, 2), last=10)


def test_sort_and_hull():
    g = torch.Generator().manual_seed(0)
    x, y = sort.sort_batch(16, 8, 10, g)
    assert torch.equal(y, x.sort(-1).values) and x.max() < 10
    pts, lab = hull.hull_batch(32, 10, generator=g)
    assert pts.shape == (32, 10, 2) and lab.shape == (32, 10)
    square = torch.tensor([[[0.0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]]])
    assert hull.hull_labels(square).tolist() == [[1, 1, 1, 1, 0]]
    assert 0.5 <= hull.majority_accuracy(lab) <= 1
    with pytest.raises(ValueError):
        sort.sort_batch(0)
    with pytest.raises(ValueError):
        hull.hull_labels(torch.zeros(2, 2, 2))


def test_memorization_data():
    data = memorization.memorization_data(["In the beginning God created", "the heavens and the earth."],
                                          max_len=4, generator=torch.Generator().manual_seed(0))
    assert data.ids.shape == (2, 4) and data.mask.all()
    assert set(data.labels.unique().tolist()) <= {0, 1}
    data = memorization.memorization_data(["a b c d e f", "a"], max_len=8)
    assert (data.labels[~data.mask] == memorization.IGNORE).all() and data.ids[1, 1:].eq(0).all()
    with pytest.raises(ValueError):
        memorization.memorization_data([], 8)


def test_path_forward_matches_heads():
    torch.manual_seed(0)
    model = paths.PathSAN(3, 16, 2, 3, vocab_size=7, n_positions=5)
    x = model.embed_inputs(torch.randint(0, 7, (4, 5)))
    attn = model.blocks[0].attn
    full, _ = attn(x)
    per_head = sum(paths.head_output(attn, x, h) for h in range(2)) - attn.out.bias
    assert torch.allclose(full, per_head, atol=1e-5)
    # a path of length 0 is the normalised embedding
    zero = paths.path_forward(model.blocks, x, torch.full((2, 3), paths.SKIP))
    assert torch.allclose(zero, torch.nn.functional.layer_norm(x, (16,)), atol=1e-5)
    out = model(torch.randint(0, 7, (4, 5)), paths=paths.sample_paths(3, 2, 2, 5))
    assert out.shape == (4, 5, 3)
    with pytest.raises(ValueError):
        paths.head_output(attn, x, 2)
    with pytest.raises(ValueError):
        paths.path_forward(model.blocks, x, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError):
        paths.PathSAN(3, 16, 2, 3)


@pytest.mark.parametrize("name", ["sort", "hull", "memorization"])
def test_path_tasks_train_and_evaluate(name):
    size = dict(d_model=16, n_heads=2, depth=2, length=8, vocab=10, n_points=10, n_train=50, n_eval=20,
                n_sentences=10, max_len=8)
    t = tasks.path_task(name, size, torch.Generator().manual_seed(0))
    hist = train(t["model"], lambda s: t["batch_fn"](8), t["loss_fn"], steps=3, progress=False, device="cpu")
    assert len(hist["loss"]) == 3
    assert 0 <= tasks.full_accuracy(t["model"], t["eval"]) <= 1
    accs = tasks.path_accuracy(t["model"], t["eval"], 1, 5, 2, torch.Generator().manual_seed(0))
    assert len(accs) == 2 and all(0 <= a <= 1 for a in accs)
    assert 0 < t["chance"] < 1


def test_task_bad_input():
    with pytest.raises(ValueError):
        tasks.path_task("parity", dict(d_model=8, n_heads=2, depth=1))
    with pytest.raises(ValueError):
        tasks.token_accuracy(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long))


def test_rollout_and_accuracy_follow_the_model_device():
    X, _ = circle.circle_dataset(20)
    model = circle.CircleNet(8, 2)
    traj = circle.rollout(model, X[0], 5)
    assert traj.device == X.device and traj.shape == (6, 2, 2)
    g = torch.Generator().manual_seed(0)
    size = dict(d_model=8, n_heads=2, depth=2, length=4, vocab=5, n_train=8, n_eval=8)
    t = tasks.path_task("sort", size, g)
    acc = tasks.full_accuracy(t["model"], t["eval"])
    assert 0.0 <= acc <= 1.0
    if torch.cuda.is_available():
        model.cuda()
        assert circle.rollout(model, X[0], 5).device == X.device  # computed on cuda, returned on the CPU
        t["model"].cuda()
        assert tasks.full_accuracy(t["model"], t["eval"]) == pytest.approx(acc, abs=0.2)
        assert len(tasks.path_accuracy(t["model"], t["eval"], 1, 2, 2, g)) == 2
