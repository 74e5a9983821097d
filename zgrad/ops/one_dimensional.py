"""The 1-D convolutions and poolings (``conv1d``, ``conv_transpose1d``, ``max_pool1d``,
``avg_pool1d``, ``adaptive_avg_pool1d``) as PyTorch's, run as their 2-D forms over an inserted
height of 1: (N, C, L) is (N, C, 1, L), a kernel k is (1, k), a padding p is (0, p). The 2-D ops
bring their gradients, backends and checks; a max-pooling index on one row is the 1-D position.
"""

from __future__ import annotations

from typing import Any

from zgrad.ops.conv import conv2d_layer
from zgrad.ops.conv_transpose import conv_transpose2d_layer
from zgrad.ops.pool import adaptive_avg_pool2d_layer, avg_pool2d_layer, max_pool2d_layer
from zgrad.ops._args import tensor_arg

__all__ = ["single", "widened", "conv1d_layer", "conv1d", "conv_transpose1d_layer", "conv_transpose1d",
           "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d"]


def single(value: Any, what: str) -> tuple[int]:
    """An int or a 1-sequence as PyTorch's ``_single``: a 1-tuple.

    Raises:
        ValueError: a sequence of another length.
    """
    if isinstance(value, int):
        return (value,)
    value = tuple(value)
    if len(value) != 1:
        raise ValueError(f"{what} must be an int or a 1-element tuple, got {value}")
    return (int(value[0]),)


def widened(value: Any, what: str, fill: int) -> Any:
    """A 1-D window argument as the 2-D one over a height of 1: ``(fill, value)``; strings
    ('same', 'valid') and None as they are."""
    if value is None or isinstance(value, str):
        return value
    return (fill, single(value, what)[0])


def _rows(name: str, input: Any) -> Any:  # noqa: A002
    """(N, C, L) or (C, L) input with a height of 1 inserted.

    Raises:
        RuntimeError: another rank (PyTorch's message).
    """
    x = tensor_arg(input, name, "input")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D (unbatched) or 3D (batched) input to {name}, but got input of size: "
                           f"{list(x.shape)}")
    return x.unsqueeze(-2)


def _kernel_rows(name: str, weight: Any) -> Any:
    w = tensor_arg(weight, name, "weight")
    if w.ndim != 3:
        raise RuntimeError(f"{name}: weight should be 3-D (out_channels, in_channels / groups, kernel), but got "
                           f"size {list(w.shape)}")
    return w.unsqueeze(-2)


def conv1d_layer(name: object, input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, padding_mode: str = "zeros") -> Any:
    """:func:`conv1d` with ``padding_mode`` and error messages that start with ``name``."""
    out = conv2d_layer(name, _rows("conv1d", input), _kernel_rows("conv1d", weight), bias,
                       widened(stride, "stride", 1), widened(padding, "padding", 0), widened(dilation, "dilation", 1),
                       groups, padding_mode)
    return out.squeeze(-2)


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,  # noqa: A002
           dilation: Any = 1, groups: int = 1) -> Any:
    """1-D convolution over (N, C, L) or (C, L) input, as ``torch.nn.functional.conv1d``.

    Args:
        weight: (out_channels, C / groups, k).
        stride, dilation: an int (or a 1-tuple), > 0.
        padding: an int, ``'valid'`` or ``'same'``.
        groups: input and output channels are split into this many groups.

    Raises:
        RuntimeError: wrong ranks, channel counts or windows (as :func:`conv2d`).
    """
    return conv1d_layer("conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d_layer(name: object, input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                           padding: Any = 0, output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """:func:`conv_transpose1d` with error messages that start with ``name``."""
    out = conv_transpose2d_layer(name, _rows("conv_transpose1d", input), _kernel_rows("conv_transpose1d", weight),
                                 bias, widened(stride, "stride", 1), widened(padding, "padding", 0),
                                 widened(output_padding, "output_padding", 0), groups, widened(dilation, "dilation", 1))
    return out.squeeze(-2)


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,  # noqa: A002
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """1-D transposed convolution, as ``torch.nn.functional.conv_transpose1d``; ``weight`` is
    (in_channels, out_channels / groups, k).

    Raises:
        RuntimeError: wrong ranks, channel counts or windows (as :func:`conv_transpose2d`).
    """
    return conv_transpose1d_layer("conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups,
                                  dilation)


def max_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,  # noqa: A002
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Max pooling over (N, C, L) or (C, L) input, as ``torch.nn.functional.max_pool1d``; with
    ``return_indices`` also the int64 position of each maximum.

    Raises:
        RuntimeError: wrong rank, a window larger than the padded input, bad window arguments.
    """
    stride = None if stride is None or stride == [] or stride == () else stride
    out = max_pool2d_layer("max_pool1d", _rows("max_pool1d", input), widened(kernel_size, "kernel_size", 1),
                           widened(stride, "stride", 1), widened(padding, "padding", 0),
                           widened(dilation, "dilation", 1), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,  # noqa: A002
               count_include_pad: bool = True) -> Any:
    """Average pooling over (N, C, L) or (C, L) input, as ``torch.nn.functional.avg_pool1d``.

    Raises:
        RuntimeError: wrong rank, a window larger than the padded input, bad window arguments.
    """
    stride = None if stride is None or stride == [] or stride == () else stride
    return avg_pool2d_layer("avg_pool1d", _rows("avg_pool1d", input), widened(kernel_size, "kernel_size", 1),
                            widened(stride, "stride", 1), widened(padding, "padding", 0), ceil_mode,
                            count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average pooling to ``output_size`` positions over (N, C, L) or (C, L) input, as
    ``torch.nn.functional.adaptive_avg_pool1d``.

    Raises:
        RuntimeError: wrong rank or a bad output size.
    """
    return adaptive_avg_pool2d_layer("adaptive_avg_pool1d", _rows("adaptive_avg_pool1d", input),
                                     (1, single(output_size, "output_size")[0])).squeeze(-2)
