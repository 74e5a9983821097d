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
_NO_INPLACE = {"logaddexp", "logaddexp2", "fmax", "fmin"}
# Functions of one tensor with poles or special values, also tried on the "edges" domain (0,
# negative integers, +-inf, NaN): values only.
_EDGES = ("lgamma", "digamma", "i0", "sinc", "logit", "deg2rad", "frexp")


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
    # special functions of one tensor and number functions
    *_unary_rows("lgamma", "real"),
    *_unary_rows("digamma", "real"),
    *_unary_rows("i0", "real"),
    *_unary_rows("sinc", "real"),
    *_unary_rows("deg2rad", "real"),
    *_unary_rows("rad2deg", "real"),
    *_unary_rows("logit", "probability"),
    Row("logit", args=(T(), Lit(0.2)), name="eps"),
    Row("Tensor.logit_", kwargs={"eps": Lit(0.1)}, domain="probability", name="eps"),
    *(Row(name, domain="edges", shape=(17,), grad=False, name="edges") for name in _EDGES),
    # positive: PyTorch's float32 polygamma loses digits near the poles
    *(Row("polygamma", args=(Lit(n), T()), domain="positive", name=f"n{n}") for n in (0, 1, 2, 3)),
    Row("polygamma", args=(Lit(1), T()), dtypes=("float64",), name="n1-negative"),
    *(Row("polygamma", args=(Lit(n), T()), domain="edges", shape=(17,), grad=False, name=f"n{n}-edges")
      for n in (1, 2)),
    Row("Tensor.polygamma", args=(T(), Lit(2)), domain="positive"),
    Row("Tensor.polygamma_", args=(T(), Lit(1)), domain="positive"),
    Row("mvlgamma", args=(T(),), kwargs={"p": Lit(3)}, domain="above1"),
    Row("Tensor.mvlgamma", args=(T(), Lit(2)), domain="above1"),
    Row("Tensor.mvlgamma_", args=(T(), Lit(1)), domain="above1"),
    Row("frexp", shape=(6,)),
    Row("Tensor.frexp", shape=(2, 3)),
    *_binary_rows("xlogy", T(domain="positive")),
    Row("xlogy", args=(T(), Scalar(2)), name="number"),
    Row("xlogy", args=(Scalar(3), T(domain="positive")), name="number_first"),
    Row("xlogy", args=(T(domain="edges"), T(domain="edges")), shape=(17,), grad=False, name="edges"),
    Row("float_power", args=(T(domain="positive"), T())),
    Row("float_power", args=(T(domain="positive"), Scalar(2)), name="number"),
    Row("float_power", args=(Lit(2.5), T()), name="number_base"),
    Row("Tensor.float_power", args=(T(domain="positive"), Lit(0.5))),
    Row("Tensor.float_power_", args=(T(domain="positive"), T())),
    *(row for name in ("fmax", "fmin") for row in _binary_rows(name, T())),
    *(Row(name, args=(T(domain="edges"), T(domain="edges", shape=(17, 1))), shape=(17,), grad=False, name="edges")
      for name in ("fmax", "fmin")),
    *_binary_rows("heaviside", T(), grad=False),
    *(row for name in ("gcd", "lcm") for row in _binary_rows(name, T(), grad=False)),
    Row("gcd", args=(T(domain="edges"), T(domain="edges", shape=(11, 1))), shape=(11,), dtypes=INT_DTYPES,
        grad=False, name="edges"),
    *_binary_rows("nextafter", T(), grad=False),
    Row("nextafter", args=(T(domain="edges"), T(domain="edges", shape=(17, 1))), shape=(17,), grad=False,
        name="edges"),
    Row("ldexp", args=(T(), T(dtype="int64", domain="index", high=6, shape=(4,)))),
    Row("ldexp", args=(T(), T(domain="real"))),
    Row("Tensor.ldexp_", args=(T(), T(dtype="int32", domain="index", high=4))),
    Row("addcmul", args=(T(), T(), T(shape=(4,))), kwargs={"value": Lit(2)}),
    Row("addcmul", args=(T(), T(), T()), kwargs={"value": Lit(0.5)}, name="float_value"),
    Row("Tensor.addcmul", args=(T(), T(), T())),
    Row("addcdiv", args=(T(), T(), T(domain="nonzero")), kwargs={"value": Lit(0.5)}),
    Row("addcdiv", args=(T(), T(dtype="float32"), T(shape=(4,), domain="nonzero")), name="mixed"),
    Row("Tensor.addcdiv", args=(T(), T(), T(domain="nonzero"))),
    # PyTorch's aliases
    *(Row(alias, args=args) for alias, args in (
        ("absolute", (T(),)), ("negative", (T(),)), ("positive", (T(),)), ("multiply", (T(), T())),
        ("divide", (T(), T(domain="nonzero"))), ("true_divide", (T(), T(domain="nonzero"))),
        ("subtract", (T(), T(shape=(4,)))))),
    Row("subtract", args=(T(), T()), kwargs={"alpha": Scalar(2)}, name="alpha"),
    Row("divide", args=(T(), T(domain="nonzero")), kwargs={"rounding_mode": Lit("floor")}, name="floor"),
    *(Row(alias, args=(T(), T()), grad=False) for alias in ("greater", "greater_equal", "less", "less_equal",
                                                           "not_equal")),
    *(Row(f"Tensor.{alias}", args=(T(), Scalar(1)), grad=False, name="number")
      for alias in ("greater", "greater_equal", "less", "less_equal", "not_equal", "eq_", "ne_", "lt_", "le_", "gt_",
                    "ge_", "greater_", "greater_equal_", "less_", "less_equal_", "not_equal_")),
    *(Row(f"Tensor.{method}", args=(T(), *rest)) for method, rest in (
        ("absolute", ()), ("absolute_", ()), ("negative", ()), ("negative_", ()), ("positive", ()),
        ("subtract", (T(),)), ("subtract_", (T(),)), ("multiply", (T(),)), ("multiply_", (T(),)),
        ("divide", (T(domain="nonzero"),)), ("divide_", (T(domain="nonzero"),)),
        ("true_divide", (T(domain="nonzero"),)), ("true_divide_", (T(domain="nonzero"),)))),
    # top-level in-place functions (torch.relu_(x) ...)
    *(Row(name, args=args, grad=False) for name, args in (
        ("relu_", (T(),)), ("exp_", (T(),)), ("sigmoid_", (T(),)), ("sqrt_", (T(domain="positive"),)),
        ("neg_", (T(),)), ("clamp_", (T(), Scalar(-1), Scalar(1))), ("xlogy_", (T(), T(domain="positive"))),
        ("i0_", (T(),)), ("gcd_", (T(), T())), ("logit_", (T(domain="probability"),)))),
]
