"""The small tasks the book trains models on (Part I, chapters "The circle task" and "Path effectiveness"; Dong et al.
2021, Sec. 5).

* :mod:`.circle`: two arcs on a circle, predicted autoregressively (chapter "The circle task").
* :mod:`.sort`: sort a sequence of digits, token by token (chapter "Path effectiveness").
* :mod:`.hull`: which of 10 points lie on their convex hull (chapter "Path effectiveness").
* :mod:`.memorization`: memorise a random binary label per token of real sentences (chapter "Path effectiveness").

Each task draws its data from an explicit ``torch.Generator`` so that a chapter is deterministic.
"""

import numpy as np
import torch
import torch.nn.functional as F

from attnbook.stats import stratified_welch_t
from attnbook.rank.paths import path_forward, sample_paths
from attnbook.core.text import english_sentences
from attnbook.core.train import to_device
from attnbook.rank.tasks import circle, hull, memorization, sort
from attnbook.rank.tasks.path_model import PathSAN

__all__ = ["PathSAN", "best_short", "circle", "fit_probe", "gain_share", "hull", "memorization", "more_paths_gain",
           "path_above_floor", "path_accuracy_by_length", "path_probe_accuracy", "path_probe_accuracy_by_length",
           "path_task", "sort", "token_accuracy"]


def token_accuracy(logits, labels, ignore_index: int = -100) -> float:
    """Fraction of tokens whose arg-max class equals the label, ignoring ``ignore_index`` (chapter "Path
    effectiveness")."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits (..., C) and labels (...) disagree: {tuple(logits.shape)} vs {tuple(labels.shape)}"
        )
    keep = labels != ignore_index
    if not keep.any():
        raise ValueError("no labelled token to score")
    return float((logits.argmax(-1)[keep] == labels[keep]).float().mean())


def path_task(name: str, size, generator=None):
    """Build a path-effectiveness task of chapter "Path effectiveness" (``"sort"``, ``"hull"`` or ``"memorization"``).

    ``size``: a mapping with ``d_model``, ``n_heads``, ``depth`` and the task's data sizes (the chapter's
    preset: ``n_eval``; sort: ``length``, ``vocab``; hull: ``n_points``; memorization: ``n_sentences``,
    ``max_len``). Returns a dict with ``model`` (:class:`attnbook.rank.tasks.path_model.PathSAN`), ``batch_fn(batch_size,
    generator)`` drawing fresh training batches (memorization: a random batch of its fixed sentences),
    ``train_set`` (a fixed training set of the paper's kind, for the paper's recipe), ``eval`` (inputs,
    labels, key_mask), ``loss_fn``, ``chance`` (the chance / majority accuracy line) and ``ceiling`` (the
    best accuracy the model can reach: 1, or for memorization without positions
    :func:`attnbook.rank.tasks.memorization.achievable_accuracy`). Convex hull embeds its points with the
    official ``--ffn2`` MLP; memorization has no position embeddings and labels [CLS]/[SEP], as the
    official code.
    """

    d, H, L = size["d_model"], size["n_heads"], size["depth"]
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    if name == "sort":
        model = PathSAN(size["vocab"], d, H, L, vocab_size=size["vocab"], n_positions=size["length"])

        def batch_fn(bs, gen=g):
            x, y = sort.sort_batch(bs, size["length"], size["vocab"], gen)
            return x, y, None

        ex, ey, _ = batch_fn(size["n_eval"])
        train_set = batch_fn(size["n_train"])
        chance = 1.0 / size["vocab"]
    elif name == "hull":
        model = PathSAN(2, d, H, L, in_features=2, embed_mlp=True)  # the official --ffn2 embedding

        def batch_fn(bs, gen=g):
            x, y = hull.hull_batch(bs, size["n_points"], generator=gen)
            return x, y, None

        ex, ey, _ = batch_fn(size["n_eval"])
        train_set = batch_fn(size["n_train"])
        chance = hull.majority_accuracy(ey)
    elif name == "memorization":
        data = memorization.memorization_data(english_sentences(size["n_sentences"]), size["max_len"], g)
        model = PathSAN(2, d, H, L, vocab_size=data.vocab_size)  # no positions, as the official model

        def batch_fn(bs, gen=g):
            i = torch.randint(0, len(data.ids), (bs,), generator=gen)
            return data.ids[i], data.labels[i], data.mask[i]

        ex, ey, _ = data.ids, data.labels, None
        train_set = (data.ids, data.labels, data.mask)
        chance = 0.5
        return dict(model=model, batch_fn=batch_fn, train_set=train_set, loss_fn=_loss,
                    eval=(data.ids, data.labels, data.mask), chance=chance,
                    ceiling=memorization.achievable_accuracy(data))
    else:
        raise ValueError(f"unknown task {name!r}; expected 'sort', 'hull' or 'memorization'")
    return dict(model=model, batch_fn=batch_fn, train_set=train_set, loss_fn=_loss,
                eval=(ex, ey, None), chance=chance, ceiling=1.0)


def _loss(model, batch):
    """Token-level cross-entropy of a ``(inputs, labels, key_mask)`` batch (padding labels ignored)."""
    x, y, mask = batch
    logits = model(x, key_mask=mask)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)


def _on_model_device(model, eval_data):
    """``eval_data`` moved to the device of ``model``'s parameters (data may be drawn on the CPU)."""
    param = next(model.parameters(), None)
    return eval_data if param is None else to_device(tuple(eval_data), param.device)


