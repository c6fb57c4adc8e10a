"""The circle task (chapter "The circle task"; Dong et al. 2021, Sec. 5.1, Fig. 3).

``n`` points evenly on a circle of radius ``radius``. An item is the two-token sequence
``(p_i, p_{i+n/2-1})`` (one point on each half of the circle) and its target the next two points
``(p_{i+1}, p_{i+n/2})``: the model learns to move both points one step along their arcs. At test time it
runs recursively from the first item, feeding its prediction back in, which is a deep network in
disguise: one shared attention layer applied many times.

The model (:class:`CircleNet`) is the official code's: ``Linear(2, d)`` + LayerNorm, one BERT-style
attention layer with 2 heads (``LN(X + SA(X))``, optionally followed by ``LN(Y + MLP(Y))`` with an MLP of
width ``d``), and ``Linear(d, 2)``. ``skip=True`` adds the *outer* skip connection: the network predicts
the step, ``next = x + f(x)``. ``attention=False`` removes attention (every head gated to zero), leaving a
token-wise map with the same parameters: the control for collapse; ``attention="self"`` keeps the attention
layer's value and output maps but lets each token attend only to itself, the control matched in capacity.
"""

from __future__ import annotations

import math

from typing import Callable, Mapping, Optional, Sequence

import torch
from torch import nn

from attnbook import claims
from attnbook.core.attention import Block
from attnbook.core.presets import seed_everything
from attnbook.core.train import train
from attnbook.core import runs
from attnbook.stats import welch_t

RADIUS = 0.3
#: the precomputed runs of ``scripts/circle_runs.py`` (chapter "The circle task"): ``<run>_<preset>.json``


def circle_points(n: int = 1000, radius: float = RADIUS) -> torch.Tensor:
    """``n`` points evenly spaced on the circle of radius ``radius``, counter-clockwise: (n, 2)."""
    if n < 4 or n % 2 or radius <= 0:
        raise ValueError(f"need an even n >= 4 and radius > 0, got n={n}, radius={radius}")
    theta = torch.arange(n, dtype=torch.float64) * (2 * math.pi / n)
    return (radius * torch.stack([theta.cos(), theta.sin()], -1)).float()


