"""``zgrad.nn``: modules, layers and (in ``functional``) stateless ops."""

from zgrad.nn import functional, init, utils
from zgrad.nn.containers import ModuleDict, ModuleList, Sequential
from zgrad.nn.layers import Flatten, Identity, Linear, ReLU, Sigmoid, Tanh
from zgrad.nn.module import Module, Parameter
from zgrad.nn.activation import GELU, LeakyReLU, LogSoftmax, Softmax
from zgrad.nn.dropout import Dropout, Dropout2d
from zgrad.nn.loss import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from zgrad.nn.rnn import GRU, GRUCell, LSTM, LSTMCell
from zgrad.nn.sparse import Embedding, EmbeddingBag
from zgrad.nn.conv import Conv2d
from zgrad.nn.norm import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from zgrad.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d

__all__ = ["Linear", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional"]
__all__ += ["Flatten", "Identity", "ModuleDict", "ModuleList", "init", "utils"]
__all__ += ["CrossEntropyLoss", "Dropout", "Dropout2d", "Embedding", "EmbeddingBag", "GELU", "GRU", "GRUCell", "L1Loss",
            "LSTM", "LSTMCell", "LeakyReLU", "LogSoftmax", "MSELoss", "NLLLoss", "Softmax"]
__all__ += ["AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "GroupNorm", "LayerNorm",
            "MaxPool2d"]
