"""Layers: ``Linear``, ``Identity``, ``Flatten``, ``Unflatten`` and the activations ``ReLU``, ``Tanh``, ``Sigmoid``."""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.creation import empty
from zgrad.nn import init
from zgrad.nn.module import Module, Parameter

__all__ = ["Linear", "NonDynamicallyQuantizableLinear", "Identity", "Flatten", "Unflatten", "ReLU", "Tanh", "Sigmoid"]


class Linear(Module):
    """y = x @ weight.T + bias, initialized like PyTorch: ``kaiming_uniform_(weight, a=sqrt(5))``,
    which is U(-1/sqrt(in), 1/sqrt(in)), and the same bound for the bias; the parameters have
    ``dtype`` (None: the default dtype) and live on ``device``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, x: Any) -> Any:
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """:class:`Linear` under PyTorch's name for ``MultiheadAttention.out_proj`` (which PyTorch
    keeps out of dynamic quantization); the same computation and parameters."""


class Identity(Module):
    """Returns its input; takes (and ignores) any constructor arguments, as PyTorch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class Flatten(Module):
    """Merges dimensions ``start_dim`` to ``end_dim`` (by default all but the batch dimension)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Any) -> Any:
        return ops.flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dimension ``dim`` into ``unflattened_size`` (whose product is its size; one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"unflattened_size must be tuple or list, but found type {type(unflattened_size).__name__}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Any) -> Any:  # noqa: A002 - torch's name
        dim = self.dim % input.ndim
        return ops.reshape(input, (*input.shape[:dim], *self.unflattened_size, *input.shape[dim + 1:]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class ReLU(Module):
    """max(x, 0). With ``inplace=True`` it overwrites its input (``x.relu_()``), under PyTorch's
    in-place rules: an error on a leaf that requires grad, recorded in the graph otherwise."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Any) -> Any:
        return x.relu_() if self.inplace else ops.relu(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return ops.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return ops.sigmoid(x)
