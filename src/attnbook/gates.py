"""Hard-concrete head gates and their expected-L0 penalty (chapter 11, "Pruning heads").

Voita et al. (2019) put a scalar gate ``g_h`` on the output of every attention head and learn which
heads can be closed with a relaxation of the L0 norm, the *hard-concrete* distribution of Louizos et al.
(2018). With a learned ``log_alpha`` per head, temperature ``beta = 0.33`` and stretch ``(l, r) =
(-0.1, 1.1)`` (the values of the official code, ``lib/layers/concrete_gate.py``):

* sample (chapter 11, eq. ``hard-concrete``):
  ``u ~ U(0, 1)``, ``s = sigmoid((log u - log(1 - u) + log_alpha) / beta)``, ``g = clip(s (r - l) + l, 0, 1)``;
* evaluation gate (deterministic, as the official code): ``clip(sigmoid(log_alpha) (r - l) + l, 0, 1)``
  ``= clip(1.2 sigmoid(log_alpha) - 0.1, 0, 1)``;
* closed forms (eq. ``p-closed``): ``P(g = 0) = sigmoid(beta log(-l / r) - log_alpha)``,
  ``P(g != 0) = sigmoid(log_alpha - beta log(-l / r))`` (the expected L0 norm of one gate),
  ``P(g = 1) = sigmoid(log_alpha - beta log((1 - l) / (r - 1)))``;
* objective (eq. ``gate-objective``): ``L = L_xent + lambda L_C``, ``L_C = sum_h P(g_h != 0)``.
  The official code sums over the heads of each layer and takes the *mean over layers* (and over the
  attention types that carry gates) before multiplying by ``lambda``: :func:`l0_penalty` does the same
  by default (``reduction="layer_mean"``); ``reduction="sum"`` gives the paper's plain sum.

Gates attach to any attention block of this library through its ``head_gates`` argument (a
:class:`HeadGates` module produces them), and to a Hugging Face BERT-like model through
:func:`attach_head_gates`, a forward pre-hook on each layer's attention output projection that multiplies
each head's slice of the concatenated head outputs. (transformers 5.x ignores ``head_mask`` and has no
``prune_heads``; the hook works in 4.x and 5.x and passes gradients to the gates.)
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import torch
from torch import nn

#: temperature ``beta`` of the concrete distribution (official code)
TEMPERATURE = 0.33
#: stretch limits ``(l, r)`` (official code)
STRETCH = (-0.1, 1.1)
#: noise is drawn from ``U(EPS, 1 - EPS)`` (official code)
EPS = 1e-6
#: reductions :func:`l0_penalty` knows
REDUCTIONS = ("layer_mean", "sum")

Shape = Union[Sequence[int], torch.Size]


def _check_log_alpha(log_alpha) -> torch.Tensor:
    if not isinstance(log_alpha, torch.Tensor):
        raise ValueError(f"log_alpha must be a torch.Tensor, got {type(log_alpha).__name__}")
    if not log_alpha.is_floating_point():
        raise ValueError(f"log_alpha must be a floating-point tensor, got dtype {log_alpha.dtype}")
    if log_alpha.numel() == 0:
        raise ValueError("log_alpha is empty; expected at least one gate")
    if not torch.isfinite(log_alpha.detach()).all():
        raise ValueError("log_alpha has non-finite entries")
    return log_alpha


def _check_params(temperature: float, stretch: tuple[float, float]) -> tuple[float, float, float]:
    if not (0 < temperature <= 1):
        raise ValueError(f"temperature must be in (0, 1], got {temperature}")
    if len(stretch) != 2:
        raise ValueError(f"stretch must be a pair (l, r), got {stretch!r}")
    low, high = float(stretch[0]), float(stretch[1])
    if not (low < 0 and high > 1):
        raise ValueError(
            f"stretch (l, r) must satisfy l < 0 < 1 < r so that gates can be exactly 0 and 1, got {stretch}"
        )
    return float(temperature), low, high


def sample_gates(
    log_alpha: torch.Tensor,
    *,
    temperature: float = TEMPERATURE,
    stretch: tuple[float, float] = STRETCH,
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    """Draw one hard-concrete gate per entry of ``log_alpha`` (chapter 11, eq. ``hard-concrete``).

    ``s = sigmoid((log u - log(1-u) + log_alpha) / temperature)``, ``g = clip(s (r-l) + l, 0, 1)``, with
    ``u ~ U(EPS, 1-EPS)``. Differentiable in ``log_alpha`` (reparameterisation); exact zeros and ones
    occur with the probabilities of :func:`prob_zero` and :func:`prob_one`.
    """
    _check_log_alpha(log_alpha)
    beta, low, high = _check_params(temperature, stretch)
    u = torch.rand(log_alpha.shape, generator=generator, dtype=log_alpha.dtype, device=log_alpha.device)
    u = u * (1 - 2 * EPS) + EPS
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / beta)
    return (s * (high - low) + low).clamp(0.0, 1.0)


def deterministic_gates(log_alpha: torch.Tensor, *, stretch: tuple[float, float] = STRETCH) -> torch.Tensor:
    """The evaluation gate ``clip(sigmoid(log_alpha) (r-l) + l, 0, 1)`` (chapter 11; official code).

    With the default stretch this is ``clip(1.2 sigmoid(log_alpha) - 0.1, 0, 1)``: a head is pruned when
    its evaluation gate is exactly 0, i.e. when ``log_alpha <= log(1/11) = -2.40``.
    """
    _check_log_alpha(log_alpha)
    _, low, high = _check_params(TEMPERATURE, stretch)
    return (torch.sigmoid(log_alpha) * (high - low) + low).clamp(0.0, 1.0)


def prob_nonzero(
    log_alpha: torch.Tensor, *, temperature: float = TEMPERATURE, stretch: tuple[float, float] = STRETCH
) -> torch.Tensor:
    """``P(g != 0) = sigmoid(log_alpha - temperature log(-l/r))``: the expected L0 norm of each gate
    (chapter 11, eq. ``p-closed``)."""
    _check_log_alpha(log_alpha)
    beta, low, high = _check_params(temperature, stretch)
    return torch.sigmoid(log_alpha - beta * math.log(-low / high))


def prob_zero(
    log_alpha: torch.Tensor, *, temperature: float = TEMPERATURE, stretch: tuple[float, float] = STRETCH
) -> torch.Tensor:
    """``P(g = 0) = 1 - P(g != 0)``, the probability that a sampled gate is exactly closed (eq. ``p-closed``)."""
    return 1.0 - prob_nonzero(log_alpha, temperature=temperature, stretch=stretch)


def prob_one(
    log_alpha: torch.Tensor, *, temperature: float = TEMPERATURE, stretch: tuple[float, float] = STRETCH
) -> torch.Tensor:
    """``P(g = 1) = sigmoid(log_alpha - temperature log((1-l)/(r-1)))``: a sampled gate is exactly open
    (chapter 11, eq. ``p-closed``; same derivation as :func:`prob_nonzero` at the upper clip point)."""
    _check_log_alpha(log_alpha)
    beta, low, high = _check_params(temperature, stretch)
    return torch.sigmoid(log_alpha - beta * math.log((1 - low) / (high - 1)))


def l0_penalty(
    log_alphas: Union[torch.Tensor, Mapping[str, torch.Tensor]],
    *,
    reduction: str = "layer_mean",
    temperature: float = TEMPERATURE,
    stretch: tuple[float, float] = STRETCH,
) -> torch.Tensor:
    """The expected-L0 penalty ``L_C`` of chapter 11, eq. ``gate-objective``.

    ``log_alphas``: one ``(n_layers, n_heads)`` tensor, or a mapping from attention type to such tensors.
    ``reduction="layer_mean"`` (default, the official code): sum ``P(g != 0)`` over the heads of each
    layer, then average over all layers of all types. ``reduction="sum"``: the plain sum over every head
    (the paper's formula). Multiply by ``lambda`` yourself.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    groups = _as_groups(log_alphas)
    per_layer = []
    for name, la in groups.items():
        if la.ndim != 2:
            raise ValueError(f"log_alpha[{name!r}] must have shape (n_layers, n_heads), got {tuple(la.shape)}")
        per_layer.append(prob_nonzero(la, temperature=temperature, stretch=stretch).sum(dim=1))
    layers = torch.cat(per_layer)
    return layers.mean() if reduction == "layer_mean" else layers.sum()


def _as_groups(x) -> dict[str, torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return {"": x}
    if isinstance(x, Mapping) and len(x) > 0:
        return dict(x)
    raise ValueError(f"expected a tensor or a non-empty mapping of tensors, got {type(x).__name__}")


class HeadGates(nn.Module):
    """Learnable hard-concrete gates for groups of heads (chapter 11).

    ``shapes`` maps an attention type to ``(n_layers, n_heads)``, e.g.
    ``{"enc_self": (3, 4), "dec_self": (3, 4), "dec_cross": (3, 4)}``; a bare ``(n_layers, n_heads)``
    makes a single group named ``""``. ``forward()`` returns a dict of gate tensors of those shapes:
    sampled (:func:`sample_gates`) in training mode, deterministic (:func:`deterministic_gates`) in eval
    mode; pass it as ``head_gates=`` to a model of the library. ``init_log_alpha`` defaults to 3.0, an
    almost surely open gate (``P(g != 0) = 0.98``), so fine-tuning starts from the unpruned model;
    ``"glorot"`` draws it as the official code does (glorot-uniform of a ``[1, heads, 1, 1]`` variable,
    ``U(-sqrt(3/heads), sqrt(3/heads))``: ``P(g != 0)`` between 0.54 and 0.80 for 8 heads), from ``seed``.
    """

    def __init__(
        self,
        shapes: Union[Shape, Mapping[str, Shape]],
        *,
        init_log_alpha: Union[float, str] = 3.0,
        temperature: float = TEMPERATURE,
        stretch: tuple[float, float] = STRETCH,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.temperature, low, high = _check_params(temperature, stretch)
        self.stretch = (low, high)
        if init_log_alpha != "glorot" and not (
            isinstance(init_log_alpha, (int, float)) and math.isfinite(init_log_alpha)
        ):
            raise ValueError(f"init_log_alpha must be a finite number or 'glorot', got {init_log_alpha!r}")
        generator = torch.Generator().manual_seed(int(seed))
        if isinstance(shapes, Mapping):
            items = list(shapes.items())
        else:
            items = [("", shapes)]
        if not items:
            raise ValueError("shapes is empty; expected at least one attention type")
        self.log_alpha = nn.ParameterDict()
        self.names: list[str] = []
        for name, shape in items:
            shape = tuple(int(s) for s in shape)
            if len(shape) != 2 or min(shape) < 1:
                raise ValueError(f"shape of {name!r} must be (n_layers, n_heads) with positive sizes, got {shape}")
            # ParameterDict keys cannot be empty: store the unnamed group as "all"
            if init_log_alpha == "glorot":
                # the official code's default initialiser for a [1, heads, 1, 1] variable per layer:
                # U(-a, a) with a = sqrt(6 / (fan_in + fan_out)) = sqrt(3 / heads)
                bound = math.sqrt(3.0 / shape[1])
                init = (torch.rand(shape, generator=generator) * 2 - 1) * bound
            else:
                init = torch.full(shape, float(init_log_alpha))
            self.log_alpha[name or "all"] = nn.Parameter(init)
            self.names.append(name)

    def _groups(self) -> dict[str, torch.Tensor]:
        return {name: self.log_alpha[name or "all"] for name in self.names}

    def forward(self, generator: Optional[torch.Generator] = None) -> dict[str, torch.Tensor]:
        """Gates per attention type: sampled when ``self.training``, else deterministic."""
        if self.training:
            return {
                n: sample_gates(la, temperature=self.temperature, stretch=self.stretch, generator=generator)
                for n, la in self._groups().items()
            }
        return {n: deterministic_gates(la, stretch=self.stretch) for n, la in self._groups().items()}

    def penalty(self, reduction: str = "layer_mean") -> torch.Tensor:
        """``L_C`` of eq. ``gate-objective`` for these gates (see :func:`l0_penalty`)."""
        return l0_penalty(self._groups(), reduction=reduction, temperature=self.temperature, stretch=self.stretch)

    @torch.no_grad()
    def open_mask(self) -> dict[str, torch.Tensor]:
        """Boolean ``(n_layers, n_heads)`` per type: heads whose evaluation gate is not zero (kept heads)."""
        return {n: deterministic_gates(la, stretch=self.stretch) > 0 for n, la in self._groups().items()}

    def n_open(self) -> int:
        """Number of heads kept (evaluation gate > 0), over all types."""
        return int(sum(int(m.sum()) for m in self.open_mask().values()))

    @torch.no_grad()
    def expected_open(self) -> dict[str, torch.Tensor]:
        """``P(g != 0)`` per head and type (detached)."""
        return {n: prob_nonzero(la, temperature=self.temperature, stretch=self.stretch) for n, la in self._groups().items()}


# ----------------------------------------------------------------------------------------------------------
# Hugging Face BERT-like models: gate heads with a forward pre-hook on the attention output projection
# ----------------------------------------------------------------------------------------------------------


def output_projections(model: nn.Module) -> list[nn.Linear]:
    """The attention output projection of every layer of a Hugging Face BERT-like encoder (chapter 11).

    Supported: models with ``encoder.layer[i].attention.output.dense`` (BERT, RoBERTa, MiniLM, ELECTRA,
    ...) and DistilBERT (``transformer.layer[i].attention.out_lin``), bare or inside a task model.
    Raises ``ValueError`` for anything else: pass the list of projections to :func:`attach_head_gates`
    yourself.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch.nn.Module, got {type(model).__name__}")
    base = getattr(model, getattr(model, "base_model_prefix", ""), model)
    for root in (base, model):
        enc = getattr(root, "encoder", None)
        if enc is not None and hasattr(enc, "layer"):
            try:
                return [layer.attention.output.dense for layer in enc.layer]
            except AttributeError:
                pass
        tr = getattr(root, "transformer", None)
        if tr is not None and hasattr(tr, "layer"):
            try:
                return [layer.attention.out_lin for layer in tr.layer]
            except AttributeError:
                pass
    raise ValueError(
        f"{type(model).__name__} is not a BERT-like model this function knows (expected "
        "encoder.layer[i].attention.output.dense or transformer.layer[i].attention.out_lin); "
        "pass the output projections explicitly"
    )


class GateHooks:
    """Forward pre-hooks that multiply each head's slice of the attention output projection's input.

    Set :attr:`gates` to an ``(n_layers, n_heads)`` tensor (or ``None`` to switch gating off) before a
    forward pass; gradients flow into it. Use :meth:`remove` (or ``with``) to detach the hooks.
    """

    def __init__(self, projections: Sequence[nn.Linear], n_heads: int) -> None:
        if not projections:
            raise ValueError("no output projections given")
        if n_heads < 1:
            raise ValueError(f"n_heads must be positive, got {n_heads}")
        for p in projections:
            if not isinstance(p, nn.Linear) or p.in_features % n_heads:
                raise ValueError(
                    f"each projection must be an nn.Linear whose in_features is divisible by n_heads={n_heads}, "
                    f"got {p!r}"
                )
        self.n_layers, self.n_heads = len(projections), int(n_heads)
        self.gates: Optional[torch.Tensor] = None
        self._handles = [p.register_forward_pre_hook(self._make_hook(i)) for i, p in enumerate(projections)]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_layers, self.n_heads)

    def _make_hook(self, layer: int) -> Callable:
        def hook(module, args):
            if self.gates is None:
                return None
            g = self.gates
            if not isinstance(g, torch.Tensor) or tuple(g.shape) != self.shape:
                raise ValueError(f"gates must be a tensor of shape {self.shape}, got {getattr(g, 'shape', g)}")
            x = args[0]
            d_head = x.shape[-1] // self.n_heads
            gated = (x.unflatten(-1, (self.n_heads, d_head)) * g[layer].to(x.device, x.dtype)[:, None]).flatten(-2)
            return (gated, *args[1:])

        return hook

    def remove(self) -> None:
        """Detach every hook (the model is unchanged afterwards)."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> "GateHooks":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def attach_head_gates(
    model: nn.Module, n_heads: Optional[int] = None, projections: Optional[Iterable[nn.Linear]] = None
) -> GateHooks:
    """Attach head gates to a Hugging Face BERT-like model (chapter 11, "Gating a pretrained model").

    Returns a :class:`GateHooks`; set ``hooks.gates = g`` with ``g`` of shape ``(n_layers, n_heads)``
    before calling the model. ``n_heads`` defaults to ``model.config.num_attention_heads`` (or
    ``n_heads`` for DistilBERT). ``projections`` defaults to :func:`output_projections`.
    """
    if n_heads is None:
        cfg = getattr(model, "config", None)
        n_heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None)
        if n_heads is None:
            raise ValueError("could not read the number of heads from model.config; pass n_heads")
    projs = list(projections) if projections is not None else output_projections(model)
    return GateHooks(projs, int(n_heads))


# ----------------------------------------------------------------------------------------------------------
# Fine-tuning with gates (Voita et al.'s recipe), through the book's one training loop
# ----------------------------------------------------------------------------------------------------------


class Gated(nn.Module):
    """A model and its :class:`HeadGates` in one module, so that :func:`attnbook.train.train` optimises
    both (chapter 11). Freeze parts of ``model`` with ``requires_grad_(False)`` before training."""

    def __init__(self, model: nn.Module, gates: HeadGates) -> None:
        super().__init__()
        if not isinstance(gates, HeadGates):
            raise ValueError(f"gates must be a HeadGates, got {type(gates).__name__}")
        self.model, self.gates = model, gates


def train_gates(
    model: nn.Module,
    gates: HeadGates,
    task_loss: Callable[[nn.Module, Any, dict], torch.Tensor],
    data,
    *,
    lam: float,
    steps: int,
    lr: float = 1e-4,
    gate_lr: float = 0.05,
    reduction: str = "layer_mean",
    record_every: int = 10,
    **train_kwargs,
) -> dict:
    """Fine-tune ``model`` with hard-concrete head gates: minimise ``L_task + lam * L_C`` (chapter 11,
    eq. ``gate-objective``), with :func:`attnbook.train.train`.

    ``task_loss(model, batch, head_gates)`` runs the model with the gates (a dict from
    :meth:`HeadGates.forward`) and returns the task loss (cross-entropy for translation). The model's
    trainable parameters learn at ``lr``, the gates' ``log_alpha`` at ``gate_lr`` (Adam-type optimisers
    move a parameter by about its learning rate per step, and a gate must travel from +3 to below -2.4 to
    close). ``reduction``: see :func:`l0_penalty`. Every ``record_every`` steps the evaluation gates and
    ``P(g != 0)`` are stored. Extra keyword arguments go to :func:`attnbook.train.train` (e.g. ``seed``,
    ``progress``, ``clip``, ``schedule``, ``warmup``).

    Returns the training history with, in addition, ``"task_loss"`` and ``"penalty"`` per step and
    ``"snapshots"``: a list of ``{"step", "gates": {type: (L, H)}, "p_open": {type: (L, H)}}``.
    """
    from .train import train

    if not (isinstance(lam, (int, float)) and lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if not gate_lr > 0:
        raise ValueError(f"gate_lr must be positive, got {gate_lr}")
    if not isinstance(record_every, int) or record_every < 1:
        raise ValueError(f"record_every must be a positive int, got {record_every!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    wrapped = Gated(model, gates)
    task_losses: list[float] = []
    penalties: list[float] = []
    snapshots: list[dict] = []

    def snapshot(step: int) -> None:
        was = gates.training
        gates.eval()
        with torch.no_grad():
            g = {n: t.detach().clone() for n, t in gates().items()}
        gates.train(was)
        snapshots.append({"step": step, "gates": g, "p_open": gates.expected_open()})

    snapshot(0)

    def loss_fn(m: Gated, batch) -> torch.Tensor:
        task = task_loss(m.model, batch, m.gates())
        pen = m.gates.penalty(reduction)
        task_losses.append(float(task.detach()))
        penalties.append(float(pen.detach()))
        if len(task_losses) % record_every == 0:  # the gates before this step's update
            snapshot(len(task_losses) - 1)
        return task + lam * pen

    history = train(wrapped, data, loss_fn, steps=steps, lr=lr, lr_scale={"gates.": gate_lr / lr}, **train_kwargs)
    if snapshots[-1]["step"] != len(task_losses):
        snapshot(len(task_losses))
    history.update(task_loss=task_losses, penalty=penalties, snapshots=snapshots)
    gates.eval()
    return history
