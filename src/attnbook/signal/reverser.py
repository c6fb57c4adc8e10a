"""The sequence-reversal task of chapter "Unequal gradients, temperature and adaptive optimisers" (Noci et al. 2022's
claim that adaptive optimisers train what SGD cannot): a deep post-LN stack learns to reverse random digits.

:class:`Reverser` is token and position embeddings, a post-LN stack of attention + MLP blocks
(:func:`attnbook.signal.propagation.build_stack`, residual scaling ``alpha = 1/sqrt(L)`` when ``scaled``, softmax
temperature ``tau``) and a linear read-out. :func:`train_run` trains one with SGD (momentum 0.9) or Adam,
without clipping or warm-up so that the optimiser sees the raw gradients, and logs what decides whether it
learns: the query/key and value gradient norms and the cosine between the output tokens.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.claims import Claim, gate
from attnbook.signal import propagation as prop
from attnbook.core.train import train
from attnbook.core import runs
from attnbook.stats import welch_t


@dataclass(frozen=True)
class ReverserSize:
    """The task and model sizes (``presets.preset("unequal_gradients")`` holds them)."""

    vocab: int
    seq_len: int
    d_model: int
    heads: int
    depth: int
    batch: int

    @classmethod
    def from_preset(cls, p: dict) -> "ReverserSize":
        return cls(p["vocab"], p["seq_len"], p["train_d_model"], p["train_heads"], p["train_depth"], p["batch"])


class Reverser(nn.Module):
    """Embeddings, a post-LN stack of ``depth`` blocks and a linear read-out (chapter "Unequal gradients")."""

    def __init__(self, size: ReverserSize, scaled: bool, temperature: float, learnable_alpha: bool = False) -> None:
        super().__init__()
        self.size = size
        self.tok, self.pos = nn.Embedding(size.vocab, size.d_model), nn.Embedding(size.seq_len, size.d_model)
        self.stack = prop.build_stack(size.depth, size.d_model, size.heads, layernorm="post", scaled=scaled,
                                      temperature=temperature, learnable_alpha=learnable_alpha)
        self.out = nn.Linear(size.d_model, size.vocab)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """The stack's output tokens ``(batch, seq_len, d_model)``."""
        return self.stack(self.tok(x) + self.pos.weight)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.hidden(x))


def batches(size: ReverserSize):
    """``batch_fn(step) -> (x, reversed x)``: fresh random digits each step (torch's global generator)."""
    def batch_fn(step):
        x = torch.randint(0, size.vocab, (size.batch, size.seq_len))
        return x, x.flip(1)
    return batch_fn


def collapsed_accuracy(vocab: int, seq_len: int) -> float:
    """The best accuracy on the reversal task of a model whose output tokens are all alike (chapter "Unequal
    gradients": rank collapse at the output). Such a model gives the same answer at every position, so it is
    right at most as often as the input's most frequent digit occurs: the accuracy of predicting that digit
    everywhere, ``E[max_v count_v] / seq_len`` for ``seq_len`` uniform digits of ``vocab``. Exact: ``P(max <= m)``
    is ``seq_len! / vocab^seq_len`` times the coefficient of ``x^seq_len`` in ``(sum_{k <= m} x^k / k!)^vocab``."""
    if vocab < 1 or seq_len < 1:
        raise ValueError(f"need vocab >= 1 and seq_len >= 1, got {vocab} and {seq_len}")

    def at_most(m: int) -> Fraction:  # P(no digit occurs more than m times)
        poly = [Fraction(1)] + [Fraction(0)] * seq_len
        for _ in range(vocab):
            poly = [sum(poly[i - k] / math.factorial(k) for k in range(min(m, i) + 1)) for i in range(seq_len + 1)]
        return poly[seq_len] * math.factorial(seq_len) / Fraction(vocab) ** seq_len

    expected_max = sum(1 - at_most(m) for m in range(seq_len))
    return float(expected_max / seq_len)


def loss_fn(model: Reverser, batch) -> torch.Tensor:
    x, y = batch
    return F.cross_entropy(model(x).reshape(-1, model.size.vocab), y.reshape(-1))


