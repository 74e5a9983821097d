"""zgrad: distributed automatic differentiation over a broker-less ZeroMQ mesh.

Importing zgrad opens no socket, starts no thread and compiles nothing; Numba kernels compile
(and are cached on disk) the first time they run. Imported before numpy, it bounds how long
numpy's OpenBLAS threads spin (``OPENBLAS_THREAD_TIMEOUT``, where unset; :mod:`zgrad.kernels.blas`).
"""

# First: importing it bounds OpenBLAS's spin, which OpenBLAS reads once, as numpy loads it.
from zgrad.kernels import blas as _blas  # noqa: F401

import numpy as _np

# First: these bind Tensor's op-backed methods (operators, math, layout, to, in-place updates)
# onto zgrad.tensor.Tensor, before any other module of zgrad can hold a tensor.
from zgrad import tensor_creation, tensor_indexing, tensor_inplace, tensor_math, tensor_pointwise  # noqa: F401
from zgrad import tensor_info, tensor_reduce, tensor_shape, tensor_special  # noqa: F401
from zgrad import accelerator, autograd, backends, cuda, distributions, futures, nn, optim
from zgrad import random, return_types, special, testing, utils
from zgrad import amp
from zgrad.amp import autocast
from zgrad.amp.autocast_mode import (
    clear_autocast_cache, get_autocast_dtype, is_autocast_cache_enabled, is_autocast_enabled, set_autocast_cache_enabled,
    set_autocast_dtype, set_autocast_enabled,
)
from zgrad.creation import from_dlpack, from_numpy, ones_like, zeros_like
from zgrad.factories import (  # the factories with PyTorch's out=, layout= and pin_memory= keywords
    arange, empty, eye, full, linspace, logspace, ones, rand, randint, randn, randperm, scalar_tensor, tensor, zeros,
)
from zgrad.factories import range  # noqa: A004 - PyTorch's deprecated torch.range
from zgrad.creation import (
    BoolTensor, DoubleTensor, FloatTensor, IntTensor, LongTensor, empty_like, full_like, get_default_device,
    set_default_device,
)
from zgrad.memory_formats import (
    Size, channels_last, channels_last_3d, contiguous_format, jagged, layout, memory_format, preserve_format, sparse_bsc,
    sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided,
)
from zgrad.creation import as_tensor, asarray
from zgrad.creation_windows import bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window
from zgrad.creation_random import rand_like, randint_like, randn_like
from zgrad.generator import Generator
from zgrad.ops.sampling import bernoulli, binomial, multinomial, normal, poisson
from zgrad.device import Device as device
from zgrad.engine.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from zgrad.engine.grad_mode import inference_mode, is_inference_mode_enabled
from zgrad.engine.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled
from zgrad.kernels import promotion as _promotion
from zgrad.kernels.promotion import can_cast, get_default_dtype, promote_types, result_type, set_default_dtype
from zgrad.kernels.matmul_precision import float32_matmul_precision as get_float32_matmul_precision
from zgrad.kernels.matmul_precision import set_float32_matmul_precision
from zgrad.errors import OutOfMemoryError, ZgradError
from zgrad.ops import (
    add, cat, div, exp, log, log_softmax, matmul, mean, mul, neg, permute, pow, relu, reshape, sigmoid, softmax,
    square, stack, sub, sum, tanh, transpose,
)
from zgrad.ops import (
    abs, argmax, argmin, chunk, clamp, clip, cumsum, eq, flatten, gather, ge, gt, index_select, le, logical_and,
    logical_not, logical_or, logical_xor, logsumexp, lt, masked_fill, max, maximum, min, minimum, nansum, ne, prod,
    remainder, scatter, split, sqrt, squeeze, std, t, unsqueeze, var, where,
)
from zgrad.nn.functional import (
    conv_transpose2d, cosine_similarity, pairwise_distance, pixel_shuffle, pixel_unshuffle, prelu,
)
from zgrad.ops import (
    addbmm, addmm, addmv, addr, baddbmm, bmm, cdist, cross, dot, einsum, ger, inner, kron, mm, mv, outer, tensordot, vdot,
)
from zgrad import linalg
from zgrad.linalg import det, slogdet
from zgrad.linalg.matrix_functions import cholesky_solve
from zgrad.linalg.solvers import logdet
from zgrad.linalg import inv as inverse
from zgrad.linalg.decompositions import legacy_svd as svd
from zgrad.linalg.legacy import (
    cholesky, cholesky_inverse, frobenius_norm, lu, lu_solve, lu_unpack, nuclear_norm, pinverse, qr, triangular_solve,
)
from zgrad.linalg.norms import legacy_norm as norm
from zgrad.ops import (
    all, allclose, amax, amin, aminmax, any, count_nonzero, cummax, cummin, cumprod, equal, isclose, logcumsumexp,
    median, mode, nanmean, nanmedian, nanquantile, quantile, std_mean, var_mean,
)
from zgrad.ops import (
    adjoint, atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes, broadcast_tensors, broadcast_to,
    cartesian_prod, column_stack, combinations, concat, concatenate, diag, diag_embed, diagflat, diagonal, dsplit,
    dstack, flip, fliplr, flipud, hsplit, hstack, meshgrid, moveaxis, movedim, narrow, narrow_copy, ravel,
    repeat_interleave, roll, rot90, row_stack, select, swapaxes, swapdims, tensor_split, tile, trace, tril,
    tril_indices, triu, triu_indices, unbind, unflatten, vsplit, vstack,
)
from zgrad.ops import diagonal_scatter, select_scatter, slice_scatter
from zgrad.ops import dist, histogram, index_reduce, renorm
from zgrad.linalg.matrix_functions import chain_matmul, matrix_exp, matrix_power
from zgrad.ops import corrcoef, cov, cumulative_trapezoid, diff, isin, trapezoid, trapz, unravel_index, vander
from zgrad.ops import (
    argsort, argwhere, bincount, bucketize, histc, index_add, index_copy, index_fill, index_put, kthvalue,
    masked_scatter, masked_select, msort, nonzero, scatter_add, scatter_reduce, searchsorted, sort, take,
    take_along_dim, topk, unique, unique_consecutive,
)
from zgrad.random import default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from zgrad.ops import (
    acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, asin, asinh, atan, atan2, atanh,
    bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor, ceil, clamp_max,
    clamp_min, copysign, cos, cosh, erf, erfc, erfinv, exp2, expm1, fix, floor, floor_divide, fmod, frac, hypot,
    isfinite, isinf, isnan, isneginf, isposinf, lerp, log10, log1p, log2, logaddexp, logaddexp2, nan_to_num,
    reciprocal, round, rsqrt, sgn, sign, signbit, sin, sinh, tan, trunc,
)
from zgrad.ops import (
    absolute, addcdiv, addcmul, deg2rad, digamma, float_power, fmax, fmin, frexp, gcd, greater, greater_equal,
    heaviside, i0, igamma, igammac, lcm, ldexp, less, less_equal, lgamma, mvlgamma, negative, nextafter, not_equal,
    polygamma, positive, rad2deg,
)
from zgrad.special import logit, sinc, xlogy
from zgrad.inplace_functions import (
    abs_, acos_, acosh_, addmv_, arccos_, arccosh_, arcsin_, arcsinh_, arctan_, arctanh_, asin_, asinh_, atan_,
    atanh_, ceil_, clamp_, clamp_max_, clamp_min_, clip_, cos_, cosh_, deg2rad_, detach_, erf_, erfc_, exp2_, exp_,
    expm1_, fix_, floor_, frac_, gcd_, i0_, index_put_, lcm_, ldexp_, log10_, log1p_, log2_, log_, logit_,
    nan_to_num_, neg_, negative_, rad2deg_, reciprocal_, relu_, resize_as_, round_, rsqrt_, sigmoid_, sin_, sinc_,
    sinh_, sqrt_, square_, tan_, tanh_, trunc_, xlogy_,
)
# zgrad.autograd.functional stacks and fills with ops, which import zgrad.autograd: bound once they are loaded
from zgrad.autograd import functional as _autograd_functional  # noqa: F401
from zgrad import profiler
from zgrad import func
from zgrad.func import vmap  # torch.vmap is torch.func.vmap
from zgrad.autograd import profiler as _autograd_profiler  # noqa: F401
from zgrad.serialization import load, save
from zgrad.kernels.threads import get_num_interop_threads, get_num_threads, set_num_interop_threads, set_num_threads
from zgrad.printing import set_printoptions
from zgrad.tensor_functions import (
    clone, conj, conj_physical, detach, fill, fill_, imag, is_complex, is_conj, is_floating_point, is_inference,
    is_neg, is_nonzero, is_same_size, is_signed, is_tensor, isreal, numel, real, resolve_conj, resolve_neg, rsub,
    split_with_sizes, unsafe_chunk, unsafe_split, zero_,
)
from zgrad.ops.products import pdist
from zgrad.aten_nn import *  # noqa: F403 - the torch.<name> forms of the nn ops, with their ATen signatures
from zgrad import aten_nn as _aten_nn
from zgrad.ops.resample import channel_shuffle, native_channel_shuffle
from zgrad.tensor import Tensor
from zgrad.type_info import finfo, iinfo
# The public products, arithmetic and sum take sparse COO tensors too (zgrad.sparse)
from zgrad import functional, sparse
from zgrad import compiler
from zgrad.compiler import compile  # noqa: A004 - PyTorch's name
from zgrad.sparse import operations as _sparse
from zgrad.sparse.coo import sparse_coo_tensor

