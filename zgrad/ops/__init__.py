"""Differentiable functions on tensors (``zgrad.add``, ``zgrad.matmul``, ...).

Each function validates and normalizes its arguments, then applies one op class from the
modules beside this one.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from zgrad.ops.elementwise import Add, Cast, Div, Exp, Log, Mul, Neg, Pow, Relu, Sigmoid, Sub, Tanh
from zgrad.ops.linalg import Linear, MatMul
from zgrad.ops.loss import CrossEntropy, LogSoftmax, MseLoss, Softmax
from zgrad.ops.shape import Cat, GetItem, Mean, Permute, Reshape, Stack, Sum

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "exp", "log", "tanh", "sigmoid", "relu",
    "sum", "mean", "reshape", "transpose", "permute", "getitem", "stack", "cat", "clone", "cast",
    "softmax", "log_softmax", "linear", "cross_entropy", "mse_loss",
]


def _operand(x: Any) -> Any:
    """A tensor, a Python scalar, or an array constant; numpy scalars become Python scalars."""
    from zgrad.tensor import Tensor

    if isinstance(x, np.generic):  # checked first: np.float64 is also a Python float
        return x.item()
    if isinstance(x, (Tensor, bool, int, float)):
        return x
    if isinstance(x, np.ndarray):
        return Tensor(x)
    if isinstance(x, (list, tuple)):
        return Tensor(np.asarray(x))
    raise TypeError(f"unsupported operand of type {type(x).__name__}; expected a Tensor, a number or an array")


def _tensor(x: Any, what: str) -> Any:
    from zgrad.tensor import Tensor

    if not isinstance(x, Tensor):
        raise TypeError(f"{what} expects a Tensor, got {type(x).__name__}")
    return x


def add(a: Any, b: Any) -> Any:
    """a + b with broadcasting."""
    return Add.apply(_operand(a), _operand(b))


def sub(a: Any, b: Any) -> Any:
    """a - b with broadcasting."""
    return Sub.apply(_operand(a), _operand(b))


def mul(a: Any, b: Any) -> Any:
    """a * b with broadcasting."""
    return Mul.apply(_operand(a), _operand(b))


def div(a: Any, b: Any) -> Any:
    """a / b with broadcasting (true division)."""
    return Div.apply(_operand(a), _operand(b))


def pow(a: Any, b: Any) -> Any:  # noqa: A001 - mirrors torch.pow
    """a ** b with broadcasting."""
    return Pow.apply(_operand(a), _operand(b))


def neg(x: Any) -> Any:
    return Neg.apply(_tensor(x, "neg"))


def matmul(a: Any, b: Any) -> Any:
    """Matrix product with numpy semantics: vectors, matrices and broadcast batches."""
    return MatMul.apply(_operand(a), _operand(b))


def exp(x: Any) -> Any:
    return Exp.apply(_tensor(x, "exp"))


def log(x: Any) -> Any:
    return Log.apply(_tensor(x, "log"))


def tanh(x: Any) -> Any:
    return Tanh.apply(_tensor(x, "tanh"))


def sigmoid(x: Any) -> Any:
    return Sigmoid.apply(_tensor(x, "sigmoid"))


def relu(x: Any) -> Any:
    return Relu.apply(_tensor(x, "relu"))


def sum(x: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001 - mirrors torch.sum
    """Sum over ``dim`` (an int, a tuple, or None for all)."""
    return Sum.apply(_tensor(x, "sum"), dim, keepdim)


def mean(x: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Mean over ``dim`` (an int, a tuple, or None for all)."""
    return Mean.apply(_tensor(x, "mean"), dim, keepdim)


def reshape(x: Any, shape: Sequence[int]) -> Any:
    return Reshape.apply(_tensor(x, "reshape"), tuple(shape))


def permute(x: Any, dims: Sequence[int]) -> Any:
    return Permute.apply(_tensor(x, "permute"), tuple(dims))


def transpose(x: Any, dim0: int, dim1: int) -> Any:
    """Swap two dimensions."""
    x = _tensor(x, "transpose")
    n = builtins.max(x.ndim, 1)
    for d in (dim0, dim1):
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    dims = list(range(x.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return Permute.apply(x, tuple(dims))


def _index(index: Any) -> Any:
    from zgrad.tensor import Tensor

    if isinstance(index, Tensor):
        return index.numpy()
    if isinstance(index, tuple):
        return tuple(_index(i) for i in index)
    return index


def getitem(x: Any, index: Any) -> Any:
    """Indexing and slicing, ``x[index]`` (basic slicing, integers, and integer arrays)."""
    return GetItem.apply(_tensor(x, "getitem"), _index(index))


def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join same-shaped tensors along a new dimension."""
    if not tensors:
        raise ValueError("stack expects a non-empty sequence of tensors")
    return Stack.apply(dim, *(_tensor(t, "stack") for t in tensors))


def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join tensors along an existing dimension."""
    if not tensors:
        raise ValueError("cat expects a non-empty sequence of tensors")
    return Cat.apply(dim, *(_tensor(t, "cat") for t in tensors))


def cast(x: Any, dtype: Any) -> Any:
    return Cast.apply(_tensor(x, "cast"), np.dtype(dtype))


def clone(x: Any) -> Any:
    return Cast.apply(_tensor(x, "clone"), x.dtype)


def softmax(x: Any, dim: int = -1) -> Any:
    return Softmax.apply(_tensor(x, "softmax"), dim)


def log_softmax(x: Any, dim: int = -1) -> Any:
    return LogSoftmax.apply(_tensor(x, "log_softmax"), dim)


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """x @ weight.T + bias."""
    args = (_tensor(x, "linear"), _tensor(weight, "linear"))
    return Linear.apply(*args) if bias is None else Linear.apply(*args, _tensor(bias, "linear"))


def cross_entropy(logits: Any, targets: Any) -> Any:
    """Mean cross-entropy of (N, C) logits against (N,) integer class targets."""
    return CrossEntropy.apply(_tensor(logits, "cross_entropy"), _operand(targets))


def mse_loss(input: Any, target: Any) -> Any:  # noqa: A002 - mirrors torch's argument name
    """Mean squared error; tensors of different shapes are broadcast first."""
    input, target = _operand(input), _operand(target)
    if input.shape != target.shape:
        diff = sub(input, target)
        return mean(mul(diff, diff))
    return MseLoss.apply(input, target)
