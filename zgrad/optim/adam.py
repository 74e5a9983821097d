"""Adam, PyTorch's update rule (L2 or decoupled weight decay, AMSGrad), on one fused kernel."""

from __future__ import annotations

import functools
from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim._state import full_like, unused
from zgrad.optim.optimizer import Optimizer, check_betas, check_non_negative
from zgrad.tensor import Tensor

__all__ = ["Adam"]


_AMSGRAD = 5  # where Adam._options puts amsgrad among the kernels' arguments


@functools.cache
def _takes_groups(backend: Any) -> bool:
    """Whether ``backend`` steps a group of parameters at once (``adam_steps``)."""
    return hasattr(backend, "adam_steps")


class Adam(Optimizer):
    """Adam as ``torch.optim.Adam``: weight decay is added to the gradient (L2), unless
    ``decoupled_weight_decay=True``, which makes it :class:`~zgrad.optim.AdamW`.

    State: ``step`` (an int), ``exp_avg``, ``exp_avg_sq``, and ``max_exp_avg_sq`` with AMSGrad.
    ``maximize`` ascends the objective. ``foreach``, ``capturable`` and ``fused`` are accepted and
    change nothing (one fused kernel per parameter; on CUDA one per group of up to eight parameters
    at the same step, as PyTorch's foreach path); ``differentiable=True`` raises
    NotImplementedError.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside [0, 1)
            (PyTorch's messages).
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        check_non_negative(lr=lr, eps=eps)
        check_betas(betas)
        check_non_negative(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _prepare(self, param: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        """Make the parameter's state on its first step; count the step."""
        if not state:
            state.update(step=0, exp_avg=full_like(param), exp_avg_sq=full_like(param))
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = full_like(param)
        state["step"] += 1

    def _options(self, group: dict[str, Any]) -> tuple:
        """The kernels' arguments after the step: lr, beta1, beta2, eps, weight_decay, amsgrad,
        maximize, decoupled_weight_decay."""
        beta1, beta2 = group["betas"]
        return (float(group["lr"]), float(beta1), float(beta2), float(group["eps"]), float(group["weight_decay"]),
                bool(group["amsgrad"]), bool(group["maximize"]), bool(group["decoupled_weight_decay"]))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        self._prepare(param, group, state)
        self._step_one(dispatch.backend_of(param._data), param, grad, state, self._options(group))

    def _step_one(self, be: Any, param: Tensor, grad: Any, state: dict[str, Any], options: tuple) -> None:
        amsgrad = options[_AMSGRAD]
        be.adam_step(
            param._data, grad, state["exp_avg"], state["exp_avg_sq"],
            state["max_exp_avg_sq"] if amsgrad else unused(param), state["step"], *options)

    def _update_group(self, group: dict[str, Any], updates: list[tuple[Tensor, Any, dict[str, Any]]]) -> None:
        """Parameters on one backend with ``adam_steps`` (CUDA), of one dtype and at one step,
        take one call (a launch per group of tensors there); the others one kernel each."""
        options = self._options(group)
        together: dict[tuple, list] = {}
        for param, grad, state in updates:
            self._prepare(param, group, state)
            be = dispatch.backend_of(param._data)
            if _takes_groups(be):
                together.setdefault((be, param.dtype, state["step"]), []).append((param, grad, state))
            else:
                self._step_one(be, param, grad, state, options)
        amsgrad = options[_AMSGRAD]
        for (be, _, step), members in together.items():
            be.adam_steps([p._data for p, _, _ in members], [g for _, g, _ in members],
                          [s["exp_avg"] for _, _, s in members], [s["exp_avg_sq"] for _, _, s in members],
                          [s["max_exp_avg_sq"] if amsgrad else unused(p) for p, _, s in members], step, *options)
