"""Adafactor, PyTorch's update rule, composed of zgrad tensor ops (its factored second moment
needs row and column reductions, which an element-wise kernel cannot do)."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from zgrad.engine.grad_mode import no_grad
from zgrad.kernels import dispatch
from zgrad.optim.optimizer import Optimizer
from zgrad.tensor import Tensor

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor as ``torch.optim.Adafactor``: a second moment stored as row and column factors
    for parameters of two or more dimensions (over the last two), a relative step size, and
    update clipping.

    At step t, with G = ±grad: beta2_t = 1 - t**beta2_decay; rho_t = min(lr, 1/sqrt(t));
    alpha_t = max(eps2, RMS(p)) * rho_t; p *= 1 - lr*weight_decay. For a parameter of 2+
    dimensions the row factor R lerps towards the mean of G² over the last dimension and the
    column factor C towards its mean over the one before, both with weight 1 - beta2_t, and
    V = R C / max(mean(R), eps1); otherwise V lerps towards G² itself. U = G / sqrt(max(V, eps1²)),
    and p -= alpha_t * U / max(1, RMS(U)/d). ``eps1=None`` takes the machine epsilon of the
    dtype of the group's first parameter with a gradient (for the whole group, as PyTorch does).

    Unlike the other optimizers here, the step is not one fused kernel: it runs zgrad tensor ops
    (norms over rows and columns, an outer product, lerps) under ``no_grad`` on the parameter's
    device, in PyTorch's order. State: ``step`` (an int), and ``row_var`` (the parameter's shape
    with the last dimension 1) and ``col_var`` (with the one before it 1), or ``variance`` (the
    parameter's shape) for parameters of fewer than two dimensions. ``foreach`` is accepted and
    changes nothing (PyTorch's default single-tensor algorithm runs either way).

    Raises:
        ValueError: a negative ``lr``, ``eps1``, ``eps2`` or ``weight_decay``, a positive
            ``beta2_decay``, or ``d`` below 1 (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _state_shape(self, param: Tensor, name: str) -> tuple[int, ...] | None:
        """The factors' shapes: the parameter's with its last (``row_var``) or next-to-last
        (``col_var``) dimension 1."""
        shape = list(param.shape)
        if name in ("row_var", "col_var") and len(shape) > 1:
            shape[-1 if name == "row_var" else -2] = 1
        return tuple(shape)

    def _update_group(self, group: dict[str, Any], updates: list[tuple[Tensor, Any, dict[str, Any]]]) -> None:
        eps1, eps2 = group["eps"]
        with no_grad():
            for param, grad, state in updates:
                if eps1 is None:
                    eps1 = float(np.finfo(param.dtype).eps)
                self._step_one(param, grad, group, state, float(eps1), float(eps2))

    def _step_one(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any], eps1: float,
                  eps2: float) -> None:
        """One step of ``param`` (its raw array updated in place through a tensor sharing it)."""
        p, g = Tensor(param._data), Tensor(grad)
        if group["maximize"]:
            g = -g
        if not state:
            state["step"] = 0
            state.update({name: self._zeros(param, name) for name in
                          (("row_var", "col_var") if g.dim() > 1 else ("variance",))})
        state["step"] += 1
        step = state["step"]
        lr = float(group["lr"])
        weight = step ** float(group["beta2_decay"])  # 1 - beta2_t
        rho = min(lr, 1 / (step**0.5))
        alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * rho
        weight_decay = float(group["weight_decay"])
        if weight_decay != 0:
            p.mul_(1 - lr * weight_decay)
        if g.dim() > 1:
            row_var, col_var = Tensor(state["row_var"]), Tensor(state["col_var"])
            row_var.lerp_(g.norm(dim=-1, keepdim=True).square_().div_(g.size(-1)), weight)
            col_var.lerp_(g.norm(dim=-2, keepdim=True).square_().div_(g.size(-2)), weight)
            variance = row_var @ col_var
            variance.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
        else:
            variance = Tensor(state["variance"])
            variance.lerp_(g * g, weight)
            variance = variance.clone()
        update = variance.clamp_(min=eps1 * eps1).rsqrt_().mul_(g)
        clip = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * float(group["d"])))
        p.add_(update, alpha=-alpha / clip)

    def _zeros(self, param: Tensor, name: str) -> Any:
        return dispatch.full(self._state_shape(param, name), 0, param.dtype, dispatch.device_type_of(param._data))
