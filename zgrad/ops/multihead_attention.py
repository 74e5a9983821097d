"""``multi_head_attention_forward``: the computation of ``nn.MultiheadAttention``, as
``torch.nn.functional.multi_head_attention_forward`` (sequence-first (L, N, E) or unbatched (L, E)
inputs).

The input projections, then either the explicit weights softmax(Q K^T / sqrt(d) + mask) when they
are asked for (``need_weights``), or :func:`zgrad.ops.attention.scaled_dot_product_attention`,
then the output projection. Masks follow ``nn.MultiheadAttention``'s convention: a bool mask is
True where attention is *not* allowed (it becomes a float mask of 0 and -inf), a float mask is
added to the scores.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from zgrad import ops
from zgrad.creation import zeros
from zgrad.ops import attention
from zgrad.ops._args import tensor_arg
from zgrad.ops.dropout import dropout
from zgrad.ops.heads import split_heads
from zgrad.ops.padding import pad
from zgrad.warning_location import user_stacklevel

__all__ = ["canonical_mask", "multi_head_attention_forward"]


def canonical_mask(mask: Any, mask_name: str, other_type: Any, other_name: str, target_type: Any,
                   check_other: bool = True) -> Any:
    """``mask`` as a float mask of ``target_type`` (a bool mask's True becomes -inf), or None.

    Warns (``UserWarning``) when ``check_other`` and ``other_type`` (the dtype of the other mask
    given with it, or None) differs from the mask's, as PyTorch does.

    Raises:
        AssertionError: a mask that is neither bool nor floating (PyTorch's message).
    """
    if mask is None:
        return None
    mask = tensor_arg(mask, mask_name)
    if mask.dtype != bool and mask.dtype.kind != "f":
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      f"instead.", stacklevel=user_stacklevel())
    if mask.dtype != bool:
        return mask
    return ops.masked_fill(zeros(*mask.shape, dtype=target_type, device=mask.device), mask, -math.inf)


def _is_batched(query: Any, key: Any, value: Any, key_padding_mask: Any, attn_mask: Any, num_heads: int) -> bool:
    """Whether the inputs are batched (3-D query) or not (2-D), after checking the others fit it."""
    if query.ndim not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query "
                             f"tensor")
    batched = query.ndim == 3
    kind = "batched (3-D)" if batched else "unbatched (2-D)"
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {query.ndim}-D but found "
                             f"{key.ndim}-D and {value.ndim}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or {query.ndim - 1}-D but "
                             f"found {key_padding_mask.ndim}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found "
                                 f"{attn_mask.ndim}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if not batched and attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
    return batched


def _in_projection(query: Any, key: Any, value: Any, weights: tuple[Any, Any, Any], biases: tuple[Any, Any, Any],
                   packed: Any, packed_bias: Any) -> tuple[Any, Any, Any]:
    """q, k, v: one projection by the packed weight for self-attention, else one each."""
    if packed is not None and query is key and key is value:
        return ops.chunk(ops.linear(query, packed, packed_bias), 3, dim=-1)
    return tuple(ops.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))


def _packed_heads(query: Any, packed: Any, packed_bias: Any, num_heads: int) -> tuple[Any, Any, Any]:
    """Self-attention's q, k and v, each (N * num_heads, L, head_dim), from (L, N, E) ``query``:
    one projection by the packed (3E, E) weight, computed in the order ``query`` lies in memory (a
    batch-first input arrives as a transposed view: no copy of it), split into heads by one op
    (:mod:`zgrad.ops.heads`)."""
    batch_major = query.transpose(0, 1)
    if batch_major.is_contiguous():
        return split_heads(ops.linear(batch_major, packed, packed_bias), num_heads, True)
    return split_heads(ops.linear(query, packed, packed_bias), num_heads, False)


def _projection_weights(in_proj_weight: Any, in_proj_bias: Any, use_separate_proj_weight: bool,
                        separate: tuple[Any, Any, Any]) -> tuple[tuple, tuple]:
    """The (q, k, v) weights and biases, from the packed (3E, E) weight or the separate ones."""
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        weights = tuple(ops.chunk(in_proj_weight, 3))
    else:
        for name, weight in zip(("q_proj_weight", "k_proj_weight", "v_proj_weight"), separate):
            if weight is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name} is None")
        weights = separate
    biases = (None, None, None) if in_proj_bias is None else tuple(ops.chunk(in_proj_bias, 3))
    return weights, biases


def _attn_mask_3d(attn_mask: Any, tgt_len: int, src_len: int, heads_total: int) -> Any:
    """A 2-D (L, S) mask as (1, L, S); a 3-D one checked to be (N * num_heads, L, S)."""
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                               f"{(tgt_len, src_len)}.")
        return ops.unsqueeze(attn_mask, 0)
    if attn_mask.ndim == 3:
        if tuple(attn_mask.shape) != (heads_total, tgt_len, src_len):
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                               f"{(heads_total, tgt_len, src_len)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")


def _heads_first(x: Any, static: Any, heads_total: int, head_dim: int, name: str) -> Any:
    """(S, N, E) as (N * num_heads, S, head_dim), or the given static one after checking it."""
    if static is None:
        return ops.reshape(x, (x.shape[0], heads_total, head_dim)).transpose(0, 1)
    if static.shape[0] != heads_total:
        raise AssertionError(f"expecting {name}.size(0) of {heads_total}, but got {static.shape[0]}")
    if static.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.shape[2]}")
    return static


def _append_key(k: Any, v: Any, k_extra: Any, v_extra: Any, dim: int, attn_mask: Any,
                key_padding_mask: Any) -> tuple[Any, Any, Any, Any]:
    """One more key and value position (bias_kv or zero attention), which the masks let through."""
    widened = [None if m is None else pad(m, (0, 1)) for m in (attn_mask, key_padding_mask)]
    return ops.cat([k, k_extra], dim), ops.cat([v, v_extra], dim), *widened


def multi_head_attention_forward(query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Any, in_proj_bias: Any, bias_k: Any, bias_v: Any,
                                 add_zero_attn: bool, dropout_p: float, out_proj_weight: Any, out_proj_bias: Any,
                                 training: bool = True, key_padding_mask: Any = None, need_weights: bool = True,
                                 attn_mask: Any = None, use_separate_proj_weight: bool = False,
                                 q_proj_weight: Any = None, k_proj_weight: Any = None, v_proj_weight: Any = None,
                                 static_k: Any = None, static_v: Any = None, average_attn_weights: bool = True,
                                 is_causal: bool = False) -> tuple[Any, Any]:
    """Multi-head attention of ``query`` (L, N, E) over ``key`` (S, N, kdim) and ``value``
    (S, N, vdim), or of unbatched (L, E), (S, kdim), (S, vdim) inputs.

    Args:
        in_proj_weight, in_proj_bias: the packed (3E, E) projection and its (3E,) bias; with
            ``use_separate_proj_weight`` the weights are ``q_proj_weight`` (E, E),
            ``k_proj_weight`` (E, kdim) and ``v_proj_weight`` (E, vdim) instead.
        bias_k, bias_v: (1, 1, E) key and value appended to every sequence, or None.
        add_zero_attn: append a zero key and value to every head.
        dropout_p: dropout on the attention weights when ``training``.
        key_padding_mask: (N, S) (unbatched: (S,)); True or -inf marks a padding key.
        attn_mask: (L, S) or (N * num_heads, L, S) (unbatched: (num_heads, L, S)).
        need_weights: also return the attention weights; computed explicitly.
        average_attn_weights: average the returned weights over the heads.
        static_k, static_v: (N * num_heads, S, E / num_heads) keys and values used as they are.
        is_causal: a hint that ``attn_mask`` is the causal mask (it must be given).

    Returns:
        (output (L, N, E), weights (N, L, S) averaged or (N, num_heads, L, S), or None); unbatched
        inputs give (L, E) and (L, S) or (num_heads, L, S).

    Raises:
        AssertionError, RuntimeError: shapes, dtypes or arguments that do not fit (PyTorch's
            messages and exception types).
    """
    query, key, value = (tensor_arg(t, "multi_head_attention_forward", n)
                         for t, n in ((query, "query"), (key, "key"), (value, "value")))
    batched = _is_batched(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = (ops.unsqueeze(t, 1) for t in (query, key, value))
        key_padding_mask = None if key_padding_mask is None else ops.unsqueeze(key_padding_mask, 0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask",
                                      None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention applies the causal mask itself
    else:
        attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        is_causal = is_causal and key_padding_mask is None
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight and key.shape[:2] != value.shape[:2]:
        raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                             f"value's {value.shape[:2]}")
    if not use_separate_proj_weight and key.shape != value.shape:
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    weights, biases = _projection_weights(in_proj_weight, in_proj_bias, use_separate_proj_weight,
                                          (q_proj_weight, k_proj_weight, v_proj_weight))
    heads_total = bsz * num_heads
    if attn_mask is not None:
        attn_mask = _attn_mask_3d(attn_mask, tgt_len, src_len, heads_total)
    if (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k is set but bias_v is None" if bias_v is None else
                             "bias_v is set but bias_k is None")
    if (not use_separate_proj_weight and query is key and key is value and bias_k is None and static_k is None
            and static_v is None):
        q, k, v = _packed_heads(query, in_proj_weight, in_proj_bias, num_heads)
    else:
        q, k, v = _in_projection(query, key, value, weights, biases,
                                 None if use_separate_proj_weight else in_proj_weight, in_proj_bias)
        if bias_k is not None:
            if static_k is not None or static_v is not None:
                raise AssertionError(f"bias cannot be added to static {'key' if static_k is not None else 'value'}.")
            k, v, attn_mask, key_padding_mask = _append_key(k, v, bias_k.repeat(1, bsz, 1), bias_v.repeat(1, bsz, 1),
                                                            0, attn_mask, key_padding_mask)
        q = ops.reshape(q, (tgt_len, heads_total, head_dim)).transpose(0, 1)
        k = _heads_first(k, static_k, heads_total, head_dim, "static_k")
        v = _heads_first(v, static_v, heads_total, head_dim, "static_v")
    if add_zero_attn:
        zero = zeros(heads_total, 1, head_dim, dtype=k.dtype, device=k.device)
        k, v, attn_mask, key_padding_mask = _append_key(k, v, zero, zero, 1, attn_mask, key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                                 f"{key_padding_mask.shape[1]}")
        padding = ops.reshape(key_padding_mask, (bsz, 1, 1, src_len)).expand(bsz, num_heads, 1, src_len)
        padding = ops.reshape(padding, (heads_total, 1, src_len))
        attn_mask = padding if attn_mask is None else attn_mask + padding
    if not training:
        dropout_p = 0.0

    if need_weights:
        output, weights = _explicit_attention(q, k, v, attn_mask, dropout_p)
        weights = ops.reshape(weights, (bsz, num_heads, tgt_len, src_len))
        if average_attn_weights:
            weights = ops.mean(weights, dim=1)
        output = ops.reshape(output.transpose(0, 1), (tgt_len * bsz, embed_dim))
    else:
        if attn_mask is not None:
            attn_mask = (ops.unsqueeze(attn_mask, 0) if attn_mask.shape[0] == 1 else
                         ops.reshape(attn_mask, (bsz, num_heads, -1, src_len)))
        q, k, v = (ops.reshape(t, (bsz, num_heads, t.shape[1], head_dim)) for t in (q, k, v))
        output = attention.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
        output, weights = ops.reshape(output.permute(2, 0, 1, 3), (bsz * tgt_len, embed_dim)), None
    output = ops.reshape(ops.linear(output, out_proj_weight, out_proj_bias), (tgt_len, bsz, -1))
    if not batched:
        output = ops.squeeze(output, 1)
        weights = None if weights is None else ops.squeeze(weights, 0)
    return output, weights


def _explicit_attention(q: Any, k: Any, v: Any, attn_mask: Any, dropout_p: float) -> tuple[Any, Any]:
    """(softmax(q k^T / sqrt(d) + mask) v, the weights) for (B, L, d) q and (B, S, d) k and v."""
    q_scaled = q * math.sqrt(1.0 / float(q.shape[-1]))
    k_t = k.transpose(-2, -1)
    scores = ops.bmm(q_scaled, k_t) if attn_mask is None else ops.baddbmm(attn_mask, q_scaled, k_t)
    weights = ops.softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return ops.bmm(weights, v), weights
