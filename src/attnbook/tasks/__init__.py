"""The small tasks the book trains models on (Part I, chapters 6 and 7; Dong et al. 2021, Sec. 5).

* :mod:`.circle`: two arcs on a circle, predicted autoregressively (chapter 6, "The circle task").
* :mod:`.sort`: sort a sequence of digits, token by token (chapter 7, "Path effectiveness").
* :mod:`.hull`: which of 10 points lie on their convex hull (chapter 7).
* :mod:`.memorization`: memorise a random binary label per token of real sentences (chapter 7).

Each task draws its data from an explicit ``torch.Generator`` so that a chapter is deterministic.
"""

from . import circle, hull, memorization, sort

__all__ = ["circle", "hull", "memorization", "sort", "token_accuracy"]


def token_accuracy(logits, labels, ignore_index: int = -100) -> float:
    """Fraction of tokens whose arg-max class equals the label, ignoring ``ignore_index`` (chapter 7)."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits (..., C) and labels (...) disagree: {tuple(logits.shape)} vs {tuple(labels.shape)}"
        )
    keep = labels != ignore_index
    if not keep.any():
        raise ValueError("no labelled token to score")
    return float((logits.argmax(-1)[keep] == labels[keep]).float().mean())
