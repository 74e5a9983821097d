"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``full``, ``empty``, ``eye``, ``arange``,
``linspace``, ``logspace``, the ``*_like`` forms, the legacy typed constructors (``FloatTensor``,
``LongTensor``, ...), ``from_numpy``, ``from_dlpack``, ``as_tensor``, ``asarray`` and ``scalar_tensor``. The random ones are in
:mod:`zgrad.creation_random`."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Callable

import numpy as np

from zgrad.device import CPU, Device, check_supported
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import HALF_DTYPES, get_default_dtype, is_floating
from zgrad.memory_formats import check_strided, dim_order, preserve_format, preserved_order
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = ["tensor", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
           "empty_like", "eye", "linspace", "logspace", "from_numpy", "from_dlpack", "as_tensor", "asarray", "scalar_tensor", "set_default_device", "get_default_device", "arange", "legacy_range", "FloatTensor",
           "DoubleTensor", "LongTensor", "IntTensor", "BoolTensor", "device_arg", "size_arg", "wrap"]

def factory_size(sizes: tuple[Any, ...], size: Any, what: str) -> tuple[int, ...]:
    """The shape a factory is given: its ``*sizes``, or its ``size=`` keyword (PyTorch takes either).

    Raises:
        TypeError: both, in PyTorch's words. ShapeError, ValueError: as :func:`size_arg`.
    """
    if size is None:
        return size_arg(sizes)
    if sizes:
        raise TypeError(f"{what}() received an invalid combination of arguments - got sizes both positionally "
                        f"{list(sizes)} and as size={size!r}")
    return size_arg((size,))


def size_arg(size: tuple[Any, ...]) -> tuple[int, ...]:
    """The shape a factory's ``*size`` names: ints, or one tuple or list of ints.

    Raises:
        ShapeError: a negative size (also a ValueError).
        ValueError: a size that is not an int.
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for n in size:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ValueError(f"a tensor size must be a non-negative int, got {n!r} in {size!r}")
        if n < 0:
            raise ShapeError(f"Trying to create tensor with negative dimension {n}: {list(size)} "
                             f"(a tensor size must be a non-negative int)")
    return tuple(int(n) for n in size)


_defaults = threading.local()


def set_default_device(device: Any) -> None:
    """Make factories of the calling thread create tensors on ``device`` when they are given none
    (``None`` restores the CPU), as ``torch.set_default_device``; ``from_numpy`` stays on the CPU.

    Raises:
        ZgradError: a CUDA device where none can be used.
    """
    _defaults.device = None if device is None else check_supported(device)


def get_default_device() -> Device:
    """The device factories of the calling thread use when given none."""
    return getattr(_defaults, "device", None) or CPU


def device_arg(device: Any) -> Device:
    """The device a factory given ``device`` creates on (None: :func:`get_default_device`).

    Raises:
        ZgradError: a CUDA device where none can be used.
        ValueError: an unknown device string.
    """
    return get_default_device() if device is None else check_supported(device)


def wrap(array: Any, requires_grad: bool) -> Tensor:
    """A new leaf tensor over ``array``.

    Raises:
        AutogradError: ``requires_grad`` on a non-floating dtype.
    """
    return Tensor(array).requires_grad_(True) if requires_grad else Tensor(array)


def _finish(array: np.ndarray, requires_grad: bool, device: Any) -> Tensor:
    """Wrap host ``array``, copied to ``device`` (default: :func:`get_default_device`) unless that
    is the CPU."""
    device = device_arg(device)
    if device.type != "cpu":
        array = dispatch.to_device(array, device.type)
    return wrap(array, requires_grad)


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A new tensor holding a copy of ``data``.

    A numpy array keeps its dtype; Python floats give float32 and ints int64, unless ``dtype``
    says otherwise.

    Raises:
        AutogradError: ``requires_grad`` on a non-floating dtype.
    """
    if isinstance(data, Tensor):
        device = data.device if device is None else device
        data = data._host()
    if dtype is not None:
        array = np.array(data, dtype=np.dtype(dtype))
    elif isinstance(data, np.ndarray):
        array = data.copy()
    else:
        array = np.array(data)
        if array.dtype == np.float64:
            array = array.astype(get_default_dtype())
    return _finish(array, requires_grad, device)


