"""Conformance rows of creation and random functions: factories with ``dtype=`` (the dtype under
test), the ``*_like`` forms, ``Tensor.new_*``, fills, and the random functions and in-place
random fills (``values=False``: dtype, shape and device only, as the streams differ from PyTorch's).
"""

from __future__ import annotations

from row import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, Dtype, Lit, Row, Scalar, T

_SIZE = Lit((2, 3))
_FACTORY = dict(grad=False)
_RANDOM = dict(grad=False, values=False)

ROWS = [
    # --- deterministic factories --------------------------------------------------------------
    Row("zeros", args=(_SIZE,), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("ones", args=(Lit(2), Lit(3)), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("full", args=(_SIZE, Scalar(1)), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("full", args=(_SIZE, Scalar()), name="inferred-dtype", **_FACTORY),
    Row("empty", args=(_SIZE,), kwargs={"dtype": Dtype()}, values=False, grad=False),
    Row("eye", args=(Lit(3),), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("eye", args=(Lit(2), Lit(4)), kwargs={"dtype": Dtype()}, name="rectangular", **_FACTORY),
    Row("arange", args=(Lit(0), Lit(10), Lit(3)), kwargs={"dtype": Dtype()}, dtypes=(*INT_DTYPES, *FLOAT_DTYPES),
        **_FACTORY),
    Row("arange", args=(Lit(0.5), Lit(4.0), Lit(0.75)), kwargs={"dtype": Dtype()}, dtypes=FLOAT_DTYPES,
        name="float-step", **_FACTORY),
    Row("linspace", args=(Lit(-3), Lit(10), Lit(7)), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("linspace", args=(Lit(2), Lit(5), Lit(1)), kwargs={"dtype": Dtype()}, name="one-step", **_FACTORY),
    Row("logspace", args=(Lit(0), Lit(2), Lit(3)), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("logspace", args=(Lit(0), Lit(5), Lit(6)), kwargs={"dtype": Dtype(), "base": Lit(2.0)}, name="base2",
        **_FACTORY),
    Row("tensor", args=(Lit([[1, 0, 2], [3, 1, 0]]),), kwargs={"dtype": Dtype()}, **_FACTORY),
    # --- windows ---------------------------------------------------------------------------------
    *(Row(window, args=(Lit(length), Lit(periodic)), kwargs={"dtype": Dtype()}, name=f"{length}-{periodic}",
          rtol=2e-7 if length > 1 else None, **_FACTORY)
      for window in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window")
      for length, periodic in ((0, True), (1, False), (7, True), (10, False))),
    Row("hamming_window", args=(Lit(6), Lit(False), Lit(0.5), Lit(0.4)), kwargs={"dtype": Dtype()}, name="alpha-beta",
        **_FACTORY),
    Row("kaiser_window", args=(Lit(9), Lit(True), Lit(5.0)), kwargs={"dtype": Dtype()}, name="beta", **_FACTORY),
    Row("hann_window", args=(Lit(5),), name="default-dtype", **_FACTORY),
    # --- *_like and new_* -----------------------------------------------------------------------
    Row("zeros_like", args=(T(),), **_FACTORY),
    Row("ones_like", args=(T(),), **_FACTORY),
    Row("full_like", args=(T(), Scalar(1)), **_FACTORY),
    Row("empty_like", args=(T(),), **_RANDOM),
    Row("zeros_like", args=(T(dtype="float32"),), kwargs={"dtype": Dtype()}, name="dtype", **_FACTORY),
    Row("Tensor.new_zeros", args=(T(dtype="float64"), _SIZE), kwargs={"dtype": Dtype()}, **_FACTORY),
    Row("Tensor.new_zeros", args=(T(), _SIZE), name="own-dtype", **_FACTORY),
    Row("Tensor.new_ones", args=(T(), _SIZE), **_FACTORY),
    Row("Tensor.new_full", args=(T(), _SIZE, Scalar(1)), **_FACTORY),
    Row("Tensor.new_empty", args=(T(), _SIZE), **_RANDOM),
    Row("Tensor.new_tensor", args=(T(), Lit([1, 0, 1])), **_FACTORY),
    Row("Tensor.fill_", args=(T(), Scalar(1)), **_FACTORY),
    Row("Tensor.zero_", **_FACTORY),
    # --- random factories -------------------------------------------------------------------------
    Row("rand", args=(_SIZE,), kwargs={"dtype": Dtype()}, **_RANDOM),
    Row("randn", args=(Lit(2), Lit(3)), kwargs={"dtype": Dtype()}, **_RANDOM),
    Row("randint", args=(Lit(0), Lit(2), _SIZE), kwargs={"dtype": Dtype()}, **_RANDOM),
    Row("randint", args=(Lit(5), _SIZE), name="high-only", dtypes=("int64",), **_RANDOM),
    Row("randperm", args=(Lit(6),), kwargs={"dtype": Dtype()}, dtypes=(*INT_DTYPES, *FLOAT_DTYPES), **_RANDOM),
    Row("rand_like", args=(T(),), **_RANDOM),
    Row("randn_like", args=(T(),), **_RANDOM),
    Row("randint_like", args=(T(), Lit(2)), **_RANDOM),
    Row("randint_like", args=(T(dtype="float32"), Lit(1), Lit(5)), kwargs={"dtype": Dtype()}, name="dtype",
        **_RANDOM),
    Row("normal", args=(T(), T(domain="positive")), dtypes=ALL_DTYPES, **_RANDOM),
    Row("normal", args=(T(shape=(3, 1)), T(shape=(4,), domain="positive")), name="broadcast",
        dtypes=FLOAT_DTYPES, **_RANDOM),
    Row("normal", args=(T(), Lit(2.0)), name="tensor-mean", **_RANDOM),
    Row("normal", args=(Lit(1.0), T(domain="positive")), name="tensor-std", **_RANDOM),
    Row("normal", args=(Lit(0.0), Lit(1.0), _SIZE), kwargs={"dtype": Dtype()}, name="size", **_RANDOM),
    Row("bernoulli", args=(T(domain="unit"),), domain="unit", **_RANDOM),
    Row("bernoulli", args=(T(), Lit(0.3)), name="p", **_RANDOM),
    Row("multinomial", args=(T(domain="positive"), Lit(2)), domain="positive", **_RANDOM),
    Row("multinomial", args=(T(domain="positive"), Lit(6), Lit(True)), name="replacement", domain="positive",
        **_RANDOM),
    Row("Tensor.multinomial", args=(T(shape=(5,), domain="positive"), Lit(3)), domain="positive", **_RANDOM),
    Row("Tensor.bernoulli", args=(T(domain="unit"),), domain="unit", **_RANDOM),
    # --- in-place random fills ------------------------------------------------------------------------
    Row("Tensor.uniform_", args=(T(), Lit(-1.0), Lit(1.0)), **_RANDOM),
    Row("Tensor.normal_", args=(T(), Lit(0.0), Lit(2.0)), **_RANDOM),
    Row("Tensor.random_", args=(T(), Lit(0), Lit(2)), **_RANDOM),
    Row("Tensor.random_", args=(T(), Lit(2)), name="to-only", **_RANDOM),
    Row("Tensor.bernoulli_", args=(T(), Lit(0.5)), **_RANDOM),
    Row("Tensor.exponential_", args=(T(), Lit(1.5)), **_RANDOM),
    Row("Tensor.log_normal_", args=(T(), Lit(0.0), Lit(0.5)), **_RANDOM),
    Row("Tensor.cauchy_", args=(T(), Lit(1.0), Lit(2.0)), **_RANDOM),
    Row("Tensor.geometric_", args=(T(), Lit(0.3)), **_RANDOM),
]
