"""``zgrad.nn.init``: fill parameters in place, with PyTorch's formulas.

Every function draws from zgrad's default generator (seed it with ``zgrad.manual_seed``), writes
into the tensor under ``no_grad`` (so it works on parameters that require grad) and returns the
tensor. Fans follow PyTorch: for a weight of shape ``(out, in, *kernel)``, fan_in is
``in * prod(kernel)`` and fan_out ``out * prod(kernel)``.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from zgrad.creation import empty
from zgrad.engine.grad_mode import no_grad
from zgrad.tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_", "xavier_uniform_", "xavier_normal_",
    "kaiming_uniform_", "kaiming_normal_", "default_layer_init_", "orthogonal_", "trunc_normal_",
]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear/conv/sigmoid, 5/3 for tanh, sqrt(2)
    for relu, sqrt(2 / (1 + negative_slope^2)) for leaky_relu (slope ``param``, default 0.01),
    3/4 for selu.

    Raises:
        ValueError: an unknown nonlinearity or an invalid slope.
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, numbers.Number):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight of shape (out, in, *receptive field).

    Raises:
        ValueError: fewer than 2 dimensions.
    """
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill ``tensor`` with samples of U[a, b)."""
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill ``tensor`` with samples of N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill ``tensor`` with ``val``."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    """gain / sqrt(fan) of He initialization, or None for an empty tensor (a no-op, with a warning)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan), gain from ``nonlinearity``
    (and the negative slope ``a``), fan from ``mode`` ("fan_in" or "fan_out").

    ``kaiming_uniform_(w, a=math.sqrt(5))`` is PyTorch's default Linear/Conv weight init.
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> Tensor:
    """He normal: N(0, std^2) with std = gain / sqrt(fan) (arguments as :func:`kaiming_uniform_`)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else normal_(tensor, 0.0, std)


def default_layer_init_(weight: Tensor, bias: Tensor | None = None) -> None:
    """PyTorch's ``reset_parameters`` of Linear and ConvNd: ``kaiming_uniform_(weight, a=sqrt(5))``,
    which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for ``bias`` (if not None)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)


def _host_samples(shape: tuple[int, ...], fill: str, *args: float) -> np.ndarray:
    """float64 samples drawn on the CPU from zgrad's default generator (``fill`` is a Tensor
    method: "uniform_" or "normal_")."""
    samples = empty(*shape, dtype=np.float64, device="cpu")
    getattr(samples, fill)(*args)
    return samples.numpy()


def _write(tensor: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        return tensor.copy_(Tensor(values.reshape(tensor.shape).astype(tensor.dtype)))


def orthogonal_(tensor: Tensor, gain: float = 1, generator: object = None) -> Tensor:
    """Fill ``tensor`` with a (semi-)orthogonal matrix times ``gain``: the Q factor of a standard
    normal (rows, cols) matrix, rows = size(0) and cols the product of the other sizes, its signs
    fixed by R's diagonal (as PyTorch).

    Raises:
        ValueError: fewer than 2 dimensions.
        NotImplementedError: a ``generator`` (zgrad draws from its default generator).
    """
    if generator is not None:
        raise NotImplementedError("orthogonal_: generator= is not supported by zgrad; seed with zgrad.manual_seed")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _host_samples((rows, cols), "normal_", 0.0, 1.0)
    q, r = np.linalg.qr(flat.T if rows < cols else flat)
    q = q * np.sign(np.diag(r))
    return _write(tensor, (q.T if rows < cols else q) * gain)


def _normal_quantile(p: np.ndarray) -> np.ndarray:
    """The standard normal's inverse CDF by Acklam's rational approximation (relative error below
    1.2e-9), vectorized; p in (0, 1)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    low = 0.02425
    tail = np.sqrt(-2 * np.log(np.where(p < 0.5, p, 1 - p)))
    tails = (((((c[0] * tail + c[1]) * tail + c[2]) * tail + c[3]) * tail + c[4]) * tail + c[5]) / \
        ((((d[0] * tail + d[1]) * tail + d[2]) * tail + d[3]) * tail + 1)
    q = p - 0.5
    q2 = q * q
    central = (((((a[0] * q2 + a[1]) * q2 + a[2]) * q2 + a[3]) * q2 + a[4]) * q2 + a[5]) * q / \
        (((((b[0] * q2 + b[1]) * q2 + b[2]) * q2 + b[3]) * q2 + b[4]) * q2 + 1)
    return np.where(p < low, tails, np.where(p > 1 - low, -tails, central))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator: object = None) -> Tensor:
    """Fill ``tensor`` with samples of N(mean, std^2) truncated to [a, b] (bounds in the values'
    units, as PyTorch): uniform samples between the bounds' CDFs through the normal's inverse CDF.

    Raises:
        NotImplementedError: a ``generator`` (zgrad draws from its default generator).
    """
    if generator is not None:
        raise NotImplementedError("trunc_normal_: generator= is not supported by zgrad; seed with zgrad.manual_seed")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    cdf_low, cdf_high = ((1 + math.erf((bound - mean) / (std * math.sqrt(2)))) / 2 for bound in (a, b))
    tiny = np.finfo(np.float64).tiny
    uniform = np.clip(_host_samples(tuple(tensor.shape), "uniform_", cdf_low, cdf_high), tiny, 1 - 1e-16)
    return _write(tensor, np.clip(mean + std * _normal_quantile(uniform), a, b))
