"""Adam, PyTorch's update rule (L2 weight decay, optional AMSGrad), on one fused kernel."""

from __future__ import annotations

from typing import Any, Iterable

from zgrad.kernels import dispatch
from zgrad.optim.optimizer import Optimizer
from zgrad.tensor import Tensor

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam as in ``torch.optim.Adam`` (not AdamW: weight decay is added to the gradient)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False) -> None:
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        if weight_decay < 0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))

    def _update(self, param: Tensor, grad: Any, group: dict[str, Any], state: dict[str, Any]) -> None:
        device = dispatch.device_type_of(param._data)
        if not state:
            state["step"] = 0
            state["exp_avg"] = dispatch.full(param.shape, 0, param.dtype, device)
            state["exp_avg_sq"] = dispatch.full(param.shape, 0, param.dtype, device)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = dispatch.full(param.shape, 0, param.dtype, device)
        state["step"] += 1
        beta1, beta2 = group["betas"]
        # without AMSGrad the kernel reads no maximum, and PyTorch's state has none
        max_exp_avg_sq = state["max_exp_avg_sq"] if group["amsgrad"] else dispatch.empty((0,), param.dtype, device)
        dispatch.backend_of(param._data).adam_step(
            param._data, grad, state["exp_avg"], state["exp_avg_sq"], max_exp_avg_sq, state["step"],
            float(group["lr"]), float(beta1), float(beta2), float(group["eps"]), float(group["weight_decay"]),
            bool(group["amsgrad"]),
        )
