"""One dispatch for every array op: picks the backend by device, owns allocation, broadcasting
and dtype rules, and calls the backend's kernel with a freshly allocated ``out``.

Ops above this layer call these functions and never name a device-specific one, nor does
dispatch (DLPack included). A backend is a module implementing the op vocabulary
(:data:`~zgrad.kernels.vocabulary.OPS`, checked when it loads); the CPU backend is
:mod:`zgrad.kernels.cpu.backend`, a CUDA backend plugs in under ``"cuda"`` and is imported only on first
CUDA use.

Groups of ops have companion modules under the same rules: ``dispatch_pointwise`` (clamp,
comparisons, in-place updates), ``dispatch_index``, ``dispatch_reduce``, ``dispatch_sequence``
(embeddings, recurrences, dropout), ``dispatch_loss``, ``dispatch_layers`` (convolution,
pooling, normalization) and ``dispatch_collectives`` (the element-wise reductions of
collectives and DDP's buckets).
"""

from __future__ import annotations

import functools

import importlib
from typing import Any, Callable, Sequence

import numpy as np

from zgrad.errors import DTypeError, IntegerDivisionByZeroError, ShapeError, ZgradError
from zgrad.kernels.half_precision import HalfPrecisionBackend
from zgrad.kernels.promotion import BFLOAT16, get_default_dtype, is_floating, result_type
from zgrad.kernels.vocabulary import OPS

__all__ = [
    "OPS", "DEFAULT_FLOAT", "INT64", "backend", "backend_of", "backend_available", "device_type_of", "empty", "full",
    "asarray", "float_dtype", "scalar_type_name", "cpp_type_name", "sum_dtype", "mean_dtype", "broadcast_shape", "sum_to",
    "broadcast_axes", "binary",
    "unary", "activation_backward", "matmul", "matmul_with_row_sums", "reduce_sum", "reduce_axes", "rowwise", "rowwise_backward", "bias_act", "stack",
    "concatenate", "slice_backward", "cast",
    "as_dtype", "as_int64", "contiguous", "broadcast_to", "to_device", "host_buffer", "dlpack_capsule", "dlpack_device", "from_dlpack", "pin_memory", "is_pinned", "add_inplace", "scale_inplace", "copy_into",
    "check_integer_divisor", "integer_operand",
]

_BACKEND_MODULES = {"cpu": "zgrad.kernels.cpu.backend", "cuda": "zgrad.kernels.cuda.backend"}
_loaded: dict[str, Any] = {}

DEFAULT_FLOAT = np.dtype(np.float32)
INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)
# Ops PyTorch refuses on bool tensors (a result of bool dtype): arithmetic with no logical meaning.
_NOT_FOR_BOOL = frozenset({"neg", "abs", "remainder", "floor_divide", "pow"})
# Ops that divide: integer results refuse a zero divisor.
_DIVIDING = frozenset({"remainder", "floor_divide", "fmod"})


def backend(device_type: str) -> HalfPrecisionBackend:
    """Return the backend module for ``device_type`` ("cpu" or "cuda"), importing it on first use.

    Raises:
        ValueError: the device type is unknown.
        ZgradError: the backend cannot be loaded here: its packages are missing (the message names
            the extras to install) or there is no CUDA device (the message names the simulator).
    """
    module = _loaded.get(device_type)
    if module is not None:
        return module
    name = _BACKEND_MODULES.get(device_type)
    if name is None:
        raise ValueError(f"unknown device type {device_type!r}; expected one of {sorted(_BACKEND_MODULES)}")
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ZgradError(
            f"the {device_type!r} backend is not available: {exc}. "
            "Install the CUDA extras with: pip install 'zgrad[cuda]'"
        ) from exc
    missing = [op for op in OPS if not hasattr(module, op)]
    if missing:
        raise RuntimeError(f"backend {name} does not implement: {', '.join(missing)}")
    module = HalfPrecisionBackend(module)  # half dtypes are computed on in float32, decided there
    _loaded[device_type] = module
    return module


