"""Tests of attnbook.rank.tasks (chapter 6, the circle task; chapter 7, sort, hull, memorization and the accuracy of
sampled paths)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attnbook.rank import paths, tasks
from attnbook.rank.tasks import circle, hull, memorization, sort
from attnbook.core.train import train

SIZE = dict(d_model=16, n_heads=2, depth=2, length=8, vocab=10, n_points=10, n_train=50, n_eval=20,
            n_sentences=10, max_len=8)


# ------------------------------------------------------------------------------------- the circle task


def test_circle_data():
    x, y = circle.circle_dataset(1000)
    assert x.shape == y.shape == (499, 2, 2)
    assert_close(x[1:], y[:-1], atol=0, rtol=0)  # the same points, shifted by one item
    assert_close(x.norm(dim=-1), torch.full((499, 2), 0.3), atol=1e-6, rtol=0)
    # token 2 starts n/2 - 1 = 499 points after token 1: an angle of 499 * 2 pi / 1000
    angle = torch.atan2(x[0, 1, 1], x[0, 1, 0]) % (2 * torch.pi)
    assert angle.item() == pytest.approx(499 * 2 * torch.pi / 1000, abs=1e-5)


def test_circle_net_outer_skip_adds_the_input():
    """skip=True predicts the step: next = x + f(x), with f the same network."""
    torch.manual_seed(0)
    m = circle.CircleNet(8, 2, skip=True)
    x, _ = circle.circle_dataset(20)
    with_skip = m(x)
    m.skip = False
    assert_close(with_skip, x + m(x), atol=1e-6, rtol=0)


def test_circle_net_without_attention_is_token_wise():
    """attention=False: each token's output depends on that token alone (moving the other token changes
    nothing), with the same parameters as the model with attention, which does mix the tokens."""
    torch.manual_seed(0)
    m = circle.CircleNet(8, 2, attention=False)
    full = circle.CircleNet(8, 2)
    full.load_state_dict(m.state_dict(), strict=False)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in full.named_parameters()]
    x, _ = circle.circle_dataset(20)
    moved = x.clone()
    moved[:, 1] = moved[:, 1] * 0.5 + 0.1
    assert_close(m(moved)[:, 0], m(x)[:, 0], atol=1e-6, rtol=0)
    assert (full(moved)[:, 0] - full(x)[:, 0]).abs().max() > 1e-4
    alone = torch.stack([m(x[:, :1])[:, 0], m(x[:, 1:])[:, 0]], 1)
    assert_close(m(x), alone, atol=1e-6, rtol=0)


def test_circle_net_attending_only_to_itself_is_token_wise_with_the_value_maps_kept():
    """attention="self": each token's output depends on that token alone, and equals the full model's on a
    sequence of that one token (where softmax over one key is 1: P = I, the value and output maps kept);
    attention=False differs from it (no value map). Anything else is refused."""
    torch.manual_seed(0)
    own = circle.CircleNet(8, 2, attention="self")
    full, gated = circle.CircleNet(8, 2), circle.CircleNet(8, 2, attention=False)
    full.load_state_dict(own.state_dict(), strict=False)
    gated.load_state_dict(own.state_dict(), strict=False)
    x, _ = circle.circle_dataset(20)
    moved = x.clone()
    moved[:, 1] = moved[:, 1] * 0.5 + 0.1
    assert_close(own(moved)[:, 0], own(x)[:, 0], atol=1e-6, rtol=0)
    alone = torch.cat([full(x[:, :1]), full(x[:, 1:])], 1)  # one token: attention to itself only
    assert_close(own(x), alone, atol=1e-6, rtol=0)
    assert (gated(x) - own(x)).abs().max() > 1e-3
    for bad in ("none", 0, 1, None):
        with pytest.raises(ValueError, match="attention"):
            circle.CircleNet(8, 2, attention=bad)


def test_rollout_feeds_predictions_back():
    """Chapter 6, Fig. 3: traj[t + 1] = model(traj[t]), from traj[0] = start."""
    torch.manual_seed(1)
    m = circle.CircleNet(8, 2, mlp=True)
    x, _ = circle.circle_dataset(20)
    traj = circle.rollout(m, x[0], 5)
    assert traj.shape == (6, 2, 2)
    assert_close(traj[0], x[0], atol=0, rtol=0)
    with torch.no_grad():
        for t in range(5):
            assert_close(traj[t + 1], m(traj[t][None])[0], atol=1e-6, rtol=0)
    assert m.training  # rollout restores the training mode


def test_official_skip_data_and_rollout_follow_run_circle_py():
    """--circle_skip as the official code does it: inputs are a batch plus the previous batch (zeros first),
    targets absolute; the rollout feeds the running sum of predictions and records the predictions."""
    X, Y = circle.circle_dataset(20)  # 9 items
    batches = circle.official_skip_batches(X, Y, 4)
    assert [len(b[0]) for b in batches] == [4, 4, 1]
    assert_close(batches[0][0], X[:4], atol=0, rtol=0)
    assert_close(batches[1][0], X[4:8] + X[:4], atol=0, rtol=0)
    assert_close(batches[2][0], X[8:9] + X[4:5], atol=0, rtol=0)
    assert_close(batches[1][1], Y[4:8], atol=0, rtol=0)
    torch.manual_seed(2)
    m = circle.CircleNet(8, 2)
    traj = circle.rollout_official_skip(m, X[0], 3)
    total = X[0].clone()
    with torch.no_grad():
        for t in range(3):
            pred = m(total[None])[0]
            assert_close(traj[t + 1], pred, atol=1e-6, rtol=0)
            total = total + pred
    assert_close(traj[0], X[0], atol=0, rtol=0)


def test_circle_training_lowers_the_loss_for_every_variant():
    x, y = circle.circle_dataset(1000)
    for kw in ({}, {"skip": True}, {"mlp": True}):
        torch.manual_seed(0)
        m = circle.CircleNet(32, **kw)
        with torch.no_grad():
            initial = float(((m(x[:64]) - y[:64]) ** 2).mean())
        hist = train(m, lambda s: (x[:64], y[:64]), lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), steps=20,
                     lr=5e-3, warmup=0, progress=False, device="cpu")
        assert hist["loss"][0] == pytest.approx(initial, rel=1e-5), kw
        assert hist["loss"][-1] < 0.5 * hist["loss"][0], kw


def test_spread_and_token_gap_by_hand():
    """Eq. spread: RMS distance of the last points from their mean, over the radius. Two tokens fixed at
    (+-r, 0): mean 0, every point at distance r, so spread 1 and token gap 2. All at one point: 0 and 0."""
    r = circle.RADIUS
    fixed = torch.tensor([[r, 0.0], [-r, 0.0]]).expand(51, 2, 2)
    assert circle.spread(fixed) == pytest.approx(1.0, abs=1e-6)
    assert circle.token_gap(fixed) == pytest.approx(2.0, abs=1e-6)
    still = torch.full((51, 2, 2), 0.1)
    assert circle.spread(still) == pytest.approx(0.0, abs=1e-6)
    assert circle.token_gap(still) == pytest.approx(0.0, abs=1e-6)
    # only the last `last` steps count: an early excursion does not
    moved = fixed.clone()
    moved[:10] = 5.0
    assert circle.spread(moved, last=41) == pytest.approx(1.0, abs=1e-6)
    x, _ = circle.circle_dataset(1000)
    moving = torch.stack([x[:51, 0], x[:51, 1]], 1)  # nearly antipodal tokens walking along the circle
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


# ------------------------------------------------------------------------------------ the path tasks


def test_sort_and_hull_data():
    g = torch.Generator().manual_seed(0)
    x, y = sort.sort_batch(16, 8, 10, g)
    assert torch.equal(y, x.sort(-1).values) and x.max() < 10 and x.min() >= 0
    pts, lab = hull.hull_batch(32, 10, generator=g)
    assert pts.shape == (32, 10, 2) and lab.shape == (32, 10)
    assert torch.equal(lab, hull.hull_labels(pts))
    square = torch.tensor([[[0.0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]]])
    assert hull.hull_labels(square).tolist() == [[1, 1, 1, 1, 0]]
    with pytest.raises(ValueError):
        sort.sort_batch(0)
    with pytest.raises(ValueError):
        hull.hull_labels(torch.zeros(2, 2, 2))


def test_majority_accuracy_by_hand():
    """The hull task's chance line: the share of the more frequent label."""
    assert hull.majority_accuracy(torch.tensor([[1, 1, 1, 0]])) == pytest.approx(0.75, abs=1e-6)
    assert hull.majority_accuracy(torch.tensor([[0, 0, 0, 1], [0, 0, 0, 0]])) == pytest.approx(7 / 8, abs=1e-6)
    assert hull.majority_accuracy(torch.tensor([[1, 0]])) == pytest.approx(0.5, abs=1e-6)


