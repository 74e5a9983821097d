"""``bilinear`` of ``zgrad.nn.functional``: y = x1^T A x2 + b per output feature, as PyTorch's,
composed of a matmul, a broadcast product and a sum (so gradients and the CUDA backend come from
those ops), with PyTorch's shape checks and error texts."""

from __future__ import annotations

import math
from typing import Any

from zgrad import ops
from zgrad.ops._args import tensor_arg

__all__ = ["bilinear"]


def _check_shapes(x1: Any, x2: Any, weight: Any, bias: Any) -> None:
    """PyTorch's checks of ``bilinear``'s operands, in its order.

    Raises:
        RuntimeError: PyTorch's messages.
    """
    if x1.ndim != x2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {x1.ndim} and {x2.ndim}")
    for d in range(x1.ndim - 1):
        if x1.shape[d] != x2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: got {x1.shape[d]} and "
                               f"{x2.shape[d]}")
    if weight.ndim >= 2 and x1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {x1.shape[-1]} but expected "
                           f"{weight.shape[1]}")
    if weight.ndim >= 3 and x2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {x2.shape[-1]} but expected "
                           f"{weight.shape[2]}")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight should be 3-D (out_features, in1_features, in2_features), but got "
                           f"size {list(weight.shape)}")
    if bias is not None and (bias.ndim == 0 or bias.shape[0] != weight.shape[0]):
        got = bias.shape[0] if bias.ndim else 1
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {got} but expected "
                           f"{weight.shape[0]}")


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o], as
    ``torch.nn.functional.bilinear``.

    Args:
        input1: (*, in1_features). input2: (*, in2_features), the same leading dims.
        weight: (out_features, in1_features, in2_features). bias: (out_features,) or None.

    Raises:
        TypeError: a non-tensor operand.
        RuntimeError: inputs of different ranks or leading sizes, feature sizes that do not
            match the weight's, a bias of the wrong size (PyTorch's messages).
    """
    x1, x2 = tensor_arg(input1, "bilinear", "input1"), tensor_arg(input2, "bilinear", "input2")
    w = tensor_arg(weight, "bilinear", "weight")
    b = None if bias is None else tensor_arg(bias, "bilinear", "bias")
    _check_shapes(x1, x2, w, b)
    lead = tuple(x1.shape[:-1])
    rows = math.prod(lead)
    out_features, in1, in2 = w.shape
    left = ops.matmul(x1.reshape(rows, in1), w.permute(1, 0, 2).reshape(in1, out_features * in2))
    y = ops.sum(left.reshape(rows, out_features, in2) * x2.reshape(rows, 1, in2), 2)
    if b is not None:
        y = y + b
    return y.reshape(*lead, out_features)
