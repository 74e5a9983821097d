"""Views with another layout: movedim (moveaxis), swapaxes (swapdims), adjoint (``mT``, ``mH``), narrow
(and narrow_copy), select, ravel, unbind, unflatten, broadcast_to / broadcast_tensors /
broadcast_shapes, atleast_1d / 2d / 3d, meshgrid and cartesian_prod.

Each is a permute, a reshape, a slice or a broadcast of :mod:`zgrad.ops.shape`, whose views and
gradients it shares; unbind is one op whose gradient stacks the pieces' gradients.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from zgrad.autograd.function import Op
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.memory_formats import Size, as_size
from zgrad.ops._args import int_tuple, scalar_arg, tensor_arg
from zgrad.ops.functions import clone, getitem, permute, reshape, stack, transpose
from zgrad.ops.shape import expand
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = [
    "movedim", "moveaxis", "swapaxes", "swapdims", "adjoint", "swap_last_two", "narrow", "narrow_copy", "select",
    "select_index", "ravel", "unbind", "unflatten", "broadcast_to", "broadcast_tensors", "broadcast_shapes",
    "atleast_1d", "atleast_2d", "atleast_3d", "meshgrid", "cartesian_prod", "MESHGRID_INDEXING_WARNING",
]

MESHGRID_INDEXING_WARNING = ("torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
                             "argument.")


def movedim(input: Any, source: Any, destination: Any) -> Any:  # noqa: A002 - torch's argument name
    """A view of ``input`` with its dims ``source`` (an int or a sequence) moved to positions
    ``destination``; the other dims keep their order.

    Raises:
        ShapeError: ``source`` and ``destination`` differ in length or repeat a dim.
        IndexError: a dim is out of range.
    """
    x = tensor_arg(input, "movedim")
    source, destination = int_tuple(source), int_tuple(destination)
    if len(source) != len(destination):
        raise ShapeError(f"movedim: Invalid source or destination dims: source ({list(source)} dims) should contain "
                         f"the same number of dims as destination ({list(destination)} dims)")
    src = [normalize_dim(d, x.ndim) for d in source]
    dst = [normalize_dim(d, x.ndim) for d in destination]
    for name, given, normalized in (("source", source, src), ("destination", destination, dst)):
        if len(set(normalized)) != len(normalized):
            raise ShapeError(f"movedim: repeated dim in `{name}` ({list(given)})")
    rest = iter(d for d in range(x.ndim) if d not in src)
    placed = dict(zip(dst, src))
    order = tuple(placed[d] if d in placed else next(rest) for d in range(x.ndim))
    return permute(x, order)  # a new view even with nothing moved, as PyTorch's


moveaxis = movedim


def swapaxes(input: Any, axis0: int, axis1: int) -> Any:  # noqa: A002
    """A view of ``input`` with dims ``axis0`` and ``axis1`` swapped (``transpose``).

    Raises:
        IndexError: a dim is out of range.
    """
    return transpose(tensor_arg(input, "swapaxes"), axis0, axis1)


def swapdims(input: Any, dim0: int, dim1: int) -> Any:  # noqa: A002
    """A view of ``input`` with dims ``dim0`` and ``dim1`` swapped (``transpose``).

    Raises:
        IndexError: a dim is out of range.
    """
    return transpose(tensor_arg(input, "swapdims"), dim0, dim1)


def adjoint(input: Any) -> Any:  # noqa: A002
    """A view of ``input`` with its last two dims swapped (the conjugate transpose of real
    matrices).

    Raises:
        ShapeError: fewer than 2 dims.
    """
    return swap_last_two(tensor_arg(input, "adjoint"), "adjoint()")


def swap_last_two(x: Any, what: str) -> Any:
    """``x`` with its last two dims swapped, for ``Tensor.<what>`` (``mT``, ``mH``: a 0-d tensor
    as it is, as PyTorch's deprecated identity).

    Raises:
        ShapeError: 1 dim, or 0 for ``adjoint()``, with PyTorch's message.
    """
    if x.ndim == 0 and what != "adjoint()":
        return x
    if x.ndim < 2:
        raise ShapeError(f"tensor.{what} is only supported on matrices or batches of matrices. Got {x.ndim}-D tensor.")
    return transpose(x, -2, -1)


def narrow(input: Any, dim: int, start: Any, length: int) -> Any:  # noqa: A002
    """A view of ``length`` elements of ``input`` along ``dim`` from ``start`` (an int or a 0-d
    integer tensor; negative counts from the end).

    Raises:
        ShapeError: a 0-d input, a negative length, or a slice past the end.
        IndexError: ``dim`` or ``start`` is out of range.
    """
    x = tensor_arg(input, "narrow")
    if x.ndim == 0:
        raise ShapeError("narrow() cannot be applied to a 0-dim tensor.")
    start, length = int(scalar_arg(start, "narrow")), int(length)
    if length < 0:
        raise ShapeError("narrow(): length must be non-negative.")
    dim = normalize_dim(dim, x.ndim)
    size = x.shape[dim]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    start = start + size if start < 0 else start
    if start + length > size:
        raise ShapeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return getitem(x, (slice(None),) * dim + (slice(start, start + length),))


def narrow_copy(input: Any, dim: int, start: Any, length: int) -> Any:  # noqa: A002
    """A copy of :func:`narrow`'s view (same arguments and errors)."""
    return clone(narrow(input, dim, start, length))


def select(input: Any, dim: int, index: Any) -> Any:  # noqa: A002
    """A view of ``input`` at position ``index`` (negative counts from the end) of dim ``dim``,
    without that dim.

    Raises:
        IndexError: ``dim`` or ``index`` is out of range (a 0-d tensor has no dim).
    """
    x = tensor_arg(input, "select")
    return getitem(x, select_index(x.shape, dim, index))


def select_index(shape: tuple[int, ...], dim: int, index: Any) -> tuple[Any, ...]:
    """The basic index of position ``index`` (an int or a one-element tensor; negative counts
    from the end) of dim ``dim`` of a tensor of ``shape``.

    Raises:
        IndexError: a 0-d shape, or ``dim`` or ``index`` out of range, with PyTorch's message.
    """
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim, index = normalize_dim(dim, len(shape)), int(scalar_arg(index, "select"))
    size = shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(shape)} at dimension {dim}")
    return (slice(None),) * dim + (index % size, Ellipsis)


