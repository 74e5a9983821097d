"""The functions of the ops whose classes have no function beside them (``add``, ``matmul``,
``reshape``, ``cat``, ``softmax``, ...): each validates and normalizes its arguments, then applies
its op class.
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.errors import DTypeError, ShapeError, ZgradError
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.kernels.promotion import is_floating, result_type
from zgrad.ops._args import index_key as _index
from zgrad.ops._args import operand as _operand
from zgrad.ops._args import require_kinds as _require_kinds
from zgrad.ops._args import tensor_arg as _tensor
from zgrad.ops.rounding_division import rounded_division
from zgrad.ops.elementwise import Add, Cast, Div, Exp, Log, Mul, Neg, Pow, Relu, Sigmoid, Sub, Tanh, ToDevice
from zgrad.ops.linalg import Linear, MatMul
from zgrad.ops.loss import LogSoftmax, Softmax
from zgrad.ops.shape import Cat, GetItem, LaidOut, Permute, Reshape, Stack
from zgrad.memory_formats import contiguous_format, dim_order, preserve_format, preserved_order
from zgrad.tensor import Tensor, link_view
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out
from zgrad.warning_location import user_stacklevel

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "square", "matmul", "exp", "log", "tanh", "sigmoid", "relu",
    "reshape", "transpose", "permute", "getitem", "stack", "cat", "clone", "cast", "to_device",
    "softmax", "log_softmax", "linear", "addcmul", "addcdiv", "negative", "positive", "subtract", "multiply", "divide",
    "true_divide", "softmax_input",
]


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or (isinstance(x, Tensor) and x.dtype.kind == "b")


def _is_floating(x: Any) -> bool:
    return isinstance(x, float) or (isinstance(x, Tensor) and is_floating(x.dtype))


def _plus_scaled(op: type, input: Any, other: Any, alpha: Any) -> Any:  # noqa: A002 - torch's argument name
    """``op`` (Add or Sub) of ``input`` and ``alpha * other`` in the dtype of ``input`` and
    ``other`` (``alpha`` does not take part in the promotion), checked as PyTorch checks ``alpha``.

    Raises:
        DTypeError: a float alpha with integer operands, or a bool alpha with a non-bool result.
    """
    input, other = _operand(input), _operand(other)
    if isinstance(alpha, bool) and not (_is_bool(input) and _is_bool(other)):
        raise DTypeError("Boolean alpha only supported for Boolean results.")
    if isinstance(alpha, float) and not (_is_floating(input) or _is_floating(other)):
        raise DTypeError("For integral input tensors, argument alpha must not be a floating point number.")
    if alpha is True or (not isinstance(alpha, bool) and alpha == 1):
        return op.apply(input, other)
    out = op.apply(input, Mul.apply(other, alpha))
    dtype = result_type(*(x._data if isinstance(x, Tensor) else x for x in (input, other)))
    return out if out.dtype == dtype else cast(out, dtype)


@accepts_out()
def add(input: Any, other: Any, *, alpha: Any = 1) -> Any:  # noqa: A002 - torch's argument name
    """input + alpha * other, broadcast, in PyTorch's promoted dtype."""
    return _plus_scaled(Add, input, other, alpha)


@accepts_out()
def sub(input: Any, other: Any, *, alpha: Any = 1) -> Any:  # noqa: A002 - torch's argument name
    """input - alpha * other, broadcast, in PyTorch's promoted dtype.

    Raises:
        DTypeError: either operand is bool (PyTorch refuses; ``~``/``logical_not`` invert a mask).
    """
    refuse_bool_subtraction(input, other)
    return _plus_scaled(Sub, input, other, alpha)


def refuse_bool_subtraction(input: Any, other: Any) -> None:  # noqa: A002
    """Raise PyTorch's error where either operand of a subtraction is bool.

    Raises:
        DTypeError: ``input`` or ``other`` is a bool tensor or a Python bool.
    """
    if _is_bool(input) or _is_bool(other):
        raise DTypeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
                         "to invert a mask, use the `~` or `logical_not()` operator instead.")


@accepts_out()
def mul(a: Any, b: Any) -> Any:
    """a * b with broadcasting."""
    return Mul.apply(_operand(a), _operand(b))


