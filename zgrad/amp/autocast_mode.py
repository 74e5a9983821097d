"""``zgrad.autocast`` (``zgrad.amp.autocast``): regions where PyTorch's lower-precision ops run in
float16 or bfloat16 and its float32 ops in float32, and the functions that read and set that
state (``zgrad.is_autocast_enabled``, ``zgrad.get_autocast_dtype``, ...), as ``torch.amp``.

Which op does what is listed in :mod:`zgrad.ops.autocast_lists`; the state is per thread
(:mod:`zgrad.engine.autocast_state`).
"""

from __future__ import annotations

import collections.abc
import copy
import functools
import warnings
from typing import Any, Callable, TypeVar

import numpy as np

from zgrad.engine import autocast_state as state
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
           "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
           "custom_fwd", "custom_bwd"]

F = TypeVar("F", bound=Callable[..., Any])

_SUPPORTED_DTYPE_NAMES = ("bfloat16", "float16")


def is_autocast_available(device_type: str) -> bool:
    """Whether zgrad can autocast on ``device_type`` ("cpu" and "cuda")."""
    return device_type in state.DEVICE_TYPES


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether ``device_type`` autocasts in the calling thread (without an argument: CUDA, as
    PyTorch's deprecated form).

    Raises:
        ValueError / RuntimeError: ``device_type`` is not a str / not "cpu" or "cuda".
    """
    return state.is_enabled("cuda" if device_type is None else device_type)


def get_autocast_dtype(device_type: str) -> np.dtype:
    """The dtype ``device_type`` autocasts to in the calling thread: the one the innermost open
    ``autocast`` block set, else bfloat16 for "cpu" and float16 for "cuda".

    Raises:
        ValueError / RuntimeError: ``device_type`` is not a str / not "cpu" or "cuda".
    """
    return state.get_dtype(device_type)


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Turn autocast of ``device_type`` on or off for the calling thread (``autocast`` blocks do
    this and restore it)."""
    state.set_enabled(device_type, enabled)


def set_autocast_dtype(device_type: str, dtype: Any) -> None:
    """Set the dtype ``device_type`` autocasts to in the calling thread."""
    state.set_dtype(device_type, dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether autocast caches the casts of weights in the calling thread (default True)."""
    return state.is_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the calling thread's cache of weight casts on or off."""
    state.set_cache_enabled(enabled)


def clear_autocast_cache() -> None:
    """Drop the calling thread's cached weight casts (leaving the outermost ``autocast`` block does)."""
    state.clear_cache()


class autocast:  # noqa: N801 - PyTorch's name
    """A region, as context manager or decorator, where ops run in the dtype autocast picks for them.

    Inside, on tensors of ``device_type``, the ops PyTorch lists as lower-precision (``matmul``,
    ``linear``, ``conv2d``, ``bmm``, ``addmm``, ``scaled_dot_product_attention``, ...) cast their
    floating inputs to ``dtype`` and return it; those it lists as float32 (losses everywhere; on
    CUDA also ``softmax``, ``log_softmax``, ``layer_norm``, ``sum``, ``exp``, ``log``, ``pow``,
    ``cumsum``, ...) compute and return float32; ``cat``/``stack`` (CPU) and ``dot``,
    ``tensordot``, ... (CUDA) run in the widest input type; other ops run unchanged. Float64
    tensors are never cast. Gradients flow back to each input's own dtype. Blocks nest, each
    restoring the state it found; the state is the calling thread's (a new thread starts
    without autocast). ``enabled=False`` turns autocast off inside the block.

    Example::

        with zgrad.autocast("cpu", dtype=zgrad.float16):
            y = model(x)             # Linear layers run in float16
            loss = F.cross_entropy(y, target)   # float32
        loss.backward()

    Args:
        device_type: "cpu" or "cuda".
        dtype: float16 or bfloat16 (default: bfloat16 on "cpu", float16 on "cuda").
        enabled: whether autocast is on in the region.
        cache_enabled: whether casts of weights (float32 leaves requiring grad) are made once per
            region and reused (default: :func:`is_autocast_cache_enabled`, True).

    Raises:
        ValueError: ``device_type`` is not a str.
        RuntimeError: a device type other than "cpu" and "cuda".

    Warns:
        UserWarning: ``dtype`` is neither float16 nor bfloat16, or ``device_type`` is "cuda"
            and CUDA is not available; autocast is then disabled, as in PyTorch.
    """

    def __init__(self, device_type: str, dtype: Any = None, enabled: bool = True, cache_enabled: bool | None = None):
        self.device = state.check_device_type(device_type)
        self.fast_dtype = state.get_dtype(device_type) if dtype is None else np.dtype(dtype)
        self._cache_enabled = state.is_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        if enabled and device_type == "cuda" and not dispatch.backend_available("cuda"):
            warnings.warn("CUDA is not available. Disabling autocast.", stacklevel=2)
            enabled = False
        elif enabled and self.fast_dtype.name not in _SUPPORTED_DTYPE_NAMES:
            name = device_type.upper()
            warnings.warn(f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"{name} Autocast only supports dtypes of zgrad.bfloat16, zgrad.float16 currently.",
                          stacklevel=2)
            enabled = False
        self._enabled = bool(enabled)

    def __enter__(self) -> "autocast":
        self.prev_cache_enabled = state.is_cache_enabled()
        self.prev = state.is_enabled(self.device)
        self.prev_fastdtype = state.dtype_setting(self.device)
        state.set_enabled(self.device, self._enabled)
        state.set_dtype(self.device, self.fast_dtype)
        state.increment_nesting()
        state.set_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, *exc: object) -> bool:
        if state.decrement_nesting() == 0:
            state.clear_cache()
        state.set_enabled(self.device, self.prev)
        state.set_dtype(self.device, self.prev_fastdtype)
        state.set_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func: F) -> F:
        """Decorate ``func`` to run inside this region (each call enters a copy of it, so calls
        from several threads or recursive calls each restore their own state).

        Raises:
            TypeError: ``func`` is not callable.
        """
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                            "Did you mean to use autocast as a context manager? For example:\n"
                            "    with zgrad.autocast(device_type=...):\n"
                            "        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args: Any, **kwargs: Any) -> Any:
            with copy.copy(self):
                return func(*args, **kwargs)

        return decorate_autocast  # type: ignore[return-value]


