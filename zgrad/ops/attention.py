"""``scaled_dot_product_attention``: softmax(Q K^T * scale + mask) V, as
``torch.nn.functional.scaled_dot_product_attention`` (bool and float masks broadcast over the batch
and head dimensions, ``is_causal``, dropout on the weights, grouped-query attention).
"""

from __future__ import annotations

import math
from typing import Any

from zgrad import ops
from zgrad.creation import ones
from zgrad.errors import DTypeError, ShapeError
from zgrad.ops._args import tensor_arg
from zgrad.ops.dropout import dropout
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op

__all__ = ["scaled_dot_product_attention"]


@autocast_op()
def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Any:
    """Attention of ``query`` (..., L, E) over ``key`` (..., S, E) and ``value`` (..., S, Ev).

    Args:
        attn_mask: a bool mask (True takes part) or a float mask added to the scores, broadcastable
            to (..., L, S).
        dropout_p: the probability of zeroing a weight (applied whenever it is > 0, as torch's).
        is_causal: query position i sees key positions j <= i; not together with ``attn_mask``.
        scale: the factor of the scores; default 1 / sqrt(E).
        enable_gqa: key and value may have fewer heads (dimension -3) than the query, a divisor of
            its count; each serves a group of consecutive query heads.

    Returns:
        The attended values, (..., L, Ev), in the query's dtype.

    Raises:
        RuntimeError: shapes that do not fit (``ShapeError``), mixed dtypes (``DTypeError``), or
            ``attn_mask`` together with ``is_causal``.
    """
    q, k, v = (tensor_arg(t, "scaled_dot_product_attention") for t in (query, key, value))
    _check(q, k, v, attn_mask, is_causal)
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        if q.shape[-3] % k.shape[-3] or k.shape[-3] != v.shape[-3]:
            raise ShapeError(f"scaled_dot_product_attention: with enable_gqa the query's head count "
                             f"({q.shape[-3]}) must be a multiple of the key's and value's ({k.shape[-3]}, "
                             f"{v.shape[-3]}), and those must be equal")
        group = q.shape[-3] // k.shape[-3]
        k, v = ops.repeat_interleave(k, group, dim=-3), ops.repeat_interleave(v, group, dim=-3)
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = ops.matmul(q, k.transpose(-2, -1)) * factor
    if is_causal:
        length, source = q.shape[-2], k.shape[-2]
        attn_mask = ones(length, source, dtype=bool, device=q.device).tril()
    if attn_mask is not None:
        mask = tensor_arg(attn_mask, "scaled_dot_product_attention")
        scores = ops.masked_fill(scores, ops.logical_not(mask), -math.inf) if mask.dtype == bool else scores + mask
    weights = ops.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return ops.matmul(weights, v)


def _check(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool) -> None:
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not (q.dtype == k.dtype == v.dtype):
        raise DTypeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: {q.dtype} "
                         f"key.dtype: {k.dtype} and value.dtype: {v.dtype} instead.")
    if not is_floating(q.dtype):
        raise DTypeError(f"scaled_dot_product_attention: expected floating point query, key and value, got {q.dtype}")
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ShapeError("scaled_dot_product_attention: query, key and value need at least 2 dimensions (..., L, E)")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"scaled_dot_product_attention: query (..., L, E) {tuple(q.shape)}, key (..., S, E) "
                         f"{tuple(k.shape)} and value (..., S, Ev) {tuple(v.shape)} do not fit")
