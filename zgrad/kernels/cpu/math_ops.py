"""The CPU backend of the element-wise math functions (``unary_math``, ``binary_math`` and
``nan_to_num``; the names in :data:`zgrad.kernels.vocabulary.UNARY_MATH` / ``BINARY_MATH``).

Part of :mod:`zgrad.kernels.cpu.backend` (which re-exports these); each writes into ``out`` and
returns it. numpy's ufuncs (SIMD where numpy has loops for them) write into ``out`` directly;
the functions numpy lacks, or runs as a libm call per element, run the Numba kernels of
:mod:`kernels.special` (vectorised), the special functions (lgamma, digamma, the Bessel
functions, zeta, the incomplete gamma functions) those of :mod:`kernels.special_functions`.
Where the CPU has AVX-512, numpy (2.x) runs its own vectorised loops for some of the functions
the kernels cover; sinh and atanh are then numpy's (:data:`_NUMPY_AVX512_FASTER`), within 2 ulp.
"""

from __future__ import annotations

import functools

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.common import flat
from zgrad.kernels.cpu.parts import ufunc_in_parts
from zgrad.kernels.threads import PARALLEL_MIN_SIZE, PARALLEL_MIN_SIZE_HEAVY

__all__ = ["unary_math", "binary_math", "nan_to_num", "lerp", "orthogonal_polynomial"]

def _no_options(dtype: np.dtype) -> tuple:
    return ()


def _special(name: str, options=_no_options, module: str = "special"):
    """The Numba kernel ``name`` of ``kernels.<module>``, given ``options(dtype)`` before ``out``."""
    def apply(x, out):
        source = x if x.dtype == out.dtype else x.astype(out.dtype)
        if out.size:
            getattr(getattr(kernels, module), name)(flat(source), *options(out.dtype), out.reshape(-1))
        return out
    return apply


def _special_function(name: str):
    return _special(f"{name}_forward", module="special_functions")


def _flat_over(value, shape: tuple[int, ...]):
    """``value`` broadcast to ``shape``, flattened (np.broadcast_to only where the shape differs)."""
    return flat(value if getattr(value, "shape", None) == shape else np.broadcast_to(value, shape))


def _special_binary(name: str):
    """The two-operand Numba kernel ``name`` of :mod:`kernels.special_functions`, on operands
    broadcast to out's shape."""
    def apply(a, b, out):
        if out.size:
            a, b = (_flat_over(v, out.shape) for v in (a, b))
            getattr(kernels.special_functions, f"{name}_forward")(a, b, out.reshape(-1))
        return out
    return apply


def _frexp_mantissa(x, out):
    return np.frexp(x, out=(out, None))[0]


def _frexp_exponent(x, out):
    out[...] = np.frexp(x)[1]
    return out


def _erfinv_options(dtype: np.dtype) -> tuple:
    return (8 if dtype == np.float64 else 0,)  # Halley steps at most (see zgrad.kernels.special_math.erfinv)


def _ufunc(ufunc: np.ufunc, min_size: int = PARALLEL_MIN_SIZE):
    """numpy's ``ufunc``, split between the threads from ``min_size`` elements (its loop runs on one)."""
    def apply(x, out):
        with np.errstate(all="ignore"):  # NaN and inf results are the answers, as in PyTorch
            return ufunc_in_parts(ufunc, (x,), out, min_size)
    return apply


def _isposinf(x, out):
    return np.logical_and(np.isinf(x), x > 0, out=out)


def _isneginf(x, out):
    return np.logical_and(np.isinf(x), x < 0, out=out)