#: the trained-enough gate of chapter "Path effectiveness": the share of a task's ceiling (the best this model can
#: do on it) that the full model must reach before its paths are analysed
TRAINED_ENOUGH = {"sort": 0.95, "hull": 0.85, "memorization": 0.95}


def _trained_share(name: str, accuracy: float, ceiling: float) -> float:
    """The full model's ``accuracy`` over task ``name``'s ``ceiling``, after checking both make sense."""
    if name not in TRAINED_ENOUGH:
        raise ValueError(f"no trained-enough level for task {name!r}; expected one of {sorted(TRAINED_ENOUGH)}")
    if not ceiling > 0:
        raise ValueError(f"task {name!r}: the ceiling must be positive, got {ceiling}")
    return accuracy / ceiling


def trained_enough_check(name: str, accuracy: float, ceiling: float):
    """The trained-enough gate of chapter "Path effectiveness" as a must-hold check (every path analysis of task
    ``name`` needs a model that has learned it): the full model's ``accuracy`` over the task's ``ceiling`` is at
    least :data:`TRAINED_ENOUGH`; a model short of it stops the chapter (:class:`attnbook.claims.ClaimFailed`)."""
    from attnbook.claims import check

    return check(f"paths: full-model accuracy / ceiling, {name} (trained-enough gate)",
                 _trained_share(name, accuracy, ceiling), at_least=TRAINED_ENOUGH[name])


def trained_enough_gate(name: str, accuracy: float, ceiling: float, seed: int, guards: str):
    """The same trained-enough level as :func:`trained_enough_check`, for a model trained at another training
    ``seed`` (section "Another training, the same verdicts?"): a recorded gate, so that a model short of it
    withholds the verdicts named by ``guards`` (:func:`attnbook.claims.guarded`) instead of stopping the
    chapter."""
    from attnbook.claims import gate

    return gate(f"paths: full-model accuracy / ceiling, {name}, training seed {seed}",
                _trained_share(name, accuracy, ceiling), at_least=TRAINED_ENOUGH[name], digits=3,
                guards=guards)


def full_accuracy(model, eval_data) -> float:
    """Token accuracy of the full model on ``eval_data = (inputs, labels, key_mask)`` (chapter "Path effectiveness").
    The data is moved to the model's device."""
    x, y, mask = _on_model_device(model, eval_data)
    with torch.no_grad():
        return token_accuracy(model(x, key_mask=mask), y)


def path_accuracy(model, eval_data, length: int, n_paths: int, repeats: int, generator=None):
    """Accuracy of ``model`` restricted to ``n_paths`` sampled paths of the given ``length``
    (:func:`attnbook.rank.paths.sample_paths`, :func:`attnbook.rank.paths.path_forward`), for ``repeats`` fresh draws
    (chapter "Path effectiveness", Fig. "path effectiveness"). Returns a list of ``repeats`` accuracies. The data is
    moved to the model's device; paths are drawn on the CPU from ``generator``."""
    if repeats < 1:
        raise ValueError(f"repeats must be positive, got {repeats}")
    x, y, mask = _on_model_device(model, eval_data)
    accs = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for _ in range(repeats):
            paths = sample_paths(model.depth, model.n_heads, length, n_paths, generator)
            accs.append(token_accuracy(model(x, paths=paths, key_mask=mask), y))
    model.train(was_training)
    return accs


