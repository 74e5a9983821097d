"""Conformance rows of the element-wise math functions: trigonometric and hyperbolic functions,
error functions, logarithms and exponentials, rounding and sign, predicates, two-operand
functions, bitwise functions and operators, and the arithmetic they sit beside (exp, log, tanh,
sigmoid, sqrt, abs, neg, pow, remainder, floor_divide, clamp). Each function has a row for itself,
its Tensor method and its in-place method where PyTorch has them, over every dtype (the runner
records the dtypes PyTorch refuses).
"""

from __future__ import annotations

from row import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, Lit, Row, Scalar, T

# Floating functions of one tensor, by the domain their values come from.
_FLOATING = {
    "sin": "real", "cos": "real", "tan": "unit", "asin": "unit", "acos": "unit", "atan": "real", "sinh": "real",
    "cosh": "real", "asinh": "real", "acosh": "above1", "atanh": "unit", "arcsin": "unit", "arccos": "unit",
    "arctan": "real", "arcsinh": "real", "arccosh": "above1", "arctanh": "unit", "erf": "real", "erfc": "real",
    "erfinv": "unit", "log1p": "positive", "expm1": "real", "log2": "positive", "log10": "positive", "exp2": "real",
    "rsqrt": "positive", "reciprocal": "nonzero", "exp": "real", "log": "positive", "tanh": "real",
    "sigmoid": "real", "sqrt": "positive",
}
# Functions of one tensor whose gradient is zero (or which keep integer dtypes): rounding and sign.
_ROUNDING = ("floor", "ceil", "round", "trunc", "fix", "sign", "sgn")
_PREDICATES = ("isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit")
# PyTorch has no in-place form of these.
_NO_INPLACE = {"logaddexp", "logaddexp2"}


def _unary_rows(name: str, domain: str, dtypes: tuple[str, ...] = ALL_DTYPES, grad: bool = True) -> list[Row]:
    rows = [Row(name, domain=domain, dtypes=dtypes, grad=grad),
            Row(f"Tensor.{name}", domain=domain, dtypes=dtypes, grad=grad, shape=(2, 3, 4))]
    if name not in _NO_INPLACE:
        rows.append(Row(f"Tensor.{name}_", domain=domain, dtypes=dtypes, grad=grad, shape=(5,)))
    return rows


def _binary_rows(name: str, second: T | Scalar, domain: str = "real", dtypes: tuple[str, ...] = ALL_DTYPES,
                 grad: bool = True) -> list[Row]:
    rows = [Row(name, args=(T(), second), domain=domain, dtypes=dtypes, grad=grad),
            Row(name, args=(T(), T(shape=(4,), domain=second.domain if isinstance(second, T) else None)),
                domain=domain, dtypes=dtypes, grad=grad, name="broadcast"),
            Row(f"Tensor.{name}", args=(T(), second), domain=domain, dtypes=dtypes, grad=grad, shape=(5,))]
    if name not in _NO_INPLACE:
        rows.append(Row(f"Tensor.{name}_", args=(T(), second), domain=domain, dtypes=dtypes, grad=grad))
    return rows


