"""The matrix-product family of ``torch``: ``mm``, ``bmm``, ``mv``, ``dot``, ``vdot``, ``inner``,
``outer``/``ger``, ``addmm``, ``baddbmm``, ``addbmm``, ``addmv``, ``addr``, ``kron``, ``cdist``, ``cross``.

Each checks its arguments as PyTorch does (ranks, sizes, one dtype for both factors: PyTorch
promotes none in a product) and composes differentiable ops (``matmul``, ``mul``, ``add``,
``sum``, :func:`~zgrad.ops.vector_norm.vector_norm`), so it runs and differentiates on every
backend ``matmul`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import tensor_arg
from zgrad.ops.contraction import tensordot
from zgrad.ops.elementwise import Cast
from zgrad.ops.indexing import where
from zgrad.ops.functions import add, getitem, matmul, mul, reshape, stack, sub
from zgrad.ops.reduce import sum as _sum
from zgrad.ops.shape import expand, unsqueeze
from zgrad.ops.vector_norm import vector_norm
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import HALF_DTYPES, is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = ["mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "baddbmm", "addbmm", "addmv", "addr",
           "kron", "cdist", "pdist", "cross"]


def _same_dtype(a: Any, b: Any, message: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(message.format(a=dispatch.scalar_type_name(a.dtype), b=dispatch.scalar_type_name(b.dtype)))


def _matrix(x: Any, name: str, what: str) -> Any:
    x = tensor_arg(x, name)
    if x.ndim != 2:
        raise ShapeError(f"{what} must be a matrix")
    return x


@accepts_out("exact")
@autocast_op()
def mm(input: Any, mat2: Any) -> Any:  # noqa: A002 - torch's argument name
    """The product of two matrices of one dtype, (n, m) @ (m, p) -> (n, p).

    Raises:
        ShapeError: an argument is not 2-D, or the inner sizes differ (PyTorch's messages).
        DTypeError: the dtypes differ.
    """
    a, b = _matrix(input, "mm", "self"), _matrix(mat2, "mm", "mat2")
    if a.shape[1] != b.shape[0]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[1]} and "
                         f"{b.shape[0]}x{b.shape[1]})")
    return matmul(a, b)


@accepts_out("exact")
@autocast_op()
def bmm(input: Any, mat2: Any) -> Any:  # noqa: A002
    """Batched matrix product of (b, n, m) and (b, m, p) tensors of one dtype -> (b, n, p); no
    broadcasting.

    Raises:
        ShapeError: an argument is not 3-D, or the sizes do not match. DTypeError: the dtypes differ.
    """
    a, b = tensor_arg(input, "bmm"), tensor_arg(mat2, "bmm")
    for x, what in ((a, "batch1"), (b, "batch2")):
        if x.ndim != 3:
            raise ShapeError(f"{what} must be a 3D tensor")
    if b.shape[:2] != (a.shape[0], a.shape[2]):
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}] "
                         f"but got: [{b.shape[0]}, {b.shape[1]}].")
    _same_dtype(a, b, "expected scalar type {a} but found {b}")
    return matmul(a, b)


@accepts_out("exact")
@autocast_op()
def mv(input: Any, vec: Any) -> Any:  # noqa: A002
    """Matrix-vector product, (n, m) @ (m,) -> (n,).

    Raises:
        ShapeError: wrong ranks or sizes. DTypeError: the dtypes differ.
    """
    a, v = tensor_arg(input, "mv"), tensor_arg(vec, "mv")
    if a.ndim != 2 or v.ndim != 1:
        raise ShapeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {v.ndim}")
    if a.shape[1] != v.shape[0]:
        raise ShapeError(f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
                         f"vec ({v.shape[0]})")
    _same_dtype(a, v, "addmv input tensors must have the same dtype, but got {a}, {a}, and {b}")
    return matmul(a, v)


@accepts_out("exact")
@autocast_op()
def dot(input: Any, tensor: Any) -> Any:  # noqa: A002
    """The inner product of two 1-D tensors of one size and dtype, a 0-d tensor.

    Raises:
        ShapeError: not 1-D, or the sizes differ. DTypeError: the dtypes differ.
    """
    a, b = tensor_arg(input, "dot"), tensor_arg(tensor, "dot")
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape != b.shape:
        raise ShapeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have the "
                         f"same number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively")
    _same_dtype(a, b, "dot : expected both vectors to have same dtype, but found {a} and {b}")
    return matmul(a, b)


@autocast_op()
def vdot(input: Any, other: Any) -> Any:  # noqa: A002
    """The inner product of two 1-D tensors, the first conjugated (:func:`dot` for real tensors)."""
    return dot(input, other)


@accepts_out("exact")
def inner(input: Any, other: Any) -> Any:  # noqa: A002
    """The sum of products over the last dimension of both (a product when either is 0-d):
    result shape ``input.shape[:-1] + other.shape[:-1]``.

    Raises:
        ShapeError: the last sizes differ.
    """
    a, b = tensor_arg(input, "inner"), tensor_arg(other, "inner")
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"inner() the last dimension must match on both input tensors but got shapes "
                         f"{list(a.shape)} and {list(b.shape)}")
    return tensordot(a, b, ([-1], [-1]))


@accepts_out()
def outer(input: Any, vec2: Any) -> Any:  # noqa: A002
    """The outer product of two 1-D tensors, (n,) x (m,) -> (n, m) (dtypes promote, as PyTorch).

    Raises:
        ShapeError: an argument is not 1-D.
    """
    a, b = tensor_arg(input, "outer"), tensor_arg(vec2, "outer")
    for x, what in ((a, "self"), (b, "vec2")):
        if x.ndim != 1:
            raise ShapeError(f"outer: Expected 1-D argument {what}, but got {x.ndim}-D")
    return mul(unsqueeze(a, 1), b)


ger = outer


def _scaled(x: Any, factor: Any) -> Any:
    return x if factor == 1 else mul(x, factor)


def _add_scaled_product(name: str, input: Any, product: Any, beta: Any, alpha: Any,  # noqa: A002
                        promote: bool = False) -> Any:
    """beta * input + alpha * product, in the product's dtype (in the promoted dtype of both when
    ``promote``), with ``input`` broadcast to the product's shape; ``input`` is ignored (NaNs
    included) when beta is 0, as PyTorch."""
    x = tensor_arg(input, name)
    try:
        fits = dispatch.broadcast_shape(x.shape, product.shape) == product.shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"The expanded size of the tensor must match the existing size: {name} cannot broadcast "
                         f"input of shape {list(x.shape)} to the product's shape {list(product.shape)}")
    if beta == 0:  # input takes part with a zero gradient, its values (NaNs too) unread
        ignore = Tensor(dispatch.full((), True, np.bool_, dispatch.device_type_of(x._data)))
        result = where(ignore, _scaled(product, alpha), x)
    else:
        result = add(_scaled(x, beta), _scaled(product, alpha))
    return result if promote or result.dtype == product.dtype else Cast.apply(result, product.dtype)


def _input_dtype(name: str, input: Any, first: Any, second: Any) -> None:  # noqa: A002
    for x in (tensor_arg(input, name), first):
        _same_dtype(x, second, "self and mat2 must have the same dtype, but got {a} and {b}")


@accepts_out("exact")
@autocast_op()
def addmm(input: Any, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2); ``input`` broadcasts to the product's shape.

    Raises:
        ShapeError: wrong ranks or sizes. DTypeError: the three dtypes are not one.
    """
    a, b = _matrix(mat1, "addmm", "self"), _matrix(mat2, "addmm", "mat2")
    _input_dtype("addmm", input, a, b)
    return _add_scaled_product("addmm", input, mm(a, b), beta, alpha)


