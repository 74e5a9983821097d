"""Autocast's op lists, per device type, as PyTorch's (``aten/src/ATen/autocast_mode.cpp`` and
``autocast_mode.h``, the AutocastCPU and AutocastCUDA registrations): what each op does with its
floating inputs inside an ``autocast`` region. Ops are named as PyTorch's (``linalg_`` names for
``zgrad.linalg``); :func:`zgrad.ops.autocast.autocast_op` marks the functions that are those ops.

- ``LOWER``: cast to the region's dtype (float16 or bfloat16) and run in it.
- ``FLOAT32``: cast to float32 and run in it, unless called with an explicit ``dtype=``.
- ``PROMOTE``: cast to the widest of the inputs' types (and the region's dtype) and run in it.
- ``BANNED``: refuse, with the message in :data:`BANNED_MESSAGES`.
- ``COMPOSITE``: cast nothing and keep autocast on inside: PyTorch composes the op of others on
  that device type, and those autocast.

A marked op missing from a device type's list runs unchanged, with autocast off inside it.
Float64 and non-floating inputs, and inputs on another device type, are never cast.
"""

from __future__ import annotations

__all__ = ["LOWER", "FLOAT32", "PROMOTE", "BANNED", "COMPOSITE", "POLICIES", "BANNED_MESSAGES", "policy_of"]

LOWER, FLOAT32, PROMOTE, BANNED, COMPOSITE = "lower", "float32", "promote", "banned", "composite"

# Both device types: the matrix products, convolutions and attention.
_LOWER_BOTH = (
    "conv2d", "conv_transpose2d", "conv3d", "conv_transpose3d", "prelu", "addmm", "matmul", "mm", "linear",
    "addbmm", "baddbmm", "bmm", "linalg_vecdot", "scaled_dot_product_attention",
)
# Registered for CUDA only: on the CPU PyTorch composes them of other ops (bmm, mm), which autocast.
_COMPOSITE_CPU = ("einsum", "tensordot")
# CUDA only: these run unchanged on the CPU.
_LOWER_CUDA = ("addmv", "addr", "mv", "linalg_multi_dot", "einsum")

# CUDA: math functions, norms, reductions that overflow in 16 bits, and the losses. cross_entropy is
# not registered itself: PyTorch composes it of log_softmax and nll_loss, both float32 here.
_FLOAT32_CUDA = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "sinh",
    "tan", "pow", "layer_norm", "group_norm", "cosine_similarity", "nll_loss", "kl_div", "l1_loss", "smooth_l1_loss",
    "huber_loss", "mse_loss", "binary_cross_entropy_with_logits", "cdist", "logsumexp", "interpolate", "prod",
    "softmax", "log_softmax", "cumprod", "cumsum", "linalg_vector_norm", "linalg_matrix_norm", "sum", "norm",
    "cross_entropy", "ctc_loss",
)
# CPU: the losses, linear algebra and a few numerically touchy reductions (not softmax, layer_norm,
# sum or the math functions, which run in the input's dtype on the CPU).
_FLOAT32_CPU = (
    "binary_cross_entropy", "prod", "quantile", "nanquantile", "cdist", "trace", "cholesky_solve",
    "mse_loss", "nll_loss", "smooth_l1_loss", "cross_entropy", "l1_loss", "huber_loss", "kl_div",
    "binary_cross_entropy_with_logits", "linalg_cholesky", "linalg_inv", "linalg_solve", "linalg_svd",
    "linalg_svdvals", "linalg_qr", "linalg_eigh", "linalg_eigvalsh", "linalg_lstsq", "linalg_matrix_rank",
    "linalg_pinv", "ctc_loss", "grid_sampler",
)
_PROMOTE_CUDA = ("atan2", "cross", "dot", "vdot", "index_put", "tensordot", "scatter_add", "grid_sampler")
_PROMOTE_CPU = ("cat", "stack", "index_copy")

POLICIES: dict[str, dict[str, str]] = {
    "cpu": {**dict.fromkeys(_LOWER_BOTH, LOWER), **dict.fromkeys(_COMPOSITE_CPU, COMPOSITE),
            **dict.fromkeys(_FLOAT32_CPU, FLOAT32), **dict.fromkeys(_PROMOTE_CPU, PROMOTE)},
    "cuda": {**dict.fromkeys(_LOWER_BOTH + _LOWER_CUDA, LOWER), **dict.fromkeys(_FLOAT32_CUDA, FLOAT32),
             **dict.fromkeys(_PROMOTE_CUDA, PROMOTE), "binary_cross_entropy": BANNED},
}

BANNED_MESSAGES = {
    "binary_cross_entropy": (
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
        "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast."
    ),
}


def policy_of(device_type: str, op_name: str) -> str | None:
    """What ``op_name`` does with its inputs under autocast of ``device_type`` (None: nothing)."""
    return POLICIES[device_type].get(op_name)
