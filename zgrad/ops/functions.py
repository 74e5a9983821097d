"""The functions of the ops whose classes have no function beside them (``add``, ``matmul``,
``reshape``, ``cat``, ``softmax``, ...): each validates and normalizes its arguments, then applies
its op class.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.errors import ShapeError
from zgrad.ops._args import index_key as _index
from zgrad.ops._args import operand as _operand
from zgrad.ops._args import tensor_arg as _tensor
from zgrad.ops.elementwise import Add, Cast, Div, Exp, Log, Mul, Neg, Pow, Relu, Sigmoid, Sub, Tanh, ToDevice
from zgrad.ops.linalg import Linear, MatMul
from zgrad.ops.loss import LogSoftmax, Softmax
from zgrad.ops.shape import Cat, GetItem, Permute, Reshape, Stack
from zgrad.tensor import Tensor

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "square", "matmul", "exp", "log", "tanh", "sigmoid", "relu",
    "reshape", "transpose", "permute", "getitem", "stack", "cat", "clone", "cast", "to_device",
    "softmax", "log_softmax", "linear",
]


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


def square(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """input * input, element-wise (torch.square): ``input ** 2``, with its gradient ``2 input``."""
    return Pow.apply(_tensor(input, "square"), _operand(2))


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


def getitem(x: Any, index: Any) -> Any:
    """Indexing and slicing, ``x[index]`` (basic slicing, integers, and integer arrays)."""
    x, index = _tensor(x, "getitem"), _index(index)
    if x.requires_grad and is_grad_enabled():
        return GetItem.apply(x, index)
    # Nothing to record: the result alone, without the backward node that would be most of the
    # cost (a data loader indexes its samples this way, tens of thousands of times an epoch).
    return Tensor(GetItem.select(x._data, index))


def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join same-shaped tensors along a new dimension."""
    if not tensors:
        raise ShapeError("stack expects a non-empty TensorList")
    return Stack.apply(dim, *(_tensor(t, "stack") for t in tensors))


def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join tensors along an existing dimension."""
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    return Cat.apply(dim, *(_tensor(t, "cat") for t in tensors))


def cast(x: Any, dtype: Any) -> Any:
    return Cast.apply(_tensor(x, "cast"), np.dtype(dtype))


def to_device(x: Any, device_type: str) -> Any:
    """``x`` copied to ``device_type`` ("cpu" or "cuda"), differentiably."""
    return ToDevice.apply(_tensor(x, "to"), device_type)


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
