"""Ops along one dimension of a series of samples: ``diff``, ``trapezoid`` (``trapz``),
``cumulative_trapezoid`` and ``vander``.

Each is composed of differentiable ops (narrow, sub, cumsum, cumprod, ...), so its gradient and
its CUDA form come from theirs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels import dispatch
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.kernels.promotion import promote_types
from zgrad.ops._args import tensor_arg
from zgrad.ops.compare import logical_xor
from zgrad.ops.functions import add, cast, cat, div, mul, sub
from zgrad.ops.layout import narrow, select
from zgrad.ops.reduce import cumsum, sum
from zgrad.ops.reduce_scan import cumprod
from zgrad.ops.reorder import flip
from zgrad.ops.shape import expand, unsqueeze
from zgrad.tensor import Tensor

__all__ = ["diff", "trapezoid", "trapz", "cumulative_trapezoid", "vander"]


def _differences(x: Tensor, dim: int) -> Tensor:
    """x[1:] - x[:-1] along ``dim`` (``!=`` for bool, as PyTorch's diff)."""
    length = x.shape[dim]
    later, earlier = narrow(x, dim, 1, max(length - 1, 0)), narrow(x, dim, 0, max(length - 1, 0))
    return logical_xor(later, earlier) if x.dtype == np.bool_ else sub(later, earlier)


def diff(input: Any, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Tensor:  # noqa: A002
    """The ``n``-th forward difference along ``dim``: ``out[i] = input[i + 1] - input[i]``,
    applied ``n`` times, after ``prepend`` and ``append`` (tensors of ``input``'s dimensions) are
    joined to ``input`` along ``dim``; bool tensors give ``input[i + 1] != input[i]``.

    Raises:
        RuntimeError: ``n`` < 0, a 0-dim ``input``, or ``prepend``/``append`` of other
            dimensions (PyTorch's messages).
    """
    x = tensor_arg(input, "diff")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    if x.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    dim = normalize_dim(dim, x.ndim)
    pieces = []
    for extra in (prepend, x, append):
        if extra is None:
            continue
        if not isinstance(extra, Tensor) or extra.ndim != x.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        pieces.append(extra)
    if len(pieces) > 1:
        x = cat(pieces, dim)
    for _ in range(n):
        if x.shape[dim] == 0:
            break
        x = _differences(x, dim)
    return x


def _trapezoid_args(name: str, y: Any, x: Any, dx: Any, dim: int) -> tuple[Tensor, int, Any]:
    """``y``, ``dim`` normalized and the even spacing (``dx``, default 1; None when sample points
    ``x`` are given), after PyTorch's checks of a trapezoid rule's arguments.

    Raises:
        TypeError: both ``x`` and ``dx``, or an ``x`` that is not a tensor (PyTorch's forms).
        RuntimeError: a bool ``y`` or ``x`` (PyTorch's messages). IndexError: a 0-dim ``y``.
    """
    y = tensor_arg(y, name)
    if x is not None and (dx is not None or not isinstance(x, Tensor)):
        raise TypeError(f"{name}() received an invalid combination of arguments: expected (Tensor y, Tensor x, *, "
                        f"int dim = -1) or (Tensor y, *, Number dx = 1, int dim = -1)")
    if x is not None and (x.dtype == np.bool_ or y.dtype == np.bool_):
        raise RuntimeError(f"{name}: received a bool input for `x` or `y`, but bool is not supported")
    if y.dtype == np.bool_:
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported")
    if y.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return y, normalize_dim(dim, y.ndim), None if x is not None else 1 if dx is None else dx


def _spacings(y: Tensor, x: Tensor, dim: int, name: str) -> Tensor:
    """The gaps between sample points ``x`` (one per sample of ``y`` along ``dim``; a 1-d ``x``
    lies along ``dim``), shaped to broadcast against the sample pairs.

    Raises:
        RuntimeError: ``x`` has not one value per sample (PyTorch's message).
    """
    if x.ndim == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        x = x.reshape(tuple(x.shape[0] if d == dim else 1 for d in range(y.ndim)))
    elif x.ndim != y.ndim or x.shape[dim] != y.shape[dim]:
        raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
    return _differences(x, dim)


def trapezoid(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The integral of samples ``y`` along ``dim`` by the trapezoid rule, with sample points
    ``x`` (a tensor) or evenly spaced ``dx`` apart (default 1).

    Raises:
        TypeError: both ``x`` and ``dx``. RuntimeError: an ``x`` without one value per sample, or
            bool samples. IndexError: a 0-dim ``y``.
    """
    y, dim, spacing = _trapezoid_args("trapezoid", y, x, dx, dim)
    length = y.shape[dim]
    if spacing is None:
        if length == 0:
            return sum(mul(y, 1.0), dim)
        pairs = add(narrow(y, dim, 1, length - 1), narrow(y, dim, 0, length - 1))
        return div(sum(mul(_spacings(y, x, dim, "trapezoid"), pairs), dim), 2)
    if length == 0:
        return sum(mul(y, spacing), dim)
    ends = mul(add(select(y, dim, 0), select(y, dim, -1)), 0.5)
    return mul(sub(sum(y, dim), ends), spacing)


def trapz(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """:func:`trapezoid` (``trapz(y, x, dim=...)`` or ``trapz(y, dx=..., dim=...)``)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoid-rule integral of ``y`` along ``dim`` (one element shorter than
    ``y`` there), with sample points ``x`` or spacing ``dx`` (default 1).

    Raises:
        TypeError: both ``x`` and ``dx``. RuntimeError: an ``x`` without one value per sample, or
            bool samples. IndexError: a 0-dim ``y``.
    """
    y, dim, spacing = _trapezoid_args("cumulative_trapezoid", y, x, dx, dim)
    length = max(y.shape[dim] - 1, 0)
    pairs = add(narrow(y, dim, 1, length), narrow(y, dim, 0, length))
    if spacing is None:
        areas = div(mul(_spacings(y, x, dim, "cumulative_trapezoid"), pairs), 2)
    else:
        areas = mul(mul(pairs, 0.5), spacing)
    return cumsum(areas, dim)


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803 - PyTorch's name
    """The Vandermonde matrix of 1-d ``x``: column j holds ``x ** (N - 1 - j)`` (``x ** j`` when
    ``increasing``), ``N`` columns (default ``len(x)``), in ``x``'s dtype promoted with int64.

    Raises:
        RuntimeError: ``x`` is not 1-d, or ``N`` < 0 (PyTorch's messages).
    """
    x = tensor_arg(x, "vander")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    columns = x.shape[0] if N is None else N
    if columns < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = promote_types(x.dtype, np.int64)
    rows = x.shape[0]
    first = Tensor(dispatch.full((rows, min(columns, 1)), 1, dtype, dispatch.device_type_of(x._data)))
    if columns > 1:
        powers = cumprod(expand(unsqueeze(cast(x, dtype), 1), (rows, columns - 1)), 1)
        result = cat([first, powers], 1)
    else:
        result = first
    return result if increasing else flip(result, (1,))