def backend_available(device_type: str) -> bool:
    """Whether the backend of ``device_type`` loads here (what ``zgrad.accelerator`` reports)."""
    try:
        backend(device_type)
    except (RuntimeError, ValueError):
        return False
    return True


def device_type_of(array: Any) -> str:
    """The device type an array lives on: "cpu" for numpy arrays (and scalars), "cuda" for device
    arrays: zgrad's own, any with a ``__cuda_array_interface__``, and Numba simulator arrays
    (which forward numpy's attributes but are not host memory)."""
    if isinstance(array, np.ndarray):
        return "cpu"
    device_type = getattr(type(array), "zgrad_device_type", None)
    if device_type is not None:
        return device_type
    if hasattr(array, "__cuda_array_interface__") or hasattr(array, "__cuda_ndarray__"):
        return "cuda"
    return "cpu"


def to_device(array: Any, device_type: str):
    """``array`` on ``device_type``: itself when it is already there, else a copy (blocks until
    a copy to the host has arrived)."""
    source = device_type_of(array)
    if source == device_type:
        return array
    if device_type == "cpu":
        return backend(source).to_host(array)
    return backend(device_type).asarray(array)


def host_buffer(array: Any) -> np.ndarray:
    """``array`` as C-contiguous host memory for a transport: a numpy array as it is (copied
    only if strided), a device array staged through a pinned buffer of the CUDA backend's pool
    (returned there once the staged copy and its views are gone)."""
    if isinstance(array, np.ndarray):
        return np.ascontiguousarray(array)
    return backend(device_type_of(array)).staged_to_host(array)


def is_sole_view(array: Any) -> bool:
    """Whether device ``array`` spans its whole allocation, C-contiguous and writeable, with nothing
    else referring to that memory, so that the only holder of ``array`` may keep the memory as its
    own (see ``DeviceArray.is_sole_view``). False for arrays of other kinds: numpy arrays have their
    own ``base`` chain to follow, and a foreign device array's memory is never zgrad's to keep."""
    check = getattr(type(array), "is_sole_view", None)
    return check is not None and check(array)


def pin_memory(array: Any):
    """A copy of host ``array`` in page-locked memory of the CUDA backend's pool, from which
    copies to the device are faster (the DataLoader's ``pin_memory=True``); a device array as it
    is. Blocks until copied.

    Raises:
        ZgradError: the CUDA backend cannot load here.
    """
    if device_type_of(array) != "cpu":
        return array
    return backend("cuda").pinned_copy(array)


def is_pinned(array: Any) -> bool:
    """Whether host ``array`` lies in page-locked memory from :func:`pin_memory` (False while the
    CUDA backend has not loaded, since only it pins; this never loads it)."""
    cuda = _loaded.get("cuda")
    return cuda is not None and device_type_of(array) == "cpu" and cuda.is_pinned(array)


def dlpack_capsule(array: Any, **kwargs: Any) -> Any:
    """A DLPack capsule of ``array``'s memory, made by the backend ``array`` lives on (numpy's
    for a host array).

    Raises:
        BufferError: a device array in the CUDA simulator, or a dtype DLPack cannot name.
    """
    return backend_of(array).to_dlpack(array, **kwargs)


def dlpack_device(array: Any) -> tuple[int, int]:
    """(DLPack device type, device index) of ``array``."""
    return backend_of(array).dlpack_device(array)


def from_dlpack(obj: Any) -> Any:
    """The array behind any DLPack producer, without a copy: a numpy array for host memory, a
    device array for CUDA memory (through the CUDA backend).

    Raises:
        BufferError: the producer's memory is on a device zgrad cannot compute on.
    """
    device_type = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
    if device_type in (1, 3):  # kDLCPU, kDLCUDAHost
        return backend("cpu").from_dlpack(obj)
    if device_type != 2:
        raise BufferError(f"from_dlpack: DLPack device type {device_type} is neither the CPU nor CUDA")
    return backend("cuda").from_dlpack(obj)  # the clear "no CUDA device" error where there is none


