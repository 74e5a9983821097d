"""Copies of a tensor with another written into one of its views: slice_scatter, select_scatter
and diagonal_scatter (the out-of-place forms of writing through ``narrow``/slicing, ``select``
and ``diagonal``).
"""

from __future__ import annotations

from typing import Any, Callable

from zgrad.autograd.function import Op
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_pointwise
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import tensor_arg
from zgrad.ops.layout import select_index
from zgrad.ops.triangular import matrix_dims

__all__ = ["slice_scatter", "select_scatter", "diagonal_scatter"]


class ScatterView(Op):
    """A copy of ``x`` with ``src`` (cast to its dtype) written into the view ``place`` takes of
    it; the gradient of ``x`` is the incoming one with that view zeroed, that of ``src`` the view."""

    @staticmethod
    def forward(ctx, x, src, place):
        ctx.place, ctx.src_dtype = place, src.dtype
        out = dispatch.cast(x, x.dtype)
        target = place(out)
        if target.shape != src.shape:
            raise ShapeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                             f"slice size = {list(target.shape)}")
        dispatch.copy_into(target, src)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad_x = grad_src = None
        if ctx.needs_input_grad[0]:
            grad_x = dispatch.cast(grad, grad.dtype)
            dispatch_pointwise.write(ctx.place(grad_x), 0)
        if ctx.needs_input_grad[1]:
            grad_src = dispatch.as_dtype(ctx.place(grad), ctx.src_dtype)
        return grad_x, grad_src, None


def _scattered(input: Any, src: Any, place: Callable[[Any], Any], what: str) -> Any:  # noqa: A002
    return ScatterView.apply(tensor_arg(input, what), tensor_arg(src, what, "src"), place)


def slice_scatter(input: Any, src: Any, dim: int = 0, start: int | None = None,  # noqa: A002
                  end: int | None = None, step: int = 1) -> Any:
    """A copy of ``input`` with ``src`` written into its slice ``start:end:step`` of dim ``dim``.

    Raises:
        ShapeError: ``src`` is not of the slice's shape, or ``step`` is below 1.
        IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "slice_scatter")
    if step < 1:
        raise ShapeError("slice step must be positive")
    index = (slice(None),) * normalize_dim(dim, x.ndim) + (slice(start, end, step),)
    return _scattered(x, src, lambda a: a[index], "slice_scatter")


def select_scatter(input: Any, src: Any, dim: int, index: int) -> Any:  # noqa: A002
    """A copy of ``input`` with ``src`` written at position ``index`` of dim ``dim`` (``src`` has
    the shape of ``input`` without that dim).

    Raises:
        ShapeError: ``src`` is not of that shape. IndexError: ``dim`` or ``index`` is out of range.
    """
    x = tensor_arg(input, "select_scatter")
    at = select_index(x.shape, dim, index)
    return _scattered(x, src, lambda a: a[at], "select_scatter")


def diagonal_scatter(input: Any, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:  # noqa: A002
    """A copy of ``input`` with ``src`` written on the ``offset``-th diagonal of its matrices in
    dims ``dim1``, ``dim2`` (``src`` has the shape ``diagonal`` would give).

    Raises:
        ShapeError: ``src`` is not of that shape, or the dims are the same.
        IndexError: a dim is out of range.
    """
    x = tensor_arg(input, "diagonal_scatter")
    d1, d2 = matrix_dims(dim1, dim2, x.ndim)
    return _scattered(x, src, lambda a: dispatch_index.diagonal_view(a, offset, d1, d2), "diagonal_scatter")