add, sub, mul, div = (_sparse.either_layout(add, _sparse.add), _sparse.either_layout(sub, _sparse.sub),
                      _sparse.either_layout(mul, _sparse.mul), _sparse.either_layout(div, _sparse.div))
mm, matmul, addmm = (_sparse.either_layout(mm, _sparse.mm_either), _sparse.either_layout(matmul, _sparse.matmul),
                     _sparse.either_layout(addmm, _sparse.addmm))
spmm = mm
sum = _sparse.either_layout(sum, _sparse.sum)  # noqa: A001
subtract, multiply, divide, true_divide = sub, mul, div, div  # PyTorch's aliases stay the functions themselves
# zgrad.sqrt(sparse) is its method, and each alias (absolute...) too; a function that is the Tensor
# method itself (zgrad.sin is Tensor.sin) stays so, and a sparse tensor takes it as a method only
for _name in _sparse.SPARSE_METHOD_FUNCTIONS:
    _dense = globals()[_name]
    if _dense is getattr(Tensor, _name, None):
        continue
    _either = _sparse.either_layout(_dense, getattr(sparse.coo.SparseCooTensor, _name))
    for _namespace in (globals(), vars(functional)):
        for _alias in [alias for alias, value in _namespace.items() if value is _dense and alias[0] != "_"]:
            _namespace[_alias] = _either
