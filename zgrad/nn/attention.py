"""``MultiheadAttention``: PyTorch's module, parameters and state_dict keys, computed by
:func:`zgrad.ops.multihead_attention.multi_head_attention_forward`."""

from __future__ import annotations

from typing import Any

from zgrad.creation import empty
from zgrad.nn import init
from zgrad.nn.layers import NonDynamicallyQuantizableLinear
from zgrad.nn.module import Module, Parameter
from zgrad.ops.multihead_attention import canonical_mask, multi_head_attention_forward

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Attention from ``num_heads`` heads of ``embed_dim // num_heads`` features each, as
    ``torch.nn.MultiheadAttention``.

    Parameters: ``in_proj_weight`` (3E, E) packs the query, key and value projections, unless the
    key or value width differs (``kdim``/``vdim``), in which case ``q_proj_weight`` (E, E),
    ``k_proj_weight`` (E, kdim) and ``v_proj_weight`` (E, vdim) replace it; ``in_proj_bias``
    (3E,) and ``out_proj.bias`` when ``bias``; ``out_proj`` (E, E); ``bias_k`` and ``bias_v``
    (1, 1, E) with ``add_bias_kv``. Initialized as PyTorch's: Xavier-uniform projections, zero
    biases, Xavier-normal ``bias_k``/``bias_v``.

    Raises:
        ValueError: ``embed_dim`` or ``num_heads`` not positive.
        AssertionError: ``embed_dim`` not divisible by ``num_heads`` (PyTorch's type and message).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")

        def parameter(*shape: int) -> Parameter:
            return Parameter(empty(*shape, dtype=dtype, device=device))

        separate = {"q_proj_weight": embed_dim, "k_proj_weight": self.kdim, "v_proj_weight": self.vdim}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = parameter(3 * embed_dim, embed_dim)
            for name in separate:
                self.register_parameter(name, None)
        else:
            for name, width in separate.items():
                self.register_parameter(name, parameter(embed_dim, width))
            self.register_parameter("in_proj_weight", None)
        self.register_parameter("in_proj_bias", parameter(3 * embed_dim) if bias else None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self.bias_k = parameter(1, 1, embed_dim) if add_bias_kv else None
        self.bias_v = parameter(1, 1, embed_dim) if add_bias_kv else None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for weight in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
            if weight is not None:
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None, need_weights: bool = True,
                attn_mask: Any = None, average_attn_weights: bool = True, is_causal: bool = False) -> tuple[Any, Any]:
        """Attend from ``query`` over ``key``/``value``.

        Args:
            query, key, value: (L, N, E), (S, N, kdim), (S, N, vdim) (batch first with
                ``batch_first``), or unbatched (L, E), (S, kdim), (S, vdim).
            key_padding_mask: (N, S) or (S,): True (bool) or a float added to the scores, per key.
            need_weights: also return the attention weights (computed explicitly).
            attn_mask: (L, S) or (N * num_heads, L, S): True where attention is not allowed, or a
                float added to the scores.
            average_attn_weights: average the returned weights over the heads.
            is_causal: a hint that ``attn_mask`` is the causal mask (it must still be given).

        Returns:
            (output shaped as ``query``, weights (N, L, S) or (N, num_heads, L, S), or None).

        Raises:
            AssertionError, RuntimeError: inputs or masks of the wrong shape or dtype (PyTorch's).
        """
        key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask",
                                          None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
        attn_mask = canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        batch_first = self.batch_first and query.ndim == 3
        if batch_first:
            query, key, value = _sequence_first(query, key, value)
        separate = {} if self._qkv_same_embed_dim else dict(
            use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight)
        output, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, average_attn_weights=average_attn_weights, is_causal=is_causal, **separate)
        return (output.transpose(1, 0) if batch_first else output), weights


def _sequence_first(query: Any, key: Any, value: Any) -> tuple[Any, Any, Any]:
    """(N, L, E) inputs as (L, N, E), keeping which of them are the same tensor (self-attention
    projects once when query, key and value are one object)."""
    if key is value:
        if query is key:
            query = key = value = query.transpose(1, 0)
        else:
            query, key = query.transpose(1, 0), key.transpose(1, 0)
            value = key
    else:
        query, key, value = (x.transpose(1, 0) for x in (query, key, value))
    return query, key, value