def empty(*sizes: Any, size: Any = None, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """An uninitialized tensor; the size as ints, one tuple, or ``size=``."""
    return _finish(np.empty(factory_size(sizes, size, "empty"), dtype=dtype or get_default_dtype()), requires_grad, device)


def _scalar_dtype(value: Any) -> np.dtype:
    """PyTorch's dtype for a Python number: bool, int64, or the default float."""
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_)
    if isinstance(value, (int, np.integer)):
        return np.dtype(np.int64)
    return get_default_dtype()


def full(size: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``; the dtype follows the value (bool, int64,
    or float32) unless given."""
    dtype = np.dtype(dtype) if dtype is not None else _scalar_dtype(fill_value)
    return _finish(np.full(size_arg((size,)), fill_value, dtype=dtype), requires_grad, device)


def zeros(*sizes: Any, size: Any = None, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of zeros; the size as ints, one tuple, or ``size=``."""
    return _finish(np.zeros(factory_size(sizes, size, "zeros"), dtype=dtype or get_default_dtype()), requires_grad, device)


def ones(*sizes: Any, size: Any = None, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A tensor of ones; the size as ints, one tuple, or ``size=``."""
    return _finish(np.ones(factory_size(sizes, size, "ones"), dtype=dtype or get_default_dtype()), requires_grad, device)


def _like(make: Any, input: Tensor, dtype: Any, requires_grad: bool, device: Any, *args: Any,  # noqa: A002
          layout: Any = None, memory_format: Any = None) -> Tensor:
    """``make(input.shape, *args)`` with ``input``'s dtype and device unless given, laid out as
    ``input`` where it is dense (PyTorch's ``preserve_format``) or as ``memory_format`` says.

    Raises:
        RuntimeError: a sparse ``layout``.
    """
    device = input.device if device is None else device
    if layout is None and (memory_format is None or memory_format is preserve_format) and input._data.flags.c_contiguous:
        return make(input.shape, *args, dtype=dtype or input.dtype, requires_grad=requires_grad, device=device)
    check_strided(layout, make.__name__ + "_like")
    natural = tuple(range(input.ndim))
    if memory_format is None or memory_format is preserve_format:
        order = preserved_order(input.shape, input.stride())
    else:
        order = dim_order(memory_format, input.ndim)
    made = make(tuple(input.shape[d] for d in order), *args, dtype=dtype or input.dtype, requires_grad=requires_grad,
                device=device)
    if order == natural:
        return made
    inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
    return wrap(made._data.transpose(inverse), made.requires_grad)


def zeros_like(input: Tensor, dtype: Any = None, requires_grad: bool = False, device: Any = None, *,  # noqa: A002
               layout: Any = None, memory_format: Any = None) -> Tensor:
    """Zeros of ``input``'s shape (and dtype and device, unless given)."""
    return _like(zeros, input, dtype, requires_grad, device, layout=layout, memory_format=memory_format)


def ones_like(input: Tensor, dtype: Any = None, requires_grad: bool = False, device: Any = None, *,  # noqa: A002
              layout: Any = None, memory_format: Any = None) -> Tensor:
    """Ones of ``input``'s shape (and dtype and device, unless given)."""
    return _like(ones, input, dtype, requires_grad, device, layout=layout, memory_format=memory_format)


def full_like(input: Tensor, fill_value: Any, dtype: Any = None, requires_grad: bool = False,  # noqa: A002
              device: Any = None, *, layout: Any = None, memory_format: Any = None) -> Tensor:
    """``fill_value`` in ``input``'s shape (and dtype and device, unless given)."""
    return _like(full, input, dtype, requires_grad, device, fill_value, layout=layout, memory_format=memory_format)


def empty_like(input: Tensor, dtype: Any = None, requires_grad: bool = False, device: Any = None, *,  # noqa: A002
               layout: Any = None, memory_format: Any = None) -> Tensor:
    """An uninitialized tensor of ``input``'s shape (and dtype and device, unless given)."""
    return _like(empty, input, dtype, requires_grad, device, layout=layout, memory_format=memory_format)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: Any = None, requires_grad: bool = False,
           device: Any = None) -> Tensor:
    """Values from ``start`` (0 if only one bound is given) up to but excluding ``end`` by ``step``:
    int64 when every bound is an int, float32 otherwise, unless ``dtype`` says.

    Raises:
        ValueError: ``step`` is 0.
    """
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        integral = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, end, step))
        dtype = np.int64 if integral else get_default_dtype()
    # Floating ranges are computed in float64 and then rounded, as PyTorch does.
    array = np.arange(start, end, step, dtype=np.float64 if is_floating(np.dtype(dtype)) else None)
    return _finish(array.astype(dtype, copy=False), requires_grad, device)


