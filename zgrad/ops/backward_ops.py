"""Ops that exist for backward formulas recorded in a pass with ``create_graph=True``.

Such a pass hands each op's ``backward`` tensors (see :mod:`zgrad.autograd.function`); these ops
record the pieces of a formula that are not ordinary arithmetic:

- :func:`piecewise_constant`: a factor that depends on an input with derivative 0 (a mask, a
  sign), which keeps the input on the graph so that it gets a zero gradient, as from PyTorch.
- :func:`linear_in_grad`: a map linear in the gradient (a pooling's, a gather's or an
  embedding's backward) with its adjoint, the map's own backward: differentiable any number of
  times, the two maps trading places at each derivative.
- :class:`OnceDifferentiable`: a gradient computed on arrays that refuses a second derivative.
"""

from __future__ import annotations

from typing import Any, Callable

from zgrad.autograd.function import Op, on_graph
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["LinearMap", "OnceDifferentiable", "PiecewiseConstant", "detached", "linear_in_grad", "piecewise_constant"]


def detached(value: Any) -> Any:
    """The array of a tensor (a constant of a backward formula: a mask, a sign), else ``value``."""
    return value._data if isinstance(value, Tensor) else value


def piecewise_constant(x: Any, values: Any) -> Any:
    """``values`` (an array), a function of ``x`` whose derivative is 0 where it exists; on the
    graph it stays connected to ``x``, so that ``x`` gets a zero gradient rather than none."""
    return PiecewiseConstant.apply(x, values) if on_graph(x) else values


class PiecewiseConstant(Op):
    """See :func:`piecewise_constant`."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, values):
        ctx.input = (x.shape, x.dtype, dispatch.device_type_of(x))
        return values

    @staticmethod
    def backward(ctx, grad):
        shape, dtype, device_type = ctx.input
        return dispatch.full(shape, 0, dtype, device_type), None


Map = Callable[[Any], Any]


def linear_in_grad(grad: Any, forward_map: Map, adjoint_map: Map) -> Any:
    """``forward_map(grad)``, a map linear in ``grad`` on arrays, recorded with ``adjoint_map``
    (its transpose) as its backward when ``grad`` is a tensor."""
    return LinearMap.apply(grad, forward_map, adjoint_map) if on_graph(grad) else forward_map(grad)


class LinearMap(Op):
    """See :func:`linear_in_grad`."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, grad, forward_map, adjoint_map):
        ctx.maps = (forward_map, adjoint_map)
        return forward_map(grad)

    @staticmethod
    def backward(ctx, grad):
        forward_map, adjoint_map = ctx.maps
        return linear_in_grad(grad, adjoint_map, forward_map), None, None


class OnceDifferentiable(Op):
    """``values``, a gradient computed on arrays, recorded as a function of ``inputs`` that refuses
    to be differentiated (as PyTorch's ``once_differentiable``): a pass with create_graph=True
    may compute it, and only differentiating it again raises, naming ``what`` it is."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, values, what, *inputs):
        ctx.what = what
        return values

    @staticmethod
    def backward(ctx, grad):
        raise AutogradError(f"{ctx.what}: double backward (create_graph=True) through this gradient is not implemented; "
                            f"differentiate the other gradients, or leave this one out of the second pass")
