"""Differentiable functions on tensors (``zgrad.add``, ``zgrad.matmul``, ...), gathered from the
modules of this package: each function validates and normalizes its arguments, then applies one
op class (``functions.py`` holds those whose class has no function beside it).
"""

from __future__ import annotations

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
from zgrad.ops.sampling import bernoulli, multinomial, normal
from zgrad.ops.shape import chunk, expand, flatten, split, squeeze, t, unsqueeze

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "square", "matmul", "exp", "log", "tanh", "sigmoid", "relu",
    "sum", "mean", "prod", "nansum", "cumsum", "reshape", "transpose", "permute", "getitem", "stack", "cat", "clone",
    "cast", "to_device",
    "softmax", "log_softmax", "linear", "cross_entropy", "mse_loss",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not",
    "abs", "sqrt", "clamp", "clip", "maximum", "minimum", "remainder", "gather", "index_select", "scatter", "where",
    "masked_fill", "ValuesIndices", "max", "min", "argmax", "argmin", "var", "std", "logsumexp",
    "flatten", "unsqueeze", "squeeze", "expand", "split", "chunk", "t",
    "bernoulli", "multinomial", "normal",
]