def legacy_range(start: Any, end: Any, step: Any = 1, dtype: Any = None, requires_grad: bool = False,
                 device: Any = None) -> Tensor:
    """Values from ``start`` to ``end`` *included* by ``step``, in the default float dtype unless
    ``dtype`` says: PyTorch's deprecated ``torch.range``, with its warning (``arange`` excludes
    ``end``). An integer ``dtype`` truncates the bounds and the step first, as PyTorch does.

    Raises:
        ValueError: ``step`` is 0, or its sign leads away from ``end`` (PyTorch's messages).
    """
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=user_stacklevel())
    dtype = np.dtype(dtype or get_default_dtype())
    if not is_floating(dtype):
        start, end, step = (int(v) for v in (start, end, step))
    if step == 0:
        raise ValueError("step must be nonzero")
    if (end - start) * step < 0:
        raise ValueError("upper bound and lower bound inconsistent with step sign")
    count = int(np.floor((end - start) / step)) + 1
    array = start + step * np.arange(count, dtype=np.float64 if is_floating(dtype) else np.int64)
    return _finish(array.astype(dtype, copy=False), requires_grad, device)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The ``n`` x ``m`` (default ``n`` x ``n``) identity matrix: ones on the diagonal.

    Raises:
        ShapeError: ``n`` or ``m`` is negative.
    """
    for name, value in (("n", n), ("m", m)):
        if value is not None and value < 0:
            raise ShapeError(f"{name} must be greater or equal to 0, got {value}")
    return _finish(np.eye(n, n if m is None else m, dtype=dtype or get_default_dtype()), requires_grad, device)


def linspace(start: Any, end: Any, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` values evenly spaced from ``start`` to ``end`` (both included), in the default
    float dtype unless ``dtype`` says; an integer dtype truncates them toward zero, as PyTorch.

    Raises:
        ShapeError: ``steps`` is negative.
        DTypeError: bool ``dtype`` with more than one step.
    """
    if steps < 0:
        raise ShapeError("number of steps must be non-negative")
    dtype = np.dtype(dtype or get_default_dtype())
    if dtype.kind == "b" and steps > 1:
        raise DTypeError("linspace is not implemented for bool (PyTorch's rule); pass a numeric dtype")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if not is_floating(dtype):  # PyTorch casts the bounds to an integer dtype first (wrapping, as a cast does)
        start, end = (int(np.array(v).astype(dtype)) for v in (start, end))
    # PyTorch's kernel, value for value: the bounds are rounded to the dtype, and so is the step
    # (kept as a double for the integers); the first half counts up from start, the second half down
    # from end (both ends exact, the spacing symmetric). Its C++ fuses start + step * i into one
    # rounding (a fused multiply-add) in float32 and float64, computed here in a wider type; the
    # half types round after each operation.
    half = steps // 2 if steps > 1 else steps
    up, down = np.arange(half), np.arange(steps - half - 1, -1, -1)
    if steps == 1:  # the start itself (-0.0 keeps its sign)
        return _finish(np.array([start]).astype(dtype), requires_grad, device)
    if dtype in HALF_DTYPES:  # each operation rounds to the dtype: the difference, the count, the quotient
        start, end = (np.float32(dtype.type(v)) for v in (start, end))
        step = np.float32(dtype.type(np.float32(dtype.type(end - start)) / np.float32(dtype.type(steps - 1))))
        up, down = (np.asarray(i, dtype).astype(np.float32) for i in (up, down))
        values = np.concatenate([start + (step * up).astype(dtype).astype(np.float32),
                                 end - (step * down).astype(dtype).astype(np.float32)])
    else:
        wide = np.dtype(np.float64) if dtype == np.float32 else np.dtype(np.longdouble)
        bound = dtype.type if is_floating(dtype) else float
        start, end = (bound(v) for v in (start, end))
        step = (end - start) / (steps - 1) if steps > 1 else 0
        step = dtype.type(step) if is_floating(dtype) else np.float64(step)
        values = np.concatenate([wide.type(start) + wide.type(step) * up.astype(wide),
                                 wide.type(end) - wide.type(step) * down.astype(wide)]).astype(
            dtype if is_floating(dtype) else np.float64)
    return _finish(values.astype(dtype), requires_grad, device)