def accuracy(model: Reverser, x: torch.Tensor) -> float:
    """Share of positions of ``x`` whose reversed digit is predicted."""
    with torch.no_grad():
        return float((model(x).argmax(-1) == x.flip(1)).float().mean())


def gradient_norms(model: Reverser) -> dict:
    """The geometric mean over layers of the gradient norms of ``W_Q`` and ``W_K`` (together, as the root of
    the sum of squares) and of ``W_V``, after a backward pass."""
    qk, v = [], []
    for b in model.stack.blocks:
        a = b.attn
        qk.append((a.q.weight.grad.norm() ** 2 + a.k.weight.grad.norm() ** 2).sqrt())
        v.append(a.v.weight.grad.norm())
    return {"qk": float(layer_geometric_mean(torch.stack(qk))), "v": float(layer_geometric_mean(torch.stack(v)))}


def layer_geometric_mean(norms: torch.Tensor) -> torch.Tensor:
    """The geometric mean over layers (dimension 0) of per-layer gradient norms, zeros floored at 1e-30: what the
    training log records (:func:`gradient_norms`; per model for a batched ensemble)."""
    return norms.clamp_min(1e-30).log().mean(0).exp()


def log_entry(step: int, loss: float, qk_grad: float, v_grad: float, cosine: float, alphas=None,
              qk_update: float | None = None, v_update: float | None = None) -> dict:
    """One entry of a run's training log, as :func:`train_run` and the batched seeds of
    :mod:`attnbook.signal.reverser_ensemble` write it: loss and cosine to 4 decimals, the learnable residual
    scales (``alphas``) when there are any, and the sizes of the step's updates of ``W_Q, W_K`` together and
    of ``W_V`` (geometric means over layers, :func:`update_norms`) when given."""
    entry = {"step": step, "loss": round(loss, 4), "qk_grad": qk_grad, "v_grad": v_grad, "cosine": round(cosine, 4)}
    if alphas is not None:
        entry["alphas"] = [round(a, 4) for a in alphas]
    if qk_update is not None:
        entry["qk_update"], entry["v_update"] = qk_update, v_update
    return entry


def attention_weights(model: Reverser) -> dict:
    """Copies of every block's ``W_Q``, ``W_K`` and ``W_V`` (``{"q": [...], "k": [...], "v": [...]}``), to
    measure an optimiser step by :func:`update_norms`."""
    blocks = model.stack.blocks
    return {key: [getattr(b.attn, key).weight.detach().clone() for b in blocks] for key in "qkv"}


def update_norms(before: dict, model: Reverser) -> dict:
    """The size of the step from ``before`` (:func:`attention_weights`) to ``model``'s weights: the geometric
    mean over layers of ``|dW_Q, dW_K|`` (together, as the root of the sum of squares) and of ``|dW_V|``
    (chapter "Unequal gradients": Adam's steps against SGD's, where the gradients differ by orders of
    magnitude)."""
    after = attention_weights(model)
    diff = {key: torch.stack([(a - b.to(a.device)).norm() for a, b in zip(after[key], before[key])])
            for key in "qkv"}
    qk = (diff["q"] ** 2 + diff["k"] ** 2).sqrt()
    return {"qk": float(layer_geometric_mean(qk)), "v": float(layer_geometric_mean(diff["v"]))}


def qv_ratio(model: Reverser, batch) -> float:
    """Geometric mean over layers of ``|grad W_Q| / |grad W_V|`` of the loss on ``batch`` (the temperature
    that balances them is found on this ratio)."""
    model.zero_grad()
    loss_fn(model, batch).backward()
    r = [b.attn.q.weight.grad.norm() / b.attn.v.weight.grad.norm() for b in model.stack.blocks]
    model.zero_grad()
    return float(torch.stack(r).log().mean().exp())


def qv_ratios(size: ReverserSize, scaled: bool, grid: Sequence[float], seed: int = 0,
              device=None) -> dict[float, float]:
    """``{tau: qv_ratio}`` at initialisation for every temperature of ``grid`` (chapter "Unequal gradients"):
    each model is drawn with seed ``seed`` and measured on the same batch (the first one drawn after seeding),
    so the temperatures are compared on common random numbers."""
    torch.manual_seed(seed)
    batch = tuple(t.to(device) for t in batches(size)(0))
    ratios = {}
    for tau in grid:
        torch.manual_seed(seed)
        ratios[tau] = qv_ratio(Reverser(size, scaled, tau).to(device), batch)
    return ratios


