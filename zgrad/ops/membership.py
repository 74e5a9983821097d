"""``isin`` (which elements occur in a set of test elements) and ``unravel_index`` (flat indices
as coordinates): integer and bool results, no gradient, composed of ops every backend runs."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad.kernels import dispatch
from zgrad.kernels.promotion import result_type
from zgrad.ops._args import int_tuple
from zgrad.ops.binary_math import floor_divide
from zgrad.ops.compare import eq, logical_not
from zgrad.ops.elementwise import clamp, remainder
from zgrad.ops.functions import cast
from zgrad.ops.indexing import gather
from zgrad.ops.sorting import searchsorted, sort
from zgrad.tensor import Tensor

__all__ = ["isin", "unravel_index"]


def _as_tensor(x: Any, dtype: np.dtype, like: Tensor) -> Tensor:
    """``x`` (a tensor or a number) as a tensor of ``dtype`` on ``like``'s device, out of the graph."""
    if isinstance(x, Tensor):
        return cast(x, dtype).detach()
    return Tensor(dispatch.asarray(np.asarray(x, dtype), dtype, dispatch.device_type_of(like._data)))


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """A bool tensor of ``elements``' shape: whether each element equals one of ``test_elements``
    (compared in their promoted dtype; NaN matches nothing), negated with ``invert``. Either
    argument may be a number, not both.

    Raises:
        TypeError: neither argument is a tensor.
    """
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments: expected at least one of "
                        "elements and test_elements to be a Tensor")
    like = elements if isinstance(elements, Tensor) else test_elements
    dtype = result_type(elements._data if isinstance(elements, Tensor) else elements,
                        test_elements._data if isinstance(test_elements, Tensor) else test_elements)
    values, tests = _as_tensor(elements, dtype, like), _as_tensor(test_elements, dtype, like).reshape((-1,))
    if tests.numel() == 0:
        found = Tensor(dispatch.full(values.shape, False, np.bool_, dispatch.device_type_of(values._data)))
    else:
        ordered = sort(tests).values
        positions = clamp(searchsorted(ordered, values.reshape((-1,))), max=tests.numel() - 1)
        found = eq(gather(ordered, 0, positions), values.reshape((-1,))).reshape(values.shape)
    return logical_not(found) if invert else found


def unravel_index(indices: Any, shape: Sequence[int] | int) -> tuple[Tensor, ...]:
    """The coordinates in an array of ``shape`` of the flat (row-major) ``indices``, as one int64
    tensor of ``indices``' shape per dimension; indices wrap around as in Python (-1 is the last).

    Raises:
        TypeError: non-integer ``indices`` (PyTorch's message).
    """
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index(): argument 'indices' (position 1) must be Tensor, not {type(indices).__name__}")
    if indices.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    sizes = int_tuple(shape)
    flat = cast(indices, np.int64)
    coordinates = []
    for size in reversed(sizes):
        coordinates.append(remainder(flat, size))
        flat = floor_divide(flat, size)
    return tuple(reversed(coordinates))