def ravel(input: Any) -> Any:  # noqa: A002
    """``input`` as one dim: a view when its memory allows, else a contiguous copy."""
    return reshape(tensor_arg(input, "ravel"), (-1,))


class Unbind(Op):
    """Views of the slices of ``x`` along ``dim``; the gradient stacks theirs."""

    returns_view = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        lead = (slice(None),) * dim
        return tuple(x[lead + (i, Ellipsis)] for i in range(x.shape[dim]))

    @staticmethod
    def backward(ctx, *grads):
        return dispatch.stack(grads, ctx.dim), None


def unbind(input: Any, dim: int = 0) -> tuple[Any, ...]:  # noqa: A002
    """The slices of ``input`` along ``dim``, as views without that dim.

    Raises:
        IndexError: ``dim`` is out of range (a 0-d tensor has none).
    """
    x = tensor_arg(input, "unbind")
    if x.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim = normalize_dim(dim, x.ndim)
    return Unbind.apply(x, dim) if x.shape[dim] else ()


def unflatten(input: Any, dim: int, sizes: Sequence[int]) -> Any:  # noqa: A002
    """A view of ``input`` with dim ``dim`` split into dims of ``sizes`` (one may be -1, inferred).

    Raises:
        ShapeError: empty ``sizes``, or sizes that do not multiply up to the dim's size.
        IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "unflatten")
    sizes = int_tuple(sizes)
    if not sizes:
        raise ShapeError("unflatten: sizes must be non-empty")
    dim = normalize_dim(dim, x.ndim)
    size = x.shape[dim] if x.ndim else 1
    known = int(np.prod([n for n in sizes if n != -1]))
    if sizes.count(-1) > 1 or (-1 in sizes and (known == 0 or size % known)) or (-1 not in sizes and known != size):
        raise ShapeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} ({size}) "
                         f"in the input tensor")
    sizes = tuple(size // known if n == -1 else n for n in sizes)
    return reshape(x, x.shape[:dim] + sizes + x.shape[dim + 1:])


def broadcast_to(input: Any, size: Sequence[int]) -> Any:  # noqa: A002
    """A read-only broadcast view of ``input`` of shape ``size`` (-1 keeps a size): ``expand``.

    Raises:
        ShapeError: ``input`` does not broadcast to ``size``.
    """
    return expand(tensor_arg(input, "broadcast_to"), size)


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape tensors of ``shapes`` (each a sequence of sizes or an int) broadcast to.

    Raises:
        ShapeError: the shapes do not broadcast together, with PyTorch's message.
    """
    shapes = [int_tuple(s) for s in shapes]
    result: list[int] = []
    for i, shape in enumerate(shapes):
        if any(n < 0 for n in shape):
            raise ShapeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
        result = [1] * (len(shape) - len(result)) + result
        for r, n in enumerate(reversed(shape), start=1):
            if result[-r] == 1:
                result[-r] = n
            elif n not in (1, result[-r]):
                owner = next(k for k, s in enumerate(shapes) if len(s) >= r and s[-r] != 1)
                raise ShapeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is between "
                                 f"arg {owner} and arg {i}.")
    return as_size(tuple(result))