# The functions whose numpy loop, on a CPU with AVX-512, is faster than the Numba kernel, by dtype
# (float32 1M, one thread, fresh outputs: sinh 0.25-0.34 ms against the kernel's 0.57, atanh
# 0.31 against 0.64; float64 512K: 0.37 against 0.69, 0.44 against 0.59). numpy's loops for log2,
# log10, log1p, expm1, exp2, tan and cosh measured faster alone (log2 0.19 against 0.41 ms) but no
# faster, or slower, inside bench/kernels.py's alternating runs, so those stay the kernels'.
# Without AVX-512 numpy calls libm per element.
_NUMPY_AVX512_FASTER = {np.dtype(np.float32): frozenset({"sinh", "atanh"}),
                        np.dtype(np.float64): frozenset({"sinh", "atanh"})}


@functools.cache
def _numpy_has_avx512() -> bool:
    """Whether numpy found AVX-512 on this CPU (its x86-64-v4 or AVX512_SKX dispatch targets)."""
    found = np.show_config(mode="dicts").get("SIMD Extensions", {}).get("found", ())
    return bool({"X86_V4", "AVX512_SKX"} & set(found))


def _numpy_where_faster(name: str, ufunc: np.ufunc):
    """numpy's ``ufunc`` where :data:`_NUMPY_AVX512_FASTER` lists ``name`` for out's dtype and the
    CPU has AVX-512, the Numba kernel ``<name>_forward`` otherwise."""
    numpy_loop, kernel = _ufunc(ufunc, PARALLEL_MIN_SIZE_HEAVY), _special(f"{name}_forward")

    def apply(x, out):
        if name in _NUMPY_AVX512_FASTER.get(out.dtype, ()) and _numpy_has_avx512():
            return numpy_loop(x, out)
        return kernel(x, out)
    return apply


def _rounding(name: str):
    return _special("rounding_forward", lambda dtype: (kernels.special.ROUNDING.index(name),))


