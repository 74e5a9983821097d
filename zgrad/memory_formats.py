"""PyTorch's memory formats and layouts: ``zgrad.contiguous_format``, ``preserve_format``,
``channels_last``, ``channels_last_3d`` and ``zgrad.strided`` (with the sparse layouts' names),
and ``zgrad.Size``.

A tensor's elements are laid out as its array's strides say. ``channels_last`` is the order
(N, H, W, C) in memory for a tensor of shape (N, C, H, W): ``x.contiguous(memory_format=
zgrad.channels_last)`` and ``clone`` give such a layout, and ``is_contiguous(memory_format=...)``
recognizes it, as in PyTorch. A dense tensor's layout is ``strided``, a sparse COO tensor's
(:mod:`zgrad.sparse.coo`) ``sparse_coo``; the other sparse layouts exist only so that code comparing
against them runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["memory_format", "layout", "contiguous_format", "preserve_format", "channels_last", "channels_last_3d",
           "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged", "Size", "dim_order",
           "is_laid_out", "preserved_order", "check_strided"]


class _Named:
    """A constant known by its name: printed as ``zgrad.<name>``, the same object after a copy or
    a pickle round trip (compare with ``is`` or ``==``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"zgrad.{self.name}"

    def __reduce__(self) -> str:
        return self.name  # the module attribute of that name


class memory_format(_Named):  # noqa: N801 - PyTorch's name
    """One of PyTorch's memory formats."""

    __slots__ = ()


class layout(_Named):  # noqa: N801 - PyTorch's name
    """One of PyTorch's tensor layouts; every zgrad tensor is ``strided``."""

    __slots__ = ()


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
sparse_bsr = layout("sparse_bsr")
sparse_bsc = layout("sparse_bsc")
jagged = layout("jagged")

_CHANNELS_LAST_RANK = {channels_last: 4, channels_last_3d: 5}


def dim_order(fmt: Any, ndim: int) -> tuple[int, ...]:
    """The dims of a tensor of ``ndim`` dims laid out in ``fmt``, outermost first.

    Raises:
        RuntimeError: a channels-last format for another rank (PyTorch's message), or
            ``preserve_format``, which names no order.
        TypeError: not a memory format.
    """
    if fmt is None or fmt is contiguous_format:
        return tuple(range(ndim))
    rank = _CHANNELS_LAST_RANK.get(fmt)
    if rank is not None:
        if ndim != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
        return (0, *range(2, ndim), 1)
    if fmt is preserve_format:
        raise RuntimeError("preserve memory format names no order of dims")
    raise TypeError(f"memory_format must be a zgrad.memory_format, got {type(fmt).__name__}")


def is_laid_out(shape: tuple[int, ...], strides: tuple[int, ...], order: tuple[int, ...]) -> bool:
    """Whether ``strides`` (in elements) are those of a dense layout of ``shape`` in ``order``;
    dims of size 1 may have any stride (PyTorch's rule)."""
    expected = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def preserved_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, ...]:
    """The order of dims (outermost first) a copy made with ``preserve_format`` keeps: that of a
    layout of ``shape`` and ``strides`` (in elements) that is dense and without overlap, such as a
    transposed or channels-last one; the C order for any other (PyTorch's rule)."""
    order = tuple(sorted(range(len(shape)), key=lambda d: (-strides[d], d)))
    return order if 0 not in shape and is_laid_out(shape, strides, order) else tuple(range(len(shape)))


def check_strided(value: Any, what: str) -> None:
    """Refuse a ``layout=`` argument other than None or ``strided``.

    Raises:
        RuntimeError: another layout (the factories make strided tensors only).
    """
    if value is not None and value is not strided:
        raise RuntimeError(f"{what}: only layout=zgrad.strided is supported here, got {value!r}; make a sparse tensor "
                           "with zgrad.sparse_coo_tensor or Tensor.to_sparse()")


class Size(tuple):
    """PyTorch's ``torch.Size``: the tuple of sizes that ``Tensor.shape`` and ``size()`` return, with
    :meth:`numel`; equal to the plain tuple of the same sizes. Slicing, concatenating a tuple and
    repeating give a Size, as PyTorch's do."""

    __slots__ = ()

    def __new__(cls, sizes: Any = ()) -> "Size":
        values = tuple(sizes)
        for n in values:
            if not hasattr(n, "__index__"):  # a bool is an int here, as in PyTorch
                raise TypeError(f"zgrad.Size() takes an iterable of 'int' (item {values.index(n)} is "
                                f"'{type(n).__name__}')")
        return super().__new__(cls, (n.__index__() for n in values))

    def numel(self) -> int:
        """The number of elements of a tensor of this size."""
        count = 1
        for n in self:
            count *= n
        return count

    def __repr__(self) -> str:
        return f"zgrad.Size({list(self)})"

    def __getitem__(self, index: Any) -> Any:
        item = super().__getitem__(index)
        return Size(item) if isinstance(index, slice) else item

    def __add__(self, other: Any) -> "Size":
        if not isinstance(other, tuple):
            raise TypeError(f'can only concatenate tuple (not "{type(other).__name__}") to zgrad.Size')
        return as_size(tuple(self) + other)

    def __radd__(self, other: Any) -> "Size":
        if not isinstance(other, tuple):
            return NotImplemented
        return as_size(other + tuple(self))

    def __mul__(self, count: Any) -> "Size":
        return as_size(tuple(self) * count)

    __rmul__ = __mul__


def as_size(shape: tuple[int, ...]) -> Size:
    """A tuple of ints known to be sizes (an array's shape) as a :class:`Size`, unchecked."""
    return tuple.__new__(Size, shape)