@accepts_out()
def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Any:  # noqa: A002
    """input / other, broadcast: true division (integers give the default float dtype), or with
    ``rounding_mode`` "trunc" (toward zero) or "floor" the rounded quotient in the promoted dtype
    (integers stay integers), whose gradient is zero, as PyTorch's.

    Raises:
        ZgradError: another ``rounding_mode`` (PyTorch's message).
    """
    if rounding_mode is None:
        return Div.apply(_operand(input), _operand(other))
    if rounding_mode not in ("trunc", "floor"):
        raise ZgradError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"'{rounding_mode}'")
    return rounded_division(_operand(input), _operand(other), rounding_mode)


@accepts_out()
@autocast_op()
def pow(a: Any, b: Any) -> Any:  # noqa: A001 - mirrors torch.pow
    """a ** b with broadcasting."""
    return Pow.apply(_operand(a), _operand(b))


@accepts_out()
def square(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """input * input, element-wise (torch.square): ``input ** 2``, with its gradient ``2 input``."""
    return Pow.apply(_tensor(input, "square"), _operand(2))


@accepts_out("exact")
def neg(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """-input.

    Raises:
        DTypeError: a bool tensor (PyTorch refuses; ``~``/``logical_not`` invert a mask).
    """
    x = _tensor(input, "neg")
    if x.dtype.kind == "b":
        raise DTypeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                         "invert a mask, use the `~` or `logical_not()` operator instead.")
    return Neg.apply(x)


negative, subtract, multiply, divide, true_divide = neg, sub, mul, div, div


def positive(input: Any) -> Any:  # noqa: A002
    """``input`` itself (unary plus).

    Raises:
        RuntimeError: a bool tensor (PyTorch's message).
    """
    x = _tensor(input, "positive")
    if x.dtype.kind == "b":
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return x

_INTEGER_ADDCDIV = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
    "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
    "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
    "for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes.")


def _addc(name: str, input: Any, tensor1: Any, tensor2: Any, value: Any) -> tuple[Any, Any, Any, Any]:  # noqa: A002
    """The tensors of addcmul / addcdiv and ``value`` as the result's dtype takes it (an integer
    result truncates it, as PyTorch's kernels do).

    Raises:
        DTypeError: bool tensors throughout (PyTorch has no kernel for them).
    """
    x, t1, t2 = _tensor(input, name), _tensor(tensor1, name, "tensor1"), _tensor(tensor2, name, "tensor2")
    dtype = result_type(x._data, t1._data, t2._data)
    if dtype.kind == "b":
        raise DTypeError(f"\"{name}_cpu_out\" not implemented for 'Bool'")
    return x, t1, t2, value if is_floating(dtype) else int(value)


