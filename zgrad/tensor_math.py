"""The math, comparison and layout methods and operators of :class:`zgrad.Tensor`, and its
copies and conversions (``clone``, ``contiguous``, ``to``, ``cpu``, ``float``, ...).

Each math, comparison and layout method is the ``zgrad.ops`` function of the same name applied
to the tensor, so a method and its function can never disagree. The ops make tensors, so
``zgrad.tensor`` comes before them and these methods after them:
:func:`~zgrad.tensor.tensor_methods` binds them onto ``Tensor`` when this module is imported
(``zgrad/__init__.py`` imports it first).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad import linalg, ops
from zgrad.linalg import legacy
from zgrad.linalg.decompositions import legacy_svd
from zgrad.linalg.matrix_functions import cholesky_solve
from zgrad.linalg.norms import legacy_norm
from zgrad.linalg.solvers import logdet
from zgrad.device import check_supported, cuda_device
from zgrad.kernels.promotion import BFLOAT16
from zgrad.memory_formats import contiguous_format, preserve_format
from zgrad.ops.activation import prelu
from zgrad.tensor import Tensor, parse_to_args, tensor_methods

__all__ = ["TensorMath"]


def _dims(dims: tuple[Any, ...]) -> Any:
    """``f(1, 2)`` and ``f((1, 2))`` alike, as PyTorch's varargs size methods accept both."""
    return tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims


