"""``zgrad.autograd``: user-defined differentiable functions, gradients, gradient-mode switches and
``zgrad.autograd.functional`` (Jacobians, Hessians and their vector products)."""

from zgrad.autograd import functional
from zgrad.autograd.function import Function, FunctionCtx
from zgrad.autograd.gradients import backward, grad
from zgrad.engine.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["Function", "FunctionCtx", "backward", "enable_grad", "functional", "grad", "inference_mode", "is_grad_enabled",
           "no_grad", "set_grad_enabled"]
