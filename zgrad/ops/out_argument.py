"""The ``out=`` keyword of PyTorch's functions (``zgrad.add(a, b, out=o)``), given to a function by
one decorator, :func:`accepts_out`.

PyTorch's rules hold. The function computes its result as usual, which is then written into
``out`` (a tensor, or a tuple of tensors for a function that returns several, as ``max`` along a
dim), and ``out`` is returned. An ``out`` of another shape is resized (with PyTorch's deprecation
warning when it held elements). Its dtype must hold the result: by default any dtype the result
type casts to (``add`` of integers into a float tensor); for the functions PyTorch checks
exactly (the products, the rounding functions, ``neg``, ``abs``, ``clamp``, ``where``, the
sorting and order statistics, ``amax``/``amin``, ``max``/``min`` along a dim, ...) the result's
dtype itself;
and the sums and running sums and products (``sum``, ``prod``, ``nansum``, ``cumsum``,
``cumprod``) compute in out's dtype, as if it were their ``dtype=``. Each function's rule is
named where it is decorated.
With grad mode on, no argument (``out`` included) may require grad: a function with ``out=``
records no graph. Every check runs before anything is written.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar

from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.engine.versions import bump
from zgrad.errors import AutogradError, DTypeError, ZgradError
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.kernels.promotion import can_cast
from zgrad.tensor import Tensor
from zgrad.warning_location import user_stacklevel

__all__ = ["accepts_out", "write_out", "OUT_RESIZE_WARNING"]

F = TypeVar("F", bound=Callable[..., Any])

OUT_RESIZE_WARNING = ("An output with one or more elements was resized since it had shape {old}, which does not match "
                      "the required output shape {new}. This behavior is deprecated, and in a future PyTorch release "
                      "outputs will not be resized unless they have zero elements. You can explicitly reuse an out "
                      "tensor t by resizing it, inplace, to zero elements with t.resize_(0).")
# How an out tensor's dtype must relate to the result's: any dtype the result type casts to, the
# same dtype (always, or where the function returns a tuple, as max and min along a dim), or out's
# dtype is the function's ``dtype=`` (PyTorch's sums accumulate in it).
_DTYPE_RULES = ("castable", "exact", "exact_tuples", "as_dtype")


def accepts_out(dtype_rule: str = "castable", name: str | None = None) -> Callable[[F], F]:
    """Give a function PyTorch's keyword-only ``out=`` argument (see the module docstring).

    Args:
        dtype_rule: "castable" (out's dtype holds the result type), "exact" (out's dtype is the
            result's), "exact_tuples" ("exact" where the result is a tuple, else "castable") or "as_dtype" (out's dtype is passed as the function's ``dtype=`` unless
            given, and then must hold the result as for "castable").
        name: the function's name in error messages (default: its ``__name__``).

    Returns:
        A decorator; the function it returns keeps the wrapped one's name and docstring, and
        without ``out`` runs it unchanged.
    """
    if dtype_rule not in _DTYPE_RULES:
        raise ValueError(f"dtype_rule must be one of {_DTYPE_RULES}, got {dtype_rule!r}")

    def decorate(fn: F) -> F:
        op_name = name or fn.__name__

        @functools.wraps(fn)
        def op(*args: Any, out: Any = None, **kwargs: Any) -> Any:
            if out is None:
                return fn(*args, **kwargs)
            if is_grad_enabled() and _any_requires_grad((args, tuple(kwargs.values()), out)):
                raise AutogradError(f"{op_name}(): functions with out=... arguments don't support automatic "
                                    "differentiation, but one of the arguments requires grad.")
            if dtype_rule == "as_dtype" and isinstance(out, Tensor) and kwargs.get("dtype") is None:
                kwargs["dtype"] = out.dtype
            return write_out(op_name, fn(*args, **kwargs), out, dtype_rule)

        return op  # type: ignore[return-value]

    return decorate


def _any_requires_grad(values: Any) -> bool:
    if isinstance(values, Tensor):
        return values.requires_grad
    if isinstance(values, (tuple, list)):
        return any(_any_requires_grad(v) for v in values)
    return False


def write_out(name: str, result: Any, out: Any, dtype_rule: str = "castable") -> Any:
    """Write ``result`` (a tensor or a tuple of them) into ``out`` (alike) and return ``out``
    (as ``result``'s tuple type for several); every check runs before the first write. Out's
    dtype must be the result's for ``dtype_rule`` "exact" (and "exact_tuples" with several
    results), else one the result type casts to.

    Raises:
        TypeError: ``out`` is not a tensor, or not a tuple of as many tensors as ``result`` has.
        DTypeError: an out dtype that cannot hold its result (by ``dtype_rule``).
        ZgradError: an out tensor on another device than its result.
    """
    several = isinstance(result, tuple)
    outs = tuple(out) if several and isinstance(out, (tuple, list)) else (out,)
    results = tuple(result) if several else (result,)
    if len(outs) != len(results) or not all(isinstance(o, Tensor) for o in outs):
        expected = f"a tuple of {len(results)} Tensors" if several else "a Tensor"
        raise TypeError(f"{name}(): argument 'out' must be {expected}, not {type(out).__name__}")
    exact = dtype_rule == "exact" or (dtype_rule == "exact_tuples" and several)
    for r, o in zip(results, outs):
        _check(name, r, o, exact)
    for r, o in zip(results, outs):
        _write(r, o)
    if not several:
        return out
    return type(result)._make(outs) if hasattr(type(result), "_make") else outs


def _check(name: str, result: Tensor, out: Tensor, exact: bool) -> None:
    if result.device != out.device:
        raise ZgradError(f"{name}(): expected out on the result's device {result.device}, but got out on "
                         f"{out.device}; create out there (e.g. zgrad.empty(0, device={str(result.device)!r}))")
    if not exact and not can_cast(result.dtype, out.dtype):
        raise DTypeError(f"result type {dispatch.scalar_type_name(result.dtype)} can't be cast to the desired output "
                         f"type {dispatch.scalar_type_name(out.dtype)}")
    if exact and result.dtype != out.dtype:
        raise DTypeError(f"Expected out tensor to have dtype {dispatch.cpp_type_name(result.dtype)}, but got "
                         f"{dispatch.cpp_type_name(out.dtype)} instead")


def _write(result: Tensor, out: Tensor) -> None:
    """out's memory = result (cast to out's dtype); a new memory of the result's shape first when
    out's shape differs."""
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(OUT_RESIZE_WARNING.format(old=list(out.shape), new=list(result.shape)), UserWarning,
                          stacklevel=user_stacklevel())
        out._data = dispatch.empty(result.shape, out.dtype, dispatch.device_type_of(out._data))
    dispatch_pointwise.write(out._data, result._data)
    bump(out._data)