def _tensor_list(tensors: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    """``f(a, b)`` and ``f([a, b])`` alike, each a Tensor."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return tuple(tensor_arg(t, what) for t in tensors)


def broadcast_tensors(*tensors: Any) -> tuple[Any, ...]:
    """Broadcast views of ``tensors``, all of the shape they broadcast to together.

    Raises:
        ShapeError: the shapes do not broadcast together.
    """
    tensors = _tensor_list(tensors, "broadcast_tensors")
    try:
        shape = broadcast_shapes(*(t.shape for t in tensors))
    except ShapeError:
        raise ShapeError(f"shapes {[list(t.shape) for t in tensors]} cannot be broadcast together") from None
    return tuple(expand(t, shape) for t in tensors)


def _at_least(tensors: tuple[Any, ...], what: str, place: Any) -> Any:
    """Each tensor reshaped by ``place(shape)`` (a view); one tensor alone is not put in a tuple."""
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    results = tuple(t if place(t.shape) == t.shape else reshape(t, place(t.shape)) for t in _tensor_list(tensors, what))
    return results[0] if single else results


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor, with a 0-d one seen as 1-d (a view); one tensor gives a tensor, several (or a
    list) a tuple."""
    return _at_least(tensors, "atleast_1d", lambda shape: shape or (1,))


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor seen with at least 2 dims: a 0-d one as (1, 1), a 1-d one as a row (1, n)."""
    return _at_least(tensors, "atleast_2d", lambda shape: (1,) * (2 - len(shape)) + shape if len(shape) < 2 else shape)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor seen with at least 3 dims: 0-d as (1, 1, 1), (n,) as (1, n, 1), (m, n) as (m, n, 1)."""
    shapes = {0: lambda s: (1, 1, 1), 1: lambda s: (1, s[0], 1), 2: lambda s: s + (1,)}
    return _at_least(tensors, "atleast_3d", lambda shape: shapes[len(shape)](shape) if len(shape) < 3 else shape)


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Any, ...]:
    """Coordinate grids of 0-d or 1-d ``tensors``: with ``indexing="ij"`` (the default) the i-th
    grid has shape (len(t0), len(t1), ...) and varies along dim i; with ``"xy"`` the first two
    dims are swapped (Cartesian indexing). The grids are broadcast views. Leaving ``indexing``
    out warns, as PyTorch does (it will become required there).

    Raises:
        ShapeError: a tensor with more than one dim, tensors of different dtypes, or another
            ``indexing``.
    """
    tensors = _tensor_list(tensors, "meshgrid")
    if indexing is None:
        warnings.warn(MESHGRID_INDEXING_WARNING, UserWarning, stacklevel=user_stacklevel())
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise ShapeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    if not tensors:
        raise ShapeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise ShapeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.ndim}D")
        if t.dtype != tensors[0].dtype:
            raise ShapeError("meshgrid expects all tensors to have the same dtype")
    swap = indexing == "xy" and len(tensors) >= 2
    ordered = (tensors[1], tensors[0], *tensors[2:]) if swap else tensors
    shape = tuple(t.numel() for t in ordered)
    grids = [expand(reshape(t, tuple(n if d == i else 1 for d, n in enumerate(shape))), shape)
             for i, t in enumerate(ordered)]
    return (grids[1], grids[0], *grids[2:]) if swap else tuple(grids)


def cartesian_prod(*tensors: Any) -> Any:
    """The Cartesian product of 1-D ``tensors``: one row per combination of their elements, in
    the order of nested loops (the last tensor varies fastest); one tensor is returned as it is.

    Raises:
        ShapeError: a tensor that is not 1-D.
    """
    tensors = _tensor_list(tensors, "cartesian_prod")
    for t in tensors:
        if t.ndim != 1:
            raise ShapeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([reshape(g, (-1,)) for g in meshgrid(*tensors, indexing="ij")], 1)
