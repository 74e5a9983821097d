"""``Bilinear``: y = x1^T A x2 + b, as ``torch.nn.Bilinear`` (parameters, initialization,
repr), over :func:`zgrad.nn.functional.bilinear`."""

from __future__ import annotations

import math
from typing import Any

from zgrad.creation import empty
from zgrad.nn import init
from zgrad.nn.module import Module, Parameter
from zgrad.ops.bilinear import bilinear

__all__ = ["Bilinear"]


class Bilinear(Module):
    """y = x1^T A x2 + b over (*, in1_features) and (*, in2_features) inputs: weight
    (out_features, in1_features, in2_features) and bias (out_features,), both initialized
    U(-1/sqrt(in1_features), 1/sqrt(in1_features)) as PyTorch's; the parameters have ``dtype``
    (None: the default dtype) and live on ``device``."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(empty(out_features, in1_features, in2_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the weight and the bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Any, input2: Any) -> Any:
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
