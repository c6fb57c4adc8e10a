"""How much of a layer's update the skip path carries (chapter "What came after": the official code of Dong et al.
2021, ``--compute_alpha``).

The official code (``modeling_san.py``, ``BertSelfOutput``) measures, for each layer, the composite norm of the
layer's input ``X`` (the skip branch) and of the self-attention's output ``SA(X)`` (after the output projection,
before they are added), summed over up to 15 examples, and keeps

    alpha_l = sum ||X|| / (sum ||X|| + sum ||SA(X)||),

the share of the skip path; its plotting code weights the paths that skip layer ``l`` by ``alpha_l``. Its composite
norm is ``||X||_1 ||X||_inf`` (``functions.composite_norm``), without the square root of the paper's
``||X||_{1,inf}`` (:func:`attnbook.core.norms.norm_1_inf`); the book follows the code.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from attnbook.core.norms import norm_1, norm_inf

#: the official code sums over at most this many examples
MAX_EXAMPLES = 15


def composite_norm(X: torch.Tensor) -> torch.Tensor:
    """``||X||_1 ||X||_inf`` (largest column sum times largest row sum of absolute values), batched over leading
    dimensions: the official code's ``composite_norm``."""
    return norm_1(X) * norm_inf(X)


def skip_share(skips: Sequence[torch.Tensor], branches: Sequence[torch.Tensor],
               norm: Callable[[torch.Tensor], torch.Tensor] = composite_norm) -> float:
    """``alpha = sum ||x|| / (sum ||x|| + sum ||a||)`` over matching lists of skip inputs ``x`` and attention outputs
    ``a`` (each ``(n, d)``, one per example; the first :data:`MAX_EXAMPLES` are used, as in the official code).
    ``norm``: the official code's :func:`composite_norm` by default; :func:`attnbook.core.norms.norm_1_inf`, the
    paper's, gives the share of the scales themselves (the code's compares their squares)."""
    if len(skips) != len(branches) or not skips:
        raise ValueError(f"need as many skip inputs as attention outputs, at least one; got {len(skips)} and "
                         f"{len(branches)}")
    skips, branches = list(skips)[:MAX_EXAMPLES], list(branches)[:MAX_EXAMPLES]
    nx = sum(float(norm(x)) for x in skips)
    na = sum(float(norm(a)) for a in branches)
    return nx / (nx + na)