@accepts_out("exact")
@autocast_op()
def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:  # noqa: A002
    """beta * input + alpha * bmm(batch1, batch2); ``input`` broadcasts to the product's shape."""
    a, b = tensor_arg(batch1, "baddbmm"), tensor_arg(batch2, "baddbmm")
    _input_dtype("baddbmm", input, a, b)
    return _add_scaled_product("baddbmm", input, bmm(a, b), beta, alpha)


@autocast_op()
def addbmm(input: Any, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:  # noqa: A002
    """beta * input + alpha * (the sum over the batch of bmm(batch1, batch2))."""
    a, b = tensor_arg(batch1, "addbmm"), tensor_arg(batch2, "addbmm")
    _input_dtype("addbmm", input, a, b)
    product = bmm(a, b)
    return _add_scaled_product("addbmm", input, _sum(product, 0, dtype=product.dtype), beta, alpha)


@accepts_out("exact")
@autocast_op()
def addmv(input: Any, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:  # noqa: A002
    """beta * input + alpha * (mat @ vec)."""
    x, a, v = tensor_arg(input, "addmv"), tensor_arg(mat, "addmv"), tensor_arg(vec, "addmv")
    if len({x.dtype, a.dtype, v.dtype}) > 1:
        names = ", ".join(dispatch.scalar_type_name(t.dtype) for t in (x, a))
        raise DTypeError(f"addmv input tensors must have the same dtype, but got {names}, and "
                         f"{dispatch.scalar_type_name(v.dtype)}")
    return _add_scaled_product("addmv", x, mv(a, v), beta, alpha)


@accepts_out("exact")
@autocast_op()
def addr(input: Any, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:  # noqa: A002
    """beta * input + alpha * outer(vec1, vec2); dtypes promote, as PyTorch's.

    Raises:
        ShapeError: a vector is not 1-D, or ``input`` does not broadcast to (len(vec1), len(vec2)).
    """
    v1, v2 = tensor_arg(vec1, "addr"), tensor_arg(vec2, "addr")
    for v, what in ((v1, "vec1"), (v2, "vec2")):
        if v.ndim != 1:
            raise ShapeError(f"addr: Expected 1-D argument {what}, but got {v.ndim}-D")
    return _add_scaled_product("addr", input, outer(v1, v2), beta, alpha, promote=True)


@accepts_out()
def kron(input: Any, other: Any) -> Any:  # noqa: A002
    """The Kronecker product: for shapes (a0, a1, ...) and (b0, b1, ...) (the shorter padded with
    leading 1s), shape (a0 b0, a1 b1, ...) with block (i0, i1, ...) equal to input[i0, i1, ...] * other."""
    a, b = tensor_arg(input, "kron"), tensor_arg(other, "kron")
    ndim = max(a.ndim, b.ndim)
    sa, sb = (1,) * (ndim - a.ndim) + a.shape, (1,) * (ndim - b.ndim) + b.shape
    interleaved_a = reshape(a, tuple(n for s in sa for n in (s, 1)))
    interleaved_b = reshape(b, tuple(n for s in sb for n in (1, s)))
    return reshape(mul(interleaved_a, interleaved_b), tuple(x * y for x, y in zip(sa, sb)))


@autocast_op()
def cdist(x1: Any, x2: Any, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Any:
    """The ``p``-norm distances between each row of ``x1`` (..., P, M) and each row of ``x2``
    (..., R, M): shape (..., P, R), batch dimensions broadcast. ``compute_mode`` is accepted for
    PyTorch's signature; distances are computed directly (exact, also where PyTorch uses a
    matrix product).

    Raises:
        ShapeError: fewer than 2 dimensions or different row lengths. DTypeError: not floating.
        ValueError: a negative ``p``.
    """
    a, b = tensor_arg(x1, "cdist"), tensor_arg(x2, "cdist")
    for x, what in ((a, "X1"), (b, "X2")):
        if not is_floating(x.dtype):
            raise DTypeError(f"cdist only supports floating-point dtypes, {what} got: "
                             f"{dispatch.scalar_type_name(x.dtype)}")
        if x.ndim < 2:
            raise ShapeError(f"cdist only supports at least 2D tensors, {what} got: {x.ndim}D")
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"X1 and X2 must have the same number of columns. X1: {a.shape[-1]} X2: {b.shape[-1]}")
    if p < 0:
        raise ValueError("cdist only supports non-negative p values")
    if a.dtype in HALF_DTYPES:
        raise NotImplementedError(f"\"cdist\" not implemented for '{dispatch.scalar_type_name(a.dtype)}'")
    _same_dtype(a, b, "expected scalar type {a} but found {b}")
    return vector_norm(sub(unsqueeze(a, -2), unsqueeze(b, -3)), p, -1)


def pdist(input: Any, p: float = 2.0) -> Any:  # noqa: A002 - PyTorch's argument name
    """The ``p``-norm distance between every pair of rows i < j of ``input`` (N, M), in row-major
    order of the pairs: shape (N * (N - 1) / 2,), as ``torch.nn.functional.pdist`` (the upper
    triangle of :func:`cdist` of ``input`` with itself; the gradient at a zero distance is 0).

    Raises:
        RuntimeError: an input that is not 2-D, a negative ``p`` (PyTorch's messages).
    """
    x = tensor_arg(input, "pdist")
    if x.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {x.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if not is_floating(x.dtype):
        raise RuntimeError("pdist only supports floating-point dtypes")
    first, second = np.triu_indices(x.shape[0], 1)
    return vector_norm(sub(x[first], x[second]), p, -1)


@accepts_out("exact")
@autocast_op()
def cross(input: Any, other: Any, dim: int | None = None) -> Any:  # noqa: A002
    """The cross product of 3-vectors along ``dim``, inputs broadcast; ``dim=None`` takes the
    first dimension of size 3 (``torch.cross``'s deprecated default; ``zgrad.linalg.cross``
    defaults to the last).

    Raises:
        ShapeError: ``dim`` does not have size 3 (or no dimension has). DTypeError: dtypes differ.
        IndexError: ``dim`` is out of range.
    """
    a, b = tensor_arg(input, "cross"), tensor_arg(other, "cross")
    _same_dtype(a, b, "expected scalar type {a} but found {b}")
    if a.ndim != b.ndim:
        raise ShapeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = dispatch.broadcast_shape(a.shape, b.shape)
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise ShapeError("no dimension of size 3 in input")
    d = normalize_dim(dim, len(shape))
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and {b.shape[d]}")
    a, b = (x if x.shape == shape else expand(x, shape) for x in (a, b))
    lead = (slice(None),) * d
    ax, ay, az = (getitem(a, lead + (k,)) for k in range(3))
    bx, by, bz = (getitem(b, lead + (k,)) for k in range(3))
    return stack([sub(mul(ay, bz), mul(az, by)), sub(mul(az, bx), mul(ax, bz)), sub(mul(ax, by), mul(ay, bx))], d)