def backend_of(*arrays: Any) -> HalfPrecisionBackend:
    """The backend shared by ``arrays``; Python scalars go with any device.

    Raises:
        RuntimeError: the arrays live on different devices.
    """
    found = None
    for a in arrays:
        if type(a) is np.ndarray:
            d = "cpu"
        elif isinstance(a, (int, float, bool)):
            continue
        else:
            d = device_type_of(a)
        if found is None:
            found = d
        elif d != found:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, {found} and {d}")
    return backend(found or "cpu")


# --- allocation and dtype rules ---------------------------------------------------------------

def empty(shape: Sequence[int], dtype: Any, device_type: str = "cpu"):
    return backend(device_type).empty(tuple(shape), np.dtype(dtype))


def full(shape: Sequence[int], value: float, dtype: Any, device_type: str = "cpu"):
    return backend(device_type).full(tuple(shape), value, np.dtype(dtype))


def asarray(data: Any, dtype: Any = None, device_type: str = "cpu"):
    return backend(device_type).asarray(data, None if dtype is None else np.dtype(dtype))


def float_dtype(dtype: np.dtype) -> np.dtype:
    """The floating dtype an op on ``dtype`` computes in: itself if floating, else the default
    dtype (float32 unless ``zgrad.set_default_dtype`` changed it)."""
    return dtype if is_floating(dtype) else get_default_dtype()


_SCALAR_TYPE_NAMES = {
    np.dtype(np.bool_): "Bool", np.dtype(np.uint8): "Byte", np.dtype(np.int8): "Char", np.dtype(np.int16): "Short",
    np.dtype(np.int32): "Int", np.dtype(np.int64): "Long", np.dtype(np.float16): "Half", BFLOAT16: "BFloat16",
    np.dtype(np.float32): "Float", np.dtype(np.float64): "Double",
}


def scalar_type_name(dtype: np.dtype) -> str:
    """PyTorch's name of ``dtype`` (its ScalarType name: "Float", "Long", ...), for errors worded
    as PyTorch's."""
    return _SCALAR_TYPE_NAMES.get(np.dtype(dtype), str(dtype))


_CPP_TYPE_NAMES = {
    np.dtype(np.bool_): "bool", np.dtype(np.uint8): "unsigned char", np.dtype(np.int8): "signed char",
    np.dtype(np.int16): "short int", np.dtype(np.int32): "int", np.dtype(np.int64): "long int",
    np.dtype(np.float16): "c10::Half", BFLOAT16: "c10::BFloat16", np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}


def cpp_type_name(dtype: np.dtype) -> str:
    """PyTorch's C++ name of ``dtype`` ("float", "long int", ...), which some of its errors use."""
    return _CPP_TYPE_NAMES.get(np.dtype(dtype), str(dtype))


def sum_dtype(dtype: np.dtype, requested: Any = None) -> np.dtype:
    """The dtype of a sum, product, cumulative sum or nansum of a ``dtype`` array: ``requested``
    if given (the caller casts the input to it first, as PyTorch's ``dtype=``), else int64 for bool
    and integer arrays (PyTorch's promotion: a count of a mask or a sum of bytes does not wrap),
    else ``dtype`` itself."""
    if requested is not None:
        return np.dtype(requested)
    return INT64 if dtype.kind in "biu" else dtype


def mean_dtype(dtype: np.dtype, requested: Any = None) -> np.dtype:
    """The dtype of a mean of a ``dtype`` array: ``requested`` if given (the caller casts the input
    to it first), else ``dtype`` itself.

    Raises:
        RuntimeError: that dtype is not floating (PyTorch infers no dtype for the mean of integers),
            with PyTorch's message.
    """
    result = dtype if requested is None else np.dtype(requested)
    if not is_floating(result):
        which = "Input" if requested is None else "Optional"
        raise RuntimeError(f"mean(): could not infer output dtype. {which} dtype must be either a floating point or "
                           f"complex dtype. Got: {scalar_type_name(result)}")
    return result


