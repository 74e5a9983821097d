"""What a sparse COO tensor is: its parts, its construction and its conversions to and from dense.

A sparse COO tensor holds ``indices``, an int64 tensor of shape (sparse_dim, nnz), ``values``, a
dense tensor of shape (nnz, *dense_sizes), and its size. Every computation with it is a
computation with dense ops on its values (and host work on its indices), so dtypes, devices and
autograd come from the dense tensor it holds:

- ``sparse_coo_tensor(i, v)`` with ``v`` requiring grad records a graph back to ``v``;
- a sparse leaf that requires grad keeps its gradient in its values, and ``S.grad`` is a sparse
  tensor with S's indices, as PyTorch's gradient of a sparse input has S's pattern.

A sparse tensor is a :class:`zgrad.Tensor` (``isinstance`` holds; ``layout`` is
``zgrad.sparse_coo``), but it has no dense memory: a dense op handed one raises
NotImplementedError naming the op, where PyTorch's sparse backend would too, instead of computing
on something else. The ops that do take it live in :mod:`zgrad.sparse.operations`.

Indices are always checked (PyTorch checks them only under ``check_invariants``): an index out of
range is an error here, never a wrong result.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from zgrad import ops
from zgrad.creation import tensor, zeros
from zgrad.errors import AutogradError, IndexRangeError, ShapeError
from zgrad.kernels.promotion import get_default_dtype
from zgrad.memory_formats import Size, as_size, preserve_format, sparse_coo
from zgrad.printing import add_suffixes, tensor_body
from zgrad.tensor import Tensor, parse_to_args

__all__ = ["SparseCooTensor", "sparse_coo_tensor", "to_sparse", "is_sparse_coo", "derived"]


# the names of zgrad's decorators' wrappers (functools.wraps keeps the function's name, not its frame's)
_WRAPPER_NAMES = frozenset({"op", "call", "wrapper", "decorate_autocast"})


def _operation_name() -> str:
    """The zgrad function the user called that reached for a sparse tensor's dense memory: the
    outermost zgrad frame below the caller's code that is not a decorator's wrapper (the frames
    of this module's refusal itself left out)."""
    frame, name = sys._getframe(3), None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == "zgrad" or module.startswith("zgrad."):
            code = frame.f_code
            if code.co_name not in _WRAPPER_NAMES:
                name = code.co_qualname if code.co_name == "__init__" else code.co_name
        elif name is not None:
            break
        frame = frame.f_back
    return name or "this operation"


def _refuse_dense_use() -> NotImplementedError:
    return NotImplementedError(
        f"{_operation_name()}: zgrad's sparse COO tensors do not support this operation. Convert the tensor "
        f"with .to_dense() first, or use an operation of zgrad.sparse (mm, addmm, sum, softmax, log_softmax), "
        f"the arithmetic operators, or the methods a sparse tensor defines (coalesce, to_dense, t, to, ...)")


class _NoDenseMemory:
    """A sparse tensor's ``_data``: any dense op that reaches for the array raises."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        raise _refuse_dense_use()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _refuse_dense_use()

    # the special methods Python looks up on the type, past __getattr__
    __array__ = __len__ = __iter__ = __getitem__ = __setitem__ = __bool__ = __float__ = __int__ = __index__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __matmul__ = __neg__ = _refuse


_NO_DENSE_MEMORY = _NoDenseMemory()


class SparseCooTensor(Tensor):
    """A sparse tensor in coordinate format: ``indices()`` (sparse_dim x nnz, int64) and
    ``values()`` (nnz x dense sizes). Make one with :func:`zgrad.sparse_coo_tensor` or
    :meth:`Tensor.to_sparse`; the constructor takes parts that are already checked."""

    __slots__ = ("_sparse_indices", "_sparse_values", "_sparse_size", "_coalesced")

    def __init__(self, indices: Tensor, values: Tensor, size: tuple[int, ...], coalesced: bool) -> None:
        # The base's slots that its own methods read; Tensor.__init__ would set grad, which is values'
        self._data = _NO_DENSE_MEMORY
        self._requires_grad = False
        self._output_nr = 0
        self._accumulator = None
        self._view_base = None
        self._sparse_indices = indices
        self._sparse_values = values
        self._sparse_size = tuple(size)
        self._coalesced = coalesced

    # --- what it is ---------------------------------------------------------------------------

    @property
    def shape(self) -> Size:
        return as_size(self._sparse_size)

    @property
    def dtype(self) -> np.dtype:
        return self._sparse_values.dtype

    @property
    def device(self) -> Any:
        return self._sparse_values.device

    @property
    def ndim(self) -> int:
        return len(self._sparse_size)

    def dim(self) -> int:
        return len(self._sparse_size)

    def numel(self) -> int:
        return math.prod(self._sparse_size)

    @property
    def layout(self) -> Any:
        return sparse_coo

    @property
    def is_sparse(self) -> bool:
        return True

    def sparse_dim(self) -> int:
        return self._sparse_indices.shape[0]

    def dense_dim(self) -> int:
        return len(self._sparse_size) - self._sparse_indices.shape[0]

    def _nnz(self) -> int:
        return self._sparse_indices.shape[1]

    def is_coalesced(self) -> bool:
        """Whether the indices are sorted and unique (true of a coalesced tensor, a converted dense one,
        and one made with ``is_coalesced=True``)."""
        return self._coalesced

    def _indices(self) -> Tensor:
        return self._sparse_indices

    def _values(self) -> Tensor:
        return self._sparse_values

    def indices(self) -> Tensor:
        """The (sparse_dim, nnz) int64 indices of a coalesced tensor.

        Raises:
            RuntimeError: the tensor is not coalesced (call ``coalesce()`` first).
        """
        self._require_coalesced("indices")
        return self._sparse_indices

    def values(self) -> Tensor:
        """The (nnz, *dense sizes) values of a coalesced tensor, differentiable.

        Raises:
            RuntimeError: the tensor is not coalesced (call ``coalesce()`` first).
        """
        self._require_coalesced("values")
        return self._sparse_values

    def _require_coalesced(self, part: str) -> None:
        if not self._coalesced:
            raise RuntimeError(f"Cannot get {part} on an uncoalesced tensor, please call .coalesce() first")

    # --- autograd: a sparse tensor's graph is its values' ----------------------------------------

    @property
    def requires_grad(self) -> bool:
        return self._sparse_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "SparseCooTensor":
        """Make this sparse leaf require grad (its gradient is sparse, with its indices).

        Raises:
            AutogradError: not a leaf, or not floating point.
        """
        self._sparse_values.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self) -> Any:
        return self._sparse_values.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._sparse_values.grad_fn is None

    @property
    def grad(self) -> "SparseCooTensor | None":
        """The gradient of a sparse leaf: a sparse tensor with this tensor's indices, or None."""
        values_grad = self._sparse_values.grad
        if values_grad is None:
            return None
        if self._coalesced:
            return SparseCooTensor(self._sparse_indices, values_grad, self._sparse_size, True)
        # Every copy of a repeated position holds the whole gradient there: keep one of each
        unique, first, _ = _unique_positions(self)
        return SparseCooTensor(_device_indices(unique, values_grad), values_grad.index_select(
            0, _device_indices(first, values_grad)), self._sparse_size, True)

    @grad.setter
    def grad(self, value: Any) -> None:
        if value is None:
            self._sparse_values.grad = None
        elif is_sparse_coo(value) and value.shape == self.shape:  # kept at this tensor's positions
            self._sparse_values.grad = value.detach().to_dense(self.dtype)[tuple(self._sparse_indices)]
        else:
            raise AutogradError(f"a sparse tensor's .grad can be set to None or to a sparse tensor of its size "
                                f"{list(self.shape)}")

    def detach(self) -> "SparseCooTensor":
        return SparseCooTensor(self._sparse_indices, self._sparse_values.detach(), self._sparse_size, self._coalesced)

    # --- copies and conversions ----------------------------------------------------------------

    def clone(self, *, memory_format: Any = preserve_format) -> "SparseCooTensor":
        """A copy (differentiable in the values) with its own indices."""
        return SparseCooTensor(self._sparse_indices.clone(), self._sparse_values.clone(), self._sparse_size,
                               self._coalesced)

    def to(self, *args: Any, copy: bool = False, memory_format: Any = preserve_format, **kwargs: Any) -> Any:
        """This tensor in another dtype or on another device, as :meth:`Tensor.to`: self when nothing
        changes (unless ``copy``); differentiable in the values."""
        device, dtype = parse_to_args(*args, **kwargs)
        values, indices = self._sparse_values.to(device=device, dtype=dtype, copy=copy), self._sparse_indices
        if values is self._sparse_values:
            return self
        if indices.device != values.device:
            indices = indices.to(values.device)
        return SparseCooTensor(indices, values, self._sparse_size, self._coalesced)

    def to_dense(self, dtype: Any = None, *, masked_grad: bool = True) -> Tensor:
        """The dense tensor, with repeated indices added up; differentiable in the values (their
        gradient is the dense gradient at the indices, S's pattern as in PyTorch)."""
        values = self._sparse_values if dtype is None else self._sparse_values.to(dtype)
        dense = zeros(self._sparse_size, dtype=values.dtype, device=values.device)
        if not self.sparse_dim():  # every entry is at the one position there is
            return values.sum(0)
        return ops.index_put(dense, tuple(self._sparse_indices), values, accumulate=True)

    def to_sparse(self, sparse_dim: int | None = None, *, layout: Any = None, blocksize: Any = None,
                  dense_dim: int | None = None) -> "SparseCooTensor":
        """Self (already sparse COO with these dimensions).

        Raises:
            NotImplementedError: another layout. RuntimeError: other sparse dimensions.
        """
        _check_layout(layout, blocksize)
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError(f"to_sparse: conversion from Sparse to Sparse with sparse_dim argument !=self.sparse_dim() "
                               f"is not supported (got {sparse_dim}, the tensor has {self.sparse_dim()})")
        return self

    to_sparse_coo = to_sparse

    def coalesce(self) -> "SparseCooTensor":
        """This tensor with sorted, unique indices (repeated ones' values added up); self if it is
        coalesced already. Differentiable in the values."""
        if self._coalesced:
            return self
        indices, first, inverse = _unique_positions(self)
        values = self._sparse_values
        if indices.shape[1] == self._nnz():
            values = derived(values) if np.array_equal(first, np.arange(first.size)) else values.index_select(
                0, _device_indices(first, values))
        else:
            summed = zeros((indices.shape[1], *values.shape[1:]), dtype=values.dtype, device=values.device)
            values = ops.index_add(summed, 0, _device_indices(inverse, values), values)
        return SparseCooTensor(_device_indices(indices, values), values, self._sparse_size, True)

    def __format__(self, format_spec: str) -> str:
        return repr(self) if not format_spec else format(repr(self), format_spec)

    def __deepcopy__(self, memo: dict) -> "SparseCooTensor":
        """A copy with its own indices and values; a leaf's copy is a leaf that requires grad as it does.

        Raises:
            RuntimeError: a tensor with history (PyTorch's rule).
        """
        if not self.is_leaf:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.  If you were attempting to deepcopy a module, this may be "
                               "because of a torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        values = self._sparse_values.detach().clone().requires_grad_(self._sparse_values.requires_grad)
        copied = SparseCooTensor(self._sparse_indices.clone(), values, self._sparse_size, self._coalesced)
        memo[id(self)] = copied
        return copied

    def ndimension(self) -> int:
        return len(self._sparse_size)

    def nelement(self) -> int:
        return self.numel()

    def element_size(self) -> int:
        return self._sparse_values.element_size()

    @property
    def itemsize(self) -> int:
        return self._sparse_values.element_size()

    def get_device(self) -> int:
        """The CUDA device index, or -1 on the CPU."""
        return -1 if self.device.type == "cpu" else (self.device.index or 0)

    # --- printing -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        """PyTorch's layout: the indices and values as tensors, then size, nnz, dtype and layout."""
        indices = _indented(_plain_repr(self._sparse_indices), len("tensor(indices="))
        values = _indented(_plain_repr(self._sparse_values), len("       values="))
        suffixes = [f"size={self._sparse_size}", f"nnz={self._nnz()}"]
        if self.dtype not in (get_default_dtype(), np.dtype(np.int64), np.dtype(np.bool_)):
            suffixes.append(f"dtype={self.dtype}")
        suffixes.append(f"layout={sparse_coo!r}")
        if self.device.type != "cpu":
            suffixes.insert(0, f"device='{self.device}'")
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return f"tensor(indices={indices},\n       values={values},\n       {', '.join(suffixes)})"


def _plain_repr(part: Tensor) -> str:
    """A part's repr as PyTorch prints it inside a sparse tensor's: its elements (and its size when
    it has none), no dtype."""
    host = part.detach().cpu().numpy()
    return add_suffixes("tensor(" + tensor_body(host, len("tensor(")), [f"size={host.shape}"] if not host.size else [],
                        len("tensor("))


def _indented(text: str, indent: int) -> str:
    return text.replace("\n", "\n" + " " * indent)


def derived(values: Tensor) -> Tensor:
    """``values`` for a new sparse tensor that shares them: an alias with history where they require
    grad, so the new tensor is not the old one's leaf (PyTorch's result of an op is not a leaf)."""
    return values.view(values.shape) if values.requires_grad else values


def _unique_positions(s: "SparseCooTensor") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted unique (sparse_dim, count) indices of ``s``, the first entry at each, and each
    entry's place among them."""
    host = s._sparse_indices.cpu().numpy()
    nnz = host.shape[1]
    if not host.shape[0]:  # no sparse dimensions: every entry is at the one position there is
        return host[:, :min(nnz, 1)], np.zeros(min(nnz, 1), np.int64), np.zeros(nnz, np.int64)
    sparse_sizes = s.shape[:host.shape[0]]
    linear = np.ravel_multi_index(tuple(host), sparse_sizes) if nnz else np.zeros(0, np.int64)
    unique, first, inverse = np.unique(linear, return_index=True, return_inverse=True)
    indices = np.stack(np.unravel_index(unique, sparse_sizes)) if unique.size else host[:, :0]
    return indices, first, inverse.reshape(-1)


def is_sparse_coo(value: Any) -> bool:
    """Whether ``value`` is a sparse COO tensor."""
    return type(value) is SparseCooTensor


def _device_indices(array: np.ndarray, like: Tensor) -> Tensor:
    """Host int64 indices as a tensor on ``like``'s device."""
    return tensor(np.ascontiguousarray(array, dtype=np.int64), device=like.device)


def _check_layout(layout: Any, blocksize: Any) -> None:
    if layout is not None and layout is not sparse_coo:
        raise NotImplementedError(f"to_sparse: zgrad has sparse COO tensors only, not {layout!r}; pass "
                                  f"layout=zgrad.sparse_coo or leave it out")
    if blocksize is not None:
        raise NotImplementedError("to_sparse: blocksize applies to the block sparse layouts, which zgrad does not have")


# --- construction --------------------------------------------------------------------------------

def _indices_array(indices: Any) -> np.ndarray:
    if isinstance(indices, Tensor):
        if indices.dtype.kind not in "iu":
            raise RuntimeError(f"indices must be an int64 tensor, but got {indices.dtype}")
        host = indices.detach().cpu().numpy()
    else:
        host = np.asarray(indices)
        if host.size and host.dtype.kind not in "iu":
            raise RuntimeError(f"indices must be an int64 tensor, but got {host.dtype}")
    if host.ndim != 2:
        raise ShapeError(f"sparse_coo_tensor: indices must be a 2-D tensor of shape (sparse_dim, nnz), but got shape "
                         f"{tuple(host.shape)}")
    return host.astype(np.int64, copy=False)


def _checked_size(host: np.ndarray, values: Tensor, size: Any) -> tuple[int, ...]:
    sparse_dim, nnz = host.shape
    if values.ndim == 0 or values.shape[0] != nnz:
        got = values.shape[0] if values.ndim else "a 0-d tensor"
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: {nnz}, nnz from values: "
                           f"{got}")
    dense_sizes = tuple(values.shape[1:])
    if size is None:
        inferred = host.max(axis=1) + 1 if nnz else np.zeros(sparse_dim, np.int64)
        return tuple(int(n) for n in inferred) + dense_sizes
    size = tuple(int(n) for n in size)
    if len(size) != sparse_dim + len(dense_sizes):
        raise RuntimeError(f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
                           f"sparse_dim = {sparse_dim}, dense_dim = {len(dense_sizes)}")
    if size[sparse_dim:] != dense_sizes:
        raise ShapeError(f"values has incorrect size, expected [{nnz}, {', '.join(map(str, size[sparse_dim:]))}], "
                         f"got [{', '.join(map(str, values.shape))}]")
    if nnz:
        lowest, highest = host.min(axis=1), host.max(axis=1)
        for dim in range(sparse_dim):
            if lowest[dim] < 0:
                raise IndexRangeError(f"found negative index {lowest[dim]} for dim {dim}")
            if highest[dim] >= size[dim]:
                raise IndexRangeError(f"size is inconsistent with indices: for dim {dim}, size is {size[dim]} but found "
                                 f"index {highest[dim]}")
    return size