def closest_to_one(ratios: Mapping[float, float]) -> float:
    """The key of ``ratios`` whose value is closest to 1 in log: the balancing temperature of a grid."""
    if not ratios or any(not r > 0 for r in ratios.values()):
        raise ValueError(f"need positive ratios, got {dict(ratios)}")
    return min(ratios, key=lambda t: abs(math.log(ratios[t])))


def balancing_temperature(size: ReverserSize, scaled: bool, grid=(0.1, 0.15, 0.2, 0.25, 0.35, 0.5, 0.7, 1.0),
                          seed: int = 0) -> float:
    """The temperature of ``grid`` whose model at initialisation (seed ``seed``) has the query/value gradient
    ratio closest to 1 (in log), calibrated for this model (``scaled`` or not): :func:`closest_to_one` of
    :func:`qv_ratios`."""
    return closest_to_one(qv_ratios(size, scaled, grid, seed))


def train_run(size: ReverserSize, *, optimizer: str, scaled: bool, temperature: float, lr: float, seed: int,
              steps: int, x_eval: torch.Tensor, log_every: int = 25, device=None,
              learnable_alpha: bool = False, warmup: int = 0, alpha_lr_scale: float = 1.0) -> dict:
    """Train one :class:`Reverser` (chapter "Unequal gradients"): ``optimizer`` ``"sgd"`` (momentum 0.9) or
    ``"adam"``, constant learning rate after a linear warm-up over ``warmup`` steps (none by default), no
    clipping. Returns the final loss and accuracy on ``x_eval`` and a log every ``log_every`` steps of the
    loss, the query/key and value gradient norms (:func:`gradient_norms`), the sizes of that step's updates
    (:func:`update_norms`) and the mean cosine between the output tokens of ``x_eval``, and the loss of
    every step (``losses``). With ``learnable_alpha`` each block's residual scale is trained too and the
    log holds their values (``alphas``); ``alpha_lr_scale`` multiplies the scales' learning rate alone (Adam
    moves a weight by about its learning rate per step, so this sets how far the scales can travel)."""
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    if alpha_lr_scale != 1.0 and not (learnable_alpha and alpha_lr_scale > 0):
        raise ValueError(f"alpha_lr_scale must be positive and goes with learnable_alpha=True, got "
                         f"{alpha_lr_scale!r} with learnable_alpha={learnable_alpha}")
    torch.manual_seed(seed)
    model = Reverser(size, scaled, temperature, learnable_alpha)
    log: list = []
    losses: list = []
    logged = lambda step: step % log_every == 0 or step == steps  # noqa: E731
    before = {"weights": attention_weights(model)}  # the weights before the next logged step

    def logged_loss(m, batch):
        loss = loss_fn(m, batch)
        losses.append(loss.detach())  # on the device: read at the logged steps, not at every step
        return loss

    def step_fn(step, m):
        if logged(step):
            grads, moved = gradient_norms(m), update_norms(before["weights"], m)
            with torch.no_grad():
                cos = float(prop.token_cosine(m.hidden(x_eval.to(next(m.parameters()).device))).mean())
            alphas = [float(torch.as_tensor(b.alpha).detach()) for b in m.stack.blocks] if learnable_alpha else None
            log.append(log_entry(step, float(losses[-1]), grads["qk"], grads["v"], cos, alphas,
                                 moved["qk"], moved["v"]))
        if logged(step + 1):
            before["weights"] = attention_weights(m)

    scales = {f"stack.blocks.{i}.alpha": alpha_lr_scale for i in range(size.depth)}
    hist = train(model, batches(size), logged_loss, steps=steps, optimizer=optimizer, lr=lr, warmup=warmup,
                 schedule="constant", clip=None, seed=seed, progress=False, device=device, step_fn=step_fn,
                 lr_scale=scales if alpha_lr_scale != 1.0 else None)
    losses = torch.stack(losses).cpu().tolist()
    final = losses[-1]
    return {"loss": final if math.isfinite(final) else float("nan"), "acc": accuracy(model, x_eval.to(
        next(model.parameters()).device)), "log": log, "losses": losses, "steps": hist["steps_done"]}


