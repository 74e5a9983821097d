"""Conformance rows of ``zgrad.special`` (torch.special): its aliases of the element-wise
functions, its compositions (logit, ndtr, ndtri, sinc, entr, xlogy, xlog1py) and its special
functions (gammaln, digamma, polygamma, multigammaln, the Bessel functions i0 ... i1e, erfcx,
log_ndtr, zeta, gammainc, gammaincc), over every dtype (the runner records the dtypes PyTorch
refuses, as ndtri's float16), and on the "edges" domain (poles, +-inf, NaN) for the special ones.
"""

from __future__ import annotations

from row import FLOAT_DTYPES, Lit, Row, Scalar, T

_UNARY = {
    "erf": "real", "erfc": "real", "erfinv": "unit", "expit": "real", "exp2": "real", "expm1": "real",
    "log1p": "positive", "ndtr": "real", "sinc": "real", "entr": "positive", "round": "real",
    "gammaln": "real", "digamma": "real", "psi": "real", "i0": "real", "i0e": "real", "i1": "real", "i1e": "real",
    "erfcx": "real", "log_ndtr": "real",
}
_EDGES = ("gammaln", "digamma", "i0e", "i1", "i1e", "erfcx", "log_ndtr")

ROWS = [
    *(Row(f"special.{name}", domain=domain) for name, domain in _UNARY.items()),
    Row("special.logit", domain="positive", dtypes=FLOAT_DTYPES, kwargs={"eps": Lit(0.2)}, name="eps"),
    Row("special.ndtri", domain="unit", grad=False),  # NaN below 0: no gradient check
    Row("special.xlogy", args=(T(), T(domain="positive")), domain="positive"),
    Row("special.xlogy", args=(T(), Scalar(2)), domain="positive", name="number"),
    Row("special.xlog1py", args=(T(), T(shape=(4,), domain="positive")), domain="positive", name="broadcast"),
    Row("special.softmax", args=(T(), Lit(1)), dtypes=FLOAT_DTYPES),
    Row("special.log_softmax", args=(T(), Lit(0)), dtypes=FLOAT_DTYPES),
    Row("special.logsumexp", args=(T(), Lit(1)), dtypes=FLOAT_DTYPES),
    *(Row(f"special.{name}", domain="edges", shape=(17,), grad=False, name="edges") for name in _EDGES),
    Row("special.polygamma", args=(Lit(2), T()), domain="positive"),
    Row("special.multigammaln", args=(T(), Lit(2)), domain="above1"),
    Row("special.zeta", args=(T(domain="above1"), T(domain="positive")), grad=False),
    Row("special.zeta", args=(T(domain="above1"), Scalar(2)), grad=False, name="number"),
    Row("special.zeta", args=(Lit(3.0), T(domain="positive")), grad=False, name="number_first"),
    Row("special.zeta", args=(T(domain="edges"), T(domain="edges", shape=(17, 1))), shape=(17,), grad=False,
        name="edges"),
    # the first argument carries no gradient: PyTorch's backward refuses it (tested in tests/core)
    *(Row(f"special.{name}", args=(T(domain="positive", grad=False), T(domain="positive")), domain="positive")
      for name in ("gammainc", "gammaincc")),
    *(Row(name, args=(T(domain="positive", grad=False), T(domain="positive", shape=(4,))), domain="positive")
      for name in ("igamma", "igammac")),
    *(Row(f"Tensor.{name}", args=(T(domain="positive"), T(domain="positive")), domain="positive", grad=False)
      for name in ("igamma", "igammac", "igamma_", "igammac_")),
    *(Row(f"special.{name}", args=(T(domain="edges"), T(domain="edges", shape=(17, 1))), shape=(17,), grad=False,
          name="edges") for name in ("gammainc", "gammaincc")),
    # the orthogonal polynomials: degree a number or an integer tensor (no gradient, as PyTorch)
    *(Row(f"special.{prefix}{name}", args=(T(domain="unit"), Lit(n)), grad=False, name=f"n{n}")
      for prefix in ("", "shifted_") for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u",
                                                  "chebyshev_polynomial_v", "chebyshev_polynomial_w")
      for n in (3, 12)),
    *(Row(f"special.{name}", args=(T(), T(dtype="int64", domain="index", high=9, shape=(4,))), grad=False)
      for name in ("chebyshev_polynomial_t", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
                   "legendre_polynomial_p")),
    *(Row(f"special.{name}", args=(T(), Lit(n)), grad=False, name=f"n{n}")
      for name in ("hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
      for n in (0, 5)),
    Row("special.legendre_polynomial_p", args=(T(domain="edges"), Lit(4)), shape=(16,), grad=False, name="edges"),
    *(Row(f"special.{name}", grad=False, shape=(5,)) for name in ("modified_bessel_i0", "modified_bessel_i1",
                                                                   "spherical_bessel_j0")),
    *(Row(f"special.{name}", domain="edges", shape=(17,), grad=False, name="edges")
      for name in ("modified_bessel_i1", "spherical_bessel_j0")),
    # torch's float64 Bessel functions are off by up to 1.6e-7 (J0(5.5)) and 8.6e-7 (Y1); zgrad's
    # within 4e-16 (mpmath, tests/core/test_special_functions.py), hence the absolute tolerance
    *(Row(f"special.{name}", grad=False, atol=2e-6, shape=(5,)) for name in ("bessel_j0", "bessel_j1")),
    *(Row(f"special.{name}", grad=False, atol=2e-6, rtol=2e-6, shape=(5,), domain="positive")
      for name in ("bessel_y0", "bessel_y1")),
    *(Row(f"special.{name}", grad=False, shape=(5,), domain="positive")
      for name in ("modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
                   "scaled_modified_bessel_k1")),
]
