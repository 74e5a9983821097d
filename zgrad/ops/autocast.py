"""The one place autocast acts: :func:`autocast_op` marks a function as one of PyTorch's ops, and
in an ``autocast`` region casts its inputs as :mod:`zgrad.ops.autocast_lists` says for their
device type, then runs it with autocast off inside (an op's own composition is not autocast
again, as in PyTorch, where the op's kernel runs below the autocast dispatch key).

Outside autocast an op pays one read of a thread-local flag. Casts are :class:`Cast` ops, so
gradients flow back to the inputs' own dtypes, and each op's backward runs in the dtype of its
forward. Within a region, casts of float32 leaf tensors that require grad (the weights) to the
region's dtype are made once and reused while grad mode is on (``cache_enabled``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

from zgrad.engine.autocast_state import get_dtype, thread_state
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.kernels import dispatch
from zgrad.ops.autocast_lists import BANNED, BANNED_MESSAGES, COMPOSITE, FLOAT32, LOWER, PROMOTE, policy_of
from zgrad.ops.elementwise import Cast
from zgrad.tensor import Tensor

__all__ = ["autocast_op"]

F = TypeVar("F", bound=Callable[..., Any])

_ELIGIBLE_DTYPES = ("float16", "bfloat16", "float32")  # floating and not float64, by numpy's names
_FLOAT32 = np.dtype(np.float32)


def autocast_op(name: str | None = None) -> Callable[[F], F]:
    """Mark a function as PyTorch's op ``name`` (default: the function's name) for autocast.

    Args:
        name: the op's name in :mod:`zgrad.ops.autocast_lists`.

    Returns:
        A decorator; the function it returns keeps the wrapped one's name, docstring and signature,
        and carries ``autocast_op_name``.
    """

    def decorate(fn: F) -> F:
        op_name = name or fn.__name__
        state = thread_state

        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            if not state.active:
                return fn(*args, **kwargs)
            return _run_autocast(op_name, fn, args, kwargs)

        op.autocast_op_name = op_name  # type: ignore[attr-defined]
        return op  # type: ignore[return-value]

    return decorate


def _run_autocast(op_name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    state = thread_state
    device_type = _device_type(args, kwargs)
    if device_type is not None and state.enabled[device_type]:
        policy = policy_of(device_type, op_name)
        if policy == COMPOSITE:
            return fn(*args, **kwargs)
        if policy is not None:
            args, kwargs = _cast_inputs(policy, op_name, device_type, args, kwargs)
    state.active = False
    try:
        return fn(*args, **kwargs)
    finally:
        state.active = True


def _tensors(args: tuple, kwargs: dict) -> Iterator[Tensor]:
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, Tensor))


def _device_type(args: tuple, kwargs: dict) -> str | None:
    """The device type the op runs on, as PyTorch's dispatch picks it: CUDA if any input is there."""
    found = None
    for t in _tensors(args, kwargs):
        found = "cpu" if type(t._data) is np.ndarray else dispatch.device_type_of(t._data)
        if found == "cuda":
            return found
    return found


def _eligible(value: Any, device_type: str) -> bool:
    return (isinstance(value, Tensor) and value._data.dtype.name in _ELIGIBLE_DTYPES
            and dispatch.device_type_of(value._data) == device_type)


def _explicit_dtype(args: tuple, kwargs: dict) -> bool:
    return kwargs.get("dtype") is not None or any(isinstance(a, np.dtype) for a in args)


def _promoted(lower: np.dtype, tensors: Iterator[Tensor], device_type: str) -> np.dtype:
    """PyTorch's rule: float32 wins over the region's dtype; another 16-bit dtype is an error."""
    target = lower
    for t in tensors:
        if not _eligible(t, device_type):
            continue
        if t.dtype == _FLOAT32 or target == _FLOAT32:
            target = _FLOAT32
        elif t.dtype != lower:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize "
                               f"({t.dtype} in a {lower} autocast region: cast it to {lower} or float32 first)")
    return target


def _cast_inputs(policy: str, op_name: str, device_type: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if policy == BANNED:
        raise RuntimeError(BANNED_MESSAGES[op_name])
    lower = get_dtype(device_type)
    if policy == LOWER:
        target = lower
    elif policy == FLOAT32:
        if _explicit_dtype(args, kwargs):
            return args, kwargs
        target = _FLOAT32
    elif policy == PROMOTE:
        target = _promoted(lower, _tensors(args, kwargs), device_type)
    else:
        raise AssertionError(f"unknown autocast policy {policy!r} of {op_name}")

    def cast(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(cast(v) for v in value)
        if not _eligible(value, device_type) or value.dtype == target:
            return value
        return _cached_cast(value, target) if target == lower else Cast.apply(value, target)

    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def _cached_cast(t: Tensor, dtype: np.dtype) -> Tensor:
    state = thread_state
    if not (state.cache_enabled and t.dtype == _FLOAT32 and t._requires_grad and t.grad_fn is None
            and is_grad_enabled()):
        return Cast.apply(t, dtype)
    key = (id(t), dtype)  # a nested region may autocast to another dtype
    hit = state.casts.get(key)
    if hit is not None:
        return hit[1]
    cast = Cast.apply(t, dtype)
    state.casts[key] = (t, cast)
    return cast
