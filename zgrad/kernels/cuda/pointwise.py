"""The CUDA backend's element-wise ops: arithmetic, activations and their gradients, comparisons,
clamp, where, in-place updates, point-wise losses, dropout and the collectives'
reductions. Each is one launch of an element-wise kernel (see :mod:`zgrad.kernels.cuda.elementwise`).

Part of :mod:`zgrad.kernels.cuda.backend` (which re-exports these); each writes into ``out`` and returns it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, ternary_op, unary_op
from zgrad.kernels.promotion import BFLOAT16
from zgrad.kernels.vocabulary import SMOOTH_ACTIVATIONS

__all__ = [
    "add", "sub", "mul", "div", "pow", "neg", "exp", "log", "tanh", "sigmoid", "relu", "relu_backward",
    "tanh_backward", "sigmoid_backward", "remainder", "floor_divide", "maximum", "minimum", "abs", "sign", "sqrt",
    "clamp", "clamp_backward", "extremum_backward", "compare", "logical_not", "where", "copy", "add_scaled",
    "addcmul", "addcdiv", "bias_act", "gelu",
    "gelu_backward", "leaky_relu", "leaky_relu_backward", "smooth_activation", "smooth_activation_backward", "pointwise_loss", "pointwise_loss_backward", "dropout",
    "dropout_backward", "reduce_inplace", "reduce_pair", "reduce_and_copy", "divide_inplace", "scale_copy",
]

_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)


def add(a, b, out):
    return binary_op("add", a, b, out)


def sub(a, b, out):
    return binary_op("sub", a, b, out)


def mul(a, b, out):
    return binary_op("mul", a, b, out)


def div(a, b, out):
    return binary_op("div", a, b, out)


def pow(a, b, out):  # noqa: A001 - op vocabulary name
    return binary_op("pow", a, b, out)


def remainder(a, b, out):
    return binary_op("remainder", a, b, out)  # Python's sign rule (the divisor's), as torch.remainder


def floor_divide(a, b, out):
    return binary_op("floor_divide", a, b, out)


def maximum(a, b, out):
    return binary_op("maximum", a, b, out)


def minimum(a, b, out):
    return binary_op("minimum", a, b, out)


def neg(x, out):
    return unary_op("neg", x, out)


def exp(x, out):
    return unary_op("exp", x, out)


def log(x, out):
    return unary_op("log", x, out)


def tanh(x, out):
    return unary_op("tanh", x, out)


def sigmoid(x, out):
    return unary_op("sigmoid", x, out)


def relu(x, out):
    return unary_op("relu", x, out)


def abs(x, out):  # noqa: A001 - op vocabulary name
    return unary_op("abs", x, out)


def sign(x, out):
    return unary_op("sign", x, out)


def sqrt(x, out):
    return unary_op("sqrt", x, out)


def relu_backward(grad, x, out):
    return binary_op("relu_backward", grad, x, out)


def tanh_backward(grad, y, out):
    return binary_op("tanh_backward", grad, y, out)


def sigmoid_backward(grad, y, out):
    return binary_op("sigmoid_backward", grad, y, out)


def _bounds(dtype: np.dtype, low: Any, high: Any) -> tuple[Any, Any]:
    if dtype.kind == "f":
        return (-np.inf if low is None else low), (np.inf if high is None else high)
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    low = (info.min if info else False) if low is None else low
    return low, ((info.max if info else True) if high is None else high)


def clamp(x, low, high, out):
    """out = x clamped to [low, high] (None: open); NaN stays NaN; ``out`` may be ``x``."""
    return unary_op("clamp", x, out, *_bounds(out.dtype, low, high))


def clamp_backward(grad, x, low, high, out):
    return binary_op("clamp_backward", grad, x, out, low, high)


def extremum_backward(grad, a, b, take_max, out_a, out_b):
    ternary_op("extremum_a", grad, a, b, out_a, int(take_max))
    ternary_op("extremum_b", grad, a, b, out_b, int(take_max))
    return out_a, out_b


def compare(op, a, b, out):
    """``op`` in eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_xor, into a bool ``out``."""
    return binary_op(op, a, b, out)


def logical_not(x, out):
    return unary_op("logical_not", x, out)


def where(cond, a, b, out):
    """out = a where cond else b (all broadcast to ``out``); ``b`` may be ``out`` itself."""
    return ternary_op("where", cond, a, b, out)


def copy(x, out):
    """out = x (broadcast, cast to out's dtype); ``x`` may be a scalar or a host array."""
    if out.dtype == BFLOAT16 or getattr(x, "dtype", None) == BFLOAT16:
        return _copy_bfloat16(x, out)
    if out.dtype.kind in "iu" and getattr(x, "dtype", None) == _FLOAT16:
        return _copy_float16_to_integers(x, out)
    return unary_op("copy", x, out)


def _copy_float16_to_integers(x, out):
    """:func:`copy` from float16 to an integer dtype, through float32 (exact): Numba's own
    float16-to-integer conversion on a GPU rounds to the nearest integer (``cvt.rni``) where a
    cast truncates toward zero, as numpy's, C's and PyTorch's do."""
    if not isinstance(x, DeviceArray):
        return unary_op("copy", np.float32(x) if np.ndim(x) == 0 else np.asarray(x, np.float32), out)
    return unary_op("copy", unary_op("copy", x, DeviceArray.empty(x.shape, _FLOAT32)), out)


def _copy_bfloat16(x, out):
    """:func:`copy` to or from bfloat16, which kernels see as its 16 bits (Numba has no bfloat16):
    widening puts them on top of a float32's, narrowing rounds a float32 to the nearest even."""
    if not isinstance(x, DeviceArray) and getattr(x, "dtype", None) == BFLOAT16:
        x = x.astype(np.float32)  # a host scalar or array: numpy converts it
    if out.dtype == BFLOAT16 and getattr(x, "dtype", None) == BFLOAT16:
        unary_op("copy", x.view(np.uint16), out.view(np.uint16))
        return out
    if out.dtype == BFLOAT16:
        wide = unary_op("copy", x, DeviceArray.empty(out.shape, np.dtype(np.float32)))
        unary_op("bfloat16_narrow", wide.view(np.uint32), out.view(np.uint16))
        return out
    wide = DeviceArray.empty(x.shape, np.dtype(np.float32))
    unary_op("bfloat16_widen", x.view(np.uint16), wide.view(np.uint32))
    return unary_op("copy", wide, out)


def add_scaled(out, other, alpha):
    """out += alpha * other (``other`` broadcast to ``out``)."""
    return binary_op("add_scaled", out, other, out, alpha)


def addcmul(out, t1, t2, value):
    return ternary_op("addcmul", out, t1, t2, out, value)


def addcdiv(out, t1, t2, value):
    return ternary_op("addcdiv", out, t1, t2, out, value)


_BIAS_OPS = {"identity": "bias_identity", "relu": "bias_relu", "tanh": "bias_tanh", "sigmoid": "bias_sigmoid"}


def bias_act(x, bias, activation: str, out):
    """act(x + bias) over the last axis, ``activation`` in identity/relu/tanh/sigmoid."""
    return binary_op(_BIAS_OPS[activation], x, bias, out)


def gelu(x, tanh_approximation: bool, out):
    return unary_op("gelu_tanh" if tanh_approximation else "gelu_exact", x, out)


def gelu_backward(grad, x, tanh_approximation: bool, out):
    return binary_op("gelu_tanh_backward" if tanh_approximation else "gelu_exact_backward", grad, x, out)


def smooth_activation(x, code: int, beta: float, threshold: float, out):
    return unary_op(SMOOTH_ACTIVATIONS[code], x, out, beta, threshold)


def smooth_activation_backward(grad, x, code: int, beta: float, threshold: float, out):
    return binary_op(SMOOTH_ACTIVATIONS[code] + "_backward", grad, x, out, beta, threshold)


def leaky_relu(x, negative_slope: float, out):
    return unary_op("leaky_relu", x, out, negative_slope)


def leaky_relu_backward(grad, x, negative_slope: float, out):
    return binary_op("leaky_relu_backward", grad, x, out, negative_slope)


def pointwise_loss(a, b, squared: bool, out):
    return binary_op("squared_error" if squared else "absolute_error", a, b, out)


def pointwise_loss_backward(a, b, grad, squared: bool, divisor: float, out):
    """out = g * 2 (a - b) if ``squared`` else g * sign(a - b), g = grad / ``divisor``; a
    one-element grad broadcasts (read on the device: nothing waits)."""
    if grad.shape != a.shape:
        grad = grad.reshape(())
    return ternary_op("pointwise_loss_backward", a, b, grad, out, int(squared), float(divisor))


def _row_view(a: DeviceArray, rows: int) -> DeviceArray:
    return a.reshape(rows, -1)


def _scale(p: float) -> float:
    return 1.0 / (1.0 - p) if p < 1.0 else 0.0


def dropout(x, noise, p: float, keep, out):
    """out = x * (noise >= p) / (1 - p), one ``noise``/``keep`` value per row of an (R, S) view."""
    rows = keep.shape[0]
    binary_op("ge", noise, p, keep)
    binary_op("masked_scale", _row_view(x, rows), keep.reshape(rows, 1), _row_view(out, rows), _scale(p))
    return out


def dropout_backward(grad, keep, p: float, out):
    rows = keep.shape[0]
    binary_op("masked_scale", _row_view(grad, rows), keep.reshape(rows, 1), _row_view(out, rows), _scale(p))
    return out


# --- collective reductions (1-D C-contiguous arrays) ------------------------------------------

_REDUCE_OPS = {"sum": "add", "product": "mul", "min": "minimum", "max": "maximum"}


def reduce_inplace(out, src, op: str):
    return binary_op(_REDUCE_OPS[op], out, src, out)


def reduce_pair(out, a, b, op: str):
    return binary_op(_REDUCE_OPS[op], a, b, out)


def reduce_and_copy(out, copy_out, src, op: str):
    binary_op(_REDUCE_OPS[op], out, src, out)
    copy(out, copy_out)
    return out


def divide_inplace(out, divisor: int):
    """out /= divisor; integers truncate toward zero."""
    return unary_op("scale_div" if out.dtype.kind == "f" else "trunc_div", out, out, divisor)


def scale_copy(out, src, divisor: int):
    if out.dtype.kind == "f":
        return unary_op("scale_div", src, out, divisor)
    copy(src, out)
    return divide_inplace(out, divisor)
