"""Differentiable functions on tensors (``zgrad.add``, ``zgrad.matmul``, ...), gathered from the
modules of this package: each function validates and normalizes its arguments, then applies one
op class (``functions.py`` holds those whose class has no function beside it).
"""

from __future__ import annotations

from zgrad.ops.binary_math import (
    arctan2, atan2, bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor,
    copysign, floor_divide, fmod, hypot, lerp, logaddexp, logaddexp2,
)
from zgrad.ops.compare import eq, ge, gt, le, logical_and, logical_not, logical_or, logical_xor, lt, ne
from zgrad.ops.elementwise import abs, clamp, clip, maximum, minimum, remainder, sqrt
from zgrad.ops.functions import (
    add, cast, cat, clone, div, exp, getitem, linear, log, log_softmax, matmul, mul, neg, permute, pow, relu,
    reshape, sigmoid, softmax, square, stack, sub, tanh, to_device, transpose,
)
from zgrad.ops.indexing import gather, index_select, masked_fill, scatter, where
from zgrad.ops.loss_functions import cross_entropy, mse_loss
from zgrad.ops.reduce import (
    ValuesIndices, argmax, argmin, cumsum, logsumexp, max, mean, min, nansum, prod, std, sum, var,
)
from zgrad.ops.rounding import (
    ceil, clamp_max, clamp_min, fix, floor, frac, isfinite, isinf, isnan, isneginf, isposinf, nan_to_num, round,
    sgn, sign, signbit, trunc,
)
from zgrad.ops.shape import chunk, expand, flatten, split, squeeze, t, unsqueeze
from zgrad.ops.unary_math import (
    acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan, arctanh, asin, asinh, atan, atanh, cos, cosh, erf, erfc,
    erfinv, exp2, expm1, log10, log1p, log2, reciprocal, rsqrt, sin, sinh, tan,
)

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "square", "matmul", "exp", "log", "tanh", "sigmoid", "relu",
    "sum", "mean", "prod", "nansum", "cumsum", "reshape", "transpose", "permute", "getitem", "stack", "cat", "clone",
    "cast", "to_device",
    "softmax", "log_softmax", "linear", "cross_entropy", "mse_loss",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
    "abs", "sqrt", "clamp", "clip", "maximum", "minimum", "remainder", "gather", "index_select", "scatter", "where",
    "masked_fill", "ValuesIndices", "max", "min", "argmax", "argmin", "var", "std", "logsumexp",
    "flatten", "unsqueeze", "squeeze", "expand", "split", "chunk", "t",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos",
    "arctan", "arcsinh", "arccosh", "arctanh", "erf", "erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2",
    "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc", "fix", "frac", "sign", "sgn", "nan_to_num",
    "clamp_min", "clamp_max", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "atan2", "arctan2",
    "fmod", "hypot", "logaddexp", "logaddexp2", "copysign", "lerp", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "floor_divide",
]
