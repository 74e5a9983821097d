"""Layers: ``Linear``, activations, ``Sequential``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import ops
from zgrad.nn.module import Module, Parameter
from zgrad.random import default_generator

__all__ = ["Linear", "ReLU", "Tanh", "Sigmoid", "Sequential"]


def _uniform(shape: tuple[int, ...], bound: float, dtype: Any) -> np.ndarray:
    return default_generator().uniform(-bound, bound, size=shape).astype(dtype)


class Linear(Module):
    """y = x @ weight.T + bias, initialized like PyTorch: U(-1/sqrt(in), 1/sqrt(in)) for both.

    (PyTorch's kaiming_uniform_ with a=sqrt(5) on the weight reduces to exactly that bound.)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: Any = np.float32) -> None:
        super().__init__()
        if in_features <= 0 or out_features <= 0:
            raise ValueError(f"Linear needs positive sizes, got in_features={in_features}, out_features={out_features}")
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Parameter(_uniform((out_features, in_features), bound, dtype))
        self.bias = Parameter(_uniform((out_features,), bound, dtype)) if bias else None

    def forward(self, x: Any) -> Any:
        return ops.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x: Any) -> Any:
        return ops.relu(x)


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return ops.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return ops.sigmoid(x)


class Sequential(Module):
    """Modules applied one after the other."""

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential expects Modules, got {type(m).__name__} at position {i}")
            self.add_module(str(i), m)

    def __getitem__(self, index: int) -> Module:
        return list(self._modules.values())[index]

    def __len__(self) -> int:
        return len(self._modules)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x