def _sorted_unique(host: np.ndarray, size: tuple[int, ...]) -> bool:
    if host.shape[1] < 2:
        return True
    linear = np.ravel_multi_index(tuple(host), size[:host.shape[0]])
    return bool(np.all(linear[1:] > linear[:-1]))


def sparse_coo_tensor(indices: Any, values: Any, size: Any = None, *, dtype: Any = None, device: Any = None,
                      pin_memory: bool = False, requires_grad: bool = False, check_invariants: bool | None = None,
                      is_coalesced: bool | None = None) -> SparseCooTensor:
    """A sparse COO tensor with ``values[k]`` at position ``indices[:, k]`` (repeated positions add
    up); ``size`` defaults to the smallest that holds the indices. ``indices`` is (sparse_dim, nnz),
    ``values`` (nnz, *dense sizes). Values that require grad keep their graph (the result is not a
    leaf); ``requires_grad=True`` makes a sparse leaf. Indices are always checked, whatever
    ``check_invariants`` says.

    Raises:
        RuntimeError: indices that are not integers, or whose count differs from the values'; a
            size of the wrong length. IndexRangeError: an index outside ``size`` (a RuntimeError and an
            IndexError). ShapeError: values whose
            dense sizes differ from ``size``'s, or indices that are not 2-D.
    """
    host = _indices_array(indices)
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=dtype, device=device)
    elif dtype is not None or device is not None:
        values = values.to(device=device, dtype=dtype)
    size = _checked_size(host, values, size)
    if is_coalesced and not _sorted_unique(host, size):
        raise RuntimeError("sparse_coo_tensor: is_coalesced=True, but the indices are not sorted and unique")
    if requires_grad:
        values = values.detach().requires_grad_()
    elif values.requires_grad:
        values = values.view(values.shape)  # the sparse tensor is made by an op: not a leaf, as PyTorch's
    coalesced = bool(is_coalesced) if is_coalesced is not None else host.shape[1] < 2
    return SparseCooTensor(_device_indices(host, values), values, size, coalesced)


