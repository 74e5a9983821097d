"""``zgrad.nn.utils.fusion``: fold an eval-mode BatchNorm into the convolution or linear layer
before it, as ``torch.nn.utils.fusion``.

In eval mode BatchNorm is the affine map ``y = (x - mean) / sqrt(var + eps) * w + b`` per
channel, so ``bn(conv(x))`` equals a convolution whose weight is scaled per output channel by
``w / sqrt(var + eps)`` and whose bias is ``(bias - mean) * w / sqrt(var + eps) + b``.
"""

from __future__ import annotations

import copy
from typing import TypeVar

from zgrad.creation import ones_like, zeros_like
from zgrad.nn.module import Module, Parameter
from zgrad.tensor import Tensor

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]

M = TypeVar("M", bound=Module)


def _check_running_stats(bn: Module) -> None:
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv: M, bn: Module, transpose: bool = False) -> M:
    """A new convolution (a deep copy of ``conv``) computing ``bn(conv(x))`` of the eval-mode pair.

    Args:
        conv: a convolution module (``Conv1d``/``2d``/``3d`` or a ``ConvTranspose``).
        bn: a BatchNorm module with running statistics.
        transpose: whether ``conv``'s weight is (in, out, ...) as a transposed convolution's.

    Returns:
        The fused convolution; ``conv`` and ``bn`` are unchanged.

    Raises:
        AssertionError: ``conv`` or ``bn`` in training mode, or ``bn`` without running
            statistics (PyTorch's messages).
    """
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    _check_running_stats(bn)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps,
                                                    bn.weight, bn.bias, transpose)
    return fused


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                         bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The weight and bias of the convolution equal to convolution ``(conv_w, conv_b)`` followed by
    an eval-mode BatchNorm ``(bn_rm, bn_rv, bn_eps, bn_w, bn_b)``.

    A missing ``conv_b`` or ``bn_b`` counts as zeros, a missing ``bn_w`` as ones. The weight keeps
    ``conv_w``'s dtype, the bias ``conv_b``'s (``conv_w``'s without one); each parameter requires
    grad as ``conv_w`` / ``conv_b`` does (the bias never, without ``conv_b``), as in PyTorch.

    Args:
        transpose: scale dim 1 of the weight (a transposed convolution's output channels), not dim 0.

    Returns:
        (fused weight, fused bias), new Parameters.

    Raises:
        RuntimeError: shapes that do not broadcast (the number of channels differs).
    """
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    var_rsqrt = (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(dtype=weight_dtype)
    fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear: M, bn: Module) -> M:
    """A new ``Linear`` (a deep copy of ``linear``) computing ``bn(linear(x))`` of the eval-mode pair.

    The BatchNorm's channels must be the linear layer's outputs (``bn.num_features ==
    linear.out_features``), or a single channel that broadcasts over them.

    Returns:
        The fused linear layer; ``linear`` and ``bn`` are unchanged.

    Raises:
        AssertionError: either module in training mode, ``bn`` without running statistics, or
            ``bn.num_features`` neither ``linear.out_features`` nor 1 (PyTorch's messages).
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(f"To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
                             f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}")
    _check_running_stats(bn)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                           bn_w: Tensor, bn_b: Tensor) -> tuple[Parameter, Parameter]:
    """The weight and bias of the linear layer equal to ``(linear_w, linear_b)`` followed by an
    eval-mode BatchNorm1d ``(bn_rm, bn_rv, bn_eps, bn_w, bn_b)`` over its outputs.

    A missing ``linear_b`` counts as zeros. The weight keeps ``linear_w``'s dtype, the bias
    ``linear_b``'s (``linear_w``'s without one); requires_grad follows ``linear_w`` / ``linear_b``.
    ``bn_w`` and ``bn_b`` are required, as in PyTorch (an affine-free BatchNorm cannot be fused
    with this function).

    Returns:
        (fused weight, fused bias), new Parameters.

    Raises:
        RuntimeError: shapes that do not broadcast.
        TypeError: ``bn_w`` or ``bn_b`` is None.
    """
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1).to(dtype=weight_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