def test_token_accuracy_by_hand():
    """Arg-max accuracy over the labelled tokens only: 2 of the 3 labelled tokens are right."""
    logits = torch.tensor([[[2.0, 1.0], [0.0, 3.0], [5.0, 0.0], [1.0, 4.0]]])
    labels = torch.tensor([[0, 1, 1, -100]])
    assert tasks.token_accuracy(logits, labels) == pytest.approx(2 / 3, abs=1e-6)
    assert tasks.token_accuracy(logits, torch.tensor([[0, 1, 0, 1]])) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="no labelled token"):
        tasks.token_accuracy(logits, torch.full((1, 4), -100))


def test_memorization_data():
    data = memorization.memorization_data(["In the beginning God created", "the heavens and the earth."],
                                          max_len=4, generator=torch.Generator().manual_seed(0))
    assert data.ids.shape == (2, 4) and data.mask.all()
    assert set(data.labels.unique().tolist()) <= {0, 1}
    data = memorization.memorization_data(["a b c d e f", "a"], max_len=8)  # [CLS] a ... f [SEP]
    assert (data.labels[~data.mask] == memorization.IGNORE).all() and data.ids[1, 3:].eq(0).all()
    assert data.ids[0, 1] == data.ids[1, 1]  # the same word piece gets the same compact id
    assert data.vocab_size == 9 and sorted(data.ids[0].tolist()) == list(range(1, 9))
    with pytest.raises(ValueError):
        memorization.memorization_data([], 8)


