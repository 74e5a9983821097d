"""The op vocabulary of the kernel layer, declared once: the ops every backend implements (checked
when dispatch loads one), the codes its kernels number their options by, and the index rule of
each padding mode (one Python function both backends' kernels compile). Imported by dispatch and
by both backends; imports nothing of zgrad.
"""

from __future__ import annotations

import math

__all__ = [
    "ACTIVATION_CODES", "BINARY_MATH", "DROPOUT_BITS", "OPS", "ORTHOGONAL_POLYNOMIALS", "PADDING_MODES", "PAD_CIRCULAR", "PAD_REFLECT",
    "PAD_REPLICATE", "PAD_ZEROS", "SCATTER_REDUCTIONS", "SMOOTH_ACTIVATIONS", "UNARY_MATH", "padding_source",
    "scatter_combine", "search_position",
]

OPS = (
    "empty", "full", "asarray", "to_host",
    "add", "sub", "mul", "div", "pow", "neg",
    "exp", "log", "tanh", "sigmoid", "relu",
    "relu_backward", "tanh_backward", "sigmoid_backward",
    "matmul", "sum", "prod", "nansum", "extreme_value", "cumsum", "prod_backward_rows", "copy", "stack", "concatenate",
    "cumprod", "cumprod_backward_rows", "cumextreme_rows", "logcumsumexp_rows", "logcumsumexp_backward_rows",
    "argsort_rows", "mode_rows",
    "scatter_slice",
    "bias_act", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
    "cross_entropy", "cross_entropy_backward", "attention", "attention_backward",
    "sgd_step", "adam_step", "rmsprop_step", "adagrad_step", "adadelta_step", "nadam_step", "radam_step",
    "adamax_step", "asgd_step", "rprop_step", "non_finite_check_and_unscale",
    "conv2d", "conv2d_backward", "max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
    "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "batch_norm", "batch_norm_backward",
    "group_norm", "group_norm_backward",
    "remainder", "floor_divide", "maximum", "minimum", "abs", "sign", "sqrt", "clamp", "clamp_backward", "extremum_backward",
    "compare", "logical_not", "where", "argmax", "argmin", "extreme_rows", "extremes_rows", "count_nonzero", "take", "gather", "index_add", "scatter", "scatter_add",
    "var_rows", "var_backward_rows", "logsumexp_rows", "logsumexp_backward_rows", "distribute_equal", "vector_norm",
    "add_scaled", "addcmul", "addcdiv", "random_uniform", "random_normal", "random_integers",
    "random_exponential", "multinomial",
    "zeros", "check_index_range", "embedding", "embedding_backward", "embedding_renorm", "embedding_bag", "embedding_bag_backward",
    "embedding_bag_per_sample_weights_backward", "lstm_forward", "lstm_backward", "gru_forward", "gru_backward",
    "dropout", "dropout_backward", "gelu", "gelu_backward", "leaky_relu", "leaky_relu_backward",
    "smooth_activation", "smooth_activation_backward",
    "class_loss", "class_loss_backward", "nll", "nll_backward", "pointwise_loss", "pointwise_loss_sum",
    "pointwise_loss_backward",
    "reduce_inplace", "reduce_pair", "reduce_and_copy", "divide_inplace", "scale_copy",
    "to_dlpack", "dlpack_device", "from_dlpack",
    "linalg_solve", "linalg_inv", "linalg_det", "linalg_slogdet", "linalg_cholesky", "linalg_qr", "linalg_svd",
    "linalg_eigh", "linalg_lu_factor", "linalg_cholesky_ex",
    "argsort", "argsort_slices", "argtopk", "nonzero", "scatter_reduce", "searchsorted", "select_rows",
    "unary_math", "binary_math", "nan_to_num", "lerp", "orthogonal_polynomial",
)

# The element-wise functions of ``unary_math(name, x, out)`` and ``binary_math(name, a, b, out)``,
# by name: every backend implements each (out's dtype is chosen by dispatch; see dispatch_math).
UNARY_MATH = (
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
    "erf", "erfc", "erfinv", "log1p", "expm1", "log2", "log10", "exp2", "rsqrt", "reciprocal",
    "floor", "ceil", "round", "trunc", "frac",
    "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "bitwise_not",
    "lgamma", "digamma", "trigamma", "i0", "i0e", "i1", "i1e", "erfcx", "frexp_mantissa", "frexp_exponent",
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
)
BINARY_MATH = (
    "atan2", "fmod", "hypot", "logaddexp", "logaddexp2", "copysign",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
    "nextafter", "fmax", "fmin", "gcd", "lcm", "zeta", "igamma", "igammac", "igamma_derivative",
)

