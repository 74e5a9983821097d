"""Differentiable functions on tensors (``zgrad.add``, ``zgrad.matmul``, ...), gathered from the
modules of this package: each function validates and normalizes its arguments, then applies one
op class (``functions.py`` holds those whose class has no function beside it).
"""

from __future__ import annotations

from zgrad.ops.contraction import einsum, tensordot
from zgrad.ops.counting import bincount, histc, histogram, unique, unique_consecutive
from zgrad.ops.binary_math import (
    arctan2, atan2, bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor,
    copysign, floor_divide, fmax, fmin, fmod, gcd, heaviside, hypot, lcm, lerp, logaddexp, logaddexp2, nextafter,
)
from zgrad.ops.compare import (
    eq, ge, greater, greater_equal, gt, le, less, less_equal, logical_and, logical_not, logical_or, logical_xor, lt, ne,
    not_equal,
)
from zgrad.ops.elementwise import abs, absolute, clamp, clip, maximum, minimum, remainder, sqrt
from zgrad.ops.functions import (
    add, addcdiv, addcmul, cast, cat, clone, div, divide, exp, getitem, linear, log, log_softmax, matmul, mul,
    multiply, neg, negative, permute, positive, pow, relu, reshape, sigmoid, softmax, square, stack, sub, subtract, tanh,
    to_device, transpose, true_divide,
)
from zgrad.ops.power_scaling import deg2rad, float_power, frexp, ldexp, rad2deg
from zgrad.ops.special_binary import gammainc, gammaincc, igamma, igammac, zeta
from zgrad.ops.special_unary import (
    digamma, erfcx, i0, i0e, i1, i1e, lgamma, log_ndtr, mvlgamma, polygamma,
)
from zgrad.ops.indexing import gather, index_put, index_select, masked_fill, scatter, where
from zgrad.ops.loss_functions import cross_entropy, mse_loss
from zgrad.ops.products import (
    addbmm, addmm, addmv, addr, baddbmm, bmm, cdist, cross, dot, ger, inner, kron, mm, mv, outer, vdot,
)
from zgrad.ops.reduce import (
    ValuesIndices, argmax, argmin, cumsum, logsumexp, max, mean, min, nansum, prod, std, sum, var,
)
from zgrad.ops.reduce_logical import all, allclose, any, count_nonzero, equal, isclose
from zgrad.ops.reduce_order import median, mode, nanmedian, nanquantile, quantile
from zgrad.ops.reduce_scan import cummax, cummin, cumprod, logcumsumexp
from zgrad.ops.reduce_stats import amax, amin, aminmax, nanmean, std_mean, var_mean
from zgrad.ops.vector_norm import dist, renorm, vector_norm
from zgrad.ops.joining import (
    column_stack, concat, concatenate, dsplit, dstack, hsplit, hstack, row_stack, tensor_split, vsplit, vstack,
)
from zgrad.ops.layout import (
    adjoint, atleast_1d, atleast_2d, atleast_3d, broadcast_shapes, broadcast_tensors, broadcast_to, cartesian_prod,
    meshgrid, moveaxis, movedim, narrow, narrow_copy, ravel, select, swapaxes, swapdims, unbind, unflatten,
)
from zgrad.ops.reorder import combinations, flip, fliplr, flipud, repeat, repeat_interleave, roll, rot90, tile, unfold
from zgrad.ops.shape import chunk, expand, flatten, split, squeeze, t, unsqueeze, view
from zgrad.ops.triangular import (
    block_diag, diag, diag_embed, diagflat, diagonal, trace, tril, tril_indices, triu, triu_indices,
)
from zgrad.ops.view_scatter import diagonal_scatter, select_scatter, slice_scatter
from zgrad.ops.scattering import index_add, index_copy, index_fill, scatter_add, scatter_reduce
from zgrad.ops.selection import argwhere, masked_scatter, masked_select, nonzero, take, take_along_dim
from zgrad.ops.sorting import argsort, bucketize, kthvalue, msort, searchsorted, sort, topk
from zgrad.ops.sampling import bernoulli, multinomial, normal
from zgrad.ops.covariance import corrcoef, cov
from zgrad.ops.index_writes import index_reduce, put
from zgrad.ops.membership import isin, unravel_index
from zgrad.ops.series import cumulative_trapezoid, diff, trapezoid, trapz, vander
from zgrad.ops.rounding import (
    ceil, clamp_max, clamp_min, fix, floor, frac, isfinite, isinf, isnan, isneginf, isposinf, nan_to_num, round,
    sgn, sign, signbit, trunc,
)
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
    "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "baddbmm", "addbmm", "addmv", "kron", "cdist",
    "cross", "einsum", "addr", "tensordot", "vector_norm",
    "all", "any", "count_nonzero", "isclose", "allclose", "equal", "median", "nanmedian", "quantile", "nanquantile",
    "mode", "cumprod", "cummax", "cummin", "logcumsumexp", "amax", "amin", "aminmax", "nanmean", "var_mean", "std_mean",
    "flatten", "unsqueeze", "squeeze", "expand", "split", "chunk", "t", "view",
    "tril", "triu", "tril_indices", "triu_indices", "diagonal", "diag", "diag_embed", "trace",
    "flip", "fliplr", "flipud", "roll", "rot90", "repeat", "tile", "repeat_interleave",
    "movedim", "moveaxis", "swapaxes", "swapdims", "narrow", "unbind", "unflatten", "broadcast_to",
    "broadcast_tensors", "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "meshgrid",
    "tensor_split", "hsplit", "vsplit", "dsplit", "hstack", "vstack", "row_stack", "dstack", "column_stack",
    "concat", "concatenate", "adjoint", "narrow_copy", "select", "ravel", "cartesian_prod", "combinations", "unfold",
    "diagflat", "block_diag", "slice_scatter", "select_scatter", "diagonal_scatter",
    "take", "take_along_dim", "masked_select", "masked_scatter", "nonzero", "argwhere", "index_add", "index_copy",
    "index_fill", "index_put", "scatter_add", "scatter_reduce", "sort", "argsort", "msort", "topk", "kthvalue",
    "searchsorted", "bucketize", "unique", "unique_consecutive", "bincount", "histc",
    "bernoulli", "multinomial", "normal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos",
    "arctan", "arcsinh", "arccosh", "arctanh", "erf", "erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2",
    "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc", "fix", "frac", "sign", "sgn", "nan_to_num",
    "clamp_min", "clamp_max", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "atan2", "arctan2",
    "fmod", "hypot", "logaddexp", "logaddexp2", "copysign", "lerp", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "floor_divide",
    "fmax", "fmin", "gcd", "lcm", "heaviside", "nextafter", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "absolute", "addcmul", "addcdiv", "negative", "positive", "subtract", "multiply", "divide", "true_divide",
    "deg2rad", "rad2deg", "float_power", "frexp", "ldexp", "zeta", "gammainc", "gammaincc", "igamma", "igammac",
    "lgamma", "digamma", "polygamma", "mvlgamma", "i0", "i0e", "i1", "i1e", "erfcx", "log_ndtr",
]
__all__ += ["dist", "histogram", "index_reduce", "put", "renorm"]
__all__ += ["corrcoef", "cov", "cumulative_trapezoid", "diff", "isin", "trapezoid", "trapz", "unravel_index", "vander"]
