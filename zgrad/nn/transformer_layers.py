"""One Transformer layer: ``TransformerEncoderLayer`` (self-attention, feed-forward) and
``TransformerDecoderLayer`` (self-attention, attention over the encoder's memory, feed-forward),
each block with a residual connection and a layer norm after it (or before it, ``norm_first``),
as PyTorch's; submodule names and state_dict keys are PyTorch's."""

from __future__ import annotations

from typing import Any, Callable

from zgrad.nn.attention import MultiheadAttention
from zgrad.nn.dropout import Dropout
from zgrad.nn.layers import Linear
from zgrad.nn.module import Module
from zgrad.nn.norm import LayerNorm
from zgrad.ops.activation import gelu, relu
from zgrad.ops.multihead_attention import canonical_mask

__all__ = ["TransformerDecoderLayer", "TransformerEncoderLayer", "activation_function"]


def activation_function(activation: str | Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The feed-forward activation: "relu" or "gelu" by name, or the callable (a function or a
    module) itself.

    Raises:
        RuntimeError: another name (PyTorch's message).
    """
    if not isinstance(activation, str):
        return activation
    if activation in ("relu", "gelu"):
        return relu if activation == "relu" else gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class _FeedForwardLayer(Module):
    """What both layers share: the feed-forward block linear2(dropout(activation(linear1(x)))),
    its layer norms and dropouts, and the residual-and-norm pattern of each block."""

    def _build(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float, activation: Any,
               layer_norm_eps: float, batch_first: bool, norm_first: bool, bias: bool, device: Any, dtype: Any,
               attentions: tuple[str, ...]) -> None:
        """Create the submodules in PyTorch's order (which orders the state_dict)."""
        for name in attentions:
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=batch_first, device=device, dtype=dtype))
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype)
        self.norm_first = norm_first
        blocks = range(1, len(attentions) + 2)
        for i in blocks:
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype))
        for i in blocks:
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = activation_function(activation)

    def _residual(self, x: Any, block: Callable[[Any], Any], norm: Module) -> Any:
        """x + block(norm(x)) with ``norm_first``, else norm(x + block(x))."""
        return x + block(norm(x)) if self.norm_first else norm(x + block(x))

    def _ff_block(self, x: Any, dropout: Module) -> Any:
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_FeedForwardLayer):
    """Self-attention and a feed-forward network, as ``torch.nn.TransformerEncoderLayer``.

    Args:
        d_model: the feature count of the input; nhead: attention heads.
        dim_feedforward: the hidden width of the feed-forward network.
        dropout: on the attention weights and after each block.
        activation: "relu", "gelu" or a callable.
        layer_norm_eps, batch_first, norm_first, bias, device, dtype: as PyTorch's.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self._build(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                    bias, device, dtype, ("self_attn",))

    def forward(self, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Any:
        """The layer on ``src`` (S, N, E) ((N, S, E) with ``batch_first``, or unbatched (S, E)).

        Args:
            src_mask: (S, S) or (N * nhead, S, S) attention mask (True or -inf: not allowed).
            src_key_padding_mask: (N, S) (True or -inf: padding).
            is_causal: a hint that ``src_mask`` is the causal mask.
        """
        src_key_padding_mask = canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                              None if src_mask is None else src_mask.dtype, "src_mask", src.dtype)
        src_mask = canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)

        def self_attention(x: Any) -> Any:
            return self.dropout1(self.self_attn(x, x, x, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                                                need_weights=False, is_causal=is_causal)[0])

        x = self._residual(src, self_attention, self.norm1)
        return self._residual(x, lambda y: self._ff_block(y, self.dropout2), self.norm2)


class TransformerDecoderLayer(_FeedForwardLayer):
    """Self-attention, attention over the encoder's output (``memory``) and a feed-forward
    network, as ``torch.nn.TransformerDecoderLayer``; arguments as
    :class:`TransformerEncoderLayer`'s."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = relu, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self._build(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                    bias, device, dtype, ("self_attn", "multihead_attn"))

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Any:
        """The layer on ``tgt`` (T, N, E) attending over ``memory`` (S, N, E) (batch first with
        ``batch_first``).

        Args:
            tgt_mask, tgt_key_padding_mask, tgt_is_causal: for the self-attention, (T, T) and (N, T).
            memory_mask, memory_key_padding_mask, memory_is_causal: for the attention over
                ``memory``, (T, S) and (N, S).
        """
        def self_attention(x: Any) -> Any:
            return self.dropout1(self.self_attn(x, x, x, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                                                is_causal=tgt_is_causal, need_weights=False)[0])

        def memory_attention(x: Any) -> Any:
            return self.dropout2(self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                                     key_padding_mask=memory_key_padding_mask,
                                                     is_causal=memory_is_causal, need_weights=False)[0])

        x = self._residual(tgt, self_attention, self.norm1)
        x = self._residual(x, memory_attention, self.norm2)
        return self._residual(x, lambda y: self._ff_block(y, self.dropout3), self.norm3)
