"""Convex hull membership (chapter "Path effectiveness"; Dong et al. 2021, Sec. 5.2).

A set is ``n_points`` points drawn uniformly in ``[0, scale]^2`` and shifted as a whole by a Gaussian
``N(0, shift_std^2 I)`` (as the official code does; the shift makes absolute positions uninformative).
A point's label is 1 when it is a vertex of the set's convex hull (``scipy.spatial.ConvexHull``).
No positional information is given to the model: the input is the set of coordinates.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from scipy.spatial import ConvexHull


def hull_labels(points: torch.Tensor) -> torch.Tensor:
    """1 for the points of each set that are vertices of its convex hull: (batch, n, 2) -> (batch, n)."""
    if points.ndim != 3 or points.shape[-1] != 2 or points.shape[1] < 3:
        raise ValueError(f"points must have shape (batch, n >= 3, 2), got {tuple(points.shape)}")
    pts = points.detach().cpu().double().numpy()
    labels = np.zeros(pts.shape[:2], dtype=np.int64)
    for i, p in enumerate(pts):
        labels[i, ConvexHull(p).vertices] = 1
    return torch.from_numpy(labels)


def hull_batch(
    batch: int,
    n_points: int = 10,
    scale: float = 10.0,
    shift_std: float = 3.3,
    generator: Optional[torch.Generator] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``batch`` point sets (batch, n_points, 2) float and their hull labels (batch, n_points) long."""
    if batch < 1 or n_points < 3 or scale <= 0 or shift_std < 0:
        raise ValueError(
            f"need batch >= 1, n_points >= 3, scale > 0, shift_std >= 0; got {batch}, {n_points}, "
            f"{scale}, {shift_std}"
        )
    pts = torch.rand(batch, n_points, 2, generator=generator) * scale
    pts = pts + torch.randn(batch, 1, 2, generator=generator) * shift_std
    return pts, hull_labels(pts)


def majority_accuracy(labels: torch.Tensor) -> float:
    """Accuracy of always predicting the more frequent label (the chance line of the hull task)."""
    frac = float(labels.float().mean())
    return max(frac, 1.0 - frac)