def circle_dataset(n: int = 1000, radius: float = RADIUS) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of the circle task: two (n/2 - 1, 2, 2) tensors (item, token, xy)."""
    p = circle_points(n, radius)
    m = n // 2 - 1
    i = torch.arange(m)
    x = torch.stack([p[i], p[i + m]], 1)
    y = torch.stack([p[i + 1], p[i + m + 1]], 1)
    return x, y


#: CircleNet's attention: the model's own (True), none (False), or each token attending only to itself ("self")
ATTENTION_MODES = (True, False, "self")


class CircleNet(nn.Module):
    """The circle-task model (chapter "The circle task"): see the module docstring. ``forward`` maps (batch, 2, 2)
    points to the predicted next points (batch, 2, 2)."""

    def __init__(self, d_model: int = 32, n_heads: int = 2, mlp: bool = False, skip: bool = False,
                 attention: bool | str = True) -> None:
        super().__init__()
        if d_model < n_heads or d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be a positive multiple of n_heads={n_heads}")
        if not any(attention is mode for mode in (True, False)) and attention != "self":
            raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {attention!r}")
        self.skip = skip
        self.embed = nn.Sequential(nn.Linear(2, d_model), nn.LayerNorm(d_model))
        self.block = Block(d_model, n_heads, skip=True, mlp=mlp, layernorm="post", d_ff=d_model)
        self.readout = nn.Linear(d_model, 2)
        # the controls that tell attention's merging apart from a contracting map of each point on its own:
        # attention=False gates every head to zero, so the layer is LN(E + b_O), a token-wise map;
        # attention="self" lets each token attend only to itself (P = I), so the layer is LN(E + E W_V W_O + b),
        # token-wise with the value and output maps kept: the capacity of the model with attention
        self.register_buffer("head_gates", torch.zeros(n_heads) if attention is False else None)
        self.register_buffer("attn_mask", torch.eye(2, dtype=torch.bool) if attention == "self" else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != 2:
            raise ValueError(f"expected points of shape (batch, tokens, 2), got {tuple(x.shape)}")
        h, _ = self.block(self.embed(x), head_gates=self.head_gates, attn_mask=self.attn_mask)
        out = self.readout(h)
        return x + out if self.skip else out


@torch.no_grad()
def _feed_back(model: nn.Module, start: torch.Tensor, steps: int, step) -> torch.Tensor:
    if start.shape != (2, 2):
        raise ValueError(f"start must be one item of shape (2, 2), got {tuple(start.shape)}")
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    param = next(model.parameters(), None)
    run_dev = param.device if param is not None else start.device
    was_training = model.training
    model.eval()
    state = start.float().to(run_dev)
    traj = [state]
    for _ in range(steps):
        state, shown = step(state)  # the next input, and what the trajectory records
        traj.append(shown)
    model.train(was_training)
    return torch.stack(traj).to(start.device)


def rollout(model: nn.Module, start: torch.Tensor, steps: int = 300) -> torch.Tensor:
    """Feed the model its own predictions ``steps`` times from ``start`` (2, 2) (chapter "The circle task", Fig. 3).

    Returns the trajectory (steps + 1, 2, 2): ``traj[0] = start``, ``traj[t]`` the t-th prediction.
    The model runs on the device of its parameters; the trajectory comes back on ``start``'s device.
    """
    def step(x):
        y = model(x[None])[0]
        return y, y

    return _feed_back(model, start, steps, step)


def tracking_steps(traj: torch.Tensor, n_points: int = 1000, tol: float = 0.1, radius: float = RADIUS) -> int:
    """How many steps a rollout from the first item follows the circle (chapter "The circle task", the tracking
    gate): the truth after ``t`` steps is point ``t`` and point ``n_points // 2 - 1 + t`` of the circle's
    ``n_points`` points (the first item's two points, each moved on by ``t``); the rollout follows it until a
    predicted token is farther than ``tol * radius`` from its point. Returns the number of steps before the
    first such step (``len(traj) - 1`` when there is none). A non-finite prediction (a diverged rollout) is
    off the circle."""
    if traj.ndim != 3 or traj.shape[1:] != (2, 2):
        raise ValueError(f"traj must have shape (steps + 1, 2, 2), got {tuple(traj.shape)}")
    p = circle_points(n_points, radius).to(traj)
    t = torch.arange(traj.shape[0], device=traj.device)
    truth = torch.stack([p[t % n_points], p[(t + n_points // 2 - 1) % n_points]], 1)
    off = (~((traj - truth).norm(dim=-1).amax(-1) <= tol * radius)).nonzero()  # NaN: off
    return int(off[0, 0]) - 1 if len(off) else traj.shape[0] - 1


def spread(traj: torch.Tensor, last: int = 50, radius: float = RADIUS) -> float:
    """Collapse metric of chapter "The circle task" (eq. spread): the root-mean-square distance of the last ``last``
    predicted points (both tokens) from their mean, divided by the circle's radius.

    Two tokens that keep circling apart give about 1; merged tokens that still move along the circle give a
    small value (50 steps cover a short arc); a trajectory stuck at one point gives about 0; points that
    leave the circle outwards give more than 1.
    """
    if traj.ndim != 3 or traj.shape[1:] != (2, 2) or traj.shape[0] < 2:
        raise ValueError(f"traj must have shape (steps + 1, 2, 2), got {tuple(traj.shape)}")
    if not 1 <= last < traj.shape[0]:
        raise ValueError(f"last must be in 1..{traj.shape[0] - 1}, got {last}")
    pts = traj[-last:].reshape(-1, 2)
    return float((pts - pts.mean(0)).pow(2).sum(-1).mean().sqrt() / radius)


def token_gap(traj: torch.Tensor, last: int = 50, radius: float = RADIUS) -> float:
    """Mean distance between the two tokens over the last ``last`` steps, divided by the radius
    (chapter "The circle task"): 0 when the two sequences have merged into one (rank one for two tokens)."""
    if traj.ndim != 3 or traj.shape[1:] != (2, 2):
        raise ValueError(f"traj must have shape (steps + 1, 2, 2), got {tuple(traj.shape)}")
    return float((traj[-last:, 0] - traj[-last:, 1]).norm(dim=-1).mean() / radius)


def token_gaps(traj: torch.Tensor, radius: float = RADIUS) -> torch.Tensor:
    """The token gap ``g_t = ||x1_t - x2_t|| / (2 r)`` at every step of a rollout (chapter "The circle task", eq.
    ``token-gap``): about 1 at the start, 0 when the two tokens have merged."""
    if traj.ndim != 3 or traj.shape[1:] != (2, 2):
        raise ValueError(f"traj must have shape (steps + 1, 2, 2), got {tuple(traj.shape)}")
    return (traj[:, 0] - traj[:, 1]).norm(dim=-1) / (2 * radius)


#: the token gap below which the two tokens count as merged (chapter "The circle task", the collapse step)
MERGE_GAP = 0.05


def collapse_step(gaps, threshold: float = MERGE_GAP):
    """The step from which the tokens stay merged: the first ``t`` with ``gaps[s] < threshold`` for every
    ``s >= t`` to the end of the rollout (sustained merging, not a first crossing), or ``None`` when the
    last gap is not below the threshold (chapter "The circle task"). A non-finite gap (a diverged rollout)
    is not merged."""
    g = torch.as_tensor(gaps, dtype=torch.float64).flatten()
    if g.numel() == 0:
        raise ValueError("expected a non-empty sequence of gaps")
    above = torch.nonzero(~(g < threshold)).flatten()  # NaN counts as not merged
    if len(above) and int(above[-1]) == len(g) - 1:
        return None
    return int(above[-1]) + 1 if len(above) else 0


def baselines(X: torch.Tensor, Y: torch.Tensor) -> dict:
    """The one-step errors a model must beat to have learned anything (chapter "The circle task"): predicting
    "stay put" (``Y = X``) and predicting the origin, in the chapter's MSE (squared error summed over the
    plane, mean over tokens and items)."""
    return {"stay_put": float(((X - Y) ** 2).sum(-1).mean()), "origin": float((Y ** 2).sum(-1).mean())}


def one_step_mse(model: nn.Module, batch) -> torch.Tensor:
    """The chapter's training loss and one-step error: squared error summed over the plane, mean over tokens
    and items (chapter "The circle task")."""
    x, y = batch
    return ((model(x) - y) ** 2).sum(-1).mean()


def fit(d_model: int, seed: int, *, steps: int, lr: float, batch: int, n_points: int = 1000, n_heads: int = 2,
        device=None, **variant) -> tuple[CircleNet, dict]:
    """Train a :class:`CircleNet` (``variant``: ``mlp``, ``skip``, ``attention``) with the book's recipe
    (chapter "The circle task"): :func:`attnbook.core.train.train` (AdamW, warm-up then cosine decay, clipping) on
    batches of ``batch`` items drawn at random with a generator seeded with ``seed``, after
    ``seed_everything(seed)``. Returns the model and its training history."""
    X, Y = circle_dataset(n_points)
    seed_everything(seed)
    model = CircleNet(d_model, n_heads, **variant)
    gen = torch.Generator().manual_seed(seed)

    def batch_fn(step):
        i = torch.randint(0, len(X), (batch,), generator=gen)
        return X[i], Y[i]

    hist = train(model, batch_fn, one_step_mse, steps=steps, lr=lr, progress=False, device=device)
    return model, hist


def fit_paper_recipe(d_model: int, seed: int, *, lr: float, batch_size: int, optimizer: str, epochs: int,
                     n_points: int = 1000, n_heads: int = 2, device=None, official_skip: bool = False,
                     **variant) -> tuple[CircleNet, dict]:
    """Train a :class:`CircleNet` with the paper's recipe (chapter "The circle task"; the official
    ``run_circle.py``): ``optimizer`` at a constant ``lr``, no warm-up or clipping, the items in order
    (no shuffling) in batches of ``batch_size``, summed squared error, ``epochs`` epochs. With
    ``official_skip`` the batches are the official ``--circle_skip`` data (:func:`official_skip_batches`;
    use it with the model's ``skip=False`` and :func:`rollout_official_skip`). Returns the model and its
    training history."""
    X, Y = circle_dataset(n_points)
    seed_everything(seed)
    model = CircleNet(d_model, n_heads, **variant)
    if official_skip:
        loader = official_skip_batches(X, Y, batch_size)
    else:
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=batch_size)
    hist = train(model, loader, lambda m, b: ((m(b[0]) - b[1]) ** 2).sum(), steps=epochs * len(loader), lr=lr,
                 optimizer=optimizer, schedule="constant", warmup=0, clip=None, progress=False, device=device)
    return model, hist


def official_skip_batches(X: torch.Tensor, Y: torch.Tensor, batch_size: int) -> list:
    """The official code's ``--circle_skip`` training data (chapter "The circle task"; ``run_circle.py``): the
    items in order in batches of ``batch_size``, each batch's input its points *plus the previous batch's*
    (zeros for the first batch of an epoch), its target the absolute next points. This is not an outer skip
    connection; it is what Figure 3's "skip" panels were trained on."""
    if batch_size < 1 or len(X) != len(Y):
        raise ValueError(f"need batch_size >= 1 and as many inputs as targets, got {batch_size}, {len(X)}, {len(Y)}")
    batches, previous = [], torch.zeros(batch_size, *X.shape[1:])
    for i in range(0, len(X), batch_size):
        x, y = X[i: i + batch_size], Y[i: i + batch_size]
        batches.append((x + previous[: len(x)], y))
        previous = x
    return batches


def rollout_official_skip(model: nn.Module, start: torch.Tensor, steps: int = 300) -> torch.Tensor:
    """The official code's ``--circle_skip`` evaluation (chapter "The circle task"): the model is fed the running
    sum of its predictions, ``s_t = s_{t-1} + f(s_{t-1})`` from ``s_0 = start``, and the trajectory shown is
    the predictions ``f(s_{t-1})`` themselves (``traj[0] = start``), as Figure 3 plots them."""
    def step(total):
        pred = model(total[None])[0]
        return total + pred, pred

    return _feed_back(model, start, steps, step)


def summarise_run(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, rollout_steps: int,
                  keep_trajectory: bool = False) -> dict:
    """What the chapter reads from one trained model: its one-step error over stay-put's (the trained gate),
    the steps its rollout from the first item follows the circle (:func:`tracking_steps`, the tracking gate),
    and the collapse step, final token gap and spread of that rollout (and, with ``keep_trajectory``, the
    rollout itself as ``traj``)."""
    with torch.no_grad():
        dev = next(model.parameters()).device
        error = float(one_step_mse(model, (X.to(dev), Y.to(dev))))
    traj = rollout(model, X[0], rollout_steps)
    gaps = token_gaps(traj)
    n_points = 2 * (X.shape[0] + 1)  # circle_dataset's items: n_points // 2 - 1
    out = {"mse_over_stay_put": error / baselines(X, Y)["stay_put"],
           "tracking_steps": tracking_steps(traj, n_points), "collapse_step": collapse_step(gaps),
           "final_gap": float(gaps[-1]), "spread": spread(traj)}
    if keep_trajectory:
        out["traj"] = traj
    return out


def seed_sweep(fit: Callable[[int, str, int], tuple], widths: Sequence[int], variants: Sequence[str],
               n_seeds: int, X: torch.Tensor, Y: torch.Tensor, rollout_steps: int) -> dict:
    """Train every variant at every width from seeds ``0 .. n_seeds - 1`` with ``fit(d, variant, seed) ->
    (model, history)`` and summarise each model (:func:`summarise_run`, trajectory kept): chapter "The circle
    task"'s sweep, as ``{(d, variant): [record per seed]}``."""
    return {(d, variant): [summarise_run(fit(d, variant, seed)[0], X, Y, rollout_steps, keep_trajectory=True)
                           for seed in range(n_seeds)]
            for d in widths for variant in variants}


def sweep_records(runs: Mapping[tuple, Sequence[Mapping]]) -> list[dict]:
    """A sweep's runs (``{(d_model, variant): [record per seed 0, 1, ...]}``, as :func:`seed_sweep` returns them)
    as the flat records of a shipped circle file, each with its ``d_model``, ``variant`` and ``seed`` and without
    its trajectory (chapter "The circle task": at the ``paper`` preset the page's own 16-seed sweep is the one
    :func:`gated_runs` reads)."""
    return [{"d_model": d, "variant": variant, "seed": seed, **{k: v for k, v in r.items() if k != "traj"}}
            for (d, variant), out in runs.items() for seed, r in enumerate(out)]


def collapse_steps(runs: Mapping[tuple, Sequence[Mapping]]) -> dict:
    """The collapse step of every run (``None``: never merged), by the runs' key (chapter "The circle task")."""
    return {key: [r["collapse_step"] for r in out] for key, out in runs.items()}


def merged_fraction(steps: Sequence[Optional[int]]) -> float:
    """The share of runs whose tokens merge within the rollout (collapse step not ``None``) (chapter "The circle
    task")."""
    if not steps:
        raise ValueError("expected at least one run")
    return sum(s is not None for s in steps) / len(steps)


def mean_merge_step(steps: Sequence[Optional[int]]) -> float:
    """The mean collapse step of the runs that merge, ``nan`` when none does (chapter "The circle task")."""
    merged = [s for s in steps if s is not None]
    return sum(merged) / len(merged) if merged else float("nan")


def merge_report(steps: Mapping[tuple, Sequence[Optional[int]]], style: str = "steps") -> str:
    """One line per ``(d_model, variant)`` of collapse steps (chapter "The circle task"): ``"steps"`` lists how
    many runs merge and every run's step, ``"fraction"`` the merged fraction and the mean step of those that
    merge, ``"gated"`` how many of the runs that pass the gate merge."""
    lines = []
    for (d, variant), s in steps.items():
        merged = sum(x is not None for x in s)
        head = f"d={d:3d} {variant:9s} "
        if style == "steps":
            lines.append(f"{head}collapsed: {merged}/{len(s)}  collapse steps: {list(s)}")
        elif style == "fraction":
            lines.append(f"{head}collapsed fraction {merged_fraction(s):.2f}   mean collapse step of those "
                         f"{mean_merge_step(s):.0f}")
        elif style == "gated":
            lines.append(f"{head}merged: {merged}/{len(s)} that pass the gate")
        else:
            raise ValueError(f"style must be 'steps', 'fraction' or 'gated', got {style!r}")
    return "\n".join(lines)


def control_report(every: Mapping[tuple, Sequence[Mapping]], gated: Mapping[int, Sequence[Mapping]],
                   variant: str = "SAN, no attention") -> str:
    """One line per width of a control ``variant`` (chapter "The circle task": attention removed, or each token
    attending to itself): every run's one-step error over stay-put's, how many runs pass the gate (``gated``:
    width -> runs) and how many of those merge."""
    return "\n".join(
        f"d={d:3d} {variant}: one-step MSE / stay put "
        f"{[round(r['mse_over_stay_put'], 2) for r in every[d, variant]]}; {len(runs_)} pass the gate, of which "
        f"{sum(r['collapse_step'] is not None for r in runs_)} merge" for d, runs_ in gated.items())


def load_runs(run: str, preset: str | None = None) -> dict:
    """The shipped file of run ``circle_<run>`` at ``preset`` (default: the active one; ``"control"``: attention
    removed; ``"seeds16"``: the chapter's sweep over 16 seeds; ``"control_seeds16"``: the control matched in
    capacity over 16 seeds) (chapter "The circle task"): :func:`attnbook.core.runs.find`: the file, or a falsy
    :class:`attnbook.core.runs.Missing` where there is none."""
    known = sorted(name.removeprefix("circle_") for name in runs.RUNS if name.startswith("circle_"))
    if run not in known:  # the run table's circle runs, so a new one needs no edit here
        raise ValueError(f"expected run one of {known}, got {run!r}")
    return runs.find(f"circle_{run}", preset)


#: the gate of chapter "The circle task": a model counts only if its one-step error is at most this share of
#: staying put's (a model that has not learned the step is no evidence about collapse)
GATE = 0.5
#: the tracking gate of chapter "The circle task": a model counts only if its rollout follows the circle for at
#: least this many steps (:func:`tracking_steps`): longer than a rollout that stands still, whose points stay
#: within a tenth of the radius of the circle of 1000 points for 15 steps (the chapter checks it)
TRACKING = 16


def passes_gates(record: Mapping, gate: float = GATE, tracking: int = TRACKING) -> bool:
    """Whether one run (a record of :func:`summarise_run`) passes both gates of chapter "The circle task": its
    one-step error is at most ``gate`` of staying put's, and its rollout follows the circle for at least
    ``tracking`` steps (:func:`tracking_steps`)."""
    if "tracking_steps" not in record:
        raise ValueError("the circle file's runs have no 'tracking_steps' (a file made before the tracking gate): "
                         "remake it with its run's command")
    return record["mse_over_stay_put"] <= gate and record["tracking_steps"] >= tracking


def gated_sweep(runs: Mapping[tuple, Sequence[Mapping]]) -> tuple[dict, int]:
    """The runs of a live sweep (``{(d, variant): [record per seed]}``, as :func:`seed_sweep` returns them) that
    pass both gates (:func:`passes_gates`), trajectories kept and every key kept (empty where none passes), and
    how many runs fail a gate (chapter "The circle task": those are left out and counted)."""
    gated = {key: [r for r in out if passes_gates(r)] for key, out in runs.items()}
    return gated, sum(len(out) for out in runs.values()) - sum(len(out) for out in gated.values())


def tracking_gate(model: nn.Module, start: torch.Tensor, *, what: str, guards: str, n_points: int,
                  steps: int = 50) -> claims.Claim:
    """The tracking gate of chapter "The circle task" on one ``model``, recorded whether it passes or fails
    (``guards``: what a failure withholds): the steps its rollout from ``start`` (the first item of a circle of
    ``n_points`` points) follows the circle, of ``steps`` (:func:`tracking_steps`), are at least
    :data:`TRACKING`."""
    return claims.gate(f"tracking gate on {what}: steps its rollout follows the circle",
                       tracking_steps(rollout(model, start, steps), n_points), at_least=TRACKING, guards=guards)


def censored_steps(steps: Sequence[Optional[int]], rollout_steps: int) -> list[int]:
    """Collapse steps with "never within the rollout" (``None``) counted as ``rollout_steps + 1`` (chapter "The
    circle task": the censored collapse step whose mean the delays compare)."""
    return [s if s is not None else rollout_steps + 1 for s in steps]


def collapse_delay(steps_a: Sequence[Optional[int]], steps_b: Sequence[Optional[int]], rollout_steps: int) -> dict:
    """How much later runs ``a`` collapse than runs ``b`` (chapter "The circle task"): the mean censored collapse
    step of ``a`` minus that of ``b``, with a 90% Welch t interval over the seeds (:func:`attnbook.stats.welch_t`;
    a percentile bootstrap over 16 seeds covers too little, about 87% for a nominal 90% on simulated runs), as
    ``compare``'s ``value``, ``interval`` and ``cannot_decide``: where no run of ``b`` merges within the rollout,
    no delay of ``a`` can show, and the comparison is undecided whatever the value."""
    if len(steps_a) < 2 or len(steps_b) < 2:
        raise ValueError(f"collapse_delay needs two runs or more in each group, got {len(steps_a)} and "
                         f"{len(steps_b)}")
    test = welch_t(censored_steps(steps_a, rollout_steps), censored_steps(steps_b, rollout_steps), level=0.9)
    blind = all(s is None for s in steps_b)
    return dict(value=test["change"], interval=tuple(test["interval"]), cannot_decide=(
        f"no run of the earlier group merges within the rollout's {rollout_steps} steps: no delay can show"
        if blind else ""))


def gated_runs(records: Sequence[Mapping], gate: float = GATE, tracking: int = TRACKING) -> tuple[dict, dict, int]:
    """The runs of a shipped circle file by ``(d_model, variant)``: every run, the runs that pass both gates
    (one-step error at most ``gate`` of staying put's, and a rollout that follows the circle for at least
    ``tracking`` steps), and how many fail one of them (chapter "The circle task")."""
    every, gated, failed = {}, {}, 0
    for r in records:
        key = (r["d_model"], r["variant"])
        every.setdefault(key, []).append(r)
        if passes_gates(r, gate, tracking):
            gated.setdefault(key, []).append(r)
        else:
            failed += 1
    return every, gated, failed


def gate_sensitivity(records: Sequence[Mapping], groups: Mapping[str, tuple], rollout_steps: int,
                     gates: Sequence[float] = (GATE, 0.25, 0.1, 0.05)) -> list[dict]:
    """How the delays of chapter "The circle task" move with how well the models must have learned the step:
    for each one-step error gate of ``gates`` (the error over staying put's; the chapter's gate is
    :data:`GATE`), the runs of a shipped file that pass it and the tracking gate (:func:`gated_runs`) and, for
    each of ``groups`` (``{what: (later key, earlier key)}``), the delay of :func:`collapse_delay` with its 90%
    interval and the direction it decides (``"later"``, ``"earlier"``, ``"undecided"``; ``"too few runs"``
    where a group keeps fewer than two). The tracking gate is not varied: merged tokens cannot both follow the
    circle, so a run follows it for fewer steps than it takes to merge, and a stricter tracking gate would
    remove the early mergers by construction."""
    out = []
    for gate in gates:
        _, gated, failed = gated_runs(records, gate=gate)
        steps = collapse_steps(gated)
        row = {"gate": gate, "failed": failed, "delays": {}}
        for what, (a, b) in groups.items():
            la, lb = steps.get(a, []), steps.get(b, [])
            if len(la) < 2 or len(lb) < 2:
                row["delays"][what] = {"n": (len(la), len(lb)), "says": "too few runs"}
                continue
            d = collapse_delay(la, lb, rollout_steps)
            lo, hi = d["interval"]
            says = ("undecided" if d["cannot_decide"] or lo <= 0 <= hi else "later" if lo > 0 else "earlier")
            row["delays"][what] = {**d, "n": (len(la), len(lb)), "says": says}
        out.append(row)
    return out


def status_flips(live: Mapping[tuple, Sequence[Optional[int]]], shipped: Mapping[tuple, Sequence[Mapping]]) -> int:
    """How many live runs (collapse step per seed, by ``(d_model, variant)``) merge where the shipped run of the
    same seed does not, or the other way round (chapter "The circle task": the live-versus-shipped check)."""
    return sum((step is None) != (shipped[key][seed]["collapse_step"] is None)
               for key, steps in live.items() for seed, step in enumerate(steps))