def _result_dtype(a: Any, b: Any) -> np.dtype:
    return result_type(a, b)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's (and PyTorch's) broadcast of two shapes.

    Raises:
        ShapeError: the shapes cannot be broadcast, in PyTorch's words (the first dimension, from
            the right, where they differ).
    """
    if a == b or not b:
        return a
    if not a:
        return b
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        for offset in range(1, min(len(a), len(b)) + 1):
            if a[-offset] != b[-offset] and 1 not in (a[-offset], b[-offset]):
                raise ShapeError(f"The size of tensor a ({a[-offset]}) must match the size of tensor b "
                                 f"({b[-offset]}) at non-singleton dimension {max(len(a), len(b)) - offset}") from None
        raise ShapeError(f"shapes {list(a)} and {list(b)} cannot be broadcast together") from None


def sum_to(x: Any, shape: tuple[int, ...]):
    """Sum ``x`` down to ``shape``, undoing a numpy broadcast (the backward of broadcasting).

    Raises:
        ShapeError: ``x``'s shape is not a broadcast of ``shape``.
    """
    if x.shape == shape:
        return x
    reduced = reduce_sum(x, broadcast_axes(x.shape, shape), keepdims=True)
    return reduced.reshape(shape)


def broadcast_axes(source: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The axes of ``source`` to sum (keeping them) so that it reshapes to ``shape``, of which
    it is a numpy broadcast.

    Raises:
        ShapeError: ``source`` is not a broadcast of ``shape``.
    """
    lead = len(source) - len(shape)
    if lead < 0:
        raise ShapeError(f"cannot sum a gradient of shape {list(source)} down to shape {list(shape)}")
    axes = list(range(lead))
    for i, n in enumerate(shape):
        got = source[lead + i]
        if n == 1 and got != 1:
            axes.append(lead + i)
        elif n != got:
            raise ShapeError(f"cannot sum a gradient of shape {list(source)} down to shape {list(shape)}")
    return tuple(axes)


# --- element-wise -----------------------------------------------------------------------------

def _shape_of(a: Any) -> tuple[int, ...]:
    return getattr(a, "shape", ())


