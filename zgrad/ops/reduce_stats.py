"""Reductions over several dimensions beside sum and mean: amax, amin, aminmax, nanmean,
var_mean, std_mean.

amax/amin keep the input's dtype and split the gradient evenly among the elements that tie for
the extreme (unlike ``max(dim)``, which gives it to one index), as PyTorch's.
"""

from __future__ import annotations

from typing import Any

from zgrad import return_types
from zgrad.autograd.function import Op
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_pointwise, dispatch_reduce
from zgrad.kernels.dispatch import _reduced_shape, scalar_type_name
from zgrad.ops._args import tensor_arg
from zgrad.ops.reduce import _all_if_empty, _cast, mean, nansum, std, sum, var
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating
from zgrad.ops.out_argument import accepts_out

__all__ = ["amax", "amin", "aminmax", "nanmean", "var_mean", "std_mean"]


def _extreme_slices(x, dim, name):
    """``x`` (an array) as rows over ``dim``.

    Raises:
        RuntimeError: an empty input reduced over all dimensions. IndexError: a dimension reduced
            over is of size 0 (PyTorch's messages, for op ``name``).
    """
    rows = dispatch_reduce.to_rows(x, dim, floating=False)
    if rows.rows.shape[1] == 0:
        if dim is None:
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                               "Specify the reduction dim with the 'dim' argument.")
        empty = next(d for d in rows.axes if x.shape[d] == 0)
        raise IndexError(f"{name}(): Expected reduction dim {empty} to have non-zero size.")
    return rows


def _share_among_ties(x, values, grad, axes):
    """The gradient of an extreme ``values`` of ``x`` over ``axes``: ``grad`` split evenly among the
    elements equal to the extreme of their slice (NaN where the extreme is a NaN)."""
    kept = _reduced_shape(x.shape, axes, True)
    ties = dispatch_pointwise.compare("eq", x, values.reshape(kept))
    share = dispatch.binary("div", grad.reshape(kept), dispatch.reduce_sum(ties, axes, True))
    return dispatch.binary("mul", share, ties, dtype=grad.dtype)


class AMax(Op):
    """The max (``largest``) or min over ``dim``; the gradient is split evenly among the elements
    equal to the extreme of their slice (NaN where the extreme is a NaN, as PyTorch's)."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, largest, name):
        rows = _extreme_slices(x, dim, name)
        values = dispatch_reduce.extreme_rows(rows.rows, largest).reshape(_reduced_shape(x.shape, rows.axes, keepdim))
        ctx.axes = rows.axes
        ctx.save_for_backward(x, values)
        return values

    @staticmethod
    def backward(ctx, grad):
        x, values = ctx.saved_tensors
        return _share_among_ties(x, values, grad, ctx.axes), None, None, None, None


class AMinMax(Op):
    """The min and the max over ``dim`` in one pass; each one's gradient as :class:`AMax`'s."""

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        rows = _extreme_slices(x, dim, "aminmax")
        shape = _reduced_shape(x.shape, rows.axes, keepdim)
        smallest, largest = (values.reshape(shape) for values in dispatch_reduce.extremes_rows(rows.rows))
        ctx.axes = rows.axes
        ctx.save_for_backward(x, smallest, largest)
        return smallest, largest

    @staticmethod
    def backward(ctx, grad_min, grad_max):
        x, smallest, largest = ctx.saved_tensors
        grad = dispatch.binary("add", _share_among_ties(x, smallest, grad_min, ctx.axes),
                               _share_among_ties(x, largest, grad_max, ctx.axes))
        return grad, None, None


@accepts_out("exact")
def amax(input: Any, dim: Any = (), keepdim: bool = False) -> Any:  # noqa: A002
    """The largest element over ``dim`` (an int or a tuple; empty for all), in the input's dtype;
    NaN where a slice holds one. The gradient is split evenly among the elements that tie.

    Raises:
        RuntimeError: an empty input reduced over all dimensions. IndexError: ``dim`` is out of
            range or of size 0 (PyTorch's messages).
    """
    return AMax.apply(tensor_arg(input, "amax"), _all_if_empty(dim), keepdim, True, "amax")


@accepts_out("exact")
def amin(input: Any, dim: Any = (), keepdim: bool = False) -> Any:  # noqa: A002
    """The smallest element over ``dim`` (see :func:`amax`)."""
    return AMax.apply(tensor_arg(input, "amin"), _all_if_empty(dim), keepdim, False, "amin")


@accepts_out("exact")
def aminmax(input: Any, *, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """``(min, max)``: :func:`amin` and :func:`amax` over the one dimension ``dim`` (all when None).

    Raises:
        RuntimeError: an empty input reduced over all dimensions. IndexError: ``dim`` is out of
            range or of size 0 (PyTorch's messages).
    """
    x = tensor_arg(input, "aminmax")
    if x.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.")
    if dim is not None and x.ndim and x.shape[dispatch_index.normalize_dim(dim, x.ndim)] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {dispatch_index.normalize_dim(dim, x.ndim)} to have non-zero size.")
    return return_types.aminmax(*AMinMax.apply(x, dim, keepdim))


@accepts_out()
def nanmean(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A002
    """The mean over ``dim`` (an int, a tuple, or None for all) of the elements that are not NaN
    (NaN where all are); their gradient is zero. ``dtype`` casts the input first.

    Raises:
        DTypeError: a non-floating input without a floating ``dtype`` (PyTorch's message).
    """
    x = _cast(input, dtype, "nanmean")
    if not is_floating(x.dtype):
        raise DTypeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                         f"{scalar_type_name(x.dtype)}")
    counted = Tensor(dispatch_pointwise.compare("eq", x._data, x._data))
    return nansum(x, dim, keepdim) / sum(counted, dim, keepdim)


def _mean_dim(name: str, input: Any, dim: Any) -> Any:  # noqa: A002
    """The ``dim`` of the mean beside a variance.

    Raises:
        DTypeError: ``input`` is not floating (PyTorch's message).
    """
    if not is_floating(tensor_arg(input, name).dtype):
        raise DTypeError(f"{name} only support floating point and complex dtypes")
    return None if isinstance(dim, bool) else dim  # var(input, unbiased): the legacy positional form


def var_mean(input: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
             correction: float | None = None) -> tuple[Any, Any]:
    """``(var, mean)`` over ``dim``: :func:`~zgrad.ops.reduce.var` (same arguments) and the mean.

    Raises:
        DTypeError: a non-floating input (PyTorch's message).
    """
    dim_of_mean = _mean_dim("var_mean", input, dim)
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim_of_mean, keepdim)


def std_mean(input: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
             correction: float | None = None) -> tuple[Any, Any]:
    """``(std, mean)`` over ``dim``: :func:`~zgrad.ops.reduce.std` (same arguments) and the mean.

    Raises:
        DTypeError: a non-floating input (PyTorch's message).
    """
    dim_of_mean = _mean_dim("std_mean", input, dim)
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim_of_mean, keepdim)