def test_memorization_labels_are_fair_coins():
    """Labels are independent fair bits: over 200 sentences (about 4,000 tokens, s.e. 0.008) the mean is 0.5."""
    from attnbook.core.text import english_sentences

    data = memorization.memorization_data(english_sentences(200), 24, torch.Generator().manual_seed(0))
    frac = data.labels[data.mask].float().mean().item()
    assert frac == pytest.approx(0.5, abs=0.04)


@pytest.mark.parametrize("name", ["sort", "hull", "memorization"])
def test_path_task_chance_line(name):
    """Chapter 7's chance lines: 1/vocab for sort, the majority label of the evaluation set for hull, 1/2 for
    the fair random labels of memorization."""
    t = tasks.path_task(name, SIZE, torch.Generator().manual_seed(0))
    x, y, mask = t["eval"]
    expected = {"sort": 0.1, "hull": hull.majority_accuracy(y), "memorization": 0.5}[name]
    assert t["chance"] == pytest.approx(expected, abs=1e-9)
    assert t["model"].depth == 2 and t["model"].n_heads == 2


def test_memorization_loss_ignores_padding_and_uses_the_key_mask():
    """The token cross-entropy of a padded memorization batch, by hand: the model is run with the key mask
    (so padding keys get no attention) and only labelled tokens count."""
    torch.manual_seed(0)
    t = tasks.path_task("memorization", dict(SIZE, max_len=24), torch.Generator().manual_seed(0))
    model = t["model"].double()
    x, y, mask = t["train_set"]
    assert not mask.all()  # the sentences have different lengths
    with torch.no_grad():
        logits = model(x, key_mask=mask)
        terms = [-logits[i, j].log_softmax(-1)[y[i, j]] for i in range(len(x)) for j in range(x.shape[1])
                 if mask[i, j]]
        assert_close(t["loss_fn"](model, (x, y, mask)), torch.stack(terms).mean(), atol=1e-12, rtol=1e-10)
        assert abs(float(t["loss_fn"](model, (x, y, None))) - float(torch.stack(terms).mean())) > 1e-6


class Stub(torch.nn.Module):
    """A stand-in for PathSAN that records its calls: it is right on every token exactly when it was called
    with paths of the expected shape and length, and with the expected key mask."""

    def __init__(self, depth, n_heads, length=None, n_paths=None, key_mask=None):
        super().__init__()
        self.depth, self.n_heads = depth, n_heads
        self.w = torch.nn.Parameter(torch.zeros(()))
        self.length, self.n_paths, self.key_mask, self.calls = length, n_paths, key_mask, []

    def forward(self, x, paths=None, key_mask=None):
        self.calls.append(paths)
        ok = (key_mask is None) == (self.key_mask is None) and (key_mask is None or torch.equal(key_mask, self.key_mask))
        if self.length is not None:
            ok = ok and paths is not None and paths.shape == (self.n_paths, self.depth)
            ok = ok and bool(((paths != paths.new_tensor(-1)).sum(1) == self.length).all())
        labels = x % 3
        return F.one_hot(labels if ok else (labels + 1) % 3, 3).float() + 0 * self.w


