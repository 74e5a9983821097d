"""``zgrad.autograd``: user-defined differentiable functions, gradients, gradient-mode switches,
gradient checks against finite differences and anomaly detection.

Its submodule ``zgrad.autograd.functional`` (Jacobians, Hessians and their vector products) is
built on the ops, which import this package, so ``zgrad``'s ``__init__`` binds it once the ops are loaded."""

from zgrad.autograd.anomaly_mode import detect_anomaly, set_detect_anomaly
from zgrad.autograd.function import Function, FunctionCtx
from zgrad.autograd.gradients import backward, grad
# Bound after its submodule is imported, the name is the function (the module stays in sys.modules), as in PyTorch.
from zgrad.autograd.gradcheck import gradcheck, gradgradcheck
from zgrad.autograd.variable import Variable
from zgrad.engine.grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

__all__ = ["Function", "FunctionCtx", "Variable", "backward", "detect_anomaly", "enable_grad", "grad", "gradcheck",
           "gradgradcheck", "inference_mode", "is_grad_enabled", "no_grad", "set_detect_anomaly", "set_grad_enabled"]