def to_sparse(dense: Tensor, sparse_dim: int | None = None, *, layout: Any = None, blocksize: Any = None,
              dense_dim: int | None = None) -> SparseCooTensor:
    """``dense`` as a coalesced sparse COO tensor of its nonzero entries (of its first
    ``sparse_dim`` dimensions, all by default: the rest stay dense in the values, and a slice is
    kept where any of it is nonzero). Differentiable.

    Raises:
        RuntimeError: a ``sparse_dim`` outside [1, dim]. NotImplementedError: another layout.
    """
    _check_layout(layout, blocksize)
    if sparse_dim is None:
        sparse_dim = dense.ndim if dense_dim is None else dense.ndim - dense_dim
    if dense.ndim == 0:
        count = int(bool(dense.detach().cpu().numpy() != 0))
        return SparseCooTensor(_device_indices(np.zeros((0, count)), dense), dense.unsqueeze(0)[:count], (), True)
    if not 0 < sparse_dim <= dense.ndim:
        raise RuntimeError(f"to_sparse: sparse_dim argument must be in [1, {dense.ndim}] for a {dense.ndim}-d "
                           f"tensor, but got {sparse_dim}")
    kept = dense.detach()
    if sparse_dim < dense.ndim:
        kept = kept.ne(0).any(dim=tuple(range(sparse_dim, dense.ndim)))
    indices = ops.nonzero(kept).t().contiguous()
    return SparseCooTensor(indices, dense[tuple(indices)], dense.shape, True)
