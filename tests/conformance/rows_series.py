"""Conformance rows of the ops along a series and the statistics of issue 32: differences,
trapezoid integrals, Vandermonde matrices, covariance and correlation, set membership and index
unravelling (see :mod:`row`)."""

from __future__ import annotations

from row import FLOAT_DTYPES, Lit, Row, Scalar, T

ROWS = [
    Row("diff"),
    Row("diff", (T(),), {"n": Lit(2), "dim": Lit(0)}, shape=(4, 3), name="n2-dim0"),
    Row("diff", (T(),), {"prepend": T(shape=(3, 1)), "append": T(shape=(3, 2))}, name="prepend-append"),
    Row("Tensor.diff", (T(), Lit(3))),
    Row("trapezoid"),
    Row("trapezoid", (T(),), {"dx": Lit(0.5), "dim": Lit(0)}, name="dx-dim0"),
    Row("trapezoid", (T(), T(shape=(4,), dtype="float64", grad=False)), name="x"),
    Row("trapz", (T(), T(shape=(3, 4), dtype="float64", grad=False)), name="x2d"),
    Row("cumulative_trapezoid"),
    Row("cumulative_trapezoid", (T(), T(shape=(3,), dtype="float64", grad=False)), {"dim": Lit(0)}, name="x"),
    Row("vander", (T(shape=(4,)),)),
    Row("vander", (T(shape=(3,)),), {"N": Lit(5), "increasing": Lit(True)}, name="N-increasing"),
    Row("cov", dtypes=FLOAT_DTYPES, domain="distinct"),
    Row("cov", (T(),), {"correction": Lit(0), "aweights": T(shape=(4,), dtype="float64", domain="positive",
                                                             grad=False)},
        dtypes=FLOAT_DTYPES, domain="distinct", name="aweights"),
    Row("cov", (T(),), {"fweights": T(shape=(4,), dtype="int64", domain="index", high=3)},
        dtypes=("float32", "float64"), domain="distinct", name="fweights"),
    Row("Tensor.cov", (T(shape=(5,)),), dtypes=FLOAT_DTYPES, domain="distinct"),
    Row("corrcoef", dtypes=("float32", "float64"), domain="distinct"),
    Row("isin", (T(), T(shape=(5,))), grad=False),
    Row("isin", (T(), Scalar()), grad=False, name="scalar"),
    Row("isin", (T(), T(shape=(2, 3))), {"invert": Lit(True)}, grad=False, name="invert"),
    Row("unravel_index", (T(domain="index", high=12), Lit((3, 4))), dtypes=("uint8", "int16", "int32", "int64")),
]