def test_full_accuracy_runs_the_model_with_its_key_mask():
    x = torch.tensor([[0, 1, 2, 0], [1, 1, 0, 0]])
    y = x % 3  # what the stub predicts when it is called correctly
    mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    assert tasks.full_accuracy(Stub(2, 2, key_mask=mask), (x, y, mask)) == pytest.approx(1.0, abs=1e-6)
    assert tasks.full_accuracy(Stub(2, 2, key_mask=None), (x, y, mask)) == pytest.approx(0.0, abs=1e-6)


def test_path_accuracy_draws_fresh_paths_of_the_given_length():
    """Chapter 7, Fig. path effectiveness: each repeat runs the model on n_paths new paths of the given length,
    drawn with sample_paths from the given generator, and the model is left in its training mode."""
    x = torch.tensor([[0, 1, 2, 0]])
    y = x % 3
    stub = Stub(4, 3, length=2, n_paths=5)
    stub.train()
    accs = tasks.path_accuracy(stub, (x, y, None), 2, 5, 3, torch.Generator().manual_seed(7))
    assert accs == [pytest.approx(1.0, abs=1e-6)] * 3
    assert stub.training
    g = torch.Generator().manual_seed(7)
    expected = [paths.sample_paths(4, 3, 2, 5, g) for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(stub.calls, expected))
    assert not torch.equal(stub.calls[0], stub.calls[1])  # fresh draws
    assert tasks.path_accuracy(Stub(4, 3, length=3, n_paths=5), (x, y, None), 2, 5, 1) == [pytest.approx(0.0, abs=1e-6)]


def test_path_tasks_train_and_evaluate():
    """The training path of chapter 7 for a few steps: the first loss is the initial model's on that batch."""
    torch.manual_seed(0)  # the models' weights come from the global generator: seeded
    for name in ("sort", "hull", "memorization"):
        t = tasks.path_task(name, SIZE, torch.Generator().manual_seed(0))
        batch = t["batch_fn"](8, torch.Generator().manual_seed(1))
        with torch.no_grad():
            initial = float(t["loss_fn"](t["model"], batch))
        hist = train(t["model"], lambda s: batch, t["loss_fn"], steps=10, lr=3e-3, warmup=0, progress=False,
                     device="cpu")
        assert hist["loss"][0] == pytest.approx(initial, rel=1e-5), name
        assert hist["loss"][-1] < hist["loss"][0], name


def test_task_bad_input():
    with pytest.raises(ValueError):
        tasks.path_task("parity", dict(d_model=8, n_heads=2, depth=1))
    with pytest.raises(ValueError):
        tasks.token_accuracy(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError):
        tasks.path_accuracy(Stub(2, 2), (torch.zeros(1, 2, dtype=torch.long),) * 2 + (None,), 1, 1, 0)
    model = tasks.PathSAN(3, 16, 2, 3, vocab_size=7, n_positions=5)
    with pytest.raises(ValueError):
        paths.head_output(model.blocks[0].attn, torch.zeros(1, 5, 16), 2)
    with pytest.raises(ValueError):
        paths.path_forward(model.blocks, torch.zeros(1, 5, 16), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError):
        tasks.PathSAN(3, 16, 2, 3)