def check_integer_divisor(op: str, divisor: Any, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """PyTorch's refusal of an integer division by zero: ``op`` ("floor_divide", "remainder",
    "fmod"; others pass) computed in integer ``dtype`` into a result of ``shape`` with some
    elements, with a zero in ``divisor`` (an array on any device, or a number). Costs one pass
    over ``divisor`` (and one number back from a device).

    Raises:
        IntegerDivisionByZeroError: ``divisor`` holds a zero (PyTorch's RuntimeError "ZeroDivisionError").
    """
    if op not in _DIVIDING or dtype.kind not in "iu" or 0 in shape:
        return
    if isinstance(divisor, (np.ndarray, np.generic)) or not hasattr(divisor, "shape"):
        has_zero = not np.all(divisor)
    else:  # a device array: the product of its truth values is 0 where one element is 0
        truth = reduce_axes("prod", cast(divisor, _BOOL))
        has_zero = not to_device(truth, "cpu").item()
    if has_zero:
        raise IntegerDivisionByZeroError("ZeroDivisionError")


def binary(op: str, a: Any, b: Any, dtype: Any = None):
    """``op`` ("add", "sub", "mul", "div", "pow", "floor_divide", "remainder", ...) of two arrays
    or an array and a scalar, broadcast.

    Raises:
        DTypeError: an op PyTorch refuses on bool. IntegerDivisionByZeroError: an integer
            floor_divide or remainder by zero.
    """
    be = backend_of(a, b)
    if dtype is None and type(a) is type(b) and (type(a) is np.ndarray or hasattr(type(a), "zgrad_device_type")) \
            and a.shape == b.shape and a.dtype == b.dtype and (op != "div" or is_floating(a.dtype)) and a.dtype != _BOOL:
        check_integer_divisor(op, b, a.dtype, a.shape)
        return getattr(be, op)(a, b, be.empty(a.shape, a.dtype))  # same shape and dtype: nothing to work out
    shape = broadcast_shape(_shape_of(a), _shape_of(b))
    if dtype is None:
        dtype = _result_dtype(a, b)
        if op == "div":
            dtype = float_dtype(dtype)
        elif dtype == _BOOL and op in _NOT_FOR_BOOL:
            raise DTypeError(f'"{op}_cpu" not implemented for \'Bool\'')
    check_integer_divisor(op, b, dtype, shape)
    out = be.empty(shape, dtype)
    if out.dtype.kind in "iu":
        a, b = integer_operand(a, out.dtype), integer_operand(b, out.dtype)
    return getattr(be, op)(a, b, out)


def integer_operand(x: Any, dtype: np.dtype) -> Any:
    """``x`` (an array or a number) as an operand of an op computed in integer ``dtype``: an integer
    of another dtype, or a number ``dtype`` cannot hold, converted to ``dtype`` first, wrapping as
    PyTorch converts it (numpy refuses an int64 array or -1 beside a uint8 result, and would take
    max(int8, int64) in int64)."""
    kind = getattr(x, "dtype", None)
    if kind is not None:
        return x.astype(dtype) if kind != dtype and kind.kind in "iu" else x
    if isinstance(x, int) and not isinstance(x, bool):
        low, high = _integer_range(dtype)
        if not low <= x <= high:
            return dtype.type(np.array(x).astype(dtype))
    return x


@functools.cache
def _integer_range(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def unary(op: str, x: Any):
    """``op`` ("neg", "exp", "log", "tanh", "sigmoid", "relu") of an array, in its floating dtype."""
    be = backend_of(x)
    if x.dtype == _BOOL and op in _NOT_FOR_BOOL:
        raise DTypeError(f'"{op}_cpu" not implemented for \'Bool\'' if op != "neg" else
                         "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert "
                         "a mask, use the `~` or `logical_not()` operator instead.")
    dtype = x.dtype if op in ("neg", "relu", "abs") else float_dtype(x.dtype)
    if x.dtype != dtype:
        x = cast(x, dtype)
    return getattr(be, op)(x, be.empty(x.shape, dtype))


def activation_backward(op: str, grad: Any, saved: Any):
    """Gradient of an activation: ``op`` in "relu_backward", "tanh_backward", "sigmoid_backward"."""
    be = backend_of(grad, saved)
    if grad.dtype != saved.dtype:
        grad = cast(grad, saved.dtype)
    return getattr(be, op)(grad, saved, be.empty(saved.shape, saved.dtype))


def add_inplace(out: Any, other: Any):
    """out += other (broadcast); ``out`` must be an array the caller owns."""
    be = backend_of(out, other)
    return be.add(out, other, out)


def scale_inplace(out: Any, factor: float):
    """out *= factor (a Python number) in out's dtype; ``out`` must be an array the caller owns."""
    return backend_of(out).mul(out, factor, out)


def copy_into(out: Any, x: Any):
    """out = x (same shape; cast to ``out``'s dtype); returns ``out``."""
    if out.shape != x.shape:
        raise ShapeError(f"copy_into: out has shape {list(out.shape)}, the source {list(x.shape)}")
    return backend_of(out, x).copy(x, out)


def cast(x: Any, dtype: Any):
    """A copy of ``x`` in ``dtype``."""
    be = backend_of(x)
    return be.copy(x, be.empty(x.shape, np.dtype(dtype)))


def as_dtype(x: Any, dtype: Any):
    """``x`` itself if it already has ``dtype``, else a copy in ``dtype``."""
    return x if x.dtype == dtype else cast(x, dtype)


def as_int64(indices: Any):
    """``indices`` as a C-contiguous int64 array (itself if it already is one)."""
    if indices.dtype == INT64 and indices.flags.c_contiguous:
        return indices
    return cast(indices, INT64)


def contiguous(x: Any):
    """``x`` itself if C-contiguous, else a C-contiguous copy on its device."""
    return x if x.flags.c_contiguous else cast(x, x.dtype)


def broadcast_to(x: Any, shape: tuple[int, ...]):
    """A read-only broadcast view of ``x`` to ``shape``, on its device (numpy's rules)."""
    if isinstance(x, np.ndarray):
        return np.broadcast_to(x, shape)
    return x.broadcast_to(shape)


# --- linear algebra and reductions ------------------------------------------------------------

def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if not a or not b:
        raise ShapeError("both arguments to matmul need to be at least 1D, but they are "
                         f"{len(a)}D and {len(b)}D")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"matmul: shapes {list(a)} and {list(b)} do not match: {a2[-1]} (last dim of the first) != {b2[-2]}"
        )
    try:
        batch = broadcast_shape(a2[:-2], b2[:-2])
    except ValueError:
        raise ShapeError(
            f"matmul: shapes {list(a)} and {list(b)} do not match: batch dimensions {list(a2[:-2])} and "
            f"{list(b2[:-2])} cannot be broadcast together"
        ) from None
    shape = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b) == 1:
        shape = shape[:-1]
    return shape