#: the shipped sweep of ``scripts/sweep_optimisers.py`` at the quick preset


def load_sweep(preset: str | None = None) -> dict:
    """The shipped optimiser sweep (run ``optimiser_sweep``, ``scripts/sweep_optimisers.py``) at ``preset``
    (default: the active one), with its arms keyed by name (``sweep["by_name"]``), or a falsy
    :class:`attnbook.core.runs.Missing` where there is none (:func:`attnbook.core.runs.find`)."""
    sweep = runs.find("optimiser_sweep", preset)
    if sweep:
        sweep["by_name"] = {a["name"]: a for a in sweep["arms"]}
    return sweep


def judged_runs(arm: dict) -> list[dict]:
    """A sweep arm's *judged* runs: the seeds run at the learning rate chosen on the selection seeds (chapter
    "Unequal gradients": the seeds a verdict rests on did not choose its learning rate)."""
    runs = [r for r in arm["runs"] if r["role"] == "judged" and r["lr"] == arm["best_lr"]]
    if not runs:
        raise ValueError(f"arm {arm['name']!r} has no judged runs")
    return runs


def seed_accuracies(arm: dict) -> list[float]:
    """The final accuracy of every judged seed of a sweep arm (:func:`judged_runs`)."""
    return [r["acc"] for r in judged_runs(arm)]


def selection_accuracies(arm: dict, lr: float) -> list[float]:
    """The final accuracy of every selection seed of a sweep arm at learning rate ``lr`` (what chose the arm's
    learning rate)."""
    accs = [r["acc"] for r in arm["runs"] if r["role"] == "selection" and r["lr"] == lr]
    if not accs:
        raise ValueError(f"arm {arm['name']!r} has no runs at learning rate {lr}")
    return accs


def late_loss_drop(arm: dict, window: float = 0.1) -> float:
    """How much the judged runs' loss still fell late in training: the mean logged loss over the window of steps
    ``(0.8 - window, 0.8] T`` minus that over ``(1 - window, 1] T`` (``T`` the last logged step), averaged over
    the judged seeds (chapter "Unequal gradients": the plateau gate; near 0 when training has levelled off,
    positive while the loss still falls)."""
    drops = []
    for r in judged_runs(arm):
        log = r["log"]
        last = log[-1]["step"]

        def mean_loss(lo, hi):
            vals = [e["loss"] for e in log if lo * last < e["step"] <= hi * last]
            if not vals:
                raise ValueError(f"no logged step of arm {arm['name']!r} in ({lo}, {hi}] of training")
            return sum(vals) / len(vals)

        drops.append(mean_loss(0.8 - window, 0.8) - mean_loss(1 - window, 1.0))
    return sum(drops) / len(drops)


#: the plateau gate's largest late loss drop (:func:`late_loss_drop`) of any arm of a sweep
MAX_LATE_DROP = 0.05


def plateau_gate(late_drops: Mapping[str, float], *, what: str, guards: str, precomputed: str = "") -> Claim:
    """The plateau gate of chapter "Training with SGD and Adam" on the arms one claim compares (``late_drops``:
    their :func:`late_loss_drop`, by arm name; ``what``: the claim, named in the gate): the largest is at most
    :data:`MAX_LATE_DROP`. An arm whose loss still falls would be judged before its end, so the claim it guards
    (``guards``) is made only if the gate passes. Recorded whether it passes or fails."""
    if not late_drops:
        raise ValueError("the plateau gate needs the late loss drop of at least one arm")
    return gate(f"plateau gate, {what}: largest late drop of an arm's loss (mean over judged seeds, last tenth "
                "against the tenth before 80% of training)", max(late_drops.values()), at_most=MAX_LATE_DROP,
                digits=2, guards=f"{guards} (an arm still improving would be judged before its end)",
                precomputed=precomputed)