# The polynomials of ``orthogonal_polynomial(x, n, kind, shifted, out)``, numbered by their
# position here (``shifted``: of 2x - 1, the shifted Chebyshev polynomials).
ORTHOGONAL_POLYNOMIALS = (
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p",
)

# The activations of ``smooth_activation(x, code, beta, threshold, out)``, numbered by their
# position here: SiLU x * sigmoid(x), Mish x * tanh(softplus(x)), and Softplus
# log(1 + exp(beta x)) / beta (x itself where beta x > threshold); beta and threshold are read by
# Softplus only.
SMOOTH_ACTIVATIONS = ("silu", "mish", "softplus")
SILU, MISH, SOFTPLUS = range(len(SMOOTH_ACTIVATIONS))

# The padding modes of conv2d; kernels number them by their position here.
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
PAD_ZEROS, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR = range(len(PADDING_MODES))


def padding_source(i: int, size: int, mode: int) -> int:
    """The image index that padded index ``i`` reads along a dimension of ``size``, or -1 where it
    reads a zero, for padding ``mode`` (a code above).

    Plain Python, compiled by each backend's kernels where they call it (a Numba CPU kernel, a
    CUDA device function). Reflection needs padding < size and circular padding <= size (checked
    by :mod:`zgrad.ops.conv`), so one reflection or wrap is enough.
    """
    if 0 <= i < size:
        return i
    if mode == PAD_ZEROS:
        return -1
    if mode == PAD_REFLECT:
        return -i if i < 0 else 2 * (size - 1) - i
    if mode == PAD_REPLICATE:
        return 0 if i < 0 else size - 1
    return i + size if i < 0 else i - size  # PAD_CIRCULAR

# The activations fused after a bias (``bias_act``), by the code kernels take.
ACTIVATION_CODES = {"identity": 0, "relu": 1, "tanh": 2, "sigmoid": 3}


# The reductions of ``scatter_reduce``'s kernel (sum and mean run on scatter_add), by position.
SCATTER_REDUCTIONS = ("prod", "amax", "amin")


def scatter_combine(current, value, code: int):
    """``current`` combined with ``value`` by the reduction ``code`` (a position in
    SCATTER_REDUCTIONS); amax and amin propagate NaN, as PyTorch. Plain Python, compiled by each
    backend's scatter_reduce kernel."""
    if code == 0:
        return current * value
    if value != value:
        return value
    if code == 1:
        return value if value > current else current
    return value if value < current else current


def search_position(sequence, row: int, value, right: bool) -> int:
    """Where ``value`` goes in the ascending ``sequence[row, :]``: the count of elements below it
    (``right``: not above it), by binary search. Plain Python, compiled by each backend's
    searchsorted kernel."""
    low, high = 0, sequence.shape[1]
    while low < high:
        middle = (low + high) // 2
        element = sequence[row, middle]
        if element < value or (right and element == value):
            low = middle + 1
        else:
            high = middle
    return low


# Attention dropout draws 24-bit uniform integers: element kept where its draw >= the threshold.
DROPOUT_BITS = 24


def dropout_threshold(p: float) -> int:
    """The integer threshold of :func:`attention_keeps` for dropout probability ``p``: a draw u of
    DROPOUT_BITS bits stands for u / 2**DROPOUT_BITS in [0, 1), kept where that is >= p."""
    return math.ceil(p * (1 << DROPOUT_BITS))


def attention_keeps(seed: int, index: int, threshold: int) -> bool:
    """Whether attention dropout keeps the weight at linear position ``index`` of the (B, H, L, S)
    weights, for a call's ``seed`` (< 2**32, drawn once per call from the generator): a
    counter-based hash, so the forward and the backward (and both backends) regenerate the same
    mask without storing it.

    Two rounds of a 32-bit integer hash (xor-shift-multiply), the low and high halves of
    ``index`` mixed in one per round. Multiplications modulo 2**32 are split into 16-bit halves so
    that no intermediate exceeds 2**48: the same bits as int64 in a Numba kernel, a CUDA thread and
    Python's integers (the simulator). Plain Python, compiled by each backend's attention kernels.
    """
    x = (index & 0xFFFFFFFF) ^ seed
    for word in range(2):
        x ^= x >> 16
        x = (x * 0xA68B + (((x * 0x846C) & 0xFFFF) << 16)) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x352D + (((x * 0x7FEB) & 0xFFFF) << 16)) & 0xFFFFFFFF
        x ^= x >> 16
        if word == 0:
            x ^= (index >> 32) & 0xFFFFFFFF
    return (x >> (32 - DROPOUT_BITS)) >= threshold
