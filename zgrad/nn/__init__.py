"""``zgrad.nn``: modules, layers and (in ``functional``) stateless ops."""

from zgrad.nn import functional
from zgrad.nn.layers import Linear, ReLU, Sequential, Sigmoid, Tanh
from zgrad.nn.module import Module, Parameter

__all__ = ["Linear", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional"]
