"""``zgrad.autograd``: user-defined differentiable functions, gradients and gradient-mode switches.

Its submodule ``zgrad.autograd.functional`` (Jacobians, Hessians and their vector products) is
built on the ops, which import this package, so ``zgrad``'s ``__init__`` binds it once the ops are loaded."""

from zgrad.autograd.function import Function, FunctionCtx
from zgrad.autograd.gradients import backward, grad
from zgrad.autograd.variable import Variable
from zgrad.engine.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["Function", "FunctionCtx", "Variable", "backward", "enable_grad", "grad", "inference_mode", "is_grad_enabled",
           "no_grad", "set_grad_enabled"]