@tensor_methods
class TensorMath:
    """The operators and out-of-place methods of :class:`zgrad.Tensor` (bound onto it; never
    instantiated)."""

    # --- arithmetic operators -------------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        return ops.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return ops.add(self, other)  # the tensor first, as PyTorch records 2 + x (the sum is the same)

    def __sub__(self, other: Any) -> Any:
        return ops.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return ops.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return ops.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return ops.mul(self, other)  # the tensor first, as PyTorch records 2 * x

    def __truediv__(self, other: Any) -> Any:
        return ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return ops.div(other, self)

    def __mod__(self, other: Any) -> Any:
        return ops.remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return ops.remainder(other, self)

    def __matmul__(self, other: Any) -> Any:
        return ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return ops.matmul(other, self)

    def __pow__(self, other: Any) -> Any:
        return ops.pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return ops.pow(other, self)

    def __neg__(self) -> Any:
        return ops.neg(self)

    def __pos__(self) -> Any:
        return ops.positive(self)

    def __abs__(self) -> Any:
        return ops.abs(self)

    def __getitem__(self, index: Any) -> Any:
        return ops.getitem(self, index)

    # --- comparisons (bool results, no gradient) ------------------------------------------------

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return ops.eq(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return ops.ne(self, other)

    def __lt__(self, other: Any) -> Any:
        return ops.lt(self, other)

    def __le__(self, other: Any) -> Any:
        return ops.le(self, other)

    def __gt__(self, other: Any) -> Any:
        return ops.gt(self, other)

    def __ge__(self, other: Any) -> Any:
        return ops.ge(self, other)

    def eq(self, other: Any) -> Any:
        return ops.eq(self, other)

    def ne(self, other: Any) -> Any:
        return ops.ne(self, other)

    def lt(self, other: Any) -> Any:
        return ops.lt(self, other)

    def le(self, other: Any) -> Any:
        return ops.le(self, other)

    def gt(self, other: Any) -> Any:
        return ops.gt(self, other)

    def ge(self, other: Any) -> Any:
        return ops.ge(self, other)

    def logical_not(self) -> Any:
        return ops.logical_not(self)

    # --- element-wise math ----------------------------------------------------------------------

    def add(self, other: Any, *, alpha: Any = 1) -> Any:
        return ops.add(self, other, alpha=alpha)

    def sub(self, other: Any, *, alpha: Any = 1) -> Any:
        return ops.sub(self, other, alpha=alpha)

    def mul(self, other: Any) -> Any:
        return ops.mul(self, other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Any:
        return ops.div(self, other, rounding_mode=rounding_mode)

    def pow(self, exponent: Any) -> Any:
        return ops.pow(self, exponent)

    def square(self) -> Any:
        return ops.square(self)

    def remainder(self, other: Any) -> Any:
        return ops.remainder(self, other)

    def matmul(self, other: Any) -> Any:
        return ops.matmul(self, other)

    def neg(self) -> Any:
        return ops.neg(self)

    def exp(self) -> Any:
        return ops.exp(self)

    def log(self) -> Any:
        return ops.log(self)

    def tanh(self) -> Any:
        return ops.tanh(self)

    def sigmoid(self) -> Any:
        return ops.sigmoid(self)

    def relu(self) -> Any:
        return ops.relu(self)

    def prelu(self, weight: Any) -> Any:
        """max(0, x) + weight * min(0, x), one slope or one per channel (``zgrad.nn.functional.prelu``)."""
        return prelu(self, weight)

    def abs(self) -> Any:
        return ops.abs(self)

    def sqrt(self) -> Any:
        return ops.sqrt(self)

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's argument names
        return ops.clamp(self, min, max)

    clip = clamp

    def maximum(self, other: Any) -> Any:
        return ops.maximum(self, other)

    def minimum(self, other: Any) -> Any:
        return ops.minimum(self, other)

    def where(self, condition: Any, other: Any) -> Any:
        return ops.where(condition, self, other)

    def masked_fill(self, mask: Any, value: Any) -> Any:
        return ops.masked_fill(self, mask, value)

    def softmax(self, dim: int, dtype: Any = None) -> Any:
        return ops.softmax(self, dim, dtype)

    def log_softmax(self, dim: int, dtype: Any = None) -> Any:
        return ops.log_softmax(self, dim, dtype)

    # --- linear algebra -------------------------------------------------------------------------

    def mm(self, mat2: Any) -> Any:
        return ops.mm(self, mat2)

    def bmm(self, mat2: Any) -> Any:
        return ops.bmm(self, mat2)

    def mv(self, vec: Any) -> Any:
        return ops.mv(self, vec)

    def dot(self, other: Any) -> Any:
        return ops.dot(self, other)

    def vdot(self, other: Any) -> Any:
        return ops.vdot(self, other)

    def inner(self, other: Any) -> Any:
        return ops.inner(self, other)

    def outer(self, vec2: Any) -> Any:
        return ops.outer(self, vec2)

    ger = outer

    def addmm(self, mat1: Any, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        return ops.addmm(self, mat1, mat2, beta=beta, alpha=alpha)

    def baddbmm(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        return ops.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def addbmm(self, batch1: Any, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        return ops.addbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    def addmv(self, mat: Any, vec: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        return ops.addmv(self, mat, vec, beta=beta, alpha=alpha)

    def addr(self, vec1: Any, vec2: Any, *, beta: float = 1, alpha: float = 1) -> Any:
        return ops.addr(self, vec1, vec2, beta=beta, alpha=alpha)

    def kron(self, other: Any) -> Any:
        return ops.kron(self, other)

    def cholesky_solve(self, input2: Any, upper: bool = False) -> Any:
        return cholesky_solve(self, input2, upper)

    def cross(self, other: Any, dim: int | None = None) -> Any:
        return ops.cross(self, other, dim)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
        return legacy_norm(self, p, dim, keepdim, dtype)

    def det(self) -> Any:
        return linalg.det(self)

    def slogdet(self) -> Any:
        return linalg.slogdet(self)

    def inverse(self) -> Any:
        return linalg.inv(self)

    def svd(self, some: bool = True, compute_uv: bool = True) -> Any:
        """PyTorch's older ``Tensor.svd``: ``(U, S, V)`` (:func:`zgrad.svd`)."""
        return legacy_svd(self, some, compute_uv)

    def logdet(self) -> Any:
        return logdet(self)

    def cholesky(self, upper: bool = False) -> Any:
        """PyTorch's deprecated ``Tensor.cholesky`` (:func:`zgrad.cholesky`)."""
        return legacy.cholesky(self, upper)

    def cholesky_inverse(self, upper: bool = False) -> Any:
        return legacy.cholesky_inverse(self, upper)

    def qr(self, some: bool = True) -> Any:
        """PyTorch's deprecated ``Tensor.qr`` (:func:`zgrad.qr`)."""
        return legacy.qr(self, some)

    def triangular_solve(self, A: Any, upper: bool = True, transpose: bool = False,  # noqa: N803
                         unitriangular: bool = False) -> Any:
        """PyTorch's deprecated ``Tensor.triangular_solve`` (:func:`zgrad.triangular_solve`)."""
        return legacy.triangular_solve(self, A, upper, transpose, unitriangular)

    def pinverse(self, rcond: float = 1e-15) -> Any:
        return legacy.pinverse(self, rcond)

    def lu(self, pivot: bool = True, get_infos: bool = False) -> Any:
        """PyTorch's deprecated ``Tensor.lu`` (:func:`zgrad.lu`)."""
        return legacy.lu(self, pivot, get_infos)

    def lu_solve(self, LU_data: Any, LU_pivots: Any) -> Any:  # noqa: N803
        """PyTorch's deprecated ``Tensor.lu_solve`` (:func:`zgrad.lu_solve`)."""
        return legacy.lu_solve(self, LU_data, LU_pivots)

    def matrix_power(self, n: int) -> Any:
        return linalg.matrix_power(self, n)

    def matrix_exp(self) -> Any:
        return linalg.matrix_exp(self)

    def dist(self, other: Any, p: float = 2) -> Any:
        return ops.dist(self, other, p)

    def renorm(self, p: float, dim: int, maxnorm: float) -> Any:
        return ops.renorm(self, p, dim, maxnorm)

    def histogram(self, bins: Any = 100, *, range: Any = None, weight: Any = None,  # noqa: A002
                  density: bool = False) -> Any:
        return ops.histogram(self, bins, range=range, weight=weight, density=density)

    # --- reductions -----------------------------------------------------------------------------

    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return ops.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return ops.mean(self, dim, keepdim, dtype=dtype)

    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return ops.prod(self, dim, keepdim, dtype=dtype)

    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return ops.nansum(self, dim, keepdim, dtype=dtype)

    def cumsum(self, dim: int, *, dtype: Any = None) -> Any:
        return ops.cumsum(self, dim, dtype=dtype)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        return ops.max(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        return ops.min(self, dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return ops.argmax(self, dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return ops.argmin(self, dim, keepdim)

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Any:
        return ops.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Any:
        return ops.std(self, dim, unbiased, keepdim, correction=correction)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Any:
        return ops.logsumexp(self, dim, keepdim)

    # --- layout ---------------------------------------------------------------------------------

    def reshape(self, *shape: Any) -> Any:
        return ops.reshape(self, _dims(shape))

    def view(self, *shape: Any, dtype: Any = None) -> Any:
        """This tensor's memory with another shape (``view(2, -1)``), or read as another dtype
        (``view(zgrad.int32)``, ``view(dtype=...)``: :func:`zgrad.ops.shape.view_dtype`)."""
        if dtype is None and len(shape) == 1 and isinstance(shape[0], np.dtype):
            shape, dtype = (), shape[0]
        if dtype is not None and not shape:
            return ops.shape.view_dtype(self, dtype)
        if dtype is not None or any(isinstance(n, np.dtype) for n in shape):
            got = ", ".join("dtype" if isinstance(n, np.dtype) else type(n).__name__
                            for n in shape + ((dtype,) if dtype is not None else ()))
            raise TypeError(f"view() received an invalid combination of arguments - got ({got}), but expected one "
                            f"of:\n * (dtype dtype)\n * (tuple of ints size)\n")
        return ops.shape.view(self, _dims(shape))

    def view_as(self, other: Any) -> Any:
        return ops.shape.view(self, other.shape)

    def reshape_as(self, other: Any) -> Any:
        return ops.reshape(self, other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        return ops.flatten(self, start_dim, end_dim)

    def unsqueeze(self, dim: int) -> Any:
        return ops.unsqueeze(self, dim)

    def squeeze(self, dim: Any = None) -> Any:
        return ops.squeeze(self, dim)

    def expand(self, *sizes: Any) -> Any:
        return ops.expand(self, _dims(sizes))

    def expand_as(self, other: Any) -> Any:
        return ops.expand(self, other.shape)

    def split(self, split_size_or_sections: Any, dim: int = 0) -> Any:
        return ops.split(self, split_size_or_sections, dim)

    unsafe_split = split

    def split_with_sizes(self, split_sizes: Any, dim: int = 0) -> Any:
        return ops.split(self, list(split_sizes), dim)

    def chunk(self, chunks: int, dim: int = 0) -> Any:
        return ops.chunk(self, chunks, dim)

    unsafe_chunk = chunk

    def transpose(self, dim0: int, dim1: int) -> Any:
        return ops.transpose(self, dim0, dim1)

    def permute(self, *dims: Any) -> Any:
        return ops.permute(self, _dims(dims))

    def t(self) -> Any:
        return ops.t(self)

    @property
    def T(self) -> Any:
        return ops.permute(self, tuple(reversed(range(self.ndim))))

    def gather(self, dim: int, index: Any) -> Any:
        return ops.gather(self, dim, index)

    def index_select(self, dim: int, index: Any) -> Any:
        return ops.index_select(self, dim, index)

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        return ops.scatter(self, dim, index, src, value=value)

    # --- copies and conversions ----------------------------------------------------------------

    def clone(self, *, memory_format: Any = preserve_format) -> Tensor:
        """A differentiable copy, laid out as self where self is dense (a transposed or
        channels-last tensor stays so), else C-contiguous; or as ``memory_format`` says."""
        return ops.clone(self, memory_format)

    def contiguous(self, memory_format: Any = contiguous_format) -> Tensor:
        """Self if its elements are laid out as ``memory_format`` says (C order by default), else
        a differentiable copy laid out so.

        Raises:
            RuntimeError: ``preserve_format`` where a copy would be needed (PyTorch's message).
        """
        if memory_format is preserve_format:
            if self._data.flags.c_contiguous:
                return self
            raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
        return self if self.is_contiguous(memory_format) else ops.clone(self, memory_format)

    def to(self, *args: Any, copy: bool = False, memory_format: Any = preserve_format, **kwargs: Any) -> Tensor:
        """This tensor in another dtype or on another device: ``to(dtype)``, ``to(device)``,
        ``to(device, dtype)``, ``to(other)``, and laid out as ``memory_format`` says (when not
        ``preserve_format``); self when nothing changes (unless ``copy``). A dtype change is
        differentiable.

        A device change copies (blocking until a copy to the host has arrived) and is
        differentiable: the gradient flows back to this tensor's device.

        Raises:
            ZgradError: a CUDA device where none can be used (the message names the simulator).
        """
        device, dtype = parse_to_args(*args, **kwargs)
        result = self
        if device is not None and device != self.device:
            result = ops.to_device(self, check_supported(device).type)
        if dtype is not None and dtype != self.dtype:
            result = ops.cast(result, dtype)
        if memory_format is not preserve_format:
            laid_out = result.contiguous(memory_format)
            return ops.clone(result, memory_format) if copy and laid_out is self else laid_out
        return ops.clone(result) if copy and result is self else result

    def cpu(self) -> Tensor:
        """This tensor on the host: self on CPU, else a copy."""
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Tensor:
        """This tensor on a CUDA device (``device``: an index, "cuda:N", a device, or None for the
        current); ``non_blocking`` and ``memory_format`` are accepted as PyTorch's.

        Raises:
            ZgradError: no CUDA device can be used here, or ``device`` is not a CUDA device.
        """
        return self.to(cuda_device(device))

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def float(self) -> Tensor:
        return self.to(np.float32)

    def double(self) -> Tensor:
        return self.to(np.float64)

    def half(self) -> Tensor:
        return self.to(np.float16)

    def bfloat16(self) -> Tensor:
        return self.to(BFLOAT16)

    def long(self) -> Tensor:
        return self.to(np.int64)

    def int(self) -> Tensor:
        return self.to(np.int32)

    def bool(self) -> Tensor:
        return self.to(np.bool_)

    def byte(self) -> Tensor:
        return self.to(np.uint8)

    def char(self) -> Tensor:
        return self.to(np.int8)

    def short(self) -> Tensor:
        return self.to(np.int16)
