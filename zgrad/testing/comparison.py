"""``assert_close``: PyTorch's closeness assertion for tensors, numbers and containers of them,
with its default tolerances per dtype and its failure messages (mismatched elements, greatest
absolute and relative difference with their index).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np

from zgrad.kernels import dispatch
from zgrad.kernels.promotion import is_floating, promote_types
from zgrad.tensor import Tensor

__all__ = ["assert_close", "default_tolerances"]

# PyTorch's defaults (rtol, atol) by dtype; exact (0, 0) for every other dtype.
_TOLERANCES = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
    np.dtype(np.complex64): (1.3e-6, 1e-5),
    np.dtype(np.complex128): (1e-7, 1e-7),
}
_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def default_tolerances(*dtypes: np.dtype) -> tuple[float, float]:
    """PyTorch's default (rtol, atol) for values of ``dtypes``: the loosest of theirs."""
    pairs = [_TOLERANCES.get(np.dtype(d), (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _fail(message: str, msg: str | Callable[[str], str] | None, path: str) -> None:
    message += f"\n\nThe failure occurred for item {path}" if path else ""
    if msg is None:
        raise AssertionError(message)
    raise AssertionError(msg(message) if callable(msg) else msg)


def _check_attributes(actual: Tensor, expected: Tensor, check_device: bool, check_dtype: bool, check_stride: bool,
                      msg: Any, path: str) -> None:
    checks = [("shape", lambda t: t.shape, True), ("device", lambda t: t.device, check_device),
              ("dtype", lambda t: t.dtype, check_dtype),
              ("stride()", lambda t: tuple(s // t._data.itemsize for s in t._data.strides), check_stride)]
    for name, read, wanted in checks:
        if wanted and read(actual) != read(expected):
            _fail(f"The values for attribute '{name}' do not match: {read(actual)} != {read(expected)}.", msg, path)


def _differences(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|actual - expected| and that over |expected|, in PyTorch's dtypes (integers: exact
    differences, float32 ratios)."""
    if actual.dtype.kind in "biu":
        absolute = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = absolute.astype(np.float32) / np.abs(expected.astype(np.int64)).astype(np.float32)
        return absolute, relative
    with np.errstate(invalid="ignore", over="ignore"):
        absolute = np.abs(actual - expected)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = absolute / np.abs(expected)
    return absolute, relative


def _compare_values(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float, equal_nan: bool,
                    scalar: bool) -> str | None:
    """None if the arrays are close, else the failure message."""
    dtype = promote_types(actual.dtype, expected.dtype)
    actual, expected = actual.astype(dtype), expected.astype(dtype)
    exact = dtype.kind in "biu" or (rtol == 0 and atol == 0)
    with np.errstate(invalid="ignore", over="ignore"):
        close = actual == expected
        if is_floating(dtype):
            finite = np.isfinite(actual) & np.isfinite(expected)
            close |= finite & (np.abs(actual - expected) <= atol + rtol * np.abs(expected))
            if equal_nan:
                close |= np.isnan(actual) & np.isnan(expected)
    if close.all():
        return None
    what = "equal" if exact else "close"
    allowed = (lambda tol: "") if exact else (lambda tol: f" (up to {tol} allowed)")
    if scalar:  # in Python numbers, as PyTorch reports scalars
        a, e = actual.item(), expected.item()
        difference = abs(a - e)
        ratio = difference / abs(e) if e else (float("nan") if difference == 0 or difference != difference
                                                else float("inf"))
        return (f"Scalars are not {what}!\n\nExpected {e} but got {a}.\n"
                f"Absolute difference: {difference}{allowed(atol)}\n"
                f"Relative difference: {ratio}{allowed(rtol)}")
    absolute, relative = _differences(actual, expected)
    mismatched = int((~close).sum())
    lines = [f"Tensor-likes are not {what}!", "",
             f"Mismatched elements: {mismatched} / {close.size} ({100 * mismatched / close.size:.1f}%)"]
    for name, values, tol in (("absolute", absolute, atol), ("relative", relative, rtol)):
        masked = np.where(close, 0, values)
        index = np.unravel_index(_argmax_nan_first(masked), masked.shape)
        lines.append(f"Greatest {name} difference: {masked[index].item()} at index "
                     f"{tuple(int(i) for i in index)}{allowed(tol)}")
    return "\n".join(lines)


def _argmax_nan_first(values: np.ndarray) -> int:
    """The flat index of the largest value, a NaN counting as largest (as PyTorch reports it)."""
    nan = np.isnan(values) if is_floating(values.dtype) else np.zeros(values.shape, bool)
    return int(np.argmax(nan)) if nan.any() else int(np.argmax(values))


def _assert_pair(actual: Any, expected: Any, options: dict[str, Any], path: str) -> None:
    msg = options["msg"]
    if isinstance(actual, (Tensor, np.ndarray)) and type(actual) is type(expected):
        if isinstance(actual, Tensor):
            _check_attributes(actual, expected, options["check_device"], options["check_dtype"],
                              options["check_stride"], msg, path)
            arrays = dispatch.to_device(actual._data, "cpu"), dispatch.to_device(expected._data, "cpu")
        else:
            arrays = actual, expected
            if actual.shape != expected.shape:
                _fail(f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.", msg, path)
        _assert_values(*arrays, options, scalar=arrays[0].ndim == 0, path=path)
        return
    if isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
        if bool(actual) != bool(expected):
            _fail(f"Booleans mismatch: {actual} is not {expected}", msg, path)
        return
    if isinstance(actual, _NUMBERS) and isinstance(expected, _NUMBERS):
        _assert_values(np.asarray(actual), np.asarray(expected), options, scalar=True, path=path)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{sorted(map(repr, set(expected) - set(actual)))}\nExtra keys in the actual mapping: "
                  f"{sorted(map(repr, set(actual) - set(expected)))}", msg, path)
        for key in expected:
            _assert_pair(actual[key], expected[key], options, f"{path}[{key!r}]")
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", msg, path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_pair(a, e, options, f"{path}[{i}]")
        return
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def _assert_values(actual: np.ndarray, expected: np.ndarray, options: dict[str, Any], scalar: bool, path: str) -> None:
    rtol, atol = options["rtol"], options["atol"]
    if rtol is None:
        rtol, atol = default_tolerances(actual.dtype, expected.dtype)
    failure = _compare_values(actual, expected, rtol, atol, options["equal_nan"], scalar)
    if failure is not None:
        _fail(failure, options["msg"], path)


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Assert that ``actual`` and ``expected`` are close: ``|actual - expected| <= atol + rtol *
    |expected|`` element-wise (non-finite values must be equal; NaNs only with ``equal_nan``), as
    ``torch.testing.assert_close``.

    Both are tensors (same shape, and unless told otherwise same device and dtype), numpy arrays,
    Python numbers, or sequences or mappings of those, compared item by item. ``rtol`` and
    ``atol`` default to PyTorch's values for the dtype (the loosest of the two dtypes when they
    differ): float16 (1e-3, 1e-5), float32 (1.3e-6, 1e-5), float64 (1e-7, 1e-7), exact otherwise.
    ``check_layout`` is accepted for PyTorch's signature (zgrad tensors are all strided);
    ``check_stride`` compares strides in elements.

    Raises:
        AssertionError: the values or attributes differ; the message is PyTorch's (``msg``
            replaces it, or, if callable, receives it and returns the one to raise).
        TypeError: inputs of types that cannot be compared (a tensor and a number, ...).
        ValueError: only one of ``rtol`` and ``atol`` is given.
    """
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.")
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                   check_stride=check_stride, msg=msg)
    _assert_pair(actual, expected, options, "")