def fit_probe(features: torch.Tensor, labels: torch.Tensor, n_classes: int, steps: int = 50,
              ignore_index: int = -100) -> torch.nn.Linear:
    """A linear classifier fitted to ``features`` ``(..., d)`` and ``labels`` ``(...)`` by full-batch L-BFGS
    on the cross-entropy (chapter "Path effectiveness": the probe refitted to each path length's
    representation). Deterministic: zero initial weights."""
    if features.shape[:-1] != labels.shape:
        raise ValueError(f"features (..., d) and labels (...) disagree: {tuple(features.shape)} vs "
                         f"{tuple(labels.shape)}")
    keep = labels != ignore_index
    x, y = features[keep].detach(), labels[keep]
    probe = torch.nn.Linear(x.shape[-1], n_classes).to(x.dtype).to(x.device)
    torch.nn.init.zeros_(probe.weight)
    torch.nn.init.zeros_(probe.bias)
    opt = torch.optim.LBFGS(probe.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(probe(x), y)
        loss.backward()
        return loss

    opt.step(closure)
    return probe.requires_grad_(False)


def path_probe_accuracy(model, train_data, eval_data, length: int, n_paths: int, repeats: int,
                        generator=None, steps: int = 50) -> list:
    """:func:`path_accuracy` with the classifier refitted to the paths' representation (chapter "Path
    effectiveness", the robustness arm): for each of ``repeats`` draws of ``n_paths`` paths of the given
    ``length``, a linear probe (:func:`fit_probe`) is fitted on ``train_data``'s path representation and
    scored on ``eval_data``'s, so that a path is not judged by a classifier trained on another
    representation (the full model's). Returns the ``repeats`` accuracies."""
    if repeats < 1:
        raise ValueError(f"repeats must be positive, got {repeats}")
    (xt, yt, mt), (xe, ye, me) = _on_model_device(model, train_data), _on_model_device(model, eval_data)
    n_classes = model.classifier.out_features
    accs = []
    was_training = model.training
    model.eval()
    for _ in range(repeats):
        paths = sample_paths(model.depth, model.n_heads, length, n_paths, generator)
        with torch.no_grad():
            ft = path_forward(model.blocks, model.embed_inputs(xt), paths, mt)
            fe = path_forward(model.blocks, model.embed_inputs(xe), paths, me)
        with torch.enable_grad():
            probe = fit_probe(ft, yt, n_classes, steps)
        accs.append(token_accuracy(probe(fe), ye))
    model.train(was_training)
    return accs


def path_accuracy_by_length(model, eval_data, n_paths: int, repeats: int, generator=None) -> np.ndarray:
    """:func:`path_accuracy` for every path length ``k = 0 .. model.depth`` in turn, drawing from one
    ``generator`` (chapter "Path effectiveness", Fig. "path effectiveness"): an array of shape
    ``(depth + 1, repeats)``."""
    return np.array([path_accuracy(model, eval_data, k, n_paths, repeats, generator)
                     for k in range(model.depth + 1)])


def path_probe_accuracy_by_length(model, train_data, eval_data, n_paths: int, repeats: int, generator=None,
                                  n_fit=None) -> np.ndarray:
    """:func:`path_probe_accuracy` for every path length ``k = 0 .. model.depth`` in turn, the probes fitted
    on the first ``n_fit`` sequences of ``train_data = (inputs, labels, key_mask)`` (all when None)
    (chapter "Path effectiveness", the refitted probe): an array of shape ``(depth + 1, repeats)``."""
    x, y, m = train_data
    fit_on = (x[:n_fit], y[:n_fit], None if m is None else m[:n_fit])
    return np.array([path_probe_accuracy(model, fit_on, eval_data, k, n_paths, repeats, generator)
                     for k in range(model.depth + 1)])


def position_prior_accuracy(train_labels: torch.Tensor, eval_labels: torch.Tensor,
                            ignore_index: int = -100) -> float:
    """The accuracy of a predictor that sees only the position (chapter "Path effectiveness", sorting's floor
    beside the paper's chance line of one over the vocabulary): at each position, the label most common there
    in ``train_labels`` (``(sequences, positions)``, a fixed sample of the task's sequences), scored on the
    labelled tokens of ``eval_labels``. A sorted sequence starts low and ends high, so this beats chance well;
    a path that carries even the position alone, read by a readout fitted to it, reaches it."""
    train_labels, eval_labels = torch.as_tensor(train_labels).cpu(), torch.as_tensor(eval_labels).cpu()
    if train_labels.dim() != 2 or eval_labels.dim() != 2 or train_labels.shape[1] != eval_labels.shape[1]:
        raise ValueError(f"need (sequences, positions) labels with the same positions, got "
                         f"{tuple(train_labels.shape)} and {tuple(eval_labels.shape)}")
    hits = total = 0
    for i in range(eval_labels.shape[1]):
        seen, scored = train_labels[:, i], eval_labels[:, i]
        seen, scored = seen[seen != ignore_index], scored[scored != ignore_index]
        if len(scored) == 0:
            continue
        if len(seen) == 0:
            raise ValueError(f"position {i} is labelled in the evaluation labels and never in the training ones")
        values, counts = seen.unique(return_counts=True)
        hits += int((scored == values[counts.argmax()]).sum())
        total += len(scored)
    if total == 0:
        raise ValueError("the evaluation labels hold no labelled token")
    return hits / total


def best_short(by_length, lengths=(1, 2)) -> float:
    """The best mean accuracy over the short path ``lengths`` of a ``(depth + 1, repeats)`` table of
    :func:`path_accuracy_by_length` (chapter "Path effectiveness": "short" is the better of lengths 1 and 2)."""
    return max(float(np.asarray(by_length[k]).mean()) for k in lengths)


def path_above_floor(by_length, floor: float, lengths=(1, 2)) -> dict:
    """Does the best of the path ``lengths`` lie above ``floor`` (chance, the majority line, or a refitted
    probe's accuracy at length 0)? Chapter "Path effectiveness", the test that decides the paper's qualitative
    reading of its Fig. 4 (short paths lie above chance).

    The test: a one-sided one-sample t test of the best length's sampled path sets (the ``repeats`` column of a
    ``(depth + 1, repeats)`` table of :func:`path_accuracy_by_length`, the evaluation set fixed; ``repeats - 1``
    degrees of freedom) against ``floor``, its p multiplied by ``len(lengths)`` (Bonferroni) because the best
    length was chosen after looking. Repeats without spread give p 0 when above the floor, 1 otherwise.
    ``p_below`` tests the opposite, that every one of the ``lengths`` lies below the floor (each length's
    one-sided t test; the largest of their p, an intersection-union test, needs no correction): the evidence
    that the paper's reading fails, not merely that it is not shown. Returns ``dict(value=the best mean,
    p=..., p_below=..., length=k, n=repeats)``."""
    from scipy.stats import t as student_t

    table = [np.asarray(by_length[k], dtype=float) for k in lengths]
    if not table or min(a.size for a in table) < 2:
        raise ValueError(f"each path length needs at least 2 sampled repeats, got {[a.size for a in table]}")
    if not all(np.isfinite(a).all() for a in table) or not np.isfinite(floor):
        raise ValueError("the accuracies and the floor must be finite")

    def above(a):  # one-sided p that this length's mean lies above the floor
        if np.ptp(a) == 0:  # no spread (the std, and the mean, of equal floats can be off by 1e-17)
            return 0.0 if a[0] > floor else 1.0
        se = float(a.std(ddof=1) / np.sqrt(a.size))
        return float(student_t.sf((float(a.mean()) - floor) / se, a.size - 1))

    def below(a):  # one-sided p that it lies below
        if np.ptp(a) == 0:
            return 0.0 if a[0] < floor else 1.0
        return 1.0 - above(a)

    best = int(np.argmax([a.mean() for a in table]))
    return dict(value=float(table[best].mean()), p=min(1.0, above(table[best]) * len(lengths)),
                p_below=max(below(a) for a in table), length=int(lengths[best]), n=int(table[best].size))


def gain_share(by_length, full: float, floor: float, lengths=(1, 2)) -> float:
    """The best short path's accuracy above ``floor`` as a share of the full model's ``full`` above it
    (chapter "Path effectiveness": the floor is chance for the model's classifier, the probe's own
    accuracy at length 0 for a refitted probe)."""
    if full == floor:
        raise ValueError(f"the full model's accuracy equals the floor ({floor}): no gain to share")
    return (best_short(by_length, lengths) - floor) / (full - floor)


def more_paths_gain(many, few, lengths=(1, 2)) -> dict:
    """Mean accuracy with more paths minus with fewer (two ``(depth + 1, repeats)`` tables) over the path
    ``lengths``, with a 90% interval by Welch's t over the sampled repeats, each length a stratum
    (:func:`attnbook.stats.stratified_welch_t`; chapter "Path effectiveness": do 20 paths beat 5?). Pooling the
    lengths' repeats instead would count the gap between length 1's and length 2's accuracy as noise.
    Returns ``dict(value=..., interval=(lo, hi))``, the keywords of :func:`attnbook.claims.compare`."""
    t = stratified_welch_t([many[k] for k in lengths], [few[k] for k in lengths], level=0.9)
    return dict(value=t["change"], interval=t["interval"])
