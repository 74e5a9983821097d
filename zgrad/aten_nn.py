"""The ``zgrad.<name>`` forms of the nn ops, with the signatures PyTorch gives them there.

PyTorch's ``torch.conv2d``, ``torch.dropout``, ``torch.embedding``, ``torch.batch_norm``... are its
ATen ops, which ``torch.nn.functional`` wraps: their arguments differ from the functional forms
(``dropout(input, p, train)`` has no defaults, ``embedding(weight, indices)`` takes the weight first,
``batch_norm`` takes ``weight`` and ``bias`` before the running statistics, the losses take
``reduction`` as an int: 0 none, 1 mean, 2 sum). Each function here maps those arguments onto
the ``zgrad.nn.functional`` op, so the two forms cannot disagree.

A loss called without ``reduction`` is left unreduced, as PyTorch 2.13's bindings of these
functions do (their schemas say 1, mean, but the Python binding's default is 0).
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad import ops
from zgrad.linalg import vector_norm
from zgrad.nn import functional as F
from zgrad.ops.dropout import feature_dropout as _feature_dropout
from zgrad.ops.loss_pointwise import reduce_loss
from zgrad.nn.rnn_cells import gru_cell, lstm_cell, rnn_relu_cell, rnn_tanh_cell

__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "affine_grid_generator", "alpha_dropout", "alpha_dropout_",
    "avg_pool1d", "batch_norm", "bilinear", "binary_cross_entropy_with_logits", "celu", "celu_", "constant_pad_nd",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose3d", "convolution", "cosine_embedding_loss",
    "ctc_loss", "dropout", "dropout_", "embedding", "feature_alpha_dropout", "feature_alpha_dropout_",
    "feature_dropout", "feature_dropout_", "grid_sampler", "group_norm", "gru_cell", "hardshrink",
    "hinge_embedding_loss", "instance_norm", "kl_div", "layer_norm", "lstm_cell", "margin_ranking_loss",
    "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool3d", "norm_except_dim", "poisson_nll_loss",
    "rms_norm", "rnn_relu_cell", "rnn_tanh_cell", "rrelu", "rrelu_", "selu", "selu_", "threshold", "threshold_",
    "triplet_margin_loss",
]

conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose3d = F.conv_transpose1d, F.conv_transpose3d
bilinear, hardshrink = F.bilinear, F.hardshrink

# ATen's Reduction enum; any other int leaves the loss unreduced, as ATen's apply_loss_reduction does
_REDUCTIONS = {1: "mean", 2: "sum"}
_INTERPOLATION_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")


def _reduction(value: Any, function: str) -> str:
    """The functional form's ``reduction`` string of ATen's int.

    Raises:
        TypeError: a ``reduction`` that is not an int (PyTorch's message).
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{function}(): argument 'reduction' must be int, not {type(value).__name__}")
    return _REDUCTIONS.get(value, "none")


def _stride(stride: Any) -> Any:
    """ATen's empty stride (its default) is the functional form's None: the kernel size."""
    return None if isinstance(stride, (list, tuple)) and not stride else stride


def convolution(input: Any, weight: Any, bias: Any, stride: Sequence[int], padding: Sequence[int],  # noqa: A002
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int) -> Any:
    """A convolution of any spatial rank (the weight's dimensions less two), transposed or not.

    Raises:
        ValueError: a weight that is not 3-, 4- or 5-dimensional.
    """
    rank = weight.ndim - 2
    if rank not in (1, 2, 3):
        raise ValueError(f"convolution: expected a 3-, 4- or 5-dimensional weight, got {weight.ndim} dimensions")
    if transposed:
        return getattr(F, f"conv_transpose{rank}d")(input, weight, bias, stride, padding, output_padding, groups,
                                                    dilation)
    return getattr(F, f"conv{rank}d")(input, weight, bias, stride, padding, dilation, groups)


# --- dropout: (input, p, train), no defaults ------------------------------------------------------

def dropout(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``F.dropout(input, p, training=train)``."""
    return F.dropout(input, p, train)


def dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``dropout`` in place."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``F.alpha_dropout(input, p, training=train)``."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``alpha_dropout`` in place."""
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``F.feature_alpha_dropout(input, p, training=train)``: whole channels at once."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``feature_alpha_dropout`` in place."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """Dropout of whole channels (one draw per (N, C)) of an (N, C, ...) input.

    Raises:
        ValueError: ``p`` outside [0, 1]. RuntimeError: fewer than 2 dims (PyTorch's message).
    """
    return _feature_dropout(input, p, train)


def feature_dropout_(input: Any, p: float, train: bool) -> Any:  # noqa: A002
    """``feature_dropout`` in place."""
    return _feature_dropout(input, p, train, inplace=True)


# --- activations ---------------------------------------------------------------------------------

def celu(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    """``F.celu``."""
    return F.celu(input, alpha)


def celu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    """``celu`` in place."""
    return F.celu(input, alpha, inplace=True)


def selu(input: Any) -> Any:  # noqa: A002
    """``F.selu``."""
    return F.selu(input)


def selu_(input: Any) -> Any:  # noqa: A002
    """``selu`` in place."""
    return F.selu(input, inplace=True)


def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
          generator: Any = None) -> Any:
    """``F.rrelu``: slopes drawn from U(lower, upper) when training, their mean otherwise.

    Raises:
        NotImplementedError: a ``generator`` (the draws come from the default generator).
    """
    _default_generator_only(generator, "rrelu")
    return F.rrelu(input, lower, upper, training)


def rrelu_(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,  # noqa: A002
           generator: Any = None) -> Any:
    """``rrelu`` in place."""
    _default_generator_only(generator, "rrelu_")
    return F.rrelu(input, lower, upper, training, inplace=True)


def _default_generator_only(generator: Any, function: str) -> None:
    if generator is not None:
        raise NotImplementedError(f"{function}: generator= is not supported; it draws from the default generator "
                                  "(seed it with zgrad.manual_seed)")


def threshold(input: Any, threshold: float, value: float) -> Any:  # noqa: A002
    """``F.threshold``: ``value`` where input <= threshold, input elsewhere."""
    return F.threshold(input, threshold, value)


def threshold_(input: Any, threshold: float, value: float) -> Any:  # noqa: A002
    """``threshold`` in place."""
    return F.threshold(input, threshold, value, inplace=True)


# --- embedding and normalization ------------------------------------------------------------------

def embedding(weight: Any, indices: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Any:
    """Rows ``indices`` of ``weight`` (the weight comes first, as ATen's; ``padding_idx`` < 0 means
    none: ``F.embedding`` has already made a negative index positive)."""
    return F.embedding(indices, weight, padding_idx if padding_idx >= 0 else None,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def batch_norm(input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,  # noqa: A002
               training: bool, momentum: float, eps: float, cudnn_enabled: bool) -> Any:
    """``F.batch_norm`` with ATen's argument order (weight and bias first); ``cudnn_enabled`` changes
    nothing."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any,  # noqa: A002
                  use_input_stats: bool, momentum: float, eps: float, cudnn_enabled: bool) -> Any:
    """``F.instance_norm`` with ATen's argument order; ``cudnn_enabled`` changes nothing."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def layer_norm(input: Any, normalized_shape: Sequence[int], weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5, cudnn_enable: bool = True) -> Any:
    """``F.layer_norm``; ``cudnn_enable`` changes nothing."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5,  # noqa: A002
               cudnn_enabled: bool = True) -> Any:
    """``F.group_norm``; ``cudnn_enabled`` changes nothing."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def rms_norm(input: Any, normalized_shape: Sequence[int], weight: Any = None,  # noqa: A002
             eps: float | None = None) -> Any:
    """``F.rms_norm``."""
    return F.rms_norm(input, normalized_shape, weight, eps)


def norm_except_dim(v: Any, pow: float = 2, dim: int = 0) -> Any:  # noqa: A002 - PyTorch's names
    """The ``pow``-norm of ``v`` over every dimension but ``dim``, kept as size-1 dimensions (weight
    normalization's norm); ``dim=-1`` takes the norm of all of ``v``, a 0-d tensor."""
    if dim == -1:
        return vector_norm(v, pow)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return vector_norm(v, pow, others, keepdim=True) if others else ops.abs(v)


# --- pooling and padding ---------------------------------------------------------------------------

def max_pool1d(input: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False) -> Any:
    """``F.max_pool1d``; an empty ``stride`` (the default) is the kernel size."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input: Any, kernel_size: Any, stride: Any = (), padding: Any = 0,  # noqa: A002
                            dilation: Any = 1, ceil_mode: bool = False) -> tuple[Any, Any]:
    """``max_pool1d`` and the int64 indices of the maxima."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode, return_indices=True)


def max_pool2d(input: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False) -> Any:
    """``F.max_pool2d``; an empty ``stride`` (the default) is the kernel size."""
    return F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False) -> Any:
    """``F.max_pool3d``; an empty ``stride`` (the default) is the kernel size."""
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = (), padding: Any = 0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True) -> Any:
    """``F.avg_pool1d``; an empty ``stride`` (the default) is the kernel size."""
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """``F.adaptive_avg_pool1d``."""
    return F.adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input: Any, output_size: Any) -> tuple[Any, Any]:  # noqa: A002
    """``F.adaptive_max_pool1d`` with its indices: ATen's op always returns both."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def constant_pad_nd(input: Any, pad: Sequence[int], value: float = 0) -> Any:  # noqa: A002
    """``F.pad(input, pad, value=value)``: constant padding, last dimension first; negative
    amounts crop."""
    return F.pad(input, pad, "constant", value)


def grid_sampler(input: Any, grid: Any, interpolation_mode: int, padding_mode: int,  # noqa: A002
                 align_corners: bool) -> Any:
    """``F.grid_sample`` with ATen's int modes: interpolation 0 bilinear, 1 nearest, 2 bicubic;
    padding 0 zeros, 1 border, 2 reflection.

    Raises:
        ValueError: a mode number outside those.
    """
    if interpolation_mode not in range(3) or padding_mode not in range(3):
        raise ValueError(f"grid_sampler: interpolation_mode must be 0, 1 or 2 and padding_mode 0, 1 or 2, got "
                         f"{interpolation_mode} and {padding_mode}")
    return F.grid_sample(input, grid, _INTERPOLATION_MODES[interpolation_mode], _PADDING_MODES[padding_mode],
                         align_corners)


def affine_grid_generator(theta: Any, size: Sequence[int], align_corners: bool) -> Any:
    """``F.affine_grid``."""
    return F.affine_grid(theta, list(size), align_corners)


# --- losses: reduction is ATen's int ----------------------------------------------------------------

def kl_div(input: Any, target: Any, reduction: int = 0, *, log_target: bool = False) -> Any:  # noqa: A002
    """``F.kl_div`` with an int ``reduction``; 1 (mean) divides by the number of elements, without
    the functional form's warning about 'batchmean'.

    Raises:
        TypeError: a ``reduction`` that is not an int.
    """
    loss = F.kl_div(input, target, reduction="none", log_target=log_target)
    return reduce_loss(loss, _reduction(reduction, "kl_div"))


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, pos_weight: Any = None,  # noqa: A002
                                     reduction: int = 0) -> Any:
    """``F.binary_cross_entropy_with_logits`` with an int ``reduction``."""
    return F.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction, "binary_cross_entropy_with_logits"),
        pos_weight=pos_weight)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, reduction: int = 0) -> Any:
    """``F.cosine_embedding_loss`` with an int ``reduction``."""
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction, "cosine_embedding_loss"))


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0, reduction: int = 0) -> Any:  # noqa: A002
    """``F.hinge_embedding_loss`` with an int ``reduction``."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss"))


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, reduction: int = 0) -> Any:
    """``F.margin_ranking_loss`` with an int ``reduction``."""
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss"))


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, reduction: int = 0) -> Any:
    """``F.triplet_margin_loss`` with an int ``reduction``."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction, "triplet_margin_loss"))


def poisson_nll_loss(input: Any, target: Any, log_input: bool, full: bool, eps: float,  # noqa: A002
                     reduction: int) -> Any:
    """``F.poisson_nll_loss``; every argument is required, as in ATen's op."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction, "poisson_nll_loss"))


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: int = 0, zero_infinity: bool = False) -> Any:
    """``F.ctc_loss`` with an int ``reduction``."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction, "ctc_loss"),
                      zero_infinity)