del _name, _dense, _either, _namespace, _alias

float16 = _np.dtype(_np.float16)
bfloat16 = _promotion.BFLOAT16
float32 = _np.dtype(_np.float32)
float64 = _np.dtype(_np.float64)
int64 = _np.dtype(_np.int64)
int32 = _np.dtype(_np.int32)
int16 = _np.dtype(_np.int16)
int8 = _np.dtype(_np.int8)
bool_ = _np.dtype(_np.bool_)
uint8 = _np.dtype(_np.uint8)
# PyTorch's dtype aliases (zgrad.float shadows the builtin only as an attribute of this module)
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
short = int16
half = float16
bool = bool_  # noqa: A001

__version__ = "0.1.0"

__all__ = [
    "abs", "accelerator", "add", "arange", "argmax", "argmin", "autograd", "backends", "bool", "cuda", "bool_", "BoolTensor",
    "bfloat16", "can_cast", "finfo", "get_default_dtype", "get_float32_matmul_precision", "set_float32_matmul_precision", "half", "iinfo", "int8", "int16", "promote_types",
    "result_type", "set_default_dtype",
    "short", "cat", "chunk", "clamp", "clip", "cumsum", "device", "distributions", "div", "double", "DoubleTensor", "empty",
    "empty_like", "enable_grad", "eq", "exp", "flatten", "float", "float16", "float32", "float64", "FloatTensor",
    "from_dlpack", "from_numpy", "full", "full_like", "futures", "gather", "ge", "get_default_device", "gt", "index_select", "int",
    "int32", "int64", "IntTensor", "is_grad_enabled", "le", "log", "log_softmax", "logical_and", "logical_not",
    "logical_or", "logical_xor", "logsumexp", "long", "LongTensor", "load", "lt", "manual_seed", "masked_fill",
    "matmul", "max", "maximum", "mean", "min", "minimum", "mul", "nansum", "ne", "neg", "nn", "no_grad", "ones",
    "ones_like", "optim", "permute", "pow", "prod", "rand", "rand_like", "randn", "randn_like", "relu", "remainder",
    "reshape", "save", "scatter", "set_default_device", "set_grad_enabled", "sigmoid", "softmax", "split", "sqrt", "square", "squeeze", "stack", "std",
    "sub", "sum", "t", "tanh", "Tensor", "tensor", "transpose", "uint8", "unsqueeze", "utils", "var", "where", "zeros",
    "zeros_like", "ZgradError", "OutOfMemoryError",
    "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "cdist", "cholesky_solve", "cross", "det", "dot", "einsum", "ger", "inner", "inverse", "svd",
    "kron", "linalg", "logdet", "mm", "mv", "norm", "outer", "slogdet", "tensordot", "vdot",
    "all", "allclose", "amax", "amin", "aminmax", "any", "count_nonzero", "cummax", "cummin", "cumprod", "equal",
    "isclose", "logcumsumexp", "median", "mode", "nanmean", "nanmedian", "nanquantile", "quantile", "return_types",
    "std_mean", "var_mean",
    "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "broadcast_to", "column_stack",
    "diag", "diag_embed", "diagonal", "dsplit", "dstack", "flip", "fliplr", "flipud", "hsplit", "hstack", "meshgrid",
    "moveaxis", "movedim", "narrow", "repeat_interleave", "roll", "rot90", "row_stack", "swapaxes", "swapdims",
    "tensor_split", "tile", "trace", "tril", "tril_indices", "triu", "triu_indices", "unbind", "unflatten", "vsplit",
    "vstack", "adjoint", "block_diag", "cartesian_prod", "combinations", "concat", "concatenate", "diagflat",
    "narrow_copy", "ravel", "select", "diagonal_scatter", "select_scatter", "slice_scatter",
    "argsort", "argwhere", "bincount", "bucketize", "histc", "index_add", "index_copy", "index_fill", "index_put",
    "kthvalue", "masked_scatter", "masked_select", "msort", "nonzero", "scatter_add", "scatter_reduce",
    "searchsorted", "sort", "take", "take_along_dim", "topk", "unique", "unique_consecutive",
    "bernoulli", "default_generator", "eye", "Generator", "get_rng_state", "inference_mode", "initial_seed",
    "is_inference_mode_enabled", "linspace", "logspace", "multinomial", "normal", "randint", "randint_like",
    "random", "randperm", "seed", "set_rng_state", "special", "testing",
    "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "asin", "asinh",
    "atan", "atan2", "atanh", "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clamp_max", "clamp_min", "copysign", "cos", "cosh", "erf",
    "erfc", "erfinv", "exp2", "expm1", "fix", "floor", "fmod", "frac", "hypot", "isfinite", "isinf", "isnan",
    "isneginf", "isposinf", "lerp", "log10", "log1p", "log2", "logaddexp", "logaddexp2", "nan_to_num", "reciprocal",
    "round", "rsqrt", "sgn", "sign", "signbit", "sin", "sinh", "tan", "trunc", "floor_divide",
]
__all__ += ["amp", "autocast", "clear_autocast_cache", "get_autocast_dtype", "is_autocast_cache_enabled",
            "is_autocast_enabled", "set_autocast_cache_enabled", "set_autocast_dtype", "set_autocast_enabled"]
