"""``zgrad.nn.modules.transformer``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.transformer import Transformer, TransformerDecoder, TransformerEncoder
from zgrad.nn.transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]
