"""``local_response_norm`` of ``zgrad.nn.functional``: each element divided by
(k + alpha * mean of the squares over ``size`` neighbouring channels) ** beta, as PyTorch's
(the window is zero-padded: size // 2 channels before, (size - 1) // 2 after, and the mean
divides by ``size``). Composed of padding, slices and pointwise ops."""

from __future__ import annotations

from typing import Any

from zgrad.ops._args import tensor_arg
from zgrad.ops.padding import pad

__all__ = ["local_response_norm"]


def local_response_norm(input: Any, size: int, alpha: float = 1e-4, beta: float = 0.75,  # noqa: A002
                        k: float = 1.0) -> Any:
    """Local response normalization across the channels (dim 1) of a (N, C, ...) input, as
    ``torch.nn.functional.local_response_norm``.

    Raises:
        TypeError: a non-tensor input.
        ValueError: an input of fewer than 3 dims (PyTorch's message).
    """
    x = tensor_arg(input, "local_response_norm", "input")
    if x.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {x.ndim} "
                         f"dimensions)")
    if x.numel() == 0:
        return x
    channels = x.shape[1]
    squares = pad(x * x, [0, 0] * (x.ndim - 2) + [size // 2, (size - 1) // 2])
    total = squares.narrow(1, 0, channels)
    for start in range(1, size):  # one slice per window offset: ``size`` pointwise adds
        total = total + squares.narrow(1, start, channels)
    return x / ((total / size) * alpha + k) ** beta