def logspace(start: Any, end: Any, steps: int, base: float = 10.0, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end`` (see :func:`linspace`).

    Raises:
        ShapeError: ``steps`` is negative.
        DTypeError: a bool ``dtype``.
    """
    dtype = np.dtype(dtype or get_default_dtype())
    if dtype.kind == "b":
        raise DTypeError("logspace is not implemented for bool (PyTorch's rule); pass a numeric dtype")
    exponents = linspace(start, end, steps, dtype=np.float64)._data
    return _finish(np.power(float(base), exponents).astype(dtype), requires_grad, device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (writes to one show in the other)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    return Tensor(array)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """``data`` as a tensor, sharing its memory where it can: a tensor of the asked dtype and
    device is returned as it is (else converted, differentiably), a numpy array of the asked dtype
    on the CPU becomes a tensor over the same memory; anything else is copied as :func:`tensor`
    copies it.

    Raises:
        ZgradError: a CUDA device where none can be used.
    """
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and (dtype is None or np.dtype(dtype) == data.dtype) \
            and device_arg(device).type == "cpu":
        return Tensor(data)
    return tensor(data, dtype=dtype, device=device)


def _aliasing_refused(what: str, dtype: Any, wanted: Any) -> ValueError:
    return ValueError(f"can't alias {what} with dtype '{dispatch.scalar_type_name(dtype)}' into dtype "
                      f"'{dispatch.scalar_type_name(wanted)}'.")


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
            requires_grad: bool | None = None) -> Tensor:
    """``obj`` (a tensor, a numpy array or scalar, a number or nested sequences) as a tensor, as
    ``torch.asarray``: with ``copy=None`` a tensor or numpy array of the asked dtype and device is
    shared, not copied; ``copy=True`` always copies, ``copy=False`` never does. ``requires_grad``
    None keeps a tensor's (False for other data).

    Raises:
        ValueError: ``copy=False`` where sharing is impossible (PyTorch's messages).
    """
    wanted_dtype = None if dtype is None else np.dtype(dtype)
    if isinstance(obj, Tensor):
        if copy is False and wanted_dtype is not None and wanted_dtype != obj.dtype:
            raise _aliasing_refused("tensor", obj.dtype, wanted_dtype)
        result = obj.to(device=device, dtype=wanted_dtype, copy=bool(copy))
    elif isinstance(obj, np.ndarray) and (wanted_dtype is None or wanted_dtype == obj.dtype) and not copy \
            and device_arg(device).type == "cpu":
        result = Tensor(obj)
    elif copy is False:
        if isinstance(obj, np.ndarray):
            raise _aliasing_refused("tensor", obj.dtype, wanted_dtype)
        raise ValueError("can't alias arbitrary sequence into a tensor.")
    elif isinstance(obj, (np.ndarray, np.generic)):
        result = tensor(np.asarray(obj), dtype=wanted_dtype, device=device)
    else:
        result = tensor(obj, dtype=wanted_dtype, device=device)
    if requires_grad and not result.requires_grad:
        result = wrap(result._data, True) if result is obj else result.requires_grad_(True)
    elif requires_grad is False and result.requires_grad:
        result = result.detach()
    return result


def scalar_tensor(s: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor holding ``s``, of the default dtype (float32) unless ``dtype`` says otherwise,
    as ``torch.scalar_tensor``."""
    if isinstance(s, Tensor):
        s = s.item()
    return _finish(np.array(s, dtype=get_default_dtype() if dtype is None else np.dtype(dtype)), requires_grad, device)


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing memory with any object that implements the DLPack protocol: a CPU tensor
    for host memory, a CUDA tensor for CUDA memory (e.g. ``torch.from_dlpack``'s counterpart).

    Raises:
        TypeError: ``obj`` has no ``__dlpack__``.
        BufferError: its memory is on a device zgrad cannot compute on.
    """
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__, got {type(obj).__name__}")
    return Tensor(dispatch.from_dlpack(obj))


def _typed(dtype: Any, name: str) -> Callable[..., Tensor]:
    def constructor(*args: Any) -> Tensor:
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=dtype)
        if len(args) == 1:
            return tensor(args[0], dtype=dtype)
        raise TypeError(f"{name}() expects sizes (ints) or one sequence of data, got {args!r}")

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (f"PyTorch's legacy constructor: ``{name}(*sizes)`` gives an uninitialized {np.dtype(dtype)} "
                           f"tensor of that size, ``{name}(data)`` one holding ``data``.")
    return constructor


FloatTensor = _typed(np.float32, "FloatTensor")
DoubleTensor = _typed(np.float64, "DoubleTensor")
LongTensor = _typed(np.int64, "LongTensor")
IntTensor = _typed(np.int32, "IntTensor")
BoolTensor = _typed(np.bool_, "BoolTensor")
