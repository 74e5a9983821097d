"""``zgrad.nn.functional``: stateless layer functions and losses."""

from zgrad.ops import cross_entropy, linear, log_softmax, mse_loss, sigmoid, softmax, tanh
from zgrad.ops.attention import scaled_dot_product_attention
from zgrad.ops.activation import elu, gelu, leaky_relu, prelu, relu
from zgrad.ops.activation_smooth import mish, silu, softplus
from zgrad.ops.activation_piecewise import (
    hardshrink, hardsigmoid, hardswish, hardtanh, relu6, softshrink, threshold,
)
from zgrad.ops.activation_composed import celu, glu, logsigmoid, selu, softmin, softsign, tanhshrink
from zgrad.ops.loss_likelihood import gaussian_nll_loss, poisson_nll_loss
from zgrad.ops.loss_margin import (
    cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, multilabel_soft_margin_loss, soft_margin_loss,
    triplet_margin_loss,
)
from zgrad.ops.multihead_attention import multi_head_attention_forward
from zgrad.ops.rms_norm import rms_norm
from zgrad.ops.dropout import dropout, dropout1d, dropout2d, dropout3d
from zgrad.ops.embedding import embedding, embedding_bag
from zgrad.ops.loss_functions import l1_loss, nll_loss
from zgrad.ops.loss_pointwise import (
    binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div, smooth_l1_loss,
)
from zgrad.ops.padding import pad
from zgrad.ops.resample import channel_shuffle, interpolate, native_channel_shuffle, pixel_shuffle, pixel_unshuffle
from zgrad.ops.vector import cosine_similarity, normalize, one_hot, pairwise_distance
from zgrad.ops.fold import fold, unfold
from zgrad.ops.bilinear import bilinear
from zgrad.ops.local_response_norm import local_response_norm
from zgrad.ops.pool_lp_unpool import lp_pool1d, lp_pool2d, lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d
from zgrad.ops.functional_spellings import (
    adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices, adaptive_max_pool3d_with_indices, celu_, elu_,
    hardtanh_, leaky_relu_, max_pool1d_with_indices, max_pool2d_with_indices, max_pool3d_with_indices, relu_, rrelu_,
    selu_, threshold_, upsample, upsample_bilinear, upsample_nearest,
)
from zgrad.ops.gumbel_softmax import gumbel_softmax
from zgrad.ops.grid_sample import affine_grid, grid_sample
from zgrad.ops.products import pdist
from zgrad.ops.loss_margin import triplet_margin_with_distance_loss
from zgrad.ops.noise_layers import alpha_dropout, feature_alpha_dropout, rrelu
from zgrad.ops.loss_multi_margin import multi_margin_loss, multilabel_margin_loss
from zgrad.ops.loss_ctc import ctc_loss
from zgrad.ops.conv import conv2d
import zgrad.nn.grad as grad  # noqa: F401 - PyTorch's F.grad: the convolutions' input and weight gradients
from zgrad.ops.conv_transpose import conv_transpose2d
from zgrad.ops.norm import batch_norm, group_norm, instance_norm, layer_norm
from zgrad.ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from zgrad.ops.one_dimensional import adaptive_avg_pool1d, avg_pool1d, conv1d, conv_transpose1d, max_pool1d
from zgrad.ops.three_dimensional import adaptive_avg_pool3d, avg_pool3d, conv3d, conv_transpose3d, max_pool3d
from zgrad.ops.adaptive_max_pool import adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d
from zgrad.ops.fractional_max_pool import (
    fractional_max_pool2d, fractional_max_pool2d_with_indices, fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "relu", "sigmoid", "softmax", "tanh"]
__all__ += ["dropout", "dropout1d", "dropout2d", "dropout3d", "embedding", "embedding_bag", "gelu", "l1_loss", "leaky_relu", "nll_loss"]
__all__ += ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "conv2d", "group_norm", "layer_norm", "max_pool2d"]
__all__ += ["adaptive_avg_pool1d", "avg_pool1d", "conv1d", "conv_transpose1d", "max_pool1d"]
__all__ += ["adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool3d",
            "conv3d", "conv_transpose3d", "max_pool3d"]
__all__ += ["binary_cross_entropy", "binary_cross_entropy_with_logits", "conv_transpose2d", "cosine_similarity", "elu",
            "huber_loss", "instance_norm", "interpolate", "kl_div", "normalize", "one_hot", "pad", "pairwise_distance",
            "pixel_shuffle", "pixel_unshuffle", "prelu", "scaled_dot_product_attention", "smooth_l1_loss"]
__all__ += ["mish", "multi_head_attention_forward", "rms_norm", "silu", "softplus"]
__all__ += ["celu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "logsigmoid", "relu6", "selu",
            "softmin", "softshrink", "softsign", "tanhshrink", "threshold"]
__all__ += ["cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss", "margin_ranking_loss",
            "multilabel_soft_margin_loss", "poisson_nll_loss", "soft_margin_loss", "triplet_margin_loss"]
__all__ += ["alpha_dropout", "bilinear", "feature_alpha_dropout", "fold", "local_response_norm", "lp_pool1d",
            "lp_pool2d", "max_unpool1d", "max_unpool2d", "multi_margin_loss", "multilabel_margin_loss", "rrelu",
            "unfold"]
__all__ += ["ctc_loss"]
__all__ += ["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
            "celu_", "channel_shuffle", "elu_", "gumbel_softmax", "hardtanh_", "leaky_relu_", "lp_pool3d",
            "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices", "max_unpool3d",
            "native_channel_shuffle", "pdist", "relu_", "rrelu_", "selu_", "threshold_",
            "triplet_margin_with_distance_loss", "upsample", "upsample_bilinear", "upsample_nearest"]
__all__ += ["fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
            "fractional_max_pool3d_with_indices"]
__all__ += ["affine_grid", "grid_sample"]
