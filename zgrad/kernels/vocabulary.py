"""The op vocabulary of the kernel layer, declared once: the ops every backend implements (checked
when dispatch loads one) and the codes its kernels number their options by. Imported by dispatch
and by both backends; imports nothing.
"""

from __future__ import annotations

__all__ = ["ACTIVATION_CODES", "OPS", "PADDING_MODES", "PAD_CIRCULAR", "PAD_REFLECT", "PAD_REPLICATE", "PAD_ZEROS"]

OPS = (
    "empty", "full", "asarray", "to_host",
    "add", "sub", "mul", "div", "pow", "neg",
    "exp", "log", "tanh", "sigmoid", "relu",
    "relu_backward", "tanh_backward", "sigmoid_backward",
    "matmul", "sum", "prod", "nansum", "cumsum", "prod_backward_rows", "copy", "stack", "concatenate",
    "scatter_slice",
    "bias_act", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
    "cross_entropy", "cross_entropy_backward",
    "sgd_step", "adam_step", "rmsprop_step", "adagrad_step", "adadelta_step",
    "conv2d", "conv2d_backward", "max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
    "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "batch_norm", "batch_norm_backward",
    "group_norm", "group_norm_backward",
    "remainder", "floor_divide", "maximum", "minimum", "abs", "sign", "sqrt", "clamp", "clamp_backward", "extremum_backward",
    "compare", "logical_not", "where", "argmax", "argmin", "take", "gather", "index_add", "scatter", "scatter_add",
    "var_rows", "var_backward_rows", "logsumexp_rows", "logsumexp_backward_rows", "distribute_equal", "vector_norm",
    "add_scaled", "addcmul", "addcdiv", "random_uniform", "random_normal", "random_integers",
    "zeros", "embedding", "embedding_backward", "embedding_renorm", "embedding_bag", "embedding_bag_backward",
    "embedding_bag_per_sample_weights_backward", "lstm_forward", "lstm_backward", "gru_forward", "gru_backward",
    "dropout", "dropout_backward", "gelu", "gelu_backward", "leaky_relu", "leaky_relu_backward",
    "class_loss", "class_loss_backward", "nll", "nll_backward", "pointwise_loss", "pointwise_loss_sum",
    "pointwise_loss_backward",
    "reduce_inplace", "reduce_pair", "reduce_and_copy", "divide_inplace", "scale_copy",
    "to_dlpack", "dlpack_device", "from_dlpack",
)

# The padding modes of conv2d; kernels number them by their position here.
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
PAD_ZEROS, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR = range(len(PADDING_MODES))

# The activations fused after a bias (``bias_act``), by the code kernels take.
ACTIVATION_CODES = {"identity": 0, "relu": 1, "tanh": 2, "sigmoid": 3}