def first_step_below(arm: dict, level: float) -> float:
    """The mean over a sweep arm's judged seeds of the first logged step whose loss is below ``level``
    (``inf`` when a seed never gets there): how fast an arm trains, which its final accuracy cannot show
    (chapter "Unequal gradients")."""
    steps = steps_below(arm, level)
    return sum(steps) / len(steps)


def steps_below(arm: dict, level: float) -> list[float]:
    """Each judged seed's first logged step whose loss is below ``level`` (``inf`` for a seed that never gets
    there), in the judged seeds' order: the per-seed speeds behind :func:`first_step_below` and chapter
    "Training with SGD and Adam"'s speed findings."""
    return [next((e["step"] for e in r["log"] if e["loss"] < level), math.inf) for r in judged_runs(arm)]


def update_ratio(arm: dict, seed: int = 0, step: int | None = None) -> float:
    """The ratio of the query/key to the value update sizes of a sweep arm's judged run (seed ``seed``) at the
    logged ``step`` (default: the first): what the optimiser does with the gradients (chapter "Unequal
    gradients": Adam's steps against SGD's)."""
    log = best_log(arm, seed)
    entry = log[0] if step is None else next((e for e in log if e["step"] == step), None)
    if entry is None:
        raise ValueError(f"arm {arm['name']!r} has no log entry at step {step}")
    return entry["qk_update"] / entry["v_update"]


def by_depth(size: ReverserSize, depths, *, lr: float, steps: int, x_eval: torch.Tensor, seed: int = 0,
             device=None, learnable_depth: int | None = None) -> tuple[dict, dict]:
    """Adam runs at every depth of ``depths``, unscaled and with ``alpha = 1/sqrt(L)`` (``(depth, scaled) ->
    run``), and, at ``learnable_depth``, runs with learnable residual scales started at 1 and at 1/sqrt(L)
    (``scaled -> run``; empty when None): Noci et al.'s Figure 1 on the reversal task."""
    kw = dict(optimizer="adam", temperature=1.0, lr=lr, seed=seed, steps=steps, x_eval=x_eval, device=device)
    runs = {(d, s): train_run(dataclasses.replace(size, depth=d), scaled=s, **kw)
            for d in depths for s in (False, True)}
    learned = {} if learnable_depth is None else {
        s: train_run(dataclasses.replace(size, depth=learnable_depth), scaled=s, learnable_alpha=True, **kw)
        for s in (False, True)}
    return runs, learned


def unscaled_cosine_gap(size: ReverserSize, depth: int, seeds, *, lr: float, steps: int, warmup: int,
                        x_eval: torch.Tensor, device=None) -> list[float]:
    """Noci et al.'s Figure 1 as a seed comparison (chapter "Unequal gradients"): for each seed, the mean token
    cosine during Adam training (:func:`mean_cosine`) of the depth-``depth`` stack with ``alpha = 1`` minus that
    with ``alpha = 1/sqrt(L)``, both after a linear warm-up of ``warmup`` steps (fairseq warms Adam up on
    post-LN); positive where the unscaled stack keeps its tokens more alike."""
    deep = dataclasses.replace(size, depth=depth)
    kw = dict(optimizer="adam", temperature=1.0, lr=lr, steps=steps, x_eval=x_eval, device=device,
              warmup=warmup)
    return [mean_cosine(train_run(deep, scaled=False, seed=s, **kw))
            - mean_cosine(train_run(deep, scaled=True, seed=s, **kw)) for s in seeds]


def sweep_run(arm: dict, lr: float, seed: int = 0) -> dict:
    """The run of a sweep arm at learning rate ``lr`` and seed ``seed`` (chapter "Unequal gradients")."""
    found = [r for r in arm["runs"] if r["lr"] == lr and r["seed"] == seed]
    if not found:
        raise ValueError(f"arm {arm['name']!r} has no run at learning rate {lr}, seed {seed}")
    return found[0]


def best_log(arm: dict, seed: int = 0) -> list:
    """The training log of a sweep arm's judged run at its chosen learning rate and seed ``seed``."""
    return sweep_run(arm, arm["best_lr"], seed)["log"]


