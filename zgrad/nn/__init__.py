"""``zgrad.nn``: modules, layers and (in ``functional``) stateless ops."""

from zgrad.nn import functional, grad, init, utils
from zgrad.nn.containers import ModuleDict, ModuleList, Sequential
from zgrad.nn.parameter_containers import ParameterDict, ParameterList
from zgrad.nn.one_dimensional import AdaptiveAvgPool1d, AvgPool1d, Conv1d, ConvTranspose1d, MaxPool1d
from zgrad.nn.three_dimensional import AdaptiveAvgPool3d, AvgPool3d, Conv3d, ConvTranspose3d, MaxPool3d
from zgrad.nn.adaptive_max_pool import AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d
from zgrad.nn.layers import Flatten, Identity, Linear, ReLU, Sigmoid, Tanh, Unflatten
from zgrad.nn.module import Buffer, Module, Parameter
from zgrad.nn.activation import ELU, GELU, LeakyReLU, LogSoftmax, PReLU, Softmax
from zgrad.nn.activation_smooth import Mish, SiLU, Softplus
from zgrad.nn.activation_piecewise import Hardshrink, Hardsigmoid, Hardswish, Hardtanh, ReLU6, Softshrink, Threshold
from zgrad.nn.activation_composed import CELU, GLU, LogSigmoid, SELU, Softmax2d, Softmin, Softsign, Tanhshrink
from zgrad.nn.attention import MultiheadAttention
from zgrad.nn.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from zgrad.nn.loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
)
from zgrad.nn.loss_margin import (
    CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss, MultiLabelSoftMarginLoss,
    PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss,
)
from zgrad.nn.rnn import GRU, GRUCell, LSTM, LSTMCell, RNNBase, RNNCellBase
from zgrad.nn.rnn_elman import RNN, RNNCell
from zgrad.nn.sparse import Embedding, EmbeddingBag
from zgrad.nn.conv import Conv2d, ConvTranspose2d
from zgrad.nn.norm import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d, LayerNorm, RMSNorm
from zgrad.nn.norm import BatchNorm3d, InstanceNorm3d
from zgrad.nn.transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer
from zgrad.nn.transformer import Transformer, TransformerDecoder, TransformerEncoder
from zgrad.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from zgrad.nn.distance import CosineSimilarity, PairwiseDistance
from zgrad.nn.padding import (
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
    ZeroPad3d,
)
from zgrad.nn.pixelshuffle import ChannelShuffle, PixelShuffle, PixelUnshuffle
from zgrad.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from zgrad.nn.fold import Fold, Unfold
from zgrad.nn.bilinear import Bilinear
from zgrad.nn.local_response_norm import LocalResponseNorm
from zgrad.nn.pool_lp_unpool import LPPool1d, LPPool2d, LPPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d
from zgrad.nn.loss import NLLLoss2d
from zgrad.nn.loss_margin import TripletMarginWithDistanceLoss
from zgrad.nn.noise_layers import AlphaDropout, FeatureAlphaDropout, RReLU
from zgrad.nn.loss_multi_margin import MultiLabelMarginLoss, MultiMarginLoss
from zgrad.nn.parameter import UninitializedBuffer, UninitializedParameter
from zgrad.nn.lazy import (
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d,
    LazyLinear,
)
from zgrad.nn.lazy_conv import (
    LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
)
from zgrad.nn.fractional_max_pool import FractionalMaxPool2d, FractionalMaxPool3d
from zgrad.nn.loss_ctc import CTCLoss
from zgrad.nn.data_parallel import DataParallel
from zgrad.nn.adaptive import AdaptiveLogSoftmaxWithLoss
from zgrad.nn import modules  # after the classes it re-exports

__all__ = ["Linear", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional"]
__all__ += ["Flatten", "Identity", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "init", "utils"]
__all__ += ["AdaptiveAvgPool1d", "AvgPool1d", "Conv1d", "ConvTranspose1d", "MaxPool1d"]
__all__ += ["AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool3d",
            "BatchNorm3d", "Conv3d", "ConvTranspose3d", "InstanceNorm3d", "MaxPool3d"]
__all__ += ["CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "Embedding", "EmbeddingBag", "GELU", "GRU", "GRUCell", "L1Loss",
            "LSTM", "LSTMCell", "LeakyReLU", "LogSoftmax", "MSELoss", "NLLLoss", "Softmax"]
__all__ += ["AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "GroupNorm", "LayerNorm",
            "MaxPool2d"]
__all__ += ["BCELoss", "BCEWithLogitsLoss", "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d",
            "ConstantPad2d", "ConstantPad3d", "ConvTranspose2d", "CosineSimilarity", "ELU", "HuberLoss",
            "InstanceNorm1d", "InstanceNorm2d", "KLDivLoss", "PReLU", "PairwiseDistance", "PixelShuffle",
            "PixelUnshuffle", "RNN", "RNNCell", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
            "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "SmoothL1Loss", "Unflatten", "Upsample",
            "UpsamplingBilinear2d", "UpsamplingNearest2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "modules"]
__all__ += ["Mish", "MultiheadAttention", "RMSNorm", "SiLU", "Softplus", "Transformer", "TransformerDecoder",
            "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer"]
__all__ += ["CELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSigmoid", "ReLU6", "SELU",
            "Softmax2d", "Softmin", "Softshrink", "Softsign", "Tanhshrink", "Threshold"]
__all__ += ["CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
            "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss"]
__all__ += ["AlphaDropout", "Bilinear", "FeatureAlphaDropout", "Fold", "LPPool1d", "LPPool2d", "LocalResponseNorm",
            "MaxUnpool1d", "MaxUnpool2d", "MultiLabelMarginLoss", "MultiMarginLoss", "RReLU", "Unfold"]
__all__ += ["CTCLoss"]
__all__ += ["ChannelShuffle", "LPPool3d", "MaxUnpool3d", "NLLLoss2d", "RNNBase", "RNNCellBase",
            "TripletMarginWithDistanceLoss"]
__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
            "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
            "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear",
            "UninitializedBuffer", "UninitializedParameter"]
__all__ += ["Buffer", "DataParallel", "grad"]
__all__ += ["AdaptiveLogSoftmaxWithLoss"]
# bound by zgrad/__init__.py on first use: the distributed layer, which zgrad.nn may not import
__all__ += ["SyncBatchNorm"]