@accepts_out()
def addcmul(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:  # noqa: A002
    """input + value * tensor1 * tensor2, element-wise and broadcast, in the dtype the three
    tensors promote to.

    Raises:
        DTypeError: bool tensors.
    """
    x, t1, t2, value = _addc("addcmul", input, tensor1, tensor2, value)
    return add(x, mul(mul(t1, t2), value))


@accepts_out()
def addcdiv(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:  # noqa: A002
    """input + value * tensor1 / tensor2, element-wise and broadcast (true division).

    Raises:
        RuntimeError: tensor1 and tensor2 both integer (PyTorch's message).
    """
    x, t1, t2, value = _addc("addcdiv", input, tensor1, tensor2, value)
    if not (is_floating(t1.dtype) or is_floating(t2.dtype)):
        raise RuntimeError(_INTEGER_ADDCDIV)
    return add(x, mul(div(t1, t2), value))


@accepts_out("exact")
@autocast_op()
def matmul(a: Any, b: Any) -> Any:
    """Matrix product with numpy semantics: vectors, matrices and broadcast batches."""
    return MatMul.apply(_operand(a), _operand(b))


@accepts_out()
@autocast_op()
def exp(x: Any) -> Any:
    return Exp.apply(_tensor(x, "exp"))


@accepts_out()
@autocast_op()
def log(x: Any) -> Any:
    return Log.apply(_tensor(x, "log"))


@accepts_out()
def tanh(x: Any) -> Any:
    return Tanh.apply(_tensor(x, "tanh"))


@accepts_out()
def sigmoid(x: Any) -> Any:
    return Sigmoid.apply(_tensor(x, "sigmoid"))


def relu(input: Any) -> Any:  # noqa: A002 - torch's argument name
    """max(input, 0), in the input's dtype (integers too).

    Raises:
        DTypeError: a bool tensor (PyTorch refuses it too).
    """
    return Relu.apply(refuse_bool_relu(_tensor(input, "relu")))


def refuse_bool_relu(x: Any) -> Any:
    """``x``, unless a bool tensor (PyTorch refuses relu of bools).

    Raises:
        DTypeError: a bool tensor.
    """
    if x.dtype.kind == "b":
        raise DTypeError("Boolean inputs not supported for relu")
    return x


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
    if not isinstance(x, Tensor):
        _tensor(x, "getitem")  # raises
    if isinstance(index, (Tensor, tuple)):
        index = _index(index)
    grad_mode = is_grad_enabled()
    if grad_mode and x.requires_grad:
        return GetItem.apply(x, index)
    # Nothing to record: the result alone, without the backward node that would be most of the
    # cost (a data loader indexes its samples this way, tens of thousands of times an epoch).
    out = Tensor(GetItem.select(x._data, index))
    link_view(x, out, not grad_mode)
    return out


@accepts_out()
@autocast_op()
def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join same-shaped tensors along a new dimension."""
    if not isinstance(tensors, (list, tuple)):
        tensors = tuple(tensors)
    if not tensors:
        raise ShapeError("stack expects a non-empty TensorList")
    for t in tensors:
        if not isinstance(t, Tensor):
            _tensor(t, "stack")  # raises
    return Stack.apply(dim, *tensors)


@accepts_out()
@autocast_op()
def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Join tensors along an existing dimension."""
    if not isinstance(tensors, (list, tuple)):
        tensors = tuple(tensors)
    if not tensors:
        raise ShapeError("torch.cat(): expected a non-empty list of Tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            _tensor(t, "cat")  # raises
    return Cat.apply(dim, *tensors)


def cast(x: Any, dtype: Any) -> Any:
    return Cast.apply(_tensor(x, "cast"), np.dtype(dtype))


def to_device(x: Any, device_type: str) -> Any:
    """``x`` copied to ``device_type`` ("cpu" or "cuda"), differentiably."""
    return ToDevice.apply(_tensor(x, "to"), device_type)


def clone(x: Any, memory_format: Any = None) -> Any:
    """A differentiable copy of ``x``: C-contiguous (``memory_format`` None or contiguous_format),
    in the layout ``memory_format`` names (channels_last...), or with the order of dims of ``x``'s
    own layout where it is dense (``preserve_format``, PyTorch's default for ``Tensor.clone``)."""
    x = _tensor(x, "clone")
    if memory_format is None or memory_format is contiguous_format or \
            memory_format is preserve_format and x._data.flags.c_contiguous:
        return Cast.apply(x, x.dtype)
    if memory_format is preserve_format:
        order = preserved_order(x.shape, x.stride())
    else:
        order = dim_order(memory_format, x.ndim)
    return Cast.apply(x, x.dtype) if order == tuple(range(x.ndim)) else LaidOut.apply(x, order)


def softmax_input(name: str, input: Any, dim: int | None, dtype: Any) -> tuple[Any, int]:  # noqa: A002
    """The floating input of a softmax (cast to ``dtype`` first if given) and its dim; without a
    dim, PyTorch's legacy implicit choice (0 for 0, 1 and 3 dims, else 1) with its warning."""
    x = _tensor(input, name)
    if dtype is not None:
        x = cast(x, dtype)
    _require_kinds(x, name, "f")
    if dim is None:
        dim = 0 if x.ndim in (0, 1, 3) else 1
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                      f"dim=X as an argument.", UserWarning, stacklevel=user_stacklevel())
    return x, dim


@autocast_op()
def softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """exp(x) / sum(exp(x)) along ``dim``, computed in ``dtype`` if given (the input is cast first).

    Raises:
        DTypeError: a non-floating input without a floating ``dtype`` (PyTorch refuses it too).
    """
    x, dim = softmax_input("softmax", input, dim, dtype)
    return _along(Softmax, x, dim)


@autocast_op()
def log_softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """log(softmax(x)) along ``dim``, computed stably; ``dtype`` and errors as :func:`softmax`."""
    x, dim = softmax_input("log_softmax", input, dim, dtype)
    return _along(LogSoftmax, x, dim)


def _along(op: Any, x: Any, dim: int) -> Any:
    """``op`` along ``dim`` of ``x``; a 0-d ``x`` is one row of one element, as in PyTorch."""
    if x.ndim:
        return op.apply(x, dim)
    normalize_dim(dim, 0)
    return op.apply(x.reshape(1), 0).reshape(())


@autocast_op()
def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """x @ weight.T + bias."""
    args = (_tensor(x, "linear"), _tensor(weight, "linear"))
    return Linear.apply(*args) if bias is None else Linear.apply(*args, _tensor(bias, "linear"))