def matmul(a: Any, b: Any, bias: Any = None):
    """numpy's matmul (batched and vector cases included) into a fresh ``out``, of the dtype both
    arrays share (PyTorch promotes none in its products); plus ``bias``, a 1-D array of the
    product's columns and dtype, when given (a linear layer's: the CUDA backend adds it in
    cuBLASLt's epilogue).

    Raises:
        ValueError: the inner dimensions do not match, naming both shapes.
        DTypeError: the dtypes differ, with PyTorch's message.
        NotImplementedError: bool arrays, as PyTorch.
    """
    be = backend_of(a, b)
    shape = _matmul_shape(a.shape, b.shape)
    if a.dtype != b.dtype:
        raise DTypeError(f"expected m1 and m2 to have the same dtype, but got: {cpp_type_name(a.dtype)} != "
                         f"{cpp_type_name(b.dtype)}")
    if a.dtype == np.bool_:
        raise NotImplementedError('"addmm_impl_cpu_" not implemented for \'Bool\'')
    if bias is None:
        return be.matmul(a, b, be.empty(shape, a.dtype))
    if bias.shape != shape[-1:] or bias.dtype != a.dtype:
        raise ShapeError(f"matmul: a bias of shape {list(bias.shape)} and dtype {bias.dtype} does not fit a product of "
                         f"shape {list(shape)} and dtype {a.dtype}")
    return be.matmul(a, b, be.empty(shape, a.dtype), bias)


def matmul_with_row_sums(a: Any, b: Any) -> tuple[Any, Any]:
    """(a @ b, a's rows summed) for matrices of one floating dtype: a linear layer's weight and
    bias gradients (a = the output gradient transposed), which the CUDA backend computes in one
    cuBLASLt call."""
    be = backend_of(a, b)
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.shape[1] != b.shape[0]:
        raise ShapeError(f"matmul_with_row_sums: matrices of one dtype that multiply, not {list(a.shape)} {a.dtype} "
                         f"and {list(b.shape)} {b.dtype}")
    out, sums = be.empty((a.shape[0], b.shape[1]), a.dtype), be.empty((a.shape[0],), a.dtype)
    be.matmul(a, b, out, None, sums)
    return out, sums


def _normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (an int, a sequence, or None for all) as sorted axes in [0, ndim); a 0-d array
    accepts 0 and -1, as PyTorch, and has no axis to reduce.

    Raises:
        IndexError: an axis is out of range. ShapeError: an axis is named twice (PyTorch's message).
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = max(ndim, 1)
    norm = []
    for ax in axes:
        if not -n <= ax < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {ax})")
        if ax % n in norm:
            raise ShapeError(f"dim {ax % n} appears multiple times in the list of dims")
        norm.append(ax % n)
    return tuple(sorted(norm)) if ndim else ()


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def reduce_sum(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None):
    """Sum over ``axis`` (None = all) into a fresh ``out`` of :func:`sum_dtype` (``dtype`` if given)."""
    return reduce_axes("sum", x, axis, keepdims, dtype)


