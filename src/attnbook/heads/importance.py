"""Head importance and step-by-step pruning of Michel, Levy and Neubig (2019) (chapter "Pruning heads").

Michel et al. multiply each head's output by a mask variable ``xi_h`` (1 = kept, 0 = pruned) and score a
head by how much the loss reacts to it (chapter "Pruning heads", eq. ``michel-importance``):

    I_h = E_x | dL(x) / d xi_h |.

The authors' code (pmichel31415/fairseq ``prune.py``) takes the absolute value per example *and per token
position*: the head's output at each position times the loss gradient there, ``|ctx_h(t) . dL/dctx_h(t)|``,
summed over the data and divided by the token count. :func:`head_importance` does that when it is told the
batch's query positions (``queries=``): the mask is expanded to one gate per sentence and query position,
whose gradient is exactly that product. Without ``queries`` it takes ``|.|`` of each whole batch's gradient
(the estimator of HuggingFace's bertology example, a labelled variant in the chapter). Scores are then
normalised layer by layer with the l2 norm (Michel et al., Sec. 4.1). The authors rank the heads once and
prune 10%..90% from that ranking; recomputing before every step is their non-default ``--exact_pruning``
(:func:`prune_step_by_step`, ``recompute=True``).

Masks are dicts ``{attention type: (n_layers, n_heads) tensor}`` (one group named ``""`` is fine), the
same format as the ``head_gates`` of the library's models and as :class:`attnbook.heads.gates.HeadGates`.
``loss_fn(batch, masks)`` runs the model with the masks as head gates and returns a scalar loss.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import numpy as np
import torch

from attnbook.heads.masks import as_head_mask, count_kept, full_masks

__all__ = ["count_kept", "full_masks", "head_importance", "layer_normalise", "masks_from_importance_match",
           "prune_least_important", "prune_step_by_step", "pruning_curve_gaps", "random_order_scores"]

Masks = dict[str, torch.Tensor]
LossFn = Callable[[Any, Masks], torch.Tensor]


def _as_masks(masks) -> Masks:
    return {n: m.detach().float().clone() for n, m in as_head_mask(masks).items()}


def head_importance(
    loss_fn: LossFn,
    masks: Union[torch.Tensor, Mapping[str, torch.Tensor]],
    batches: Iterable[Any],
    *,
    normalize: bool = True,
    queries: Optional[Callable[[Any], Mapping[str, tuple[int, int]]]] = None,
) -> Masks:
    """Michel et al.'s importance ``I_h = E_x |dL/d xi_h|`` at the given masks (chapter "Pruning heads", eq.
    ``michel-importance``).

    ``loss_fn(batch, masks)`` must return a scalar loss (a mean over the batch's tokens) of the model run
    with ``masks`` as head gates. ``queries(batch)`` gives, per attention type, ``(sentences, query
    positions)`` of that batch: then ``loss_fn`` receives masks of shape ``(sentences, n_layers, n_heads,
    positions)`` and the absolute value is taken per sentence and position, as the authors' code does
    (padding positions have zero gradient). Without ``queries``: ``|.|`` of each batch's gradient (the
    whole-batch variant). Scores are averaged over batches (the authors divide by the total token count,
    which weights batches by their size: the same for equal batches). ``normalize=True`` divides each
    layer's scores by their l2 norm (Michel et al., Sec. 4.1). Returns ``(n_layers, n_heads)`` tensors.
    """
    base = _as_masks(masks)
    total = {n: torch.zeros_like(m) for n, m in base.items()}
    n_batches = 0
    for batch in batches:
        if queries is None:
            xi = {n: m.clone().requires_grad_(True) for n, m in base.items()}
        else:
            sizes = queries(batch)
            if set(sizes) != set(base):
                raise ValueError(f"queries(batch) must give (sentences, positions) for {sorted(base)}, got {sorted(sizes)}")
            xi = {
                n: m[None, :, :, None].expand(int(sizes[n][0]), *m.shape, int(sizes[n][1])).clone().requires_grad_(True)
                for n, m in base.items()
            }
        loss = loss_fn(batch, xi)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ValueError(f"loss_fn must return a scalar tensor, got {getattr(loss, 'shape', loss)!r}")
        grads = torch.autograd.grad(loss, list(xi.values()), allow_unused=True)
        for (n, _), g in zip(xi.items(), grads):
            if g is not None:
                total[n] += g.detach().abs() if queries is None else g.detach().abs().sum(dim=(0, 3))
        n_batches += 1
    if n_batches == 0:
        raise ValueError("batches is empty; expected at least one batch")
    imp = {n: t / n_batches for n, t in total.items()}
    return layer_normalise(imp) if normalize else imp


def layer_normalise(importance: Mapping[str, torch.Tensor]) -> Masks:
    """Each layer's scores divided by their l2 norm, so that layers are comparable (Michel et al., Sec. 4.1)."""
    return {n: t / t.norm(dim=1, keepdim=True).clamp_min(1e-20) for n, t in importance.items()}


