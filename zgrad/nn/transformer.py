"""Stacks of Transformer layers: ``TransformerEncoder``, ``TransformerDecoder`` and the
encoder-decoder ``Transformer``, as PyTorch's (submodule names and state_dict keys included)."""

from __future__ import annotations

import copy
from typing import Any, Callable

from zgrad import ops
from zgrad.creation import full
from zgrad.nn import init
from zgrad.nn.containers import ModuleList
from zgrad.nn.module import Module
from zgrad.nn.norm import LayerNorm
from zgrad.nn.transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer
from zgrad.ops.activation import relu
from zgrad.ops.multihead_attention import canonical_mask

__all__ = ["Transformer", "TransformerDecoder", "TransformerEncoder", "generate_square_subsequent_mask"]


def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
    """The (sz, sz) causal float mask: -inf above the diagonal, 0 on and below it (``dtype`` None:
    the default dtype)."""
    return ops.triu(full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _sequence_length(x: Any, batch_first: bool) -> int:
    """The sequence length of (S, E), (S, N, E) or, batch first, (N, S, E) input."""
    return x.shape[0] if x.ndim == 2 else x.shape[1 if batch_first else 0]


def _detect_is_causal(mask: Any, is_causal: bool | None, size: int) -> bool:
    """``is_causal`` when given; else whether ``mask`` is the causal mask of ``size``."""
    if is_causal is not None or mask is None:
        return is_causal is True
    causal = generate_square_subsequent_mask(size, device=mask.device, dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool(ops.all(mask == causal))


def _clones(layer: Module, num_layers: int) -> ModuleList:
    return ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` in turn, then ``norm`` (if given), as
    ``torch.nn.TransformerEncoder``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch's signature; zgrad has no
    nested tensors, so padded positions are always computed (and masked).
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Any:
        """The layers on ``src``.

        Args:
            mask: the attention mask of every layer; src_key_padding_mask: (N, S).
            is_causal: a hint that ``mask`` is causal; None detects it.
        """
        src_key_padding_mask = canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                              None if mask is None else mask.dtype, "mask", src.dtype)
        mask = canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        is_causal = _detect_is_causal(mask, is_causal, _sequence_length(src, self.layers[0].self_attn.batch_first))
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` in turn, then ``norm`` (if given), as
    ``torch.nn.TransformerDecoder``."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        """The layers on ``tgt`` over ``memory``; the masks as :class:`TransformerDecoderLayer`'s
        (``tgt_is_causal`` None detects a causal ``tgt_mask``)."""
        tgt_is_causal = _detect_is_causal(tgt_mask, tgt_is_causal,
                                          _sequence_length(tgt, self.layers[0].self_attn.batch_first))
        output = tgt
        for layer in self.layers:
            output = layer(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                           tgt_key_padding_mask=tgt_key_padding_mask,
                           memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                           memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """The encoder-decoder Transformer, as ``torch.nn.Transformer``: ``num_encoder_layers``
    encoder layers and ``num_decoder_layers`` decoder layers, each stack followed by a layer norm
    (or ``custom_encoder``/``custom_decoder``); every parameter of more than one dimension is then
    re-initialized Xavier-uniform, as PyTorch does.

    Raises:
        RuntimeError (forward): ``src`` and ``tgt`` with different batch sizes, or a feature count
            other than ``d_model`` (PyTorch's messages).
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[Any], Any] = relu, custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        layer_args = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                          layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias,
                          device=device, dtype=dtype)

        def norm() -> LayerNorm:
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)

        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **layer_args), num_encoder_layers, norm())
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **layer_args), num_decoder_layers, norm())
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None, memory_mask: Any = None,
                src_key_padding_mask: Any = None, tgt_key_padding_mask: Any = None,
                memory_key_padding_mask: Any = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        """Encode ``src`` (S, N, E), then decode ``tgt`` (T, N, E) over it (batch first with
        ``batch_first``; unbatched (S, E), (T, E) too); the masks as the layers'.

        Returns:
            (T, N, E), shaped as ``tgt``.
        """
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
        """The (sz, sz) causal float mask: -inf above the diagonal, 0 elsewhere."""
        return generate_square_subsequent_mask(sz, device, dtype)
