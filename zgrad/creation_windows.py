"""Window functions for spectral analysis: ``hann_window``, ``hamming_window``,
``blackman_window``, ``bartlett_window`` and ``kaiser_window``, PyTorch's factories.

Each is computed on the host with PyTorch's formula and order of operations, rounded to the
requested dtype after every step as PyTorch's kernels round (float16 and bfloat16 steps run in
float32), then placed on the device asked for. A periodic window of length L is the symmetric
window of length L + 1 without its last point.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from zgrad.creation import device_arg, wrap
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import get_default_dtype, is_floating
from zgrad.tensor import Tensor

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


def _window(name: str, window_length: int, periodic: bool, dtype: Any, device: Any, requires_grad: bool,
            shape: Callable[[np.ndarray, int, Callable[[np.ndarray], np.ndarray]], np.ndarray]) -> Tensor:
    """A window of ``window_length`` points whose symmetric form of ``n`` points is
    ``shape(arange(n), n, rounded)``; ``rounded`` rounds a step's result, and each scalar factor
    before the step, to the dtype, as PyTorch's kernels do.

    Raises:
        RuntimeError: a negative length or a non-floating dtype (PyTorch's messages).
    """
    dtype = get_default_dtype() if dtype is None else np.dtype(dtype)
    if not is_floating(dtype):
        raise RuntimeError(f"{name} expects floating point dtypes, got: TensorOptions(dtype="
                           f"{dispatch.cpp_type_name(dtype)}, device=cpu, layout=Strided (default), requires_grad="
                           f"false (default), pinned_memory=false, memory_format=(nullopt))")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    if window_length <= 1:
        return _placed(np.ones(window_length, dtype), device, requires_grad)
    compute = np.float64 if dtype == np.float64 else np.float32

    def rounded(values: Any) -> np.ndarray:
        return np.asarray(values).astype(dtype).astype(compute)

    points = window_length + 1 if periodic else window_length
    values = shape(np.arange(points, dtype=compute), points, rounded)
    return _placed(values[:window_length].astype(dtype), device, requires_grad)


def _placed(values: np.ndarray, device: Any, requires_grad: bool) -> Tensor:
    return wrap(dispatch.to_device(values, device_arg(device).type), requires_grad)


def _hamming(name: str, window_length: int, periodic: bool, alpha: float, beta: float, dtype: Any, device: Any,
             requires_grad: bool) -> Tensor:
    def shape(n: np.ndarray, points: int, rounded: Callable) -> np.ndarray:
        angle = rounded(n * rounded(math.pi * 2.0 / (points - 1)))
        return rounded(rounded(rounded(np.cos(angle)) * rounded(-beta)) + rounded(alpha))

    return _window(name, window_length, periodic, dtype, device, requires_grad, shape)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype: Any = None, layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """``alpha - beta * cos(2 pi n / (N - 1))``, the Hamming window (``periodic``: for spectra of
    periodic signals).

    Raises:
        RuntimeError: a negative length or a non-floating dtype.
    """
    return _hamming("hamming_window", window_length, periodic, alpha, beta, dtype, device, requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None,
                device: Any = None, requires_grad: bool = False) -> Tensor:
    """``0.5 - 0.5 * cos(2 pi n / (N - 1))``, the Hann window.

    Raises:
        RuntimeError: a negative length or a non-floating dtype.
    """
    return _hamming("hann_window", window_length, periodic, 0.5, 0.5, dtype, device, requires_grad)


def blackman_window(window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None,
                    device: Any = None, requires_grad: bool = False) -> Tensor:
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``, the Blackman window.

    Raises:
        RuntimeError: a negative length or a non-floating dtype.
    """
    def shape(n: np.ndarray, points: int, rounded: Callable) -> np.ndarray:
        angle = rounded(n * rounded(math.pi / (points - 1)))
        high = rounded(rounded(np.cos(rounded(angle * 4))) * rounded(0.08))
        low = rounded(rounded(np.cos(rounded(angle * 2))) * 0.5)
        return rounded(rounded(high - low) + rounded(0.42))

    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, shape)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None,
                    device: Any = None, requires_grad: bool = False) -> Tensor:
    """``1 - |2 n / (N - 1) - 1|``, the triangular Bartlett window.

    Raises:
        RuntimeError: a negative length or a non-floating dtype.
    """
    def shape(n: np.ndarray, points: int, rounded: Callable) -> np.ndarray:
        values = rounded(n * rounded(2.0 / (points - 1)))
        first_half = ((points - 1) >> 1) + 1
        values[first_half:] = rounded(rounded(values[first_half:] * -1) + 2)
        return values

    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, shape)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype: Any = None,
                  layout: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """``I0(beta * sqrt(1 - ((n - a) / a) ** 2)) / I0(beta)`` with ``a = (N - 1) / 2``, the Kaiser
    window (``I0`` the modified Bessel function of order 0).

    Raises:
        RuntimeError: a negative length or a non-floating dtype.
    """
    def shape(n: np.ndarray, points: int, rounded: Callable) -> np.ndarray:
        alpha = (points - 1) / 2.0
        ratio = (n - alpha) / alpha
        return rounded(np.i0(beta * np.sqrt(np.abs(1 - ratio * ratio))) / np.i0(beta))

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, shape)
