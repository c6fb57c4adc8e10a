"""The circle task (chapter "The circle task"; Dong et al. 2021, Sec. 5.1, Fig. 3).

``n`` points evenly on a circle of radius ``radius``. An item is the two-token sequence
``(p_i, p_{i+n/2-1})`` (one point on each half of the circle) and its target the next two points
``(p_{i+1}, p_{i+n/2})``: the model learns to move both points one step along their arcs. At test time it
runs recursively from the first item, feeding its prediction back in, which is a deep network in
disguise: one shared attention layer applied many times.

The model (:class:`CircleNet`) is the official code's: ``Linear(2, d)`` + LayerNorm, one BERT-style
attention layer with 2 heads (``LN(X + SA(X))``, optionally followed by ``LN(Y + MLP(Y))`` with an MLP of
width ``d``), and ``Linear(d, 2)``. ``skip=True`` adds the *outer* skip connection: the network predicts
the step, ``next = x + f(x)``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..attention import Block

RADIUS = 0.3


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


class CircleNet(nn.Module):
    """The circle-task model (chapter "The circle task"): see the module docstring. ``forward`` maps (batch, 2, 2)
    points to the predicted next points (batch, 2, 2)."""

    def __init__(self, d_model: int = 32, n_heads: int = 2, mlp: bool = False, skip: bool = False) -> None:
        super().__init__()
        if d_model < n_heads or d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be a positive multiple of n_heads={n_heads}")
        self.skip = skip
        self.embed = nn.Sequential(nn.Linear(2, d_model), nn.LayerNorm(d_model))
        self.block = Block(d_model, n_heads, skip=True, mlp=mlp, layernorm="post", d_ff=d_model)
        self.readout = nn.Linear(d_model, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != 2:
            raise ValueError(f"expected points of shape (batch, tokens, 2), got {tuple(x.shape)}")
        h, _ = self.block(self.embed(x))
        out = self.readout(h)
        return x + out if self.skip else out


@torch.no_grad()
def rollout(model: nn.Module, start: torch.Tensor, steps: int = 300) -> torch.Tensor:
    """Feed the model its own predictions ``steps`` times from ``start`` (2, 2) (chapter "The circle task", Fig. 3).

    Returns the trajectory (steps + 1, 2, 2): ``traj[0] = start``, ``traj[t]`` the t-th prediction.
    The model runs on the device of its parameters; the trajectory comes back on ``start``'s device.
    """
    if start.shape != (2, 2):
        raise ValueError(f"start must be one item of shape (2, 2), got {tuple(start.shape)}")
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    param = next(model.parameters(), None)
    run_dev = param.device if param is not None else start.device
    was_training = model.training
    model.eval()
    traj = [start.float().to(run_dev)]
    for _ in range(steps):
        traj.append(model(traj[-1][None])[0])
    model.train(was_training)
    return torch.stack(traj).to(start.device)


def spread(traj: torch.Tensor, last: int = 50, radius: float = RADIUS) -> float:
    """Collapse metric of chapter "The circle task" (eq. spread): the root-mean-square distance of the last ``last``
    predicted points (both tokens) from their mean, divided by the circle's radius.

    Points that keep moving around the circle give about 1; a trajectory that has collapsed to one
    point gives about 0.
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


def collapse_step(gaps, threshold: float = 0.05):
    """The step from which the tokens stay merged: the first ``t`` with ``gaps[s] < threshold`` for every
    ``s >= t`` to the end of the rollout (sustained merging, not a first crossing), or ``None`` when the
    last gap is not below the threshold (chapter "The circle task")."""
    g = torch.as_tensor(gaps, dtype=torch.float64).flatten()
    if g.numel() == 0:
        raise ValueError("expected a non-empty sequence of gaps")
    above = torch.nonzero(g >= threshold).flatten()
    if len(above) and int(above[-1]) == len(g) - 1:
        return None
    return int(above[-1]) + 1 if len(above) else 0


def baselines(X: torch.Tensor, Y: torch.Tensor) -> dict:
    """The one-step errors a model must beat to have learned anything (chapter "The circle task"): predicting
    "stay put" (``Y = X``) and predicting the origin, in the chapter's MSE (squared error summed over the
    plane, mean over tokens and items)."""
    return {"stay_put": float(((X - Y) ** 2).sum(-1).mean()), "origin": float((Y ** 2).sum(-1).mean())}
