"""``zgrad.nn.utils``: gradient clipping, parameter/vector conversion, (``rnn``) batches of
sequences, (``parametrize``, ``parametrizations``) parametrized tensors such as weight and spectral
norm, and their forward-hook forms (``weight_norm``, ``spectral_norm``), BatchNorm folding (``fusion``),
``skip_init`` (``init``) and weight memory formats (``memory_format``), as ``torch.nn.utils``."""

from zgrad.nn.utils.clip_grad import (
    clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
)
from zgrad.nn.utils import rnn
from zgrad.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from zgrad.nn.utils import parametrize, parametrizations
from zgrad.nn.utils.weight_norm import remove_weight_norm, weight_norm
from zgrad.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from zgrad.nn.utils import prune  # noqa: F401
from zgrad.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from zgrad.nn.utils.init import skip_init
from zgrad.nn.utils.memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "rnn", "vector_to_parameters"]
__all__ += ["parametrizations", "parametrize", "remove_spectral_norm", "remove_weight_norm", "spectral_norm",
            "weight_norm"]
__all__ += ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format", "fuse_conv_bn_eval",
            "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights", "skip_init"]
