"""Conformance rows of zgrad's core ops: arithmetic and its operators with every kind of second
operand (the cases PyTorch's type promotion decides), comparisons and logic, activations,
softmax, matmul and the first reductions."""

from __future__ import annotations

from row import Lit, Row, Scalar, T

# The second operands of a binary op: each decides the result dtype differently.
SECOND_OPERANDS = {
    "": T(),                                         # same dtype, same shape
    "broadcast": T(shape=(4,)),                      # same dtype, broadcast
    "scalar": Scalar(),                              # a Python number of the tensor's kind
    "float": Lit(2.5),                               # a Python float: raises the category only
    "int": Lit(3),                                   # a Python int
    "zero_dim_f64": T(shape=(), dtype="float64"),    # a 0-dim tensor: raises the category only
    "int64": T(dtype="int64"),                       # a dimensioned int64 tensor: promotes fully
    "float64": T(dtype="float64"),                   # a dimensioned float64 tensor
    "bool": T(dtype="bool"),
}


def _binary(op: str, domain: str = "real", second_domain: str | None = None, grad: bool = True) -> list[Row]:
    rows = []
    for name, second in SECOND_OPERANDS.items():
        if second_domain is not None and isinstance(second, T):
            second = T(shape=second.shape, dtype=second.dtype, domain=second_domain)
        rows.append(Row(op, (T(), second), domain=domain, grad=grad, name=name))
    return rows


ROWS = [
    *_binary("add"), *_binary("sub"), *_binary("mul"),
    *_binary("div", second_domain="nonzero"),
    *_binary("remainder", second_domain="nonzero", grad=False),
    *_binary("pow", domain="positive", second_domain="positive"),
    *_binary("maximum"), *_binary("minimum"),
    *_binary("eq"), *_binary("ne"), *_binary("lt"), *_binary("le"), *_binary("gt"), *_binary("ge"),
    Row("logical_and", (T(), T())), Row("logical_or", (T(), T())), Row("logical_xor", (T(), T())),
    Row("logical_not"),
    Row("add", (T(), T()), {"alpha": Lit(2)}, name="alpha"),
    Row("div", (T(), T(domain="nonzero")), {"rounding_mode": Lit("floor")}, name="floor"),
    Row("div", (T(), T(domain="nonzero")), {"rounding_mode": Lit("trunc")}, name="trunc"),
    Row("Tensor.__add__", (T(), Lit(1))), Row("Tensor.__radd__", (T(), Lit(1))),
    Row("Tensor.__sub__", (T(), Lit(1))), Row("Tensor.__rsub__", (T(), Lit(1))),
    Row("Tensor.__mul__", (T(), Lit(2.5))), Row("Tensor.__rmul__", (T(), Lit(2))),
    Row("Tensor.__truediv__", (T(), Lit(2))), Row("Tensor.__rtruediv__", (T(domain="nonzero"), Lit(2))),
    Row("Tensor.__floordiv__", (T(), Lit(2)), grad=False), Row("Tensor.__mod__", (T(), Lit(3)), grad=False),
    Row("Tensor.__pow__", (T(domain="positive"), Lit(2))),
    Row("Tensor.__rpow__", (T(), Lit(2))),
    Row("Tensor.__neg__"), Row("Tensor.__abs__"),
    Row("Tensor.add_", (T(), T())), Row("Tensor.add_", (T(), Lit(2.5)), name="float"),
    Row("Tensor.mul_", (T(), Lit(2))), Row("Tensor.div_", (T(), Lit(2))),
    Row("Tensor.sub_", (T(), T(dtype="float64")), name="float64"),
    Row("neg"), Row("abs"), Row("square"),
    Row("exp"), Row("log", domain="positive"), Row("sqrt", domain="positive"), Row("tanh"), Row("sigmoid"),
    Row("relu"),
    Row("clamp", (T(), Lit(-1), Lit(1))), Row("clamp", (T(), Lit(-0.5), Lit(1.5)), name="float_bounds"),
    Row("clamp", (T(),), {"min": T(), "max": T(shape=(4,), domain="above1")}, name="tensor_bounds"),
    Row("where", (T(dtype="bool"), T(), T(dtype="float64")), name="mixed"),
    Row("softmax", (T(), Lit(1))), Row("log_softmax", (T(), Lit(-1))),
    Row("softmax", (T(), Lit(0)), {"dtype": Lit(None)}, name="dtype_none"),
    Row("matmul", (T(), T(shape=(4, 2))), name="2d"),
    Row("matmul", (T(shape=(2, 3, 4)), T(shape=(4, 5))), name="batched"),
    Row("matmul", (T(shape=(4,)), T(shape=(4,))), name="dot"),
    Row("sum", (T(), Lit(1)), name="dim"), Row("sum", (T(),), {"dim": Lit((0, 1)), "keepdim": Lit(True)},
                                                 name="dims_keepdim"),
    Row("sum", (T(),), {"dtype": Lit(None)}, name="dtype_none"),
    Row("mean", (T(), Lit(0)), name="dim"), Row("var", (T(), Lit(1)), name="dim"), Row("std"),
    Row("var", (T(),), {"dim": Lit(1), "correction": Lit(0)}, name="correction"),
    Row("argmin", (T(), Lit(1)), domain="distinct"),
]
ROWS += [
    *_binary("floor_divide", second_domain="nonzero", grad=False),
    Row("Tensor.__rfloordiv__", (T(domain="nonzero"), Lit(7)), grad=False),
    Row("Tensor.div_", (T(), T(domain="nonzero")), {"rounding_mode": Lit("trunc")}, name="trunc"),
    Row("Tensor.floor_divide_", (T(), Lit(2))),
    Row("Tensor.__floordiv__", (T(), T(shape=(4,), domain="nonzero")), name="tensor", grad=False),
]
ROWS += [
    *(Row(f"Tensor.{op}_", (T(), second), grad=False, name=name)
      for op in ("eq", "ne", "lt", "le", "gt", "ge")
      for name, second in (("", T()), ("broadcast", T(shape=(4,))), ("scalar", Scalar()))),
    Row("Tensor.logical_and", (T(), T())), Row("Tensor.logical_or", (T(), T(shape=(4,)))),
    Row("Tensor.logical_xor", (T(), T(dtype="int64"))),
    Row("Tensor.logical_and_", (T(), T()), grad=False), Row("Tensor.logical_or_", (T(), T(shape=(4,))), grad=False),
    Row("Tensor.logical_xor_", (T(), T(dtype="bool")), grad=False), Row("Tensor.logical_not_", grad=False),
]
