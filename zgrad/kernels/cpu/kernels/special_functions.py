"""Element-wise Numba kernels of the special functions written once in :mod:`zgrad.kernels.special_math`,
:mod:`zgrad.kernels.special_gamma` and :mod:`zgrad.kernels.special_bessel` (digamma, trigamma,
the Bessel functions I0 and I1, erfcx, the Hurwitz zeta function, the incomplete gamma functions)
of lgamma (libm's), and the orthogonal polynomials of :mod:`zgrad.kernels.special_polynomials`.

1-D C-contiguous float32 or float64 arrays (the caller ravels and broadcasts); every element is
computed in float64 and rounded once to out's dtype, so float32 results are within an ulp of
the float64 function's.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels import special_bessel, special_gamma, special_math, special_polynomials
from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel

__all__ = [
    "lgamma_forward", "digamma_forward", "trigamma_forward", "i0_forward", "i0e_forward", "i1_forward", "i1e_forward",
    "erfcx_forward", "zeta_forward", "igamma_forward", "igammac_forward", "igamma_derivative_forward",
    "orthogonal_polynomial_forward", "bessel_j0_forward", "bessel_j1_forward", "bessel_y0_forward",
    "bessel_y1_forward", "modified_bessel_k0_forward", "modified_bessel_k1_forward",
    "scaled_modified_bessel_k0_forward", "scaled_modified_bessel_k1_forward",
]

_F64 = np.float64
_digamma = kernel(special_gamma.digamma)
_trigamma = kernel(special_gamma.trigamma)
_zeta = kernel(special_gamma.zeta)
_igamma = kernel(special_gamma.gammainc)
_igammac = kernel(special_gamma.gammaincc)
_igamma_derivative = kernel(special_gamma.gammainc_derivative)
_i0 = kernel(special_bessel.i0)
_i0e = kernel(special_bessel.i0e)
_i1 = kernel(special_bessel.i1)
_i1e = kernel(special_bessel.i1e)
_erfcx = kernel(special_math.erfcx)
_orthogonal_polynomial = kernel(special_polynomials.orthogonal_polynomial)
_bessel_j = kernel(special_bessel.bessel_j)
_bessel_y = kernel(special_bessel.bessel_y)
_bessel_k = kernel(special_bessel.bessel_k)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def lgamma_forward(x, out):
    """out = log |Gamma(x)| (inf at the non-positive integers)."""
    for i in prange(x.size):
        out[i] = math.lgamma(_F64(x[i]))


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def digamma_forward(x, out):
    """out = digamma(x)."""
    for i in prange(x.size):
        out[i] = _digamma(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def trigamma_forward(x, out):
    """out = trigamma(x), digamma's derivative."""
    for i in prange(x.size):
        out[i] = _trigamma(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def i0_forward(x, out):
    """out = I0(x)."""
    for i in prange(x.size):
        out[i] = _i0(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def i0e_forward(x, out):
    """out = exp(-|x|) I0(x)."""
    for i in prange(x.size):
        out[i] = _i0e(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def i1_forward(x, out):
    """out = I1(x)."""
    for i in prange(x.size):
        out[i] = _i1(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def i1e_forward(x, out):
    """out = exp(-|x|) I1(x)."""
    for i in prange(x.size):
        out[i] = _i1e(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def bessel_j0_forward(x, out):
    """out = J0(x)."""
    for i in prange(x.size):
        out[i] = _bessel_j(_F64(x[i]), 0, _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def bessel_j1_forward(x, out):
    """out = J1(x)."""
    for i in prange(x.size):
        out[i] = _bessel_j(_F64(x[i]), 1, _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def bessel_y0_forward(x, out):
    """out = Y0(x)."""
    for i in prange(x.size):
        out[i] = _bessel_y(_F64(x[i]), 0, _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def bessel_y1_forward(x, out):
    """out = Y1(x)."""
    for i in prange(x.size):
        out[i] = _bessel_y(_F64(x[i]), 1, _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def modified_bessel_k0_forward(x, out):
    """out = K0(x)."""
    for i in prange(x.size):
        out[i] = _bessel_k(_F64(x[i]), 0, False, _F64)

@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def modified_bessel_k1_forward(x, out):
    """out = K1(x)."""
    for i in prange(x.size):
        out[i] = _bessel_k(_F64(x[i]), 1, False, _F64)

@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def scaled_modified_bessel_k0_forward(x, out):
    """out = e^x K0(x)."""
    for i in prange(x.size):
        out[i] = _bessel_k(_F64(x[i]), 0, True, _F64)

@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def scaled_modified_bessel_k1_forward(x, out):
    """out = e^x K1(x)."""
    for i in prange(x.size):
        out[i] = _bessel_k(_F64(x[i]), 1, True, _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def erfcx_forward(x, out):
    """out = exp(x^2) erfc(x)."""
    for i in prange(x.size):
        out[i] = _erfcx(_F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def zeta_forward(s, q, out):
    """out = zeta(s, q), the Hurwitz zeta function."""
    for i in prange(out.size):
        out[i] = _zeta(_F64(s[i]), _F64(q[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def igamma_forward(a, x, out):
    """out = P(a, x), the regularized lower incomplete gamma function."""
    for i in prange(out.size):
        out[i] = _igamma(_F64(a[i]), _F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def igammac_forward(a, x, out):
    """out = Q(a, x) = 1 - P(a, x)."""
    for i in prange(out.size):
        out[i] = _igammac(_F64(a[i]), _F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def igamma_derivative_forward(a, x, out):
    """out = d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)."""
    for i in prange(out.size):
        out[i] = _igamma_derivative(_F64(a[i]), _F64(x[i]), _F64)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def orthogonal_polynomial_forward(x, n, kind, shifted, out):
    """out = the orthogonal polynomial ``kind`` of degree n at x (at 2x - 1 where ``shifted``)."""
    for i in prange(out.size):
        v = _F64(x[i])
        out[i] = _orthogonal_polynomial(v + v - 1.0 if shifted else v, _F64(n[i]), kind, _F64)
