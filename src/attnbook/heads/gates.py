"""Hard-concrete head gates and their expected-L0 penalty (chapter "Pruning heads").

Voita et al. (2019) put a scalar gate ``g_h`` on the output of every attention head and learn which
heads can be closed with a relaxation of the L0 norm, the *hard-concrete* distribution of Louizos et al.
(2018). With a learned ``log_alpha`` per head, temperature ``beta = 0.33`` and stretch ``(l, r) =
(-0.1, 1.1)`` (the values of the official code, ``lib/layers/concrete_gate.py``):

* sample (eq. ``hard-concrete``):
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
:func:`attnbook.hf.attach_head_gates`. The fine-tuning recipe is :mod:`attnbook.heads.gate_training`.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence, Union

import torch
from torch import nn

from attnbook.heads.masks import as_head_mask, check_shape

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
    """Draw one hard-concrete gate per entry of ``log_alpha`` (eq. ``hard-concrete``).

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
    """The evaluation gate ``clip(sigmoid(log_alpha) (r-l) + l, 0, 1)`` (chapter "Pruning heads"; official code).

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
    (eq. ``p-closed``)."""
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
    (eq. ``p-closed``; same derivation as :func:`prob_nonzero` at the upper clip point)."""
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
    """The expected-L0 penalty ``L_C`` of eq. ``gate-objective``.

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
    return as_head_mask(x, what="log_alpha")


class HeadGates(nn.Module):
    """Learnable hard-concrete gates for groups of heads (chapter "Pruning heads").

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
            shape = check_shape(name, shape)
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
