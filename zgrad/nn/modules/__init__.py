"""``zgrad.nn.modules``: the module paths PyTorch programs import (``torch.nn.modules.linear``,
...), each re-exporting the classes of :mod:`zgrad.nn`, which are the same objects."""

from zgrad.nn.modules import (
    activation, batchnorm, channelshuffle, container, conv, distance, dropout, flatten, fold, instancenorm, linear,
    loss, module, normalization, padding, pixelshuffle, pooling, rnn, sparse, transformer, upsampling,
)
from zgrad.nn.modules.activation import (
    ELU, GELU, LeakyReLU, LogSoftmax, Mish, MultiheadAttention, PReLU, ReLU, SiLU, Sigmoid, Softmax, Softplus, Tanh,
)
from zgrad.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d
from zgrad.nn.modules.container import ModuleDict, ModuleList, Sequential
from zgrad.nn.modules.conv import Conv2d, ConvTranspose2d
from zgrad.nn.modules.distance import CosineSimilarity, PairwiseDistance
from zgrad.nn.modules.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from zgrad.nn.modules.flatten import Flatten, Unflatten
from zgrad.nn.modules.instancenorm import InstanceNorm1d, InstanceNorm2d
from zgrad.nn.modules.linear import Identity, Linear
from zgrad.nn.modules.loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
)
from zgrad.nn.modules.module import Module
from zgrad.nn.modules.normalization import GroupNorm, LayerNorm, RMSNorm
from zgrad.nn.modules.padding import (
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
)
from zgrad.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle
from zgrad.nn.modules.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from zgrad.nn.modules.rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from zgrad.nn.modules.sparse import Embedding, EmbeddingBag
from zgrad.nn.modules.transformer import (
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)
from zgrad.nn.modules.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from zgrad.nn.modules.batchnorm import BatchNorm3d
from zgrad.nn.modules.conv import Conv3d, ConvTranspose3d
from zgrad.nn.modules.instancenorm import InstanceNorm3d
from zgrad.nn.modules.pooling import (
    AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool3d, MaxPool3d,
)

from zgrad.nn.modules import lazy
from zgrad.nn.modules.conv import (
    LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
)
from zgrad.nn.modules.batchnorm import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from zgrad.nn.modules.instancenorm import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d
from zgrad.nn.modules.linear import LazyLinear
from zgrad.nn.modules.pooling import FractionalMaxPool2d, FractionalMaxPool3d
from zgrad.nn.modules import adaptive
from zgrad.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss

__all__ = [
    "activation", "batchnorm", "container", "conv", "distance", "dropout", "flatten", "instancenorm", "linear",
    "loss", "module", "normalization", "padding", "pixelshuffle", "pooling", "rnn", "sparse", "upsampling",
    "AdaptiveAvgPool2d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "CircularPad1d",
    "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "Conv2d",
    "ConvTranspose2d", "CosineSimilarity", "CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "ELU", "Embedding",
    "EmbeddingBag", "Flatten", "GELU", "GRU", "GRUCell", "GroupNorm", "HuberLoss", "Identity", "InstanceNorm1d",
    "InstanceNorm2d", "KLDivLoss", "L1Loss", "LSTM", "LSTMCell", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax",
    "MSELoss", "MaxPool2d", "Module", "ModuleDict", "ModuleList", "NLLLoss", "PReLU", "PairwiseDistance",
    "PixelShuffle", "PixelUnshuffle", "RNN", "RNNCell", "ReLU", "ReflectionPad1d", "ReflectionPad2d",
    "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "Sequential", "Sigmoid",
    "SmoothL1Loss", "Softmax", "Tanh", "Unflatten", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "transformer", "Mish", "MultiheadAttention", "RMSNorm", "SiLU", "Softplus",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer",
]
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool3d",
            "BatchNorm3d", "Conv3d", "ConvTranspose3d", "InstanceNorm3d", "MaxPool3d"]
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
            "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
            "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear",
            "lazy"]
__all__ += ["AdaptiveLogSoftmaxWithLoss", "adaptive"]
__all__ += ["channelshuffle", "fold"]