__all__ += ["bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window"]
__all__ += ["chain_matmul", "dist", "histogram", "index_reduce", "matrix_exp", "matrix_power", "renorm"]
__all__ += ["corrcoef", "cov", "cumulative_trapezoid", "diff", "isin", "trapezoid", "trapz", "unravel_index",
            "vander"]
__all__ += ["Size", "channels_last", "channels_last_3d", "contiguous_format", "jagged", "layout", "memory_format",
            "preserve_format", "sparse_bsc", "sparse_bsr", "sparse_coo", "sparse_csc", "sparse_csr", "strided"]
__all__ += ["functional", "sparse", "sparse_coo_tensor", "spmm"]
__all__ += ["compile", "compiler", "func", "profiler"]
__all__ += ["is_anomaly_check_nan_enabled", "is_anomaly_enabled", "set_anomaly_enabled"]
__all__ += ["conj", "conj_physical", "imag", "is_conj", "real", "resolve_conj", "resolve_neg"]
__all__ += ["channel_shuffle", "isreal", "native_channel_shuffle", "pdist"]
__all__ += ["as_tensor", "asarray", "clone", "detach", "fill", "fill_", "get_num_interop_threads", "get_num_threads",
            "is_complex", "is_floating_point", "is_nonzero", "is_tensor", "numel", "rsub", "scalar_tensor",
            "set_num_interop_threads", "set_num_threads", "set_printoptions", "split_with_sizes", "unsafe_chunk",
            "unsafe_split", "zero_"]
