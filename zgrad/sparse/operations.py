"""The operations that take sparse COO tensors, as PyTorch's sparse CPU backend offers them:
arithmetic (a sparse result from sparse operands, a dense one where a dense tensor is added),
matrix products, sums, softmax over the specified entries, transposes, and the unary functions
that keep zero at zero. Each is dense ops on the values (so it is differentiable and runs on any
device) and host work on the indices.

This module binds them as methods and operators of :class:`SparseCooTensor` (and ``to_sparse``,
``to_dense`` and ``sparse_mask`` onto dense tensors), and makes the public functions that take
either layout (``zgrad.mm``, ``zgrad.add``, ...) with :func:`either_layout`.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable

import numpy as np

from zgrad import ops
from zgrad.creation import zeros
from zgrad.errors import ShapeError
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.kernels.promotion import is_floating, promote_types
from zgrad.sparse.coo import SparseCooTensor, _device_indices, derived, is_sparse_coo, to_sparse
from zgrad.tensor import Tensor, tensor_methods

__all__ = ["either_layout", "add", "sub", "mul", "div", "mm", "mm_either", "matmul", "mv", "addmm", "sum", "softmax",
           "log_softmax", "transpose", "sparse_mask", "ZERO_PRESERVING_FUNCTIONS", "SPARSE_METHOD_FUNCTIONS"]

# Unary functions with f(0) == 0: applied to the values, they give the sparse tensor of the result
ZERO_PRESERVING_FUNCTIONS = ("abs", "asin", "asinh", "atan", "atanh", "ceil", "deg2rad", "erf", "erfinv", "expm1",
                             "floor", "frac", "isinf", "isnan", "log1p", "nan_to_num", "rad2deg", "relu", "round", "sgn",
                             "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc")
# The functions of zgrad's namespace that take a sparse tensor as their first argument (as its method)
SPARSE_METHOD_FUNCTIONS = (*ZERO_PRESERVING_FUNCTIONS, "neg", "pow", "t", "transpose", "mv", "norm")


def either_layout(dense_function: Callable, sparse_function: Callable) -> Callable:
    """``dense_function`` where no argument is a sparse tensor, else ``sparse_function``: a public
    function (``zgrad.mm``...) that takes tensors of either layout."""
    @functools.wraps(dense_function)
    def call(*args: Any, **kwargs: Any) -> Any:
        for value in args:
            if type(value) is SparseCooTensor:
                return sparse_function(*args, **kwargs)
        if kwargs and any(type(value) is SparseCooTensor for value in kwargs.values()):
            return sparse_function(*args, **kwargs)
        return dense_function(*args, **kwargs)
    return call


def _same_size(a: Tensor, b: Tensor) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ShapeError(f"add: expected 'self' and 'other' to have same size, but self has size {list(a.shape)} while "
                         f"other has size {list(b.shape)} (FYI: dense-sparse addition does not currently support "
                         f"broadcasting)")


def _with_values(s: SparseCooTensor, values: Tensor, coalesced: bool | None = None) -> SparseCooTensor:
    return SparseCooTensor(s._sparse_indices, values, s.shape, s._coalesced if coalesced is None else coalesced)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, numbers.Number) or (isinstance(value, Tensor) and not is_sparse_coo(value)
                                                 and value.ndim == 0)


# --- arithmetic ----------------------------------------------------------------------------------

def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002 - torch's argument name
    """``input + alpha * other`` where either is sparse: sparse + sparse is sparse (coalesced),
    dense + sparse is dense. Sizes must be equal (no broadcasting, as in PyTorch).

    Raises:
        RuntimeError: a sparse ``input`` with a dense ``other`` (add the sparse one to the dense
            one instead). ShapeError: different sizes.
    """
    if not is_sparse_coo(input):
        if not isinstance(input, Tensor):
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        _same_size(input, other)
        dtype = _sum_dtype(input, other, alpha)
        if not other.sparse_dim():
            return input.to(dtype) + other.to_dense(dtype) * alpha
        values = other._sparse_values.to(dtype)
        return ops.index_put(input.to(dtype), tuple(other._sparse_indices), values if alpha == 1 else values * alpha,
                             accumulate=True)
    if not is_sparse_coo(other):
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
    _same_size(input, other)
    dtype = _sum_dtype(input, other, alpha)
    other_values = other._sparse_values.to(dtype)
    values = ops.cat([input._sparse_values.to(dtype), other_values if alpha == 1 else other_values * alpha])
    indices = ops.cat([input._sparse_indices, other._sparse_indices], dim=1)
    return SparseCooTensor(indices, values, input.shape, False).coalesce()


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002 - torch's argument name
    """``input - alpha * other`` where either is sparse, as :func:`add`.

    Raises:
        RuntimeError: two bool tensors (PyTorch's message), and as :func:`add`.
    """
    if getattr(input, "dtype", None) == np.bool_ and other.dtype == np.bool_:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    return add(input, other, alpha=-alpha)


def _sum_dtype(input: Tensor, other: Tensor, alpha: Any) -> np.dtype:
    dtype = promote_types(input.dtype, other.dtype)
    if isinstance(alpha, float) and not is_floating(dtype):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return dtype


def mul(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's argument name
    """The elementwise product where either is sparse; the result is sparse. A number or 0-d tensor
    scales the values; a dense tensor of the same size is read at the indices; two sparse tensors
    keep the positions both hold."""
    if not is_sparse_coo(input):
        input, other = other, input  # noqa: A001 - the product commutes
    if _is_scalar(other):
        return _with_values(input, input._sparse_values * other)
    if not is_sparse_coo(other):
        _same_size(other, input)
        return _with_values(input, input._sparse_values * other[tuple(input._sparse_indices)])
    _same_size(input, other)
    a, b = input.coalesce(), other.coalesce()
    a_linear, b_linear = _linear_indices(a), _linear_indices(b)
    common, a_at, b_at = np.intersect1d(a_linear, b_linear, assume_unique=True, return_indices=True)
    values = a._sparse_values.index_select(0, _device_indices(a_at, a._sparse_values)) * \
        b._sparse_values.index_select(0, _device_indices(b_at, b._sparse_values))
    indices = a._sparse_indices.index_select(1, _device_indices(a_at, a._sparse_indices))
    return SparseCooTensor(indices, values, a.shape, True)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002
    """A sparse tensor divided by a number or a 0-d tensor.

    Raises:
        RuntimeError: any other divisor (dividing by the zeros a sparse tensor leaves out, or
            dividing by a sparse tensor, is not defined sparsely).
    """
    if not is_sparse_coo(input) or not _is_scalar(other):
        shape = list(other.shape) if isinstance(other, Tensor) else "a sparse dividend"
        raise RuntimeError(f"Sparse division requires a scalar or zero-dim dense tensor divisor (got shape {shape} "
                           f"for divisor)")
    if rounding_mode is not None:  # rounding is not linear: the repeated entries are added up first
        input = input.coalesce()  # noqa: A001
    return _with_values(input, ops.div(input._sparse_values, other, rounding_mode=rounding_mode))


def _linear_indices(s: SparseCooTensor) -> np.ndarray:
    host = s._sparse_indices.cpu().numpy()
    return np.ravel_multi_index(tuple(host), s.shape[:host.shape[0]]) if host.shape[1] else np.zeros(0, np.int64)


# --- matrix products -----------------------------------------------------------------------------

def _check_product(mat1: Tensor, mat2: Tensor) -> None:
    for matrix in (mat1, mat2):
        if matrix.ndim != 2 or (is_sparse_coo(matrix) and matrix.dense_dim()):
            raise NotImplementedError(f"mm: zgrad multiplies sparse tensors as 2-D matrices with two sparse dimensions "
                                      f"(got a {'sparse' if is_sparse_coo(matrix) else 'dense'} tensor of size "
                                      f"{list(matrix.shape)})")
    if mat1.shape[1] != mat2.shape[0]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
                         f"{mat2.shape[0]}x{mat2.shape[1]})")
    if mat1.dtype != mat2.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(mat1.dtype)} but found "
                           f"{scalar_type_name(mat2.dtype)}")


def mm(mat1: Any, mat2: Any, reduce: str = "sum") -> Tensor:
    """The matrix product where either factor is sparse: dense for a dense factor, sparse for two
    sparse ones. Differentiable in the values of both (a sparse leaf's gradient keeps its pattern).

    Raises:
        ShapeError: sizes that do not multiply. RuntimeError: different dtypes.
        NotImplementedError: a factor that is not a matrix, or a ``reduce`` other than "sum".
    """
    if reduce != "sum":
        raise NotImplementedError(f"mm: zgrad's sparse product reduces with 'sum' only, not {reduce!r}")
    _check_product(mat1, mat2)
    if not is_sparse_coo(mat1):
        return mm(mat2.t(), mat1.t()).t().contiguous()
    if is_sparse_coo(mat2):
        return _sparse_sparse_mm(mat1, mat2)
    rows, columns = mat1._sparse_indices
    contributions = mat2.index_select(0, columns) * mat1._sparse_values.unsqueeze(1)
    result = zeros((mat1.shape[0], mat2.shape[1]), dtype=contributions.dtype, device=contributions.device)
    return ops.index_add(result, 0, rows, contributions)


def mm_either(input: Any, mat2: Any) -> Tensor:  # noqa: A002 - torch's argument name
    """``zgrad.mm``'s signature over :func:`mm`, for its sparse operands."""
    return mm(input, mat2)


def _sparse_sparse_mm(mat1: SparseCooTensor, mat2: SparseCooTensor) -> SparseCooTensor:
    a, b = mat1.coalesce(), mat2.coalesce()
    a_rows, a_columns = a._sparse_indices.cpu().numpy()
    b_rows, b_columns = b._sparse_indices.cpu().numpy()
    # b is sorted by row: the entries of b's row j are b_starts[j]:b_starts[j + 1]
    b_starts = np.concatenate([[0], np.cumsum(np.bincount(b_rows, minlength=b.shape[0]))])
    counts = b_starts[a_columns + 1] - b_starts[a_columns]
    a_at = np.repeat(np.arange(a_columns.size), counts)
    offsets = np.arange(a_at.size) - np.repeat(np.cumsum(counts) - counts, counts)
    b_at = np.repeat(b_starts[a_columns], counts) + offsets
    values = a._sparse_values.index_select(0, _device_indices(a_at, a._sparse_values)) * \
        b._sparse_values.index_select(0, _device_indices(b_at, b._sparse_values))
    indices = _device_indices(np.stack([a_rows[a_at], b_columns[b_at]]), values)
    return SparseCooTensor(indices, values, (a.shape[0], b.shape[1]), False).coalesce()


def matmul(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's argument name
    """:func:`mm` where either is sparse, and a sparse matrix times a dense vector (or a dense
    vector times a sparse matrix)."""
    if is_sparse_coo(input) and not is_sparse_coo(other) and other.ndim == 1:
        return mm(input, other.unsqueeze(1)).squeeze(1)
    if is_sparse_coo(other) and not is_sparse_coo(input) and input.ndim == 1:
        return mm(input.unsqueeze(0), other).squeeze(0)
    return mm(input, other)


def mv(input: Any, vec: Any) -> Tensor:  # noqa: A002 - torch's argument name
    """A sparse matrix times a dense vector.

    Raises:
        NotImplementedError: a ``vec`` that is not 1-D (use :func:`mm`).
    """
    if vec.ndim != 1:
        raise NotImplementedError(f"mv: vec must be 1-D, but got a tensor of size {list(vec.shape)}")
    return matmul(input, vec)


def addmm(input: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)`` with a sparse ``mat1`` (or ``mat2``) and a dense ``input``."""
    product = mm(mat1, mat2)
    if is_sparse_coo(product):
        product = product.to_dense()
    if input.dtype != product.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(product.dtype)} but found "
                           f"{scalar_type_name(input.dtype)}")
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:  # PyTorch ignores the input then: its NaN and inf do not spread
        return scaled
    return (input if beta == 1 else input * beta) + scaled


# --- reductions ----------------------------------------------------------------------------------

def _dims(s: SparseCooTensor, dim: Any) -> list[int]:
    dims = [dim] if isinstance(dim, int) else list(dim)
    n = s.ndim
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    normalized = [d % n for d in dims]
    for d in normalized:
        if normalized.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return sorted(normalized)


def sum(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A001,A002
    """The sum of a sparse tensor: a dense 0-d tensor over all dimensions (or all sparse ones),
    else a sparse tensor of the dimensions left, as ``zgrad.sparse.sum``.

    Raises:
        NotImplementedError: ``keepdim=True``. IndexError: a dimension out of range.
    """
    if keepdim:
        raise NotImplementedError("sum: keepdim=True is not supported for sparse tensors; sum without it")
    values = input._sparse_values if dtype is None else input._sparse_values.to(dtype)
    if dim is None:
        return values.sum()
    dims = _dims(input, dim)
    sparse_dim = input.sparse_dim()
    dense_dims = tuple(d - sparse_dim + 1 for d in dims if d >= sparse_dim)
    kept = [d for d in range(sparse_dim) if d not in dims]
    if not kept:
        return values.sum(dim=(0, *dense_dims))
    if dense_dims:
        values = values.sum(dim=dense_dims)
    indices = input._sparse_indices.index_select(0, _device_indices(np.array(kept), input._sparse_indices))
    size = tuple(n for d, n in enumerate(input.shape) if d not in dims)
    return SparseCooTensor(indices, values, size, False).coalesce()


def _softmax_input(input: SparseCooTensor, dim: int, dtype: Any, name: str) -> SparseCooTensor:
    if dtype is None and not is_floating(input.dtype):
        raise NotImplementedError(f'"{name}" not implemented for \'{scalar_type_name(input.dtype)}\'')
    return input.coalesce()


def _softmax_parts(input: SparseCooTensor, dim: int, dtype: Any) -> tuple[SparseCooTensor, Tensor, Tensor, Tensor]:
    """The coalesced input, each entry's group (the entries that differ only along ``dim``), the
    values less their group's maximum, and each group's sum of exponentials."""
    s = input.coalesce()
    values = s._sparse_values if dtype is None else s._sparse_values.to(dtype)
    host = s._sparse_indices.cpu().numpy()
    others = np.delete(host, dim, axis=0)
    group = np.unique(others, axis=1, return_inverse=True)[1].reshape(-1) if host.shape[1] else np.zeros(0, np.int64)
    groups = int(group.max()) + 1 if group.size else 0
    group_of = _device_indices(group, values)
    shape = (groups, *values.shape[1:])
    spread = group_of.reshape(-1, *[1] * (values.ndim - 1)).expand(values.shape)
    maxima = ops.scatter_reduce(zeros(shape, dtype=values.dtype, device=values.device), 0, spread, values.detach(),
                                "amax", include_self=False)
    shifted = values - maxima.index_select(0, group_of)
    sums = ops.index_add(zeros(shape, dtype=values.dtype, device=values.device), 0, group_of, shifted.exp())
    return s, group_of, shifted, sums


def softmax(input: Any, dim: int, *, dtype: Any = None) -> SparseCooTensor:  # noqa: A002
    """Softmax along ``dim`` over the entries a sparse tensor holds (the rest count as -inf, and
    stay unspecified), as ``zgrad.sparse.softmax``."""
    dim = _dims(input, dim)[0]
    input = _softmax_input(input, dim, dtype, "softmax")  # noqa: A001
    if dim >= input.sparse_dim():
        return _with_values(input, input._sparse_values.softmax(dim - input.sparse_dim() + 1, dtype=dtype))
    s, group_of, shifted, sums = _softmax_parts(input, dim, dtype)
    return _with_values(s, shifted.exp() / sums.index_select(0, group_of))


def log_softmax(input: Any, dim: int, *, dtype: Any = None) -> SparseCooTensor:  # noqa: A002
    """The logarithm of :func:`softmax`, computed stably."""
    dim = _dims(input, dim)[0]
    input = _softmax_input(input, dim, dtype, "log_softmax")  # noqa: A001
    if dim >= input.sparse_dim():
        return _with_values(input, input._sparse_values.log_softmax(dim - input.sparse_dim() + 1, dtype=dtype))
    s, group_of, shifted, sums = _softmax_parts(input, dim, dtype)
    return _with_values(s, shifted - sums.log().index_select(0, group_of))


# --- layout --------------------------------------------------------------------------------------

def transpose(input: SparseCooTensor, dim0: int, dim1: int) -> SparseCooTensor:  # noqa: A002
    """The tensor with two sparse dimensions swapped (its values shared; not coalesced).

    Raises:
        RuntimeError: a dense dimension among them.
    """
    dim0, dim1 = (_dims(input, d)[0] for d in (dim0, dim1))
    sparse_dim = input.sparse_dim()
    if dim0 >= sparse_dim or dim1 >= sparse_dim:
        if dim0 == dim1:
            return input
        raise RuntimeError(f"transpose: sparse transpose swaps sparse dimensions only (the tensor has {sparse_dim}; "
                           f"got {dim0} and {dim1})")
    order = list(range(sparse_dim))
    order[dim0], order[dim1] = dim1, dim0
    size = list(input.shape)
    size[dim0], size[dim1] = size[dim1], size[dim0]
    indices = input._sparse_indices.index_select(0, _device_indices(np.array(order), input._sparse_indices))
    return SparseCooTensor(indices, derived(input._sparse_values), tuple(size), dim0 == dim1 and input._coalesced)


def _t(self: SparseCooTensor) -> SparseCooTensor:
    """The transpose of a matrix (self for fewer dimensions).

    Raises:
        RuntimeError: more than two sparse dimensions, or dense ones.
    """
    if self.sparse_dim() > 2 or self.dense_dim():
        raise RuntimeError(f"t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got tensor with "
                           f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions")
    return transpose(self, 0, 1) if self.ndim == 2 else self


def _norm(self: SparseCooTensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    """The norm of all entries (``dim`` None): of the coalesced values.

    Raises:
        NotImplementedError: a ``dim``.
    """
    if dim is not None:
        raise NotImplementedError("norm: zgrad's sparse tensors take the norm of all entries only (dim=None)")
    values = self.coalesce()._sparse_values
    return values.norm(2 if p == "fro" else p, dtype=dtype)


def sparse_mask(input: Tensor, mask: SparseCooTensor) -> SparseCooTensor:  # noqa: A002
    """The entries of dense ``input`` at the positions ``mask`` holds, as a sparse tensor with its indices.

    Raises:
        ShapeError: different sizes. TypeError: a mask that is not sparse.
    """
    if not is_sparse_coo(mask):
        raise TypeError(f"sparse_mask: expected a sparse COO mask, but got a {mask.layout!r} tensor")
    if tuple(input.shape) != tuple(mask.shape):
        raise ShapeError(f"sparse_mask(): operands have incompatible sizes; self has size {list(input.shape)} but mask "
                         f"has size {list(mask.shape)}")
    return _with_values(mask, input[tuple(mask._sparse_indices)])


def _map_values(name: str) -> Callable:
    def method(self: SparseCooTensor, *args: Any, **kwargs: Any) -> SparseCooTensor:
        coalesced = self.coalesce()
        return _with_values(coalesced, getattr(coalesced._sparse_values, name)(*args, **kwargs))
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``{name}`` of each entry (zero stays zero): a coalesced sparse tensor."
    return method


def _pow(self: SparseCooTensor, exponent: Any) -> SparseCooTensor:
    """Each entry to a positive number's power (zero stays zero): a coalesced sparse tensor.

    Raises:
        RuntimeError: an exponent that is not a positive number.
    """
    if not isinstance(exponent, numbers.Real) or exponent <= 0:
        raise RuntimeError(f"pow: a sparse tensor can be raised to a positive number's power only (0 must stay 0), "
                           f"got {exponent!r}")
    coalesced = self.coalesce()
    return _with_values(coalesced, coalesced._sparse_values.pow(exponent))


# --- methods -------------------------------------------------------------------------------------

def _floor_divide(self: SparseCooTensor, other: Any) -> SparseCooTensor:
    return div(self, other, rounding_mode="floor")


def _reflected(function: Callable) -> Callable:
    return lambda self, other: function(other, self)


def _sparse_methods() -> None:
    methods = {
        "add": add, "sub": sub, "mul": mul, "div": div, "mm": mm, "matmul": matmul, "sum": sum, "pow": _pow,
        "softmax": softmax, "log_softmax": log_softmax, "transpose": transpose, "swapaxes": transpose,
        "swapdims": transpose, "t": _t, "mv": mv, "norm": _norm, "floor_divide": _floor_divide,
        "__floordiv__": _floor_divide, "T": property(_t), "mT": property(_t),
        "neg": lambda self: _with_values(self, -self._sparse_values), "true_divide": div, "multiply": mul,
        "subtract": sub, "divide": div,
        "__add__": add, "__radd__": _reflected(add), "__sub__": sub, "__rsub__": _reflected(sub), "__mul__": mul,
        "__rmul__": mul, "__truediv__": div, "__rtruediv__": _reflected(div), "__matmul__": matmul,
        "__rmatmul__": _reflected(matmul), "__pow__": _pow,
    }
    methods["negative"] = methods["__neg__"] = methods["neg"]
    methods.update((name, _map_values(name)) for name in ZERO_PRESERVING_FUNCTIONS)
    for name, method in methods.items():
        setattr(SparseCooTensor, name, method)


_sparse_methods()


@tensor_methods
class _DenseToSparse:
    """The conversions between layouts that dense tensors have."""

    def to_sparse(self, sparse_dim: int | None = None, *, layout: Any = None, blocksize: Any = None,
                  dense_dim: int | None = None) -> Any:
        """This tensor as a sparse COO tensor of its nonzero entries (:func:`zgrad.sparse.coo.to_sparse`)."""
        return to_sparse(self, sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)

    def to_sparse_coo(self) -> Any:
        return to_sparse(self)

    def to_dense(self, dtype: Any = None, *, masked_grad: bool | None = None) -> Any:
        """Self (already dense), or a copy in ``dtype``."""
        return self if dtype is None else self.to(dtype)

    def sparse_mask(self, mask: Any) -> Any:
        """The entries at the positions sparse ``mask`` holds, as a sparse tensor (:func:`sparse_mask`)."""
        return sparse_mask(self, mask)