def prune_least_important(
    importance: Mapping[str, torch.Tensor], masks: Mapping[str, torch.Tensor], n_prune: int
) -> Masks:
    """Zero the masks of the ``n_prune`` least important heads among those still kept (chapter "Pruning heads").

    Heads already pruned are never chosen again (their score counts as +inf, as in Michel et al.'s code).
    Ties are broken by the order (type, layer, head). Returns new masks.
    """
    new = _as_masks(masks)
    imp = _as_masks(importance)
    if set(imp) != set(new) or any(imp[n].shape != new[n].shape for n in new):
        raise ValueError("importance and masks must have the same types and shapes")
    kept = count_kept(new)
    if not (0 <= n_prune <= kept):
        raise ValueError(f"n_prune must be between 0 and the {kept} kept heads, got {n_prune}")
    names = list(new)
    flat = torch.cat([torch.where(new[n] != 0, imp[n], torch.full_like(imp[n], float("inf"))).flatten() for n in names])
    order = torch.argsort(flat, stable=True)[:n_prune]
    sizes = [new[n].numel() for n in names]
    offsets = torch.tensor([0] + sizes).cumsum(0)
    for idx in order.tolist():
        k = int(torch.searchsorted(offsets, torch.tensor(idx), right=True)) - 1
        name = names[k]
        new[name].view(-1)[idx - int(offsets[k])] = 0.0
    return new


def prune_step_by_step(
    loss_fn: LossFn,
    score_fn: Callable[[Masks], float],
    masks: Union[torch.Tensor, Mapping[str, torch.Tensor]],
    batches: Sequence[Any],
    *,
    n_per_step: int,
    min_heads: int = 1,
    recompute: bool = False,
    queries: Optional[Callable[[Any], Mapping[str, tuple[int, int]]]] = None,
    progress: Optional[Callable[[dict], None]] = None,
) -> list[dict]:
    """Prune heads step by step by Michel et al.'s importance (chapter "Importance pruning").

    At each step: score the current masks with ``score_fn(masks)`` (e.g. BLEU, or a similarity), record
    it, and prune the ``n_per_step`` least important kept heads; stop when ``min_heads`` heads are left.
    The importance (:func:`head_importance` on ``batches``, with ``queries`` if given) is computed once
    at the start, as in the authors' code, or before every step with ``recompute=True``.
    Returns one record per step: ``{"n_kept", "score", "masks"}``, from the full model down.
    ``batches`` must be re-iterable (a list).
    """
    if n_per_step < 1:
        raise ValueError(f"n_per_step must be at least 1, got {n_per_step}")
    current = _as_masks(masks)
    total = count_kept(current)
    if not (1 <= min_heads <= total):
        raise ValueError(f"min_heads must be between 1 and the {total} kept heads, got {min_heads}")
    if isinstance(batches, Iterable) and not isinstance(batches, Sequence):
        raise ValueError("batches must be a sequence (e.g. a list) so it can be iterated at every step")
    records = []
    imp = None
    while True:
        n_kept = count_kept(current)
        rec = {"n_kept": n_kept, "score": float(score_fn(current)), "masks": {n: m.clone() for n, m in current.items()}}
        records.append(rec)
        if progress is not None:
            progress(rec)
        if n_kept <= min_heads:
            break
        if imp is None or recompute:
            imp = head_importance(loss_fn, current, batches, queries=queries)
        current = prune_least_important(imp, current, min(n_per_step, n_kept - min_heads))
    return records


