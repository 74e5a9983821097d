"""Activations of ``zgrad.nn.functional`` written with exp, log, sigmoid, tanh and softmax:
``selu``, ``celu``, ``glu``, ``logsigmoid``, ``softsign``, ``tanhshrink`` and ``softmin``, each
with PyTorch's formula (and so its gradient)."""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.ops._args import require_kinds, tensor_arg
from zgrad.ops.activation_piecewise import apply_inplace
from zgrad.ops.functions import softmax_input

__all__ = ["SELU_ALPHA", "SELU_SCALE", "celu", "glu", "logsigmoid", "selu", "softmin", "softsign", "tanhshrink"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _elu(x: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """PyTorch's elu kernel: x * scale where x > 0, else (exp(x * input_scale) - 1) * alpha * scale;
    exp reads min(x, 0), so a large x gives no inf (whose zero gradient would turn into NaN)."""
    negative = (ops.exp(ops.clamp(x, max=0) * input_scale) - 1) * (alpha * scale)
    return ops.where(x > 0, x * scale, negative)


def selu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """SELU_SCALE * (max(0, x) + min(0, SELU_ALPHA * (exp(x) - 1))), as
    ``torch.nn.functional.selu``; ``inplace`` writes into ``input``.

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "selu"), "elu", "f")
    return apply_inplace(x, lambda t: _elu(t, SELU_ALPHA, SELU_SCALE, 1.0), inplace)


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)), as ``torch.nn.functional.celu``;
    ``inplace`` writes into ``input``.

    Raises:
        RuntimeError: ``alpha`` = 0 (PyTorch's message). DTypeError: a non-floating input.
    """
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    x = require_kinds(tensor_arg(input, "celu"), "elu", "f")
    alpha = float(alpha)
    return apply_inplace(x, lambda t: _elu(t, alpha, 1.0, 1.0 / alpha), inplace)


def glu(input: Any, dim: int = -1) -> Any:  # noqa: A002
    """a * sigmoid(b), a and b the first and second halves of ``input`` along ``dim``, as
    ``torch.nn.functional.glu``.

    Raises:
        RuntimeError: a 0-d input, or an odd size along ``dim`` (PyTorch's messages).
        IndexError: ``dim`` out of range. DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "glu"), "glu", "f")
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if not -x.ndim <= dim < x.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], "
                         f"but got {dim})")
    size = x.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % x.ndim} is size {size}")
    first, second = ops.narrow(x, dim, 0, size // 2), ops.narrow(x, dim, size // 2, size // 2)
    return first * ops.sigmoid(second)


def logsigmoid(input: Any) -> Any:  # noqa: A002
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), as ``torch.nn.functional.logsigmoid``; each
    branch's exp reads a non-positive number, so nothing overflows.

    Raises:
        DTypeError: a non-floating input.
    """
    x = require_kinds(tensor_arg(input, "logsigmoid"), "log_sigmoid", "f")
    negative = ops.clamp(x, max=0)
    positive = ops.clamp(x, min=0)
    return ops.where(x < 0, negative - ops.log1p(ops.exp(negative)), -ops.log1p(ops.exp(-positive)))


def softsign(input: Any) -> Any:  # noqa: A002
    """x / (|x| + 1), as ``torch.nn.functional.softsign``.

    Raises:
        TypeError: a non-tensor input.
    """
    x = tensor_arg(input, "softsign")
    return x / (ops.abs(x) + 1)


def tanhshrink(input: Any) -> Any:  # noqa: A002
    """x - tanh(x), as ``torch.nn.functional.tanhshrink``.

    Raises:
        TypeError: a non-tensor input.
    """
    x = tensor_arg(input, "tanhshrink")
    return x - ops.tanh(x)


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Any:  # noqa: A002
    """softmax(-x) along ``dim`` (in ``dtype`` if given), as ``torch.nn.functional.softmin``;
    without a dim, PyTorch's legacy implicit choice (0 for 0, 1 and 3 dims, else 1) with its warning.

    Raises:
        DTypeError: a non-floating input without a floating ``dtype``.
    """
    x, dim = softmax_input("softmin", input, dim, dtype)
    return ops.softmax(-x, dim)
