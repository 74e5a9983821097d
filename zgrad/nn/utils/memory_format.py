"""``zgrad.nn.utils.memory_format``: ``convert_conv2d_weight_memory_format`` and
``convert_conv3d_weight_memory_format``, as ``torch.nn.utils.memory_format``.

PyTorch re-lays the weights of its convolutions out in a memory format (channels-last kernels
are faster in cuDNN). zgrad keeps parameters C-contiguous, as :meth:`Module.to` with
``memory_format`` does (its optimizers update contiguous parameters, and a layout changes no
result): these functions check the format against each convolution weight's rank, as PyTorch's
``clone(memory_format=...)`` does, and leave the weights as they are.
"""

from __future__ import annotations

from typing import Any, TypeVar

from zgrad.memory_formats import dim_order
from zgrad.nn.conv import Conv2d, ConvTranspose2d
from zgrad.nn.module import Module
from zgrad.nn.three_dimensional import Conv3d, ConvTranspose3d

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]

M = TypeVar("M", bound=Module)


def _convert(module: M, memory_format: Any, classes: tuple[type, ...]) -> M:
    for sub in module.modules():
        if isinstance(sub, classes):
            dim_order(memory_format, sub.weight.ndim)
    return module


def convert_conv2d_weight_memory_format(module: M, memory_format: Any) -> M:
    """"Convert" the weight of every ``Conv2d`` and ``ConvTranspose2d`` in ``module`` (itself
    included) to ``memory_format``: the format is checked and the weights stay C-contiguous (see
    the module docstring); returns ``module``.

    Args:
        module: a ``Conv2d`` / ``ConvTranspose2d`` or a module containing some.
        memory_format: e.g. ``zgrad.channels_last`` or ``zgrad.contiguous_format``.

    Raises:
        RuntimeError: ``zgrad.channels_last_3d`` (a 4-D weight has no such layout; PyTorch's message)
            or ``zgrad.preserve_format``, when ``module`` holds such a convolution.
        TypeError: ``memory_format`` is not a ``zgrad.memory_format``.
    """
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module: M, memory_format: Any) -> M:
    """"Convert" the weight of every ``Conv3d`` and ``ConvTranspose3d`` in ``module`` (itself
    included) to ``memory_format``: the format is checked and the weights stay C-contiguous (see
    the module docstring); returns ``module``.

    Args:
        module: a ``Conv3d`` / ``ConvTranspose3d`` or a module containing some.
        memory_format: e.g. ``zgrad.channels_last_3d`` or ``zgrad.contiguous_format``.

    Raises:
        RuntimeError: ``zgrad.channels_last`` (a 5-D weight has no such layout; PyTorch's message)
            or ``zgrad.preserve_format``, when ``module`` holds such a convolution.
        TypeError: ``memory_format`` is not a ``zgrad.memory_format``.
    """
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