def _cast(value: Any, device_type: str, dtype: Any) -> Any:
    """``value`` with its floating tensors on ``device_type`` (float64 excepted) cast to ``dtype``,
    looking into mappings, lists, tuples and other iterables (strings and arrays left alone), as
    PyTorch's ``torch.amp.autocast_mode._cast``."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and value.dtype != np.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        cast = (_cast(v, device_type, dtype) for v in value)
        return type(value)(cast) if isinstance(value, (list, tuple)) else cast
    return value


def _check_device_type_is_str(device_type: Any) -> None:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")


def custom_fwd(fwd: F | None = None, *, device_type: str, cast_inputs: Any = None) -> Any:
    """Decorate the ``forward`` staticmethod of a custom :class:`zgrad.autograd.Function` for
    autocast, as ``torch.amp.custom_fwd``: it records on ``ctx`` whether autocast of
    ``device_type`` is on and its dtype, for :func:`custom_bwd`.

    With ``cast_inputs`` (a dtype), inside an autocast region of ``device_type`` the floating
    tensors among the arguments on that device (float64 excepted; nested in lists, tuples and
    dicts too) are cast to ``cast_inputs`` and ``forward`` runs with autocast off. Without it,
    ``forward``'s ops run under the current autocast state. Outside autocast it changes nothing.
    Usable bare-keyword (``@custom_fwd(device_type="cpu")``) or applied to a function.

    Example::

        class MyMM(zgrad.autograd.Function):
            @staticmethod
            @zgrad.amp.custom_fwd(device_type="cpu", cast_inputs=zgrad.float32)
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a.mm(b)

            @staticmethod
            @zgrad.amp.custom_bwd(device_type="cpu")
            def backward(ctx, grad):
                a, b = ctx.saved_tensors
                return grad.mm(b.t()), a.t().mm(grad)

    Raises:
        ValueError: ``device_type`` is not a str (PyTorch's message).
    """
    _check_device_type_is_str(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd: F | None = None, *, device_type: str) -> Any:
    """Decorate the ``backward`` staticmethod of a custom :class:`zgrad.autograd.Function` whose
    ``forward`` has :func:`custom_fwd`, as ``torch.amp.custom_bwd``: ``backward`` runs with
    autocast of ``device_type`` on or off, in the dtype, as ``forward`` ran (off after
    ``cast_inputs``).

    Raises:
        ValueError: ``device_type`` is not a str (PyTorch's message).
        AttributeError: ``forward`` was not decorated with :func:`custom_fwd` (the state it
            records on ``ctx`` is missing).
    """
    _check_device_type_is_str(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
        ctx = args[0]
        with autocast(device_type=device_type, enabled=ctx._fwd_used_autocast, dtype=ctx._dtype):
            return bwd(*args, **kwargs)

    return decorate_bwd
