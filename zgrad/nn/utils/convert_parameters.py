"""``parameters_to_vector`` and ``vector_to_parameters``, as ``torch.nn.utils.convert_parameters``."""

from __future__ import annotations

from typing import Iterable

from zgrad.ops import cat
from zgrad.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _same_device(parameters: Iterable[Tensor]) -> Iterable[Tensor]:
    """``parameters``, checked one by one to be on the first one's device.

    Raises:
        TypeError: two parameters on different devices (PyTorch's message).
    """
    device = None
    for param in parameters:
        if device is None:
            device = param.device
        elif param.device != device:
            raise TypeError("Found two parameters on different devices, this is currently not supported.")
        yield param


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and joined into one 1-D tensor (a copy, differentiable)."""
    return cat([param.view(-1) for param in _same_device(parameters)])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter, in order, hold the next slice of ``vec`` reshaped to its shape: the
    parameters become views of ``vec``'s memory, as in PyTorch.

    Raises:
        TypeError: ``vec`` is not a tensor, or the parameters are on different devices.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected zgrad.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for param in _same_device(parameters):
        count = param.numel()
        param.data = vec[pointer:pointer + count].view_as(param).data
        pointer += count
