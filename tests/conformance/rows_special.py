"""Conformance rows of ``zgrad.special`` (torch.special): its aliases of the element-wise
functions and its compositions (logit, ndtr, ndtri, sinc, entr, xlogy, xlog1py), over every
dtype (the runner records the dtypes PyTorch refuses, as ndtri's float16).
"""

from __future__ import annotations

from row import FLOAT_DTYPES, Lit, Row, Scalar, T

_UNARY = {
    "erf": "real", "erfc": "real", "erfinv": "unit", "expit": "real", "exp2": "real", "expm1": "real",
    "log1p": "positive", "ndtr": "real", "sinc": "real", "entr": "positive", "round": "real",
}

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
]