def sweep_table(sweep: dict) -> str:
    """A markdown table of the sweep (chapter "Unequal gradients"): one row per arm, at every learning rate
    the mean accuracy over the selection seeds and its range, the chosen learning rate in bold, and the
    judged seeds' accuracies at it."""
    rows = ["| arm | selection seeds, by learning rate: accuracy, mean (min-max) | judged seeds at the chosen "
            "rate |", "|---|---|---|"]
    for name, a in sweep["by_name"].items():
        cells = []
        for lr in sweep["learning_rates"][a["optimizer"]]:
            s = selection_accuracies(a, lr)
            mark = "**" if lr == a["best_lr"] else ""
            cells.append(f"{mark}{lr:g}: {sum(s) / len(s):.2f} ({min(s):.2f}-{max(s):.2f}){mark}")
        judged = ", ".join(f"{x:.2f}" for x in seed_accuracies(a))
        rows.append(f"| {name} | " + "; ".join(cells) + f" | {judged} |")
    return "\n".join(rows)


def arm_difference(sweep: dict, a: str, b: str) -> dict:
    """Mean accuracy of arm ``a`` minus that of arm ``b`` over their judged seeds, each at its own chosen
    learning rate, with a 90% Welch t interval over the seeds (:func:`attnbook.stats.welch_t`; a percentile
    bootstrap over three seeds covers too little) (chapter "Training with SGD and Adam": the sweep's
    comparisons). Returns ``compare``'s keywords ``value``, ``interval`` and ``cannot_decide``: where every
    judged seed of both arms ends at full accuracy, a tie at the ceiling, no gain of ``a`` can show, and the
    comparison is undecided whatever the rule (where only ``b`` is at the ceiling a loss of ``a`` can still
    show, and the interval decides)."""
    arms = sweep["by_name"]
    t = welch_t(seed_accuracies(arms[a]), seed_accuracies(arms[b]), level=0.9)
    tie = min(seed_accuracies(arms[a]) + seed_accuracies(arms[b])) >= 1.0
    return dict(value=t["change"], interval=t["interval"], cannot_decide=(
        "every judged seed of both arms ends at full accuracy: no gain can show at the ceiling" if tie else ""))


def temperature_arm(sweep: dict) -> str:
    """The name of the sweep's SGD arm whose temperature is not 1 (the unscaled model's balancing one)."""
    names = [n for n, a in sweep["by_name"].items() if a["optimizer"] == "sgd" and a["temperature"] != 1]
    if len(names) != 1:
        raise ValueError(f"expected one SGD arm with a temperature other than 1, got {names}")
    return names[0]


def depth_report(by_depth: Mapping[tuple, dict], learned: Mapping[bool, dict]) -> str:
    """One line per run of :func:`by_depth` (chapter "Unequal gradients"): accuracy and the logged output token
    cosines of every ``(depth, scaled)`` run, then accuracy and final scale range of every learnable run."""
    lines = []
    for (depth, scaled), r in by_depth.items():
        cosines = " ".join(f"{e['cosine']:.2f}" for e in r["log"])
        lines.append(f"depth {depth:2d}, alpha={'1/sqrt(L)' if scaled else '1':9s}: accuracy "
                     f"{r['acc']:.2f}, token cosine {cosines}")
    for scaled, r in learned.items():
        a = r["log"][-1]["alphas"]
        lines.append(f"learnable alpha from {'1/sqrt(L)' if scaled else '1'}: accuracy "
                     f"{r['acc']:.2f}, scales after training {min(a):.2f} to {max(a):.2f}")
    return "\n".join(lines)


def mean_cosine(run: dict) -> float:
    """The output token cosine of a run, averaged over its log entries."""
    if not run["log"]:
        raise ValueError("the run has an empty log")
    return sum(e["cosine"] for e in run["log"]) / len(run["log"])


def largest_scale_move(learned: Mapping[bool, dict]) -> float:
    """The largest distance of any learnable residual scale, at any log entry, from its first logged value,
    over the runs of ``learned`` (chapter "Unequal gradients": do the scales move in training?)."""
    return max(abs(e["alphas"][j] - r["log"][0]["alphas"][j])
               for r in learned.values() for e in r["log"] for j in range(len(e["alphas"])))