def test_rollout_and_accuracy_on_the_cpu_model_stay_on_the_cpu():
    X, _ = circle.circle_dataset(20)
    traj = circle.rollout(circle.CircleNet(8, 2), X[0], 5)
    assert traj.device == X.device and traj.shape == (6, 2, 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_rollout_and_accuracy_follow_the_model_device():
    """Data drawn on the CPU is moved to the model's device; the trajectory comes back on the start's device."""
    X, _ = circle.circle_dataset(20)
    torch.manual_seed(0)
    model = circle.CircleNet(8, 2)
    cpu_traj = circle.rollout(model, X[0], 5)
    model.cuda()
    traj = circle.rollout(model, X[0], 5)
    assert traj.device == X.device
    assert_close(traj, cpu_traj, atol=1e-4, rtol=1e-4)  # float32 kernels differ between devices
    g = torch.Generator().manual_seed(0)
    size = dict(d_model=8, n_heads=2, depth=2, length=4, vocab=5, n_train=8, n_eval=8)
    t = tasks.path_task("sort", size, g)
    acc = tasks.full_accuracy(t["model"], t["eval"])
    t["model"].cuda()
    assert tasks.full_accuracy(t["model"], t["eval"]) == pytest.approx(acc, abs=0.2)
    accs = tasks.path_accuracy(t["model"], t["eval"], 1, 2, 2, g)
    assert len(accs) == 2


def test_collapse_step_is_sustained_merging_not_a_first_crossing():
    assert circle.collapse_step([1.0, 0.5, 0.01, 0.5, 0.02, 0.01]) == 4, "the dip at step 2 is not a collapse"
    assert circle.collapse_step([1.0, 0.5, 0.01, 0.5]) is None
    assert circle.collapse_step([0.01, 0.02]) == 0
    assert circle.collapse_step([1.0, 0.5, float("nan"), float("nan")]) is None, "diverged, not merged"
    assert circle.collapse_step([1.0, float("nan"), 0.01, 0.01]) == 2
    with pytest.raises(ValueError):
        circle.collapse_step([])


def test_token_gaps_and_baselines():
    x, y = circle.circle_dataset(1000)
    b = circle.baselines(x, y)
    step = 2 * circle.RADIUS * math.sin(math.pi / 1000)
    assert b["stay_put"] == pytest.approx(step**2, rel=1e-3)
    assert b["origin"] == pytest.approx(circle.RADIUS**2, rel=1e-4)
    p = torch.tensor([circle.RADIUS, 0.0])
    traj = torch.stack([torch.stack([p, -p]), torch.stack([p, p])])  # opposite, then merged
    assert torch.allclose(circle.token_gaps(traj), torch.tensor([1.0, 0.0]))


def test_memorization_ceiling_is_the_majority_label_of_each_repeated_token():
    """Without positions two occurrences of one token in one sentence get one prediction: the ceiling
    counts each (sentence, token) group's majority label; [CLS]/[SEP] are kept and labelled."""
    data = memorization.MemorizationData(
        ids=torch.tensor([[1, 2, 2, 2, 3], [1, 4, 4, 0, 0]]),
        labels=torch.tensor([[0, 1, 1, 0, 1], [1, 0, 1, -100, -100]]),
        mask=torch.tensor([[True] * 5, [True] * 3 + [False] * 2]), vocab_size=5)
    # sentence 1: tokens 1, 3 alone (2 right), token 2 x3 with labels 1,1,0 (2 right); sentence 2: 1 alone
    # (1 right), token 4 x2 with labels 0,1 (1 right): 6 of 8
    assert memorization.achievable_accuracy(data) == pytest.approx(6 / 8)

    class Pieces:
        def __init__(self, tokens):
            self.tokens = tokens

    class Tok:
        def encode(self, text):
            return Pieces(["[CLS]"] + text.split() + ["[SEP]"])

    kept = memorization.memorization_data(["a b c d", "b"], 4, torch.Generator().manual_seed(0), Tok())
    dropped = memorization.memorization_data(["a b c d", "b"], 4, torch.Generator().manual_seed(0), Tok(),
                                             special_tokens=False)
    assert kept.mask.sum(1).tolist() == [4, 3] and dropped.mask.sum(1).tolist() == [4, 1]
    assert kept.ids[0, 0] == kept.ids[1, 0] and kept.ids[0, 3] == kept.ids[1, 2]  # [CLS], [SEP]
    assert (kept.labels[kept.mask] != memorization.IGNORE).all()


def test_path_models_are_the_official_ones():
    hull_model = tasks.path_task("hull", SIZE, torch.Generator().manual_seed(0))["model"]
    assert isinstance(hull_model.embed, torch.nn.Sequential)  # --ffn2: Linear, GELU, Linear
    assert [type(m).__name__ for m in hull_model.embed] == ["Linear", "GELU", "Linear"]
    mem = tasks.path_task("memorization", dict(SIZE, max_len=24), torch.Generator().manual_seed(0))
    assert mem["model"].pos is None and 0.5 < mem["ceiling"] <= 1.0
    with pytest.raises(ValueError, match="embed_mlp"):
        tasks.PathSAN(2, 8, 2, 2, vocab_size=5, embed_mlp=True)


def test_probe_refitted_to_paths_reads_what_the_models_classifier_cannot():
    """Labels that depend on the token alone: the length-0 path (the embedding) carries them, so a probe
    refitted to it is right everywhere, while the untrained model's own classifier is near chance."""
    torch.manual_seed(0)
    model = tasks.PathSAN(2, 16, 2, 3, vocab_size=6)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 6, (64, 5), generator=g)
    y = (x % 2 == 0).long()
    probe = tasks.path_probe_accuracy(model, (x, y, None), (x, y, None), 0, 3, 2, g)
    own = tasks.path_accuracy(model, (x, y, None), 0, 3, 2, g)
    assert probe == [1.0, 1.0] and max(own) < 0.9
    fitted = tasks.fit_probe(torch.randn(10, 4), torch.tensor([0, 1] * 5), 2)
    assert fitted.weight.shape == (2, 4) and not fitted.weight.requires_grad
    with pytest.raises(ValueError, match="disagree"):
        tasks.fit_probe(torch.randn(10, 4), torch.zeros(9, dtype=torch.long), 2)