__all__ += [
    "absolute", "addcdiv", "addcmul", "deg2rad", "digamma", "divide", "float_power", "fmax", "fmin", "frexp", "gcd",
    "greater", "greater_equal", "heaviside", "i0", "igamma", "igammac", "lcm", "ldexp", "less", "less_equal",
    "lgamma", "logit", "multiply", "mvlgamma", "negative", "nextafter", "not_equal", "polygamma", "positive", "rad2deg",
    "sinc", "subtract", "true_divide", "xlogy",
]
__all__ += [  # the in-place functions (zgrad.inplace_functions; fill_ and zero_ are zgrad.tensor_functions')
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_",
    "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_",
    "negative_", "rad2deg_", "reciprocal_", "relu_", "resize_as_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_",
    "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_",
]
# torch.<name> forms of nn.functional ops (same signatures), and those with ATen's (zgrad.aten_nn)
__all__ += ["conv_transpose2d", "cosine_similarity", "pairwise_distance", "pixel_shuffle", "pixel_unshuffle", "prelu"]
__all__ += _aten_nn.__all__
__all__ += ["cholesky", "cholesky_inverse", "frobenius_norm", "is_inference", "is_neg", "is_same_size", "is_signed",
            "lu", "lu_solve", "lu_unpack", "nuclear_norm", "pinverse", "qr", "range", "triangular_solve", "binomial",
            "poisson", "vmap"]


# Packages of the distributed layer, loaded on first use (importing zgrad loads none of them), so
# that ``zgrad.distributed.get_rank()`` and ``zgrad.nn.parallel.DistributedDataParallel`` work after
# a plain ``import zgrad``, as they do in PyTorch.
_ON_FIRST_USE = ("distributed", "multiprocessing")


def __getattr__(name: str) -> object:
    if name in _ON_FIRST_USE:
        import importlib

        return importlib.import_module(f"zgrad.{name}")
    raise AttributeError(f"module 'zgrad' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})


# zgrad.nn's names that live in the distributed layer: the module each is loaded from on first use
_NN_ON_FIRST_USE = {"parallel": "zgrad.nn.parallel", "SyncBatchNorm": "zgrad.nn.parallel.sync_batchnorm"}


def _nn_on_first_use(name: str) -> object:
    if name in _NN_ON_FIRST_USE:
        import importlib

        module = importlib.import_module(_NN_ON_FIRST_USE[name])
        return module if name == "parallel" else getattr(module, name)
    raise AttributeError(f"module 'zgrad.nn' has no attribute {name!r}")


# zgrad.nn (the core layer) may not import the distributed layer itself
nn.__getattr__ = _nn_on_first_use
nn.__dir__ = lambda: sorted({*vars(nn), *_NN_ON_FIRST_USE})