def reduce_axes(op: str, x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None):
    """``op`` ("sum", "prod", or "nansum", a sum that skips NaNs) over ``axis`` (an int, a tuple,
    or None for all) into a fresh ``out`` of :func:`sum_dtype` (``dtype`` if given), accumulated
    in that dtype.

    Raises:
        IndexError: a dimension is out of range.
    """
    be = backend_of(x)
    axes = _normalize_axes(axis, x.ndim)
    out = be.empty(_reduced_shape(x.shape, axes, keepdims), sum_dtype(x.dtype, dtype))
    return getattr(be, op)(x, axes, keepdims, out)


# --- row-wise fused ops -----------------------------------------------------------------------

def rowwise(op: str, x: Any):
    """``op`` ("softmax", "log_softmax") over the last axis."""
    be = backend_of(x)
    dtype = float_dtype(x.dtype)
    if x.dtype != dtype:
        x = cast(x, dtype)
    return getattr(be, op)(x, be.empty(x.shape, dtype))


def rowwise_backward(op: str, grad: Any, y: Any):
    """Gradient of a row-wise op: ``op`` in "softmax_backward", "log_softmax_backward"."""
    be = backend_of(grad, y)
    if grad.dtype != y.dtype:
        grad = cast(grad, y.dtype)
    return getattr(be, op)(grad, y, be.empty(y.shape, y.dtype))


def bias_act(x: Any, bias: Any, activation: str):
    """act(x + bias) over the last axis in one pass; activation in identity/relu/tanh/sigmoid."""
    be = backend_of(x, bias)
    dtype = _result_dtype(x, bias)
    if bias.dtype != dtype:
        bias = cast(bias, dtype)
    if x.dtype != dtype:
        x = cast(x, dtype)
    return be.bias_act(x, bias, activation, be.empty(x.shape, dtype))


# --- layout -----------------------------------------------------------------------------------

def stack(arrays: Sequence[Any], axis: int, empty: Callable[[tuple[int, ...], np.dtype], Any] | None = None):
    """Join same-shaped arrays along a new ``axis``; ``empty(shape, dtype)``, when given, allocates
    the result (a DataLoader worker's shared memory) instead of the backend."""
    # One array per type decides the device as well as all of them (a collated batch stacks
    # dozens of samples: their checks run per sample, so they stay cheap).
    be = backend_of(*{type(a): a for a in arrays}.values())
    first = arrays[0]
    if len({a.shape for a in arrays}) > 1:
        i, a = next((i, a) for i, a in enumerate(arrays) if a.shape != first.shape)
        raise ShapeError(f"stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 and {list(a.shape)} at entry {i}")
    ndim = first.ndim + 1
    if not -ndim <= axis < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {axis})")
    axis %= ndim
    dtypes = {a.dtype for a in arrays}
    dtype = dtypes.pop() if len(dtypes) == 1 else result_type(*arrays)  # equal shapes: one dtype is the result
    shape = first.shape[:axis] + (len(arrays),) + first.shape[axis:]
    return be.stack(arrays, axis, (be.empty if empty is None else empty)(shape, dtype))


def concatenate(arrays: Sequence[Any], axis: int):
    be = backend_of(*arrays)
    first = arrays[0]
    if first.ndim == 0:
        raise ShapeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    if not -first.ndim <= axis < first.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-first.ndim}, {first.ndim - 1}], but got {axis})")
    axis %= first.ndim
    for i, a in enumerate(arrays):
        if a.ndim != first.ndim or a.shape[:axis] != first.shape[:axis] or a.shape[axis + 1:] != first.shape[axis + 1:]:
            raise ShapeError(
                f"Sizes of tensors must match except in dimension {axis}: got {list(first.shape)} at entry 0 and {list(a.shape)} at entry {i}"
            )
    shape = first.shape[:axis] + (sum(a.shape[axis] for a in arrays),) + first.shape[axis + 1:]
    return be.concatenate(arrays, axis, be.empty(shape, result_type(*arrays)))


def slice_backward(grad: Any, index: Any, shape: tuple[int, ...], dtype: Any):
    """A zero array of ``shape`` with ``grad`` added at ``index``."""
    be = backend_of(grad)
    return be.scatter_slice(index, grad, be.full(shape, 0, np.dtype(dtype)))