def random_order_scores(score_fn: Callable[[Masks], float], shape: Sequence[int], n_kept: Sequence[int],
                        seed: int = 0) -> list[float]:
    """The baseline of a pruning curve (chapter "Pruning heads"): the heads of a single-kind model of
    ``shape`` ``(n_layers, n_heads)`` pruned in one random order (``torch.randperm`` seeded with ``seed``),
    scored with ``score_fn({"": masks})`` at each number of heads kept in ``n_kept``."""
    total = int(np.prod(shape))
    if any(not 0 <= n <= total for n in n_kept):
        raise ValueError(f"heads kept must lie between 0 and {total}, got {list(n_kept)}")
    order = torch.randperm(total, generator=torch.Generator().manual_seed(seed))
    scores = []
    for n in n_kept:
        m = torch.ones(tuple(shape)).flatten()
        m[order[: total - n]] = 0
        scores.append(score_fn({"": m.view(tuple(shape))}))
    return scores


def pruning_curve_gaps(records: Sequence[Mapping], random_scores: Sequence[float],
                       points: Sequence[tuple[float, float]], n_total: int, up_to: float) -> dict:
    """How a step-by-step pruning curve (``records`` of :func:`prune_step_by_step`, scores interpolated
    linearly between its steps) compares with the random order's scores at the same steps and with other
    ``points`` ``(heads kept, score)`` (chapter "Pruning heads", MiniLM): ``over_random``, the mean of the
    curve minus the random order over the steps keeping ``up_to`` heads or fewer; ``at``, the curve's score at
    ``up_to`` heads; ``points_over``, each point's score minus the curve's at its number of heads, for the
    points strictly between 0 and ``n_total`` heads."""
    if len(records) != len(random_scores):
        raise ValueError(f"need one random score per step, got {len(random_scores)} for {len(records)}")
    n = np.array([r["n_kept"] for r in records][::-1])
    s = np.array([r["score"] for r in records][::-1])
    rand = np.array(list(random_scores)[::-1])
    late = n <= up_to
    if not late.any():
        raise ValueError(f"no step keeps {up_to} heads or fewer")
    return {"over_random": float((s[late] - rand[late]).mean()), "at": float(np.interp(up_to, n, s)),
            "points_over": [p - np.interp(k, n, s) for k, p in points if 0 < k < n_total]}


def masks_from_importance_match(importance: Mapping[str, torch.Tensor], rows: Sequence[Mapping]) -> list[bool]:
    """For each row (``n_kept`` heads and the shipped ``masks`` of a pruned model), whether pruning the
    least important heads of ``importance`` (:func:`prune_least_important` from the full model down to
    ``n_kept``) gives the shipped masks of every kind of ``importance`` (chapter "Pruning heads": a recipe's
    masks recomputed from its shipped importance)."""
    imp = _as_masks(importance)
    total = count_kept(full_masks({k: v.shape for k, v in imp.items()}))
    out = []
    for r in rows:
        again = prune_least_important(imp, full_masks({k: v.shape for k, v in imp.items()}), total - r["n_kept"])
        out.append(all(torch.equal(again[k], torch.tensor(r["masks"][k])) for k in imp))
    return out