ROWS = [
    *(row for name, domain in _FLOATING.items() for row in _unary_rows(name, domain)),
    *(row for name in _ROUNDING for row in _unary_rows(name, "real")),
    *_unary_rows("frac", "real"),
    Row("round", kwargs={"decimals": Lit(2)}, dtypes=ALL_DTYPES, name="decimals"),
    Row("round", kwargs={"decimals": Lit(-1)}, dtypes=FLOAT_DTYPES, shape=(6,), name="negative_decimals"),
    Row("Tensor.round_", kwargs={"decimals": Lit(1)}, dtypes=FLOAT_DTYPES, name="decimals"),
    *(Row(name, dtypes=ALL_DTYPES, grad=False) for name in _PREDICATES),
    *(Row(f"Tensor.{name}", dtypes=ALL_DTYPES, grad=False, shape=(2, 3)) for name in _PREDICATES),
    Row("nan_to_num", dtypes=ALL_DTYPES, domain="positive", args=(T(),)),
    Row("nan_to_num", args=(T(),), kwargs={"nan": Lit(1.5), "posinf": Lit(9.0), "neginf": Lit(-9.0)},
        name="values"),
    Row("Tensor.nan_to_num_", dtypes=ALL_DTYPES),
    Row("clamp_min", args=(T(), Scalar(0)), dtypes=ALL_DTYPES),
    Row("clamp_max", args=(T(), Scalar(1)), dtypes=ALL_DTYPES),
    Row("clamp_min", args=(T(), Lit(0.25)), dtypes=ALL_DTYPES, name="float_bound"),
    Row("Tensor.clamp_min", args=(T(), Scalar(0))),
    Row("Tensor.clamp_max_", args=(T(), Scalar(1))),
    Row("clamp", args=(T(), Scalar(-1), Scalar(1)), dtypes=ALL_DTYPES),
    Row("abs", dtypes=ALL_DTYPES),
    Row("Tensor.abs"),
    Row("neg", dtypes=ALL_DTYPES),
    Row("Tensor.neg", shape=(5,)),
    *_binary_rows("atan2", T()),
    *_binary_rows("arctan2", T()),
    *_binary_rows("hypot", T()),
    *_binary_rows("logaddexp", T()),
    *_binary_rows("logaddexp2", T()),
    *_binary_rows("copysign", T()),
    Row("copysign", args=(T(), Scalar(-1)), name="number"),
    *_binary_rows("fmod", T(domain="nonzero"), domain="real"),
    Row("fmod", args=(T(), Scalar(3)), name="number"),
    *_binary_rows("remainder", T(domain="nonzero")),
    Row("remainder", args=(T(), Scalar(3)), name="number"),
    *_binary_rows("floor_divide", T(domain="nonzero"), grad=False),
    Row("pow", args=(T(domain="positive"), T()), dtypes=ALL_DTYPES),
    Row("pow", args=(T(domain="positive"), Scalar(2)), dtypes=ALL_DTYPES, name="number"),
    Row("lerp", args=(T(), T(), Lit(0.3)), dtypes=ALL_DTYPES),
    Row("lerp", args=(T(), T(), T(shape=(4,))), dtypes=ALL_DTYPES, name="tensor_weight"),
    Row("Tensor.lerp", args=(T(), T(), Lit(0.75))),
    Row("Tensor.lerp_", args=(T(), T(), T())),
    *(row for name in ("bitwise_and", "bitwise_or", "bitwise_xor")
      for row in _binary_rows(name, T(), grad=False)),
    *(row for name in ("bitwise_left_shift", "bitwise_right_shift")
      for row in _binary_rows(name, T(domain="index", high=8), grad=False)),
    Row("bitwise_and", args=(T(), Scalar(6)), grad=False, name="number"),
    Row("bitwise_left_shift", args=(T(), Scalar(3)), dtypes=INT_DTYPES, grad=False, name="number"),
    *_unary_rows("bitwise_not", "real", grad=False),
    *(Row(f"Tensor.{dunder}", args=(T(), T()), grad=False) for dunder in ("__and__", "__or__", "__xor__")),
    *(Row(f"Tensor.{dunder}", args=(T(), Scalar(1)), grad=False, name="number")
      for dunder in ("__and__", "__or__", "__xor__", "__rand__", "__ror__", "__rxor__")),
    *(Row(f"Tensor.{dunder}", args=(T(), T(domain="index", high=8)), grad=False)
      for dunder in ("__lshift__", "__rshift__")),
    *(Row(f"Tensor.{dunder}", args=(T(), Scalar(2)), grad=False, name="number")
      for dunder in ("__lshift__", "__rshift__", "__rlshift__", "__rrshift__")),
    Row("Tensor.__invert__", grad=False),
    Row("Tensor.__floordiv__", args=(T(), T(domain="nonzero")), grad=False),
    Row("Tensor.__rfloordiv__", args=(T(domain="nonzero"), Scalar(7)), grad=False, name="number"),
]