def test_the_trained_enough_gate_stops_the_chapter_below_its_level():
    from attnbook.claims import ClaimFailed

    ok = tasks.trained_enough_check("hull", 0.86 * 0.9, 0.9)
    assert ok.holds and ok.name == "paths: full-model accuracy / ceiling, hull (trained-enough gate)"
    with pytest.raises(ClaimFailed, match="memorization"):
        tasks.trained_enough_check("memorization", 0.94, 1.0)
    with pytest.raises(ValueError, match="no trained-enough level"):
        tasks.trained_enough_check("circle", 1.0, 1.0)
    with pytest.raises(ValueError, match="ceiling must be positive"):
        tasks.trained_enough_check("sort", 1.0, 0.0)


def test_the_trained_enough_gate_at_another_seed_withholds_instead_of_stopping():
    passed = tasks.trained_enough_gate("hull", 0.86 * 0.9, 0.9, seed=2, guards="the hull's verdicts")
    assert passed.holds and passed.kind == "gate"
    assert passed.name == "paths: full-model accuracy / ceiling, hull, training seed 2"
    failed = tasks.trained_enough_gate("hull", 0.84 * 0.9, 0.9, seed=1, guards="the hull's verdicts")
    assert not failed.holds  # recorded, not raised: it withholds what it guards
    assert not tasks.trained_enough_gate("sort", 0.94, 1.0, seed=1, guards="x").holds
    with pytest.raises(ValueError, match="ceiling must be positive"):
        tasks.trained_enough_gate("sort", 1.0, 0.0, seed=1, guards="x")


def test_position_prior_accuracy_matches_the_order_statistics_of_sorting():
    """Sorting's position-only floor: at position i of a sorted sequence of n uniform symbols the most common
    symbol has probability max_v P(X_(i) = v), from the binomial law of the order statistics; the predictor
    fitted on one sample and scored on another reaches the mean of those maxima (a predictor fitted over all
    positions at once would sit near chance, 1/vocab)."""
    from scipy.stats import binom

    n, vocab = 8, 10
    exact = []
    for i in range(n):  # P(X_(i) <= v) = P(at least i + 1 of n draws are <= v)
        cdf = [binom.sf(i, n, (v + 1) / vocab) for v in range(vocab)]
        exact.append(max(b - a for a, b in zip([0.0] + cdf[:-1], cdf)))
    g = torch.Generator().manual_seed(0)
    _, fit = sort.sort_batch(20000, n, vocab, g)
    _, score = sort.sort_batch(20000, n, vocab, g)
    assert tasks.position_prior_accuracy(fit, score) == pytest.approx(sum(exact) / n, abs=0.01)
    assert tasks.position_prior_accuracy(fit, score) > 3 / vocab


def test_position_prior_accuracy_fits_on_the_training_labels_and_skips_padding():
    train_labels = torch.tensor([[0, 1, -100], [0, 1, -100], [1, 0, -100]])
    eval_labels = torch.tensor([[1, 0, -100], [1, 0, -100], [0, 1, -100]])
    # the modes come from training (0 at position 0, 1 at position 1): two of six labelled tokens are right
    # (modes fitted on the evaluation labels would score four)
    assert tasks.position_prior_accuracy(train_labels, eval_labels) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="never in the training"):
        tasks.position_prior_accuracy(train_labels, torch.tensor([[0, 1, 2]]))
    with pytest.raises(ValueError, match="same positions"):
        tasks.position_prior_accuracy(train_labels, torch.tensor([[0, 1]]))