_UNARY = {
    "sin": _ufunc(np.sin, PARALLEL_MIN_SIZE_HEAVY), "cos": _ufunc(np.cos, PARALLEL_MIN_SIZE_HEAVY),
    "atan": _special("atan_forward"),
    "tan": _special("tan_forward"), "asin": _special("asin_forward"), "acos": _special("acos_forward"),
    "sinh": _numpy_where_faster("sinh", np.sinh), "cosh": _special("cosh_forward"),
    "atanh": _numpy_where_faster("atanh", np.arctanh), "log1p": _special("log1p_forward"),
    "expm1": _special("expm1_forward"), "log2": _special("log2_forward"), "log10": _special("log10_forward"),
    "exp2": _special("exp2_forward"),
    "asinh": _ufunc(np.arcsinh, PARALLEL_MIN_SIZE_HEAVY), "acosh": _ufunc(np.arccosh, PARALLEL_MIN_SIZE_HEAVY),
    "erf": _special("erf_forward"), "erfc": _special("erfc_forward"),
    "erfinv": _special("erfinv_forward", _erfinv_options),
    "rsqrt": _special("rsqrt_forward"), "reciprocal": _special("reciprocal_forward"),
    **{name: _rounding(name) for name in ("floor", "ceil", "round", "trunc", "frac")},
    "isnan": _ufunc(np.isnan), "isinf": _ufunc(np.isinf), "isposinf": _isposinf,
    "isneginf": _isneginf, "isfinite": _ufunc(np.isfinite), "signbit": _ufunc(np.signbit),
    "bitwise_not": _ufunc(np.invert),
    **{name: _special_function(name) for name in ("lgamma", "digamma", "trigamma", "i0", "i0e", "i1", "i1e", "erfcx",
                                                         "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
                                                         "modified_bessel_k0", "modified_bessel_k1",
                                                         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1")},
    "frexp_mantissa": _frexp_mantissa, "frexp_exponent": _frexp_exponent,
}

_BINARY = {
    "atan2": np.arctan2, "fmod": np.fmod, "hypot": np.hypot, "logaddexp": np.logaddexp,
    "logaddexp2": np.logaddexp2, "copysign": np.copysign, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor, "bitwise_left_shift": np.left_shift,
    "bitwise_right_shift": np.right_shift, "nextafter": np.nextafter, "fmax": np.fmax, "fmin": np.fmin,
    "gcd": np.gcd, "lcm": np.lcm,
    **{name: _special_binary(name) for name in ("zeta", "igamma", "igammac", "igamma_derivative")},
}


def unary_math(name: str, x, out):
    """out = ``name``(x), ``name`` one of :data:`~zgrad.kernels.vocabulary.UNARY_MATH`."""
    return _UNARY[name](x, out)


# Binary functions with a one-pass kernel of kernels.special, used where both operands are arrays of
# out's shape (numpy's ufunc broadcasts the rest), by out's dtype.
_BINARY_KERNELS = {
    ("atan2", np.dtype(np.float32)): "atan2_forward", ("atan2", np.dtype(np.float64)): "atan2_forward",
    ("logaddexp", np.dtype(np.float32)): "logaddexp_forward", ("logaddexp", np.dtype(np.float64)): "logaddexp_forward",
    ("logaddexp2", np.dtype(np.float32)): "logaddexp2_forward",
    ("logaddexp2", np.dtype(np.float64)): "logaddexp2_forward", ("hypot", np.dtype(np.float32)): "hypot_float32_forward",
    ("fmod", np.dtype(np.float32)): "fmod_float32_forward",
    ("copysign", np.dtype(np.float32)): "copysign_forward", ("copysign", np.dtype(np.float64)): "copysign_forward",
}


_BITWISE = frozenset({"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"})


def binary_math(name: str, a, b, out):
    """out = ``name``(a, b), broadcast, ``name`` one of :data:`~zgrad.kernels.vocabulary.BINARY_MATH`.
    Operands are already in out's dtype, so numpy's loop is out's."""
    kernel = _BINARY_KERNELS.get((name, out.dtype))
    if kernel is not None and all(isinstance(v, np.ndarray) and v.shape == out.shape for v in (a, b)):
        if out.size:
            getattr(kernels.special, kernel)(flat(a), flat(b), out.reshape(-1))
        return out
    function = _BINARY[name]
    min_size = PARALLEL_MIN_SIZE if name in _BITWISE else PARALLEL_MIN_SIZE_HEAVY
    if name in _BITWISE and out.dtype.kind in "biu":  # no floating-point error to silence
        return ufunc_in_parts(function, (a, b), out, min_size)
    with np.errstate(all="ignore"):
        if not isinstance(function, np.ufunc):
            return function(a, b, out)
        return ufunc_in_parts(function, (a, b), out, min_size)


def nan_to_num(x, nan: float, posinf: float, neginf: float, out):
    """out = x with NaN, +inf and -inf replaced by the given numbers."""
    if out.size:
        kernels.special.nan_to_num_forward(flat(x), *(out.dtype.type(v) for v in (nan, posinf, neginf)),
                                           out.reshape(-1))
    return out


def lerp(start, end, weight, out):
    """out = start + weight * (end - start) from the nearer end (PyTorch's formula, bit for bit),
    broadcast; ``weight`` a number or an array. Broadcast operands are expanded first."""
    if out.size:
        start, end = (_flat_over(a, out.shape) for a in (start, end))
        if isinstance(weight, (int, float)):
            kernels.special.lerp_scalar_forward(start, end, out.dtype.type(weight), out.reshape(-1))
        else:
            kernels.special.lerp_forward(start, end, _flat_over(weight, out.shape), out.reshape(-1))
    return out


def orthogonal_polynomial(x, n, kind: int, shifted: bool, out):
    """out = the orthogonal polynomial ``kind`` (a position in
    :data:`~zgrad.kernels.vocabulary.ORTHOGONAL_POLYNOMIALS`) of degree n at x (at 2x - 1 where
    ``shifted``), broadcast."""
    if out.size:
        x, n = (_flat_over(v, out.shape) for v in (x, n))
        kernels.special_functions.orthogonal_polynomial_forward(x, n, kind, shifted, out.reshape(-1))
    return out
